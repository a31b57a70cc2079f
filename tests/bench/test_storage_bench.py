"""The storage benchmark (bench/storage_bench.py): its goal verdicts, its fsync policies, and one
tiny run end to end.

The end-to-end run proves that every measurement runs and lands in the report; it asserts
nothing about speed (performance is measured by the benchmark, not asserted by tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import storage_bench as sb


def comparison(strait_s: list[float], baseline_s: list[float]) -> sb.Comparison:
    return sb.Comparison("append 16 KiB", 16 * sb.MiB, 1024, "os.write", "", strait_s=strait_s, baseline_s=baseline_s)


@pytest.mark.unit
def test_the_ratio_is_of_the_median_runs_not_the_best() -> None:
    # One lucky strait run and one unlucky baseline run must not make the figure.
    c = comparison([1.0, 2.0, 2.0], [1.0, 1.0, 9.0])
    assert c.ratio == pytest.approx(0.5)
    assert c.best_ratio == pytest.approx(1.0)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("size", "ratio", "met"),
    [(16 * 1024, 0.89, False), (16 * 1024, 0.9, True), (1024 * 1024, 0.94, False), (1024 * 1024, 0.95, True)],
)
def test_each_batch_size_has_its_own_append_goal(size: int, ratio: float, met: bool) -> None:
    assert sb.append_goal_met(size, ratio) is met


@pytest.mark.unit
def test_a_missed_goal_is_reported_as_not_met() -> None:
    failing = comparison([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    failing.passed = sb.append_goal_met(16 * 1024, failing.ratio)
    assert "append goal (ratio >= 0.9 / 0.95) NOT met (16 KiB: 0.500)" in sb.goal_summary([failing])


@pytest.mark.unit
def test_a_median_needs_three_runs() -> None:
    with pytest.raises(SystemExit):
        sb.parse_args(["--repeats", "2"])


@pytest.mark.unit
def test_the_fsync_policies_flush_where_their_baseline_does(tmp_path: Path) -> None:
    batch = sb.make_batch(16 * 1024, "16 KiB")
    by_label = {p.label: p for p in sb.fsync_policies(batch)}
    every = by_label["flush.messages=1"]
    assert (every.config.flush_messages, every.every_batches) == (1, 1)
    grouped = by_label[f"flush.messages={sb.FSYNC_EVERY_BATCHES * batch.records}"]
    assert grouped.every_batches == sb.FSYNC_EVERY_BATCHES
    timed = by_label[f"flush.ms={sb.FSYNC_FLUSH_MS}"]
    assert (timed.config.flush_ms, timed.every_batches) == (sb.FSYNC_FLUSH_MS, 0)
    for policy in (every, grouped, timed):  # each run appends and cleans up after itself
        assert sb.strait_fsync_run(tmp_path, batch, 4, policy) > 0
        assert sb.plain_fsync_run(tmp_path, batch, 4, policy) > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.integration
def test_a_quick_run_measures_every_case_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--quick", "--out", str(out), "--dir", str(tmp_path), "--profiler", "none", "--no-cold"]
    args += ["--append-16k-mib", "1", "--append-1m-mib", "2", "--log-mib", "2", "--recompress-mib", "1"]
    assert sb.main(args) == 0
    data = json.loads(next(out.glob("storage-*.json")).read_text())
    names = [r["name"] for r in data["results"]]
    assert names[:4] == ["append 16 KiB", "append 16 KiB", "append 1 MiB", "append 1 MiB"]
    assert [n for n in names if n.startswith("fsync")] == [
        "fsync 16 KiB, flush.messages=1",
        f"fsync 16 KiB, flush.messages={sb.FSYNC_EVERY_BATCHES * 15}",
        f"fsync 16 KiB, flush.ms={sb.FSYNC_FLUSH_MS}",
    ]
    assert [n for n in names if n.startswith("recompress")] == [
        f"recompress 16 KiB, {source} -> {target}" for source, target in sb.RECOMPRESS_CASES
    ]
    assert all(len(r["strait_seconds"]) == 3 == len(r["baseline_seconds"]) for r in data["results"])
    report = next(out.glob("storage-*.md")).read_text()
    assert "Medians of 3 runs each" in report
    assert "fsync 16 KiB, flush.messages=1" in report
