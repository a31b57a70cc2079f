"""Produce and read back with confluent-kafka (librdkafka), bounded by deadlines; no consumer group."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

DEADLINE_S = 60.0


def produce(bootstrap: str, topic: str, values: list[bytes], *, partitions: int = 1) -> None:
    """acks=all, idempotent; fails the test on any delivery error."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def delivered(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))

    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(DEADLINE_S) == 0, "records still queued after the deadline"
    assert not errors, errors[:5]


def read_all(bootstrap: str, topic: str, *, partitions: int = 1) -> tuple[dict[int, tuple[int, int]], list[bytes]]:
    """Every partition's (low, high) watermarks and all values up to the high watermarks, in
    partition then offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strait-cli-tests", "enable.auto.commit": False})
    try:
        marks = {p: _watermarks(consumer, topic, p) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + DEADLINE_S
        while any(len(got[p]) < marks[p][1] - marks[p][0] for p in got):
            assert time.monotonic() < deadline, f"read {[len(v) for v in got.values()]} of {marks}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got[msg.partition()].append(msg.value())
        return marks, [value for p in sorted(got) for value in got[p]]
    finally:
        consumer.close()


def _watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    """Retried: just after a site (re)starts, a partition may be between leaders for a moment."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            return low, high
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)
