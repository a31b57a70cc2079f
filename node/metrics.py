"""Prometheus metrics of one broker node.

``NodeMetrics`` owns a private :class:`prometheus_client.CollectorRegistry`, never the global
one, so several nodes can live in one process (tests, the local appliance). Two kinds of
metrics live in it:

* **Pushed** by the request path: request, byte and error counters per Kafka API, latency
  histograms, open connections and why connections closed. The hot-path methods look up each
  label set once and cache the child series, so a call costs a dict lookup plus the increments.
* **Pulled** at scrape time from a :class:`MetricsView` (the broker's state): partition counts,
  log dir sizes and health, per-partition offsets, replication state (leaders, ISR, follower lag,
  under-replicated and offline partitions) and the controller. Nothing is copied or cached
  between scrapes, so a scrape always shows the state at that moment.

Metric names (all prefixed ``strait_``)::

    strait_requests_total{api}                     counter
    strait_request_bytes_total{api}                counter
    strait_response_bytes_total{api}               counter
    strait_request_errors_total{api,error}         counter    error = Kafka error name
    strait_client_requests_total{client,api,version}  counter  requests by the client software that sent
                                                              them (ApiVersions v3+'s client_software_name,
                                                              else the connection's client.id; at most
                                                              MAX_CLIENT_LABELS values, the rest "other")
                                                              and API version: which clients use which
                                                              versions (docs/compatibility.md is made from it)
    strait_request_latency_seconds{api}            histogram
    strait_produce_latency_seconds                 histogram
    strait_fetch_latency_seconds                   histogram
    strait_request_phase_seconds{api,phase}        histogram  where a request's time went, phase =
        unread  from the kernel's receipt of the request (its latest bytes read with its first) to
                its handling: time it waited behind earlier requests of its connection (plain TCP
                listeners; TLS hides the socket)
        local   decoding it and the handler's own work
        remote  the handler waiting on other nodes or data: acks=all until the high watermark
                passes the batch, a fetch's long poll
        send    encoding the response and writing it to the socket
    strait_replica_fetch_wakeup_seconds            histogram  leader: a follower's parked fetch, from the
                                                              append (or HW move) that woke it to running
    strait_replica_fetch_round_trip_seconds        histogram  follower: a replica fetch that brought records,
                                                              from sending it to its decoded response
    strait_replica_fetch_turnaround_seconds        histogram  follower: appending a fetch's records and
                                                              sending the next fetch (the turnaround that
                                                              delays the leader's high watermark)
    strait_gc_pause_seconds{generation}            histogram  the process's garbage collections (a pause
                                                              of every task of the node)
    strait_fetch_sessions                          gauge      incremental fetch sessions cached (KIP-227)
    strait_fetch_session_partitions                gauge      partitions over those sessions
    strait_fetch_session_evictions_total           counter    sessions evicted to make room for another
    strait_fetch_requests_total{session}           counter    fetches by session use: sessionless, full, incremental
    strait_connections                             gauge
    strait_connections_closed_total{reason}        counter    malformed, oversized, idle, eof, ...
    strait_partitions                              gauge      from the view
    strait_partitions_offline                      gauge      from the view
    strait_log_dir_bytes{dir}                      gauge      from the view
    strait_log_dir_online{dir}                     gauge      1 or 0, from the view
    strait_log_dir_moves{dir}                      gauge      replicas being moved into the dir
                                                              (AlterReplicaLogDirs), from the view
    strait_log_dir_move_lag_records{dir}           gauge      how many offsets those moves' copies are
                                                              behind their current logs, summed
    strait_log_start_offset{topic,partition}       gauge      from the view
    strait_high_watermark{topic,partition}         gauge      from the view
    strait_log_end_offset{topic,partition}         gauge      from the view
    strait_partition_leader{topic,partition}       gauge      leader broker id, -1: none
    strait_partition_leader_epoch{topic,partition} gauge      from the view
    strait_partition_isr_size{topic,partition}     gauge      from the view
    strait_partition_replicas{topic,partition}     gauge      replication factor
    strait_partition_log_end_offset{topic,partition} gauge    of the local replica
    strait_follower_lag_records{topic,partition,follower}  gauge  on the leader: its log end - the follower's
    strait_under_replicated_partitions             gauge      under-replicated partitions this node leads
    strait_offline_partitions                      gauge      partitions of the cluster without a live leader
    strait_controller_active                       gauge      1 on the active controller, else 0
    strait_controller_epoch                        gauge      epoch of the controller ZooKeeper names
    strait_replica_fetch_errors_total              counter    replica fetcher sessions that failed
    strait_group_members{group}                    gauge      from the view
    strait_group_lag{group,topic,partition}        gauge      from the view
    strait_group_lag_total{group}                  gauge      from the view
    strait_quota_throttle_seconds_total{quota}     counter    client quotas (docs/quotas.md): throttle time
                                                              asked of clients, quota = produce, fetch, request
    strait_quota_throttled_total{quota}            counter    answers that carried a throttle time, by quota
    strait_quota_rate{quota,user,client_id}        gauge      the measured rate of each quota entity in use
                                                              (bytes/s; request: percent of a thread), Kafka's
                                                              byte-rate / request-time by user and client-id
    strait_quota_limit{quota,user,client_id}       gauge      the quota that rate is held to
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

__all__ = [
    "LATENCY_BUCKETS",
    "MAX_CLIENT_LABELS",
    "OTHER_CLIENTS",
    "PHASE_BUCKETS",
    "MetricsView",
    "NodeMetrics",
    "QuotaView",
]

#: Histogram buckets in seconds: 0.1 ms to 10 s in 1-2.5-5 steps (+Inf is added by prometheus_client).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
#: Distinct ``client`` values ``strait_client_requests_total`` takes; the client names come from
#: the clients, so a node that met more (a client id per process, say) counts the rest as
#: OTHER_CLIENTS rather than growing its series without bound.
MAX_CLIENT_LABELS = 32
OTHER_CLIENTS = "other"
#: Longest client name kept as a label (longer ones are cut).
MAX_CLIENT_LABEL_CHARS = 64

#: Finer buckets for the phases of a request: 10 us to 10 s. The phases of a replicated write are
#: fractions of a millisecond each, below LATENCY_BUCKETS' first step.
PHASE_BUCKETS: tuple[float, ...] = (0.00001, 0.000025, 0.00005, *LATENCY_BUCKETS)


class MetricsView(Protocol):
    """The part of the broker's state that metrics read at scrape time.

    The methods are called on the thread that renders the metrics (the trio thread when served
    by ``node.admin_http``), must not block, and return plain JSON-like data. The shapes are those
    of ``node.admin_http.AdminView``; the keys read here are:

    * ``topics()``: ``[{"name": str, "partitions": [{"partition": int, "online": bool,
      "leader": int, "leader_epoch": int, "replicas": [int], "isr": [int], "role": str | None,
      "followers": [{"broker_id": int, "log_end_offset": int | None}],
      "log_start_offset": int | None, "high_watermark": int | None, "log_end_offset": int | None}]}]``
      (an offset is ``None`` when this node cannot read that partition's log);
    * ``cluster()``: ``{"is_controller": bool, "controller": {"epoch": int} | None,
      "under_replicated_led": int, "offline": int, "replica_fetch_errors": int}``;
    * ``log_dirs()``: ``[{"path": str, "online": bool, "bytes": int | None, "moves_in":
      [{"topic": str, "partition": int, "offset_lag": int}]}]`` (``moves_in`` may be left out).
    """

    def topics(self) -> list[dict[str, object]]:
        """The topics this node knows, with their partitions."""
        ...

    def cluster(self) -> dict[str, object]:
        """The cluster as this node sees it: controller, counts of under-replicated and offline partitions."""
        ...

    def log_dirs(self) -> list[dict[str, object]]:
        """This node's log dirs."""
        ...

    def groups(self) -> list[dict[str, object]]:
        """The consumer groups this node coordinates: ``[{"group_id": str, "state": str, "members": [...],
        "offsets": [{"topic": str, "partition": int, "committed": int, "log_end": int | None,
        "lag": int | None}]}]`` (``lag`` is None when this node cannot read that partition)."""
        ...


class _ApiSeries:
    """The cached child series of one Kafka API, so the hot path never calls ``labels()``."""

    __slots__ = ("latency", "request_bytes", "requests", "response_bytes")

    def __init__(self, requests: Counter, request_bytes: Counter, response_bytes: Counter, latency: Histogram) -> None:
        self.requests = requests
        self.request_bytes = request_bytes
        self.response_bytes = response_bytes
        self.latency = latency


class NodeMetrics:
    """All metrics of one node, in a registry of its own.

    The recording methods are thread-safe (prometheus_client locks each value) and never block.
    """

    def __init__(self) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        registry = self._registry
        self._requests = Counter("strait_requests", "Kafka requests answered, by API.", ["api"], registry=registry)
        self._request_bytes = Counter(
            "strait_request_bytes", "Bytes of Kafka requests received, by API.", ["api"], registry=registry
        )
        self._response_bytes = Counter(
            "strait_response_bytes", "Bytes of Kafka responses sent, by API.", ["api"], registry=registry
        )
        self._request_errors = Counter(
            "strait_request_errors",
            "Kafka error codes returned, by API and Kafka error name.",
            ["api", "error"],
            registry=registry,
        )
        self._request_latency = Histogram(
            "strait_request_latency_seconds",
            "Time from reading a Kafka request to writing its response, by API.",
            ["api"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._produce_latency = Histogram(
            "strait_produce_latency_seconds",
            "Time to complete a produce request, including waiting for acks.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._fetch_latency = Histogram(
            "strait_fetch_latency_seconds",
            "Time to complete a fetch request, including waiting for fetch.min.bytes.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._request_phase = Histogram(
            "strait_request_phase_seconds",
            "Where a Kafka request's time went, by API and phase (unread, local, remote, send).",
            ["api", "phase"],
            buckets=PHASE_BUCKETS,
            registry=registry,
        )
        self._replica_wakeup = Histogram(
            "strait_replica_fetch_wakeup_seconds",
            "Leader: from the append that woke a follower's parked fetch to the fetch running again.",
            buckets=PHASE_BUCKETS,
            registry=registry,
        )
        self._replica_round_trip = Histogram(
            "strait_replica_fetch_round_trip_seconds",
            "Follower: a replica fetch that brought records, from sending it to its decoded response.",
            buckets=PHASE_BUCKETS,
            registry=registry,
        )
        self._replica_turnaround = Histogram(
            "strait_replica_fetch_turnaround_seconds",
            "Follower: from a fetch's response to the next fetch sent (appending the records included).",
            buckets=PHASE_BUCKETS,
            registry=registry,
        )
        self._gc_pause = Histogram(
            "strait_gc_pause_seconds",
            "Python garbage collections of the node's process, by generation: each pauses every task.",
            ["generation"],
            buckets=PHASE_BUCKETS,
            registry=registry,
        )
        self._gc_series = [self._gc_pause.labels(generation=str(g)) for g in range(3)]
        self._gc_started = 0.0
        self._client_requests = Counter(
            "strait_client_requests",
            "Kafka requests by client software (ApiVersions v3+'s client_software_name, else the client.id), "
            "API and API version.",
            ["client", "api", "version"],
            registry=registry,
        )
        self._connections = Gauge("strait_connections", "Open Kafka client connections.", registry=registry)
        self._connections_closed = Counter(
            "strait_connections_closed",
            "Kafka client connections closed, by reason (malformed, oversized, idle, eof, ...).",
            ["reason"],
            registry=registry,
        )
        self._fetch_sessions = Gauge(
            "strait_fetch_sessions", "Incremental fetch sessions (KIP-227) in this node's cache.", registry=registry
        )
        self._fetch_session_partitions = Gauge(
            "strait_fetch_session_partitions",
            "Partitions over every incremental fetch session in this node's cache.",
            registry=registry,
        )
        self._fetch_session_evictions = Counter(
            "strait_fetch_session_evictions",
            "Incremental fetch sessions evicted from a full cache to make room for another.",
            registry=registry,
        )
        self._fetch_by_session = Counter(
            "strait_fetch_requests",
            "Fetch requests by how their session was used: sessionless, full (opens one) or incremental.",
            ["session"],
            registry=registry,
        )
        self._fetch_kind_series: dict[str, Counter] = {}
        self._view_collector = _ViewCollector()
        registry.register(self._view_collector)

        self._api_series: dict[str, _ApiSeries] = {}
        self._phase_series: dict[str, tuple[Histogram, Histogram, Histogram, Histogram]] = {}
        self._error_series: dict[tuple[str, str], Counter] = {}
        self._closed_series: dict[str, Counter] = {}
        self._client_series: dict[tuple[str, str, int], Counter] = {}
        self._client_names: set[str] = set()

    # -- pushed by the request path -------------------------------------------------------------

    def record_request(self, api: str, request_bytes: int, response_bytes: int, seconds: float) -> None:
        """Count one answered request of ``api`` with its sizes and latency.

        Raises ValueError, naming the value, if a size or the latency is negative.
        """
        if request_bytes < 0 or response_bytes < 0 or seconds < 0:
            raise ValueError(
                f"negative request measurement for api {api!r}: request_bytes={request_bytes}, "
                f"response_bytes={response_bytes}, seconds={seconds}"
            )
        series = self._api_series.get(api)
        if series is None:
            series = self._api_series[api] = _ApiSeries(
                self._requests.labels(api=api),
                self._request_bytes.labels(api=api),
                self._response_bytes.labels(api=api),
                self._request_latency.labels(api=api),
            )
        series.requests.inc()
        series.request_bytes.inc(request_bytes)
        series.response_bytes.inc(response_bytes)
        series.latency.observe(seconds)

    def client_label(self, client: str) -> str:
        """The ``client`` label for a client software name or client.id: the name cut to
        MAX_CLIENT_LABEL_CHARS, or OTHER_CLIENTS once MAX_CLIENT_LABELS names are taken. A
        connection asks once, when it learns its client's name, and counts with the label."""
        label = client[:MAX_CLIENT_LABEL_CHARS]
        if label not in self._client_names:
            if len(self._client_names) >= MAX_CLIENT_LABELS:
                return OTHER_CLIENTS
            self._client_names.add(label)
        return label

    def record_client_request(self, label: str, api: str, version: int) -> None:
        """Count one request of ``api`` at ``version`` from the client ``label`` names (a
        :meth:`client_label` result; see ``strait_client_requests_total``)."""
        key = (label, api, version)
        child = self._client_series.get(key)
        if child is None:
            child = self._client_series[key] = self._client_requests.labels(client=label, api=api, version=str(version))
        child.inc()

    def record_phases(self, api: str, unread: float | None, local: float, remote: float, send: float) -> None:
        """Where one request of ``api`` spent its time (see ``strait_request_phase_seconds``);
        ``unread`` is None where it is not known (TLS). A negative time is counted as 0: the
        kernel's receive stamp and the clock may disagree by a few microseconds."""
        series = self._phase_series.get(api)
        if series is None:
            phase = self._request_phase
            series = self._phase_series[api] = (
                phase.labels(api=api, phase="unread"),
                phase.labels(api=api, phase="local"),
                phase.labels(api=api, phase="remote"),
                phase.labels(api=api, phase="send"),
            )
        if unread is not None:
            series[0].observe(max(unread, 0.0))
        series[1].observe(max(local, 0.0))
        series[2].observe(max(remote, 0.0))
        series[3].observe(max(send, 0.0))

    def observe_replica_wakeup(self, seconds: float) -> None:
        """Leader: a follower's parked fetch ran ``seconds`` after the wake that ended its wait."""
        self._replica_wakeup.observe(max(seconds, 0.0))

    def observe_replica_round_trip(self, seconds: float) -> None:
        """Follower: a replica fetch that brought records took ``seconds`` from sending to its response."""
        self._replica_round_trip.observe(max(seconds, 0.0))

    def observe_replica_turnaround(self, seconds: float) -> None:
        """Follower: ``seconds`` from such a fetch's response to the next fetch sent."""
        self._replica_turnaround.observe(max(seconds, 0.0))

    def observe_gc(self, phase: str, info: Mapping[str, int]) -> None:
        """A ``gc.callbacks`` callback: time each collection, by generation (``watch_gc``)."""
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self._gc_series[min(int(info.get("generation", 2)), 2)].observe(time.perf_counter() - self._gc_started)
            self._gc_started = 0.0

    def watch_gc(self) -> Callable[[], None]:
        """Time this process's garbage collections from now on; returns what stops it."""
        gc.callbacks.append(self.observe_gc)
        return lambda: gc.callbacks.remove(self.observe_gc) if self.observe_gc in gc.callbacks else None

    def record_error(self, api: str, error: str) -> None:
        """Count one Kafka error (by its protocol name, e.g. ``NOT_LEADER_OR_FOLLOWER``) returned by ``api``."""
        key = (api, error)
        child = self._error_series.get(key)
        if child is None:
            child = self._error_series[key] = self._request_errors.labels(api=api, error=error)
        child.inc()

    def connection_opened(self) -> None:
        """Count a newly accepted client connection as open."""
        self._connections.inc()

    def connection_closed(self, reason: str) -> None:
        """Count an open connection as closed for ``reason`` (``malformed``, ``oversized``, ``idle``, ``eof``...)."""
        child = self._closed_series.get(reason)
        if child is None:
            child = self._closed_series[reason] = self._connections_closed.labels(reason=reason)
        self._connections.dec()
        child.inc()

    def observe_produce(self, seconds: float) -> None:
        """Record the latency of one produce request. Raises ValueError, naming it, if negative."""
        if seconds < 0:
            raise ValueError(f"negative produce latency: {seconds} s")
        self._produce_latency.observe(seconds)

    def observe_fetch(self, seconds: float) -> None:
        """Record the latency of one fetch request. Raises ValueError, naming it, if negative."""
        if seconds < 0:
            raise ValueError(f"negative fetch latency: {seconds} s")
        self._fetch_latency.observe(seconds)

    def fetch_sessions(self, sessions: int, partitions: int) -> None:
        """The fetch session cache's size now (``node.fetch_sessions``)."""
        self._fetch_sessions.set(sessions)
        self._fetch_session_partitions.set(partitions)

    def fetch_session_evicted(self) -> None:
        """One fetch session evicted to make room for another."""
        self._fetch_session_evictions.inc()

    def fetch_by_session(self, kind: str) -> None:
        """One fetch answered as ``kind`` ("sessionless", "full" or "incremental")."""
        child = self._fetch_kind_series.get(kind)
        if child is None:
            child = self._fetch_kind_series[kind] = self._fetch_by_session.labels(session=kind)
        child.inc()

    # -- pulled at scrape time ------------------------------------------------------------------

    def attach_view(self, view: MetricsView) -> None:
        """Read partition and log dir gauges from ``view`` at every scrape (replacing any earlier view)."""
        self._view_collector.view = view

    def attach_quotas(self, view: QuotaView) -> None:
        """Show the client quotas' throttling and rates from ``view`` at every scrape (once per node)."""
        self._registry.register(_QuotaCollector(view))

    # -- exposition -----------------------------------------------------------------------------

    def render(self) -> bytes:
        """Every metric in the Prometheus text exposition format (see :attr:`content_type`).

        Calls the attached view. Raises TypeError, naming the key and value, if the view returns
        data of the wrong shape; exceptions raised by the view propagate.
        """
        return generate_latest(self._registry)

    @property
    def content_type(self) -> str:
        """The HTTP ``Content-Type`` of :meth:`render`'s output."""
        return CONTENT_TYPE_LATEST


class QuotaView(Protocol):
    """What the quota metrics read at scrape time (``node.quotas.QuotaManager``), on the trio thread."""

    def rates(self) -> list[tuple[str, str, str, float, float]]:
        """``(quota, user, client id, rate, limit)`` of every rate measured."""
        ...

    def throttle_totals(self) -> list[tuple[str, float, int]]:
        """``(quota, seconds of throttle asked, answers throttled)`` for each kind of quota."""
        ...


class _QuotaCollector:
    """The client quota metrics, read from a :class:`QuotaView` at scrape time."""

    def __init__(self, view: QuotaView) -> None:
        self.view = view

    def describe(self) -> Iterable[Metric]:
        return []  # described by collecting (the registry does not check these names for clashes)

    def collect(self) -> Iterable[Metric]:
        labels = ["quota", "user", "client_id"]
        throttle = CounterMetricFamily(
            "strait_quota_throttle_seconds", "Throttle time asked of clients over a quota.", labels=["quota"]
        )
        throttled = CounterMetricFamily(
            "strait_quota_throttled", "Answers that carried a throttle time.", labels=["quota"]
        )
        rate = GaugeMetricFamily("strait_quota_rate", "The measured rate of a client quota entity.", labels=labels)
        limit = GaugeMetricFamily("strait_quota_limit", "The quota an entity's rate is held to.", labels=labels)
        for quota, seconds, count in self.view.throttle_totals():
            throttle.add_metric([quota], seconds)
            throttled.add_metric([quota], count)
        for quota, user, client_id, value, bound in self.view.rates():
            rate.add_metric([quota, user, client_id], value)
            limit.add_metric([quota, user, client_id], bound)
        return [throttle, throttled, rate, limit]


class _ViewCollector:
    """A prometheus_client collector that turns a :class:`MetricsView` into gauges at scrape time."""

    def __init__(self) -> None:
        self.view: MetricsView | None = None

    def describe(self) -> Iterable[Metric]:
        """The families this collector produces (so the registry can detect name clashes)."""
        return _Families().all()

    def collect(self) -> Iterable[Metric]:
        """One family per metric, filled from the view; nothing while no view is attached."""
        view = self.view
        if view is None:
            return []
        families = _Families()
        partitions = offline = 0
        for topic in view.topics():
            name = _str(topic, "name", "topic")
            for partition in _records(topic, "partitions", f"topic {name!r}"):
                where = f"topic {name!r} partition"
                index = _int(partition, "partition", where)
                if index is None:
                    raise TypeError(f"{where} has no 'partition' number: {partition!r}")
                where = f"topic {name!r} partition {index}"
                partitions += 1
                if not _bool(partition, "online", where):
                    offline += 1
                self._partition(families, name, index, partition, where)
        families.partitions.add_metric([], partitions)
        families.partitions_offline.add_metric([], offline)
        self._cluster(families, view.cluster())
        for log_dir in view.log_dirs():
            path = _str(log_dir, "path", "log dir")
            families.log_dir_online.add_metric([path], 1 if _bool(log_dir, "online", f"log dir {path!r}") else 0)
            size = _int(log_dir, "bytes", f"log dir {path!r}")
            if size is not None:
                families.log_dir_bytes.add_metric([path], size)
            if "moves_in" in log_dir:
                moves = _records(log_dir, "moves_in", f"log dir {path!r}")
                families.log_dir_moves.add_metric([path], len(moves))
                move_lag = sum(_int(m, "offset_lag", f"a move into {path!r}") or 0 for m in moves)
                families.log_dir_move_lag.add_metric([path], move_lag)
        for group in view.groups():
            group_id = _str(group, "group_id", "group")
            where = f"group {group_id!r}"
            families.group_members.add_metric([group_id], len(_records(group, "members", where)))
            total = 0
            for entry in _records(group, "offsets", where):
                lag_topic = _str(entry, "topic", where)
                lag_partition = _int(entry, "partition", where)
                lag = _int(entry, "lag", where)
                if lag is not None and lag_partition is not None:
                    families.group_lag.add_metric([group_id, lag_topic, str(lag_partition)], lag)
                    total += lag
            families.group_lag_total.add_metric([group_id], total)
        return families.all()

    @staticmethod
    def _partition(families: _Families, topic: str, index: int, partition: Mapping[str, object], where: str) -> None:
        """The per-partition samples of one partition entry of ``topics()``."""
        labels = [topic, str(index)]
        for family, key in (
            (families.log_start_offset, "log_start_offset"),
            (families.high_watermark, "high_watermark"),
            (families.log_end_offset, "log_end_offset"),
            (families.partition_log_end_offset, "log_end_offset"),
            (families.partition_leader, "leader"),
            (families.partition_leader_epoch, "leader_epoch"),
        ):
            value = _int(partition, key, where)
            if value is not None:
                family.add_metric(labels, value)
        families.partition_isr_size.add_metric(labels, len(_ints(partition, "isr", where)))
        families.partition_replicas.add_metric(labels, len(_ints(partition, "replicas", where)))
        if _optional_str(partition, "role", where) != "leader":
            return
        leader_end = _int(partition, "log_end_offset", where)
        for follower in _records(partition, "followers", where):
            follower_id = _int(follower, "broker_id", f"{where} follower")
            if follower_id is None:
                raise TypeError(f"{where}: a follower has no 'broker_id': {follower!r}")
            follower_end = _int(follower, "log_end_offset", f"{where} follower {follower_id}")
            if leader_end is not None and follower_end is not None:
                # A follower's fetch offset never passes the leader's log end; clamp the instant between reads.
                lag = max(0, leader_end - follower_end)
                families.follower_lag.add_metric([topic, str(index), str(follower_id)], lag)

    @staticmethod
    def _cluster(families: _Families, cluster: Mapping[str, object]) -> None:
        """The node-wide replication and controller samples from ``cluster()``."""
        families.controller_active.add_metric([], 1 if _bool(cluster, "is_controller", "cluster") else 0)
        controller = cluster.get("controller")
        if controller is not None:
            if not isinstance(controller, dict):
                raise TypeError(f"cluster: 'controller' must be an object or None, got {controller!r}")
            epoch = _int(controller, "epoch", "cluster controller")
            if epoch is not None:
                families.controller_epoch.add_metric([], epoch)
        families.under_replicated.add_metric([], _count(cluster, "under_replicated_led", "cluster"))
        families.offline_partitions.add_metric([], _count(cluster, "offline", "cluster"))
        families.replica_fetch_errors.add_metric([], _count(cluster, "replica_fetch_errors", "cluster"))


class _Families:
    """Fresh, empty gauge families for one scrape."""

    def __init__(self) -> None:
        partition = ["topic", "partition"]
        self.partitions = GaugeMetricFamily(
            "strait_partitions", "Partitions this node reports (from the broker's state).", labels=[]
        )
        self.partitions_offline = GaugeMetricFamily(
            "strait_partitions_offline",
            "Partitions this node reports as not servable (no live leader, or its replica on a failed log dir).",
            labels=[],
        )
        self.log_dir_bytes = GaugeMetricFamily(
            "strait_log_dir_bytes", "Bytes of log segments in a log dir.", labels=["dir"]
        )
        self.log_dir_online = GaugeMetricFamily(
            "strait_log_dir_online", "1 while a log dir is online, 0 once it has failed.", labels=["dir"]
        )
        self.log_dir_moves = GaugeMetricFamily(
            "strait_log_dir_moves", "Replicas being moved into a log dir (AlterReplicaLogDirs).", labels=["dir"]
        )
        self.log_dir_move_lag = GaugeMetricFamily(
            "strait_log_dir_move_lag_records",
            "Offsets the copies of the replicas being moved into a log dir are behind their current logs.",
            labels=["dir"],
        )
        self.log_start_offset = GaugeMetricFamily(
            "strait_log_start_offset", "First offset still held by a partition's log.", labels=partition
        )
        self.high_watermark = GaugeMetricFamily(
            "strait_high_watermark", "High watermark (committed end) of a partition.", labels=partition
        )
        self.log_end_offset = GaugeMetricFamily(
            "strait_log_end_offset", "Offset the next appended record will get.", labels=partition
        )

        self.partition_leader = GaugeMetricFamily(
            "strait_partition_leader", "Broker id of a partition's leader; -1 when it has none.", labels=partition
        )
        self.partition_leader_epoch = GaugeMetricFamily(
            "strait_partition_leader_epoch", "Leader epoch of a partition (-1: not known yet).", labels=partition
        )
        self.partition_isr_size = GaugeMetricFamily(
            "strait_partition_isr_size", "Number of in-sync replicas of a partition.", labels=partition
        )
        self.partition_replicas = GaugeMetricFamily(
            "strait_partition_replicas", "Number of replicas assigned to a partition.", labels=partition
        )
        self.partition_log_end_offset = GaugeMetricFamily(
            "strait_partition_log_end_offset", "Log end offset of this node's replica of a partition.", labels=partition
        )
        self.follower_lag = GaugeMetricFamily(
            "strait_follower_lag_records",
            "On the leader: its log end offset minus a follower's, as of the follower's last fetch.",
            labels=[*partition, "follower"],
        )
        self.under_replicated = GaugeMetricFamily(
            "strait_under_replicated_partitions",
            "Partitions this node leads whose ISR is smaller than their replicas (Kafka's UnderReplicatedPartitions).",
            labels=[],
        )
        self.offline_partitions = GaugeMetricFamily(
            "strait_offline_partitions",
            "Partitions of the whole cluster without a live leader, as this node sees ZooKeeper "
            "(Kafka's OfflinePartitionsCount).",
            labels=[],
        )
        self.controller_active = GaugeMetricFamily(
            "strait_controller_active", "1 while this node is the active controller, else 0.", labels=[]
        )
        self.controller_epoch = GaugeMetricFamily(
            "strait_controller_epoch",
            "Epoch of the controller ZooKeeper names (absent while there is none).",
            labels=[],
        )
        self.replica_fetch_errors = CounterMetricFamily(
            "strait_replica_fetch_errors",
            "Times a replica fetcher's session with a leader failed (connection lost or fetch refused) and restarted.",
            labels=[],
        )

        self.group_members = GaugeMetricFamily(
            "strait_group_members", "Members of a consumer group this node coordinates.", labels=["group"]
        )
        self.group_lag = GaugeMetricFamily(
            "strait_group_lag",
            "Records between a group's committed offset and the partition's high watermark.",
            labels=["group", "topic", "partition"],
        )
        self.group_lag_total = GaugeMetricFamily(
            "strait_group_lag_total", "A group's lag summed over its partitions.", labels=["group"]
        )

    def all(self) -> list[Metric]:
        return [
            self.group_members,
            self.group_lag,
            self.group_lag_total,
            self.partitions,
            self.partitions_offline,
            self.log_dir_bytes,
            self.log_dir_online,
            self.log_dir_moves,
            self.log_dir_move_lag,
            self.log_start_offset,
            self.high_watermark,
            self.log_end_offset,
            self.partition_leader,
            self.partition_leader_epoch,
            self.partition_isr_size,
            self.partition_replicas,
            self.partition_log_end_offset,
            self.follower_lag,
            self.under_replicated,
            self.offline_partitions,
            self.controller_active,
            self.controller_epoch,
            self.replica_fetch_errors,
        ]


def _str(record: Mapping[str, object], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise TypeError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


def _int(record: Mapping[str, object], key: str, where: str) -> int | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: {key!r} must be an integer or None, got {value!r}")
    return value


def _optional_str(record: Mapping[str, object], key: str, where: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{where}: {key!r} must be a string or None, got {value!r}")
    return value


def _count(record: Mapping[str, object], key: str, where: str) -> int:
    value = _int(record, key, where)
    if value is None or value < 0:
        raise TypeError(f"{where}: {key!r} must be a count (an integer >= 0), got {value!r}")
    return value


def _ints(record: Mapping[str, object], key: str, where: str) -> list[int]:
    value = record.get(key)
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise TypeError(f"{where}: {key!r} must be a list of integers, got {value!r}")
    return value


def _bool(record: Mapping[str, object], key: str, where: str) -> bool:
    value = record.get(key)
    if not isinstance(value, bool):
        raise TypeError(f"{where}: {key!r} must be a bool, got {value!r}")
    return value


def _records(record: Mapping[str, object], key: str, where: str) -> list[Mapping[str, object]]:
    value = record.get(key)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise TypeError(f"{where}: {key!r} must be a list of objects, got {value!r}")
    return value
