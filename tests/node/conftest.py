"""Fixtures that start real broker nodes against the session's ZooKeeper (one chroot per test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.node.harness import NodeProcess


@pytest.fixture
def node_factory(tmp_path: Path, zk_connect: str) -> Iterator[Callable[..., NodeProcess]]:
    started: list[NodeProcess] = []

    def make(broker_id: int = 1, **extra: str) -> NodeProcess:
        props = {k.replace("_", "."): v for k, v in extra.items()}
        node = NodeProcess(broker_id, tmp_path / f"node{broker_id}", zk_connect, props)
        started.append(node)
        return node.start()

    yield make
    for node in started:
        node.stop()


@pytest.fixture
def node(node_factory: Callable[..., NodeProcess]) -> NodeProcess:
    return node_factory(1)


# A three-node site that notices faults quickly: 6 s ZooKeeper sessions, 5 s replica lag.
SITE_PROPS = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "replica.lag.time.max.ms": "5000",
    "controlled.shutdown.retry.backoff.ms": "500",
}


@pytest.fixture
def site(node_factory: Callable[..., NodeProcess]) -> Callable[..., list[NodeProcess]]:
    """``site(n=3, per_node={id: props}, **props)`` starts n nodes (broker ids 1..n) in one chroot.

    One after the other from this thread: the nodes' parent-death signal is tied to the thread
    that started them, so a worker thread would take them down when it exits."""

    def make(n: int = 3, per_node: dict[int, dict[str, str]] | None = None, **extra: str) -> list[NodeProcess]:
        props = {k.replace(".", "_"): v for k, v in SITE_PROPS.items()} | extra
        nodes = []
        for i in range(1, n + 1):
            own = {k.replace(".", "_"): v for k, v in (per_node or {}).get(i, {}).items()}
            nodes.append(node_factory(i, **(props | own)))
        return nodes

    return make
