"""The benchmarks' producer: one confluent-kafka (librdkafka) client in the benchmark process.

Every benchmark that talks Kafka produces :data:`VALUE_BYTES`-byte values with
:data:`PRODUCER_SETTINGS` (plus its own bootstrap servers, acks and idempotence), either as fast
as the producer takes them (:func:`produce_all`, :func:`timed_produce`) or paced at a fixed rate
on a :data:`PACE_S` grid (:func:`paced_produce`), and closes it with :func:`open_producer` so
that it is gone before its brokers stop.
"""

from __future__ import annotations

import functools
import gc
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from ._procs import POLL_S, BenchError

VALUE_BYTES = 100
PACE_S = 0.001  # the paced producer's send grid: poll() cannot wait less than 1 ms

# node_bench's producer, which the other benchmarks reuse; bootstrap.servers and acks are added
# per run, and the others set their own client.id.
PRODUCER_SETTINGS: dict[str, Any] = {
    "client.id": "strait-node-bench",
    "linger.ms": 5,  # --linger-ms; librdkafka's default too
    "batch.size": 64 * 1024,  # --batch-bytes; max bytes of one partition's batch (librdkafka default 1,000,000)
    "compression.type": "none",  # the values are random; measure the brokers, not a codec
    "enable.idempotence": False,  # acks=1 requires it off
    "queue.buffering.max.messages": 100_000,  # librdkafka's default: produce() waits for reports beyond this
}

CpuReader = Callable[[], dict[str, float]]  # CPU seconds so far, by process name


@contextmanager
def open_producer(config: dict[str, Any]) -> Iterator[Producer]:
    """A producer that is closed when the block ends, also on errors and Ctrl-C, so that it is gone
    before its broker stops. Pending records are purged first: ``close()`` flushes, and must not
    wait on a broker that is going away."""
    producer = Producer(config)
    try:
        yield producer
    finally:
        producer.purge()
        producer.close()


