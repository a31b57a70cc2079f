"""pytest plugin: one real ZooKeeper for the whole session, a fresh chroot per test.

``zookeeper`` (session): an :class:`EmbeddedZooKeeper` on a free loopback port, started on first
use and stopped at the end of the session; yields its connect string (``127.0.0.1:PORT``).

``zk_connect`` (function): ``127.0.0.1:PORT/t-<uuid>``, a chroot no other test uses, so tests
share the server without seeing each other's znodes (TESTING.md). The chroot is created by
whoever connects first (``ZkState`` does it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from node.coordination import EmbeddedZooKeeper


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"), port=0)
    server.start()
    try:
        yield server.connect_string
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: str) -> str:
    return f"{zookeeper}/t-{uuid.uuid4().hex}"
