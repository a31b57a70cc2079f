"""``strait up``: the local appliance on loopback, until Ctrl-C.

Two sites, ``east`` and ``west`` (an embedded ZooKeeper and three nodes each), and a mirror
east -> west for every non-internal topic and every group. Data lives under ``--dir``
(``east/``, ``west/``, ``mirror/``) and survives restarts; ``DIR/appliance.json`` holds every
address while it runs. ``--secure`` runs the same appliance secured end to end (TLS, SASL/SCRAM,
ACLs, ZooKeeper digest; see strait/_appliance_security.py and docs/secure-appliance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click


def appliance_dir_option(help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--dir DIR`` (default ``.strait``): the appliance directory, for ``strait up`` and the
    commands that talk to a running one."""
    return click.option(
        "--dir",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(".strait"),
        show_default=True,
        help=help_text,
    )


@click.command("up")
@appliance_dir_option("Where the sites and the mirror keep their data (reused on the next start).")
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True, help="Broker nodes per site.")
@click.option(
    "--base-port",
    type=click.IntRange(0, 65535),
    default=19092,
    show_default=True,
    help="east's node N listens on base-port + N - 1, west's on base-port + 100 + N - 1 (0: any free ports).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A server.properties key for every node, e.g. --set num.partitions=6 (repeatable; checked before start).",
)
@click.option(
    "--secure",
    is_flag=True,
    help="Secure everything: SASL_SSL listeners (SCRAM), ACLs, HTTPS admin APIs, ZooKeeper digest; "
    "secrets made once in DIR/secrets, client settings written to DIR/client.properties and DIR/admin.properties.",
)
def up(directory: Path, nodes: int, base_port: int, settings: tuple[str, ...], secure: bool) -> None:
    """Start two local sites (east, west) and a mirror east -> west; Ctrl-C stops everything.

    --set KEY=VALUE sets a server.properties key on every node of both sites. --secure runs them
    secured (a directory stays in the mode it was made in).
    """
    from ._appliance import Appliance
    from ._appliance_security import ApplianceSecurity, SecurityError, check_mode, check_secured_settings
    from ._launcher import serve
    from ._site import parse_settings

    if base_port and base_port + 100 + nodes > 65536:
        raise click.BadParameter(f"{base_port} leaves no room for west's ports (base-port + 100 + {nodes})")
    try:
        check_mode(directory, secure)
        properties = parse_settings(settings)
        if secure:
            check_secured_settings(properties)
        # Every setting is checked before anything is made (the secured appliance's secrets too).
        appliance = Appliance(directory, nodes=nodes, base_port=base_port, properties=properties)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if secure:
        try:
            security, created = ApplianceSecurity.prepare(
                directory, {site: range(1, nodes + 1) for site in ("east", "west")}
            )
        except SecurityError as exc:
            raise click.ClickException(str(exc)) from None
        made = f"made {len(created)} new file(s)" if created else "reused"
        click.echo(f"secrets: {made} in {security.material.directory}")
        try:
            appliance = Appliance(directory, nodes=nodes, base_port=base_port, properties=properties, security=security)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    code = serve(
        [appliance.east, appliance.west, appliance.mirror],
        click.echo,
        on_ready=lambda: appliance.ready(click.echo),
        on_tick=lambda stop_requested: appliance.tick(stop_requested, click.echo),
        on_stop=appliance.removed,
    )
    if code:
        raise SystemExit(code)
