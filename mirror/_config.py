"""Link configuration: which site is copied to which, which topics and groups, and how.

Links are read from a TOML file (Python's ``tomllib``), one ``[[link]]`` table per link::

    [[link]]
    name = "east-to-west"                  # 1-249 of [A-Za-z0-9._-]: the mirror topics' strait.mirror.link
    mode = "offset-preserving"             # or "mm2" (not built yet: refused at start)
    sync_interval_s = 5                    # topic discovery and config sync; 0 < s <= 10
    group_sync_interval_s = 5              # group offset sync; > 0
    source = { name = "east", bootstrap = "10.0.0.1:9092,10.0.0.2:9092", tls = { ca = "ca.pem" },
               sasl = { mechanism = "SCRAM-SHA-512", username = "mirror", password_file = "mirror.pw" } }
    target = { name = "west", bootstrap = ["10.1.0.1:9092"], zookeeper = "10.1.0.1:2181/west",
               zookeeper_digest_file = "west-zk.digest" }   # optional: one line user:password
    topics = { include = ["orders.*"], exclude = ["orders-private"] }
    groups = { include = [".*"], exclude = [] }
    sync_acls = true                       # copy topic, group and transactional-id ACLs (default true)
    sync_users = false                     # copy SCRAM credentials; needs both sites' zookeeper (default false)
    fetch_max_bytes = 8388608              # the largest fetch of one partition (64 KiB - 64 MiB; default 8 MiB)
    pipeline_fetches = 4                   # fetched chunks that may wait for their append, per partition (1-16)

Patterns are Python regular expressions that must match the *whole* name. ``include``
defaults to everything, ``exclude`` to nothing; a name is selected when some include pattern
matches and no exclude pattern does. Topics whose names start with ``__`` (Kafka's internal
topics such as ``__consumer_offsets``) are never mirrored, whatever the patterns say.

``sync_acls`` and ``sync_users`` keep the target's ACLs and SCRAM credentials those of the source
(``mirror._security_sync`` says what is copied and what the link owns).

``fetch_max_bytes`` and ``pipeline_fetches`` shape each partition copier over a WAN
(``mirror._copier``): fetches are sized by the measured rate x round trip up to ``fetch_max_bytes``,
and up to ``pipeline_fetches`` fetched chunks wait for the append in flight. A copier holds at most
about (``pipeline_fetches`` + 2) x ``fetch_max_bytes`` of records (only while it catches up).

Every problem is a ``ConfigError`` whose message names the file, the link and the key; an
unknown key is refused with the closest known key as a suggestion.
"""

from __future__ import annotations

import difflib
import os
import re
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.client import SaslCredentials
from node.zkkit import ZkDigest, read_digest_file

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

OFFSET_PRESERVING = "offset-preserving"
MM2 = "mm2"
MODES = (OFFSET_PRESERVING, MM2)
DEFAULT_SYNC_INTERVAL_S = 5.0
MAX_SYNC_INTERVAL_S = 10.0  # new source topics must be mirrored within 10 s
DEFAULT_GROUP_SYNC_INTERVAL_S = 5.0
MIB = 1024 * 1024
DEFAULT_FETCH_MAX_BYTES = 8 * MIB  # the largest fetch of one partition; sized below it by rate x RTT
MIN_FETCH_MAX_BYTES = 64 * 1024
MAX_FETCH_MAX_BYTES = 64 * MIB  # an append joins up to this much: well below socket.request.max.bytes (100 MiB)
DEFAULT_PIPELINE_FETCHES = 4  # fetched chunks that may wait for the appender, per partition (2 left the
# target idle between appends over 50 ms of WAN: bench/mirror_bench.py, catch-up ratio 0.84 -> 0.94)
MAX_PIPELINE_FETCHES = 16
MAX_NAME = 249
_LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]+")
_INTERNAL_PREFIX = "__"

