"""Kafka's Java client 4.3 on the data path at its newest versions: its producer sends Produce v11,
its consumer fetches with incremental fetch sessions (KIP-227) at Fetch v17 by topic id, and
everything it produced is read back exactly once, in order."""

from __future__ import annotations

import re
import urllib.request
import uuid

import pytest

from tests.interop.conftest import KafkaJava
from tests.interop.javasite import bootstrap, create_topic, lines
from tests.node.harness import NodeProcess

pytestmark = pytest.mark.integration

_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def samples(node: NodeProcess, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of ``name`` in the node's /metrics, as (labels, value)."""
    with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is not None and match["name"] == name:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
            found.append((labels, float(match["value"])))
    return found


def total(nodes: list[NodeProcess], name: str, **labels: str) -> float:
    return sum(
        value
        for node in nodes
        for found, value in samples(node, name)
        if all(found.get(k) == v for k, v in labels.items())
    )


def test_java_consumer_reads_through_incremental_fetch_sessions(
    java_site: list[NodeProcess], kafka_java: KafkaJava
) -> None:
    topic = f"sessions-{uuid.uuid4().hex[:8]}"
    create_topic(java_site, topic, partitions=6)
    before = total(java_site, "strait_fetch_requests_total", session="incremental")
    sent = lines(kafka_java.run("ClientProduce", bootstrap(java_site), topic, 600, "lz4").stdout)
    assert sent[-1] == {"sent": 600}
    read = lines(kafka_java.run("ClientConsume", "read", bootstrap(java_site), topic, "read_uncommitted").stdout)
    got = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in read[:-1]}
    assert got == {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in sent[:-1]}
    assert len(read) - 1 == 600  # exactly once

    java = {"client": "apache-kafka-java"}
    assert total(java_site, "strait_client_requests_total", api="Produce", version="11", **java) > 0
    assert total(java_site, "strait_client_requests_total", api="Fetch", version="17", **java) > 0
    assert total(java_site, "strait_fetch_requests_total", session="full") > 0
    assert total(java_site, "strait_fetch_requests_total", session="incremental") > before
    assert total(java_site, "strait_request_errors_total", api="Fetch") == 0
