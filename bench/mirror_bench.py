"""Mirror benchmark: two strait sites, a mirror between them over 50 ms of injected WAN latency.

Run from the repository root::

    .venv/bin/python -m bench.mirror_bench --out bench/results     # ~5 min on a 2-core VM
    .venv/bin/python -m bench.mirror_bench --quick                 # smoke test, ~30 s

On this machine: one ZooKeeper, two sites ``east`` and ``west`` of three ``strait node``
processes each (a chroot per site), a fault proxy process (``python -m chaos.proxy``) with one
proxy per east broker and a latency toxic on each stream (``--wan-rtt-ms`` 50 +- ``--wan-jitter-ms``
10 per round trip), and for every measurement a mirror process of its own
(``bench._mirror_runner``: one ``mirror.LinkRunner``) that runs "at west" and reaches east only
through the proxies. Topics have 4 partitions, replication factor 3, ``min.insync.replicas=2``;
the producer is replication_bench's case (b) (``bench._site.REPLICATED``): acks=all, idempotent,
100-byte values.

1. **site vs mirror throughput**, ``--runs`` times, side by side on the same records: with the
   mirror paused (its mirror topic already made on west), ``--records`` records are produced to
   east as fast as the producer can (the *site's* records/s); then the mirror is resumed and
   timed until west's high watermarks equal east's in every partition (the *mirror's*
   records/s). The ratio mirror/site is the figure. Each run does this twice, in an order that
   alternates from run to run: once with the WAN's latency and once with the proxies' latency
   at 0 (the same proxies forwarding every byte), the baseline of the catch-up ratio
   (WAN RTT / 0 ms).
2. **lag**, ``--runs`` times at 50 % and 80 % of the median site records/s: a paced producer
   for ``--lag-seconds`` on a new topic, a mirror copying it, and a consumer on west. For
   sampled records the lag is the time from the produce acknowledgement on east to the record
   being returned by west's consumer (offsets are preserved, so partition and offset identify a
   record on both sites). The mirror *keeps up* when the lag does not grow over the run (median
   of the last third minus median of the first third under ``GROWTH_LIMIT_MS``) and west holds
   every record within ``DRAIN_LIMIT_S`` of the producer's last acknowledgement.
3. **profile** (``--profile auto``: when a goal is missed): one more catch-up copy at 0 ms and
   at the WAN's RTT, and one 80 % run, with ``py-spy record`` attached to the mirror and proxy
   processes.

Goals (the mirror issue): the mirror keeps up at 80 % of the site's max; lag p99 < 1 s at 50 %.
The mirror over a WAN (issue 19): catch-up records/s with the WAN's RTT >= 0.9 x the same at
0 ms; lag p99 < 250 ms at 80 % with the WAN's RTT.
CPU figures are user + system time from /proc per process group. MB/s counts value bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from node.proc import Deadline

from ._cli import fill_defaults, guarded, require_strait, scratch_dir, stepper
from ._clients import PRODUCER_SETTINGS, VALUE_BYTES, open_producer, timed_produce, warm_up
from ._mirror_lag import (
    SAMPLES_PER_S,
    WARM_UP_SEQ,
    WestObserver,
    lag_figures,
    paced_sampled_produce,
    spot_check,
    value_of,
)
from ._mirror_report import GOAL_KEEP_UP_FRACTION, drain_text, goals_missed, machine, print_tables, write_report
from ._mirror_topology import (
    PARTITIONS,
    PROPERTIES,
    WEST_POLL_S,
    MirrorProcess,
    Wan,
    link_table,
    mirror_process,
    mirror_topic_created,
    partitions_copying,
    set_latency,
    wan_proxies,
)
from ._mirror_types import CLIENT_ID, ON_RATE, Appends, Fill, LagRun, ProcessProfile, Results, Settings
from ._procs import (
    BenchError,
    RunningSite,
    StraitSite,
    py_spy_attached,
    sessions_cpu_seconds,
    zookeeper,
)
from ._profile import PY_SPY_FLAGS, py_spy_path, summarise_stacks
from ._site import REPLICATED, create_topic, metric_totals, wait_in_sync

FRACTIONS = (0.5, 0.8)  # of the site's median records/s, for the lag runs
SPOT_CHECKS = 40  # sampled records of each lag run read back from west at their east partition and offset
# 8,000,000 records: the mirror copies them in ~5 s. With 2,000,000 (~1.2 s) the copiers' start
# (the target's end, the first fetches and appends: a few WAN round trips, ~300 ms) was a quarter
# of the catch-up, and the catch-up ratio measured the start more than the rate.
FULL = {"records": 8_000_000, "runs": 3, "lag_seconds": 30.0}
QUICK = {"records": 300_000, "runs": 1, "lag_seconds": 5.0}


@dataclass
class Topology:
    """Everything that lives for the whole run."""

    east: RunningSite
    west: RunningSite
    wan: Wan
    workdir: Path

    def groups(self, mirror: MirrorProcess | None = None) -> dict[str, set[int]]:
        """Process sessions by role, for CPU accounting."""
        out = {
            "east": {n.session for n in self.east.nodes},
            "west": {n.session for n in self.west.nodes},
            "proxy": {self.wan.session},
        }
        if mirror is not None:
            out["mirror"] = {mirror.pid}
        return out


class CpuMeter:
    """User + system CPU seconds per role (from /proc), of this process, and of the whole machine."""

    def __init__(self, groups: dict[str, set[int]]) -> None:
        self.groups = groups
        self._start = self._read()

    def _read(self) -> dict[str, float]:
        sessions = set().union(*self.groups.values())
        by_session = sessions_cpu_seconds(sessions)
        out = {role: sum(by_session.get(s, 0.0) for s in members) for role, members in self.groups.items()}
        out["bench"] = time.process_time()
        out["machine"] = machine_busy_seconds()
        return out

    def used(self) -> dict[str, float]:
        now = self._read()
        return {role: now[role] - self._start[role] for role in now}


def machine_busy_seconds() -> float:
    """CPU seconds the machine spent busy (all cores: user, nice, system, irq, softirq, steal), /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cores(cpu: dict[str, float], seconds: float) -> dict[str, float]:
    """CPU seconds per role over ``seconds`` -> cores; ``others`` is the machine minus every role."""
    out = {role: used / seconds for role, used in cpu.items()}
    out["others"] = max(0.0, out["machine"] - sum(v for k, v in out.items() if k != "machine"))
    return out


