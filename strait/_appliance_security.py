"""``strait up --secure``: the appliance secured end to end, as an operator would deploy it.

What changes against the plain appliance (the addresses stay the same):

- every node listens with ``SASL_SSL`` on its usual port (loopback only), TLS with its own
  certificate from the appliance's CA (see :mod:`strait._secure_material`), SASL with
  SCRAM-SHA-512 or SCRAM-SHA-256; nodes replicate over the same listener as the super user
  ``broker``; the admin HTTP API is served over HTTPS;
- ACLs are enforced (``kafka.security.authorizer.AclAuthorizer``, nothing allowed without an
  ACL), ``admin`` and ``broker`` are super users; the users and ACLs are written into each
  site's ZooKeeper before its nodes start (:mod:`strait._security_bootstrap`);
- ZooKeeper: the nodes authenticate with the site's digest credential and create every znode
  writable by it only (``zookeeper.set.acl``);
- the mirror authenticates to both sites as ``mirror`` over TLS, and to the target's ZooKeeper
  with its digest;
- once ready, ``DIR/client.properties`` (librdkafka's keys, the ``app`` user: ``kcat -F``) and
  ``DIR/admin.properties`` (Java client keys, the ``admin`` user: ``strait acls
  --command-config``) are written, mode 0600.

An appliance directory is secured or not for good (:func:`check_mode`): ZooKeeper's znodes and
the nodes' data are made under one mode, and the other cannot use them.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from node.proc import atomic_write

from ._secure_material import PRIVATE_MODE, MaterialError, SecureMaterial, ensure_material
from ._security_bootstrap import (
    APP_ACLS,
    MIRROR_SOURCE_ACLS,
    MIRROR_TARGET_ACLS,
    SCRAM_MECHANISMS,
    BootstrapError,
    Grant,
    bindings,
    bootstrap_site,
)

SECRETS_DIR = "secrets"
CLIENT_PROPERTIES = "client.properties"
ADMIN_PROPERTIES = "admin.properties"
ADMIN, BROKER, MIRROR, APP = "admin", "broker", "mirror", "app"
USERS = (ADMIN, BROKER, MIRROR, APP)
SUPER_USERS = (BROKER, ADMIN)
PROTOCOL = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# What an appliance directory holds once a site or the mirror ran in it.
_APPLIANCE_PARTS = ("east", "west", "mirror")
#: The server.properties keys a secured site sets on every node (``--set`` may not change them).
SECURED_KEYS = frozenset({
    "inter.broker.listener.name", "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config", "ssl.keystore.type", "ssl.keystore.location", "ssl.truststore.type",
    "ssl.truststore.location", "authorizer.class.name", "allow.everyone.if.no.acl.found", "super.users",
    "zookeeper.set.acl", "strait.zookeeper.digest.file", "strait.admin.ssl.enabled",
    "listener.security.protocol.map",
})  # fmt: skip


class SecurityError(Exception):
    """The secured appliance cannot be set up; the message names the file or the site."""


def check_mode(directory: Path, secure: bool) -> None:
    """Refuse to start ``directory`` secured when it was made plain, or the other way round.

    Raises:
        ValueError: naming the directory, the mode it was made in and what to do.
    """
    directory = directory.absolute()
    secrets = (directory / SECRETS_DIR).exists()
    used = any((directory / part).exists() for part in _APPLIANCE_PARTS)
    if secure and used and not secrets:
        raise ValueError(
            f"{directory} holds an appliance made without --secure; its ZooKeeper and nodes cannot be secured "
            "in place. Start it without --secure, or use another --dir (or remove this one) for a secured appliance"
        )
    if not secure and secrets:
        raise ValueError(
            f"{directory} holds an appliance made with --secure ({directory / SECRETS_DIR}); start it with "
            "--secure (its ZooKeeper only takes writes with the secured credential), or use another --dir"
        )


def check_secured_settings(properties: Mapping[str, str]) -> None:
    """Refuse ``--set`` of a key the secured appliance sets itself. ValueError naming the key."""
    for key in properties:
        if key in SECURED_KEYS:
            raise ValueError(f"--set {key}: the secured appliance sets {key} itself for each node")


def _toml(text: str | Path) -> str:
    """A TOML basic string (JSON's escapes are TOML's for what a path holds)."""
    return json.dumps(str(text))


class SiteSecurity:
    """The security of one site: its nodes' extra ``server.properties``, the context its admin
    APIs are checked with, and the users and ACLs its ZooKeeper must hold before they start."""

    protocol = PROTOCOL

    def __init__(self, material: SecureMaterial, site: str, grants: Mapping[str, Sequence[Grant]]) -> None:
        self.material = material
        self.site = site
        self.grants = grants

    def node_properties(self, broker_id: int) -> dict[str, str]:
        """What a node of this site gets on top of the site's own properties; its listener is ``SASL_SSL``.

        Raises:
            MaterialError: the broker's password cannot be read.
        """
        material = self.material
        password = material.password(BROKER)
        return {
            "inter.broker.listener.name": PROTOCOL,
            "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required username="{BROKER}" password="{password}";',
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(material.keystore(self.site, broker_id)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(material.ca_cert),
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(f"User:{user}" for user in SUPER_USERS),
            "zookeeper.set.acl": "true",
            "strait.zookeeper.digest.file": str(material.zookeeper_digest_file(self.site)),
            "strait.admin.ssl.enabled": "true",
        }

    managed_keys = SECURED_KEYS  # what --set may not change on a secured site

    def admin_context(self) -> ssl.SSLContext:
        """What the nodes' HTTPS admin APIs are checked with: the appliance's CA, and their host."""
        return ssl.create_default_context(cafile=str(self.material.ca_cert))

    def prepare_zookeeper(self, connect: str) -> list[str]:
        """Write the users (every one of :data:`USERS`) and this site's ACLs into its ZooKeeper at
        ``connect``. Returns what was written, in words (empty on a restart).

        Raises:
            SecurityError: naming the site, the file or ZooKeeper.
        """
        try:
            passwords = {user: self.material.password(user) for user in USERS}
            digest = self.material.zookeeper_digest(self.site)
            return bootstrap_site(connect, digest, passwords, bindings(self.grants))
        except (MaterialError, BootstrapError) as exc:
            raise SecurityError(f"site {self.site}: {exc}") from None


class ApplianceSecurity:
    """The secured appliance's material and what is made from it: each site's security, the link's
    TLS and SASL settings, and the client properties files."""

    def __init__(self, material: SecureMaterial) -> None:
        self.material = material

    @classmethod
    def prepare(cls, directory: Path, nodes: Mapping[str, Iterable[int]]) -> tuple[ApplianceSecurity, list[Path]]:
        """Make the material that is missing under ``DIR/secrets`` (``nodes``: site -> broker ids);
        returns the security and the files created now.

        Raises:
            SecurityError: the material cannot be made or read (see :func:`ensure_material`).
        """
        try:
            material, created = ensure_material(directory.absolute() / SECRETS_DIR, nodes, USERS)
        except MaterialError as exc:
            raise SecurityError(str(exc)) from None
        return cls(material), created

    def site(self, name: str) -> SiteSecurity:
        """The security of site ``name``. The mirror's grants are both directions' on both sites:
        `strait failover reverse` runs the link from west to east with the same mirror user, and
        failback runs it forward again."""
        return SiteSecurity(self.material, name, {APP: APP_ACLS, MIRROR: MIRROR_SOURCE_ACLS + MIRROR_TARGET_ACLS})

    def link_site_options(self, site: str) -> str:
        """The TOML keys a link's ``source``/``target`` table gets (after a leading ``, ``)."""
        material = self.material
        password_file = _toml(material.password_file(MIRROR))
        sasl = f"{{ mechanism = {_toml(MECHANISM)}, username = {_toml(MIRROR)}, password_file = {password_file} }}"
        options = f", tls = {{ ca = {_toml(material.ca_cert)} }}, sasl = {sasl}"
        return options + f", zookeeper_digest_file = {_toml(material.zookeeper_digest_file(site))}"

    def client_properties(self, bootstrap: str, *, other: Mapping[str, str]) -> str:
        """librdkafka's keys for the ``app`` user (``kcat -F``), bootstrapping to ``bootstrap``;
        ``other`` (site -> bootstrap) is named in comments. Raises MaterialError."""
        lines = ["# strait up --secure: the app user, for librdkafka clients (kcat -F this-file)."]
        lines += [f"# {site}: -b {servers}" for site, servers in other.items()]
        lines += [
            f"bootstrap.servers={bootstrap}",
            f"security.protocol={PROTOCOL}",
            f"sasl.mechanism={MECHANISM}",
            f"sasl.username={APP}",
            f"sasl.password={self.material.password(APP)}",
            f"ssl.ca.location={self.material.ca_cert}",
        ]
        return "\n".join(lines) + "\n"

    def java_properties(self, user: str) -> str:
        """Java client keys for ``user`` (``--command-config`` of strait's and Kafka's tools). Raises MaterialError."""
        password = self.material.password(user)
        return "\n".join(
            [
                f"# strait up --secure: the {user} user, for Java clients (strait acls --command-config this-file).",
                f"security.protocol={PROTOCOL}",
                f"sasl.mechanism={MECHANISM}",
                f'sasl.jaas.config={SCRAM_LOGIN_MODULE} required username="{user}" password="{password}";',
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={self.material.ca_cert}",
                "",
            ]
        )

    def write_properties(self, directory: Path, bootstraps: Mapping[str, str]) -> tuple[Path, Path]:
        """Write ``DIR/client.properties`` (the app user, bootstrapping to the first site of
        ``bootstraps``) and ``DIR/admin.properties``, mode 0600; returns their paths.

        Raises:
            OSError: the directory cannot be written.
            MaterialError: a password cannot be read.
        """
        first = next(iter(bootstraps.values()))
        client, admin = directory / CLIENT_PROPERTIES, directory / ADMIN_PROPERTIES
        atomic_write(client, self.client_properties(first, other=bootstraps), mode=PRIVATE_MODE)
        atomic_write(admin, self.java_properties(ADMIN), mode=PRIVATE_MODE)
        return client, admin

    def operator_access(self, site: str) -> dict[str, object]:
        """How the operator tools (``strait failover``) reach ``site``, as a failover topology
        names it: TLS with the CA, SASL as ``admin`` (a super user), the site's ZooKeeper digest."""
        material = self.material
        return {
            "tls": {"ca": str(material.ca_cert)},
            "sasl": {"mechanism": MECHANISM, "username": ADMIN, "password_file": str(material.password_file(ADMIN))},
            "zookeeper_digest_file": str(material.zookeeper_digest_file(site)),
        }

    def describe(self, directory: Path) -> dict[str, object]:
        """What ``appliance.json`` says about the security (its presence marks a secured appliance)."""
        return {
            "protocol": PROTOCOL,
            "sasl_mechanism": MECHANISM,
            "ca": str(self.material.ca_cert),
            "client_properties": str(directory / CLIENT_PROPERTIES),
            "admin_properties": str(directory / ADMIN_PROPERTIES),
        }

    def announce(self, directory: Path, bootstraps: Mapping[str, str]) -> str:
        """How to connect, in words: the app user's properties in both styles, the admin's file."""
        material = self.material
        first = next(iter(bootstraps))
        return "\n".join(
            [
                f"  secured: SASL_SSL + {MECHANISM}, ACLs enforced, ZooKeeper digest; secrets in {material.directory}",
                f"  client properties (user {APP}), librdkafka / kcat: {directory / CLIENT_PROPERTIES}",
                f"    security.protocol={PROTOCOL}",
                f"    sasl.mechanism={MECHANISM}",
                f"    sasl.username={APP}",
                f"    sasl.password={material.password(APP)}",
                f"    ssl.ca.location={material.ca_cert}",
                f"  Java style: the same with ssl.truststore.type=PEM, ssl.truststore.location={material.ca_cert} and",
                f'    sasl.jaas.config={SCRAM_LOGIN_MODULE} required username="{APP}" password="...";',
                f"  try: kcat -F {directory / CLIENT_PROPERTIES} -L   (-b <bootstrap> for a site other than {first})",
                f"  admin (super user): strait acls list -b {bootstraps[first].split(',')[0]} "
                f"--command-config {directory / ADMIN_PROPERTIES}",
            ]
        )
