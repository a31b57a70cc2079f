"""chaos.report's series: exact numbers from small made-up histories (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.history import History
from chaos.report import series

pytestmark = pytest.mark.unit

NS = 1_000_000_000


def history(*entries: tuple[float, str, str, str, dict[str, Any]]) -> History:
    """A History of (seconds, type, process, f, fields) entries, indexed in order; mono starts at 7 s."""
    return History.of(
        {"index": n, "type": t, "process": p, "f": f, "time": 1000.0 + at, "mono": 7 * NS + round(at * NS), **fields}
        for n, (at, t, p, f, fields) in enumerate(entries)
    )


def send(
    at: float, type: str, value: str, process: str = "p0", **fields: Any
) -> tuple[float, str, str, str, dict[str, Any]]:
    return (at, type, process, "send", {"topic": "t", "value": value, **fields})


def nemesis(at: float, f: str, name: str, target: str) -> tuple[float, str, str, str, dict[str, Any]]:
    return (at, "info", "nemesis", f, {"nemesis": name, "target": target})


def test_the_timeline_starts_at_the_first_entry_and_spans_to_the_last() -> None:
    timeline = series.Timeline.of(history(send(0.0, "invoke", "a"), send(2.5, "ok", "a")))
    assert timeline == series.Timeline(start_mono=7 * NS, start_wall=1000.0, span_s=2.5)
    assert timeline.at({"mono": 7 * NS + NS // 2}) == 0.5 and timeline.at({}) is None
    assert series.Timeline.of(History()) is None


def test_throughput_counts_completed_sends_per_bucket_by_outcome() -> None:
    h = history(
        send(0.0, "invoke", "a"),
        send(0.1, "ok", "a", partition=0, offset=0),
        send(0.2, "invoke", "b"),
        send(0.5, "ok", "b", partition=0, offset=1),
        send(1.0, "invoke", "c"),
        send(1.2, "ok", "c", partition=1, offset=0),
        send(1.5, "invoke", "d"),
        send(1.9, "fail", "d", error="NOT_LEADER_OR_FOLLOWER"),
        send(2.0, "invoke", "e"),
        send(2.5, "info", "e", error="timed out"),
        (3.0, "ok", "reader", "read", {"site": "east", "records": []}),
    )
    flow = series.throughput(h)
    assert flow.width_s == 1.0 and flow.span_s == 3.0
    assert [(b.start_s, b.ok, b.fail, b.info) for b in flow.buckets] == [
        (0.0, 2, 0, 0),
        (1.0, 1, 1, 0),
        (2.0, 0, 0, 1),
    ]
    assert flow.points() == [(0.5, 2.0, 0.0), (1.5, 1.0, 1.0), (2.5, 0.0, 1.0)]
    # Two-second buckets: the last one covers 1 s (2..3) and its rates are over that second.
    wide = series.throughput(h, width_s=2.0)
    assert [(b.start_s, b.ok, b.fail, b.info) for b in wide.buckets] == [(0.0, 3, 1, 0), (2.0, 0, 0, 1)]
    assert wide.points() == [(1.0, 1.5, 0.5), (2.5, 0.0, 1.0)]


def test_a_last_bucket_of_less_than_half_a_width_is_not_plotted_but_counted() -> None:
    flow = series.throughput(
        history(send(0.0, "invoke", "a"), send(0.4, "ok", "a"), send(1.3, "invoke", "b"), send(1.3, "ok", "b"))
    )
    assert [(b.start_s, b.ok) for b in flow.buckets] == [(0.0, 1), (1.0, 1)]
    assert flow.points() == [(0.5, 1.0, 0.0)]


def test_bucket_width_keeps_a_soak_within_the_bucket_cap() -> None:
    assert series.bucket_width(59.0) == 1.0
    assert series.bucket_width(599.0) == 1.0
    assert series.bucket_width(600.0) == 2.0
    assert series.bucket_width(3600.0) == 10.0
    assert series.bucket_width(86_400.0) == 300.0
    assert series.bucket_width(10_000_000.0) == 16_667.0


def test_a_send_s_latency_pairs_its_invoke_by_process_and_value_other_ops_by_process_and_f() -> None:
    h = history(
        send(0.0, "invoke", "v1"),
        send(0.1, "invoke", "v2", process="p1"),
        send(0.2, "invoke", "v3"),
        send(0.25, "ok", "v3", partition=0, offset=0),
        send(0.3, "ok", "v1", partition=0, offset=1),
        send(1.1, "info", "v2", process="p1", error="timed out"),
        send(1.2, "ok", "never-invoked", partition=0, offset=2),
        (1.3, "invoke", "g0", "poll", {"group": "g"}),
        (1.7, "invoke", "g0", "poll", {"group": "g"}),  # the process's last invoke is the one that counts
        (1.75, "ok", "g0", "poll", {"group": "g", "records": []}),
    )
    sends = series.latencies(h)
    assert [(p.process, p.type, p.index, round(p.ms, 6), round(p.time_s, 6)) for p in sends] == [
        ("p0", "ok", 3, 50.0, 0.25),
        ("p0", "ok", 4, 300.0, 0.3),
        ("p1", "info", 5, 1000.0, 1.1),
    ]
    everything = series.latencies(h, f=None)
    assert [(p.f, round(p.ms, 6)) for p in everything] == [
        ("send", 50.0),
        ("send", 300.0),
        ("send", 1000.0),
        ("poll", 50.0),
    ]
    assert series.latencies(History()) == []


def test_latency_buckets_give_nearest_rank_percentiles_per_bucket() -> None:
    points = [series.Latency(0.5, float(ms), "send", "ok", "p", None) for ms in range(1, 101)]
    points += [series.Latency(2.2, ms, "send", "ok", "p", None) for ms in (30.0, 10.0, 20.0)]
    assert series.latency_buckets(points, 1.0) == [
        series.LatencyBucket(0.0, 100, 50.0, 99.0, 100.0),
        series.LatencyBucket(2.0, 3, 20.0, 30.0, 30.0),
    ]
    assert series.percentile([5.0], 99) == 5.0
    assert series.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    with pytest.raises(ValueError, match="no values"):
        series.percentile([], 50)


def test_a_scatter_sample_keeps_the_slowest_and_an_even_stride_of_the_rest_in_time_order() -> None:
    points = [series.Latency(float(i), 1000.0 if i == 3 else float(i), "send", "ok", "p", i) for i in range(10)]
    assert [p.index for p in series.sample(points, 4)] == [0, 3, 4, 7]
    assert series.sample(points, 10) == points
    assert series.sample(points, 0) == []


def test_nemesis_intervals_pair_starts_and_stops_first_in_first_out_and_run_unhealed_ones_to_the_end() -> None:
    h = history(
        send(0.0, "invoke", "w"),
        nemesis(1.0, "start", "kill", "node 1"),
        nemesis(2.0, "start", "kill", "node 1"),
        nemesis(3.0, "start", "partition", "node 2 | 1, 3"),
        nemesis(4.0, "stop", "kill", "node 1"),
        nemesis(5.0, "stop", "partition", "node 2 | 1, 3"),
        nemesis(6.0, "stop", "pause", "node 9"),  # no start: left out
        nemesis(7.0, "stop", "kill", "node 1"),
        nemesis(8.0, "start", "disk-full", "node 3 /data/d2"),
        send(10.0, "invoke", "x"),
    )
    assert series.nemesis_intervals(h) == [
        series.Interval(1, "kill", "node 1", 1.0, 4.0, healed=True),
        series.Interval(2, "kill", "node 1", 2.0, 7.0, healed=True),
        series.Interval(3, "partition", "node 2 | 1, 3", 3.0, 5.0, healed=True),
        series.Interval(4, "disk-full", "node 3 /data/d2", 8.0, 10.0, healed=False),
    ]


def test_failover_entries_become_markers_that_name_what_happened() -> None:
    promote = {"link": "east-west", "planned": False, "rpo_records": 3, "source": "east", "target": "west"}
    h = history(
        send(0.0, "invoke", "a"),
        (4.0, "info", "failover", "promote", {"value": promote}),
        (4.5, "info", "failover", "export", {"records": [{"topic": "t"}, {"topic": "t"}]}),
        (5.0, "info", "failover", "promote", {"value": {"planned": True}}),
        (6.0, "info", "failover", "fence", {}),
    )
    assert series.failover_markers(h) == [
        series.Marker(4.0, "promote", "promote east→west (unplanned)"),
        series.Marker(4.5, "export", "export (2 records)"),
        series.Marker(5.0, "promote", "promote (planned)"),
        series.Marker(6.0, "fence", "fence"),
    ]


def test_lag_samples_are_the_whole_numbers_of_records_per_site() -> None:
    h = history(
        (0.0, "info", "mirror", "lag", {"site": "west", "value": {"records": 12, "partitions": {"t/0": 12}}}),
        (1.0, "info", "mirror", "lag", {"site": "west", "value": {"records": True}}),
        (2.0, "info", "mirror", "lag", {"site": "west", "value": "n/a"}),
        (3.0, "info", "mirror", "lag", {"site": "south", "value": {"records": 0}}),
    )
    assert series.lag_samples(h) == [series.LagSample(0.0, "west", 12), series.LagSample(3.0, "south", 0)]


def test_times_of_finds_the_entries_an_anomaly_names_by_index() -> None:
    h = history(send(0.0, "invoke", "a"), send(0.5, "ok", "a"), send(2.0, "invoke", "b"))
    assert series.times_of(h, [2, 1, 99]) == [0.5, 2.0]
    assert series.times_of(h, []) == []


def test_the_summary_line_a_runner_prints() -> None:
    h = history(
        send(0.0, "invoke", "a"),
        send(0.004, "ok", "a", partition=0, offset=0),
        send(0.01, "invoke", "b"),
        send(2.51, "ok", "b", partition=0, offset=1),
        send(3.0, "invoke", "c"),
        send(8.0, "info", "c", error="timed out"),
        nemesis(1.0, "start", "kill", "node 1"),
        nemesis(2.0, "stop", "kill", "node 1"),
        nemesis(3.0, "start", "pause", "node 2"),
        (4.0, "info", "mirror", "lag", {"site": "west", "value": {"records": 1234}}),
    )
    summary = series.summarize(h)
    assert (summary.sends_ok, summary.sends_fail, summary.sends_info, summary.faults, summary.unhealed) == (
        2,
        0,
        1,
        2,
        1,
    )
    assert summary.line() == (
        "8.0 s; sends 2 ok, 0 failed, 1 indeterminate; ack latency p50 4 ms, p99 2.5 s, max 2.5 s;"
        " 2 faults (1 never healed); peak mirror lag 1234 records"
    )
    assert series.summarize(History()).line() == "0.0 s; sends 0 ok, 0 failed, 0 indeterminate; 0 faults"