# -- measurements --------------------------------------------------------------------------


def end_offsets(bootstrap: str, topic: str, partitions: int, timeout: float) -> list[int]:
    """Each partition's high watermark, asked of its leader (ListOffsets); raises ``BenchError``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": CLIENT_ID, "client.id": CLIENT_ID})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)[1]
            for p in range(partitions)
        ]
    except KafkaException as exc:
        raise BenchError(f"cannot read the end offsets of {topic!r} at {bootstrap}: {exc}") from exc
    finally:
        consumer.close()


def delete_topic(site: RunningSite, topic: str, timeout: float) -> list[str]:
    """Delete ``topic`` (so that its files do not pile up over the run); notes when that fails."""
    admin = AdminClient({"bootstrap.servers": site.bootstrap, "client.id": CLIENT_ID})
    try:
        admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)
    except KafkaException as exc:
        return [f"deleting {topic} on {site.name}: {exc}"]
    return []


# West's answers to the mirror's appends, from every node's /metrics: MirrorAppend waits, like
# acks=all, until west's followers have the records (its high watermark).
APPEND_SERIES = {
    'strait_request_latency_seconds_count{api="MirrorAppend"}': "appends",
    'strait_request_latency_seconds_sum{api="MirrorAppend"}': "seconds",
    'strait_request_latency_seconds_bucket{api="MirrorAppend",le="0.1"}': "within_100ms",
    'strait_request_latency_seconds_bucket{api="MirrorAppend",le="0.5"}': "within_500ms",
}


def append_counters(site: RunningSite, timeout: float) -> dict[str, float]:
    """``APPEND_SERIES`` summed over the site's nodes; raises ``BenchError`` naming a node that cannot be read."""
    return metric_totals(site, APPEND_SERIES, timeout)


