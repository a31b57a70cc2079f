"""One-node sites for the workload tests, each in its own ZooKeeper chroot, always stopped."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.node.harness import NodeProcess


@pytest.fixture
def site(tmp_path: Path, zookeeper: str) -> Iterator[Callable[[str], NodeProcess]]:
    """``site(name)`` starts a one-node site (broker id 1) in a chroot of its own and returns its node."""
    started: list[NodeProcess] = []

    def make(name: str) -> NodeProcess:
        node = NodeProcess(1, tmp_path / name, f"{zookeeper}/{name}-{uuid.uuid4().hex}")
        started.append(node)
        return node.start()

    yield make
    for node in started:
        node.stop()
