"""``strait up``: the local appliance on loopback (today one site, ``east``), until Ctrl-C.

The second site and the mirror between them arrive with the mirror service. Data lives under
``--data-dir`` (``east/zookeeper``, ``east/node<id>``) and survives restarts of ``strait up``.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("up")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".strait"),
    show_default=True,
    help="Where ZooKeeper and the nodes keep their data.",
)
@click.option("--nodes", type=click.IntRange(1, 9), default=1, show_default=True, help="Broker nodes in the site.")
@click.option("--zk-port", type=click.IntRange(0, 65535), default=0, help="ZooKeeper port (0: any free port).")
@click.option(
    "--base-port",
    type=click.IntRange(0, 65535),
    default=19092,
    show_default=True,
    help="Node N listens on base-port + N - 1 (0: any free port).",
)
def up(data_dir: Path, nodes: int, zk_port: int, base_port: int) -> None:
    """Start a local site and print its addresses; Ctrl-C stops everything cleanly."""
    from ._site import LocalSite, serve

    try:
        # `node{id}` (not `node-{id}`): where earlier versions of `strait up` kept the data.
        site = LocalSite(
            data_dir / "east",
            name="east",
            nodes=nodes,
            base_port=base_port,
            zookeeper_port=zk_port,
            node_dir="node{id}",
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    code = serve([site], click.echo)
    if code:
        raise SystemExit(code)