def _check_routes(status: dict[str, Any], topology: Topology) -> None:
    """Raise ``BenchError`` unless the mirror reached east only through the WAN proxies (and did reach it)."""
    routes = status["routes"]
    direct = [a for a in routes["direct"] if a in topology.wan.routes]
    if direct:
        raise BenchError(f"the mirror connected to east brokers {direct} directly, not through the WAN proxies")
    if not routes["via_proxy"]:
        raise BenchError("the mirror opened no connection through the WAN proxies")


def _new_topic(settings: Settings, topology: Topology, topic: str) -> None:
    create_topic(topology.east.bootstrap, topic, PARTITIONS, REPLICATED, settings.timeout_s, client_id=CLIENT_ID)
    wait_in_sync(topology.east, topic, PARTITIONS, REPLICATED.replication, settings.timeout_s)


@contextmanager
def _profiled(
    settings: Settings, mirror: MirrorProcess, topology: Topology, outputs: dict[str, Path] | None
) -> Iterator[None]:
    """py-spy on the mirror and proxy processes while the block runs, when ``outputs`` (role -> file) is given."""
    if outputs is None:
        yield
        return
    pids = {"mirror": mirror.pid, "proxy": topology.wan.session}
    py_spy = py_spy_path()
    log_dir = next(iter(outputs.values())).parent
    with py_spy_attached(
        py_spy,
        {pids[role]: path for role, path in outputs.items()},
        rate=settings.profile_rate,
        flags=PY_SPY_FLAGS,
        log_dir=log_dir,
    ):
        yield


def fill_run(
    settings: Settings,
    topology: Topology,
    run: int,
    value: bytes,
    *,
    rtt_ms: int,
    profile: dict[str, Path] | None = None,
) -> Fill:
    """Site throughput, then the mirror's catch-up over the same records (see the module docstring),
    with ``rtt_ms`` of WAN latency (the proxies go back to ``--wan-rtt-ms`` afterwards)."""
    topic = f"fill-{rtt_ms}ms-r{run + 1}" + ("-profile" if profile else "")
    jitter_ms = min(settings.wan_jitter_ms, rtt_ms)
    set_latency(topology.wan, rtt_ms, jitter_ms)
    try:
        return _fill(settings, topology, run, value, topic, rtt_ms, profile)
    finally:
        set_latency(topology.wan, settings.wan_rtt_ms, settings.wan_jitter_ms)


def _fill(
    settings: Settings,
    topology: Topology,
    run: int,
    value: bytes,
    topic: str,
    rtt_ms: int,
    profile: dict[str, Path] | None,
) -> Fill:
    workdir = topology.workdir / topic
    _new_topic(settings, topology, topic)
    link = link_table(
        f"bench-{topic}", topology.wan.bootstrap, topology.west.bootstrap, [topic], settings.link_settings
    )
    with mirror_process(workdir, link, topology.wan.routes, start_paused=True, timeout=settings.timeout_s) as mirror:
        mirror.wait_for("making the mirror topic on west", mirror_topic_created(topic, PARTITIONS), settings.timeout_s)
        wait_in_sync(topology.west, topic, PARTITIONS, REPLICATED.replication, settings.timeout_s)
        groups = topology.groups(mirror)
        meter = CpuMeter(groups)
        timed = timed_produce(
            settings.producer_config(topology.east.bootstrap),
            topic,
            settings.records,
            value,
            settings.timeout_s,
            lambda: {},
        )
        site_cores = cores(meter.used(), max(timed.seconds, 1e-3))
        ends = end_offsets(topology.east.bootstrap, topic, PARTITIONS, settings.timeout_s)
        total = sum(ends)
        if total != settings.records + PARTITIONS:
            raise BenchError(f"east holds {total} records of {topic!r}, expected {settings.records + PARTITIONS}")
        west = Consumer({"bootstrap.servers": topology.west.bootstrap, "group.id": CLIENT_ID, "client.id": CLIENT_ID})
        try:
            west.list_topics(topic, timeout=settings.timeout_s)  # connections before the clock starts
            with _profiled(settings, mirror, topology, profile):
                gc.collect()
                status = mirror.status()
                appends_before = append_counters(topology.west, settings.timeout_s)
                meter = CpuMeter(groups)
                started = mirror.resume()
                first, done = _wait_for_west(west, topic, ends, started, settings.timeout_s)
                used = meter.used()
                appends = Appends.between(appends_before, append_counters(topology.west, settings.timeout_s))
        finally:
            west.close()
        after = mirror.status()
        _check_routes(after, topology)
    notes = delete_topic(topology.east, topic, settings.timeout_s) + delete_topic(
        topology.west, topic, settings.timeout_s
    )
    totals_before, totals_after = status["link"]["totals"], after["link"]["totals"]
    return Fill(
        run,
        rtt_ms,
        settings.records,
        total,
        timed.seconds,
        done - started,
        first - started,
        site_cores,
        cores(used, done - started),
        used["mirror"],
        _errors(after, topic) - _errors(status, topic),
        totals_after["bytes_copied"] - totals_before["bytes_copied"],
        appends,
        profiled=profile is not None,
        notes=notes,
    )


