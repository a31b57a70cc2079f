"""Mirror lag, end to end: from a record's acknowledgement on the source site to its being readable
on the target site.

Three parts, all in the benchmark process:

- :func:`paced_sampled_produce` sends records at a fixed rate on the benchmarks' 1 ms grid (as
  ``bench._clients.paced_produce`` does) and asks for the delivery report of every ``every``-th record
  only (a per-record Python callback at 100,000+ records/s would cost the producer a good part of
  a core); a report gives the record's partition and offset and its acknowledgement time.
  Each value starts with the record's sequence number (8 bytes, big-endian).
- :class:`WestObserver`, a thread, consumes the mirror topic on the target site (``assign()`` at
  offset 0, no group) and, after every ``consume()`` that returned records, notes the time and
  the consumer's position in each partition (the offset after the last record it has
  returned). The mirror preserves offsets, so (partition, offset) names the same record on both
  sites: a sampled record became readable on the target at the first observation whose
  position in its partition is past its offset. :func:`spot_check` reads some sampled records
  back from the target at their source partition and offset and compares sequence numbers.
- :func:`lag_figures` turns samples and observations into percentiles, the lag's trend over the
  run (last third against first third) and how long the target took to hold everything after
  the producer's last acknowledgement.

All times are ``time.monotonic()`` (one clock for every process on the machine).
``consume()`` returns after at most ``OBSERVE_TIMEOUT_S`` even with fewer records than asked
for, so an observation is at most that late.
"""

from __future__ import annotations

import bisect
import functools
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from node.proc import Deadline

from ._clients import PACE_S
from ._procs import POLL_S, BenchError
from ._report import PERCENTILES, percentile

SEQ_BYTES = 8
SAMPLES_PER_S = 2_000  # sampled records per second of a paced run, about
WARM_UP_SEQ = 2**64 - 1  # the sequence number of warm-up records: never a sampled one
GROWTH_LIMIT_MS = 250.0  # lag median, last third of a run minus first third: "not growing"
DRAIN_LIMIT_S = 1.0  # the target holds everything this soon after the producer's last acknowledgement
OBSERVE_BATCH = 20_000  # records per consume() at most
OBSERVE_TIMEOUT_S = 0.002  # consume() returns after this at the latest: the observations' resolution
OBSERVER_SETTINGS: dict[str, Any] = {
    "client.id": "strait-mirror-bench-west",
    "group.id": "strait-mirror-bench-west",  # the Python client insists; assign() uses no group API
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 100,  # a node answers a waiting fetch as soon as records arrive; this bounds the rest
    "fetch.queue.backoff.ms": 10,  # see node_bench: librdkafka's 1000 ms would idle the observer
}


@dataclass
class Sample:
    """One sampled record: its sequence number, where the source put it, and when."""

    seq: int
    sent: float  # produce() called
    partition: int = -1
    offset: int = -1
    acked: float = 0.0  # delivery report; 0.0 until it arrives
    error: str | None = None


@dataclass
class PacedRun:
    samples: list[Sample]
    total: int
    every: int
    first_sent: float
    last_sent: float
    flushed: float  # every record acknowledged (or failed)
    undelivered: int  # still queued after the flush's timeout
    failed: Counter[str] = field(default_factory=Counter)

    @property
    def sent_rate(self) -> float:
        span = self.last_sent - self.first_sent
        return (self.total - 1) / span if span > 0 else float(self.total)


def value_of(seq: int, pad: bytes) -> bytes:
    return seq.to_bytes(SEQ_BYTES, "big") + pad


