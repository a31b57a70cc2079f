"""How a client reaches a secured listener, read from Kafka client properties: the one reader of them.

The keys are the Java client's, as ``kafka-acls.sh --command-config`` and Spark's Kafka source
(with ``kafka.`` in front) take them:

=========================================  =====================================================
``security.protocol``                      ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT``,
                                           ``SASL_SSL`` (any case)
``ssl.truststore.type``,                   ``PEM`` only: JKS and PKCS12 are refused with the
``ssl.keystore.type``                      conversion to do
``ssl.truststore.location``                the CA certificates (PEM); default: the system's
``ssl.keystore.location``                  a client certificate: its key and chain in one PEM file
``ssl.key.password``                       decrypts that key
``ssl.endpoint.identification.algorithm``  ``https`` (default): check the broker's host name;
                                           empty: check only the chain
``sasl.mechanism``                         ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
``sasl.jaas.config``                       a login module entry with ``username`` and ``password``
=========================================  =====================================================

:func:`parse_client_security` checks the values (not the files) and returns a
:class:`ClientSecurity`: plain strings, so it pickles (Spark ships it to its executors), with no
password in its repr. :meth:`ClientSecurity.site_client_kwargs` builds what
:class:`~node.client.SiteClient` takes, reading the files then. Every error is a
:class:`SecurityConfigError` (a ValueError) naming the key as the caller spells it (``prefix``)
and never showing a password.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.security._jaas import PLAIN_MODULE, SCRAM_MODULE, format_jaas_config, parse_jaas_config
from node.security._sasl import MECHANISMS

from ._connection import SaslCredentials

__all__ = [
    "PROTOCOLS",
    "SECURITY_KEYS",
    "ClientSecurity",
    "SecurityConfigError",
    "parse_client_security",
    "read_client_properties",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SECURITY_KEYS = (
    "security.protocol",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.jaas.config",
)
SSL_KEYS = tuple(k for k in SECURITY_KEYS if k.startswith("ssl."))
SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config")
_PEM_ONLY = "strait reads PEM files only (convert with keytool -importkeystore to PKCS12, then openssl pkcs12)"


class SecurityConfigError(ValueError):
    """A security setting that cannot be used; the message names the key (never a password)."""


@dataclass(frozen=True)
class ClientSecurity:
    """A client's security settings (PLAINTEXT by default). ``prefix`` is how its keys were spelled
    (``kafka.`` for Spark's options): errors about the files name them so."""

    protocol: str = "PLAINTEXT"
    truststore: str | None = None  # CA certificates (PEM); None: the system's
    keystore: str | None = None  # the client's key and certificate chain (PEM)
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    prefix: str = ""

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A TLS 1.2+ client context (None without TLS), the files read now. Raises
        SecurityConfigError naming the key and the file."""
        if not self.uses_tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.truststore)
        except (OSError, ssl.SSLError) as exc:
            raise SecurityConfigError(f"{self.prefix}ssl.truststore.location {self.truststore}: {exc}") from None
        if self.keystore is not None:
            try:
                context.load_cert_chain(self.keystore, password=self.key_password)
            except (OSError, ssl.SSLError) as exc:
                raise SecurityConfigError(f"{self.prefix}ssl.keystore.location {self.keystore}: {exc}") from None
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_hostname  # Kafka's clients check it unless told not to
        return context

    def sasl_credentials(self) -> SaslCredentials | None:
        if not self.uses_sasl:
            return None
        assert self.sasl_mechanism is not None and self.sasl_username is not None and self.sasl_password is not None
        return SaslCredentials(self.sasl_mechanism, self.sasl_username, self.sasl_password)

    def site_client_kwargs(self) -> dict[str, Any]:
        """``SiteClient``'s ``ssl_context`` and ``sasl`` keywords (none for PLAINTEXT). Raises
        SecurityConfigError for a file that cannot be used."""
        out: dict[str, Any] = {}
        if self.uses_tls:
            out["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            out["sasl"] = self.sasl_credentials()
        return out

    def properties(self) -> dict[str, str]:
        """The Kafka client properties that stand for these settings (unprefixed; the password in
        ``sasl.jaas.config``): what :func:`parse_client_security` reads back as them."""
        out = {"security.protocol": self.protocol}
        if self.uses_tls:
            out["ssl.truststore.type"] = "PEM"
            if self.truststore is not None:
                out["ssl.truststore.location"] = self.truststore
            if self.keystore is not None:
                out["ssl.keystore.type"] = "PEM"
                out["ssl.keystore.location"] = self.keystore
            if self.key_password is not None:
                out["ssl.key.password"] = self.key_password
            out["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else ""
        if self.uses_sasl:
            assert self.sasl_mechanism is not None and self.sasl_username is not None and self.sasl_password is not None
            module = PLAIN_MODULE if self.sasl_mechanism == "PLAIN" else SCRAM_MODULE
            out["sasl.mechanism"] = self.sasl_mechanism
            out["sasl.jaas.config"] = format_jaas_config(
                module, {"username": self.sasl_username, "password": self.sasl_password}
            )
        return out


def parse_client_security(props: Mapping[str, str], *, prefix: str = "") -> ClientSecurity:
    """The settings of ``props`` (keys of :data:`SECURITY_KEYS` with ``prefix`` in front; other
    keys are not looked at). Raises SecurityConfigError naming the key."""

    def get(key: str, default: str = "") -> str:
        return props.get(prefix + key, default)

    protocol = get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(
            f"{prefix}security.protocol {get('security.protocol')!r} is not one of {', '.join(PROTOCOLS)}"
        )
    settings: dict[str, Any] = {"protocol": protocol, "prefix": prefix}
    if protocol.endswith("SSL"):
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            kind = get(key, "PEM").strip().upper()
            if kind != "PEM":
                raise SecurityConfigError(f"{prefix}{key} {get(key)!r}: {_PEM_ONLY}")
        algorithm = get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("https", ""):
            raise SecurityConfigError(
                f"{prefix}ssl.endpoint.identification.algorithm {algorithm!r}: 'https' checks the broker's "
                "host name (the default); empty checks only the certificate chain"
            )
        settings |= {
            "truststore": get("ssl.truststore.location").strip() or None,
            "keystore": get("ssl.keystore.location").strip() or None,
            "key_password": get("ssl.key.password") or None,
            "check_hostname": algorithm == "https",
        }
    if protocol.startswith("SASL_"):
        mechanism = get("sasl.mechanism").strip().upper()
        if mechanism not in MECHANISMS:
            shown = repr(get("sasl.mechanism")) if prefix + "sasl.mechanism" in props else "missing"
            raise SecurityConfigError(f"{prefix}sasl.mechanism is {shown}; strait speaks {', '.join(MECHANISMS)}")
        username, password = _jaas_credentials(get("sasl.jaas.config") or None, prefix)
        settings |= {"sasl_mechanism": mechanism, "sasl_username": username, "sasl_password": password}
    return ClientSecurity(**settings)


def _jaas_credentials(text: str | None, prefix: str) -> tuple[str, str]:
    if text is None:
        raise SecurityConfigError(f"{prefix}sasl.jaas.config is missing (a login module with username and password)")
    try:
        entry = parse_jaas_config(text)
    except ValueError as exc:
        raise SecurityConfigError(f"{prefix}sasl.jaas.config: {exc}") from None
    if entry.username is None or entry.password is None:
        raise SecurityConfigError(f"{prefix}sasl.jaas.config needs both username and password")
    return entry.username, entry.password


def read_client_properties(path: str | Path) -> dict[str, str]:
    """The Kafka client properties file ``path`` (Java ``.properties`` syntax), every key. Raises
    SecurityConfigError naming the file."""
    from node.config import ConfigError, parse_properties  # noqa: PLC0415  (the broker's config tables: only here)

    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"), source=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise SecurityConfigError(f"cannot read {path}: {exc}") from None
    except ConfigError as exc:
        raise SecurityConfigError(str(exc)) from None
