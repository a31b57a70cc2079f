"""In-process brokers for tests of the node's ZooKeeper-driven parts (replica manager,
controller): a registered broker's ``ZkState`` and ``ClusterState`` over a real log dir, with
no server, fetchers or controller running unless the test starts them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from node.cluster import ClusterState
from node.config import NodeConfig
from node.coordination import BrokerRegistration, ZkState
from storage import LogManager


def broker_config(broker_id: int, zk_connect: str, tmp_path: Path, **extra: str) -> NodeConfig:
    """``broker.id``, ``zookeeper.connect``, a log dir under ``tmp_path``; ``extra`` keys with ``_`` for ``.``."""
    props = {
        "broker.id": str(broker_id),
        "zookeeper.connect": zk_connect,
        "log.dirs": str(tmp_path / f"broker{broker_id}"),
    } | {k.replace("_", "."): v for k, v in extra.items()}
    return NodeConfig.from_properties(props, source=f"broker{broker_id}.properties")


@asynccontextmanager
async def registered_broker(
    broker_id: int, zk_connect: str, tmp_path: Path, **extra: str
) -> AsyncIterator[tuple[ZkState, ClusterState, NodeConfig]]:
    """A broker registered in ZooKeeper whose cluster view has been read once, so that later
    states naming it leader are taken as roles (not as claims left by an earlier process)."""
    config = broker_config(broker_id, zk_connect, tmp_path, **extra)
    async with ZkState(zk_connect) as zk:
        await zk.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 1))
        logs = LogManager(config.log_dirs, config.log_config(), broker_id=broker_id)
        await trio.to_thread.run_sync(logs.startup)
        try:
            cluster = ClusterState(config, zk, logs)
            cluster.registered = True
            await cluster.refresh()
            yield zk, cluster, config
        finally:
            # Every partition's open files: without this each test of hundreds of partitions
            # left their descriptors open in the test process (the descriptor report found it).
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(logs.shutdown)
