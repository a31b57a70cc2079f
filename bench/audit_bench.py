"""Audit benchmark: the reconcile job (from segments, from live sites) vs a consumer loop, on two mirrored sites.

Run from the repository root::

    .venv/bin/python -m bench.audit_bench --out bench/results     # 10,000,000 records (~1.4 GB), ~10 min
    .venv/bin/python -m bench.audit_bench --quick                 # smoke test, 200,000 records
    .venv/bin/python -m bench.audit_bench --quick --paths loop,segments   # only those paths

On one local appliance (``strait up --base-port 0 --nodes N``: sites east and west, the
offset-preserving mirror east -> west) a topic of ``--records`` records is produced to east and
mirrored whole to west (and, unless ``--small-fraction 0``, a second topic with that fraction
of the records, for the memory goal). Then, ``--repeats`` times in a rotating order, each path
reconciles the two sites and is checked:

1. **reconcile from segments**: ``python -m spark_jobs.jobs.reconcile`` with both sides given as
   the nodes' directories (``strait-segments``; batches identical on both sides are matched by
   digest, the rest record by record);
2. **reconcile from live sites**: the same job with both sides given as bootstrap servers
   (``strait-kafka``);
3. **reconcile from segments, every record**: path 1 with ``--by-record`` (no batch pass: every
   record decoded and compared; what paths 1 and 2 fall back to where the sites' batches differ);
4. **consumer loop**: ``bench/_audit_loop.py``, one Python process with a confluent-kafka consumer
   per site comparing both partition by partition, the alternative a user would write.

Each path is a fresh process whose whole session is sampled (``bench/_audit_measure.py``):
records/s over its wall time, peak RSS of the driver, the JVM and the Python workers, CPU.
A run that does not find exactly the produced records, all matching, stops the benchmark.

Goal (the audit issue): the segment path >= 3x the loop's records/s on the same 2 cores, and
memory bounded whatever the topic's size.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from node.proc import ProcessError

from ._audit_data import fill, wait_mirrored
from ._audit_measure import Measured, measure
from ._audit_report import (
    CHECKED_COUNTS,
    FULL_RECORDS,
    FULL_SIZE,
    LIVE,
    LOOP,
    PATHS,
    RECORDS,
    SEGMENTS,
    SMALL_SIZE,
    Results,
    Settings,
    Trial,
    machine,
    print_tables,
    write_report,
)
from ._cli import fill_defaults, guarded, scratch_dir, stepper
from ._failover_appliance import LINK, Appliance, appliance, strait_version
from ._procs import BenchError
from ._report import REPO_ROOT
from ._site import Case, create_topic

_JAVA_OOM = re.compile(r"java\.lang\.OutOfMemoryError: [^\n]*")
TOPIC = "audit"
SMALL_TOPIC = "audit-small"
FULL = {"records": FULL_RECORDS, "nodes": 3, "timeout": 1800.0}
QUICK = {"records": 200_000, "nodes": 1, "timeout": 600.0}
CLIENT_ID = "strait-audit-bench"
Step = Callable[[str], None]


# -- the paths -----------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    """The children import this checkout's packages (Spark's Python workers too), whatever the cwd."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(REPO_ROOT) if not path else f"{REPO_ROOT}{os.pathsep}{path}"}


def node_dirs(app: Appliance, site: str) -> str:
    """A site's node directories, comma-separated (what ``--source``/``--target`` take as segment paths)."""
    found = sorted(p for p in (app.directory / site).glob("node-*") if p.is_dir())
    if not found:
        raise BenchError(f"no node directory under {app.directory / site}")
    return ",".join(str(p) for p in found)


def _discrepancy_text(counts: dict[str, int], records: int) -> str | None:
    """Why a run's counts are not a clean reconcile of ``records`` records, or None when they are."""
    expected = {k: records for k in ("source_records", "target_records", "compared", "matched")}
    expected |= {"discrepancies": 0, "invalid": 0}
    wrong = {k: counts.get(k) for k, v in expected.items() if counts.get(k) != v}
    return None if not wrong else f"expected {expected}, got {wrong} (all counts: {counts})"


