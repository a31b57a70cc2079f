"""Two real single-node sites for replay's tests: ``east`` (the old primary) and ``west`` (the new one).

:func:`start_sites` starts one ``strait node`` per site (each its own ZooKeeper chroot on the
session's server). The records are produced with confluent-kafka with explicit partitions and
timestamps, so that "the same record" can be written on both sites; :func:`export` takes the
divergence export from east with failover's own code (``failover.export.export_divergence``),
as ``strait failover reverse`` does; :func:`read` reads a partition back whole.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from failover.export import export_dir, export_divergence
from node.client import SiteClient
from tests.node.harness import NodeProcess
from tests.spark_jobs.divergence_files import T0

DEADLINE_S = 60.0
LINK = "east-to-west"

#: (timestamp ms, key, value, headers): a record as both sites may hold it.
Record = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass
class Sites:
    east: NodeProcess
    west: NodeProcess

    def stop(self) -> None:
        for node in (self.east, self.west):
            node.stop()


def start_sites(directory: Path, zookeeper: str) -> Iterator[Sites]:
    """A generator for a fixture: yields both sites running and stops them afterwards."""
    nodes = []
    try:
        for name in ("east", "west"):
            node = NodeProcess(1, directory / name, f"{zookeeper}/t-{name}-{uuid.uuid4().hex}")
            nodes.append(node)
            node.start()
        yield Sites(*nodes)
    finally:
        for node in nodes:
            node.stop()


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics([NewTopic(topic, partitions, config=config or {})]).values()
    future.result(30)
    deadline = time.monotonic() + DEADLINE_S
    while True:  # every partition led before anyone produces to it
        described = admin.list_topics(topic, timeout=10).topics.get(topic)
        led = described is not None and all(p.leader >= 0 for p in described.partitions.values())
        if led and described is not None and len(described.partitions) == partitions:
            return
        assert time.monotonic() < deadline, f"{topic} has no leaders on {bootstrap}"
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, records: Sequence[tuple[int, Record]], **config: Any) -> None:
    """``(partition, record)`` pairs, in order, acks=all and idempotent; fails on any delivery error.
    A partition of -1 leaves it to the producer's partitioner (``config``)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **config})
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for partition, (ts, key, value, headers) in records:
        extra: dict[str, Any] = {} if partition < 0 else {"partition": partition}
        producer.produce(
            topic, value=value, key=key, timestamp=ts, headers=list(headers) or None, on_delivery=delivered, **extra
        )
    assert producer.flush(DEADLINE_S) == 0, "records still queued after the deadline"
    assert not errors, errors[:5]


def read(bootstrap: str, topic: str, partition: int) -> list[tuple[int, Record]]:
    """Every record of one partition up to its high watermark: (offset, (timestamp, key, value, headers))."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "replay-tests", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        got: list[tuple[int, Record]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < high - low:
            assert time.monotonic() < deadline, f"read {len(got)} of {high - low} records of {topic}-{partition}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            got.append((msg.offset(), (msg.timestamp()[1], msg.key(), msg.value(), headers)))
        return got
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "replay-tests"})
    try:
        consumer.list_topics(topic, timeout=10)  # metadata first, else UNKNOWN_PARTITION under load
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def export(
    sites: Sites, root: Path, ranges: dict[tuple[str, int], tuple[int, int]], *, epoch: int = 1
) -> tuple[Path, dict[str, Any]]:
    """East's ``[cut, end)`` of each partition exported exactly as ``strait failover reverse`` does."""
    directory = export_dir(root, LINK, epoch)

    async def run() -> dict[str, Any]:
        site = SiteClient("east", sites.east.bootstrap, client_id="replay-tests")
        try:
            return await export_divergence(site, ranges, directory, link=LINK, epoch=epoch, clock_ms=lambda: 0)
        finally:
            await site.aclose()

    return directory, trio.run(run)


@pytest.fixture(scope="module")
def replay_sites(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[Sites]:
    """East and west, one node each, for a test module (tests use topics of their own)."""
    yield from start_sites(tmp_path_factory.mktemp("replay-sites"), zookeeper)


def record(p: int, i: int) -> Record:
    """The i-th record of partition p: text and binary keys and values, a null key, a tombstone,
    headers with a null value."""
    key = None if i == 3 else b"k-%d-%d" % (p, i)
    value = None if i == 5 else (b"\xff\x00bin-%d" % i if i == 7 else b"v-%d-%d" % (p, i))
    headers: tuple[tuple[str, bytes | None], ...] = (("trace", b"t-%d" % i), ("none", None)) if i % 2 == 0 else ()
    return (T0 + 1000 * i + p, key, value, headers)


@dataclass
class Scenario:
    """A failover on ``topic`` (2 partitions): east holds 12 records per partition, west the
    first 8 (the cut); after the failover a client re-sent records 8 and 9 of partition 0 to
    west and wrote one new record to partition 1. The export is east's [8, 12)."""

    topic: str
    root: Path  # the export root (DIR of ``reverse --export DIR``)
    new_record: Record

    def expected(self, p: int) -> list[Record]:
        """What west's partition p holds once the export is replayed."""
        if p == 0:
            return [record(0, i) for i in range(12)]
        return [record(1, i) for i in range(8)] + [self.new_record] + [record(1, i) for i in range(8, 12)]


def failed_over(sites: Sites, root: Path, topic: str) -> Scenario:
    for node in (sites.east, sites.west):
        create_topic(node.bootstrap, topic, 2)
    produce(sites.east.bootstrap, topic, [(p, record(p, i)) for p in (0, 1) for i in range(12)])
    produce(sites.west.bootstrap, topic, [(p, record(p, i)) for p in (0, 1) for i in range(8)])
    new_record: Record = (T0 + 99_000, b"after-failover", b"new", ())
    produce(sites.west.bootstrap, topic, [(0, record(0, 8)), (0, record(0, 9)), (1, new_record)])
    export(sites, root, {(topic, p): (8, 12) for p in (0, 1)})
    return Scenario(topic, root, new_record)
