"""``strait node start``: run one broker node in the foreground."""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click
import trio

if TYPE_CHECKING:
    from node.config import NodeConfig

log = logging.getLogger("strait.cli")


@click.group("node", help="Run a broker node.")
def node_group() -> None:
    pass


@node_group.command("start")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="server.properties with Kafka's key names (see docs/configuration.md).",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write JSON with the bound addresses here once the node serves.",
)
def start(config_path: Path, ready_file: Path | None) -> None:
    """Run a node until SIGTERM or SIGINT, then shut down cleanly."""
    from node.config import ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    # `strait` restores SIGPIPE's default for pipelines into `head`; a server must not die when
    # a client goes away mid-response: writes then fail with EPIPE and close that connection.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    root = logging.getLogger()
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
    from node.coordination import CoordinationError
    from node.tls import TlsError
    from storage import StorageError

    try:
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(_run, config, ready_file)
    except BaseExceptionGroup as group:
        leaf = _single_leaf(group)
        if isinstance(leaf, CoordinationError | StorageError | TlsError | ConfigError | OSError):
            raise click.ClickException(f"node {config.broker_id} stopped: {leaf}") from None
        raise


def _single_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _run(config: NodeConfig, ready_file: Path | None) -> None:
    from node.broker import Broker, write_ready_file

    broker = Broker(config)
    broker.metrics.watch_gc()  # the process is the node's: its collections are the node's pauses
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                async for signum in signals:
                    log.info("received %s: shutting down", signal.Signals(signum).name)
                    break
                else:
                    return
                # Controlled shutdown while still serving; a second signal stops at once.
                async with trio.open_nursery() as inner:

                    async def second_signal() -> None:
                        async for _ in signals:
                            log.warning("second signal: stopping without waiting for controlled shutdown")
                            inner.cancel_scope.cancel()
                            return

                    inner.start_soon(second_signal)
                    if broker.status == "ok":
                        await broker.controlled_shutdown()
                    inner.cancel_scope.cancel()
                nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_signal)
            info = await nursery.start(broker.run)
            # What start-up made (the code, the logs' and the cluster's state) lives as long as the
            # process: out of the collector's way, a full collection scans only what serving
            # makes. Over every object of a loaded node one took 50-150 ms (issue 19), a pause of
            # every request in flight. Only in the node's own process: frozen objects that later
            # form garbage cycles are never collected.
            gc.collect()
            gc.freeze()
            if ready_file is not None:
                write_ready_file(ready_file, info)