def _errors(status: dict[str, Any], topic: str) -> int:
    parts = status["link"].get("topics", {}).get(topic, {}).get("partitions", [])
    return sum(p["errors"] for p in parts)


def _wait_for_west(west: Consumer, topic: str, ends: list[int], started: float, timeout: float) -> tuple[float, float]:
    """Poll west's high watermarks every ``WEST_POLL_S`` until they equal ``ends``; returns (the time
    the first record was readable, the time the last one was). Raises ``BenchError`` at the deadline."""
    deadline = Deadline(timeout, f"west's {topic} to reach {ends}")
    first: float | None = None
    highs = [0] * len(ends)
    while True:
        for p in range(len(ends)):
            if highs[p] < ends[p]:
                with contextlib.suppress(KafkaException):  # a slow answer on a busy machine: ask again
                    highs[p] = west.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=max(1.0, deadline.remaining()), cached=False
                    )[1]
        now = time.monotonic()
        if first is None and any(highs):
            first = now
        if highs == ends:
            return first or now, now
        if deadline.expired():
            raise BenchError(f"the mirror copied {sum(highs)} of {sum(ends)} records of {topic!r} in {timeout} s")
        time.sleep(max(0.0, WEST_POLL_S - (time.monotonic() - now)))


def _histogram_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float | None]:
    """p50/p99 (upper bounds of their buckets, ms) of the mirror's latency histogram between two statuses."""
    b = dict((str(k), c) for k, c in before["link"]["latency"]["buckets"])
    deltas = [(k, c - b.get(str(k), 0)) for k, c in after["link"]["latency"]["buckets"]]
    total = deltas[-1][1] if deltas else 0
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        bound = next((k for k, c in deltas if total and c >= q * total), None)
        out[name] = None if bound is None else (float("inf") if bound == "+Inf" else float(bound) * 1e3)
    return out


