"""``strait zookeeper start``: run an embedded ZooKeeper (from pyspark's jars) in the foreground."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

_LIVENESS_INTERVAL = 0.5  # how often the foreground loop checks that the JVM is still alive


@click.group("zookeeper")
def zookeeper() -> None:
    """Run a local ZooKeeper server for a strait site (production uses an external ensemble)."""


@zookeeper.command("start")
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, dir_okay=True, writable=True, path_type=Path),
    help="ZooKeeper's data dir (snapshots, transaction log, zoo.cfg, zookeeper.log); created if missing.",
)
@click.option(
    "--port",
    default=2181,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Client port; 0 picks a free one (see --ready-file).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on (clientPortAddress).")
@click.option(
    "--jars",
    envvar="STRAIT_ZOOKEEPER_JARS",
    show_envvar=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Dir holding zookeeper-*.jar and its dependencies [default: the installed pyspark's jars].",
)
@click.option(
    "--java", default="java", show_default=True, envvar="STRAIT_JAVA", show_envvar=True, help="The java executable."
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Once serving, write {"connect": "HOST:PORT", "pid": PID} here (atomically); removed on exit.',
)
def start_cmd(data_dir: Path, port: int, host: str, jars: Path | None, java: str, ready_file: Path | None) -> None:
    """Run ZooKeeper until SIGTERM or SIGINT (Ctrl-C), then stop it cleanly and exit 0.

    Exits 1 if ZooKeeper fails to start or dies on its own (printing its log tail).
    """
    # Imported here so that other `strait` commands do not pay for importing kazoo and trio.
    from node.coordination import (
        EmbeddedZooKeeper,
        ZooKeeperError,
        check_zookeeper_jars,
        find_zookeeper_jars,
    )

    try:
        jars_dir = check_zookeeper_jars(jars) if jars is not None else find_zookeeper_jars()
    except ZooKeeperError as exc:
        raise click.BadParameter(str(exc), param_hint="--jars") from exc
    try:
        server = EmbeddedZooKeeper(data_dir, port, host=host, jars=jars_dir, java=java)
    except ZooKeeperError as exc:
        raise click.UsageError(str(exc)) from exc

    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    # Installed before the JVM starts, so a signal during startup still ends in a clean stop.
    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            server.start()
        except ZooKeeperError as exc:
            raise click.ClickException(str(exc)) from exc
        try:
            if ready_file is not None:
                _write_ready_file(ready_file, server.connect_string)
            click.echo(
                f"ZooKeeper serving on {server.connect_string} (pid {server.pid}, data {data_dir}, "
                f"log {server.log_path}); stop with SIGTERM or Ctrl-C",
                err=True,
            )
            while not stop_requested.wait(_LIVENESS_INTERVAL):
                code = server.poll()
                if code is not None:
                    raise click.ClickException(
                        f"ZooKeeper on {server.connect_string} exited on its own with code {code}; "
                        f"see {server.log_path}"
                    )
        finally:
            server.stop()
            if ready_file is not None:
                with contextlib.suppress(FileNotFoundError):
                    ready_file.unlink()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo(f"ZooKeeper on {server.connect_string} stopped", err=True)


def _write_ready_file(path: Path, connect: str) -> None:
    """Write the ready file so readers never see it partial (:func:`node.proc.atomic_write`)."""
    from node.proc import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"connect": connect, "pid": os.getpid()}) + "\n")


if __name__ == "__main__":
    zookeeper(prog_name=f"{Path(sys.executable).name} -m strait._zookeeper_commands")
