"""TLS for a node's listeners: the server context from the ``ssl.*`` keys, re-read when its files change.

:class:`ServerTls` builds an :class:`ssl.SSLContext` from the node's config (a PEM keystore
with the node's key and certificate chain, an optional PEM truststore, ``ssl.client.auth``,
``ssl.enabled.protocols``) and hands out the current one to each new connection
(:meth:`ServerTls.context`). At most once a second it looks at the files' modification times
and sizes; when one changed it builds a new context from them: new connections get the new
certificate, open ones keep theirs. A new set of files that does not load (a key that does not
match its certificate, a half-written file) is logged and the previous context stays in use.

:meth:`ServerTls.principal` names the client of a finished handshake: ``User:<mapped subject>``
of its certificate (see :mod:`node.security._principal`), or ``User:ANONYMOUS`` without one.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from node.client import SaslCredentials
from node.config import NodeConfig
from node.request import ANONYMOUS
from node.security._jaas import parse_jaas_config
from node.security._principal import PrincipalRule, distinguished_name, map_principal_name, parse_principal_rules

__all__ = ["ServerTls", "TlsError", "inter_broker_context", "inter_broker_sasl"]

log = logging.getLogger("strait.node.tls")

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
#: Seconds between two looks at the files' modification times.
RELOAD_CHECK_S = 1.0


class TlsError(Exception):
    """The TLS settings cannot make a context; the message names the key or file at fault."""


@dataclass(frozen=True)
class _Files:
    keystore: str
    truststore: str | None

    def stamp(self) -> tuple[tuple[int, int, int], ...]:
        """(mtime ns, size, inode) of each file; a missing file stamps as zeros."""
        out = []
        for path in (self.keystore, self.truststore):
            if path is None:
                continue
            try:
                st = os.stat(path)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append((0, 0, 0))
        return tuple(out)


class ServerTls:
    """The server side of TLS for the node's SSL and SASL_SSL listeners."""

    def __init__(self, config: NodeConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        if config.ssl_keystore_location is None:
            raise TlsError("ssl.keystore.location is required by SSL and SASL_SSL listeners (a PEM key and chain)")
        if config.ssl_client_auth != "none" and config.ssl_truststore_location is None:
            raise TlsError(
                f"ssl.client.auth={config.ssl_client_auth} needs ssl.truststore.location (the CAs client "
                "certificates are checked against)"
            )
        self._files = _Files(config.ssl_keystore_location, config.ssl_truststore_location)
        self._password = config.ssl_key_password
        self._client_auth = _CLIENT_AUTH[config.ssl_client_auth]
        versions = sorted(_VERSIONS[v] for v in config.ssl_enabled_protocols)
        self._min_version, self._max_version = versions[0], versions[-1]
        self._rules: tuple[PrincipalRule, ...] = parse_principal_rules(config.ssl_principal_mapping_rules)
        self._clock = clock
        self._stamp = self._files.stamp()
        self._context = self._build()
        self._checked = clock()
        self.reloads = 0

    @property
    def client_auth(self) -> str:
        return {ssl.CERT_NONE: "none", ssl.CERT_OPTIONAL: "requested", ssl.CERT_REQUIRED: "required"}[self._client_auth]

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version, context.maximum_version = self._min_version, self._max_version
        try:
            context.load_cert_chain(self._files.keystore, password=self._password)
        except FileNotFoundError:
            raise TlsError(f"ssl.keystore.location {self._files.keystore}: no such file") from None
        except ssl.SSLError as exc:
            raise TlsError(
                f"ssl.keystore.location {self._files.keystore}: cannot load a private key and its certificate "
                f"chain from it (a PEM file with both; ssl.key.password for an encrypted key): {exc}"
            ) from None
        except OSError as exc:
            raise TlsError(f"ssl.keystore.location {self._files.keystore}: {exc}") from None
        if self._files.truststore is not None:
            try:
                context.load_verify_locations(cafile=self._files.truststore)
            except (ssl.SSLError, OSError) as exc:
                raise TlsError(
                    f"ssl.truststore.location {self._files.truststore}: cannot load CA certificates from it: {exc}"
                ) from None
        context.verify_mode = self._client_auth
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: re-read from the files when they changed."""
        now = self._clock()
        if now - self._checked >= RELOAD_CHECK_S:
            self._checked = now
            stamp = self._files.stamp()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._context = self._build()
                except TlsError as exc:
                    log.error("TLS files changed but do not load; still using the previous ones: %s", exc)
                else:
                    self.reloads += 1
                    log.info("TLS files changed: new connections use the new certificate (reload %d)", self.reloads)
        return self._context

    def principal(self, peer_cert: dict[str, Any] | None) -> str:
        """``User:<name>`` of a verified client certificate (as ``getpeercert()`` gives it), or
        ``User:ANONYMOUS`` without one. Raises TlsError when no mapping rule matches its subject."""
        if not peer_cert or not peer_cert.get("subject"):
            return ANONYMOUS
        name = distinguished_name(peer_cert["subject"])
        try:
            return "User:" + map_principal_name(name, self._rules)
        except ValueError as exc:
            raise TlsError(str(exc)) from None


def inter_broker_context(config: NodeConfig) -> ssl.SSLContext | None:
    """The client side of TLS for this node's connections to other nodes (replica fetchers, the
    controller, controlled shutdown), or None when the inter-broker listener is PLAINTEXT.

    Trusts ``ssl.truststore.location`` (the system CAs without one), presents the node's own
    certificate (so that ``ssl.client.auth=required`` admits other nodes), checks the other node's
    host name unless ``ssl.endpoint.identification.algorithm`` is empty. Built anew on each call,
    so renewed files are used by the next connection. Raises TlsError naming a file that does not load.
    """
    if not config.security_protocol(config.inter_broker_listener_name).endswith("SSL"):
        return None
    context = ssl.create_default_context(cafile=config.ssl_truststore_location)
    context.check_hostname = config.ssl_endpoint_identification_algorithm == "https"
    versions = sorted(_VERSIONS[v] for v in config.ssl_enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if config.ssl_keystore_location is not None:
        try:
            context.load_cert_chain(config.ssl_keystore_location, password=config.ssl_key_password)
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(f"ssl.keystore.location {config.ssl_keystore_location}: {exc}") from None
    return context


def inter_broker_sasl(config: NodeConfig) -> SaslCredentials | None:
    """The credentials this node presents to other nodes on a SASL inter-broker listener
    (``sasl.mechanism.inter.broker.protocol`` with ``sasl.jaas.config``'s username and password,
    checked when the config was loaded), or None on PLAINTEXT and SSL."""
    if not config.security_protocol(config.inter_broker_listener_name).startswith("SASL_"):
        return None
    assert config.sasl_jaas_config is not None
    entry = parse_jaas_config(config.sasl_jaas_config)
    assert entry.username is not None and entry.password is not None
    return SaslCredentials(config.sasl_mechanism_inter_broker_protocol, entry.username, entry.password)
