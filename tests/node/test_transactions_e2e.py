"""Transactions end to end on a real 3-node site with confluent-kafka: a transactional producer's
committed records are read by read_committed consumers and its aborted ones never are; a
consume-transform-produce loop (``send_offsets_to_transaction``) moves input to output exactly
once, its group's offsets advancing only with the commits; a zombie is fenced by a new instance
with the same ``transactional.id``; a transaction left open is aborted by its timeout."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.harness import wait_for
from tests.node.test_replication import Site, bootstrap

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT_S = 30.0


def txn_producer(servers: str, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": servers, "transactional.id": transactional_id, "transaction.timeout.ms": 20_000} | extra
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def read_all(
    servers: str,
    topic: str,
    partitions: int,
    isolation: str,
    group: str | None = None,
    *,
    open_transaction: bool = False,
) -> list[bytes]:
    """Every record of ``topic`` from the start up to its high watermark (as read first) as
    ``isolation`` sees it.

    A read_committed reader first waits until the last stable offset has reached that high
    watermark: a commit returns once the coordinator has decided it, its markers follow (as in
    Kafka), so for a moment after ``commit_transaction`` its records are not yet readable. A
    topic still being written (a mirror copying) only needs the LSO to pass the first reading.
    With ``open_transaction`` (a test left one open on purpose, which holds the LSO below the high
    watermark) a read_committed reader reads up to the last stable offset as it is, not waiting.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group or f"reader-{topic}-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    # librdkafka's isolation.level defaults to read_committed, whose watermark query answers the
    # last stable offset: the high watermark needs read_uncommitted.
    uncommitted = Consumer(
        {"bootstrap.servers": servers, "group.id": "watermarks", "isolation.level": "read_uncommitted"}
    )
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]

        def ends(reader: Consumer) -> dict[int, int]:
            return {p: reader.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT_S)[1] for p in range(partitions)}

        high = ends(consumer if open_transaction and isolation == "read_committed" else uncommitted)
        if isolation == "read_committed" and not open_transaction:
            wait_for(
                f"{topic}: the last stable offset up to the high watermark read first",
                lambda: all(lso >= high[p] for p, lso in ends(consumer).items()),
            )
        consumer.assign(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            if all(positions[p] >= high[p] for p in range(partitions)):
                break
        return values
    finally:
        uncommitted.close()
        consumer.close()


def test_committed_records_are_read_and_aborted_ones_never(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("txn-out", 3, 3)])["txn-out"].result(30)
    producer = txn_producer(servers, "writer")
    for round_ in range(6):
        producer.begin_transaction()
        for i in range(20):
            producer.produce("txn-out", f"r{round_}-{i}".encode(), key=str(i).encode())
        if round_ % 2:
            assert producer.flush(TIMEOUT_S) == 0  # in the log first: an abort purges what is unsent
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
    committed = sorted(v for v in read_all(servers, "txn-out", 3, "read_committed"))
    assert committed == sorted(f"r{r}-{i}".encode() for r in (0, 2, 4) for i in range(20))
    everything = read_all(servers, "txn-out", 3, "read_uncommitted")
    assert len(everything) == 120  # the aborted records are in the log; markers are not records


def test_consume_transform_produce_is_exactly_once_and_a_zombie_is_fenced(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic("ctp-in", 2, 3), NewTopic("ctp-out", 2, 3)]).values():
        future.result(30)
    plain = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for i in range(100):
        plain.produce("ctp-in", str(i).encode(), key=str(i).encode())
    assert plain.flush(TIMEOUT_S) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "ctp",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["ctp-in"])
    producer = txn_producer(servers, "ctp-worker")
    moved = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    while moved < 100 and time.monotonic() < deadline:
        batch = consumer.consume(25, 0.5)
        batch = [m for m in batch if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for message in batch:
            producer.produce("ctp-out", message.value() + b"-out", key=message.key())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), TIMEOUT_S
        )
        if not aborted_once:
            # The first batch is aborted: its output never shows and the group goes back to re-read it.
            producer.abort_transaction(TIMEOUT_S)
            aborted_once = True
            committed = consumer.committed(consumer.assignment(), TIMEOUT_S)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            continue
        producer.commit_transaction(TIMEOUT_S)
        moved += len(batch)
    consumer.close()
    assert moved == 100
    out = read_all(servers, "ctp-out", 2, "read_committed")
    assert sorted(out) == sorted(f"{i}-out".encode() for i in range(100))  # each exactly once
    checker = Consumer({"bootstrap.servers": servers, "group.id": "ctp"})
    offsets = checker.committed([TopicPartition("ctp-in", p) for p in range(2)], TIMEOUT_S)
    checker.close()
    ends = sum(
        Consumer({"bootstrap.servers": servers, "group.id": "x"}).get_watermark_offsets(
            TopicPartition("ctp-in", p), TIMEOUT_S
        )[1]
        for p in range(2)
    )
    assert sum(tp.offset for tp in offsets) == ends == 100

    # A second instance with the same transactional.id fences the first.
    zombie = producer
    zombie.begin_transaction()
    zombie.produce("ctp-out", b"zombie")
    successor = txn_producer(servers, "ctp-worker")
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    successor.begin_transaction()
    successor.produce("ctp-out", b"successor")
    successor.commit_transaction(TIMEOUT_S)
    out = read_all(servers, "ctp-out", 2, "read_committed")
    assert b"zombie" not in out and b"successor" in out


def test_a_transaction_left_open_is_aborted_by_its_timeout(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("left", 1, 3)])["left"].result(30)
    producer = txn_producer(servers, "forgetful", **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    producer.produce("left", b"never committed")
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "lso", "isolation.level": "read_committed"})
    tp = TopicPartition("left", 0)
    # While it is open the last stable offset holds read_committed readers before it ...
    assert consumer.get_watermark_offsets(tp, TIMEOUT_S)[1] == 0
    # ... until the coordinator aborts it: the LSO passes the record and its abort marker.
    wait_for("the timeout's abort", lambda: consumer.get_watermark_offsets(tp, TIMEOUT_S)[1] == 2, timeout=30)
    consumer.close()
    assert read_all(servers, "left", 1, "read_committed") == []
