"""A failover's divergence export, read with Spark: found, checked whole, decoded to record columns.

``strait failover reverse LINK --export DIR`` writes, per link and DR epoch (the format is
documented in ``failover/export.py``, which spark_jobs may not import; docs/failover.md)::

    DIR/<link>/epoch-<N>/divergence.jsonl   one JSON object per record
    DIR/<link>/epoch-<N>/summary.json       written last: the export is complete once it exists

A line holds ``topic``, ``partition``, ``offset``, ``timestamp`` (ms), ``timestamp_type``
(``create`` | ``log_append``), ``key``/``value`` with ``key_encoding``/``value_encoding``
(``utf8`` | ``base64``; null for a null key or value), ``headers`` (``[{"key", "value",
"encoding"}]``), ``producer_id``, ``producer_epoch``, ``sequence``, ``transactional`` and
``leader_epoch``.

What is refused (:class:`~spark_jobs.jobs._common.BadInput`, exit 2, naming ``--export`` and
the file): a directory with a ``divergence.jsonl`` and no ``summary.json`` (incomplete: the
export was interrupted), a summary that is not an export summary of format 1, a data file whose
SHA-256 differs from the summary's, a line count that differs from the summary's, and any line
that is not a whole record (not JSON, a required field missing or of the wrong type, an
unknown encoding, base64 that does not read back to itself).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ._common import BadInput

DATA_FILE = "divergence.jsonl"
SUMMARY_FILE = "summary.json"
EXPORT_FORMAT = 1
CORRUPT = "_corrupt_record"
_PARTIAL_DATA = f".{DATA_FILE}.tmp"  # what the exporter writes before it renames the file
_HASH_CHUNK = 1 << 20
_SHOWN = 3  # malformed lines quoted in the error

_HEADER_LINE = StructType(
    [StructField("key", StringType()), StructField("value", StringType()), StructField("encoding", StringType())]
)

#: The schema of one line, given explicitly (no inference: a field of the wrong type makes the
#: line malformed instead of changing the column's type).
LINE_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", LongType()),
        StructField("timestamp_type", StringType()),
        StructField("key", StringType()),
        StructField("key_encoding", StringType()),
        StructField("value", StringType()),
        StructField("value_encoding", StringType()),
        StructField("headers", ArrayType(_HEADER_LINE)),
        StructField("producer_id", LongType()),
        StructField("producer_epoch", IntegerType()),
        StructField("sequence", IntegerType()),
        StructField("transactional", BooleanType()),
        StructField("leader_epoch", IntegerType()),
        StructField(CORRUPT, StringType()),
    ]
)

_REQUIRED = ("topic", "partition", "offset", "timestamp")


@dataclass(frozen=True)
class ExportedPartition:
    """One partition's line of an export's summary: ``[cut, end)`` of the old primary's log."""

    topic: str
    partition: int
    cut: int
    end: int
    records: int


@dataclass(frozen=True)
class Export:
    """One complete export (an epoch directory) and what its summary says."""

    directory: Path
    link: str
    epoch: int
    site: str
    records: int
    sha256: str
    partitions: tuple[ExportedPartition, ...]

    @property
    def data(self) -> Path:
        return self.directory / DATA_FILE

    def describe(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "link": self.link,
            "epoch": self.epoch,
            "site": self.site,
            "records": self.records,
        }


def find_exports(path: Path) -> list[Export]:
    """The exports in ``path``: an epoch directory, or any directory above one or more.

    Raises BadInput (naming ``--export``) for a missing path, a tree without an export, an
    incomplete export (no ``summary.json``), a summary that cannot be read or is not an export's,
    and a data file that is missing or whose SHA-256 is not the summary's.
    """
    if not path.exists():
        raise BadInput(f"--export {path}: no such directory")
    if not path.is_dir():
        raise BadInput(f"--export {path}: not a directory (give the epoch directory or one above it)")
    found = {p.parent for name in (DATA_FILE, _PARTIAL_DATA) for p in path.rglob(name)}
    if (path / SUMMARY_FILE).exists():
        found.add(path)
    if not found:
        raise BadInput(f"--export {path}: no divergence export ({DATA_FILE}) in it or below it")
    exports = [_complete_export(directory) for directory in sorted(found)]
    seen: dict[tuple[str, int], Path] = {}
    for export in exports:
        other = seen.setdefault((export.link, export.epoch), export.directory)
        if other != export.directory:
            raise BadInput(
                f"--export {path}: two exports of link {export.link} epoch {export.epoch} ({other} and "
                f"{export.directory}): give one of them"
            )
    return exports


def _complete_export(directory: Path) -> Export:
    summary_path = directory / SUMMARY_FILE
    if not summary_path.exists():
        raise BadInput(
            f"--export {directory}: incomplete export: {SUMMARY_FILE} is missing (it is written last, once "
            f"{DATA_FILE} is whole); run the `strait failover reverse` that wrote it again to finish it"
        )
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"--export {summary_path}: cannot read the export's summary: {exc}") from None
    try:
        if summary["format"] != EXPORT_FORMAT:
            raise BadInput(
                f"--export {summary_path}: export format {summary['format']!r}, this job reads format {EXPORT_FORMAT}"
            )
        export = Export(
            directory=directory,
            link=str(summary["link"]),
            epoch=int(summary["epoch"]),
            site=str(summary.get("site", "")),
            records=int(summary["records"]),
            sha256=str(summary["sha256"]),
            partitions=tuple(
                ExportedPartition(str(p["topic"]), int(p["partition"]), int(p["cut"]), int(p["end"]), int(p["records"]))
                for p in summary["partitions"]
            ),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"--export {summary_path}: not a divergence export's summary ({exc!r} is wrong)") from None
    if not export.data.is_file():
        raise BadInput(f"--export {directory}: {DATA_FILE} is missing although {SUMMARY_FILE} names it")
    digest = hashlib.sha256()
    with export.data.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != export.sha256:
        raise BadInput(
            f"--export {export.data}: its SHA-256 is {digest.hexdigest()}, {SUMMARY_FILE} says {export.sha256}: "
            "the file was changed or damaged after the export"
        )
    return export


