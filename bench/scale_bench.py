"""Scale benchmark: how a 3-node strait site's costs grow with partitions and with idle connections.

Run from the repository root::

    .venv/bin/python -m bench.scale_bench --out bench/results     # 10,100,1000,5000 partitions
    .venv/bin/python -m bench.scale_bench --quick                 # smoke test: 10,100 partitions

One ZooKeeper, and for every step a **fresh site of three strait nodes** (bench._scale_site; the
node properties of bench._site.SITE_PROPERTIES, RF 3). Steps:

1. **Partitions** (``--partitions``, default 10,100,1000,5000 per site): topics of
   ``--topic-partitions`` (10) partitions, RF 3, ``min.insync.replicas=2``, made with
   CreateTopics, ``--create-batch`` (50) topics per request; the step starts once every node's
   ``/v1/cluster`` counts every partition, none offline or under-replicated, and the nodes
   together lead each once. Then, in this order:

   - memory: each node's resident set (every process of its session, ``/proc/<pid>/statm``),
     idle; the slope between steps is the memory per idle partition;
   - Metadata: ``--metadata-requests`` (20) requests for all topics (confluent-kafka
     ``list_topics()``, one client, after one untimed request); p50/p99;
   - produce: one record to every partition (timed: *first record*), then ``--records`` records,
     acks=all, not idempotent, round robin over every partition (each with a key); records/s from
     the first ``produce()`` to the last delivery report, each within ``--produce-timeout``;
     memory again after it;
   - start-up: a node that is not the controller is stopped with SIGTERM and started again on
     its data: seconds until it *serves* (ready file and a Metadata answer) and until *all led*
     (every node counts every partition, none offline, and the nodes' own leader counts sum to
     the partitions: every partition has a leader acting as one) and *in sync* (no partition
     under-replicated); then the same node SIGKILLed and started again;
   - controller failover: the controller (``/health``'s ``controller_id``) is SIGKILLed; seconds
     until a survivor names another controller, and until every partition's leader in Metadata
     is a survivor and the survivors lead every partition. Goal: < 5 s at 5,000 partitions. The
     time includes the dead controller's ZooKeeper session expiring (``--zk-session-ms``).

2. **Connections** (``--connections``, default 10,100,1000) on one more fresh site: a topic of
   one partition led by node 1; plain sockets to node 1 that send ApiVersions v0, read the answer
   and stay idle, opened cumulatively; at 0 and at each count, node 1's resident set and the
   latency (p50/p99, ``produce()`` to delivery report) of a producer paced at ``--latency-rate``
   records/s for ``--latency-seconds``, acks=all, ``linger.ms=0``.

Every step reports each figure's growth factor against the growth of the work and flags a step
that grows faster than the work ("superlinear: <metric> x<k> for x<n> work"). A measurement that
fails is reported NOT MEASURED with the reason, and the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from node.proc import Deadline, ProcessError

from . import _scale_plot
from ._cli import fill_defaults, guarded, require_strait, scratch_dir, stepper
from ._clients import PRODUCER_SETTINGS, VALUE_BYTES, Deliveries, open_producer, paced_produce, warm_up
from ._procs import POLL_S, BenchError, split_host_port, zookeeper
from ._report import (
    MB,
    command_line,
    dist_version,
    git_commit,
    git_dirty,
    machine_info,
    markdown_table,
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
from ._scale_growth import Growth, factor_text, growth_steps, p50_p99, slopes
from ._scale_site import (
    ScaleSite,
    admin_get,
    cluster_view,
    controller_id,
    create_topics,
    metadata_leaders,
    scale_site,
    settled,
    wait_for,
)
from ._site import SITE_PROPERTIES

CLIENT_ID = "strait-scale-bench"
SITE_NODES = 3
REPLICATION = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
FAILOVER_GOAL_S = 5.0
FAILOVER_GOAL_PARTITIONS = 5000
FULL: dict[str, Any] = {
    "partitions": (10, 100, 1000, 5000),
    "connections": (10, 100, 1000),
    "records": 20_000,
    # 20 Metadata requests and 180 s for each produce step: a 5,000-partition step alone took ~12 min
    # with 50 and 180 s on a loaded 2-core VM (its creation ~6 min of it).
    "metadata_requests": 20,
    "latency_seconds": 5.0,
    "produce_timeout": 180.0,
}
QUICK: dict[str, Any] = {
    "partitions": (10, 100),
    "connections": (10, 100),
    "records": 2_000,
    "metadata_requests": 10,
    "latency_seconds": 1.0,
    "produce_timeout": 60.0,
}

#: Per partition step: (key, column header, is a cost whose growth is compared with the work's).
PARTITION_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("create_s", "create + settle s", True),
    ("rss_total_mb", "RSS idle, 3 nodes MB", True),
    ("rss_max_node_mb", "RSS idle, largest node MB", True),
    ("rss_loaded_mb", "RSS after produce, 3 nodes MB", True),
    ("first_record_s", "first record to every partition s", True),
    ("produce_rps", "produce rec/s", False),
    ("produce_s", "produce s", True),
    ("metadata_p50_ms", "Metadata p50 ms", True),
    ("metadata_p99_ms", "Metadata p99 ms", True),
    ("clean_stop_s", "SIGTERM to exit s", True),
    ("clean_serve_s", "clean start: serves s", True),
    ("clean_leaders_s", "clean start: all led s", True),
    ("clean_in_sync_s", "clean start: in sync s", True),
    ("unclean_serve_s", "unclean start: serves s", True),
    ("unclean_leaders_s", "unclean start: all led s", True),
    ("unclean_in_sync_s", "unclean start: in sync s", True),
    ("failover_controller_s", "failover: controller s", True),
    ("failover_leaders_s", "failover: all led s", True),
    ("failover_after_named_s", "failover: named to all led s", True),
)
#: Per connection step.
CONNECTION_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("rss_node_mb", "node RSS MB", True),
    ("latency_p50_ms", "produce p50 ms", True),
    ("latency_p99_ms", "produce p99 ms", True),
)
#: Which measurement (a NOT MEASURED reason's key) produces which figures.
MEASUREMENTS = {
    "create": ("create_s",),
    "memory": ("rss_total_mb", "rss_max_node_mb"),
    "metadata": ("metadata_p50_ms", "metadata_p99_ms"),
    "produce": ("first_record_s", "produce_rps", "produce_s", "rss_loaded_mb"),
    "clean restart": ("clean_stop_s", "clean_serve_s", "clean_leaders_s", "clean_in_sync_s"),
    "unclean restart": ("unclean_serve_s", "unclean_leaders_s", "unclean_in_sync_s"),
    "failover": ("failover_controller_s", "failover_leaders_s", "failover_after_named_s"),
}


# -- settings and results ------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    partitions: tuple[int, ...]
    topic_partitions: int
    create_batch: int
    connections: tuple[int, ...]
    records: int
    metadata_requests: int
    latency_rate: float
    latency_seconds: float
    produce_timeout_s: float
    zk_session_ms: int
    timeout_s: float
    out: Path | None
    base_dir: Path
    zk_port: int
    zookeeper: str | None
    strait: Path
    quick: bool
    argv: tuple[str, ...]

    @property
    def site_properties(self) -> dict[str, str]:
        return SITE_PROPERTIES | {"zookeeper.session.timeout.ms": str(self.zk_session_ms)}

    def producer_config(self, bootstrap: str, **more: Any) -> dict[str, Any]:
        return PRODUCER_SETTINGS | {"client.id": CLIENT_ID, "bootstrap.servers": bootstrap, "acks": "all"} | more


@dataclass
class Step:
    """One step of a curve: the work (partitions or connections), its figures and what was not measured."""

    work: int
    figures: dict[str, float | None] = field(default_factory=dict)
    not_measured: dict[str, str] = field(default_factory=dict)  # measurement -> why
    detail: dict[str, Any] = field(default_factory=dict)  # per node figures, raw timings

    def attempt(self, measurement: str, body: Callable[[], None]) -> bool:
        """Run ``body``; when it fails (a step of the benchmark, a process, the client), its figures
        stay None and the reason is kept as NOT MEASURED. Returns whether it succeeded."""
        try:
            body()
        except (BenchError, ProcessError, KafkaException, OSError) as exc:
            self.not_measured[measurement] = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
            return False
        return True


def topic_names(partitions: int, per_topic: int) -> list[tuple[str, int]]:
    """(topic, its partition count) making ``partitions`` in all: topics of ``per_topic``, the last
    one smaller when ``per_topic`` does not divide ``partitions``."""
    full, rest = divmod(partitions, per_topic)
    names = [(f"scale-{i:05d}", per_topic) for i in range(full)]
    return names + ([(f"scale-{full:05d}", rest)] if rest else [])


# -- partition steps -------------------------------------------------------------------------


def _views(site: ScaleSite) -> list[dict[str, Any]]:
    return [cluster_view(n) for n in site.running.nodes]


def all_led(views: Sequence[dict[str, Any]], partitions: int) -> bool:
    """Every node counts every partition and none offline, and the nodes lead each partition once."""
    return all(v["partitions"] == partitions and v["offline"] == 0 for v in views) and (
        sum(v["leaders"] for v in views) == partitions
    )


def _until(site: ScaleSite, what: str, check: Callable[[list[dict[str, Any]]], bool], timeout: float) -> None:
    wait_for(lambda: True if check(_views(site)) else None, Deadline(timeout, what), lambda: _views(site))


def create_step(settings: Settings, site: ScaleSite, step: Step) -> None:
    """CreateTopics in batches, then wait until every node agrees that all partitions are led and in sync."""
    topics = topic_names(step.work, settings.topic_partitions)
    start = time.perf_counter()
    for count in sorted({n for _, n in topics}):
        names = [t for t, n in topics if n == count]
        create_topics(
            site.running.bootstrap,
            names,
            count,
            REPLICATION,
            batch=settings.create_batch,
            # Not shorter: one request of 50 topics took over 180 s at ~4,500 partitions. (A pending
            # CreateTopics holds the client's exit, after Ctrl-C too, until it answers or times out.)
            timeout=settings.timeout_s,
            config=TOPIC_CONFIG,
        )
    step.detail["create_requests_s"] = time.perf_counter() - start
    _until(site, f"{step.work} partitions in sync on every node", lambda v: settled(v, step.work), settings.timeout_s)
    step.figures["create_s"] = time.perf_counter() - start
    step.detail["topics"] = len(topics)


def memory(site: ScaleSite) -> dict[str, int]:
    return {str(i): rss for i, rss in site.node_rss().items()}


def memory_step(site: ScaleSite, step: Step) -> None:
    rss = memory(site)
    step.detail["rss_idle_bytes"] = rss
    step.figures["rss_total_mb"] = sum(rss.values()) / MB
    step.figures["rss_max_node_mb"] = max(rss.values()) / MB


def metadata_step(settings: Settings, site: ScaleSite, step: Step) -> None:
    admin = AdminClient({"bootstrap.servers": site.running.bootstrap, "client.id": CLIENT_ID})
    first = admin.list_topics(timeout=settings.timeout_s)  # connects; untimed
    if sum(len(t.partitions) for t in first.topics.values()) != step.work:
        raise BenchError(f"Metadata lists {len(first.topics)} topics, not {step.work} partitions in all")
    timings = []
    for _ in range(settings.metadata_requests):
        start = time.perf_counter()
        admin.list_topics(timeout=settings.timeout_s)
        timings.append((time.perf_counter() - start) * 1e3)
    step.detail["metadata_ms"] = timings
    step.figures["metadata_p50_ms"], step.figures["metadata_p99_ms"] = p50_p99(timings)


def drain(producer: Producer, deadline: Deadline) -> int:
    """Flush in slices of at most a second until nothing is queued or ``deadline`` passes; returns
    how many records are still queued. (One long ``flush()`` would hold off SIGTERM and Ctrl-C.)"""
    left: int = producer.flush(min(1.0, max(0.0, deadline.remaining())))
    while left and not deadline.expired():
        left = producer.flush(min(1.0, max(0.0, deadline.remaining())))
    return left


def produce_step(settings: Settings, site: ScaleSite, step: Step, value: bytes) -> None:
    """One record to every partition (timed on its own: *first record*), then ``settings.records``
    round robin over them (keyed), timed from the first produce() to the last delivery report.

    Each of the two must be done within ``settings.produce_timeout_s``; otherwise ``BenchError``
    says how far it got (queued records are purged when the producer closes)."""
    targets = sorted(metadata_leaders(site.running.bootstrap, settings.timeout_s))
    if len(targets) != step.work:
        raise BenchError(f"Metadata lists {len(targets)} partitions, expected {step.work}")
    deliveries = Deliveries()
    budget = settings.produce_timeout_s
    config = settings.producer_config(
        site.running.bootstrap, on_delivery=deliveries.on_delivery, **{"message.timeout.ms": int(budget * 1000)}
    )
    deadline = Deadline(budget, f"{step.work} partitions: the first record to each")
    with open_producer(config) as producer:
        first = time.perf_counter()
        for topic, partition in targets:
            producer.produce(topic, value, key=b"first", partition=partition)
        if drain(producer, deadline) or deliveries.failed:
            raise BenchError(
                f"the first record to every partition: {deliveries.delivered:,} of {len(targets):,} delivered "
                f"within {budget:g} s (--produce-timeout); failures {dict(deliveries.failed)}"
            )
        step.figures["first_record_s"] = deliveries.last - first
        deliveries.delivered = 0
        produce, poll = producer.produce, producer.poll
        deadline = Deadline(budget, f"{step.work} partitions: {settings.records:,} timed records")
        start = time.perf_counter()
        for i in range(settings.records):
            topic, partition = targets[i % len(targets)]
            while True:
                try:
                    produce(topic, value, key=b"%d" % i, partition=partition)
                    break
                except BufferError:
                    poll(POLL_S)
                    if deadline.expired():
                        break
            if not i & 1023:
                poll(0)
        left = drain(producer, deadline)
        step.detail["produce_progress"] = {"delivered": deliveries.delivered, "seconds": time.perf_counter() - start}
    if left or deliveries.failed or deliveries.delivered != settings.records:
        raise BenchError(
            f"{deliveries.delivered:,} of {settings.records:,} records delivered in "
            f"{time.perf_counter() - start:.0f} s (--produce-timeout {budget:g} s), {left:,} still queued, "
            f"failures {dict(deliveries.failed)}"
        )
    seconds = deliveries.last - start
    step.figures["produce_s"] = seconds
    step.figures["produce_rps"] = settings.records / seconds
    rss = memory(site)
    step.detail["rss_loaded_bytes"] = rss
    step.figures["rss_loaded_mb"] = sum(rss.values()) / MB


def _follower_node(site: ScaleSite) -> int:
    controller = controller_id(site.running.nodes)
    return next(i for i in reversed(site.broker_ids) if i != controller)


def restart_step(settings: Settings, site: ScaleSite, step: Step, *, clean: bool) -> None:
    """Stop a node that is not the controller (SIGTERM or SIGKILL), start it again, and time its
    start-up: until it serves, until every partition is led, until none is under-replicated."""
    prefix = "clean" if clean else "unclean"
    # After a produce that ran out of time the nodes may still be working off its requests.
    _until(
        site, f"{step.work} partitions in sync before a restart", lambda v: settled(v, step.work), settings.timeout_s
    )
    broker_id = _follower_node(site)
    step.detail[f"{prefix}_node"] = broker_id
    if clean:
        step.figures["clean_stop_s"] = site.terminate(broker_id)
    else:
        site.kill(broker_id)
    start = time.perf_counter()
    site.start(broker_id)
    step.figures[f"{prefix}_serve_s"] = time.perf_counter() - start
    _until(site, f"node {broker_id}: every partition led", lambda v: all_led(v, step.work), settings.timeout_s)
    step.figures[f"{prefix}_leaders_s"] = time.perf_counter() - start
    _until(site, f"node {broker_id}: back in sync", lambda v: settled(v, step.work), settings.timeout_s)
    step.figures[f"{prefix}_in_sync_s"] = time.perf_counter() - start


def failover_step(settings: Settings, site: ScaleSite, step: Step) -> None:
    """SIGKILL the controller; time until a survivor names another one, and until every partition's
    leader is a survivor (Metadata) and the survivors lead every partition (their /v1/cluster)."""
    controller = controller_id(site.running.nodes)
    if controller is None:
        raise BenchError("no node names a controller")
    step.detail["failover_killed"] = controller
    start = time.perf_counter()
    site.kill(controller)
    survivors = site.running.nodes
    alive = {n.broker_id for n in survivors}
    deadline = Deadline(settings.timeout_s, f"a new controller after killing node {controller}")

    def named() -> int | None:
        found = controller_id(survivors)
        return found if found in alive else None

    wait_for(named, deadline, lambda: f"controller named: {controller_id(survivors)}")
    step.figures["failover_controller_s"] = time.perf_counter() - start
    bootstrap = site.running.bootstrap
    last: dict[str, Any] = {}

    def led() -> bool | None:
        leaders = metadata_leaders(bootstrap, min(10.0, settings.timeout_s))
        last["not_led"] = sum(1 for leader in leaders.values() if leader not in alive)
        if len(leaders) != step.work or last["not_led"]:
            return None
        return True if all_led(_views(site), step.work) else None

    wait_for(led, Deadline(settings.timeout_s, f"every partition led after killing node {controller}"), lambda: last)
    step.figures["failover_leaders_s"] = time.perf_counter() - start
    step.figures["failover_after_named_s"] = step.figures["failover_leaders_s"] - step.figures["failover_controller_s"]


def partition_step(settings: Settings, connect: str, workdir: Path, partitions: int, value: bytes) -> Step:
    """A fresh site with ``partitions`` partitions, measured in order; always stopped."""
    step = Step(partitions)
    try:
        with scale_site(
            settings.strait,
            connect,
            workdir,
            nodes=SITE_NODES,
            properties=settings.site_properties,
            timeout_s=settings.timeout_s,
        ) as site:
            step.detail["rss_empty_bytes"] = memory(site)
            if not step.attempt("create", lambda: create_step(settings, site, step)):
                for later in list(MEASUREMENTS)[1:]:
                    step.not_measured[later] = "the partitions were not created and in sync"
                return step
            step.attempt("memory", lambda: memory_step(site, step))
            step.attempt("metadata", lambda: metadata_step(settings, site, step))
            step.attempt("produce", lambda: produce_step(settings, site, step, value))
            for clean in (True, False):
                name = "clean restart" if clean else "unclean restart"
                step.attempt(name, lambda c=clean: restart_step(settings, site, step, clean=c))  # type: ignore[misc]
            step.attempt("failover", lambda: failover_step(settings, site, step))
    except (ProcessError, BenchError) as exc:  # the site did not start, or did not stop cleanly
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
        for name, keys in MEASUREMENTS.items():
            if not any(step.figures.get(key) is not None for key in keys):
                step.not_measured.setdefault(name, reason)
    return step


# -- connection steps ------------------------------------------------------------------------

_API_VERSIONS_V0 = struct.Struct(">ihhih")  # size, api_key 18, api_version 0, correlation id, client id length
_SIZE = struct.Struct(">i")


def api_versions_request(correlation_id: int, client_id: bytes = b"strait-scale-idle") -> bytes:
    """An ApiVersions v0 request, size-prefixed (request header v1: key, version, correlation id, client id)."""
    body_len = _API_VERSIONS_V0.size - 4 + len(client_id)
    return _API_VERSIONS_V0.pack(body_len, 18, 0, correlation_id, len(client_id)) + client_id


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise BenchError(f"connection closed after {len(data)} of {n} bytes of an ApiVersions answer")
        data += chunk
    return bytes(data)


def open_idle(address: tuple[str, int], correlation_id: int, timeout: float) -> socket.socket:
    """A connection that has sent ApiVersions v0 and read its whole answer (error code 0), then idles."""
    sock = socket.create_connection(address, timeout=timeout)
    try:
        sock.sendall(api_versions_request(correlation_id))
        (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
        answer = _recv_exactly(sock, size)
        got_id, error = struct.unpack_from(">ih", answer)
        if got_id != correlation_id or error != 0:
            raise BenchError(f"ApiVersions answered correlation id {got_id} (sent {correlation_id}), error {error}")
    except BaseException:
        sock.close()
        raise
    return sock


@contextmanager
def idle_connections() -> Iterator[list[socket.socket]]:
    """A list to hold idle sockets; every one is closed when the block ends."""
    held: list[socket.socket] = []
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


def latency_figures(settings: Settings, bootstrap: str, topic: str, value: bytes) -> dict[str, float]:
    config = settings.producer_config(bootstrap, **{"linger.ms": 0})
    total = max(2, round(settings.latency_rate * settings.latency_seconds))
    with open_producer(config) as producer:
        warm_up(producer, topic, value, settings.timeout_s)
        sent, done, failed, left = paced_produce(
            producer, topic, value, settings.latency_rate, total, settings.timeout_s
        )
    if left or failed or not all(done):
        raise BenchError(f"paced producer: {left} undelivered, failures {dict(failed)}")
    p50, p99 = p50_p99([(d - s) * 1e3 for s, d in zip(sent, done, strict=True)])
    return {"latency_p50_ms": p50, "latency_p99_ms": p99}


def connection_steps(settings: Settings, connect: str, workdir: Path, value: bytes) -> list[Step]:
    """One fresh site; node 1 leads a one-partition topic; idle connections to node 1 opened
    cumulatively; at 0 and at every count, node 1's memory and a paced producer's latency."""
    steps = [Step(c) for c in (0, *settings.connections)]
    topic = "scale-latency"
    try:
        with (
            scale_site(
                settings.strait,
                connect,
                workdir,
                nodes=SITE_NODES,
                properties=settings.site_properties,
                timeout_s=settings.timeout_s,
            ) as site,
            idle_connections() as held,
        ):
            node = site.node(1)
            admin = AdminClient({"bootstrap.servers": site.running.bootstrap, "client.id": CLIENT_ID})
            new = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]], config=TOPIC_CONFIG)
            admin.create_topics([new], request_timeout=settings.timeout_s)[topic].result(timeout=settings.timeout_s)
            _until(site, f"topic {topic} in sync", lambda v: settled(v, 1), settings.timeout_s)
            address = split_host_port(node.bootstrap)
            for step in steps:
                deadline = Deadline(settings.timeout_s, f"{step.work} idle connections to node 1")

                def grow(step: Step = step, deadline: Deadline = deadline) -> None:
                    while len(held) < step.work:
                        held.append(open_idle(address, len(held) + 1, max(1.0, deadline.remaining())))
                        if deadline.expired():
                            raise BenchError(f"only {len(held)} of {step.work} idle connections opened in time")
                    health = admin_get(node.admin_url or "", "/health")
                    if health.get("status") != "ok":
                        raise BenchError(f"node 1 reports {health.get('status')!r} with {len(held)} connections")
                    step.figures["rss_node_mb"] = site.node_rss()[1] / MB

                if not step.attempt("memory", grow):
                    step.not_measured["latency"] = "the idle connections could not be opened"
                    continue

                def latency(step: Step = step) -> None:
                    step.figures.update(latency_figures(settings, site.running.bootstrap, topic, value))

                step.attempt("latency", latency)
    except (ProcessError, BenchError, KafkaException) as exc:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
        for step in steps:
            if step.figures.get("rss_node_mb") is None:
                step.not_measured.setdefault("memory", reason)
            if step.figures.get("latency_p99_ms") is None:
                step.not_measured.setdefault("latency", reason)
    return steps


# -- analysis --------------------------------------------------------------------------------


def growths(steps: Sequence[Step], metrics: Sequence[tuple[str, str, bool]]) -> list[Growth]:
    """Growth of every cost metric between consecutive steps with positive work."""
    positive = [s for s in steps if s.work > 0]
    found: list[Growth] = []
    for key, label, cost in metrics:
        if cost:
            found += growth_steps(label, [(s.work, s.figures.get(key)) for s in positive])
    return found


def per_unit_lines(steps: Sequence[Step], key: str, unit: str, what: str) -> list[str]:
    """``"<unit>: <bytes> per <what> (from a to b)"`` for each slope of ``key`` (MB) between steps."""
    lines = []
    for w0, w1, slope in slopes([(s.work, s.figures.get(key)) for s in steps]):
        lines.append(f"{unit}: {slope * MB / 1024:,.1f} KiB per {what} (from {w0:,.0f} to {w1:,.0f})")
    return lines


def goal_lines(steps: Sequence[Step]) -> list[str]:
    """The failover goal's verdict: at the largest step with at least 5,000 partitions, if any."""
    candidates = [s for s in steps if s.work >= FAILOVER_GOAL_PARTITIONS]
    if not candidates:
        return [
            f"controller failover < {FAILOVER_GOAL_S:g} s at {FAILOVER_GOAL_PARTITIONS:,} partitions: "
            f"{verdict_word(None)} (no step has {FAILOVER_GOAL_PARTITIONS:,} partitions)"
        ]
    step = max(candidates, key=lambda s: s.work)
    seconds = step.figures.get("failover_leaders_s")
    if seconds is None:
        why = step.not_measured.get("failover", "not measured")
        return [f"controller failover < {FAILOVER_GOAL_S:g} s at {step.work:,} partitions: NOT MEASURED ({why})"]
    after = step.figures.get("failover_after_named_s")
    if after is None:
        after = seconds - (step.figures.get("failover_controller_s") or 0.0)
    return [
        f"controller failover < {FAILOVER_GOAL_S:g} s at {step.work:,} partitions, from a new controller named "
        f"(the dead one's ZooKeeper session expired) to every partition led: {after:.2f} s, "
        f"{verdict_word(after < FAILOVER_GOAL_S)}",
        f"controller failover at {step.work:,} partitions from the kill: {seconds:.2f} s, which includes the dead "
        f"node's ZooKeeper session expiring (zookeeper.session.timeout.ms, see Settings); not judged against the goal",
    ]


