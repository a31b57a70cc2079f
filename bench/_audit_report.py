"""The audit benchmark's settings, trials, goal, tables and report (``bench/results/audit-<date>.md``, ``.json``)."""

from __future__ import annotations

import datetime
import json
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._audit_data import FILL_SETTINGS, HEADERS, KEY_BYTES, Filled
from ._audit_loop import BATCH, CONSUMER_SETTINGS
from ._audit_measure import DRIVER, JVM, MIB, ROLE_LABELS, SAMPLE_S, WORKERS, Measured
from ._failover_report import machine as failover_machine
from ._report import (
    command_line,
    dist_version,
    markdown_table,
    print_table,
    report_head,
    report_sections,
    result_stem,
    run_fields,
    settings_json,
    site_machine_lines,
    verdict_style,
    verdict_word,
    wide_console,
    write_json,
    write_markdown,
)

LOOP, SEGMENTS, LIVE = "consumer loop", "reconcile from segments", "reconcile from live sites"
RECORDS = "reconcile from segments, every record (--by-record)"
PATHS = (LOOP, SEGMENTS, LIVE, RECORDS)
#: The paths the goals are about (what ``strait audit reconcile`` does by default).
DEFAULT_PATHS = (SEGMENTS, LIVE)
FULL_SIZE, SMALL_SIZE = "full", "small"
FULL_RECORDS = 10_000_000  # the topic: 10 million records, about 1 GB
GOAL_RATIO = 3.0  # the issue: the segment path >= 3x the consumer loop's records/s on the same 2 cores
MEMORY_GROWTH_LIMIT = 1.5  # bounded: peak RSS at the full size <= this x the peak at the small size
#: What every path reports, and what the benchmark checks before it counts a run.
CHECKED_COUNTS = ("source_records", "target_records", "compared", "matched", "discrepancies", "invalid")
SPARK_DRIVER_MEMORY_DEFAULT = "1g"  # spark.driver.memory when nothing sets it (the JVM's -Xmx in local mode)


@dataclass(frozen=True)
class Settings:
    records: int
    partitions: int
    value_bytes: int
    repeats: int
    nodes: int
    small_fraction: float
    timeout_s: float
    out: Path | None
    base_dir: Path
    note: str | None
    quick: bool
    argv: tuple[str, ...]
    paths: tuple[str, ...] = PATHS  # the paths measured (--paths), in PATHS's order

    @property
    def replication(self) -> int:
        return min(3, self.nodes)

    @property
    def min_insync(self) -> int:
        return min(2, self.nodes)

    @property
    def small_records(self) -> int:
        return int(self.records * self.small_fraction)


@dataclass
class Trial:
    """One run of one path over one topic, checked: ``error`` says why it does not count (it failed,
    or its answer was not a clean reconcile of every record), None when it does."""

    path: str
    size: str  # FULL_SIZE or SMALL_SIZE
    topic: str
    records: int  # the topic's records (each was read from both sites)
    repeat: int
    measured: Measured
    own_seconds: float  # the job's own time: Spark's from its session being up (summary.json), the loop's in-process
    counts: dict[str, int]  # what the path reported: CHECKED_COUNTS
    spark: dict[str, str] = field(default_factory=dict)  # master and version, for the reconcile paths
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def records_per_s(self) -> float:
        return self.records / self.measured.seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "topic": self.topic,
            "records": self.records,
            "repeat": self.repeat,
            "records_per_s": round(self.records_per_s, 1),
            "own_seconds": round(self.own_seconds, 3),
            **self.measured.to_json(),
            "counts": self.counts,
            "spark": self.spark,
            "error": self.error,
        }


@dataclass
class Results:
    fills: list[Filled] = field(default_factory=list)
    mirrored_s: float = 0.0  # from the last record acknowledged on east to west holding everything
    trials: list[Trial] = field(default_factory=list)
    failure: str | None = None  # what stopped the runs early, or which runs failed
    loadavg_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    loadavg_end: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def of(self, size: str, path: str) -> list[Trial]:
        """The runs of ``path`` at ``size`` that count (failed ones left out)."""
        return [t for t in self.trials if t.size == size and t.path == path and t.ok]

    def failed(self, size: str, path: str) -> list[Trial]:
        return [t for t in self.trials if t.size == size and t.path == path and not t.ok]

    def sizes(self) -> list[str]:
        return [s for s in (SMALL_SIZE, FULL_SIZE) if any(t.size == s for t in self.trials)]


