"""Reaching a node from the security commands: ``--bootstrap-server`` and ``--command-config``.

``--command-config`` is a Kafka client properties file as ``kafka-acls.sh`` takes it
(``security.protocol``, PEM ``ssl.truststore.location`` / ``ssl.keystore.location``,
``sasl.mechanism``, ``sasl.jaas.config``); without it the command reaches one node's PLAINTEXT
listener.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ._topics_commands import bootstrap_option

if TYPE_CHECKING:
    from node.client import AdminClient

F = TypeVar("F", bound=Callable[..., Any])

CLIENT_ID = "strait-admin"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The command-config keys read here; any other is named on stderr and ignored, as Kafka's tools warn.
_KNOWN_KEYS = frozenset({
    "security.protocol", "ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
})  # fmt: skip

# -- connections ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach a secured listener, read from a ``--command-config`` file (``source``)."""

    source: str
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)


def load_command_config(path: str) -> ClientSecurity:
    """The security settings of the Kafka client properties file ``path``. Raises ClickException
    naming the file and the key that is wrong (never a password)."""
    from node.config import ConfigError, parse_properties

    try:
        props = parse_properties(Path(path).read_text(encoding="utf-8"), source=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read --command-config {path}: {exc}") from None
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    ignored = sorted(set(props) - _KNOWN_KEYS)
    if ignored:
        click.echo(f"{path}: ignoring {', '.join(ignored)} (not used by strait's commands)", err=True)
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise click.ClickException(
            f"{path}: security.protocol {props['security.protocol']!r} is not one of {', '.join(PROTOCOLS)}"
        )
    context = _ssl_context(props, path) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(path, protocol, context)
    mechanism = props.get("sasl.mechanism", "").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        shown = repr(props["sasl.mechanism"]) if "sasl.mechanism" in props else "missing"
        raise click.ClickException(f"{path}: sasl.mechanism is {shown}; strait speaks {', '.join(SASL_MECHANISMS)}")
    username, password = _jaas_credentials(props, path)
    return ClientSecurity(path, protocol, context, mechanism, username, password)


def _ssl_context(props: dict[str, str], path: str) -> ssl.SSLContext:
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = props.get(key, "PEM").strip().upper()
        if kind != "PEM":
            raise click.ClickException(
                f"{path}: {key} {props[key]!r}: strait reads PEM files only "
                "(convert with keytool -importkeystore to PKCS12, then openssl pkcs12)"
            )
    truststore = props.get("ssl.truststore.location") or None
    keystore = props.get("ssl.keystore.location") or None
    try:
        context = ssl.create_default_context(cafile=truststore)
    except (OSError, ssl.SSLError) as exc:
        raise click.ClickException(f"{path}: ssl.truststore.location {truststore}: {exc}") from None
    if keystore is not None:
        try:
            context.load_cert_chain(keystore, password=props.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as exc:
            raise click.ClickException(f"{path}: ssl.keystore.location {keystore}: {exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Kafka's clients check the broker's host name unless this is set empty.
    context.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https").strip() != ""
    return context


def _jaas_credentials(props: dict[str, str], path: str) -> tuple[str, str]:
    from node.security._jaas import parse_jaas_config

    if "sasl.jaas.config" not in props:
        raise click.ClickException(f"{path}: sasl.jaas.config is missing (a login module with username and password)")
    try:
        entry = parse_jaas_config(props["sasl.jaas.config"])
    except ValueError as exc:
        raise click.ClickException(f"{path}: sasl.jaas.config: {exc}") from None
    if entry.username is None or entry.password is None:
        raise click.ClickException(f"{path}: sasl.jaas.config needs both username and password")
    return entry.username, entry.password


def _sasl_argument(security: ClientSecurity) -> dict[str, Any]:
    """``SiteClient``'s ``sasl`` keyword for ``security`` (empty without SASL); ClickException
    naming the file for settings the client refuses."""
    if security.sasl_mechanism is None:
        return {}
    from node.client import SaslCredentials

    assert security.sasl_username is not None and security.sasl_password is not None
    try:
        return {"sasl": SaslCredentials(security.sasl_mechanism, security.sasl_username, security.sasl_password)}
    except ValueError as exc:
        raise click.ClickException(f"{security.source}: sasl.mechanism: {exc}") from None


@contextlib.asynccontextmanager
async def connect(bootstrap: str, security: ClientSecurity | None) -> AsyncIterator[AdminClient]:
    """An admin client on ``bootstrap``: one node's connection over PLAINTEXT, else the site as
    seen through the secured listener. Raises ClientError or ClickException."""
    from node.client import AdminClient, SiteClient

    if security is None or security.protocol == "PLAINTEXT":
        async with await AdminClient.connect(bootstrap) as admin:
            yield admin
        return
    sasl = _sasl_argument(security)
    try:
        site = SiteClient(bootstrap, bootstrap, client_id=CLIENT_ID, ssl_context=security.ssl_context, **sasl)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield AdminClient(site)
    finally:
        await site.aclose()


def connection_options(fn: F) -> F:
    """``--bootstrap-server/-b`` and ``--command-config``."""
    command_config = click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False),
        help="Kafka client properties for a secured listener: security.protocol, ssl.truststore.location and "
        "ssl.keystore.location (PEM), sasl.mechanism, sasl.jaas.config (username, password).",
    )
    return bootstrap_option(command_config(fn))


def client_security(command_config: str | None) -> ClientSecurity | None:
    return load_command_config(command_config) if command_config else None


# -- ACL options ------------------------------------------------------------------------------------------------------


def echo_table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> None:
    """Columns aligned by spaces, one line per row (no wrapping: greppable)."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
