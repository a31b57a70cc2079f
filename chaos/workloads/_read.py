"""The final read: every record a site holds, from each partition's log start to its high watermark.

:func:`final_read` is what the lost-write, moved, duplicate and mirror-divergence checkers trust
(``final: true``), so it either reads everything up to the ends it saw at its start or fails:
it records one ``read`` invoke, then one ``ok`` with ``site``, ``role``, ``final``, ``ends``
({"<topic>/<partition>": [log start, end]}) and every record, or a ``fail`` with ``error``
(and raises WorkloadError) when a topic is unknown or the read does not finish in time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from chaos.errors import WorkloadError
from chaos.history import History, Op

from ._outcomes import describe
from ._records import ConfigValue, Record, partition_key, reader_config, record_of

__all__ = ["final_read", "read_ends", "read_range"]

#: Most seconds one metadata or watermark request may take.
_REQUEST_S = 10.0


def final_read(
    bootstrap: str,
    topics: str | Sequence[str],
    history: History,
    *,
    site: str,
    role: str,
    timeout: float = 60.0,
    process: str = "final-read",
    config: Mapping[str, ConfigValue] | None = None,
) -> Op:
    """Read every partition of ``topics`` at ``bootstrap`` completely and record it; return the ``ok`` entry.

    ``role`` is "primary", "mirror" or "old-primary" (chaos-spec). Raises WorkloadError (after
    recording a ``fail`` read) if a topic has no metadata, or the read is not complete within
    ``timeout`` seconds.
    """
    names = [topics] if isinstance(topics, str) else list(topics)
    about: dict[str, Any] = {"site": site, "role": role, "topics": names}
    if len(names) == 1:
        about["topic"] = names[0]  # the history docstring's field, for a one-topic read
    invoked = history.invoke(process, "read", **about)
    deadline = time.monotonic() + timeout
    consumer: Consumer | None = None
    try:
        consumer = Consumer(reader_config(bootstrap, {"enable.partition.eof": True, **(config or {})}))
        ends = read_ends(consumer, names, deadline)
        records = read_range(consumer, ends, deadline)
    except (WorkloadError, KafkaException, RuntimeError, ValueError, TypeError) as exc:
        error = str(exc)
        history.complete(invoked, "fail", **about, final=True, error=error)
        raise WorkloadError(f"final read of {names} at {site} ({bootstrap}): {error}") from exc
    finally:
        if consumer is not None:
            consumer.close()
    recorded_ends = {partition_key(t, p): [low, high] for (t, p), (low, high) in sorted(ends.items())}
    return history.complete(invoked, "ok", **about, final=True, ends=recorded_ends, records=records)


def _remaining(deadline: float) -> float:
    return max(0.1, min(_REQUEST_S, deadline - time.monotonic()))


def read_ends(consumer: Consumer, topics: Sequence[str], deadline: float) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, high watermark) of every partition of ``topics``; WorkloadError naming what is missing."""
    ends: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in topics:
        described = consumer.list_topics(topic, timeout=_remaining(deadline)).topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            why = "no metadata" if described is None else (described.error or "no partitions")
            raise WorkloadError(f"topic {topic!r}: {why}")
        for partition in sorted(described.partitions):
            found = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=_remaining(deadline))
            if found is None:
                raise WorkloadError(f"{partition_key(topic, partition)}: no watermarks (timed out)")
            ends[(topic, partition)] = (int(found[0]), int(found[1]))
    return ends


def read_range(consumer: Consumer, ends: Mapping[tuple[str, int], tuple[int, int]], deadline: float) -> list[Record]:
    """Every record of each partition from its start to its end (exclusive), sorted by partition and offset.

    ``consumer`` needs ``enable.partition.eof`` (an end met before ``end``, for example after
    compaction or a transaction marker, is then known). Raises WorkloadError naming the
    partitions not read to their end by ``deadline``.
    """
    positions = {tp: low for tp, (low, _) in ends.items()}
    unfinished = {tp for tp, (low, high) in ends.items() if high > low}
    records: list[Record] = []
    last_error: KafkaError | None = None
    consumer.assign([TopicPartition(t, p, positions[(t, p)]) for t, p in sorted(unfinished)])
    while unfinished:
        if time.monotonic() >= deadline:
            behind = ", ".join(f"{partition_key(*tp)} at {positions[tp]} of {ends[tp][1]}" for tp in sorted(unfinished))
            last = f"; last error: {describe(last_error)}" if last_error is not None else ""
            raise WorkloadError(f"not read to the end in time: {behind}{last}")
        for message in consumer.consume(1000, min(0.5, max(0.0, deadline - time.monotonic()))):
            error = message.error()
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                last_error = error
                continue
            if topic is None or partition is None or offset is None or (topic, partition) not in ends:
                continue
            tp = (topic, partition)
            if error is None:
                if offset < ends[tp][1]:
                    records.append(record_of(message))
                positions[tp] = max(positions[tp], offset + 1)
            else:  # the end of the partition: its position is the offset reported
                positions[tp] = max(positions[tp], offset)
            if positions[tp] >= ends[tp][1]:
                unfinished.discard(tp)
    records.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return records
