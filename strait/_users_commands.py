"""``strait users add-scram|list|remove``: a site's SCRAM credentials over the Kafka protocol, in the
shape of Kafka's ``kafka-configs.sh --entity-type users``. The password is read from a file or
stdin, never from the command line; only the salted password goes over the wire.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ._command_config import client_security, connect, connection_options, echo_table
from ._topics_commands import run_client

F = TypeVar("F", bound=Callable[..., Any])

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@click.group(
    "users", help="SCRAM credentials of users (the site's, in ZooKeeper; kafka-configs.sh --entity-type users)."
)
def users_group() -> None:
    pass


def _mechanism_option(help_: str) -> Callable[[F], F]:
    return click.option(
        "--mechanism",
        "mechanisms",
        multiple=True,
        required=True,
        type=click.Choice(SCRAM_MECHANISMS, case_sensitive=False),
        metavar="SCRAM-SHA-256|SCRAM-SHA-512",
        help=help_,
    )


def read_password(password_file: str | None, password_stdin: bool) -> str:
    """The password from its file or stdin (a terminal is prompted, twice), without the final
    line break. Raises UsageError unless exactly one source is given, ClickException when empty."""
    if (password_file is None) == (not password_stdin):
        raise click.UsageError("give the password with exactly one of --password-file PATH or --password-stdin")
    if password_file is not None:
        try:
            text = Path(password_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.ClickException(f"cannot read --password-file {password_file}: {exc}") from None
    elif sys.stdin.isatty():
        text = str(click.prompt("password", hide_input=True, confirmation_prompt=True))
    else:
        text = sys.stdin.read()
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise click.ClickException("the password is empty")
    return password


@users_group.command("add-scram")
@click.argument("name")
@_mechanism_option("SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable: the same password for each).")
@click.option(
    "--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True, help="PBKDF2 iterations."
)
@click.option("--password-file", type=click.Path(exists=True, dir_okay=False), help="A file holding the password.")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin.")
@connection_options
def add_scram(
    name: str,
    mechanisms: tuple[str, ...],
    iterations: int,
    password_file: str | None,
    password_stdin: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Create or replace user NAME's SCRAM credential(s). The password is salted here; the node
    gets the salt and the salted password only."""
    password = read_password(password_file, password_stdin)
    wanted = [m.upper() for m in dict.fromkeys(mechanisms)]
    security = client_security(command_config)

    async def go() -> None:
        async with connect(bootstrap, security) as admin:
            await admin.alter_scram(upserts=[(name, mechanism, password, iterations) for mechanism in wanted])

    run_client(go)
    for mechanism in wanted:
        click.echo(f"set the {mechanism} credential of user {name} ({iterations} iterations)")


@users_group.command("list")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: user -> mechanism -> iterations.")
@connection_options
def list_users(names: tuple[str, ...], as_json: bool, bootstrap: str, command_config: str | None) -> None:
    """The users holding SCRAM credentials (those named, or all), with mechanisms and iterations."""
    security = client_security(command_config)

    async def go() -> dict[str, dict[str, int]]:
        async with connect(bootstrap, security) as admin:
            return await admin.describe_scram(list(names) or None)

    found = run_client(go)
    if as_json:
        click.echo(json.dumps(found, indent=2, sort_keys=True))
    elif found:
        rows = [(user, m, str(n)) for user, infos in sorted(found.items()) for m, n in sorted(infos.items())]
        echo_table(("USER", "MECHANISM", "ITERATIONS"), rows)
    else:
        click.echo("no SCRAM users")


@users_group.command("remove")
@click.argument("name")
@_mechanism_option("The credential to delete (repeatable).")
@connection_options
def remove_user(name: str, mechanisms: tuple[str, ...], bootstrap: str, command_config: str | None) -> None:
    """Delete user NAME's SCRAM credential(s); a credential it does not have is an error."""
    wanted = [m.upper() for m in dict.fromkeys(mechanisms)]
    security = client_security(command_config)

    async def go() -> None:
        async with connect(bootstrap, security) as admin:
            await admin.alter_scram(deletions=[(name, mechanism) for mechanism in wanted])

    run_client(go)
    for mechanism in wanted:
        click.echo(f"removed the {mechanism} credential of user {name}")