# -- report ----------------------------------------------------------------------------------


def _cell(value: float | None) -> str:
    if value is None:
        return "NOT MEASURED"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value < 10 else f"{value:.1f}"


def step_table(
    steps: Sequence[Step], metrics: Sequence[tuple[str, str, bool]], work: str
) -> tuple[list[str], list[list[str]]]:
    """One row per step: the work, then every metric's figure (NOT MEASURED when missing)."""
    headers = [work, *(label for _, label, _ in metrics)]
    return headers, [[f"{s.work:,}", *(_cell(s.figures.get(key)) for key, _, _ in metrics)] for s in steps]


def metric_table(
    steps: Sequence[Step], metrics: Sequence[tuple[str, str, bool]], work: str
) -> tuple[list[str], list[list[str]]]:
    """One row per metric, one column per step (a curve reads left to right): :func:`step_table` turned."""
    headers = ["metric", *(f"{s.work:,} {work}" for s in steps)]
    return headers, [[label, *(_cell(s.figures.get(key)) for s in steps)] for key, label, _ in metrics]


def growth_table(found: Sequence[Growth]) -> tuple[list[str], list[list[str]]]:
    """One row per metric and step: the work's growth, the metric's, and the superlinear flag."""
    headers = ["metric", "step", "work", "metric grew", "flag"]
    rows = [
        [
            g.metric,
            f"{g.work0:,.0f} -> {g.work1:,.0f}",
            factor_text(g.work_factor),
            factor_text(g.value_factor),
            g.flag() or "-",
        ]
        for g in found
    ]
    return headers, rows


