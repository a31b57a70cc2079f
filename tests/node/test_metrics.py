"""NodeMetrics: counters, histograms and gauges as a Prometheus scrape sees them, and the view-backed gauges."""

from __future__ import annotations

import re

import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from node.metrics import LATENCY_BUCKETS, MAX_CLIENT_LABEL_CHARS, MAX_CLIENT_LABELS, OTHER_CLIENTS, NodeMetrics

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(metrics: NodeMetrics) -> Samples:
    """Every sample of a rendered scrape, keyed by (sample name, labels)."""
    samples: Samples = {}
    for family in text_string_to_metric_families(metrics.render().decode("utf-8")):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def partition(index: int, **changes: object) -> dict[str, object]:
    """A partition entry of ``topics()``: broker 1 leads it, follower 2 is in sync, 3 has fallen out."""
    entry: dict[str, object] = {
        "partition": index,
        "online": True,
        "leader": 1,
        "leader_epoch": 5,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "role": "leader",
        "followers": [
            {"broker_id": 2, "log_end_offset": 42, "caught_up_ms_ago": 20},
            {"broker_id": 3, "log_end_offset": 30, "caught_up_ms_ago": 9000},
        ],
        "log_start_offset": 3,
        "high_watermark": 40,
        "log_end_offset": 42,
    }
    entry.update(changes)
    return entry


class View:
    """A MetricsView over plain lists the test edits."""

    def __init__(self) -> None:
        self.topic_list: list[dict[str, object]] = [
            {
                "name": "orders",
                "partitions": [
                    partition(0),
                    partition(
                        1,
                        online=False,
                        leader=-1,
                        isr=[3],
                        role="none",
                        followers=[],
                        log_start_offset=None,
                        high_watermark=None,
                        log_end_offset=None,
                    ),
                ],
            },
            {
                "name": "audit",
                "partitions": [
                    partition(
                        0,
                        leader=2,
                        leader_epoch=0,
                        isr=[1, 2, 3],
                        role="follower",
                        followers=[],
                        log_start_offset=0,
                        high_watermark=7,
                        log_end_offset=7,
                    )
                ],
            },
        ]
        self.cluster_body: dict[str, object] = {
            "broker_id": 1,
            "controller": {"broker_id": 1, "epoch": 9},
            "is_controller": True,
            "live_brokers": [1, 2],
            "partitions": 3,
            "leaders": 1,
            "under_replicated": 2,
            "under_replicated_led": 1,
            "offline": 1,
            "replica_fetch_errors": 4,
        }
        self.group_list: list[dict[str, object]] = []
        self.dir_list: list[dict[str, object]] = [
            {
                "path": "/data/d1",
                "online": True,
                "bytes": 4096,
                "partitions": 2,
                "moves_in": [{"topic": "orders", "partition": 1, "offset_lag": 30}],
            },
            {"path": "/data/d2", "online": False, "bytes": None, "partitions": 1},
        ]

    def topics(self) -> list[dict[str, object]]:
        return self.topic_list

    def cluster(self) -> dict[str, object]:
        return self.cluster_body

    def groups(self) -> list[dict[str, object]]:
        return self.group_list

    def log_dirs(self) -> list[dict[str, object]]:
        return self.dir_list


def test_record_request_counts_requests_bytes_and_latency_per_api() -> None:
    metrics = NodeMetrics()
    metrics.record_request("Produce", 100, 20, 0.003)
    metrics.record_request("Produce", 50, 20, 0.0002)
    metrics.record_request("Fetch", 30, 9000, 0.2)

    s = scrape(metrics)
    assert value(s, "strait_requests_total", api="Produce") == 2
    assert value(s, "strait_requests_total", api="Fetch") == 1
    assert value(s, "strait_request_bytes_total", api="Produce") == 150
    assert value(s, "strait_response_bytes_total", api="Produce") == 40
    assert value(s, "strait_response_bytes_total", api="Fetch") == 9000
    assert value(s, "strait_request_latency_seconds_count", api="Produce") == 2
    assert value(s, "strait_request_latency_seconds_sum", api="Produce") == pytest.approx(0.0032)
    # 0.0002 falls in le=0.00025, 0.003 only from le=0.005 on.
    assert value(s, "strait_request_latency_seconds_bucket", api="Produce", le="0.0001") == 0
    assert value(s, "strait_request_latency_seconds_bucket", api="Produce", le="0.00025") == 1
    assert value(s, "strait_request_latency_seconds_bucket", api="Produce", le="0.0025") == 1
    assert value(s, "strait_request_latency_seconds_bucket", api="Produce", le="0.005") == 2
    assert value(s, "strait_request_latency_seconds_bucket", api="Produce", le="+Inf") == 2


