"""TLS for a node's listeners: one server context per listener, re-read when its files change.

:class:`ServerTls` builds an :class:`ssl.SSLContext` from one listener's TLS settings (its
``listener.name.<listener>.ssl.*`` overrides, else the node-wide ``ssl.*`` keys: a PEM keystore
with the node's key and certificate chain, an optional PEM truststore, ``ssl.client.auth``,
``ssl.enabled.protocols``) and hands out the current one to each new connection
(:meth:`ServerTls.context`). At most once a second it looks at the files' modification times
and sizes; when one changed it builds a new context from them: new connections get the new
certificate, open ones keep theirs. A new set of files that does not load (a key that does not
match its certificate, a half-written file) is logged and the previous context stays in use.
Each listener has its own :class:`ServerTls`, so each watches its own files.

:meth:`ServerTls.principal` names the client of a finished handshake: ``User:<mapped subject>``
of its certificate (see :mod:`node.security._principal`), or ``User:ANONYMOUS`` without one.

:func:`inter_broker_context` and :func:`inter_broker_sasl` are the client side: what this node
presents to the others on ``inter.broker.listener.name``, with that listener's settings.
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
    """The server side of TLS for one SSL or SASL_SSL listener of the node."""

    def __init__(self, config: NodeConfig, listener_name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Raises TlsError naming the key at fault (an override's full name) when the files do not
        load; KeyError for a listener name that is not in ``listeners``."""
        security = config.security_of(listener_name)
        self.listener_name = listener_name
        self._keystore_key = security.key_of("ssl.keystore.location")
        self._truststore_key = security.key_of("ssl.truststore.location")
        if security.keystore_location is None:
            raise TlsError(
                f"listener {listener_name}: ssl.keystore.location is required by SSL and SASL_SSL listeners "
                "(a PEM key and chain)"
            )
        if security.client_auth != "none" and security.truststore_location is None:
            raise TlsError(
                f"{security.key_of('ssl.client.auth')}={security.client_auth} needs {self._truststore_key} "
                "(the CAs client certificates are checked against)"
            )
        self._files = _Files(security.keystore_location, security.truststore_location)
        self._password = security.key_password
        self._client_auth = _CLIENT_AUTH[security.client_auth]
        versions = sorted(_VERSIONS[v] for v in security.enabled_protocols)
        self._min_version, self._max_version = versions[0], versions[-1]
        self._rules: tuple[PrincipalRule, ...] = parse_principal_rules(security.principal_mapping_rules)
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
            raise TlsError(f"{self._keystore_key} {self._files.keystore}: no such file") from None
        except ssl.SSLError as exc:
            raise TlsError(
                f"{self._keystore_key} {self._files.keystore}: cannot load a private key and its certificate "
                f"chain from it (a PEM file with both; ssl.key.password for an encrypted key): {exc}"
            ) from None
        except OSError as exc:
            raise TlsError(f"{self._keystore_key} {self._files.keystore}: {exc}") from None
        if self._files.truststore is not None:
            try:
                context.load_verify_locations(cafile=self._files.truststore)
            except (ssl.SSLError, OSError) as exc:
                raise TlsError(
                    f"{self._truststore_key} {self._files.truststore}: cannot load CA certificates from it: {exc}"
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
                    log.error(
                        "listener %s: TLS files changed but do not load; still using the previous ones: %s",
                        self.listener_name,
                        exc,
                    )
                else:
                    self.reloads += 1
                    log.info(
                        "listener %s: TLS files changed: new connections use the new certificate (reload %d)",
                        self.listener_name,
                        self.reloads,
                    )
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
    controller, controlled shutdown), or None when the inter-broker listener does not use TLS.

    Uses the inter-broker listener's settings (its ``listener.name.<listener>.ssl.*`` overrides,
    else the node-wide keys): trusts its truststore (the system CAs without one), presents its
    keystore as the node's client certificate (so that ``ssl.client.auth=required`` admits other
    nodes), checks the other node's host name unless its ``ssl.endpoint.identification.algorithm``
    is empty. Built anew on each call, so renewed files are used by the next connection. Raises
    TlsError naming the key (an override's full name) and the file that does not load.
    """
    security = config.security_of(config.inter_broker_listener_name)
    if not security.uses_tls:
        return None
    try:
        context = ssl.create_default_context(cafile=security.truststore_location)
    except (ssl.SSLError, OSError) as exc:
        key = security.key_of("ssl.truststore.location")
        raise TlsError(f"{key} {security.truststore_location}: {exc}") from None
    context.check_hostname = security.endpoint_identification_algorithm == "https"
    versions = sorted(_VERSIONS[v] for v in security.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if security.keystore_location is not None:
        try:
            context.load_cert_chain(security.keystore_location, password=security.key_password)
        except (ssl.SSLError, OSError) as exc:
            key = security.key_of("ssl.keystore.location")
            raise TlsError(f"{key} {security.keystore_location}: {exc}") from None
    return context


def inter_broker_sasl(config: NodeConfig) -> SaslCredentials | None:
    """The credentials this node presents to other nodes on a SASL inter-broker listener
    (``sasl.mechanism.inter.broker.protocol`` with the username and password of that listener's
    JAAS entry for the mechanism, else of ``sasl.jaas.config``; checked when the config was
    loaded), or None on PLAINTEXT and SSL."""
    security = config.security_of(config.inter_broker_listener_name)
    if not security.uses_sasl:
        return None
    mechanism = config.sasl_mechanism_inter_broker_protocol
    jaas = security.jaas_config(mechanism)
    assert jaas is not None
    entry = parse_jaas_config(jaas)
    assert entry.username is not None and entry.password is not None
    return SaslCredentials(mechanism, entry.username, entry.password)
