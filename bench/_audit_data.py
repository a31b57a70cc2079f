"""The audit benchmark's topic: made on east, filled fast, and mirrored whole to west before anything is timed.

- :func:`fill`: ``records`` records, round robin over the partitions, from one confluent-kafka
  producer with :data:`FILL_SETTINGS` (acks=all, idempotent, large batches, no compression);
  every record has a distinct 10-byte key, a ``value_bytes`` value (its sequence number, then
  bytes cut from a random pool at a moving place: no two values alike, nothing a codec could
  shrink) and one header; the producer's own timestamps (CreateTime).
- :func:`wait_mirrored`: until west's watermarks equal east's in every partition and east holds
  exactly the records produced; raises ``BenchError`` otherwise at the deadline.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from node.proc import Deadline

from ._clients import Deliveries, open_producer
from ._procs import POLL_S, BenchError

FILL_SETTINGS: dict[str, Any] = {
    "client.id": "strait-audit-bench-fill",
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 50,
    "batch.size": 1_000_000,  # under the nodes' message.max.bytes (1,048,588)
    "compression.type": "none",
    "queue.buffering.max.messages": 1_000_000,
}
HEADERS: list[tuple[str, str | bytes | None]] = [("source", b"audit-bench")]
KEY_BYTES = 10
WATERMARK_POLL_S = 0.5
_POOL_BYTES = 1 << 20
_SEQ_BYTES = 8


@dataclass(frozen=True)
class Filled:
    topic: str
    records: int
    seconds: float  # first produce() to the last delivery report

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "records": self.records, "seconds": round(self.seconds, 2)}


def fill(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int, timeout: float) -> Filled:
    """Produce the topic's records (see the module docstring); raises ``BenchError`` unless every one
    was acknowledged within ``timeout`` seconds of the last produce()."""
    if value_bytes < _SEQ_BYTES:
        raise BenchError(f"--value-bytes must be at least {_SEQ_BYTES} (each value starts with its sequence number)")
    pool = os.urandom(_POOL_BYTES)
    tail = value_bytes - _SEQ_BYTES
    span = _POOL_BYTES - tail
    deliveries = Deliveries()
    config = FILL_SETTINGS | {"bootstrap.servers": bootstrap, "on_delivery": deliveries.on_delivery}
    with open_producer(config) as producer:
        produce, poll = producer.produce, producer.poll
        started = time.perf_counter()
        for i in range(records):
            at = (i * 7919) % span
            value = i.to_bytes(_SEQ_BYTES, "big") + pool[at : at + tail]
            key = b"%0*d" % (KEY_BYTES, i)
            while True:
                try:
                    produce(topic, value, key, partition=i % partitions, headers=HEADERS)
                    break
                except BufferError:
                    poll(POLL_S)  # the local queue is full: serve delivery reports until there is room
            if not i & 4095:
                poll(0)
        left = producer.flush(timeout)
    if left or deliveries.failed or deliveries.delivered != records:
        raise BenchError(
            f"{deliveries.delivered:,} of {records:,} records delivered to {topic!r}, {left} still queued after "
            f"{timeout:g} s, failures: {dict(deliveries.failed)}"
        )
    return Filled(topic, records, deliveries.last - started)


def watermarks(consumer: Consumer, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Partition -> (low, high) on the consumer's site; raises ``KafkaException`` when it cannot say."""
    out = {}
    for p in range(partitions):
        out[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0, cached=False)
    return out


def _consumer(bootstrap: str, site: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "strait-audit-bench-watermarks", "client.id": f"audit-{site}"}
    )


def wait_mirrored(
    bootstraps: Mapping[str, str], topic: str, partitions: int, records: int, timeout: float
) -> dict[int, tuple[int, int]]:
    """Wait until west holds ``topic`` as east does (equal watermarks in every partition) and east holds
    ``records`` records; returns east's watermarks. Raises ``BenchError`` at the deadline, naming what
    each site held last."""
    east, west = _consumer(bootstraps["east"], "east"), _consumer(bootstraps["west"], "west")
    deadline = Deadline(timeout, f"west to hold all of {topic}")
    seen: dict[str, Any] = {}
    try:
        while True:
            try:
                seen["east"] = watermarks(east, topic, partitions)
                seen["west"] = watermarks(west, topic, partitions)
            except KafkaException as exc:
                seen["error"] = str(exc)  # west's mirror topic may not exist yet
            else:
                held = sum(high - low for low, high in seen["east"].values())
                if held != records:
                    raise BenchError(f"east holds {held:,} records of {topic}, {records:,} were produced")
                if seen["east"] == seen["west"]:
                    return dict(seen["east"])
            if deadline.expired():
                raise BenchError(f"west did not hold all of {topic} within {timeout:g} s; watermarks seen last {seen}")
            time.sleep(WATERMARK_POLL_S)
    finally:
        east.close()
        west.close()