def not_measured_lines(steps: Sequence[Step], work: str) -> list[str]:
    return [f"{s.work:,} {work}: {name}: NOT MEASURED ({why})" for s in steps for name, why in s.not_measured.items()]


def software_info(settings: Settings) -> dict[str, Any]:
    return {
        "confluent_kafka": dist_version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "matplotlib": dist_version("matplotlib"),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
    }


def settings_lines(settings: Settings) -> list[str]:
    props = ", ".join(f"{k}={v}" for k, v in settings.site_properties.items())
    return [
        f"- Site: {SITE_NODES} strait nodes (`strait node start`, two log dirs each) on one ZooKeeper, a fresh "
        f"site (and chroot) for every partition step and one for the connections; node properties `{props}`; "
        "everything on 127.0.0.1",
        f"- Partitions: {', '.join(f'{p:,}' for p in settings.partitions)} per site, as topics of "
        f"{settings.topic_partitions} partitions, RF {REPLICATION}, `min.insync.replicas=2`; CreateTopics with "
        f"{settings.create_batch} topics per request; *create + settle* runs until every node's `/v1/cluster` "
        "counts every partition, none offline or under-replicated, and the nodes lead each once",
        "- Memory: resident set of every process of each node's session (`/proc/<pid>/statm`); *idle* right "
        "after the partitions settled, before any record",
        f"- Metadata: {settings.metadata_requests} requests for all topics (confluent-kafka `list_topics()`, "
        "one client, one untimed request first); nearest-rank p50/p99",
        f"- Produce: {settings.records:,} records of {VALUE_BYTES} B, acks=all, not idempotent, round robin "
        "over every partition with a key each, timed from the first produce() to the last delivery report, after "
        "one record to every partition, timed on its own (*first record to every partition*); each within "
        f"{settings.produce_timeout_s:g} s (`--produce-timeout`, else NOT MEASURED with how far they got); "
        f"producer `linger.ms={PRODUCER_SETTINGS['linger.ms']}`, "
        f"`batch.size={PRODUCER_SETTINGS['batch.size']}`",
        "- Start-up: a node that is not the controller, stopped with SIGTERM (controlled shutdown off) and "
        "started again on its data, then SIGKILLed and started again; from spawn: *serves* (ready file and a "
        "Metadata answer), *all led* (every node counts every partition, none offline, the nodes' own leader "
        "counts sum to the partitions), *in sync* (none under-replicated). After SIGKILL the node's old "
        f"ZooKeeper session must expire first (`zookeeper.session.timeout.ms={settings.zk_session_ms}`)",
        "- Failover: the controller (`/health` `controller_id`) SIGKILLed; from the kill: *controller* (a "
        "survivor names another controller), *all led* (every partition's leader in Metadata is a survivor and "
        "the survivors lead every partition). Both include the dead node's ZooKeeper session expiring",
        f"- Connections: {', '.join(f'{c:,}' for c in settings.connections)} plain sockets to node 1 (opened "
        "cumulatively; each sends ApiVersions v0, reads the answer, then idles); node 1 leads a topic of one "
        f"partition (RF 3) to which a producer paced at {settings.latency_rate:g} records/s for "
        f"{settings.latency_seconds:g} s (acks=all, linger.ms=0) sends; `produce()` to delivery report",
        "- Growth: each cost's factor from one step to the next against the work's (partitions, connections); "
        "a cost that grows by more than the work is flagged superlinear. Produce is compared as the seconds the "
        "fixed number of records took",
    ]