_TAGS = {SEGMENTS: "segments", LIVE: "live", RECORDS: "records"}
#: ``--paths`` names: each path by its short name.
PATH_NAMES = {"loop": LOOP, **{tag: path for path, tag in _TAGS.items()}}


def reconcile_args(path: str, source: str, target: str, topic: str, out: Path) -> list[str]:
    """The reconcile job's arguments for ``path`` (``source``/``target``: bootstrap servers for the
    live path, the nodes' directories otherwise)."""
    args = ["--source", source, "--target", target, "--topics", topic, "--link", LINK, "--out", str(out)]
    return [*args, "--by-record"] if path == RECORDS else args


def reconcile_trial(
    app: Appliance, path: str, size: str, topic: str, records: int, repeat: int, workdir: Path, timeout: float
) -> Trial:
    """One reconcile job run, from segments or from the live sites; its ``error`` says why it does not
    count (it failed, or is not a clean reconcile of every record)."""
    tag = f"{size}-{_TAGS[path]}-{repeat}"
    out = workdir / f"reconcile-{tag}"
    if path == LIVE:
        source, target = app.bootstrap("east"), app.bootstrap("west")
    else:
        source, target = node_dirs(app, "east"), node_dirs(app, "west")
    argv = [sys.executable, "-m", "spark_jobs.jobs.reconcile", *reconcile_args(path, source, target, topic, out)]
    log = workdir / f"reconcile-{tag}.log"
    measured = measure(argv, log, timeout=timeout, name=f"reconcile ({tag})", cwd=REPO_ROOT, env=_child_env())
    summary_path = out / "summary.json"
    if measured.timed_out or measured.returncode != 0 or not summary_path.exists():
        return Trial(path, size, topic, records, repeat, measured, 0.0, {}, error=failure(measured, log))
    summary = json.loads(summary_path.read_text())
    totals = summary["totals"]
    counts = {k: int(totals[k]) for k in ("source_records", "target_records", "compared", "matched")}
    counts |= {"discrepancies": int(summary["discrepancies"]["total"]), "invalid": int(summary["invalid"]["rows"])}
    counts |= {k: int(totals[k]) for k in ("behind", "ahead", "not_compared")}
    problem = _discrepancy_text(counts, records)
    if problem is None and (summary["verdict"] != "clean" or counts["behind"] or counts["ahead"]):
        problem = f"verdict {summary['verdict']}, behind {counts['behind']}, ahead {counts['ahead']}"
    spark = {"master": str(summary["spark"]["master"]), "version": str(summary["spark"]["version"])}
    error = None if problem is None else f"not a clean reconcile of {records:,} records: {problem}"
    if error is None:
        shutil.rmtree(out, ignore_errors=True)
    return Trial(path, size, topic, records, repeat, measured, float(summary["seconds"]), counts, spark, error)


def loop_trial(
    app: Appliance, size: str, topic: str, records: int, repeat: int, workdir: Path, timeout: float
) -> Trial:
    """One consumer-loop run; its ``error`` says why it does not count (it failed, or did not compare
    and match every record)."""
    tag = f"{size}-loop-{repeat}"
    result = workdir / f"{tag}.json"
    argv = [sys.executable, "-m", "bench._audit_loop", "--source", app.bootstrap("east")]
    argv += ["--target", app.bootstrap("west"), "--topic", topic, "--out", str(result)]
    log = workdir / f"{tag}.log"
    measured = measure(argv, log, timeout=timeout, name=f"consumer loop ({tag})", cwd=REPO_ROOT, env=_child_env())
    if measured.timed_out or measured.returncode not in (0, 1) or not result.exists():
        return Trial(LOOP, size, topic, records, repeat, measured, 0.0, {}, error=failure(measured, log))
    answer = json.loads(result.read_text())
    t = answer["totals"]
    counts = {k: int(t[k]) for k in ("source_records", "target_records", "compared", "matched")}
    counts |= {"discrepancies": int(t["different"]) + int(t["missing"]) + int(t["extra"]), "invalid": 0}
    assert set(CHECKED_COUNTS) <= set(counts)
    problem = _discrepancy_text(counts, records)
    error = None if problem is None else f"did not compare and match every record: {problem}"
    return Trial(LOOP, size, topic, records, repeat, measured, float(answer["seconds"]), counts, error=error)


