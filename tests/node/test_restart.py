"""Restarts keep every acknowledged record: a clean stop (SIGTERM) and kill -9."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.node.harness import NodeProcess
from tests.node.raw import produce_raw

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]


def produce_acked(bootstrap: str, topic: str, n: int, start: int = 0, **conf: object) -> list[tuple[int, bytes]]:
    """Produce n records and return (offset, value) for every one that was acknowledged."""
    acked: list[tuple[int, bytes]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, **conf})

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.offset(), msg.value()))

    for i in range(start, start + n):
        producer.produce(topic, f"record-{i}".encode(), partition=0, on_delivery=on_delivery)
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def read_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-check", "enable.auto.commit": False})
    out: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        misses = 0
        while len(out) < expected and misses < 50:
            msg = consumer.poll(0.2)
            if msg is None:
                misses += 1
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_restart_keeps_acknowledged_records(node_factory: NodeFactory, hard: bool) -> None:
    node = node_factory(1)
    topic = "durable"
    first = produce_acked(node.bootstrap, topic, 2000)
    assert len(first) == 2000
    node.restart(hard=hard)
    second = produce_acked(node.bootstrap, topic, 500, start=2000)
    everything = read_all(node.bootstrap, topic, 2500)
    assert sorted(first + second) == everything
    assert [o for o, _ in everything] == list(range(2500))
    if not hard:
        assert "stopped cleanly" in node.log_path.read_text()


def test_idempotent_producer_state_survives_restart(node_factory: NodeFactory) -> None:
    """A producer id's sequence is remembered across a kill -9: a replayed batch is a duplicate."""
    from kafka import KafkaProducer

    node = node_factory(1)
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, enable_idempotence=True, acks="all")
    try:
        assert producer.send("idem-restart", b"a", partition=0).get(30).offset == 0
        assert producer.send("idem-restart", b"b", partition=0).get(30).offset == 1
        pid_epoch = producer._transaction_manager.producer_id_and_epoch
    finally:
        producer.close(10)
    node.restart(hard=True)
    # Replay the second batch by hand with the same producer id, epoch and sequence.
    replay = produce_raw(
        node.bootstrap, "idem-restart", 0, [b"b"], pid=pid_epoch.producer_id, epoch=pid_epoch.epoch, seq=1
    )
    assert replay.error_code == 0 and replay.base_offset == 1  # the original offset, not appended again
    pid, epoch = pid_epoch.producer_id, pid_epoch.epoch
    gap = produce_raw(node.bootstrap, "idem-restart", 0, [b"x"], pid=pid, epoch=epoch, seq=5)
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    bumped = produce_raw(node.bootstrap, "idem-restart", 0, [b"c"], pid=pid, epoch=epoch + 1, seq=0)
    assert bumped.error_code == 0 and bumped.base_offset == 2
    stale = produce_raw(node.bootstrap, "idem-restart", 0, [b"x"], pid=pid, epoch=epoch, seq=2)
    assert stale.error_code == 47  # INVALID_PRODUCER_EPOCH
    assert [v for _, v in read_all(node.bootstrap, "idem-restart", 3)] == [b"a", b"b", b"c"]