def test_request_phases_are_one_histogram_by_api_and_phase_and_unread_may_be_unknown() -> None:
    metrics = NodeMetrics()
    metrics.record_phases("Produce", 0.00002, 0.0003, 0.002, 0.00004)
    metrics.record_phases("Produce", None, 0.0001, 0.0, 0.00001)  # a TLS connection: no kernel stamp
    metrics.record_phases("Fetch", -0.000001, 0.0001, 0.5, 0.0001)  # a stamp a microsecond ahead of the clock

    s = scrape(metrics)
    name = "strait_request_phase_seconds"
    assert value(s, f"{name}_count", api="Produce", phase="unread") == 1
    assert value(s, f"{name}_count", api="Produce", phase="local") == 2
    assert value(s, f"{name}_sum", api="Produce", phase="remote") == pytest.approx(0.002)
    assert value(s, f"{name}_sum", api="Produce", phase="send") == pytest.approx(0.00005)
    assert value(s, f"{name}_sum", api="Fetch", phase="unread") == 0  # counted as 0, never negative
    # Finer than the request latency: 20 us and 40 us fall in buckets of their own.
    assert value(s, f"{name}_bucket", api="Produce", phase="unread", le="2.5e-05") == 1
    assert value(s, f"{name}_bucket", api="Produce", phase="send", le="1e-05") == 1
    assert value(s, f"{name}_bucket", api="Produce", phase="send", le="5e-05") == 2


def test_replica_fetch_timings_are_histograms_of_their_own() -> None:
    metrics = NodeMetrics()
    metrics.observe_replica_wakeup(0.0002)
    metrics.observe_replica_round_trip(0.001)
    metrics.observe_replica_turnaround(0.0004)
    metrics.observe_replica_turnaround(-0.0000001)

    s = scrape(metrics)
    assert value(s, "strait_replica_fetch_wakeup_seconds_sum") == pytest.approx(0.0002)
    assert value(s, "strait_replica_fetch_round_trip_seconds_count") == 1
    assert value(s, "strait_replica_fetch_turnaround_seconds_count") == 2
    assert value(s, "strait_replica_fetch_turnaround_seconds_sum") == pytest.approx(0.0004)


