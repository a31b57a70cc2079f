"""Reaching a node from the security commands: ``--bootstrap-server`` and ``--command-config``.

``--command-config`` is a Kafka client properties file as ``kafka-acls.sh`` takes it
(``security.protocol``, PEM ``ssl.truststore.location`` / ``ssl.keystore.location``,
``sasl.mechanism``, ``sasl.jaas.config``); without it the command reaches one node's PLAINTEXT
listener.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ._topics_commands import bootstrap_option

if TYPE_CHECKING:
    from node.client import AdminClient, ClientSecurity

F = TypeVar("F", bound=Callable[..., Any])

CLIENT_ID = "strait-admin"

# -- connections ------------------------------------------------------------------------------------------------------


def load_command_config(path: str) -> ClientSecurity:
    """The security settings of the Kafka client properties file ``path`` (read by
    ``node.client``), its TLS files checked now. Other keys are named on stderr and ignored, as
    Kafka's tools warn. Raises ClickException naming the file and the key that is wrong (never a
    password)."""
    from node.client import SECURITY_KEYS, SecurityConfigError, parse_client_security, read_client_properties

    try:
        props = read_client_properties(path)
    except SecurityConfigError as exc:
        raise click.ClickException(f"--command-config: {exc}") from None
    ignored = sorted(set(props) - set(SECURITY_KEYS))
    if ignored:
        click.echo(f"{path}: ignoring {', '.join(ignored)} (not used by strait's commands)", err=True)
    try:
        security = parse_client_security(props)
        security.site_client_kwargs()  # the files can be used
    except SecurityConfigError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    return security


@contextlib.asynccontextmanager
async def connect(bootstrap: str, security: ClientSecurity | None) -> AsyncIterator[AdminClient]:
    """An admin client on ``bootstrap``: one node's connection over PLAINTEXT, else the site as
    seen through the secured listener. Raises ClientError or ClickException."""
    from node.client import AdminClient, SecurityConfigError, SiteClient

    if security is None or security.protocol == "PLAINTEXT":
        async with await AdminClient.connect(bootstrap) as admin:
            yield admin
        return
    try:
        site = SiteClient(bootstrap, bootstrap, client_id=CLIENT_ID, **security.site_client_kwargs())
    except (ValueError, SecurityConfigError) as exc:
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