def read_exports(spark: SparkSession, exports: list[Export]) -> DataFrame:
    """Every record of ``exports`` with the record columns of ``spark_jobs.schema`` that an
    export has (``key``, ``value`` and header values decoded to bytes; ``timestamp`` in ms as
    ``timestampMs``), plus ``export`` (the epoch directory), ``link`` and ``epoch``.

    Reads every file once to check it (Spark jobs): raises BadInput naming the file and the
    first malformed lines, or when a file holds more or fewer lines than its summary says.
    """
    frames = [_read_one(spark, e) for e in exports]
    for export, frame in zip(exports, frames, strict=True):
        _check(export, frame)
    records = frames[0]
    for frame in frames[1:]:
        records = records.unionByName(frame)
    return records.select(
        "export",
        "link",
        "epoch",
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("timestampMs"),
        F.when(F.col("timestamp_type") == "log_append", F.lit(1)).otherwise(F.lit(0)).alias("timestampType"),
        F.col("_key").alias("key"),
        F.col("_value").alias("value"),
        F.col("_headers").alias("headers"),
        F.col("producer_id").alias("producerId"),
        F.col("producer_epoch").alias("producerEpoch"),
        F.col("sequence"),
        F.col("leader_epoch").alias("leaderEpoch"),
        F.coalesce(F.col("transactional"), F.lit(False)).alias("isTransactional"),
    )


def _read_one(spark: SparkSession, export: Export) -> DataFrame:
    lines = (
        spark.read.schema(LINE_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(str(export.data))
    )
    headers = F.transform(
        F.coalesce(F.col("headers"), F.array().cast(ArrayType(_HEADER_LINE))),
        lambda h: F.struct(h["key"].alias("key"), _decoded(h["value"], h["encoding"]).alias("value")),
    )
    bad_header = F.exists(
        F.coalesce(F.col("headers"), F.array().cast(ArrayType(_HEADER_LINE))),
        lambda h: h["key"].isNull() | _undecodable(h["value"], h["encoding"]),
    )
    problem = F.when(F.col(CORRUPT).isNotNull(), F.lit("not a JSON record line"))
    for name in _REQUIRED:
        problem = problem.when(F.col(name).isNull(), F.lit(f"no {name}"))
    problem = (
        problem.when(
            ~F.col("timestamp_type").isin("create", "log_append"), F.lit("timestamp_type not create/log_append")
        )
        .when(_undecodable(F.col("key"), F.col("key_encoding")), F.lit("key not in its key_encoding"))
        .when(_undecodable(F.col("value"), F.col("value_encoding")), F.lit("value not in its value_encoding"))
        .when(bad_header, F.lit("a header without a key, or not in its encoding"))
    )
    return lines.select(
        "*",
        F.lit(str(export.directory)).alias("export"),
        F.lit(export.link).alias("link"),
        F.lit(export.epoch).alias("epoch"),
        _decoded(F.col("key"), F.col("key_encoding")).alias("_key"),
        _decoded(F.col("value"), F.col("value_encoding")).alias("_value"),
        headers.alias("_headers"),
        problem.alias("_problem"),
    )


def _decoded(text: Column, encoding: Column) -> Column:
    """The bytes an exported text stands for; null for null, and for an encoding it cannot read."""
    return F.when(encoding == "utf8", F.encode(text, "UTF-8")).when(
        encoding == "base64", F.try_to_binary(text, F.lit("base64"))
    )


def _undecodable(text: Column, encoding: Column) -> Column:
    """A present text whose encoding is unknown, or base64 that does not read back to itself
    (Spark's decoder skips characters that are not base64; strait writes canonical base64)."""
    decoded = _decoded(text, encoding)
    return text.isNotNull() & (decoded.isNull() | ((encoding == "base64") & (F.base64(decoded) != text)))


def _check(export: Export, frame: DataFrame) -> None:
    """One pass over the file: its line count and its first malformed lines."""
    counted = frame.agg(F.count(F.lit(1)).alias("lines"), F.count("_problem").alias("bad")).first()
    assert counted is not None
    if counted["bad"]:
        shown = (
            frame.where(F.col("_problem").isNotNull())
            .select("_problem", CORRUPT, "topic", "partition", "offset")
            .limit(_SHOWN)
            .collect()
        )
        examples = "; ".join(_quote(r) for r in shown)
        raise BadInput(f"--export {export.data}: {counted['bad']} malformed line(s), e.g. {examples}")
    if counted["lines"] != export.records:
        raise BadInput(
            f"--export {export.data}: holds {counted['lines']} record line(s), its {SUMMARY_FILE} says {export.records}"
        )


def _quote(row: Any) -> str:
    if row[CORRUPT] is not None:
        text = row[CORRUPT]
        return f"{row['_problem']}: {text[:120]!r}{'...' if len(text) > 120 else ''}"
    return f"{row['_problem']} ({row['topic']}-{row['partition']} offset {row['offset']})"