def failure(measured: Measured, log: Path) -> str:
    """Why a path's process failed, in one line: how it ended, its last ``error:`` line, a Java
    OutOfMemoryError if its log shows one, and where its whole log is kept (copied next to the
    scratch dir, which is removed at the end)."""
    how = f"stopped after {measured.seconds:.0f} s (--timeout)" if measured.timed_out else f"exit {measured.returncode}"
    kept = log.parent.parent / f"{log.parent.name}-{log.name}"
    try:
        text = log.read_text(errors="replace")
        shutil.copyfile(log, kept)
    except OSError as exc:
        return f"{how}; its log {log} cannot be read: {exc}"
    errors = [line.strip() for line in text.splitlines() if line.startswith("error:")]
    oom = next((m.group(0) for m in _JAVA_OOM.finditer(text)), None)
    parts = [how, *(errors[-1:]), *([f"the log shows {oom}"] if oom else []), f"log: {kept}"]
    return "; ".join(parts)


# -- the run --------------------------------------------------------------------------------------


def topics_of(settings: Settings) -> list[tuple[str, str, int]]:
    """(size, topic, records) of every topic the run makes, the small one first."""
    small = settings.small_records
    return ([(SMALL_SIZE, SMALL_TOPIC, small)] if small > 0 else []) + [(FULL_SIZE, TOPIC, settings.records)]


def order(repeat: int, paths: tuple[str, ...] = PATHS) -> list[str]:
    """The paths in the order of run ``repeat`` (rotating, so that none is always first)."""
    k = repeat % len(paths)
    return list(paths[k:] + paths[:k])


def measure_paths(settings: Settings, app: Appliance, workdir: Path, results: Results, step: Step) -> None:
    for size, topic, records in topics_of(settings):
        for r in range(settings.repeats):
            for path in order(r, settings.paths):
                step(f"{size} ({records:,} records), run {r + 1}/{settings.repeats}: {path}")
                if path == LOOP:
                    trial = loop_trial(app, size, topic, records, r, workdir, settings.timeout_s)
                else:
                    trial = reconcile_trial(app, path, size, topic, records, r, workdir, settings.timeout_s)
                results.trials.append(trial)
                m = trial.measured
                done = f"{trial.records_per_s:,.0f} records/s" if trial.ok else f"FAILED ({trial.error})"
                step(
                    f"  {m.seconds:.1f} s, {done}, peak RSS {m.peak_rss_mib:,.0f} MiB, {m.cpu_s / m.seconds:.2f} cores"
                )


