"""The audit benchmark's baseline: what a user would write instead of the reconcile job.

One Python process, two confluent-kafka consumers (one per site), the topic read **partition
by partition**: each consumer is ``assign()``\\ ed the partition from its own site's low
watermark, records come in batches of ``consume(num_messages=BATCH)``, and the two streams are
merged by offset (an offset-preserving mirror keeps them equal). Records at the same offset
are compared by key, value, headers and timestamp (type and value); an offset on one side only
is missing (source only) or extra (target only). No consumer group is used (``assign``, no
commits), each site's range is its watermarks when the partition starts.

Run by ``bench.audit_bench`` as a child process, so that its memory and CPU are its own::

    python -m bench._audit_loop --source HOST:PORT --target HOST:PORT --topic T --out RESULT.json

``RESULT.json`` gets the counts per partition and in total; exit status 0 when every record
matched, 1 when something differs, 2 when a site failed (the message on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

BATCH = 10_000  # records per consume() call
POLL_S = 1.0  # consume()'s timeout
STALL_S = 60.0  # a side that returns nothing for this long while records are due has failed
CONSUMER_SETTINGS = {
    "group.id": "strait-audit-bench-loop",  # required by the client; no group API is used
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
}


class LoopError(Exception):
    """A site did not answer or reported an error; the message names the site and partition."""


@dataclass
class PartitionCounts:
    partition: int
    source_range: tuple[int, int]
    target_range: tuple[int, int]
    source_records: int = 0
    target_records: int = 0
    compared: int = 0
    matched: int = 0
    different: int = 0
    missing: int = 0
    extra: int = 0


class Side:
    """One site's consumer, reading one assigned partition up to an end offset, batch by batch."""

    def __init__(self, name: str, bootstrap: str, topic: str) -> None:
        self.name = name
        self.topic = topic
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "client.id": f"strait-audit-loop-{name}"} | CONSUMER_SETTINGS
        )
        self.end = 0
        self.next = 0

    def start(self, partition: int) -> tuple[int, int]:
        """Assign ``partition`` from its low watermark; returns the range ``[low, high)`` to read."""
        tp = TopicPartition(self.topic, partition)
        try:
            low, high = self.consumer.get_watermark_offsets(tp, timeout=30.0, cached=False)
        except KafkaException as exc:
            raise LoopError(f"{self.name}: watermarks of {self.topic}-{partition}: {exc}") from None
        self.next, self.end = low, high
        self.consumer.assign([TopicPartition(self.topic, partition, low)])
        return low, high

    @property
    def done(self) -> bool:
        return self.next >= self.end

    def batch(self, partition: int) -> list[Message]:
        """The next records below the end offset (possibly none, within POLL_S). At most as many as the
        range has left: consume() returns when it has ``num_messages`` or at its timeout, so asking
        for more than are left would wait out the timeout at the end of every partition."""
        out = self.consumer.consume(num_messages=max(1, min(BATCH, self.end - self.next)), timeout=POLL_S)
        for m in out:
            if m.error() is not None:  # partition EOF events are off: every error is one
                raise LoopError(f"{self.name}: {self.topic}-{partition}: {m.error()}")
        if out:
            last = out[-1].offset() or 0
            if last >= self.end:  # the log grew since the watermarks were read: stop at the end read then
                out = [m for m in out if (m.offset() or 0) < self.end]
                last = self.end - 1
            self.next = last + 1
        return out

    def close(self) -> None:
        self.consumer.close()


def compare_partition(source: Side, target: Side, partition: int) -> PartitionCounts:
    """Read ``partition`` from both sides and compare record by record (see the module docstring)."""
    counts = PartitionCounts(partition, source.start(partition), target.start(partition))
    a: list[Message] = []
    b: list[Message] = []
    i = j = 0
    last_progress = time.monotonic()
    while True:
        if i == len(a) and not source.done:
            a, i = source.batch(partition), 0
            counts.source_records += len(a)
        if j == len(b) and not target.done:
            b, j = target.batch(partition), 0
            counts.target_records += len(b)
        if i == len(a) and j == len(b) and source.done and target.done:
            return counts
        if i < len(a) or j < len(b):
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > STALL_S:
            raise LoopError(
                f"{source.topic}-{partition}: no record for {STALL_S:g} s (source at {source.next} of {source.end}, "
                f"target at {target.next} of {target.end})"
            )
        # Merge the two runs by offset.
        while i < len(a) and j < len(b):
            x, y = a[i], b[j]
            ox, oy = x.offset(), y.offset()
            if ox == oy:
                counts.compared += 1
                if (
                    x.value() == y.value()
                    and x.key() == y.key()
                    and x.headers() == y.headers()
                    and x.timestamp() == y.timestamp()
                ):
                    counts.matched += 1
                else:
                    counts.different += 1
                i += 1
                j += 1
            elif (ox or 0) < (oy or 0):
                counts.missing += 1
                i += 1
            else:
                counts.extra += 1
                j += 1
        # One side has ended: what is left on the other has no counterpart.
        if source.done and i == len(a) and j < len(b):
            counts.extra += len(b) - j
            j = len(b)
        if target.done and j == len(b) and i < len(a):
            counts.missing += len(a) - i
            i = len(a)


def partitions_of(side: Side) -> list[int]:
    try:
        metadata = side.consumer.list_topics(side.topic, timeout=30.0)
    except KafkaException as exc:
        raise LoopError(f"{side.name}: metadata of {side.topic}: {exc}") from None
    found = metadata.topics.get(side.topic)
    if found is None or found.error is not None:
        raise LoopError(f"{side.name}: no topic {side.topic} ({None if found is None else found.error})")
    return sorted(found.partitions)


def run(source_bootstrap: str, target_bootstrap: str, topic: str) -> dict[str, Any]:
    """Compare every partition of ``topic``; returns the counts (total and per partition)."""
    started = time.perf_counter()
    source = Side("source", source_bootstrap, topic)
    target = Side("target", target_bootstrap, topic)
    try:
        parts = [compare_partition(source, target, p) for p in partitions_of(source)]
    finally:
        source.close()
        target.close()
    keys = ("source_records", "target_records", "compared", "matched", "different", "missing", "extra")
    totals = {k: sum(getattr(p, k) for p in parts) for k in keys}
    return {
        "seconds": time.perf_counter() - started,
        "totals": totals,
        "partitions": [asdict(p) for p in parts],
        "batch": BATCH,
        "consumer": CONSUMER_SETTINGS,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench._audit_loop", description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="the source site's bootstrap servers")
    p.add_argument("--target", required=True, help="the target site's bootstrap servers")
    p.add_argument("--topic", required=True)
    p.add_argument("--out", type=Path, required=True, help="the result (JSON)")
    args = p.parse_args(argv)
    try:
        result = run(args.source, args.target, args.topic)
    except LoopError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    t = result["totals"]
    print(f"{t['compared']:,} compared, {t['matched']:,} matched in {result['seconds']:.1f} s", file=sys.stderr)
    return 0 if t["matched"] == t["source_records"] == t["target_records"] else 1


if __name__ == "__main__":
    sys.exit(main())
