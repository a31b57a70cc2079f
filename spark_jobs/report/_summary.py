"""``DIR/summary.json`` (format 1) as the report reads it: typed, every field checked, the verdict too.

The format is the jobs' shared contract (docs: notes/spark-spec.md, "Output directory")::

    {"format": 1, "job": "reconcile", "verdict": "clean" | "found",
     "command": "strait audit reconcile ...", "started": "2026-11-26T03:40:00Z", "seconds": 12.3,
     "spark": {"master": "local[*]", "version": "4.3.0"},
     "inputs": {"source": "...", ...}, "totals": {"source_records": 100000, ...},
     "discrepancies": {"total": 10, "by_kind": {"missing": 10}},
     "partitions": [{"topic": "orders", "partition": 0, "counts": {...}, "by_kind": {...},
                     "ranges": {"source": [0, 50000], "target": [0, 49990]}}],
     "samples": [{"kind": "missing", "topic": "orders", "partition": 0, "offset": 49990,
                  "detail": "...", ...job-specific columns...}],
     "invalid": {"rows": 0, "by_error": {}},
     "notes": ["..."]}

Required: ``format`` (1), ``job``, ``verdict`` and ``discrepancies.total``; every other field
may be missing (or null) and the page says so. A field that is present must have its type: a
count is a non-negative integer, a range is ``[start, end]`` with start <= end (or null: not
known). The verdict must follow from the counts (``found`` iff discrepancies or invalid rows),
so a page can never show "clean" over a list of discrepancies. Sample values are anything the
job wrote (keys, values, details: arbitrary text); they are kept as they are and escaped by the page.
"""

from __future__ import annotations

import errno
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "Partition",
    "ReportError",
    "Sample",
    "Summary",
    "SummaryFormatError",
    "SummaryNotFoundError",
    "load_summary",
    "parse_summary",
]

FORMAT = 1
VERDICTS = ("clean", "found")
SAMPLE_COLUMNS = ("kind", "topic", "partition", "offset", "detail")


class ReportError(Exception):
    """A summary a report cannot be made from; the message names the file and the field."""


class SummaryNotFoundError(ReportError, FileNotFoundError):
    """``summary.json`` does not exist: the job did not finish, or ``DIR`` is not a job's output."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.ENOENT, "no summary.json", str(path))
        self.path = path

    def __str__(self) -> str:
        return (
            f"{self.path} does not exist: not a finished job's output directory "
            "(a job writes summary.json last, so a directory without it holds no result)"
        )


class SummaryFormatError(ReportError, ValueError):
    """``summary.json`` is not JSON, or ``field`` (a path such as ``partitions[3].ranges.source``) is wrong."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        super().__init__(f"{path}: {field}: {problem}")
        self.path = path
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Partition:
    """One topic-partition's line of the summary; ``ranges`` maps a side to [log start, log end) or None."""

    topic: str
    partition: int
    counts: Mapping[str, float]
    by_kind: Mapping[str, int]
    ranges: Mapping[str, tuple[int, int] | None]

    @property
    def discrepancies(self) -> int:
        return sum(self.by_kind.values())


@dataclass(frozen=True, slots=True)
class Sample:
    """One discrepancy row; ``extra`` holds the job-specific columns, in the job's order."""

    kind: str
    topic: str
    partition: int
    offset: int | None
    detail: object
    extra: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Summary:
    """A whole summary; ``samples`` is None when the job records none (not the same as an empty list)."""

    job: str
    verdict: str
    command: str | None
    started: str | None
    seconds: float | None
    spark: Mapping[str, str]
    inputs: Mapping[str, object]
    totals: Mapping[str, float]
    discrepancies: int
    by_kind: Mapping[str, int]
    partitions: tuple[Partition, ...]
    samples: tuple[Sample, ...] | None
    invalid_rows: int
    by_error: Mapping[str, int]
    notes: tuple[str, ...]


