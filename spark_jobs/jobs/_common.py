"""What every audit job shares: its session, its output, its summary, its progress display and
how its errors become a message and an exit status.

A job module defines a click command and calls :func:`run_job` with a function that does the
work on a :class:`Job`; ``strait audit <job>`` mounts the same command, and ``spark-submit
spark_jobs/jobs/<job>.py ...`` (or ``python -m spark_jobs.jobs.<job>``) runs its ``main()``.

Exit status: 0 clean, 1 something found (a discrepancy or an invalid row), 2 bad input (an
option, a path, a topic, the output directory), 3 the job could not run (a site unreachable,
Spark failed). Every message names the option or value at fault.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..report import render
from ..session import get_session
from ._output import DISCREPANCIES, SAMPLES, JobOutput, OutputError

EXIT_CLEAN, EXIT_FOUND, EXIT_BAD_INPUT, EXIT_FAILED = 0, 1, 2, 3

#: The columns every job's discrepancy rows start with (a job may add its own after them).
DISCREPANCY_COLUMNS = ("kind", "topic", "partition", "offset", "detail")


class BadInput(Exception):
    """Bad input the job found itself (exit 2); the message names the option and value."""


@dataclass
class Job:
    """One run of a job: where it writes, the session it uses and what the summary will say."""

    name: str
    out: JobOutput
    spark: Any  # pyspark.sql.SparkSession: typed loosely so that importing this needs no Java
    argv: list[str]
    started: float = field(default_factory=time.time)
    inputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def finish(
        self,
        discrepancies: Any,
        *,
        totals: dict[str, int],
        partitions: list[dict[str, Any]],
        invalid: dict[str, int],
    ) -> dict[str, Any]:
        """Write ``discrepancies`` (a DataFrame starting with :data:`DISCREPANCY_COLUMNS`) as
        Parquet, then the summary and the report; returns the summary.

        ``partitions``: per partition ``{"topic", "partition", "counts": {...}, "ranges": {...}}``;
        its ``by_kind`` is filled in here from the discrepancies. ``invalid``: invalid rows by error.
        """
        missing = [c for c in DISCREPANCY_COLUMNS if c not in discrepancies.columns]
        if missing:
            raise TypeError(f"{self.name}: discrepancy rows lack {missing}")
        discrepancies = discrepancies.cache()
        discrepancies.write.mode("overwrite").parquet(self.out.path(DISCREPANCIES))
        by_part: dict[tuple[str, int], dict[str, int]] = {}
        by_kind: dict[str, int] = {}
        for row in discrepancies.groupBy("topic", "partition", "kind").count().collect():
            by_part.setdefault((row["topic"], row["partition"]), {})[row["kind"]] = row["count"]
            by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + row["count"]
        samples = [
            {c: _plain(r[c]) for c in discrepancies.columns}
            for r in discrepancies.orderBy("topic", "partition", "offset").limit(SAMPLES).collect()
        ]
        discrepancies.unpersist()
        known = {(p["topic"], p["partition"]) for p in partitions}
        partitions = [*partitions, *({"topic": t, "partition": p} for t, p in sorted(set(by_part) - known))]
        for p in partitions:
            p["by_kind"] = by_part.get((p["topic"], p["partition"]), {})
        partitions.sort(key=lambda p: (p["topic"], p["partition"]))
        total = sum(by_kind.values())
        invalid_rows = sum(invalid.values())
        summary: dict[str, Any] = {
            "job": self.name,
            "verdict": "found" if total or invalid_rows else "clean",
            "command": shlex.join(self.argv),
            "started": datetime.fromtimestamp(self.started, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "seconds": round(time.time() - self.started, 3),
            "spark": {"master": self.spark.sparkContext.master, "version": self.spark.version},
            "inputs": self.inputs,
            "totals": totals,
            "discrepancies": {"total": total, "by_kind": dict(sorted(by_kind.items()))},
            "partitions": partitions,
            "samples": samples,
            "invalid": {"rows": invalid_rows, "by_error": invalid},
            "notes": self.notes,
        }
        self.out.finish(summary, render=_render)
        return summary


def _render(out: Path) -> None:
    render(out)


def _plain(value: Any) -> Any:
    """A discrepancy cell as JSON can hold it (bytes shown as text where they are text)."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + bytes(value).hex()
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def run_job(
    name: str,
    out: Path,
    work: Callable[[Job], dict[str, Any]],
    *,
    overwrite: bool = False,
    master: str | None = None,
    argv: list[str] | None = None,
) -> None:
    """Run ``work`` (which returns :meth:`Job.finish`'s summary) and exit with the verdict's status."""
    argv = list(argv if argv is not None else sys.argv)
    try:
        output = JobOutput(out, name, overwrite=overwrite)
    except OutputError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    try:
        spark = get_session(master=master, app_name=f"strait-audit-{name}")
        with progress(spark, name):
            summary = work(Job(name, output, spark, argv))
    except BaseException as exc:
        output.abandon()
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        message, status = explain(exc)
        _fail(f"{name}: {message}", status)
    found = summary["discrepancies"]["total"]
    invalid = summary["invalid"]["rows"]
    click.echo(
        f"{name}: {summary['verdict']}: {found} discrepanc{'y' if found == 1 else 'ies'}, "
        f"{invalid} invalid row(s); {out / 'summary.json'}, {out / 'report.html'}"
    )
    sys.exit(EXIT_FOUND if summary["verdict"] == "found" else EXIT_CLEAN)


def _fail(message: str, status: int) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(status)


_PY_ERROR = re.compile(r"^(?:\w+\.)*(\w+(?:Error|Exception|BadInput)): (.+)$", re.MULTILINE)
_BAD_INPUT_ERRORS = frozenset({"ValueError", "BadInput", "FileNotFoundError", "OutputError", "TopologyError"})


def explain(exc: BaseException) -> tuple[str, int]:
    """A one-line message and exit status for ``exc``, also when Spark wrapped a Python error
    raised in a data source's planning or in an executor (its traceback is in the message)."""
    if isinstance(exc, (BadInput, ValueError, FileNotFoundError, OutputError)):
        return str(exc), EXIT_BAD_INPUT
    text = str(exc)
    found = _PY_ERROR.findall(text)
    if found:
        kind, message = found[-1]
        return message.strip(), EXIT_BAD_INPUT if kind in _BAD_INPUT_ERRORS else EXIT_FAILED
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first, EXIT_FAILED


@contextlib.contextmanager
def progress(spark: Any, name: str) -> Iterator[None]:
    """A rich progress bar of the running Spark stages' tasks (on a terminal; silent otherwise)."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        task = bar.add_task(f"{name}: starting", total=None)

        def poll() -> None:
            while not stop.wait(0.25):
                stages = [s for s in (tracker.getStageInfo(i) for i in tracker.getActiveStageIds()) if s]
                if stages:
                    done = sum(s.numCompletedTasks for s in stages)
                    total = sum(s.numTasks for s in stages)
                    ids = ", ".join(str(s.stageId) for s in stages)
                    bar.update(task, description=f"{name}: stage {ids}", completed=done, total=total)

        thread = threading.Thread(target=poll, name="audit-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2)
