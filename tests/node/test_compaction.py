"""Compacted topics on a real node: the cleaner keeps the latest record per key, offsets unchanged."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.harness import NodeProcess, wait_for

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]


def topic_size(node: NodeProcess, topic: str, partition: int) -> int:
    with urllib.request.urlopen(f"{node.admin_url}/v1/topics/{topic}", timeout=10) as response:
        parts = json.loads(response.read())["partitions"]
    return int(next(p for p in parts if p["partition"] == partition)["size_bytes"])


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    wait_for(what, predicate, timeout)


def test_compacted_topic_keeps_the_latest_value_per_key(node_factory: NodeFactory) -> None:
    node = node_factory(1, **{"log.cleaner.backoff.ms": "200"})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic("latest", 1, 1, config=config)])["latest"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    latest: dict[bytes, bytes] = {}
    for i in range(400):
        key, value = f"k{i % 10}".encode(), f"v{i}-{'x' * 40}".encode()
        producer.produce("latest", value, key, partition=0)
        latest[key] = value
        if i % 20 == 19:
            producer.flush(10)
    producer.flush(10)
    full = topic_size(node, "latest", 0)
    wait_until(lambda: topic_size(node, "latest", 0) < full // 2, "the cleaner to shrink the log")

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "compaction-check"})
    seen: list[tuple[int, bytes, bytes]] = []
    try:
        consumer.assign([TopicPartition("latest", 0, OFFSET_BEGINNING)])
        while not seen or seen[-1][0] < 399:
            msg = consumer.poll(5)
            assert msg is not None, f"stalled after {len(seen)} records"
            assert msg.error() is None, msg.error()
            seen.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    offsets = [o for o, _, _ in seen]
    assert offsets == sorted(offsets) and offsets[-1] == 399  # offsets never change; gaps are where records went
    assert len(seen) < 400
    final = {}
    for _, key, value in seen:
        final[key] = value
    assert final == latest


def test_consumer_offsets_is_compacted_and_offsets_survive_it(node_factory: NodeFactory) -> None:
    node = node_factory(1, **{"log.cleaner.backoff.ms": "200", "offsets.topic.segment.bytes": "4096"})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("tracked", 1, 1)])["tracked"].result(30)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "busy-committer"})
    try:
        for i in range(300):
            consumer.commit(offsets=[TopicPartition("tracked", 0, i)], asynchronous=False)
    finally:
        consumer.close()
    partition = None
    with urllib.request.urlopen(f"{node.admin_url}/v1/topics/__consumer_offsets", timeout=10) as response:
        for p in json.loads(response.read())["partitions"]:
            if p["log_end_offset"] and p["log_end_offset"] >= 300:
                partition = p["partition"]
    assert partition is not None, "no __consumer_offsets partition holds the 300 commits"
    wait_until(
        lambda: topic_size(node, "__consumer_offsets", partition) < 300 * 60, "__consumer_offsets to be compacted"
    )
    node.restart(hard=True)
    check = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "busy-committer"})
    try:
        assert check.committed([TopicPartition("tracked", 0)], timeout=20)[0].offset == 299
    finally:
        check.close()
