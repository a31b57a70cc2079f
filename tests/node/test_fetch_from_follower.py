"""Fetch from follower (KIP-392) on a real 3-node site with confluent-kafka: each node in its own
rack (``broker.rack`` r1..r3); with Kafka's rack-aware ``replica.selector.class`` a consumer whose
``client.rack`` is a follower's rack is sent there by the leader (``preferred_read_replica``) and
reads every record from that follower, in order; without the selector, or from the leader's own
rack, it reads from the leader. librdkafka's statistics name the broker each partition is fetched
from."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.test_replication import Site, bootstrap

pytestmark = [pytest.mark.integration]

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = {i: {"broker.rack": f"r{i}"} for i in (1, 2, 3)}
RECORDS = 200
TIMEOUT_S = 30.0


def start(site: Site, topic: str, **extra: str) -> str:
    """A site of three racks with ``topic`` (one partition on replicas 1, 2, 3: node 1 leads) holding
    RECORDS records; returns its bootstrap servers."""
    nodes = site(3, per_node=RACKS, **extra)
    servers = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(topic, str(i).encode())
    assert producer.flush(TIMEOUT_S) == 0
    return servers


def consume(servers: str, topic: str, rack: str) -> tuple[list[bytes], list[dict[str, Any]]]:
    """Every record of ``topic`` read by a consumer in ``rack``, and the partition's statistics
    (which broker it was fetched from, and the leader) as librdkafka reported them meanwhile."""
    stats: list[dict[str, Any]] = []

    def on_stats(raw: str) -> None:
        partition = json.loads(raw)["topics"].get(topic, {}).get("partitions", {}).get("0")
        if partition is not None:
            stats.append(partition)

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"ffr-{rack}-{time.monotonic_ns()}",
            "client.rack": rack,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "statistics.interval.ms": 100,
            "stats_cb": on_stats,
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        # One more statistics report after the last record.
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            consumer.poll(0.1)
    finally:
        consumer.close()
    return values, stats


def fetched_from(stats: list[dict[str, Any]]) -> set[int]:
    """The brokers the partition was fetched from while it had a fetch broker."""
    return {s["broker"] for s in stats if s.get("broker", -1) >= 0}


def test_a_consumer_in_a_followers_rack_reads_every_record_from_that_follower(site: Site) -> None:
    servers = start(site, "ffr", replica_selector_class=SELECTOR)
    values, stats = consume(servers, "ffr", "r3")
    assert values == [str(i).encode() for i in range(RECORDS)]
    assert stats and stats[-1]["leader"] == 1
    assert stats[-1]["broker"] == 3, stats[-1]  # sent by the leader to the replica in rack r3


def test_without_the_selector_or_in_the_leaders_rack_the_leader_serves(site: Site) -> None:
    servers = start(site, "plain")
    values, stats = consume(servers, "plain", "r3")
    assert values == [str(i).encode() for i in range(RECORDS)]
    assert fetched_from(stats) == {1}


def test_a_consumer_in_the_leaders_rack_stays_on_the_leader(site: Site) -> None:
    servers = start(site, "home", replica_selector_class=SELECTOR)
    values, stats = consume(servers, "home", "r1")
    assert values == [str(i).encode() for i in range(RECORDS)]
    assert fetched_from(stats) == {1}