_LINK_KEYS = (
    "name", "mode", "source", "target", "topics", "groups", "sync_interval_s", "group_sync_interval_s",
    "sync_acls", "sync_users", "fetch_max_bytes", "pipeline_fetches",
)  # fmt: skip
_SITE_KEYS = ("name", "bootstrap", "zookeeper", "zookeeper_digest_file", "tls", "sasl")
_SASL_KEYS = ("mechanism", "username", "password_file")
_REQUIRED_SITE_KEYS = ("name", "bootstrap")
_TLS_KEYS = ("ca", "cert", "key", "check_hostname")
_FILTER_KEYS = ("include", "exclude")


class MirrorError(Exception):
    """Base of the mirror service's own errors; the message names the values involved."""


class ConfigError(MirrorError):
    """A link configuration that cannot be used: the message names the file, the link and the key."""


@dataclass(frozen=True)
class TlsConfig:
    """TLS to a site's brokers: CA bundle (None: the system's), optional client certificate and key."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    check_hostname: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"ca": self.ca, "cert": self.cert, "key": self.key, "check_hostname": self.check_hostname}

    def context(self) -> ssl.SSLContext:
        """A client context: verifies the brokers' certificates (TLS 1.2 or later); ConfigError if a file is bad."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca)
            if self.cert is not None:
                ctx.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"TLS files {self.to_dict()}: {exc}") from None
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.check_hostname
        return ctx


@dataclass(frozen=True)
class SaslConfig:
    """SASL to a site's brokers: the mechanism, the user, and the file holding the password (never
    the password itself in the link file, which status pages and logs may show)."""

    mechanism: str
    username: str
    password_file: str

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "username": self.username, "password_file": self.password_file}

    def credentials(self) -> SaslCredentials:
        """The credentials, with the password read now from its file; ConfigError if it cannot be read."""
        try:
            password = Path(self.password_file).read_text(encoding="utf-8").rstrip("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"sasl.password_file {self.password_file!r}: {exc}") from None
        return SaslCredentials(self.mechanism, self.username, password)


@dataclass(frozen=True)
class SiteRef:
    """One end of a link: the site's name (for logs and status) and its bootstrap addresses.

    ``zookeeper`` (the target's) lets several mirror processes share the link;
    ``zookeeper_digest_file`` (one line ``user:password``) authenticates them to a ZooKeeper whose
    site sets ``zookeeper.set.acl``, and secures the znodes they create the same way; ``tls``
    makes connections to the site's brokers use TLS, ``sasl`` authenticates them.
    """

    name: str
    bootstrap: str  # "host:port,host:port"
    zookeeper: str | None = None  # "host:port,host:port/chroot"
    tls: TlsConfig | None = None
    sasl: SaslConfig | None = None
    zookeeper_digest_file: str | None = None

    def zookeeper_digest(self) -> ZkDigest | None:
        """The credential in ``zookeeper_digest_file``, read now (None without one); ConfigError naming
        the file (never its content) when it cannot be read or is not one line ``user:password``."""
        if self.zookeeper_digest_file is None:
            return None
        try:
            return read_digest_file(self.zookeeper_digest_file)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"zookeeper_digest_file {self.zookeeper_digest_file!r}: {reason}") from None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "bootstrap": self.bootstrap}
        if self.zookeeper is not None:
            out["zookeeper"] = self.zookeeper
        if self.zookeeper_digest_file is not None:
            out["zookeeper_digest_file"] = self.zookeeper_digest_file
        if self.tls is not None:
            out["tls"] = self.tls.to_dict()
        if self.sasl is not None:
            out["sasl"] = self.sasl.to_dict()
        return out


@dataclass(frozen=True)
class NameFilter:
    """Include/exclude regular expressions, each matching a whole name."""

    include: tuple[re.Pattern[str], ...] = (re.compile(".*"),)
    exclude: tuple[re.Pattern[str], ...] = ()

    def matches(self, name: str) -> bool:
        return any(p.fullmatch(name) for p in self.include) and not any(p.fullmatch(name) for p in self.exclude)

    def to_dict(self) -> dict[str, list[str]]:
        return {"include": [p.pattern for p in self.include], "exclude": [p.pattern for p in self.exclude]}