def paced_sampled_produce(
    producer: Producer, topic: str, pad: bytes, rate: float, total: int, every: int, timeout: float, *, first_seq: int
) -> PacedRun:
    """Send ``total`` records (sequence numbers from ``first_seq``) at ``rate`` per second on a
    ``PACE_S`` grid; every ``every``-th record is sampled (its delivery report noted). poll() returns
    as soon as a report is ready, so pacing never delays one. Delivery errors are counted in
    ``failed``; raises ``BenchError`` if the site has not taken every record ``timeout`` seconds
    after the schedule's end."""
    samples: list[Sample] = []
    failed: Counter[str] = Counter()

    def on_delivery(sample: Sample, error: KafkaError | None, message: Message) -> None:
        sample.acked = time.monotonic()
        if error is not None:
            sample.error = error.str()
            failed[error.str()] += 1
            return
        sample.partition = message.partition() or 0
        sample.offset = message.offset() or 0

    produce, poll, clock = producer.produce, producer.poll, time.monotonic
    start = clock()
    give_up = start + total / rate + timeout
    i = 0
    while i < total:
        due = min(total, int((clock() - start) * rate) + 1)
        while i < due:
            seq = first_seq + i
            value = seq.to_bytes(SEQ_BYTES, "big") + pad
            while True:
                try:
                    if i % every:
                        produce(topic, value)
                    else:
                        sample = Sample(seq, clock())
                        produce(topic, value, on_delivery=functools.partial(on_delivery, sample))
                        samples.append(sample)
                    break
                except BufferError:
                    poll(PACE_S)  # the local queue is full: the site is slower than the rate asked
                    if clock() > give_up:
                        raise BenchError(
                            f"{topic}: the site took {i} of {total} records in {clock() - start:.0f} s"
                        ) from None
            i += 1
            if not i & 255:
                poll(0)  # behind the grid: still serve delivery reports promptly, or acks are noted late
        wait = start + i / rate - clock()
        poll(max(wait, PACE_S) if wait > 0 else 0)
    last_sent = clock()
    undelivered = producer.flush(timeout)
    return PacedRun(samples, total, every, start, last_sent, clock(), undelivered, failed)


class WestObserver:
    """A consumer thread on the target site that notes when each partition's records became readable.

    Use as a context manager; the thread is stopped and the consumer closed on exit.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self._consumer = Consumer(OBSERVER_SETTINGS | {"bootstrap.servers": bootstrap})
        self.times: list[float] = []
        self.positions: list[list[int]] = [[] for _ in range(partitions)]
        self.latest = [0] * partitions
        self.errors: Counter[str] = Counter()
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="west-observer", daemon=True)

    def __enter__(self) -> WestObserver:
        self._consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._consumer.close()

    def _run(self) -> None:
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        consume, position, clock = self._consumer.consume, self._consumer.position, time.monotonic
        try:
            while not self._stop.is_set():
                batch = consume(OBSERVE_BATCH, timeout=OBSERVE_TIMEOUT_S)
                if not batch:
                    continue
                now = clock()
                for error in [e for e in map(Message.error, batch) if e is not None]:  # one C call per record
                    if error.fatal():
                        raise BenchError(f"fatal consumer error on the target's {self.topic!r}: {error.str()}")
                    self.errors[error.str()] += 1
                for tp in position(tps):
                    if tp.offset >= 0 and tp.offset > self.latest[tp.partition]:
                        self.latest[tp.partition] = tp.offset
                self.times.append(now)
                for p in range(self.partitions):
                    self.positions[p].append(self.latest[p])
        except BaseException as exc:  # reported to the main thread by wait_until
            self.failure = exc

    def wait_until(self, ends: list[int], timeout: float) -> float | None:
        """Wait until every partition's position reached ``ends``; returns the observation time, or None
        at the deadline. Raises ``BenchError`` if the observer thread failed."""
        deadline = Deadline(timeout, f"target's {self.topic} to reach {ends}")
        while True:
            if self.failure is not None:
                raise BenchError(f"the target-site observer failed: {self.failure!r}") from self.failure
            if all(self.latest[p] >= ends[p] for p in range(self.partitions)) and self.times:
                return self.times[-1]
            if deadline.expired():
                return None
            time.sleep(POLL_S / 5)


@dataclass(frozen=True)
class LagFigures:
    """One paced run's end-to-end lag (ms), acknowledgement on the source -> readable on the target."""

    samples: int
    spot_checked: int  # sampled records read back from the target at their source partition and offset
    unseen: int  # sampled records never seen on the target (counted at the observer's last observation)
    lag_ms: dict[str, float]  # PERCENTILES
    first_third_p50_ms: float
    last_third_p50_ms: float
    produce_ms: dict[str, float]  # produce() -> acknowledgement, PERCENTILES (context)
    visible_rate: float  # records readable on the target per second while the producer ran

    @property
    def growth_ms(self) -> float:
        return self.last_third_p50_ms - self.first_third_p50_ms