def test_garbage_collections_are_timed_by_generation_while_watched() -> None:
    import gc

    metrics = NodeMetrics()
    metrics.observe_gc("start", {"generation": 1})
    metrics.observe_gc("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    metrics.observe_gc("stop", {"generation": 0})  # a stop without its start (watching began mid-way): ignored
    stop = metrics.watch_gc()
    try:
        gc.collect()  # a full collection: generation 2
    finally:
        stop()
    gc.collect()  # no longer watched
    s = scrape(metrics)
    assert value(s, "strait_gc_pause_seconds_count", generation="1") == 1
    assert value(s, "strait_gc_pause_seconds_count", generation="0") == 0
    assert value(s, "strait_gc_pause_seconds_count", generation="2") == 1
    assert metrics.observe_gc not in gc.callbacks


def test_latency_buckets_span_a_tenth_of_a_millisecond_to_ten_seconds() -> None:
    metrics = NodeMetrics()
    metrics.observe_produce(0.00005)
    metrics.observe_produce(12.0)
    s = scrape(metrics)
    bounds = sorted(
        float(dict(labels)["le"])
        for (name, labels) in s
        if name == "strait_produce_latency_seconds_bucket" and dict(labels)["le"] != "+Inf"
    )
    assert bounds == list(LATENCY_BUCKETS)
    assert bounds[0] == 0.0001
    assert bounds[-1] == 10.0
    assert value(s, "strait_produce_latency_seconds_bucket", le="0.0001") == 1
    assert value(s, "strait_produce_latency_seconds_bucket", le="10.0") == 1
    assert value(s, "strait_produce_latency_seconds_bucket", le="+Inf") == 2


def test_produce_and_fetch_latency_are_separate_histograms() -> None:
    metrics = NodeMetrics()
    metrics.observe_produce(0.01)
    metrics.observe_fetch(0.5)
    metrics.observe_fetch(0.7)
    s = scrape(metrics)
    assert value(s, "strait_produce_latency_seconds_count") == 1
    assert value(s, "strait_produce_latency_seconds_sum") == pytest.approx(0.01)
    assert value(s, "strait_fetch_latency_seconds_count") == 2
    assert value(s, "strait_fetch_latency_seconds_sum") == pytest.approx(1.2)


def test_errors_are_counted_by_api_and_kafka_error_name() -> None:
    metrics = NodeMetrics()
    metrics.record_error("Produce", "NOT_LEADER_OR_FOLLOWER")
    metrics.record_error("Produce", "NOT_LEADER_OR_FOLLOWER")
    metrics.record_error("Produce", "CORRUPT_MESSAGE")
    metrics.record_error("Fetch", "OFFSET_OUT_OF_RANGE")
    s = scrape(metrics)
    assert value(s, "strait_request_errors_total", api="Produce", error="NOT_LEADER_OR_FOLLOWER") == 2
    assert value(s, "strait_request_errors_total", api="Produce", error="CORRUPT_MESSAGE") == 1
    assert value(s, "strait_request_errors_total", api="Fetch", error="OFFSET_OUT_OF_RANGE") == 1
    assert value(s, "strait_request_errors_total", api="Fetch", error="CORRUPT_MESSAGE") is None


def test_connections_gauge_follows_opens_and_closes_and_counts_reasons() -> None:
    metrics = NodeMetrics()
    for _ in range(3):
        metrics.connection_opened()
    metrics.connection_closed("eof")
    metrics.connection_closed("malformed")
    s = scrape(metrics)
    assert value(s, "strait_connections") == 1
    assert value(s, "strait_connections_closed_total", reason="eof") == 1
    assert value(s, "strait_connections_closed_total", reason="malformed") == 1
    metrics.connection_closed("eof")
    s = scrape(metrics)
    assert value(s, "strait_connections") == 0
    assert value(s, "strait_connections_closed_total", reason="eof") == 2


@pytest.mark.parametrize(
    ("request_bytes", "response_bytes", "seconds", "named"),
    [(-1, 0, 0.0, "request_bytes=-1"), (0, -5, 0.0, "response_bytes=-5"), (0, 0, -0.5, "seconds=-0.5")],
)
def test_negative_measurements_are_refused_naming_the_value(
    request_bytes: int, response_bytes: int, seconds: float, named: str
) -> None:
    metrics = NodeMetrics()
    with pytest.raises(ValueError, match=re.escape(named)):
        metrics.record_request("Produce", request_bytes, response_bytes, seconds)
    with pytest.raises(ValueError, match=re.escape("-0.25")):
        metrics.observe_fetch(-0.25)
    with pytest.raises(ValueError, match=re.escape("-0.25")):
        metrics.observe_produce(-0.25)
    assert value(scrape(metrics), "strait_requests_total", api="Produce") is None


def test_hot_path_looks_up_label_children_once_per_label_set(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []
    original = MetricWrapperBase.labels

    def counting_labels(self: MetricWrapperBase, *args: object, **kwargs: object) -> MetricWrapperBase:
        calls.append((self, *kwargs.values()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MetricWrapperBase, "labels", counting_labels)
    metrics = NodeMetrics()
    for _ in range(100):
        metrics.record_request("Produce", 1, 1, 0.001)
        metrics.record_request("Fetch", 1, 1, 0.001)
        metrics.record_error("Fetch", "NOT_LEADER_OR_FOLLOWER")
        metrics.connection_opened()
        metrics.connection_closed("idle")
    # The three garbage collection series, made with the metrics; four series per API, one error
    # series, one close-reason series.
    assert len(calls) == 3 + 4 * 2 + 1 + 1
    assert value(scrape(metrics), "strait_requests_total", api="Fetch") == 100


def test_nodes_have_separate_registries_and_leave_the_global_one_alone() -> None:
    first, second = NodeMetrics(), NodeMetrics()
    first.record_request("Metadata", 10, 10, 0.001)
    assert value(scrape(first), "strait_requests_total", api="Metadata") == 1
    assert value(scrape(second), "strait_requests_total", api="Metadata") is None
    assert not [name for name in REGISTRY._names_to_collectors if name.startswith("strait_")]


def test_view_gauges_are_read_at_scrape_time() -> None:
    metrics = NodeMetrics()
    view = View()
    metrics.attach_view(view)
    s = scrape(metrics)
    assert value(s, "strait_partitions") == 3
    assert value(s, "strait_partitions_offline") == 1
    assert value(s, "strait_log_start_offset", topic="orders", partition="0") == 3
    assert value(s, "strait_high_watermark", topic="orders", partition="0") == 40
    assert value(s, "strait_log_end_offset", topic="orders", partition="0") == 42
    assert value(s, "strait_high_watermark", topic="audit", partition="0") == 7
    # An offline partition with unknown offsets has no offset samples rather than made-up ones.
    assert value(s, "strait_high_watermark", topic="orders", partition="1") is None
    assert value(s, "strait_log_end_offset", topic="orders", partition="1") is None
    assert value(s, "strait_log_dir_online", dir="/data/d1") == 1
    assert value(s, "strait_log_dir_online", dir="/data/d2") == 0
    assert value(s, "strait_log_dir_bytes", dir="/data/d1") == 4096
    assert value(s, "strait_log_dir_bytes", dir="/data/d2") is None
    assert value(s, "strait_log_dir_moves", dir="/data/d1") == 1
    assert value(s, "strait_log_dir_move_lag_records", dir="/data/d1") == 30
    assert value(s, "strait_log_dir_moves", dir="/data/d2") is None  # a view without moves_in

    partitions = view.topic_list[0]["partitions"]
    assert isinstance(partitions, list)
    partitions[0]["high_watermark"] = 42
    view.dir_list[1]["online"] = True
    s = scrape(metrics)
    assert value(s, "strait_high_watermark", topic="orders", partition="0") == 42
    assert value(s, "strait_log_dir_online", dir="/data/d2") == 1


def test_without_a_view_there_are_no_state_samples_and_a_new_view_replaces_the_old() -> None:
    metrics = NodeMetrics()
    assert value(scrape(metrics), "strait_partitions") is None
    metrics.attach_view(View())
    empty = View()
    empty.topic_list, empty.dir_list = [], []
    metrics.attach_view(empty)
    s = scrape(metrics)
    assert value(s, "strait_partitions") == 0
    assert value(s, "strait_log_dir_online", dir="/data/d1") is None
    assert value(s, "strait_partition_leader", topic="orders", partition="0") is None
    assert value(s, "strait_follower_lag_records", topic="orders", partition="0", follower="2") is None


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda v: v.topic_list[0].update(name=7), "'name' must be a string, got 7"),
        (lambda v: v.topic_list[1].update(partitions="p0"), "topic 'audit': 'partitions' must be a list"),
        (lambda v: v.topic_list[1]["partitions"][0].update(high_watermark="7"), "partition 0: 'high_watermark'"),
        (lambda v: v.topic_list[1]["partitions"][0].update(online=1), "'online' must be a bool, got 1"),
        (lambda v: v.topic_list[1]["partitions"][0].pop("partition"), "no 'partition' number"),
        (lambda v: v.dir_list[0].update(bytes=True), "log dir '/data/d1': 'bytes' must be an integer"),
        (lambda v: v.topic_list[1]["partitions"][0].update(isr=None), "partition 0: 'isr' must be a list of integers"),
        (lambda v: v.topic_list[1]["partitions"][0].update(replicas=[1, "2"]), "'replicas' must be a list of integers"),
        (lambda v: v.topic_list[1]["partitions"][0].update(role=1), "'role' must be a string or None, got 1"),
        (lambda v: v.topic_list[0]["partitions"][0].update(followers=None), "'followers' must be a list of objects"),
        (lambda v: v.topic_list[0]["partitions"][0]["followers"][0].pop("broker_id"), "a follower has no 'broker_id'"),
        (lambda v: v.cluster_body.update(is_controller="yes"), "cluster: 'is_controller' must be a bool"),
        (lambda v: v.cluster_body.update(controller=3), "cluster: 'controller' must be an object or None, got 3"),
        (lambda v: v.cluster_body.pop("offline"), "cluster: 'offline' must be a count (an integer >= 0), got None"),
        (lambda v: v.cluster_body.update(replica_fetch_errors=-1), "'replica_fetch_errors' must be a count"),
    ],
)
def test_a_malformed_view_fails_the_scrape_naming_key_and_value(mutate: object, message: str) -> None:
    metrics = NodeMetrics()
    view = View()
    assert callable(mutate)
    mutate(view)
    metrics.attach_view(view)
    with pytest.raises(TypeError, match=re.escape(message)):
        metrics.render()


