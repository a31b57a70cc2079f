"""The audit benchmark (bench/audit_bench.py): the consumer loop's merge, the summaries and goal, the process
sampler, and one tiny ``--quick`` run end to end.

The end-to-end run proves that the benchmark starts an appliance, fills and mirrors a topic, runs
all three paths, checks their answers and writes its report; it asserts nothing about speed
beyond the figures being positive numbers (performance is measured by the benchmark, not
asserted by tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench import audit_bench as ab
from bench._audit_loop import compare_partition
from bench._audit_measure import DRIVER, JVM, MIB, OTHER, WORKERS, Measured, ProcSample, Sampler, Usage
from bench._audit_report import (
    FULL_SIZE,
    GOAL_RATIO,
    LIVE,
    LOOP,
    PATHS,
    RECORDS,
    SEGMENTS,
    SMALL_SIZE,
    Results,
    Trial,
    memory_verdict,
    ratio,
    report_name,
    results_table,
    speed_verdict,
    trials_table,
)
from bench._cli import stepper


@dataclass
class FakeMessage:
    o: int
    v: bytes = b"v"

    def offset(self) -> int:
        return self.o

    def key(self) -> bytes:
        return b"k%d" % self.o

    def value(self) -> bytes:
        return self.v

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"1")]

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000 + self.o)


class FakeSide:
    """What compare_partition uses of a Side: the range, and batches of at most ``size`` records."""

    def __init__(self, messages: list[FakeMessage], low: int, high: int, size: int) -> None:
        self.topic = "t"
        self.messages, self.low, self.end, self.size = messages, low, high, size
        self.next = low

    def start(self, partition: int) -> tuple[int, int]:
        return self.low, self.end

    @property
    def done(self) -> bool:
        return self.next >= self.end

    def batch(self, partition: int) -> list[FakeMessage]:
        out = [m for m in self.messages if m.o >= self.next][: self.size]
        self.next = out[-1].o + 1 if out else self.end
        return out


def test_the_loop_merges_by_offset_across_batches_of_different_sizes() -> None:
    source = [FakeMessage(o) for o in range(20) if o != 7]  # a gap on both sides at 7
    target = [FakeMessage(o, b"x" if o == 12 else b"v") for o in range(22) if o not in (7, 15)]
    counts = compare_partition(FakeSide(source, 0, 20, 3), FakeSide(target, 0, 22, 5), 0)  # type: ignore[arg-type]
    assert (counts.source_records, counts.target_records) == (19, 20)
    assert counts.compared == 18 and counts.different == 1 and counts.matched == 17
    assert (counts.missing, counts.extra) == (1, 2)  # 15 only on the source; 20 and 21 only on the target


def test_the_loop_counts_an_empty_side_as_all_missing() -> None:
    counts = compare_partition(FakeSide([FakeMessage(o) for o in range(5)], 0, 5, 2), FakeSide([], 0, 0, 2), 0)  # type: ignore[arg-type]
    assert (counts.compared, counts.missing, counts.extra) == (0, 5, 0)


def _measured(seconds: float, rss_mib: float, cpu: float = 1.0) -> Measured:
    rss = int(rss_mib * MIB)
    return Measured(seconds, 0, rss, rss // 2, {DRIVER: rss}, {DRIVER: cpu}, {DRIVER: 1}, 10, Path("log"))


def _trial(path: str, size: str, records: int, seconds: float, rss_mib: float, repeat: int = 0) -> Trial:
    counts = dict.fromkeys(("source_records", "target_records", "compared", "matched"), records)
    counts |= {"discrepancies": 0, "invalid": 0}
    return Trial(path, size, "t", records, repeat, _measured(seconds, rss_mib), seconds / 2, counts)


def test_the_goal_compares_median_records_per_s_of_the_segment_path_and_the_loop() -> None:
    results = Results(
        trials=[
            _trial(LOOP, FULL_SIZE, 1000, 10.0, 50),
            _trial(LOOP, FULL_SIZE, 1000, 12.0, 50, repeat=1),
            _trial(SEGMENTS, FULL_SIZE, 1000, 3.0, 900),
            _trial(SEGMENTS, FULL_SIZE, 1000, 4.0, 950, repeat=1),
            _trial(LIVE, FULL_SIZE, 1000, 5.0, 900),
        ]
    )
    # loop: the median of 100 and 83.3 records/s; segments: of 333.3 and 250.
    expected = ((1000 / 3 + 1000 / 4) / 2) / ((1000 / 10 + 1000 / 12) / 2)
    assert ratio(results, FULL_SIZE, SEGMENTS) == pytest.approx(expected)
    found = speed_verdict(results)
    assert expected >= GOAL_RATIO and found.met is True
    assert "from live sites" in found.figures
    slow = Results(trials=[_trial(LOOP, FULL_SIZE, 1000, 10.0, 50), _trial(SEGMENTS, FULL_SIZE, 1000, 5.0, 900)])
    assert speed_verdict(slow).met is False
    assert speed_verdict(Results(trials=[_trial(LOOP, FULL_SIZE, 1000, 10.0, 50)])).met is None


def test_memory_is_bounded_when_the_peak_grows_little_with_the_topic() -> None:
    base = [_trial(LOOP, s, n, 1.0, 50) for s, n in ((SMALL_SIZE, 100), (FULL_SIZE, 1000))]
    bounded = Results(
        trials=base
        + [_trial(p, SMALL_SIZE, 100, 1.0, 800) for p in (SEGMENTS, LIVE)]
        + [_trial(p, FULL_SIZE, 1000, 5.0, 1000) for p in (SEGMENTS, LIVE)]
    )
    assert memory_verdict(bounded).met is True
    grows = Results(
        trials=base
        + [_trial(p, SMALL_SIZE, 100, 1.0, 300) for p in (SEGMENTS, LIVE)]
        + [_trial(SEGMENTS, FULL_SIZE, 1000, 5.0, 3000), _trial(LIVE, FULL_SIZE, 1000, 5.0, 310)]
    )
    assert memory_verdict(grows).met is False
    assert memory_verdict(Results(trials=base)).met is None


def test_the_table_has_a_row_per_size_and_path_with_the_ratio_to_the_loop() -> None:
    results = Results(trials=[_trial(p, FULL_SIZE, 1000, 2.0 if p == LOOP else 1.0, 100) for p in PATHS])
    headers, rows = results_table(results)
    assert [r[1] for r in rows] == list(PATHS)
    assert [r[headers.index("/ loop")] for r in rows] == ["1.00", "2.00", "2.00", "2.00"]


def test_the_paths_order_rotates() -> None:
    assert [ab.order(r)[0] for r in range(5)] == [PATHS[0], PATHS[1], PATHS[2], PATHS[3], PATHS[0]]
    assert all(sorted(ab.order(r)) == sorted(PATHS) for r in range(4))


def test_quick_defaults_yield_to_explicit_flags() -> None:
    quick = ab.parse_args(["--quick", "--records", "5000"])
    assert (quick.records, quick.nodes, quick.repeats) == (5000, ab.QUICK["nodes"], 1)
    full = ab.parse_args([])
    assert (full.records, full.nodes, full.partitions, full.value_bytes) == (10_000_000, 3, 6, 100)
    assert full.small_records == 1_000_000 and (full.replication, full.min_insync) == (3, 2)
    assert [size for size, _, _ in ab.topics_of(full)] == [SMALL_SIZE, FULL_SIZE]
    assert [size for size, _, _ in ab.topics_of(ab.parse_args(["--small-fraction", "0"]))] == [FULL_SIZE]
    assert (report_name(full), report_name(quick)) == ("audit", "audit-5000")


def test_usage_sums_a_sample_and_keeps_each_roles_peak_and_last_cpu() -> None:
    usage = Usage()
    usage.add([ProcSample(1, DRIVER, 100, 90, 0.5), ProcSample(2, OTHER, 1000, 900, 2.0)])
    usage.add(
        [ProcSample(1, DRIVER, 150, 100, 0.7), ProcSample(2, JVM, 900, 800, 3.0), ProcSample(3, WORKERS, 300, 50, 1.0)]
    )
    assert (usage.peak_rss_bytes, usage.peak_pss_bytes) == (1350, 990)
    assert usage.peak_rss_by_role == {DRIVER: 150, OTHER: 1000, JVM: 900, WORKERS: 300}
    # pid 2 exec'ed from a launcher script into the JVM: its CPU and count go to the role it had last
    assert usage.cpu_by_role() == {DRIVER: 0.7, JVM: 3.0, WORKERS: 1.0}
    assert usage.processes_by_role() == {DRIVER: 1, JVM: 1, WORKERS: 1}


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_the_sampler_sees_a_session_and_its_children() -> None:
    sleeper = "import time; time.sleep(30)"
    code = f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {sleeper!r}]); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        with Sampler(child.pid, interval=0.05) as sampler:
            deadline = time.monotonic() + 10
            while sampler.usage.processes_by_role().get(WORKERS, 0) < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert sampler.usage.processes_by_role() == {DRIVER: 1, WORKERS: 1}
        assert sampler.usage.peak_rss_bytes > sampler.usage.peak_pss_bytes > 0
    finally:
        os.killpg(child.pid, 9)
        child.wait()


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(450)
def test_a_tiny_quick_run_measures_the_paths_it_is_given_and_writes_its_report(tmp_path: Path) -> None:
    # Two of the four paths: the loop and one Spark path carry the whole machinery (appliance, fill,
    # mirror, sampling, checks, ratios, report); the other two differ only in the job's arguments,
    # which test_each_path_gives_the_reconcile_job_arguments_it_accepts checks. Each Spark path costs
    # a Spark start: the suite runs two, not four.
    out = tmp_path / "results"
    argv = ["--quick", "--records", "3000", "--partitions", "2", "--small-fraction", "0", "--paths", "segments,loop"]
    argv += ["--dir", str(tmp_path / "data"), "--out", str(out)]
    measured = (LOOP, SEGMENTS)

    assert ab.measure_and_report(ab.parse_args(argv), stepper(time.perf_counter())) == 0

    (md_path,) = out.glob("audit-*.md")
    (json_path,) = out.glob("audit-*.json")
    data: dict[str, Any] = json.loads(json_path.read_text())
    assert data["failure"] is None
    assert sorted(t["path"] for t in data["trials"]) == sorted(measured)
    for trial in data["trials"]:
        assert trial["records"] == 3000 and trial["returncode"] == 0, trial
        assert trial["counts"]["matched"] == 3000 and trial["counts"]["discrepancies"] == 0
        assert trial["seconds"] > 0 and trial["records_per_s"] > 0 and trial["peak_rss_mib"] > 0
        assert trial["peak_rss_mib_by_role"][DRIVER] > 0 and 0 < trial["peak_pss_mib"] <= trial["peak_rss_mib"]
    spark_runs = [t for t in data["trials"] if t["path"] != LOOP]
    assert all(t["peak_rss_mib_by_role"].get(JVM, 0) > 0 for t in spark_runs)  # the JVM was in the session
    assert all(t["spark"]["master"].startswith("local") for t in spark_runs)
    assert data["ratios"][FULL_SIZE][SEGMENTS] and data["ratios"][FULL_SIZE][LIVE] is None
    speed, memory = data["goal"]["verdicts"]
    assert speed["met"] is not None and memory["met"] is None  # no small topic: memory not tested
    for key in ("cpu_model", "cores", "ram_gib", "kernel", "fs_type_mounts", "python"):
        assert data["machine"][key]
    assert data["machine"]["software"]["pyspark"] != "not installed"
    assert data["command"].endswith("-m bench.audit_bench " + " ".join(argv))
    text = md_path.read_text()
    for heading in ("## Machine", "## Settings", "## Results", "### Every run"):
        assert heading in text
    for path in PATHS:
        assert (f"| {FULL_SIZE} | {path} | 3,000 |" in text) == (path in measured), path
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())  # scratch removed


def test_each_path_gives_the_reconcile_job_arguments_it_accepts(tmp_path: Path) -> None:
    from spark_jobs.jobs.reconcile import command

    for path, source in ((SEGMENTS, "/d/e1,/d/e2"), (LIVE, "127.0.0.1:9092"), (RECORDS, "/d/e1")):
        args = ab.reconcile_args(path, source, source, "t", tmp_path / "out")
        ctx = command.make_context("reconcile", list(args))
        assert ctx.params["source"] == source and ctx.params["topics"] == ["t"]
        assert ctx.params["by_record"] is (path == RECORDS), path


def test_paths_chooses_the_paths_in_their_order_and_names_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert ab.parse_args(["--quick"]).paths == PATHS
    assert ab.parse_args(["--quick", "--paths", "records, loop"]).paths == (LOOP, RECORDS)
    assert ab.order(1, (LOOP, RECORDS)) == [RECORDS, LOOP]
    for bad in ("loop,segment", ""):
        with pytest.raises(SystemExit):
            ab.parse_args(["--paths", bad])
    assert "--paths 'loop,segment': 'segment'; choose from loop, segments, live, records" in capsys.readouterr().err


def _failed_trial(path: str, size: str, records: int) -> Trial:
    return Trial(path, size, "t", records, 0, _measured(30.0, 2000), 0.0, {}, error="exit 3; out of memory")


def test_a_failed_run_counts_for_nothing_and_misses_the_goals() -> None:
    results = Results(
        trials=[
            *(_trial(p, SMALL_SIZE, 100, 1.0, 500) for p in PATHS),
            _trial(LOOP, FULL_SIZE, 1000, 10.0, 50),
            _failed_trial(SEGMENTS, FULL_SIZE, 1000),
            _trial(LIVE, FULL_SIZE, 1000, 5.0, 600),
        ]
    )
    assert results.of(FULL_SIZE, SEGMENTS) == [] and ratio(results, FULL_SIZE, SEGMENTS) is None
    speed, memory = speed_verdict(results), memory_verdict(results)
    assert speed.met is False and "did not complete" in speed.figures and "out of memory" in speed.figures
    assert memory.met is False and "reconcile from live sites: 500 MiB" in memory.figures
    headers, rows = results_table(results)
    row = next(r for r in rows if r[0] == FULL_SIZE and r[1] == SEGMENTS)
    assert row[headers.index("runs")] == "0 (1 failed)" and row[headers.index("records/s (median)")] == "FAILED"
    assert row[headers.index("peak RSS MiB")] == "2,000"  # what it held when it failed
    _, every = trials_table(results)
    assert any(r[-1] == "FAILED: exit 3; out of memory" for r in every)


def test_a_failure_names_the_last_error_line_a_java_oom_and_keeps_the_log(tmp_path: Path) -> None:
    log = tmp_path / "scratch" / "reconcile-full-segments-0.log"
    log.parent.mkdir()
    log.write_text(
        "26/11/26 WARN something\njava.lang.OutOfMemoryError: Java heap space\n\tat x.y(Z.java:1)\n"
        "error: reconcile: An error occurred while calling o278.collectToPython.\n"
    )
    measured = Measured(12.0, 3, 1, 1, {}, {}, {}, 1, log)
    text = ab.failure(measured, log)
    kept = tmp_path / "scratch-reconcile-full-segments-0.log"
    assert text == (
        "exit 3; error: reconcile: An error occurred while calling o278.collectToPython.; "
        f"the log shows java.lang.OutOfMemoryError: Java heap space; log: {kept}"
    )
    assert kept.read_text() == log.read_text()
    timed_out = Measured(99.6, -1, 1, 1, {}, {}, {}, 1, log, timed_out=True)
    assert ab.failure(timed_out, log).startswith("stopped after 100 s (--timeout); error: reconcile")
