"""The scale benchmark (bench/scale_bench.py): its arithmetic (growth, superlinear flags, slopes), its
tables and flags, the ApiVersions request of its idle connections, and one tiny run end to end.

The end-to-end run proves that the benchmark starts its sites, measures every figure and writes
the JSON, the Markdown and the PNG; it asserts nothing about speed (a run this small says
nothing about scale, and performance is measured by the benchmark, not asserted by tests).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from bench import scale_bench as sb
from bench._scale_growth import Growth, factor_text, growth_steps, p50_p99, slopes
from bench._scale_site import settled

# -- growth and slopes -----------------------------------------------------------------------


def test_a_cost_growing_faster_than_the_work_is_flagged_superlinear() -> None:
    found = growth_steps("failover s", [(10, 1.0), (100, 2.0), (1000, 40.0)])
    assert [(g.work_factor, g.value_factor) for g in found] == [(10.0, 2.0), (10.0, 20.0)]
    assert [g.superlinear for g in found] == [False, True]
    assert found[0].flag() == ""
    assert found[1].flag() == "superlinear: failover s x20 for x10 work"


def test_linear_growth_is_not_superlinear_and_a_falling_cost_is_not_either() -> None:
    assert not Growth("m", 100, 1000, 3.0, 30.0).superlinear  # exactly linear
    assert not Growth("m", 100, 1000, 3.0, 1.0).superlinear
    assert Growth("m", 100, 1000, 3.0, 30.3).superlinear


def test_growth_skips_unmeasured_points_and_cannot_grow_from_zero() -> None:
    found = growth_steps("m", [(10, 1.0), (100, None), (1000, 5.0)])
    assert [(g.work0, g.work1, g.value_factor) for g in found] == [(10, 1000, 5.0)]
    (from_zero,) = growth_steps("m", [(10, 0.0), (100, 1.0)])
    assert from_zero.value_factor is None and not from_zero.superlinear
    with pytest.raises(ValueError, match="strictly increasing"):
        growth_steps("m", [(100, 1.0), (10, 2.0)])
    with pytest.raises(ValueError, match="positive"):
        growth_steps("m", [(0, 1.0), (10, 2.0)])


def test_large_factors_are_written_with_separators() -> None:
    assert Growth("rss", 10, 5000, 1.0, 1234.0).flag() == "superlinear: rss x1,234 for x500 work"
    assert factor_text(2.5) == "x2.5" and factor_text(None) == "-"


def test_slopes_give_the_cost_of_one_more_unit_between_measured_points() -> None:
    points: list[tuple[float, float | None]] = [(0, 50.0), (10, 51.0), (100, None), (1000, 150.0)]
    assert slopes(points) == [(0, 10, pytest.approx(0.1)), (10, 1000, pytest.approx(0.1))]
    with pytest.raises(ValueError):
        slopes([(10, 1.0), (10, 2.0)])


def test_p50_p99_are_nearest_rank() -> None:
    assert p50_p99([float(i) for i in range(100, 0, -1)]) == (50.0, 99.0)
    with pytest.raises(ValueError):
        p50_p99([])


# -- steps, tables, flags --------------------------------------------------------------------


def _steps() -> list[sb.Step]:
    small = sb.Step(10, {"rss_total_mb": 150.0, "failover_leaders_s": 7.0, "failover_controller_s": 6.5})
    big = sb.Step(5000, {"rss_total_mb": 250.0, "failover_leaders_s": 4.5, "failover_controller_s": 3.0})
    big.not_measured["metadata"] = "BenchError: no answer"
    return [small, big]


def test_the_partition_table_has_a_row_per_metric_and_says_what_was_not_measured() -> None:
    headers, rows = sb.metric_table(_steps(), sb.PARTITION_METRICS, "partitions")
    assert headers == ["metric", "10 partitions", "5,000 partitions"]
    assert [r[0] for r in rows] == [label for _, label, _ in sb.PARTITION_METRICS]
    by_label = {r[0]: r[1:] for r in rows}
    assert by_label["RSS idle, 3 nodes MB"] == ["150.0", "250.0"]
    assert by_label["Metadata p50 ms"] == ["NOT MEASURED", "NOT MEASURED"]
    headers, rows = sb.step_table(_steps(), sb.PARTITION_METRICS, "partitions")
    assert headers[0] == "partitions" and rows[1][0] == "5,000" and len(rows[1]) == len(headers)
    assert sb.not_measured_lines(_steps(), "partitions") == [
        "5,000 partitions: metadata: NOT MEASURED (BenchError: no answer)"
    ]


def test_growth_rows_compare_each_cost_with_the_work() -> None:
    found = sb.growths(_steps(), sb.PARTITION_METRICS)
    assert {g.metric for g in found} == {"RSS idle, 3 nodes MB", "failover: all led s", "failover: controller s"}
    headers, rows = sb.growth_table(found)
    assert headers == ["metric", "step", "work", "metric grew", "flag"]
    rss = next(r for r in rows if r[0] == "RSS idle, 3 nodes MB")
    assert rss == ["RSS idle, 3 nodes MB", "10 -> 5,000", "x500", "x1.67", "-"]


def test_memory_per_idle_unit_is_the_slope_between_steps() -> None:
    steps = [sb.Step(0, {"rss_node_mb": 50.0}), sb.Step(1000, {"rss_node_mb": 50.0 + 1024 * 40 / 1e6 * 1000})]
    (line,) = sb.per_unit_lines(steps, "rss_node_mb", "memory per idle connection", "connection")
    assert line == "memory per idle connection: 40.0 KiB per connection (from 0 to 1,000)"


def test_the_failover_goal_is_judged_at_5000_partitions_only() -> None:
    line, total = sb.goal_lines(_steps())
    # Judged from a new controller named (the dead one's session expired) to every partition led.
    assert line.startswith("controller failover < 5 s at 5,000 partitions, from a new controller named")
    assert line.endswith("every partition led: 1.50 s, met")
    assert "from the kill: 4.50 s" in total and "not judged" in total
    big = sb.Step(5000, {"failover_leaders_s": 12.0, "failover_controller_s": 6.0, "failover_after_named_s": 6.0})
    assert sb.goal_lines([big])[0].endswith("6.00 s, NOT met")
    (untested,) = sb.goal_lines(_steps()[:1])
    assert "NOT TESTED" in untested
    failed = sb.Step(5000, not_measured={"failover": "BenchError: no controller"})
    (missing,) = sb.goal_lines([failed])
    assert "NOT MEASURED (BenchError: no controller)" in missing


def test_a_failing_measurement_is_kept_as_not_measured() -> None:
    step = sb.Step(10)

    def fails() -> None:
        raise sb.BenchError("node 2 did not exit\nlog tail")

    assert not step.attempt("clean restart", fails)
    assert step.not_measured == {"clean restart": "BenchError: node 2 did not exit"}
    assert step.attempt("memory", lambda: None)


def test_settled_needs_every_node_to_agree_and_each_partition_led_once() -> None:
    view = {"partitions": 20, "offline": 0, "under_replicated": 0, "leaders": 10}
    assert settled([view, view], 20)
    assert not settled([view, view | {"partitions": 19}], 20)
    assert not settled([view, view | {"under_replicated": 1}], 20)
    assert not settled([view, view | {"leaders": 9}], 20)
    assert sb.all_led([view, view | {"under_replicated": 3}], 20)


def test_topics_of_ten_partitions_make_up_the_step() -> None:
    assert sb.topic_names(25, 10) == [("scale-00000", 10), ("scale-00001", 10), ("scale-00002", 5)]
    assert len(sb.topic_names(5000, 10)) == 500


def test_the_idle_connections_api_versions_request_is_well_formed() -> None:
    request = sb.api_versions_request(7, b"cid")
    size, key, version, correlation, length = struct.unpack_from(">ihhih", request)
    assert (size, key, version, correlation, length) == (len(request) - 4, 18, 0, 7, 3)
    assert request.endswith(b"cid")


# -- arguments -------------------------------------------------------------------------------


def test_quick_defaults_yield_to_explicit_flags() -> None:
    full = sb.parse_args([])
    assert (full.partitions, full.connections, full.records) == ((10, 100, 1000, 5000), (10, 100, 1000), 20_000)
    quick = sb.parse_args(["--quick", "--partitions", "10,30"])
    assert (quick.partitions, quick.connections, quick.records) == ((10, 30), (10, 100), sb.QUICK["records"])
    assert quick.site_properties["zookeeper.session.timeout.ms"] == "6000"
    assert sb.parse_args(["--zk-session-ms", "3000"]).site_properties["zookeeper.session.timeout.ms"] == "3000"


@pytest.mark.parametrize("flag", ["--partitions=100,10", "--partitions=10,10", "--connections=0,10", "--records=0"])
def test_bad_flags_are_refused(flag: str) -> None:
    with pytest.raises(SystemExit):
        sb.parse_args([flag])


# -- a tiny run ------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_tiny_run_measures_every_figure_and_writes_its_report(tmp_path: Path, zookeeper: str) -> None:
    out = tmp_path / "results"
    argv = ["--quick", "--partitions", "10,20", "--connections", "5,20", "--records", "500"]
    argv += ["--metadata-requests", "5", "--latency-seconds", "0.5", "--timeout", "120"]
    argv += ["--zookeeper", zookeeper, "--dir", str(tmp_path / "data"), "--out", str(out)]

    assert sb.run(sb.parse_args(argv)) == 0

    (md_path,) = out.glob("scale-*.md")
    (json_path,) = out.glob("scale-*.json")
    (png_path,) = out.glob("scale-*.png")
    assert png_path.read_bytes().startswith(b"\x89PNG") and png_path.stat().st_size > 10_000
    data = json.loads(json_path.read_text())
    assert [s["partitions"] for s in data["partition_steps"]] == [10, 20]
    for step in data["partition_steps"]:
        assert step["not_measured"] == {}
        figures = step["figures"]
        assert {key for key, _, _ in sb.PARTITION_METRICS} <= set(figures)
        assert all(figures[key] > 0 for key, _, _ in sb.PARTITION_METRICS), figures
        assert figures["failover_leaders_s"] >= figures["failover_controller_s"] > 0
        assert len(step["detail"]["rss_idle_bytes"]) == 3
        assert len(step["detail"]["metadata_ms"]) == 5
    assert [s["connections"] for s in data["connection_steps"]] == [0, 5, 20]
    for step in data["connection_steps"]:
        assert step["not_measured"] == {}
        assert step["figures"]["rss_node_mb"] > 0
        assert step["figures"]["latency_p99_ms"] >= step["figures"]["latency_p50_ms"] > 0
    assert len(data["memory_lines"]) == 3  # 10 -> 20 partitions; 0 -> 5 -> 20 connections
    assert data["command"].endswith("-m bench.scale_bench " + " ".join(argv))
    for key in ("cpu_model", "cores", "ram_gib", "kernel", "python"):
        assert data["machine"][key]
    text = md_path.read_text()
    for heading in ("## Machine", "## Settings", "## Results", "### Partitions", "### Growth against the work"):
        assert heading in text
    assert f"![the scale curves]({png_path.name})" in text
    assert "NOT TESTED" in text  # no step has 5,000 partitions
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())  # scratch removed
