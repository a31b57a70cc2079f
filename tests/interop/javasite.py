"""The three-node site the Java client tests drive, and the helpers they share.

``conftest.java_site`` starts one per test module (module scope: every test uses its own topics
and groups); the Java programs print JSON lines that :func:`lines` parses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.harness import NodeProcess, wait_for

# As tests/node/conftest.py's ``site``: three replicas of everything, quick fault detection.
SITE_PROPS = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "replica.lag.time.max.ms": "5000",
    "num.partitions": "3",
}


@contextmanager
def three_node_site(work: Path, zookeeper: str, props: dict[str, str] | None = None) -> Iterator[list[NodeProcess]]:
    """Three nodes (broker ids 1..3) in a ZooKeeper chroot of their own, with ``props`` over
    SITE_PROPS; stopped on leaving, also on failure."""
    chroot = f"{zookeeper}/t-java-{time.time_ns()}"
    nodes = [NodeProcess(i, work / f"node{i}", chroot, SITE_PROPS | (props or {})) for i in (1, 2, 3)]
    try:
        for n in nodes:
            n.start()
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def bootstrap(nodes: list[NodeProcess]) -> str:
    return ",".join(n.bootstrap for n in nodes)


def create_topic(nodes: list[NodeProcess], topic: str, partitions: int = 3) -> None:
    """Create ``topic`` (replication factor 3) with confluent-kafka and wait until every node knows its leaders."""
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    admin.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=30)[topic].result(30)

    def known_everywhere() -> bool:
        for n in nodes:
            md = AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(topic, timeout=10)
            found = md.topics[topic]
            if found.error is not None or len(found.partitions) != partitions:
                return False
            if any(p.leader < 0 for p in found.partitions.values()):
                return False
        return True

    wait_for(f"topic {topic} on every node", known_everywhere)


def lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects a Java program printed, one a line (other output is skipped)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