def run(settings: Settings, step: Step) -> tuple[Results, dict[str, Any], float]:
    """Fill, mirror and measure every path on one appliance; returns the results, the machine and the
    seconds taken. A path run that fails or does not check out is recorded as failed and the others
    go on; ``results.failure`` names them, or what stopped the runs (the appliance, the fill)."""
    t0 = time.perf_counter()
    results = Results(loadavg_start=os.getloadavg())
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(settings.base_dir, "strait-audit-bench-"))
        step(f"starting a local appliance (strait up, {settings.nodes} node(s) per site)")
        app = stack.enter_context(appliance(workdir / "appliance", settings.nodes, settings.timeout_s))
        info = machine(workdir, strait_version())
        case = Case(
            TOPIC,
            TOPIC,
            settings.replication,
            "all",
            idempotent=True,
            goal=False,
            topic_config=(("min.insync.replicas", str(settings.min_insync)),),
        )
        try:
            for _, topic, records in topics_of(settings):
                create_topic(
                    app.bootstrap("east"), topic, settings.partitions, case, settings.timeout_s, client_id=CLIENT_ID
                )
                step(f"producing {records:,} records to {topic} on east")
                results.fills.append(
                    fill(
                        app.bootstrap("east"),
                        topic,
                        records,
                        settings.partitions,
                        settings.value_bytes,
                        settings.timeout_s,
                    )
                )
            step("waiting until west holds every record (watermarks equal)")
            acked = time.perf_counter()
            bootstraps = {site: app.bootstrap(site) for site in ("east", "west")}
            for _, topic, records in topics_of(settings):
                wait_mirrored(bootstraps, topic, settings.partitions, records, settings.timeout_s)
            results.mirrored_s = time.perf_counter() - acked
            measure_paths(settings, app, workdir, results, step)
            failed = [t for t in results.trials if not t.ok]
            if failed:
                results.failure = f"{len(failed)} run(s) failed: " + "; ".join(
                    f"{t.path} ({t.size}, run {t.repeat + 1}): {t.error}" for t in failed
                )
        except (BenchError, ProcessError, KafkaException) as exc:
            results.failure = f"{type(exc).__name__}: {exc}"
            step(f"stopped: {results.failure}")
        step("stopping the appliance")
    results.loadavg_end = os.getloadavg()
    return results, info, time.perf_counter() - t0


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.audit_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, help="records of the topic (default 10,000,000; --quick 200,000)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the topic (default 6)")
    p.add_argument("--value-bytes", type=int, default=100, help="bytes of each value (default 100)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each path, median and best reported (default 1)")
    p.add_argument("--nodes", type=int, help="strait nodes per site (default 3; --quick 1)")
    p.add_argument(
        "--small-fraction",
        type=float,
        default=0.1,
        help="a second topic with this fraction of the records, measured too, for the memory goal (0: none; 0.1)",
    )
    p.add_argument("--timeout", type=float, help="deadline in s of each start, fill, copy and path (1800; --quick 600)")
    p.add_argument("--out", type=Path, help="write audit-<date>.md and .json here (e.g. bench/results)")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="the appliance goes under this")
    p.add_argument("--note", help="a line for the report, e.g. what else was running on the machine")
    p.add_argument("--quick", action="store_true", help="200,000 records, 1 node per site: a smoke test")
    p.add_argument(
        "--paths",
        default=",".join(PATH_NAMES),
        help=f"paths to measure, comma-separated, from {', '.join(PATH_NAMES)} (default: all; ratios need loop)",
    )
    args = p.parse_args(argv)
    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    unknown = [n for n in names if n not in PATH_NAMES]
    if unknown or not names:
        bad = ", ".join(map(repr, unknown)) or "no path"
        p.error(f"--paths {args.paths!r}: {bad}; choose from {', '.join(PATH_NAMES)}")
    fill_defaults(args, QUICK if args.quick else FULL)
    if min(args.records, args.partitions, args.repeats) < 1 or not 1 <= args.nodes <= 9:
        p.error("--records, --partitions and --repeats must be positive, --nodes from 1 to 9")
    if args.value_bytes < 8 or args.timeout <= 0 or not 0 <= args.small_fraction < 1:
        p.error("--value-bytes must be at least 8, --timeout positive, --small-fraction in [0, 1)")
    return Settings(
        records=args.records,
        partitions=args.partitions,
        value_bytes=args.value_bytes,
        repeats=args.repeats,
        nodes=args.nodes,
        small_fraction=args.small_fraction,
        timeout_s=args.timeout,
        out=args.out,
        base_dir=args.dir,
        note=args.note,
        quick=args.quick,
        argv=tuple(sys.argv[1:] if argv is None else argv),
        paths=tuple(path for path in PATHS if path in {PATH_NAMES[n] for n in names}),
    )


def measure_and_report(settings: Settings, step: Step) -> int:
    """Every run (:func:`run`), then the tables and, with ``--out``, the report; 1 if a run failed or the runs
    stopped early."""
    started = datetime.datetime.now().astimezone()
    results, info, elapsed = run(settings, step)
    print_tables(results)
    if settings.out is not None:
        md_path, json_path = write_report(settings, results, info, started, elapsed, topics_of(settings))
        print(f"\nwrote {md_path} and {json_path}")
    return 1 if results.failure else 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    step = stepper(time.perf_counter())
    return guarded(lambda: measure_and_report(settings, step), started="process")


if __name__ == "__main__":
    sys.exit(main())
