"""Two local sites for mirror tests: ``east`` and ``west``, each three real nodes in its own chroot."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.node.conftest import SITE_PROPS
from tests.node.harness import NodeProcess


@dataclass
class Site:
    name: str
    zk_connect: str
    nodes: list[NodeProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.running)


@pytest.fixture
def two_sites(tmp_path: Path, zookeeper: str) -> Iterator[tuple[Site, Site]]:
    started: list[NodeProcess] = []
    sites = []
    try:
        for name in ("east", "west"):
            connect = f"{zookeeper}/{name}-{uuid.uuid4().hex}"
            nodes = []
            for broker_id in (1, 2, 3):
                node = NodeProcess(broker_id, tmp_path / name / f"node{broker_id}", connect, dict(SITE_PROPS))
                started.append(node)
                nodes.append(node.start())
            sites.append(Site(name, connect, nodes))
        yield sites[0], sites[1]
    finally:
        for node in started:
            node.stop()