# -- figures ---------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def summary(trials: Sequence[Trial]) -> dict[str, Any]:
    """One path at one size over its repeats: median and best records/s, the worst peak memory."""
    rates = [t.records_per_s for t in trials]
    worst = max(trials, key=lambda t: t.measured.peak_rss_bytes)
    roles = {r for t in trials for r in t.measured.peak_rss_by_role}
    return {
        "runs": len(trials),
        "records": trials[0].records,
        "seconds_median": _median([t.measured.seconds for t in trials]),
        "records_per_s_median": _median(rates),
        "records_per_s_best": max(rates),
        "own_records_per_s_median": _median([t.records / t.own_seconds for t in trials if t.own_seconds > 0] or [0.0]),
        "peak_rss_mib": worst.measured.peak_rss_mib,
        "peak_pss_mib": max(t.measured.peak_pss_mib for t in trials),
        "peak_rss_mib_by_role": {
            r: max(t.measured.peak_rss_by_role.get(r, 0) for t in trials) / MIB for r in sorted(roles)
        },
        "busy_cores_median": _median([t.measured.cpu_s / t.measured.seconds for t in trials]),
        "cpu_s_by_role_median": {
            r: _median([t.measured.cpu_by_role.get(r, 0.0) for t in trials])
            for r in sorted({r for t in trials for r in t.measured.cpu_by_role})
        },
    }


def ratio(results: Results, size: str, path: str) -> float | None:
    """``path``'s median records/s over the consumer loop's, at ``size``; None when either is missing."""
    mine, loop = results.of(size, path), results.of(size, LOOP)
    if not mine or not loop:
        return None
    return float(summary(mine)["records_per_s_median"] / summary(loop)["records_per_s_median"])


@dataclass(frozen=True)
class Verdict:
    what: str
    figures: str
    met: bool | None

    def line(self) -> str:
        return f"{self.what} {verdict_word(self.met)}: {self.figures}"


def _failure_text(trials: Sequence[Trial]) -> str:
    return f"{len(trials)} run(s) failed ({trials[0].error})"


def speed_verdict(results: Results) -> Verdict:
    what = f"reconcile from segments >= {GOAL_RATIO:g}x the consumer loop's records/s (full size, medians)"
    found = ratio(results, FULL_SIZE, SEGMENTS)
    failed = results.failed(FULL_SIZE, SEGMENTS)
    if found is None and failed:
        return Verdict(
            what, f"reconcile from segments did not complete at the full size: {_failure_text(failed)}", False
        )
    if found is None:
        return Verdict(what, "not both measured at the full size", None)
    seg = summary(results.of(FULL_SIZE, SEGMENTS))["records_per_s_median"]
    loop = summary(results.of(FULL_SIZE, LOOP))["records_per_s_median"]
    live = ratio(results, FULL_SIZE, LIVE)
    live_text = "" if live is None else f"; from live sites {live:.2f}x (no goal)"
    every = ratio(results, FULL_SIZE, RECORDS)
    live_text += "" if every is None else f"; from segments, every record {every:.2f}x (no goal)"
    return Verdict(what, f"{found:.2f}x ({seg:,.0f} vs {loop:,.0f} records/s){live_text}", found >= GOAL_RATIO)


def memory_verdict(results: Results) -> Verdict:
    """Bounded: each reconcile path's peak RSS at the full size at most ``MEMORY_GROWTH_LIMIT`` times
    its peak at the small size (a footprint that grew with the topic would grow ~records ratio)."""
    what = (
        f"memory bounded (each reconcile path's peak RSS at the full size <= {MEMORY_GROWTH_LIMIT:g}x its peak at "
        "the small size)"
    )
    parts: list[str] = []
    met: bool | None = True
    for path in DEFAULT_PATHS:
        full, small = results.of(FULL_SIZE, path), results.of(SMALL_SIZE, path)
        failed = results.failed(FULL_SIZE, path)
        if failed and not full:
            parts.append(f"{path} did not complete at the full size: {_failure_text(failed)}")
            met = False
            continue
        if not full or not small:
            return Verdict(what, f"{path} not measured at both sizes (--small-fraction 0 skips the small one)", None)
        big, little = summary(full), summary(small)
        growth = big["peak_rss_mib"] / little["peak_rss_mib"]
        met = bool(met) and growth <= MEMORY_GROWTH_LIMIT
        parts.append(
            f"{path}: {little['peak_rss_mib']:,.0f} MiB at {little['records']:,} records -> "
            f"{big['peak_rss_mib']:,.0f} MiB at {big['records']:,} ({growth:.2f}x)"
        )
    return Verdict(what, "; ".join(parts), met)