def test_content_type_is_the_prometheus_text_format() -> None:
    content_type = NodeMetrics().content_type
    assert content_type.startswith("text/plain; version=")
    assert "charset=utf-8" in content_type


def test_every_metric_has_help_text() -> None:
    metrics = NodeMetrics()
    metrics.attach_view(View())
    metrics.record_request("Produce", 1, 1, 0.001)
    families = list(text_string_to_metric_families(metrics.render().decode("utf-8")))
    names = {family.name for family in families}
    assert {"strait_requests", "strait_partitions", "strait_log_dir_bytes", "strait_connections"} <= names
    assert all(family.documentation for family in families if family.name.startswith("strait_"))


def test_group_lag_and_members_come_from_the_view() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    metrics = NodeMetrics()
    view = View()
    view.group_list = [
        {
            "group_id": "g1",
            "state": "Stable",
            "members": [{"member_id": "a"}, {"member_id": "b"}],
            "offsets": [
                {"topic": "t", "partition": 0, "committed": 5, "log_end": 9, "lag": 4},
                {"topic": "t", "partition": 1, "committed": 3, "log_end": None, "lag": None},
                {"topic": "u", "partition": 0, "committed": 1, "log_end": 3, "lag": 2},
            ],
        }
    ]
    metrics.attach_view(view)
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    lags = {(s.labels["topic"], s.labels["partition"]): s.value for s in families["strait_group_lag"].samples}
    assert lags == {("t", "0"): 4.0, ("u", "0"): 2.0}  # no sample where the lag is unknown
    assert [s.value for s in families["strait_group_lag_total"].samples] == [6.0]
    assert [s.value for s in families["strait_group_members"].samples] == [2.0]


