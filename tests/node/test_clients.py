"""Every real client produces and consumes through a real node: codecs, keys, headers, order, acks.

One node per test module (topics are unique per test); each client reads back exactly what it
wrote, partition by partition and in order, and the watermarks the node reports match.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.clients import CLIENTS, Client, Read, Rec
from tests.node.harness import NodeProcess

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
_topic_ids = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[NodeProcess]:
    work: Path = tmp_path_factory.mktemp("clients")
    node = NodeProcess(1, work / "node1", f"{zookeeper}/t-clients-{time.time_ns()}", {"num.partitions": "3"})
    node.start()
    yield node
    node.stop()


def new_topic(node: NodeProcess, prefix: str, partitions: int = PARTITIONS) -> str:
    name = f"{prefix}-{next(_topic_ids)}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
    futures[name].result(30)
    return name


def records(n: int, *, with_headers: bool = True) -> list[Rec]:
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        p = i % PARTITIONS
        # Headers are constant per partition (kcat's -H applies to a whole run); partition 1 has none.
        headers = (("trace", f"t{p}".encode()), ("kind", b"test")) if with_headers and p != 1 else ()
        out.append(Rec(p, key, f"value-{i}-{'x' * (i % 50)}".encode(), headers))
    return out


def by_partition(items: list[Rec] | list[Read]) -> dict[int, list[tuple[bytes | None, bytes]]]:
    out: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for r in items:
        out.setdefault(r.partition, []).append((r.key, r.value))
    return out


def watermarks(node: NodeProcess, topic: str, partition: int) -> tuple[int, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "wm"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return low, high
    finally:
        c.close()


def check_roundtrip(client: Client, sent: list[Rec], got: list[Read]) -> None:
    assert len(got) == len(sent), f"{client.name}: read {len(got)} of {len(sent)} records"
    assert by_partition(got) == by_partition(sent)
    for p in range(PARTITIONS):
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(len(offsets))), f"partition {p} offsets not contiguous from 0"
    sent_headers = {(r.partition, r.value): r.headers for r in sent}
    for r in got:
        assert r.headers == sent_headers[(r.partition, r.value)]


@pytest.fixture(params=list(CLIENTS))
def client(request: pytest.FixtureRequest) -> Client:
    return CLIENTS[request.param]()  # type: ignore[no-any-return]


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec(broker: NodeProcess, client: Client, codec: str) -> None:
    topic = new_topic(broker, f"rt-{client.name}-{codec}")
    sent = records(120)
    offsets = client.produce(broker.bootstrap, topic, sent, codec=codec, acks="all", idempotent=False)
    got = client.consume(broker.bootstrap, topic, list(range(PARTITIONS)), len(sent))
    check_roundtrip(client, sent, got)
    if client.name != "kcat":  # kcat does not report offsets when producing
        per_partition: dict[int, int] = {}
        for rec, off in zip(sent, offsets, strict=True):
            assert off == per_partition.get(rec.partition, 0)
            per_partition[rec.partition] = off + 1
    counts = {p: len(v) for p, v in by_partition(sent).items()}
    for p, n in counts.items():
        assert watermarks(broker, topic, p) == (0, n)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: NodeProcess, client: Client, acks: str) -> None:
    topic = new_topic(broker, f"acks-{client.name}-{acks}")
    sent = records(60, with_headers=False)
    client.produce(broker.bootstrap, topic, sent, codec="none", acks=acks, idempotent=False)
    got = client.consume(broker.bootstrap, topic, list(range(PARTITIONS)), len(sent))
    check_roundtrip(client, sent, got)


@pytest.mark.parametrize("name", ["confluent-kafka", "kafka-python", "kcat"])
def test_idempotent_producer(broker: NodeProcess, name: str) -> None:
    client = CLIENTS[name]()
    topic = new_topic(broker, f"idem-{name}")
    sent = records(300, with_headers=False)
    client.produce(broker.bootstrap, topic, sent, codec="lz4", acks="all", idempotent=True)
    got = client.consume(broker.bootstrap, topic, list(range(PARTITIONS)), len(sent))
    check_roundtrip(client, sent, got)


def test_list_offsets_by_timestamp(broker: NodeProcess) -> None:
    from confluent_kafka import Consumer, Producer

    topic = new_topic(broker, "ts", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for i in range(50):
        producer.produce(topic, f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
        producer.flush(10)  # one batch per record: timestamps are looked up batch by batch
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts"})
    try:
        for i in (0, 1, 17, 49):
            found = consumer.offsets_for_times([TopicPartition(topic, 0, base + i * 1000)], timeout=10)
            assert found[0].offset == i
        between = consumer.offsets_for_times([TopicPartition(topic, 0, base + 17 * 1000 - 1)], timeout=10)
        assert between[0].offset == 17
        after = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10**6)], timeout=10)
        assert after[0].offset == -1  # Kafka: no record at or after that time -> end (-1)
    finally:
        consumer.close()


def offsets_for_time(client_name: str, bootstrap: str, topic: str, ts: int) -> int | None:
    """The offset each client's own API finds for a timestamp (None: no such record)."""
    if client_name == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        try:
            found = consumer.offsets_for_times({KTP(topic, 0): ts})[KTP(topic, 0)]
        finally:
            consumer.close()
        return None if found is None else found.offset
    if client_name == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def go() -> int | None:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
            await consumer.start()
            try:
                found = (await consumer.offsets_for_times({ATP(topic, 0): ts}))[ATP(topic, 0)]
            finally:
                await consumer.stop()
            return None if found is None else found.offset

        return asyncio.run(go())
    if client_name == "kcat":
        import subprocess

        done = subprocess.run(
            ["kcat", "-Q", "-b", bootstrap, "-t", f"{topic}:0:{ts}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        offset = int(done.stdout.split("offset")[1].split()[0])  # "<topic> [0] offset N"
        return None if offset < 0 else offset
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts"})
    try:
        offset = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0].offset
    finally:
        consumer.close()
    return None if offset < 0 else offset


@pytest.mark.parametrize("name", list(CLIENTS))
def test_each_client_finds_offsets_by_timestamp(broker: NodeProcess, name: str) -> None:
    from confluent_kafka import Producer

    topic = new_topic(broker, f"ts-{name}", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        producer.produce(topic, f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
        producer.flush(10)
    assert offsets_for_time(name, broker.bootstrap, topic, base + 4000) == 4
    assert offsets_for_time(name, broker.bootstrap, topic, base + 4500) == 5
    assert offsets_for_time(name, broker.bootstrap, topic, base + 10**6) is None


def test_kafka_python_idempotent_is_default(broker: NodeProcess) -> None:
    """kafka-python 3 turns idempotence on by default: InitProducerId must work for it."""
    from kafka import KafkaProducer

    topic = new_topic(broker, "kp-default", partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        meta = producer.send(topic, b"hello", partition=0).get(30)
        assert meta.offset == 0
        assert producer._transaction_manager is not None  # idempotence really was on
        assert producer._transaction_manager.producer_id_and_epoch.producer_id >= 0
    finally:
        producer.close(10)


NodeFactory = Callable[..., NodeProcess]
