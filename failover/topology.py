"""The sites and links a failover command works on, from ``appliance.json`` or a TOML file.

Two formats are read (``load_topology`` tells them apart by the file's suffix):

* the ``appliance.json`` that ``strait up`` writes (``.strait/appliance.json`` by default), as it
  is: ``sites.<name>.bootstrap``, ``.zookeeper`` plus ``.zookeeper_chroot``, ``.admin`` (the nodes'
  admin URLs), optionally ``.zookeeper_digest_file``; ``links[]`` with ``name``, ``source``,
  ``target``, ``admin`` (the mirror's admin URL) and optionally ``token_file`` (else
  ``<appliance dir>/mirror/admin.token``, where ``strait up`` keeps it);
* a TOML file for real sites (documented in docs/failover.md)::

      [sites.east]
      bootstrap = "10.0.0.1:9092,10.0.0.2:9092"
      zookeeper = "10.0.0.1:2181,10.0.0.2:2181/east"     # with the sites' chroot
      node_admin = ["http://10.0.0.1:8091"]                # optional

      [sites.west]
      bootstrap = "10.1.0.1:9092"
      zookeeper = "10.1.0.1:2181/west"
      zookeeper_digest_file = "/etc/strait/west-zk.digest"   # optional: a secured ZooKeeper

      [[link]]
      name = "east-to-west"            # the mirror link's name
      source = "east"
      target = "west"
      mirror_admin = "http://10.1.0.5:8090"
      token_file = "/etc/strait/mirror.token"   # relative paths are relative to this file

A site whose listeners are secured takes ``tls`` and ``sasl``, in the shapes of a mirror link's
site table (docs/mirror.md): ``tls = { ca = "east-ca.pem" }`` (also ``cert``, ``key``,
``check_hostname``; ``true``: the system's CAs), ``sasl = { mechanism = "SCRAM-SHA-512",
username = "ops", password_file = "ops.pw" }``; relative paths are relative to the topology
file. The commands then reach the site's nodes over TLS and authenticate as that user, who
needs what a failover does (ALTER_CONFIGS and DESCRIBE on the topics, ALTER on the cluster for
TruncatePartitions): a super user, typically. ``appliance.json`` carries the same objects for a
secured appliance (``strait up --secure``: the CA and its ``admin`` user).

``zookeeper_digest_file`` is for a site whose nodes secure their ZooKeeper
(``zookeeper.set.acl=true``): a file holding the nodes' credential, one line ``user:password``
(the format of their ``strait.zookeeper.digest.file``; a relative path is relative to the
topology file). The commands then authenticate with it and give the znodes they create the
site's secured ACL (the credential may do everything, the world may only read). The file is
read when the topology is loaded, so a missing file or a malformed line is refused there.

Every problem is a :class:`~failover.errors.TopologyError` naming the file and the key (never
a password).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror import MirrorError, SaslConfig, TlsConfig, parse_sasl, parse_tls
from node.zkkit import ZkDigest, read_digest_file

from .errors import TopologyError

DEFAULT_TOPOLOGY = Path(".strait") / "appliance.json"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_SITE_KEYS = ("bootstrap", "zookeeper", "zookeeper_digest_file", "node_admin", "tls", "sasl")
_DIGEST_KEY = "zookeeper_digest_file"
_LINK_KEYS = ("name", "source", "target", "mirror_admin", "token_file")


@dataclass(frozen=True)
class Site:
    """One datacenter: where its clients connect and where its ZooKeeper (with chroot) is, and
    the file with the credential of that ZooKeeper when the site secures it."""

    name: str
    bootstrap: str  # "host:port,host:port"
    zookeeper: str  # "host:port,host:port/chroot"
    node_admin: tuple[str, ...] = ()
    zookeeper_digest_file: Path | None = None  # one line user:password; None: connect anonymously
    tls: TlsConfig | None = None  # TLS to the site's nodes; None: PLAINTEXT
    sasl: SaslConfig | None = None  # SASL to the site's nodes; None: no authentication

    def client_security(self) -> dict[str, Any]:
        """``node.client.SiteClient``'s ``ssl_context`` and ``sasl`` keywords for this site (the
        password read now). Raises TopologyError naming the site when a file cannot be used."""
        out: dict[str, Any] = {}
        try:
            if self.tls is not None:
                out["ssl_context"] = self.tls.context()
            if self.sasl is not None:
                out["sasl"] = self.sasl.credentials()
        except MirrorError as exc:
            raise TopologyError(f"site {self.name}: {exc}") from None
        return out

    def zookeeper_digest(self) -> ZkDigest | None:
        """The credential in :attr:`zookeeper_digest_file`, read now; None without one.

        Raises:
            TopologyError: the file cannot be read or is not one line ``user:password`` (naming
                the site, the key and the file; never its content).
        """
        if self.zookeeper_digest_file is None:
            return None
        return _read_digest(self.zookeeper_digest_file, f"site {self.name}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bootstrap": self.bootstrap,
            "zookeeper": self.zookeeper,
            "zookeeper_digest_file": None if self.zookeeper_digest_file is None else str(self.zookeeper_digest_file),
            "node_admin": list(self.node_admin),
            "tls": None if self.tls is None else self.tls.to_dict(),
            "sasl": None if self.sasl is None else self.sasl.to_dict(),
        }


@dataclass(frozen=True)
class Link:
    """A mirror link between two sites of the topology, and how to reach the mirror running it."""

    name: str
    source: str
    target: str
    mirror_admin: str
    token_file: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "mirror_admin": self.mirror_admin,
            "token_file": None if self.token_file is None else str(self.token_file),
        }


@dataclass(frozen=True)
class Topology:
    sites: Mapping[str, Site]
    links: Mapping[str, Link]
    origin: str = "<topology>"

    def link(self, name: str) -> Link:
        """The link called ``name``; TopologyError naming the links there are."""
        try:
            return self.links[name]
        except KeyError:
            known = ", ".join(sorted(self.links)) or "none"
            raise TopologyError(f"{self.origin}: no link {name!r} (links: {known})") from None

    def site(self, name: str) -> Site:
        """The site called ``name``; TopologyError naming the sites there are."""
        try:
            return self.sites[name]
        except KeyError:
            known = ", ".join(sorted(self.sites)) or "none"
            raise TopologyError(f"{self.origin}: no site {name!r} (sites: {known})") from None

    def links_from(self, site: str) -> list[Link]:
        """The links whose source is ``site``."""
        return [link for link in self.links.values() if link.source == site]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sites": {name: site.to_dict() for name, site in self.sites.items()},
            "links": [link.to_dict() for link in self.links.values()],
        }


def load_topology(path: str | Path = DEFAULT_TOPOLOGY) -> Topology:
    """Read ``path``: JSON (``strait up``'s appliance.json) when it ends in ``.json``, else TOML.

    Raises:
        TopologyError: the file is missing or unreadable, not valid JSON/TOML, or a key is
            missing, unknown or malformed (the message names the file and the key).
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        hint = (
            " (is `strait up` running? it writes that file once both sites are ready)" if file.suffix == ".json" else ""
        )
        raise TopologyError(f"{file}: no such topology file{hint}") from None
    except OSError as exc:
        raise TopologyError(f"{file}: cannot read the topology: {exc.strerror or exc}") from None
    if file.suffix == ".json":
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TopologyError(f"{file}: not valid JSON: {exc}") from None
        return parse_appliance(data, origin=str(file), directory=file.absolute().parent)
    try:
        document = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TopologyError(f"{file}: not valid TOML: {exc}") from None
    return parse_toml(document, origin=str(file), directory=file.absolute().parent)


def parse_appliance(data: Any, *, origin: str, directory: Path) -> Topology:
    """The topology of a ``strait up`` appliance.json (see the module docstring)."""
    if not isinstance(data, dict):
        raise TopologyError(f"{origin}: expected a JSON object, got {type(data).__name__}")
    sites: dict[str, Site] = {}
    for name, entry in _table(data, "sites", origin).items():
        where = f"{origin}: sites.{name}"
        _check_name(name, where)
        if not isinstance(entry, dict):
            raise TopologyError(f"{where}: expected an object")
        chroot = entry.get("zookeeper_chroot", "")
        if not isinstance(chroot, str) or (chroot and not chroot.startswith("/")):
            raise TopologyError(f"{where}.zookeeper_chroot: {chroot!r} is not a path starting with '/'")
        digest_file = _digest_file(entry, where, directory)
        sites[name] = Site(
            name=name,
            bootstrap=_string(entry, "bootstrap", where),
            zookeeper=_string(entry, "zookeeper", where) + chroot,
            node_admin=_urls(entry.get("admin", []), f"{where}.admin"),
            zookeeper_digest_file=digest_file,
            tls=_tls(entry, where, directory),
            sasl=_sasl(entry, where, directory),
        )
    raw_links = data.get("links", [])
    if not isinstance(raw_links, list):
        raise TopologyError(f"{origin}: links: expected a list")
    links: dict[str, Link] = {}
    for index, entry in enumerate(raw_links):
        where = f"{origin}: links[{index}]"
        if not isinstance(entry, dict):
            raise TopologyError(f"{where}: expected an object")
        token = entry.get("token_file")
        token_file = (
            directory / "mirror" / "admin.token" if token is None else _path(token, f"{where}.token_file", directory)
        )
        link = Link(
            name=_check_name(_string(entry, "name", where), f"{where}.name"),
            source=_string(entry, "source", where),
            target=_string(entry, "target", where),
            mirror_admin=_url(_string(entry, "admin", where), f"{where}.admin"),
            token_file=token_file,
        )
        _add_link(links, link, sites, where)
    return Topology(sites=sites, links=links, origin=origin)


def parse_toml(data: Mapping[str, Any], *, origin: str, directory: Path) -> Topology:
    """The topology of a TOML document (see the module docstring)."""
    _refuse_unknown(data, ("sites", "link"), f"{origin}: top level")
    sites: dict[str, Site] = {}
    for name, entry in _table(data, "sites", origin).items():
        where = f"{origin}: sites.{name}"
        _check_name(name, where)
        if not isinstance(entry, dict):
            raise TopologyError(f"{where}: expected a table")
        _refuse_unknown(entry, _SITE_KEYS, where)
        digest_file = _digest_file(entry, where, directory)
        sites[name] = Site(
            name=name,
            bootstrap=_string(entry, "bootstrap", where),
            zookeeper=_string(entry, "zookeeper", where),
            node_admin=_urls(entry.get("node_admin", []), f"{where}.node_admin"),
            zookeeper_digest_file=digest_file,
            tls=_tls(entry, where, directory),
            sasl=_sasl(entry, where, directory),
        )
    raw_links = data.get("link", [])
    if not isinstance(raw_links, list) or not all(isinstance(t, dict) for t in raw_links):
        raise TopologyError(f"{origin}: 'link' must be an array of tables ([[link]])")
    links: dict[str, Link] = {}
    for index, entry in enumerate(raw_links, start=1):
        name = entry.get("name")
        where = f"{origin}: link {name!r}" if isinstance(name, str) and name else f"{origin}: link #{index}"
        _refuse_unknown(entry, _LINK_KEYS, where)
        token = entry.get("token_file")
        link = Link(
            name=_check_name(_string(entry, "name", where), f"{where}: name"),
            source=_string(entry, "source", where),
            target=_string(entry, "target", where),
            mirror_admin=_url(_string(entry, "mirror_admin", where), f"{where}: mirror_admin"),
            token_file=None if token is None else _path(token, f"{where}: token_file", directory),
        )
        _add_link(links, link, sites, where)
    return Topology(sites=sites, links=links, origin=origin)


def _add_link(links: dict[str, Link], link: Link, sites: Mapping[str, Site], where: str) -> None:
    for end in ("source", "target"):
        site = getattr(link, end)
        if site not in sites:
            known = ", ".join(sorted(sites)) or "none"
            raise TopologyError(f"{where}: {end}: no site {site!r} in the topology (sites: {known})")
    if link.source == link.target:
        raise TopologyError(f"{where}: target: the source and the target are the same site {link.source!r}")
    if link.name in links:
        raise TopologyError(f"{where}: name: link {link.name!r} is defined more than once")
    links[link.name] = link


def _table(data: Mapping[str, Any], key: str, origin: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict) or not value:
        raise TopologyError(f"{origin}: {key}: missing or empty (a table of sites by name)")
    return value


def _string(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if value is None:
        raise TopologyError(f"{where}: {key}: missing")
    if not isinstance(value, str) or not value.strip():
        raise TopologyError(f"{where}: {key}: {value!r} is not a non-empty string")
    return value.strip()


def _check_name(name: str, where: str) -> str:
    if not _NAME.fullmatch(name):
        raise TopologyError(f"{where}: {name!r} is not a name (1-249 characters of A-Z a-z 0-9 . _ -)")
    return name


def _url(value: str, where: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise TopologyError(f"{where}: {value!r} is not an http:// or https:// URL")
    return value.rstrip("/")


def _urls(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TopologyError(f"{where}: expected a list of URLs, got {value!r}")
    return tuple(_url(v, f"{where}[{i}]") for i, v in enumerate(value))


def _path(value: Any, where: str, directory: Path) -> Path:
    if not isinstance(value, str) or not value:
        raise TopologyError(f"{where}: {value!r} is not a path")
    path = Path(value)
    return path if path.is_absolute() else directory / path


def _relative_files(value: Any, keys: tuple[str, ...], directory: Path) -> Any:
    """``value`` (a table) with its relative file paths under ``keys`` made relative to ``directory``."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for key in keys:
        path = out.get(key)
        if isinstance(path, str) and path and not Path(path).is_absolute():
            out[key] = str(directory / path)
    return out


def _tls(entry: Mapping[str, Any], where: str, directory: Path) -> TlsConfig | None:
    if entry.get("tls") is None:
        return None
    try:
        return parse_tls(_relative_files(entry["tls"], ("ca", "cert", "key"), directory), where, "tls")
    except MirrorError as exc:
        raise TopologyError(str(exc)) from None


def _sasl(entry: Mapping[str, Any], where: str, directory: Path) -> SaslConfig | None:
    if entry.get("sasl") is None:
        return None
    try:
        return parse_sasl(_relative_files(entry["sasl"], ("password_file",), directory), where, "sasl")
    except MirrorError as exc:
        raise TopologyError(str(exc)) from None


def _digest_file(entry: Mapping[str, Any], where: str, directory: Path) -> Path | None:
    """The site's ``zookeeper_digest_file`` (None without one), checked by reading it now."""
    if _DIGEST_KEY not in entry:
        return None
    if "zookeeper" not in entry:
        raise TopologyError(f"{where}: {_DIGEST_KEY}: needs zookeeper (the ZooKeeper it authenticates to)")
    path = _path(entry[_DIGEST_KEY], f"{where}: {_DIGEST_KEY}", directory)
    _read_digest(path, where)
    return path


def _read_digest(path: Path, where: str) -> ZkDigest:
    try:
        return read_digest_file(path)
    except (OSError, ValueError) as exc:
        # read_digest_file's ValueError quotes nothing of the file; an OSError's strerror names no content.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TopologyError(f"{where}: {_DIGEST_KEY}: {str(path)!r}: {reason}") from None


def _refuse_unknown(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in known:
            raise TopologyError(f"{where}: unknown key {key!r} (known: {', '.join(known)})")