def test_replication_gauges_per_partition_come_from_the_view() -> None:
    metrics = NodeMetrics()
    metrics.attach_view(View())
    s = scrape(metrics)
    orders0 = {"topic": "orders", "partition": "0"}
    assert value(s, "strait_partition_leader", **orders0) == 1
    assert value(s, "strait_partition_leader_epoch", **orders0) == 5
    assert value(s, "strait_partition_isr_size", **orders0) == 2
    assert value(s, "strait_partition_replicas", **orders0) == 3
    assert value(s, "strait_partition_log_end_offset", **orders0) == 42
    # The offline partition: leader -1 is reported as it is; its unknown log end is not made up.
    assert value(s, "strait_partition_leader", topic="orders", partition="1") == -1
    assert value(s, "strait_partition_isr_size", topic="orders", partition="1") == 1
    assert value(s, "strait_partition_log_end_offset", topic="orders", partition="1") is None
    assert value(s, "strait_partition_leader", topic="audit", partition="0") == 2
    assert value(s, "strait_partition_isr_size", topic="audit", partition="0") == 3
    # The older name of the local log end offset keeps working next to the new one.
    assert value(s, "strait_log_end_offset", **orders0) == 42
    assert value(s, "strait_high_watermark", **orders0) == 40


def test_follower_lag_is_reported_by_the_leader_only_and_only_where_known() -> None:
    view = View()
    audit0 = view.topic_list[1]["partitions"][0]
    assert isinstance(audit0, dict)
    # A follower's entry must not produce lag samples even if it carried followers.
    audit0["followers"] = [{"broker_id": 3, "log_end_offset": 1, "caught_up_ms_ago": 5}]
    orders0 = view.topic_list[0]["partitions"][0]
    assert isinstance(orders0, dict)
    orders0["followers"].append({"broker_id": 4, "log_end_offset": None, "caught_up_ms_ago": None})
    metrics = NodeMetrics()
    metrics.attach_view(view)
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    lags = {
        (sample.labels["topic"], sample.labels["partition"], sample.labels["follower"]): sample.value
        for sample in families["strait_follower_lag_records"].samples
    }
    assert lags == {("orders", "0", "2"): 0.0, ("orders", "0", "3"): 12.0}