def write_report(
    settings: Settings,
    machine: dict[str, Any],
    partition_steps: list[Step],
    connection_steps_: list[Step],
    started: datetime.datetime,
    elapsed: float,
) -> tuple[Path, Path, Path]:
    """Write ``scale-<date>.md``, ``.json`` and ``.png`` to ``settings.out``; returns their paths."""
    assert settings.out is not None
    stem = result_stem(settings.out, "scale", started)
    p_growth = growths(partition_steps, PARTITION_METRICS)
    c_growth = growths(connection_steps_, CONNECTION_METRICS)
    flags = [g.flag() for g in (*p_growth, *c_growth) if g.superlinear]
    memory_lines = [
        *per_unit_lines(partition_steps, "rss_total_mb", "memory per idle partition (3 replicas)", "partition"),
        *per_unit_lines(connection_steps_, "rss_node_mb", "memory per idle connection", "connection"),
    ]
    goals = goal_lines(partition_steps)
    data = run_fields(started, elapsed, command_line("bench.scale_bench", settings.argv)) | {
        "settings": settings_json(settings),
        "site_properties": settings.site_properties,
        "producer_settings": settings.producer_config("<site>"),
        "machine": machine,
        "goals": {"failover_s": FAILOVER_GOAL_S, "at_partitions": FAILOVER_GOAL_PARTITIONS},
        "goal_lines": goals,
        "memory_lines": memory_lines,
        "partition_steps": [
            {"partitions": s.work, "figures": s.figures, "not_measured": s.not_measured, "detail": s.detail}
            for s in partition_steps
        ],
        "connection_steps": [
            {"connections": s.work, "figures": s.figures, "not_measured": s.not_measured} for s in connection_steps_
        ],
        "growth": [
            {
                "metric": g.metric,
                "work0": g.work0,
                "work1": g.work1,
                "work_factor": g.work_factor,
                "value_factor": g.value_factor,
                "superlinear": g.superlinear,
            }
            for g in (*p_growth, *c_growth)
        ],
        "superlinear": flags,
    }
    json_path = stem.with_suffix(".json")
    png_path = stem.with_suffix(".png")
    write_json(json_path, data)
    _scale_plot.draw(
        png_path,
        data["partition_steps"],
        data["connection_steps"],
        title=f"strait scale curve, 3-node site, RF {REPLICATION} ({started.date().isoformat()})",
        failover_goal_s=FAILOVER_GOAL_S,
    )
    sw = machine["software"]
    dirty = " (with uncommitted changes)" if sw["git_dirty"] else ""
    missing = not_measured_lines(partition_steps, "partitions") + not_measured_lines(connection_steps_, "connections")
    md = [
        *report_head(
            f"# Scale benchmark (3-node strait site, RF {REPLICATION}), {started.date().isoformat()}", data, json_path
        ),
        *report_sections(
            [*site_machine_lines(machine), f"- strait: commit `{sw['git_commit']}`{dirty}"],
            settings_lines(settings),
            [*goals, *memory_lines],
        ),
        f"![the scale curves]({png_path.name})",
        "",
        "### Partitions",
        "",
        markdown_table(*metric_table(partition_steps, PARTITION_METRICS, "partitions")),
        "",
        "### Idle connections to one node",
        "",
        markdown_table(*step_table(connection_steps_, CONNECTION_METRICS, "connections")),
        "",
        "### Growth against the work",
        "",
        markdown_table(*growth_table([*p_growth, *c_growth])),
        "",
        "Superlinear steps (a cost that grew by more than the work; each wants a note on why):",
        "",
        *([f"- {f}" for f in flags] or ["- none"]),
        "",
    ]
    if missing:
        md += ["Not measured:", "", *[f"- {line}" for line in missing], ""]
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path, png_path