class Deliveries:
    """Counts delivery reports; ``last`` is when the latest one arrived (perf_counter)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed: Counter[str] = Counter()
        self.last = 0.0

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed[error.str()] += 1
        self.last = time.perf_counter()


def produce_all(producer: Producer, topic: str, value: bytes, count: int) -> None:
    """``count`` records of ``value`` as fast as the producer takes them (waiting only when its queue is full)."""
    produce, poll = producer.produce, producer.poll
    for i in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(POLL_S)  # the local queue is full: serve delivery reports until there is room
        if not i & 1023:
            poll(0)


def paced_produce(
    producer: Producer, topic: str, value: bytes, rate: float, total: int, timeout: float
) -> tuple[list[float], list[float], Counter[str], int]:
    """Send ``total`` records at ``rate`` per second on a ``PACE_S`` grid and time each one from
    ``produce()`` to its delivery report (poll() returns as soon as a report is ready, so the
    pacing never delays one). Returns (send times, delivery times, failures by error, records
    still undelivered after the flush)."""
    sent = [0.0] * total
    done = [0.0] * total
    failed: Counter[str] = Counter()

    def on_delivery(index: int, error: KafkaError | None, message: Message) -> None:
        done[index] = time.perf_counter()
        if error is not None:
            failed[error.str()] += 1

    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    # No garbage collection of this process while it times: a collection here (a full one took
    # 50-350 ms on a busy 2-core VM) delays the delivery reports and would count as the broker's.
    gc.disable()
    try:
        start = clock()
        i = 0
        while i < total:
            due = min(total, int((clock() - start) * rate) + 1)
            while i < due:
                sent[i] = clock()
                produce(topic, value, on_delivery=functools.partial(on_delivery, i))
                i += 1
            wait = start + i / rate - clock()
            poll(max(wait, PACE_S) if wait > 0 else 0)
        return sent, done, failed, producer.flush(timeout)
    finally:
        gc.enable()


def warm_up(producer: Producer, topic: str, value: bytes, timeout: float) -> int:
    """Before any clock starts: metadata, connections, the producer id (idempotent producers) and one
    record delivered to every partition; returns the partition count.

    Two first-time costs are kept out of the figures this way: an idempotent librdkafka producer was
    seen to wait ~500 ms for its producer id (InitProducerId is retried on a timer when no connection
    is up yet), and a partition's first record costs its replicas a leader-epoch checkpoint
    (fsynced) and its first appends. Raises ``BenchError`` if a record is not delivered.
    """
    failed: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(error.str())

    found = producer.list_topics(topic, timeout=timeout).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise BenchError(f"no metadata for topic {topic!r}: {found.error if found else 'not listed'}")
    for partition in found.partitions:
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
    if producer.flush(timeout) or failed:
        raise BenchError(f"warm-up records to {topic!r} not delivered within {timeout} s: {failed}")
    return len(found.partitions)


# The groups of this process's threads whose CPU ``threads_cpu_delta`` reports.
APP_THREAD = "application"  # the thread that calls produce() and poll() (the delivery reports run on it)
RDK_BROKER_THREADS = "librdkafka broker"  # rdk:broker<N>: one per broker connection, does the I/O
RDK_OTHER_THREADS = "librdkafka other"  # rdk:main (timers, metadata), rdk:bg
OTHER_THREADS = "other"

ThreadTicks = dict[int, tuple[str, int]]  # thread id -> (group, user + system clock ticks)


def thread_ticks() -> ThreadTicks:
    """Every thread of this process with its group and CPU so far (``/proc/self/task``); the
    application thread is the calling one."""
    app = threading.get_native_id()
    out: ThreadTicks = {}
    for entry in os.scandir("/proc/self/task"):
        try:
            with open(f"{entry.path}/stat", "rb") as f:
                stat = f.read().decode()
        except OSError:
            continue  # the thread ended meanwhile
        tid = int(entry.name)
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc_pid_stat(5))
        if tid == app:
            group = APP_THREAD
        elif comm.startswith("rdk:broker"):
            group = RDK_BROKER_THREADS
        elif comm.startswith("rdk:"):
            group = RDK_OTHER_THREADS
        else:
            group = OTHER_THREADS
        out[tid] = (group, ticks)
    return out


def threads_cpu_delta(start: ThreadTicks, end: ThreadTicks) -> dict[str, float]:
    """CPU seconds of each thread group between two ``thread_ticks`` readings. A thread born
    in between counts from zero; one that ended in between is left out (its last figures are
    gone with it)."""
    hz = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid, (group, ticks) in end.items():
        before = start.get(tid)
        used = ticks - (before[1] if before is not None else 0)
        out[group] = out.get(group, 0.0) + used / hz
    return out


@dataclass(frozen=True)
class Timed:
    """What one throughput run measured: the span, CPU in it, and the nodes' request counters."""

    seconds: float  # first produce() to the last delivery report
    node_cpu_s: dict[str, float]
    client_cpu_s: float
    requests: dict[str, float]  # counter deltas over the span; empty when no counters were read
    client_threads_s: dict[str, float]  # client CPU seconds by thread group (APP_THREAD, ...)


def timed_produce(
    config: dict[str, Any],
    topic: str,
    records: int,
    value: bytes,
    timeout: float,
    cpu: CpuReader,
    counters: Callable[[], dict[str, float]] | None = None,
) -> Timed:
    """Produce ``records`` values as fast as the producer can, after a warm-up record; ``cpu`` and
    ``counters`` are read just before the first and after the last record.

    Raises ``BenchError`` if any record is not delivered within ``timeout``.
    """
    deliveries = Deliveries()
    with open_producer(config | {"on_delivery": deliveries.on_delivery}) as producer:
        warm_up(producer, topic, value, timeout)
        before = counters() if counters else {}
        gc.collect()
        cpu_start, client_start, threads_start = cpu(), time.process_time(), thread_ticks()
        start = time.perf_counter()
        produce_all(producer, topic, value, records)
        left = producer.flush(timeout)
        cpu_end, client_end, threads_end = cpu(), time.process_time(), thread_ticks()
        after = counters() if counters else {}
    if left or deliveries.failed or deliveries.delivered != records:
        raise BenchError(
            f"{deliveries.delivered} of {records} records delivered to {topic!r} (acks={config['acks']}), "
            f"{left} still queued after {timeout} s, failures: {dict(deliveries.failed)}"
        )
    return Timed(
        deliveries.last - start,
        {name: cpu_end[name] - cpu_start[name] for name in cpu_end},
        client_end - client_start,
        {name: after[name] - before[name] for name in after},
        threads_cpu_delta(threads_start, threads_end),
    )