@dataclass(frozen=True)
class LinkConfig:
    name: str
    source: SiteRef
    target: SiteRef
    topics: NameFilter = NameFilter()
    groups: NameFilter = NameFilter()
    mode: str = OFFSET_PRESERVING
    sync_interval_s: float = DEFAULT_SYNC_INTERVAL_S
    group_sync_interval_s: float = DEFAULT_GROUP_SYNC_INTERVAL_S
    sync_acls: bool = True
    sync_users: bool = False
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    pipeline_fetches: int = DEFAULT_PIPELINE_FETCHES

    def mirrors_topic(self, topic: str) -> bool:
        """True when ``topic`` is selected by this link (internal ``__`` topics never are)."""
        return not topic.startswith(_INTERNAL_PREFIX) and self.topics.matches(topic)

    def mirrors_group(self, group: str) -> bool:
        return self.groups.matches(group)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "source": self.source.to_dict(),
            "target": self.target.to_dict(),
            "topics": self.topics.to_dict(),
            "groups": self.groups.to_dict(),
            "sync_interval_s": self.sync_interval_s,
            "group_sync_interval_s": self.group_sync_interval_s,
            "sync_acls": self.sync_acls,
            "sync_users": self.sync_users,
            "fetch_max_bytes": self.fetch_max_bytes,
            "pipeline_fetches": self.pipeline_fetches,
        }