def print_tables(partition_steps: list[Step], connection_steps_: list[Step]) -> None:
    console = wide_console(200)
    left: Callable[[int, str], bool] = lambda i, h: i == 0 or h in ("metric", "step", "flag")  # noqa: E731
    print_table(console, "Partitions", *metric_table(partition_steps, PARTITION_METRICS, "partitions"), left)
    print_table(console, "Idle connections", *step_table(connection_steps_, CONNECTION_METRICS, "connections"), left)
    found = [*growths(partition_steps, PARTITION_METRICS), *growths(connection_steps_, CONNECTION_METRICS)]
    print_table(console, "Growth against the work", *growth_table(found), left)
    print_goal_lines(console, goal_lines(partition_steps))
    for line in [g.flag() for g in found if g.superlinear]:
        console.print(line, style="yellow")
    for line in not_measured_lines(partition_steps, "partitions") + not_measured_lines(
        connection_steps_, "connections"
    ):
        console.print(line, style="red")


# -- main ------------------------------------------------------------------------------------


def counts(text: str) -> tuple[int, ...]:
    """``"10,100,1000"`` -> ``(10, 100, 1000)``: distinct, ascending, each >= 1."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1 or list(values) != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"counts must be ascending, distinct and >= 1: {text!r}")
    return values


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.scale_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=counts, help="partitions per site, one step each (default 10,100,1000,5000)")
    p.add_argument("--topic-partitions", type=int, default=10, help="partitions per topic (default 10)")
    p.add_argument("--create-batch", type=int, default=50, help="topics per CreateTopics request (default 50)")
    p.add_argument("--connections", type=counts, help="idle connections to one node (default 10,100,1000)")
    p.add_argument("--records", type=int, help="records produced at each partition step (default 20000)")
    p.add_argument(
        "--produce-timeout", type=float, help="s for the first records and the timed ones per step (default 180)"
    )
    p.add_argument("--metadata-requests", type=int, help="timed Metadata requests per step (default 20)")
    p.add_argument("--latency-rate", type=float, default=200.0, help="paced producer's records/s (default 200)")
    p.add_argument("--latency-seconds", type=float, help="paced producer's run per connection step (default 5)")
    p.add_argument("--zk-session-ms", type=int, default=6000, help="the nodes' zookeeper.session.timeout.ms (6000)")
    p.add_argument("--timeout", type=float, default=600.0, help="deadline in s of each start, creation and wait")
    p.add_argument("--out", type=Path, help="write scale-<date>.md, .json and .png here (e.g. bench/results)")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="the nodes' data dirs go under this")
    p.add_argument("--zk-port", type=int, default=0, help="ZooKeeper client port (0: any free port)")
    p.add_argument("--zookeeper", metavar="HOST:PORT", help="use this ZooKeeper (a chroot per site) instead")
    p.add_argument("--strait", type=Path, default=Path(sys.executable).parent / "strait", help="the strait CLI")
    p.add_argument("--quick", action="store_true", help="10,100 partitions, 10,100 connections, 2000 records")
    args = p.parse_args(argv)
    fill_defaults(args, QUICK if args.quick else FULL)
    if min(args.topic_partitions, args.create_batch, args.records, args.metadata_requests) < 1:
        p.error("--topic-partitions, --create-batch, --records and --metadata-requests must be positive")
    if min(args.latency_rate, args.latency_seconds, args.timeout, args.zk_session_ms, args.produce_timeout) <= 0:
        p.error("--latency-rate, --latency-seconds, --timeout, --zk-session-ms, --produce-timeout must be positive")
    return Settings(
        partitions=args.partitions,
        topic_partitions=args.topic_partitions,
        create_batch=args.create_batch,
        connections=args.connections,
        records=args.records,
        metadata_requests=args.metadata_requests,
        latency_rate=args.latency_rate,
        latency_seconds=args.latency_seconds,
        produce_timeout_s=args.produce_timeout,
        zk_session_ms=args.zk_session_ms,
        timeout_s=args.timeout,
        out=args.out,
        base_dir=args.dir,
        zk_port=args.zk_port,
        zookeeper=args.zookeeper,
        strait=args.strait,
        quick=args.quick,
        argv=tuple(sys.argv[1:] if argv is None else argv),
    )


def _raise_open_files(needed: int) -> None:
    """Raise this process's soft limit on open files (the nodes inherit it) towards ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else min(needed, hard), hard)
        )


