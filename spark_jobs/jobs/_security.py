"""How a job reaches a secured live site: ``--command-config FILE``.

The file is Kafka client properties, as ``strait acls`` and ``kafka-acls.sh`` take them:
``security.protocol``, ``ssl.truststore.location`` / ``ssl.keystore.location`` (PEM),
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``, ``sasl.mechanism``,
``sasl.jaas.config`` (``username``, ``password``). It is read by ``node.client``'s one reader of
them; other keys (``bootstrap.servers``, ``client.id``, ...) are named on stderr and ignored. The
job hands the settings to ``strait-kafka`` as Spark's ``kafka.*`` options, and its own driver
connections use them too. ``reconcile`` takes ``--command-config`` for both sides and
``--source-command-config`` / ``--target-command-config`` for one (each wins over the shared
one); ``ledger`` and ``replay`` take ``--command-config`` for ``--site``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from node.client import (
    SECURITY_KEYS,
    ClientSecurity,
    SecurityConfigError,
    parse_client_security,
    read_client_properties,
)

F = TypeVar("F", bound=Callable[..., Any])

HELP = (
    "Kafka client properties for a secured listener, as strait acls takes them: security.protocol, "
    "ssl.truststore.location and ssl.keystore.location (PEM), sasl.mechanism, sasl.jaas.config (username, password)"
)


def load_command_config(option: str, path: str) -> ClientSecurity:
    """The settings of the properties file ``path`` given as ``option``, the TLS files checked
    now. Raises click.BadParameter naming the option, the file and the key (never a password)."""
    try:
        props = read_client_properties(path)
        ignored = sorted(set(props) - set(SECURITY_KEYS))
        if ignored:
            click.echo(f"{option} {path}: ignoring {', '.join(ignored)} (not security settings)", err=True)
        security = parse_client_security(props)
        security.site_client_kwargs()  # the files load
    except SecurityConfigError as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint=option) from None
    return security


def command_config_option(*decls: str, help: str) -> Callable[[F], F]:
    """A click option taking a properties FILE whose value is its :class:`ClientSecurity` (None
    when not given)."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> ClientSecurity | None:
        option = param.opts[0] if param.opts else "--command-config"
        return None if value is None else load_command_config(option, value)

    return click.option(
        *decls,
        type=click.Path(exists=True, dir_okay=False),
        callback=convert,
        metavar="FILE",
        help=f"{help}: {HELP}.",
    )


def either(*given: ClientSecurity | None) -> ClientSecurity:
    """The first settings given, else PLAINTEXT."""
    return next((s for s in given if s is not None), ClientSecurity())


def describe(security: ClientSecurity) -> dict[str, Any]:
    """What a summary records of how a site was reached (never a password)."""
    out: dict[str, Any] = {"protocol": security.protocol}
    if security.uses_tls:
        out["truststore"] = security.truststore
    if security.uses_sasl:
        out |= {"sasl_mechanism": security.sasl_mechanism, "sasl_username": security.sasl_username}
    return out