def load_links(path: str | os.PathLike[str]) -> list[LinkConfig]:
    """Read every ``[[link]]`` of a TOML file; raises ConfigError naming the file, link and key."""
    file = Path(path)
    try:
        with file.open("rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the link configuration: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return parse_links(data, origin=str(file))


def parse_links(data: Mapping[str, Any], *, origin: str = "<links>") -> list[LinkConfig]:
    """The links of an already parsed document (``origin`` names it in errors)."""
    _refuse_unknown(data, ("link",), f"{origin}: top level")
    raw = data.get("link", [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(f"{origin}: 'link' must be an array of tables ([[link]])")
    links: list[LinkConfig] = []
    seen: set[str] = set()
    for index, table in enumerate(raw, start=1):
        link = _parse_link(table, origin, index)
        if link.name in seen:
            raise ConfigError(f"{origin}: link {link.name!r}: name: defined more than once")
        seen.add(link.name)
        links.append(link)
    return links


def parse_link(table: Any, *, origin: str) -> LinkConfig:
    """One link definition given outside a file (the admin API's ``PUT /v1/links/{name}``), as a
    table with a ``[[link]]``'s keys; checked exactly like a file's link, with the same messages
    (``origin`` in place of the file's name). Raises ConfigError."""
    if not isinstance(table, dict):
        raise ConfigError(
            f"{origin}: a link must be a table (a JSON object) with the keys of a [[link]], not {table!r}"
        )
    return _parse_link(table, origin, 1)


def _parse_link(table: Mapping[str, Any], origin: str, index: int) -> LinkConfig:
    name = table.get("name")
    where = f"{origin}: link {name!r}" if isinstance(name, str) and name else f"{origin}: link #{index}"
    _refuse_unknown(table, _LINK_KEYS, where)
    if "name" not in table:
        raise ConfigError(f"{where}: name: missing (every link needs a name)")
    checked_name = _check_name(table["name"], where, "name")
    if "source" not in table:
        raise ConfigError(f"{where}: source: missing (a table with name and bootstrap)")
    if "target" not in table:
        raise ConfigError(f"{where}: target: missing (a table with name and bootstrap)")
    source = _parse_site(table["source"], where, "source")
    target = _parse_site(table["target"], where, "target")
    if source.name == target.name:
        raise ConfigError(f"{where}: target.name: the source and the target are the same site {source.name!r}")
    mode = table.get("mode", OFFSET_PRESERVING)
    if mode not in MODES:
        raise ConfigError(f"{where}: mode: {mode!r} is not one of {', '.join(repr(m) for m in MODES)}")
    sync = _seconds(table.get("sync_interval_s", DEFAULT_SYNC_INTERVAL_S), where, "sync_interval_s")
    if sync > MAX_SYNC_INTERVAL_S:
        raise ConfigError(
            f"{where}: sync_interval_s: {sync} is above {MAX_SYNC_INTERVAL_S:g} "
            "(new source topics must be mirrored within 10 s)"
        )
    group_sync = _seconds(
        table.get("group_sync_interval_s", DEFAULT_GROUP_SYNC_INTERVAL_S), where, "group_sync_interval_s"
    )
    sync_acls = _flag(table, "sync_acls", True, where)
    sync_users = _flag(table, "sync_users", False, where)
    if sync_users:
        missing = [f"{key}.zookeeper" for key, site in (("source", source), ("target", target)) if not site.zookeeper]
        if missing:
            raise ConfigError(
                f"{where}: sync_users: needs {' and '.join(missing)} (SCRAM credentials are copied "
                "between the sites' ZooKeepers: no Kafka API discloses them)"
            )
    return LinkConfig(
        name=checked_name,
        source=source,
        target=target,
        topics=_parse_filter(table.get("topics", {}), where, "topics"),
        groups=_parse_filter(table.get("groups", {}), where, "groups"),
        mode=mode,
        sync_interval_s=sync,
        group_sync_interval_s=group_sync,
        sync_acls=sync_acls,
        sync_users=sync_users,
        fetch_max_bytes=_count(
            table, "fetch_max_bytes", DEFAULT_FETCH_MAX_BYTES, MIN_FETCH_MAX_BYTES, MAX_FETCH_MAX_BYTES, "bytes", where
        ),
        pipeline_fetches=_count(
            table, "pipeline_fetches", DEFAULT_PIPELINE_FETCHES, 1, MAX_PIPELINE_FETCHES, "fetched chunks", where
        ),
    )


def _count(table: Mapping[str, Any], key: str, default: int, low: int, high: int, unit: str, where: str) -> int:
    """An integer setting between ``low`` and ``high`` (inclusive); ConfigError naming the key and the range."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: {key}: must be a whole number of {unit}, not {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{where}: {key}: {value} is outside {low}..{high} ({unit})")
    return value


def _flag(table: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: must be true or false, not {value!r}")
    return value


def _parse_site(value: Any, where: str, key: str) -> SiteRef:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: must be a table with name and bootstrap, not {value!r}")
    _refuse_unknown(value, _SITE_KEYS, where, prefix=f"{key}.")
    for required in _REQUIRED_SITE_KEYS:
        if required not in value:
            raise ConfigError(f"{where}: {key}.{required}: missing")
    name = _check_name(value["name"], where, f"{key}.name")
    raw = value["bootstrap"]
    if isinstance(raw, str):
        addresses = [a.strip() for a in raw.split(",") if a.strip()]
    elif isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        addresses = [a.strip() for a in raw if a.strip()]
    else:
        raise ConfigError(f"{where}: {key}.bootstrap: must be 'host:port,...' or a list of 'host:port', not {raw!r}")
    if not addresses:
        raise ConfigError(f"{where}: {key}.bootstrap: no address given")
    for address in addresses:
        if not _is_host_port(address):
            raise ConfigError(f"{where}: {key}.bootstrap: {address!r} is not host:port")
    zookeeper = value.get("zookeeper")
    if zookeeper is not None:
        hosts = zookeeper.partition("/")[0] if isinstance(zookeeper, str) else ""
        if not hosts or not all(_is_host_port(a) for a in hosts.split(",")):
            raise ConfigError(f"{where}: {key}.zookeeper: {zookeeper!r} is not 'host:port,...[/chroot]'")
    digest_file = value.get("zookeeper_digest_file")
    if digest_file is not None:
        if zookeeper is None:
            raise ConfigError(f"{where}: {key}.zookeeper_digest_file: needs {key}.zookeeper")
        if not isinstance(digest_file, str) or not Path(digest_file).is_file():
            raise ConfigError(f"{where}: {key}.zookeeper_digest_file: {digest_file!r} is not a readable file")
    tls = parse_tls(value["tls"], where, f"{key}.tls") if "tls" in value else None
    sasl = parse_sasl(value["sasl"], where, f"{key}.sasl") if "sasl" in value else None
    return SiteRef(name, ",".join(addresses), zookeeper, tls, sasl, digest_file)


def parse_sasl(value: Any, where: str, key: str) -> SaslConfig:
    """``sasl = { mechanism, username, password_file }``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: must be a table (mechanism, username, password_file)")
    _refuse_unknown(value, _SASL_KEYS, where, prefix=f"{key}.")
    for name in _SASL_KEYS:
        if not isinstance(value.get(name), str) or not value[name]:
            raise ConfigError(f"{where}: {key}.{name}: required, a non-empty string")
    if value["mechanism"] not in SASL_MECHANISMS:
        raise ConfigError(
            f"{where}: {key}.mechanism: {value['mechanism']!r} is not one of {', '.join(SASL_MECHANISMS)}"
        )
    if not Path(value["password_file"]).is_file():
        raise ConfigError(f"{where}: {key}.password_file: {value['password_file']!r} is not a readable file")
    return SaslConfig(value["mechanism"], value["username"], value["password_file"])


def _is_host_port(address: str) -> bool:
    host, _, port = address.strip().rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def parse_tls(value: Any, where: str, key: str) -> TlsConfig | None:
    """``tls = true`` (system CAs), ``false`` (no TLS) or a table of ca, cert, key, check_hostname."""
    if value is False:
        return None
    if value is True:
        return TlsConfig()
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: must be true, false or a table (ca, cert, key, check_hostname)")
    _refuse_unknown(value, _TLS_KEYS, where, prefix=f"{key}.")
    files: dict[str, str | None] = {}
    for name in ("ca", "cert", "key"):
        path = value.get(name)
        if path is not None and (not isinstance(path, str) or not path):
            raise ConfigError(f"{where}: {key}.{name}: must be a file path, not {path!r}")
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{where}: {key}.{name}: {path!r} is not a readable file")
        files[name] = path
    if (files["cert"] is None) != (files["key"] is None):
        raise ConfigError(f"{where}: {key}: cert and key go together (a client certificate needs its key)")
    check = value.get("check_hostname", True)
    if not isinstance(check, bool):
        raise ConfigError(f"{where}: {key}.check_hostname: must be true or false, not {check!r}")
    return TlsConfig(files["ca"], files["cert"], files["key"], check)


def _parse_filter(value: Any, where: str, key: str) -> NameFilter:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: must be a table with include and/or exclude, not {value!r}")
    _refuse_unknown(value, _FILTER_KEYS, where, prefix=f"{key}.")
    include = _patterns(value.get("include", [".*"]), where, f"{key}.include")
    exclude = _patterns(value.get("exclude", []), where, f"{key}.exclude")
    return NameFilter(include, exclude)


def _patterns(value: Any, where: str, key: str) -> tuple[re.Pattern[str], ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ConfigError(f"{where}: {key}: must be a list of regular expressions, not {value!r}")
    compiled = []
    for i, pattern in enumerate(value):
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"{where}: {key}[{i}]: {pattern!r} is not a valid regular expression ({exc})") from None
    return tuple(compiled)


def _check_name(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key}: must be a non-empty string, not {value!r}")
    if value in (".", "..") or len(value) > MAX_NAME or not _LEGAL_NAME.fullmatch(value):
        raise ConfigError(
            f"{where}: {key}: {value!r} must be 1-{MAX_NAME} characters of ASCII letters, digits, '.', '_' and '-' "
            "(and not '.' or '..')"
        )
    return value


def _seconds(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{where}: {key}: must be a number of seconds above 0, not {value!r}")
    return float(value)


def _refuse_unknown(table: Mapping[str, Any], known: tuple[str, ...], where: str, *, prefix: str = "") -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
            raise ConfigError(f"{where}: unknown key '{prefix}{key}'{hint}")