def kept_up(figures: LagFigures, drain_s: float | None) -> bool:
    """The mirror kept up: its lag did not grow over the run, and the target held every record within
    ``DRAIN_LIMIT_S`` of the last acknowledgement. A mirror short of the producer's rate by 1.25 %
    falls 250 ms further behind over the 20 s between the thirds' middles of a 30 s run."""
    return (
        drain_s is not None and drain_s <= DRAIN_LIMIT_S and figures.growth_ms < GROWTH_LIMIT_MS and figures.unseen == 0
    )


def spot_check(bootstrap: str, topic: str, samples: list[Sample], count: int, timeout: float) -> int:
    """Read ``count`` sampled records (spread over the run) from the target at the partition and offset
    the source gave them; returns how many were checked. Raises ``BenchError`` if one carries another
    sequence number (offsets not preserved) or cannot be read."""
    chosen = samples[:: max(1, len(samples) // count)][:count]
    consumer = Consumer(OBSERVER_SETTINGS | {"bootstrap.servers": bootstrap, "client.id": "strait-mirror-bench-check"})
    try:
        for sample in chosen:
            consumer.assign([TopicPartition(topic, sample.partition, sample.offset)])
            found = consumer.consume(1, timeout=timeout)
            if not found or found[0].error() is not None:
                why = found[0].error() if found else f"nothing within {timeout} s"
                raise BenchError(f"cannot read {topic}-{sample.partition} at {sample.offset} on the target: {why}")
            message = found[0]
            seq = int.from_bytes((message.value() or b"")[:SEQ_BYTES], "big")
            if (message.partition(), message.offset(), seq) != (sample.partition, sample.offset, sample.seq):
                raise BenchError(
                    f"the target holds seq {seq} at {topic}-{message.partition()}/{message.offset()}, where the "
                    f"source put seq {sample.seq}: offsets not preserved"
                )
    finally:
        consumer.close()
    return len(chosen)


def _visible_at(observer: WestObserver, partition: int, offset: int) -> float | None:
    positions = observer.positions[partition]
    i = bisect.bisect_right(positions, offset)  # the first observation with position > offset
    return observer.times[i] if i < len(positions) else None


def lag_figures(run: PacedRun, observer: WestObserver, base: list[int], spot_checked: int) -> LagFigures:
    """Lag percentiles and trend of ``run``; ``base`` is each partition's position before it started.

    Raises ``BenchError`` if a sampled record was not acknowledged or the observer saw nothing.
    """
    bad = [s for s in run.samples if s.error is not None or s.acked == 0.0 or s.offset < 0]
    if bad:
        raise BenchError(f"{len(bad)} sampled records not acknowledged, e.g. seq {bad[0].seq}: {bad[0].error}")
    if not observer.times:
        raise BenchError("the target-site observer saw no record at all")
    rows = []
    unseen = 0
    for s in sorted(run.samples, key=lambda s: s.acked):
        visible = _visible_at(observer, s.partition, s.offset)
        if visible is None:  # never seen: its lag is at least the time until the observer stopped
            unseen += 1
            visible = observer.times[-1]
        rows.append(max(0.0, visible - s.acked) * 1e3)
    third = max(1, len(rows) // 3)
    produce = sorted((s.acked - s.sent) * 1e3 for s in run.samples)
    # Readable on the target while the producer ran: positions at the last observation before it stopped.
    i = bisect.bisect_right(observer.times, run.last_sent) - 1
    visible = sum(observer.positions[p][i] - base[p] for p in range(observer.partitions)) if i >= 0 else 0
    span = run.last_sent - run.first_sent
    return LagFigures(
        samples=len(run.samples),
        spot_checked=spot_checked,
        unseen=unseen,
        lag_ms={name: percentile(sorted(rows), q) for name, q in PERCENTILES},
        first_third_p50_ms=statistics.median(rows[:third]),
        last_third_p50_ms=statistics.median(rows[-third:]),
        produce_ms={name: percentile(produce, q) for name, q in PERCENTILES},
        visible_rate=visible / span if span > 0 else 0.0,
    )
