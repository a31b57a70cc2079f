"""``strait up``: a local site on loopback (an embedded ZooKeeper and broker nodes), until Ctrl-C.

Today this is one site; the second site and the mirror between them arrive with the mirror
service. Data lives under ``--data-dir`` and survives restarts of ``strait up``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

READY_TIMEOUT_S = 60.0


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
    help="Node N listens on base-port + N - 1 (0: any free port). ",
)
def up(data_dir: Path, nodes: int, zk_port: int, base_port: int) -> None:
    """Start a local site and print its addresses; Ctrl-C stops everything cleanly."""
    from rich.console import Console
    from rich.table import Table

    from node.coordination import EmbeddedZooKeeper, ZooKeeperError

    console = Console()
    data_dir = data_dir.absolute()
    zk = EmbeddedZooKeeper(data_dir / "east" / "zookeeper", zk_port)
    try:
        zk.start()
    except ZooKeeperError as exc:
        raise click.ClickException(str(exc)) from None
    procs: list[subprocess.Popen[bytes]] = []
    stop = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        table = Table(title="strait: site east")
        for column in ("node", "bootstrap", "admin", "log"):
            table.add_column(column)
        for broker_id in range(1, nodes + 1):
            port = base_port + broker_id - 1 if base_port else 0
            info, proc = _start_node(
                data_dir / "east" / f"node{broker_id}", broker_id, f"{zk.connect_string}/east", port
            )
            procs.append(proc)
            table.add_row(
                str(broker_id),
                info["bootstrap"],
                info["admin_url"],
                str(data_dir / "east" / f"node{broker_id}" / "node.log"),
            )
        console.print(table)
        console.print(f"ZooKeeper {zk.connect_string} (chroot /east). Press Ctrl-C to stop.")
        while not stop:
            for proc in procs:
                if proc.poll() is not None:
                    raise click.ClickException(f"a node exited with code {proc.returncode}; see its node.log")
            time.sleep(0.2)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        zk.stop()
        console.print("stopped")


def _start_node(
    workdir: Path, broker_id: int, zk_connect: str, port: int
) -> tuple[dict[str, str], subprocess.Popen[bytes]]:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "server.properties"
    config.write_text(
        f"broker.id={broker_id}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={workdir / 'd1'},{workdir / 'd2'}\n"
        f"zookeeper.connect={zk_connect}\n"
        "strait.admin.listener=127.0.0.1:0\n"
        # One replica until replication between nodes exists (then min(3, nodes)).
        "offsets.topic.replication.factor=1\n"
    )
    ready = workdir / "ready.json"
    ready.unlink(missing_ok=True)
    with (workdir / "node.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "strait.cli", "node", "start", "--config", str(config), "--ready-file", str(ready)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise click.ClickException(f"node {broker_id} did not start; see {workdir / 'node.log'}")
        time.sleep(0.05)
    return json.loads(ready.read_text()), proc