def lag_run(
    settings: Settings,
    topology: Topology,
    run: int,
    fraction: float,
    site_rate: float,
    pad: bytes,
    *,
    profile: dict[str, Path] | None = None,
) -> LagRun:
    """A paced producer at ``fraction`` of ``site_rate`` for ``lag_seconds``, mirrored, observed on west."""
    topic = f"lag{round(fraction * 100)}-r{run + 1}" + ("-profile" if profile else "")
    workdir = topology.workdir / topic
    rate = fraction * site_rate
    total = max(PARTITIONS, round(rate * settings.lag_seconds))
    every = max(1, round(rate / SAMPLES_PER_S))
    _new_topic(settings, topology, topic)
    link = link_table(
        f"bench-{topic}", topology.wan.bootstrap, topology.west.bootstrap, [topic], settings.link_settings
    )
    notes: list[str] = []
    with ExitStack() as stack:
        mirror = stack.enter_context(
            mirror_process(workdir, link, topology.wan.routes, start_paused=False, timeout=settings.timeout_s)
        )
        mirror.wait_for("copying every partition", partitions_copying(topic, PARTITIONS), settings.timeout_s)
        wait_in_sync(topology.west, topic, PARTITIONS, REPLICATED.replication, settings.timeout_s)
        producer = stack.enter_context(open_producer(settings.producer_config(topology.east.bootstrap)))
        observer = stack.enter_context(WestObserver(topology.west.bootstrap, topic, PARTITIONS))
        warm_up(producer, topic, value_of(WARM_UP_SEQ, pad), settings.timeout_s)
        base = [1] * PARTITIONS
        if observer.wait_until(base, settings.timeout_s) is None:
            raise BenchError(f"the warm-up records of {topic!r} did not reach west within {settings.timeout_s} s")
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.001)  # the observer thread stamps its observations promptly
        try:
            with _profiled(settings, mirror, topology, profile):
                gc.collect()
                before = mirror.status()
                appends_before = append_counters(topology.west, settings.timeout_s)
                meter = CpuMeter(topology.groups(mirror))
                paced = paced_sampled_produce(producer, topic, pad, rate, total, every, settings.timeout_s, first_seq=0)
                used = meter.used()
                appends = Appends.between(appends_before, append_counters(topology.west, settings.timeout_s))
            if paced.undelivered or paced.failed:
                raise BenchError(f"{topic}: {paced.undelivered} undelivered, failures {dict(paced.failed)}")
            ends = end_offsets(topology.east.bootstrap, topic, PARTITIONS, settings.timeout_s)
            drained = observer.wait_until(ends, settings.timeout_s)
        finally:
            sys.setswitchinterval(switch)
        after = mirror.status()
        _check_routes(after, topology)
    # The observer thread has stopped: its observations are complete.
    checked = spot_check(topology.west.bootstrap, topic, paced.samples, SPOT_CHECKS, settings.timeout_s)
    figures = lag_figures(paced, observer, base, checked)
    if drained is None:
        notes.append(f"{topic}: west did not hold all {sum(ends)} records within {settings.timeout_s} s")
    if paced.sent_rate < ON_RATE * rate:
        notes.append(
            f"{topic}: east took {paced.sent_rate:,.0f} rec/s of the {rate:,.0f} asked for (the producer's queue "
            "was full: the site, or the machine, could not go faster meanwhile)"
        )
    notes += [f"west observer of {topic}: {text} (x{n})" for text, n in observer.errors.items()]
    notes += delete_topic(topology.east, topic, settings.timeout_s) + delete_topic(
        topology.west, topic, settings.timeout_s
    )
    seconds = max(paced.flushed - paced.first_sent, 1e-3)
    return LagRun(
        run,
        fraction,
        rate,
        paced.sent_rate,
        total,
        every,
        figures,
        None if drained is None else max(0.0, drained - paced.flushed),
        cores(used, seconds),
        used["mirror"],
        _errors(after, topic) - _errors(before, topic),
        _histogram_delta(before, after),
        appends,
        profiled=profile is not None,
        notes=notes,
    )


# -- runs ----------------------------------------------------------------------------------


def _profile_summaries(phase: str, outputs: dict[str, Path], used_cores: dict[str, float]) -> list[ProcessProfile]:
    found = []
    for role, path in outputs.items():
        stacks = summarise_stacks(path.read_text())
        found.append(
            ProcessProfile(
                phase,
                role,
                100 * used_cores.get(role, 0.0),
                stacks["samples"],
                stacks["idle_pct"],
                stacks["other_busy_pct"],
                stacks["places"][:12],
                stacks["functions"][:24],
            )
        )
    return found