# -- tables ----------------------------------------------------------------------------------------


def _mib(rss_bytes: int | None) -> str:
    return "-" if rss_bytes is None else f"{rss_bytes / MIB:,.0f}"


def _role_mib(s: dict[str, Any], role: str) -> str:
    mib = s["peak_rss_mib_by_role"].get(role)
    return "-" if mib is None else f"{mib:,.0f}"


def results_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = [
        "size",
        "path",
        "records",
        "runs",
        "seconds (median)",
        "records/s (median)",
        "records/s (best)",
        "records/s, job only",
        "peak RSS MiB",
        "peak PSS MiB",
        "driver MiB",
        "JVM MiB",
        "Python workers MiB",
        "busy cores",
        "/ loop",
    ]
    rows = []
    for size in results.sizes():
        for path in PATHS:
            trials, failed = results.of(size, path), results.failed(size, path)
            runs = str(len(trials)) + (f" ({len(failed)} failed)" if failed else "")
            if not trials and failed:
                m = failed[0].measured
                rows.append(
                    [size, path, f"{failed[0].records:,}", runs, f"failed after {m.seconds:.1f}", "FAILED", "-", "-"]
                    + [f"{m.peak_rss_mib:,.0f}", f"{m.peak_pss_mib:,.0f}"]
                    + [_mib(m.peak_rss_by_role.get(r)) for r in (DRIVER, JVM, WORKERS)]
                    + [f"{m.cpu_s / m.seconds:.2f}", "-"]
                )
            if not trials:
                continue
            s = summary(trials)
            r = ratio(results, size, path)
            rows.append(
                [
                    size,
                    path,
                    f"{s['records']:,}",
                    runs,
                    f"{s['seconds_median']:.1f}",
                    f"{s['records_per_s_median']:,.0f}",
                    f"{s['records_per_s_best']:,.0f}",
                    f"{s['own_records_per_s_median']:,.0f}",
                    f"{s['peak_rss_mib']:,.0f}",
                    f"{s['peak_pss_mib']:,.0f}",
                    _role_mib(s, DRIVER),
                    _role_mib(s, JVM),
                    _role_mib(s, WORKERS),
                    f"{s['busy_cores_median']:.2f}",
                    "-" if r is None else f"{r:.2f}",
                ]
            )
    return headers, rows


def trials_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = [
        "size",
        "repeat",
        "path",
        "seconds",
        "job-only seconds",
        "records/s",
        "peak RSS MiB",
        "peak PSS MiB",
        "CPU s: driver / JVM / workers",
        "processes: driver / JVM / workers",
        "checked",
    ]
    rows = []
    for t in results.trials:
        m = t.measured
        rows.append(
            [
                t.size,
                str(t.repeat + 1),
                t.path,
                f"{m.seconds:.1f}",
                f"{t.own_seconds:.1f}" if t.ok else "-",
                f"{t.records_per_s:,.0f}" if t.ok else "FAILED",
                f"{m.peak_rss_mib:,.0f}",
                f"{m.peak_pss_mib:,.0f}",
                " / ".join(f"{m.cpu_by_role.get(r, 0.0):.1f}" for r in (DRIVER, JVM, WORKERS)),
                " / ".join(str(m.processes_by_role.get(r, 0)) for r in (DRIVER, JVM, WORKERS)),
                f"{t.counts['matched']:,} matched, {t.counts['discrepancies']:,} discrepancies, "
                f"{t.counts['invalid']:,} invalid"
                if t.ok
                else f"FAILED: {t.error}",
            ]
        )
    return headers, rows