def test_under_replicated_offline_and_controller_come_from_the_cluster_view() -> None:
    view = View()
    metrics = NodeMetrics()
    metrics.attach_view(view)
    s = scrape(metrics)
    # Under-replicated counts what this node leads (1), not the cluster-wide 2; offline is cluster-wide.
    assert value(s, "strait_under_replicated_partitions") == 1
    assert value(s, "strait_offline_partitions") == 1
    assert value(s, "strait_controller_active") == 1
    assert value(s, "strait_controller_epoch") == 9
    assert value(s, "strait_replica_fetch_errors_total") == 4

    view.cluster_body.update(
        controller=None, is_controller=False, under_replicated_led=0, offline=0, replica_fetch_errors=6
    )
    s = scrape(metrics)
    assert value(s, "strait_under_replicated_partitions") == 0
    assert value(s, "strait_offline_partitions") == 0
    assert value(s, "strait_controller_active") == 0
    assert value(s, "strait_controller_epoch") is None  # no controller: no made-up epoch
    assert value(s, "strait_replica_fetch_errors_total") == 6


def test_replica_fetch_errors_is_a_counter_and_the_rest_are_gauges() -> None:
    metrics = NodeMetrics()
    metrics.attach_view(View())
    types = {f.name: f.type for f in text_string_to_metric_families(metrics.render().decode())}
    assert types["strait_replica_fetch_errors"] == "counter"
    for name in (
        "strait_partition_leader",
        "strait_partition_leader_epoch",
        "strait_partition_isr_size",
        "strait_partition_replicas",
        "strait_partition_log_end_offset",
        "strait_follower_lag_records",
        "strait_under_replicated_partitions",
        "strait_offline_partitions",
        "strait_controller_active",
        "strait_controller_epoch",
    ):
        assert types[name] == "gauge", name


def test_client_requests_are_counted_by_client_api_and_version_with_a_bounded_set_of_clients() -> None:
    metrics = NodeMetrics()
    java = metrics.client_label("apache-kafka-java")
    metrics.record_client_request(java, "Produce", 8)
    metrics.record_client_request(java, "Produce", 8)
    metrics.record_client_request(java, "Fetch", 11)
    long_name = metrics.client_label("x" * 200)
    assert long_name == "x" * MAX_CLIENT_LABEL_CHARS
    for i in range(MAX_CLIENT_LABELS - 2):
        assert metrics.client_label(f"client-{i}") == f"client-{i}"
    assert metrics.client_label("one-too-many") == OTHER_CLIENTS
    assert metrics.client_label("apache-kafka-java") == java  # a known name keeps its label
    metrics.record_client_request(OTHER_CLIENTS, "Metadata", 12)
    s = scrape(metrics)
    assert value(s, "strait_client_requests_total", client=java, api="Produce", version="8") == 2
    assert value(s, "strait_client_requests_total", client=java, api="Fetch", version="11") == 1
    assert value(s, "strait_client_requests_total", client=OTHER_CLIENTS, api="Metadata", version="12") == 1
