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