def fills_line(results: Results) -> str:
    parts = [
        f"`{f.topic}` {f.records:,} records in {f.seconds:.1f} s ({f.records / f.seconds:,.0f}/s)"
        for f in results.fills
        if f.seconds > 0
    ]
    return (
        f"Filled (untimed for the goal): {'; '.join(parts)}; west held everything {results.mirrored_s:.1f} s after "
        "the last acknowledgement on east"
    )


# -- output ----------------------------------------------------------------------------------------


def print_tables(results: Results) -> None:
    console = wide_console(260)

    def left(i: int, h: str) -> bool:
        return h in ("size", "path", "checked")

    print_table(console, "Reconciling both sites: records/s and peak memory", *results_table(results), left)
    print_table(console, "Every run", *trials_table(results), left)
    for found in (speed_verdict(results), memory_verdict(results)):
        console.print(found.line(), style=verdict_style(found.met))
    if results.failure:
        console.print(f"FAILED: {results.failure}", style="red")


def java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, check=False)
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


def machine(workdir: Path, strait: str) -> dict[str, Any]:
    info = failover_machine(workdir, strait)
    info["software"] |= {"pyspark": dist_version("pyspark"), "pyarrow": dist_version("pyarrow"), "java": java_version()}
    return info


def settings_lines(settings: Settings, topics: Sequence[tuple[str, str, int]]) -> list[str]:
    n = settings.nodes
    sizes = ", ".join(f"`{topic}` ({size}: {records:,} records)" for size, topic, records in topics)
    return [
        f"- Appliance: `strait up --base-port 0 --nodes {n}` (`python -m strait.cli`, the benchmark's interpreter "
        f"and code): sites `east` and `west` of {n} strait node{'s' if n > 1 else ''} each (two log dirs per node), "
        "each site with its own ZooKeeper, and the mirror running the link `east-to-west` (offset-preserving), "
        "all on 127.0.0.1, in a scratch directory; one appliance for the whole run, idle while the paths run",
        f"- Topics {sizes}: {settings.partitions} partitions, replication factor {settings.replication}, "
        f"`min.insync.replicas={settings.min_insync}`, made on east with CreateTopics and mirrored to west by the link",
        f"- Records: a distinct {KEY_BYTES}-byte key, a {settings.value_bytes}-byte value (its sequence number, then "
        f"random bytes: no two alike), one header `{HEADERS[0][0]}`, the producer's CreateTime; round robin over the "
        f"partitions from one confluent-kafka producer `{json.dumps(FILL_SETTINGS)}` (no compression). Nothing is "
        "timed until west's watermarks equal east's in every partition and east holds exactly the records produced",
        "- **reconcile from segments**: `python -m spark_jobs.jobs.reconcile --source <east's node dirs> --target "
        "<west's node dirs> --topics <topic> --link east-to-west --out <scratch>` (the job `strait audit reconcile` "
        "runs; `strait-segments` reads the nodes' log dirs, the longest copy of each partition)",
        "- **reconcile from live sites**: the same with `--source <east's bootstrap> --target <west's bootstrap>` "
        "(`strait-kafka`)",
        "- Both reconcile paths run with Spark's defaults as `get_session` leaves them: `local[*]` (every core of "
        f"the machine), `spark.driver.memory` {SPARK_DRIVER_MEMORY_DEFAULT} (the JVM's heap), adaptive execution on. "
        "Each run is a fresh process (JVM start-up included in its seconds) and must exit 0 with `summary.json` "
        "verdict `clean`: source and target records, compared and matched all equal to the topic's records, no "
        "discrepancy, no invalid row, nothing behind or ahead",
        f"- **consumer loop** (`bench/_audit_loop.py`, the alternative a user would write): one Python process, "
        f"two confluent-kafka consumers (one per site), partition by partition, `assign()` at each site's low "
        f"watermark, `consume(num_messages={BATCH:,})`, records merged by offset and compared by key, value, "
        f"headers and timestamp; consumer settings `{json.dumps(CONSUMER_SETTINGS)}`. It must compare and match "
        "every record",
        "- **records/s** = the topic's records / the process's wall time, spawn to exit (every record is read "
        "from both sites); *job only* = the same over the time the path reports itself (Spark: from its session "
        "being up to the result written, `summary.json` seconds; the loop: its own run). "
        f"{settings.repeats} run(s) of each path at each size, their order rotating from run to run",
        f"- **Memory**: every process of the path's session sampled from /proc every {SAMPLE_S:g} s: *peak RSS* is "
        "the largest sum over the session at one sample; *driver* is the process started (the Python driver, or "
        f"the loop), *JVM* the {ROLE_LABELS[JVM]}, *Python workers* pyspark's daemon and workers; each role's own "
        "peak (roles peak at different moments). The RSS sum counts the pages forked workers share with their "
        "daemon once per process; *peak PSS* (the summed proportional set sizes, `smaps_rollup`) splits them, and "
        "does not overstate. *busy cores* = CPU seconds of the session / wall seconds",
        f"- Goal (the audit issue): the segment path >= {GOAL_RATIO:g}x the consumer loop's records/s on the same "
        "cores, and memory bounded whatever the topic's size: here, each reconcile path's peak RSS at the full size "
        f"at most {MEMORY_GROWTH_LIMIT:g}x its peak at the small size (a footprint proportional to the topic would "
        "grow with the records ratio)",
    ]


