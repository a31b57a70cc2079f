"""``strait site up``: one local site (an embedded ZooKeeper and N broker nodes) in the foreground;
``strait site revive``: bring a lost site of the running ``strait up`` back."""

from __future__ import annotations

from pathlib import Path

import click

from ._up_command import appliance_dir_option


@click.group("site", help="Run a local site (ZooKeeper and broker nodes on loopback); bring a lost one back.")
def site_group() -> None:
    pass


@site_group.command("up")
@click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The site's directory (ZooKeeper, node-<id>/, site.json); reuse it to restart the site with its data.",
)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True, help="Broker nodes (ids 1..N).")
@click.option(
    "--base-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Node N listens on base-port + N - 1 (0: each node binds a free port).",
)
@click.option("--zk-port", type=click.IntRange(0, 65535), default=0, show_default=True, help="ZooKeeper port (0: any).")
@click.option("--name", default="east", show_default=True, help="The site's name; also its ZooKeeper chroot (/<name>).")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A server.properties key for every node, e.g. --set num.partitions=6 (repeatable; checked before start).",
)
def up(directory: Path, nodes: int, base_port: int, zk_port: int, name: str, settings: tuple[str, ...]) -> None:
    """Start the site, print its bootstrap servers and admin URLs (also written to DIR/site.json)
    once every node is ready, and run until Ctrl-C or SIGTERM; then stop the nodes (controlled
    shutdown, one at a time) and ZooKeeper. A second Ctrl-C kills what is left.

    Replication follows the site's size: default.replication.factor and
    offsets.topic.replication.factor min(3, N), min.insync.replicas min(2, N); --set overrides
    these and sets any other node key (not the ids, listeners, log dirs or zookeeper.connect,
    which the site sets for each node).
    """
    from ._launcher import serve
    from ._site import LocalSite, parse_settings

    try:
        properties = parse_settings(settings)
        site = LocalSite(
            directory, name=name, nodes=nodes, base_port=base_port, zookeeper_port=zk_port, properties=properties
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    code = serve([site], click.echo)
    if code:
        raise SystemExit(code)


@site_group.command("revive")
@click.argument("site_name", metavar="SITE")
@appliance_dir_option("The --dir of the running `strait up`.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1.0),
    default=60.0,
    show_default=True,
    help="Seconds to wait for the site to serve again.",
)
def revive(site_name: str, directory: Path, timeout: float) -> None:
    """Bring a lost site of the running `strait up` back, on its own data and on the same ports.

    `strait up` starts the site's processes that exited (its ZooKeeper, its nodes, or both) again
    itself, so they are its children like the rest and its Ctrl-C stops them; this command asks it
    to and waits until the site serves again (about one ZooKeeper session timeout after a kill -9).
    Clients, the mirror and appliance.json keep the addresses they have.

    Exit codes: 0 the site is back; 1 it could not be brought back (the reason is printed) or no
    answer within --timeout; 2 bad usage: no `strait up` runs in DIR, SITE is not one of its
    sites, or SITE is not lost.
    """
    from ._control import ControlError, NoLauncher, ask

    def progress(message: str) -> None:
        click.echo(message, err=True)

    try:
        answer = ask(directory, "revive", site_name, timeout, progress)
    except NoLauncher as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    except (ControlError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    if answer.state == "done":
        click.echo(answer.message)
        return
    click.echo(f"error: {answer.message}", err=True)
    raise SystemExit(2 if answer.state == "refused" else 1)