def run(settings: Settings, step: Callable[[str], None]) -> tuple[Results, dict[str, Any], float]:
    """Every phase on one pair of sites; returns the results, the machine and the seconds taken."""
    t0 = time.perf_counter()
    results = Results(loadavg_start=os.getloadavg())
    value = os.urandom(VALUE_BYTES)
    pad = os.urandom(VALUE_BYTES - 8)
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(settings.base_dir, "strait-mirror-bench-"))
        if settings.zookeeper is None:
            step("starting ZooKeeper")
            connect = stack.enter_context(zookeeper(settings.strait, workdir, settings.zk_port))
        else:
            connect = settings.zookeeper
        site = StraitSite(settings.strait, connect, nodes=settings.nodes, properties=PROPERTIES)
        step(f"starting site east ({settings.nodes} nodes)")
        east = stack.enter_context(site.start(workdir / "east", PARTITIONS))
        step(f"starting site west ({settings.nodes} nodes)")
        west = stack.enter_context(site.start(workdir / "west", PARTITIONS))
        step(f"starting the WAN fault proxy ({settings.wan_rtt_ms} +- {settings.wan_jitter_ms} ms per round trip)")
        wan = stack.enter_context(
            wan_proxies(
                [n.bootstrap for n in east.nodes],
                workdir / "wan",
                rtt_ms=settings.wan_rtt_ms,
                jitter_ms=settings.wan_jitter_ms,
            )
        )
        topology = Topology(east, west, wan, workdir)
        info = machine(settings, workdir, site)
        for r in range(settings.runs):
            for rtt_ms in catch_up_rtts(settings.wan_rtt_ms, r):
                step(
                    f"run {r + 1}/{settings.runs}: site throughput, then the mirror's catch-up "
                    f"({settings.records:,} records, WAN RTT {rtt_ms} ms)"
                )
                fill = fill_run(settings, topology, r, value, rtt_ms=rtt_ms)
                step(
                    f"  site {fill.site_rate:,.0f} rec/s, mirror {fill.mirror_rate:,.0f} rec/s "
                    f"(ratio {fill.ratio:.2f}, first record after {fill.first_record_s * 1e3:.0f} ms)"
                )
                results.fills.append(fill)
        site_rate = results.site_rate()
        for r in range(settings.runs):
            order = FRACTIONS if r % 2 == 0 else tuple(reversed(FRACTIONS))
            for fraction in order:
                step(
                    f"run {r + 1}/{settings.runs}: lag at {fraction:.0%} of {site_rate:,.0f} rec/s "
                    f"for {settings.lag_seconds:g} s"
                )
                lag = lag_run(settings, topology, r, fraction, site_rate, pad)
                step(
                    f"  lag p50 {lag.figures.lag_ms['p50']:.0f} ms, p99 {lag.figures.lag_ms['p99']:.0f} ms, "
                    f"growth {lag.figures.growth_ms:.0f} ms, drain {drain_text(lag.drain_s)}: "
                    + ("kept up" if lag.kept_up else "did NOT keep up")
                )
                results.lags.append(lag)
        if settings.profile == "always" or (settings.profile == "auto" and goals_missed(results)):
            step("profiling the mirror and proxy processes (py-spy): catch-up copies and one 80 % run")
            for rtt_ms in catch_up_rtts(settings.wan_rtt_ms, 0):
                outputs = {role: workdir / f"py-spy-fill-{rtt_ms}ms-{role}.txt" for role in ("mirror", "proxy")}
                fill = fill_run(settings, topology, 0, value, rtt_ms=rtt_ms, profile=outputs)
                results.profile_fills.append(fill)
                results.profiles += _profile_summaries(f"catch-up copy, {rtt_ms} ms", outputs, fill.mirror_cores)
            outputs = {role: workdir / f"py-spy-lag-{role}.txt" for role in ("mirror", "proxy")}
            lag = lag_run(settings, topology, 0, GOAL_KEEP_UP_FRACTION, site_rate, pad, profile=outputs)
            results.profile_lag = lag
            results.profiles += _profile_summaries(f"{GOAL_KEEP_UP_FRACTION:.0%} lag run", outputs, lag.cores)
        step("stopping every process")
    results.loadavg_end = os.getloadavg()
    return results, info, time.perf_counter() - t0