def report_name(settings: Settings) -> str:
    """``audit`` for the issue's size (10,000,000 records), else ``audit-<records>``: a run at another
    size never overwrites the day's full-size result."""
    return "audit" if settings.records == FULL_RECORDS else f"audit-{settings.records}"


def write_report(
    settings: Settings,
    results: Results,
    info: dict[str, Any],
    started: datetime.datetime,
    elapsed: float,
    topics: Sequence[tuple[str, str, int]],
) -> tuple[Path, Path]:
    """Write ``audit-<date>.md`` and ``.json`` to ``settings.out``; returns their paths."""
    assert settings.out is not None
    stem = result_stem(settings.out, report_name(settings), started)
    verdicts = [speed_verdict(results), memory_verdict(results)]
    data = run_fields(started, elapsed, command_line("bench.audit_bench", settings.argv)) | {
        "note": settings.note,
        "settings": settings_json(settings),
        "machine": info,
        "loadavg_start": results.loadavg_start,
        "loadavg_end": results.loadavg_end,
        "goal": {
            "segments_over_loop": GOAL_RATIO,
            "memory_growth_limit": MEMORY_GROWTH_LIMIT,
            "verdicts": [asdict(v) for v in verdicts],
        },
        "ratios": {size: {path: ratio(results, size, path) for path in PATHS[1:]} for size in results.sizes()},
        "failure": results.failure,
        "fills": [f.to_json() for f in results.fills],
        "mirrored_s": round(results.mirrored_s, 2),
        "summary": {
            size: {path: summary(results.of(size, path)) for path in PATHS if results.of(size, path)}
            for size in results.sizes()
        },
        "trials": [t.to_json() for t in results.trials],
    }
    json_path = stem.with_suffix(".json")
    write_json(json_path, data)
    sw = info["software"]
    dirty = " (with uncommitted changes)" if sw["git_dirty"] else ""
    md = [
        *report_head(
            f"# Audit benchmark (reconciling two sites: Spark from segments and live vs a consumer loop), "
            f"{started.date().isoformat()}",
            data,
            json_path,
            measures="Settings, the goal and how to read the figures",
        ),
        "",
        *([f"**Note:** {settings.note}", ""] if settings.note else []),
        f"Load average {results.loadavg_start[0]:.2f} when it started and {results.loadavg_end[0]:.2f} when it ended.",
        *report_sections(
            [
                *site_machine_lines(info),
                f"- PySpark {sw['pyspark']}, pyarrow {sw['pyarrow']}, {sw['java']}",
                f"- strait: `{sw['strait_version']}`, commit `{sw['git_commit']}`{dirty}",
            ],
            settings_lines(settings, topics),
            [v.line() for v in verdicts] + ([f"**FAILED**: {results.failure}"] if results.failure else []),
        ),
        markdown_table(*results_table(results)),
        "",
        fills_line(results),
        "",
        "### Every run",
        "",
        markdown_table(*trials_table(results)),
        "",
    ]
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path
