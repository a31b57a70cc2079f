"""``strait quotas describe|alter``: a site's client quotas over the Kafka protocol
(DescribeClientQuotas / AlterClientQuotas), in the shape of Kafka's ``kafka-configs.sh
--entity-type users|clients``. Entities are named with ``--user``/``--client-id`` or their
``--user-default``/``--client-id-default``; see docs/quotas.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ._command_config import client_security, connect, connection_options, echo_table
from ._topics_commands import run_client

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT = "<default>"
MATCH_EXACT, MATCH_DEFAULT = 0, 1


@click.group("quotas", help="Client quotas (the site's, in ZooKeeper; kafka-configs.sh --entity-type users|clients).")
def quotas_group() -> None:
    pass


def _entity_options(fn: F) -> F:
    for option in (
        click.option("--user", help="The user (principal name) the quota is on."),
        click.option("--user-default", is_flag=True, help="Every user without a quota of its own."),
        click.option("--client-id", help="The client id the quota is on."),
        click.option("--client-id-default", is_flag=True, help="Every client id without a quota of its own."),
    ):
        fn = option(fn)
    return fn


def _named(user: str | None, user_default: bool, client_id: str | None, client_default: bool) -> list[Any]:
    """``[(type, name or None)]`` of the options given; UsageError for a name and its default together."""
    found: list[tuple[str, str | None]] = []
    for entity_type, name, default in (("user", user, user_default), ("client-id", client_id, client_default)):
        if name is not None and default:
            raise click.UsageError(f"give --{entity_type} or --{entity_type}-default, not both")
        if name is not None or default:
            found.append((entity_type, name))
    return found


def _shown(entity: list[tuple[str, str | None]]) -> str:
    return ",".join(f"{t}={DEFAULT if name is None else name}" for t, name in entity)


@quotas_group.command("describe")
@_entity_options
@click.option("--strict", is_flag=True, help="Only entities of exactly the types named.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of {entity, values}.")
@connection_options
def describe(
    user: str | None,
    user_default: bool,
    client_id: str | None,
    client_id_default: bool,
    strict: bool,
    as_json: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """The quotas of the entities named (each option filters), or of every entity."""
    components = [
        (t, MATCH_DEFAULT if name is None else MATCH_EXACT, name)
        for t, name in _named(user, user_default, client_id, client_id_default)
    ]
    security = client_security(command_config)

    async def go() -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
        async with connect(bootstrap, security) as admin:
            return await admin.describe_quotas(components, strict=strict)

    found = run_client(go)
    if as_json:
        click.echo(json.dumps([{"entity": dict(e), "values": v} for e, v in found], indent=2, sort_keys=True))
    elif found:
        rows = [(_shown(e), key, f"{value:g}") for e, values in found for key, value in sorted(values.items())]
        echo_table(("ENTITY", "KEY", "VALUE"), rows)
    else:
        click.echo("no client quotas")


@quotas_group.command("alter")
@_entity_options
@click.option("--add", "adds", multiple=True, metavar="KEY=VALUE", help="Set a quota (repeatable).")
@click.option("--delete", "deletes", multiple=True, metavar="KEY", help="Remove a quota (repeatable).")
@click.option("--validate-only", is_flag=True, help="Check with the node, change nothing.")
@connection_options
def alter(
    user: str | None,
    user_default: bool,
    client_id: str | None,
    client_id_default: bool,
    adds: tuple[str, ...],
    deletes: tuple[str, ...],
    validate_only: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Set (--add producer_byte_rate=1048576) or remove (--delete KEY) quotas of one entity."""
    entity = _named(user, user_default, client_id, client_id_default)
    if not entity:
        raise click.UsageError("name the entity: --user/--user-default and/or --client-id/--client-id-default")
    changes: dict[str, float | None] = {}
    for item in adds:
        key, sep, text = item.partition("=")
        try:
            if not sep:
                raise ValueError(item)
            changes[key] = float(text)
        except ValueError:
            raise click.UsageError(f"--add {item!r}: expected KEY=NUMBER") from None
    changes.update(dict.fromkeys(deletes))
    if not changes:
        raise click.UsageError("nothing to change: give --add KEY=VALUE or --delete KEY")
    security = client_security(command_config)

    async def go() -> None:
        async with connect(bootstrap, security) as admin:
            await admin.alter_quotas(entity, changes, validate_only=validate_only)

    run_client(go)
    verb = "valid for" if validate_only else "altered"
    shown = ", ".join(f"{key}={'(removed)' if value is None else f'{value:g}'}" for key, value in changes.items())
    click.echo(f"{verb} {_shown(entity)}: {shown}")