def catch_up_rtts(wan_rtt_ms: int, run: int) -> tuple[int, ...]:
    """The WAN RTTs of run ``run``'s catch-up copies: 0 ms (the baseline) and ``wan_rtt_ms``, in an
    order that alternates from run to run (just one copy when the WAN itself is 0 ms)."""
    if wan_rtt_ms == 0:
        return (0,)
    return (0, wan_rtt_ms) if run % 2 == 0 else (wan_rtt_ms, 0)


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.mirror_bench", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--records", type=int, help="records per site/mirror throughput run (default 8000000; --quick 300000)"
    )
    p.add_argument("--runs", type=int, help="runs of each measurement, median reported (default 3; --quick 1)")
    p.add_argument("--lag-seconds", type=float, help="length of each paced lag run (default 30; --quick 5)")
    p.add_argument("--nodes", type=int, default=3, help="strait nodes per site (default 3)")
    p.add_argument("--wan-rtt-ms", type=int, default=50, help="latency added per round trip east <-> mirror (50)")
    p.add_argument("--wan-jitter-ms", type=int, default=10, help="+- jitter per round trip (10)")
    p.add_argument("--linger-ms", type=int, default=PRODUCER_SETTINGS["linger.ms"], help="producer linger.ms (5)")
    p.add_argument("--batch-bytes", type=int, default=PRODUCER_SETTINGS["batch.size"], help="producer batch.size")
    p.add_argument(
        "--profile",
        choices=["auto", "always", "never"],
        default="auto",
        help="py-spy on the mirror and proxy in extra runs: when a goal is missed (auto), always, or never",
    )
    p.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second (default 200)")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline in s for each start, topic, copy and drain")
    p.add_argument("--out", type=Path, help="write mirror-<date>.md and .json here (e.g. bench/results)")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="the nodes' data dirs go under this")
    p.add_argument("--zk-port", type=int, default=0, help="ZooKeeper client port (0: any free port)")
    p.add_argument("--zookeeper", metavar="HOST:PORT", help="use this ZooKeeper (a chroot per site) instead")
    p.add_argument("--strait", type=Path, default=Path(sys.executable).parent / "strait", help="the strait CLI")
    p.add_argument("--note", help="a line for the report, e.g. what else was running on the machine")
    p.add_argument("--quick", action="store_true", help="300000 records, 5 s lag runs, 1 run: a smoke test")
    p.add_argument(
        "--link",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a link setting with an integer value (e.g. fetch_max_bytes=16777216, pipeline_fetches=4); repeatable",
    )
    args = p.parse_args(argv)
    link_settings: dict[str, int] = {}
    for item in args.link:
        key, sep, value = item.partition("=")
        if not sep or not key or not value.strip().lstrip("-").isdigit():
            p.error(f"--link takes KEY=INTEGER, got {item!r}")
        link_settings[key.strip()] = int(value)
    fill_defaults(args, QUICK if args.quick else FULL)
    if args.records < 1000:
        p.error(f"--records must be at least 1000, got {args.records}")
    if min(args.runs, args.nodes, args.batch_bytes, args.profile_rate, args.linger_ms + 1) < 1:
        p.error("--runs, --nodes, --batch-bytes and --profile-rate must be positive, --linger-ms not negative")
    if min(args.lag_seconds, args.timeout) <= 0 or min(args.wan_rtt_ms, args.wan_jitter_ms) < 0:
        p.error("--lag-seconds and --timeout must be positive, --wan-rtt-ms and --wan-jitter-ms not negative")
    if args.wan_jitter_ms > args.wan_rtt_ms:
        p.error("--wan-jitter-ms cannot exceed --wan-rtt-ms")
    return Settings(
        nodes=args.nodes,
        records=args.records,
        runs=args.runs,
        lag_seconds=args.lag_seconds,
        wan_rtt_ms=args.wan_rtt_ms,
        wan_jitter_ms=args.wan_jitter_ms,
        linger_ms=args.linger_ms,
        batch_bytes=args.batch_bytes,
        profile=args.profile,
        profile_rate=args.profile_rate,
        timeout_s=args.timeout,
        out=args.out,
        base_dir=args.dir,
        zk_port=args.zk_port,
        zookeeper=args.zookeeper,
        strait=args.strait,
        note=args.note,
        quick=args.quick,
        argv=tuple(sys.argv[1:] if argv is None else argv),
        link_settings=link_settings,
    )


def measure_and_report(settings: Settings, step: Callable[[str], None]) -> int:
    """Every phase (:func:`run`), then the tables and, with ``--out``, the report."""
    require_strait(settings.strait)
    started = datetime.datetime.now().astimezone()
    results, info, elapsed = run(settings, step)
    print_tables(settings, results)
    if settings.out is not None:
        md_path, json_path = write_report(settings, results, info, started, elapsed)
        print(f"\nwrote {md_path} and {json_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    step = stepper(time.perf_counter())
    return guarded(lambda: measure_and_report(settings, step), started="process")


if __name__ == "__main__":
    sys.exit(main())