def load_summary(path: Path) -> Summary:
    """Read and check ``path``; raises :class:`SummaryNotFoundError` or :class:`SummaryFormatError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SummaryNotFoundError(path) from None
    except UnicodeDecodeError as exc:
        raise SummaryFormatError(str(path), "(file)", f"not UTF-8 text: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SummaryFormatError(
            str(path), "(file)", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return parse_summary(data, source=str(path))


def parse_summary(data: object, *, source: str = "summary.json") -> Summary:
    """Check a decoded summary; ``source`` names it in errors. Raises :class:`SummaryFormatError`."""
    check = _Checker(source)
    top = check.obj(data, "(top level)")
    version = check.natural(top.get("format"), "format")
    if version != FORMAT:
        raise SummaryFormatError(source, "format", f"is {version}; this report reads format {FORMAT}")
    verdict = check.text(top.get("verdict"), "verdict")
    if verdict not in VERDICTS:
        raise SummaryFormatError(source, "verdict", f"is {verdict!r}, not one of {', '.join(VERDICTS)}")
    found = check.obj(top.get("discrepancies"), "discrepancies")
    total = check.natural(found.get("total"), "discrepancies.total")
    invalid = check.obj(top.get("invalid") or {}, "invalid")
    invalid_rows = check.natural(invalid.get("rows", 0), "invalid.rows")
    if (verdict == "found") != (total > 0 or invalid_rows > 0):
        raise SummaryFormatError(
            source,
            "verdict",
            f"is {verdict!r} but discrepancies.total is {total} and invalid.rows is {invalid_rows}"
            " (found if and only if either is above 0)",
        )
    spark = check.obj(top.get("spark") or {}, "spark")
    seconds = top.get("seconds")
    samples = top.get("samples")
    return Summary(
        job=check.text(top.get("job"), "job"),
        verdict=verdict,
        command=check.optional_text(top.get("command"), "command"),
        started=check.optional_text(top.get("started"), "started"),
        seconds=None if seconds is None else check.number(seconds, "seconds"),
        spark={key: check.text(value, f"spark.{key}") for key, value in spark.items() if value is not None},
        inputs=check.obj(top.get("inputs") or {}, "inputs"),
        totals={
            key: check.number(value, f"totals.{key}")
            for key, value in check.obj(top.get("totals") or {}, "totals").items()
        },
        discrepancies=total,
        by_kind=check.counts(found.get("by_kind"), "discrepancies.by_kind"),
        partitions=tuple(
            _partition(check, item, f"partitions[{n}]")
            for n, item in enumerate(check.array(top.get("partitions") or [], "partitions"))
        ),
        samples=None
        if samples is None
        else tuple(_sample(check, item, f"samples[{n}]") for n, item in enumerate(check.array(samples, "samples"))),
        invalid_rows=invalid_rows,
        by_error=check.counts(invalid.get("by_error"), "invalid.by_error"),
        notes=tuple(
            check.text(note, f"notes[{n}]") for n, note in enumerate(check.array(top.get("notes") or [], "notes"))
        ),
    )


def _partition(check: _Checker, data: object, where: str) -> Partition:
    item = check.obj(data, where)
    counts = check.obj(item.get("counts") or {}, f"{where}.counts")
    ranges = check.obj(item.get("ranges") or {}, f"{where}.ranges")
    return Partition(
        topic=check.text(item.get("topic"), f"{where}.topic"),
        partition=check.natural(item.get("partition"), f"{where}.partition"),
        counts={key: check.number(value, f"{where}.counts.{key}") for key, value in counts.items()},
        by_kind=check.counts(item.get("by_kind"), f"{where}.by_kind"),
        ranges={side: check.log_range(value, f"{where}.ranges.{side}") for side, value in ranges.items()},
    )


def _sample(check: _Checker, data: object, where: str) -> Sample:
    item = check.obj(data, where)
    offset = item.get("offset")
    return Sample(
        kind=check.text(item.get("kind"), f"{where}.kind"),
        topic=check.text(item.get("topic"), f"{where}.topic"),
        partition=check.natural(item.get("partition"), f"{where}.partition"),
        offset=None if offset is None else check.natural(offset, f"{where}.offset"),
        detail=item.get("detail"),
        extra={key: value for key, value in item.items() if key not in SAMPLE_COLUMNS},
    )


class _Checker:
    """Type checks that raise :class:`SummaryFormatError` naming the file and the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, value: object, wanted: str) -> SummaryFormatError:
        shown = "missing" if value is None else f"{json.dumps(value, default=repr)[:80]} ({type(value).__name__})"
        return SummaryFormatError(self.source, field, f"must be {wanted}, is {shown}")

    def obj(self, value: object, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field, value, "a JSON object")
        return value

    def array(self, value: object, field: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(field, value, "a JSON array")
        return value

    def text(self, value: object, field: str) -> str:
        if not isinstance(value, str):
            raise self.fail(field, value, "a string")
        return value

    def optional_text(self, value: object, field: str) -> str | None:
        return None if value is None else self.text(value, field)

    def natural(self, value: object, field: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(field, value, "a non-negative integer")
        return value

    def number(self, value: object, field: str) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise self.fail(field, value, "a number")
        return value

    def counts(self, value: object, field: str) -> dict[str, int]:
        return {key: self.natural(count, f"{field}.{key}") for key, count in self.obj(value or {}, field).items()}

    def log_range(self, value: object, field: str) -> tuple[int, int] | None:
        if value is None:
            return None
        pair = self.array(value, field)
        if len(pair) != 2:
            raise self.fail(field, value, "[log start, log end] or null")
        start, end = self.natural(pair[0], f"{field}[0]"), self.natural(pair[1], f"{field}[1]")
        if start > end:
            raise SummaryFormatError(self.source, field, f"starts at {start}, after its end {end}")
        return start, end