def run(settings: Settings) -> int:
    require_strait(settings.strait)
    # The nodes run this checkout's code, whatever checkout the strait CLI was installed from.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    started = datetime.datetime.now().astimezone()
    t0 = time.perf_counter()
    step = stepper(t0)
    _raise_open_files(max(settings.connections) + 4 * max(settings.partitions) + 1024)
    value = os.urandom(VALUE_BYTES)
    partition_steps: list[Step] = []
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(settings.base_dir, "strait-scale-bench-"))
        if settings.zookeeper is None:
            step("starting ZooKeeper")
            connect = stack.enter_context(zookeeper(settings.strait, workdir, settings.zk_port))
        else:
            connect = settings.zookeeper
        machine = machine_info(workdir) | {"software": software_info(settings)}
        for partitions in settings.partitions:
            step(f"{partitions:,} partitions: a fresh {SITE_NODES}-node site")
            found = partition_step(settings, connect, workdir / f"site-p{partitions}", partitions, value)
            partition_steps.append(found)
            step(f"{partitions:,} partitions: {found.figures}; not measured: {list(found.not_measured) or 'none'}")
        step(f"idle connections {', '.join(map(str, settings.connections))}: a fresh site")
        conns = connection_steps(settings, connect, workdir / "site-connections", value)
        step(f"connections done; not measured: {[(s.work, list(s.not_measured)) for s in conns if s.not_measured]}")
    elapsed = time.perf_counter() - t0
    print_tables(partition_steps, conns)
    if settings.out is not None:
        paths = write_report(settings, machine, partition_steps, conns, started, elapsed)
        print(f"\nwrote {', '.join(map(str, paths))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    return guarded(lambda: run(settings), started="process")


if __name__ == "__main__":
    sys.exit(main())
