"""A chaos run's history (JSON Lines, the format ``chaos/history.py``'s docstring defines) as Spark DataFrames.

Every line is an entry ``{"index", "type", "process", "f", "time", "mono", ...}``; the ledger job
reads three kinds of them (``spark_jobs`` may not import ``chaos``, so the format is read here,
with an explicit schema and never collected to the driver):

- **acknowledged sends**: ``type`` "ok", ``f`` "send", with ``topic``, ``partition``, ``offset``
  and ``value`` (and ``site`` when the workload recorded where it happened);
- **promotes**: ``process`` "failover", ``f`` "promote", ``value`` = {source, target, planned, link};
  they divide the history into eras (which site served the producers when);
- **exports**: ``process`` "failover", ``f`` "export", ``records`` = the divergence a failover exported;
- and the **final reads** (``f`` "read", ``final`` true) only for their ``site`` and ``role``:
  the site whose final read has the role "primary" is the one the history calls the primary.

A history given as several files is one history whose entries are keyed by (file, index); the
eras, the primary and the exports of each file apply to that file's entries.

**Malformed lines.** A line is malformed when it is not a JSON object, lacks a valid ``type``
(invoke, ok, fail, info), ``process``, ``f`` or a whole-number ``index``, when a field the job
reads has the wrong type, or when an acknowledged send, an export's record or a promote lacks
what the job reads from it. As :func:`chaos.history.load` does, a malformed *last* line of a file
is a torn write (the process was killed mid-line): it is skipped and counted. Any other
malformed line makes :func:`read_history` raise :class:`HistoryError` (bad input, exit status 2)
with the count per file and the first few lines (file, line number, why, the text): an audit
of a history that says something other than what it seems to would prove nothing. Blank lines
are skipped, as chaos skips them.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
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

__all__ = [
    "ENTRY_SCHEMA",
    "History",
    "HistoryError",
    "Malformed",
    "Promote",
    "history_files",
    "read_history",
]

TYPES = ("invoke", "ok", "fail", "info")
FAILOVER = "failover"
NEMESIS = "nemesis"
CORRUPT = "_corrupt"
#: Malformed lines quoted in the error (each with its line number and the first characters).
MALFORMED_SAMPLES = 5
QUOTE_CHARS = 160

#: The fields of an entry the ledger reads; any other key is ignored. ``value`` is text: a
#: send's value as it is, an object (a promote's, a lag sample's) as its JSON text.
ENTRY_SCHEMA = StructType(
    [
        StructField("index", LongType()),
        StructField("type", StringType()),
        StructField("process", StringType()),
        StructField("f", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("value", StringType()),
        StructField("site", StringType()),
        StructField("role", StringType()),
        StructField("final", BooleanType()),
        StructField(CORRUPT, StringType()),
    ]
)

RECORD_TYPE = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("value", StringType()),
    ]
)
#: An export entry's records, parsed only for export entries (reads and polls carry many).
RECORDS_SCHEMA = StructType([StructField("records", ArrayType(RECORD_TYPE)), StructField(CORRUPT, StringType())])
#: A promote entry's ``value``.
PROMOTE_SCHEMA = StructType(
    [
        StructField("source", StringType()),
        StructField("target", StringType()),
        StructField("planned", BooleanType()),
        StructField("link", StringType()),
    ]
)
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}


class HistoryError(ValueError):
    """A history that cannot be audited: no such file, no history in a directory, malformed lines.

    A ValueError: the jobs report it as bad input (exit status 2), naming ``--history``.
    """


@dataclass(frozen=True)
class Malformed:
    """One malformed line: where it is, why, and how it starts."""

    file: str
    line: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}: {self.text!r}"


@dataclass(frozen=True)
class Promote:
    """A failover's promote: after it (by index, in its file) the target serves the producers."""

    file: str
    index: int
    source: str | None
    target: str | None
    planned: bool


@dataclass
class History:
    """The parsed history: DataFrames of its entries, and the few facts small enough to hold.

    ``entries``: one row per well-formed entry (``file``, the :data:`ENTRY_SCHEMA` fields, and
    ``line``, the text of an export entry). ``promotes`` (in file and index order),
    ``primaries`` (file -> the site of its last final read with role "primary", None when it has
    none), ``topics`` (every topic a write was acknowledged to) and ``exported`` (how many
    records the exports hold) are collected: a history has a handful. :meth:`release` drops
    the persisted entries.
    """

    files: list[str]
    entries: DataFrame
    lines: int
    promotes: list[Promote] = field(default_factory=list)
    primaries: dict[str, str | None] = field(default_factory=dict)
    torn: list[Malformed] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    exported: int = 0
    cached: list[DataFrame] = field(default_factory=list)

    @property
    def ok_sends(self) -> DataFrame:
        """Every acknowledged send: file, index, process, topic, partition, offset, value, site."""
        return self.entries.where(_is_ok_send()).select(
            "file", "index", "process", "topic", "partition", "offset", "value", "site"
        )

    def exports(self) -> DataFrame:
        """Every exported record: file, index (of the export entry), topic, partition, offset, value."""
        exports = self.entries.where(_is_export())
        records = F.from_json(exports["line"], RECORDS_SCHEMA, _JSON_OPTIONS)["records"]
        return exports.select("file", "index", F.explode(F.coalesce(records, F.array())).alias("r")).select(
            "file", "index", "r.topic", "r.partition", "r.offset", "r.value"
        )

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def history_files(paths: Sequence[str]) -> list[str]:
    """The history files ``--history`` names: each a file, or a directory holding ``*.jsonl``
    (or, a ``strait chaos run --dir`` directory, ``*/history.jsonl``). Raises HistoryError."""
    if not paths:
        raise HistoryError("--history: give at least one history file (JSON Lines) or run directory")
    files: list[str] = []
    for raw in paths:
        path = os.path.abspath(raw)
        if os.path.isdir(path):
            found = sorted(glob.glob(os.path.join(glob.escape(path), "*.jsonl")))
            found = found or sorted(glob.glob(os.path.join(glob.escape(path), "*", "history.jsonl")))
            if not found:
                raise HistoryError(f"--history {raw}: the directory holds no *.jsonl file (nor */history.jsonl)")
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise HistoryError(f"--history {raw}: no such file or directory")
    return list(dict.fromkeys(files))


def read_history(spark: SparkSession, files: Sequence[str]) -> History:
    """Parse ``files`` (local paths, or any path Spark reads) into a :class:`History`.

    Raises HistoryError listing the malformed lines (see the module docstring); a torn last
    line is skipped and listed in ``History.torn``. Two passes over the history: the parsed
    entries are persisted (without their text, but for exports' and malformed lines') by the first.
    """
    numbered = _numbered_lines(spark, files)
    blank = F.trim(F.col("line")) == ""
    parsed = numbered.withColumn("blank", blank).withColumn("e", F.from_json("line", ENTRY_SCHEMA, _JSON_OPTIONS))
    parsed = parsed.select("file", "line", "block", "rank", "blank", "e.*")
    parsed = parsed.withColumn("problem", F.when(~F.col("blank"), _problem()))
    rows = parsed.select(
        *(c for c in parsed.columns if c not in ("line", CORRUPT)),
        F.when(_is_export() | F.col("problem").isNotNull(), F.col("line")).alias("line"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    key = F.struct("block", "rank")
    ok_send = F.col("problem").isNull() & ~F.col("blank") & _is_ok_send()
    per_file = {
        r["file"]: r
        for r in rows.groupBy("file")
        .agg(
            F.count(F.lit(1)).alias("lines"),
            F.max(key).alias("last"),
            F.count("problem").alias("bad"),
            F.max(F.when(F.col("problem").isNotNull(), key)).alias("last_bad"),
            F.collect_set(F.when(ok_send, F.col("topic"))).alias("topics"),
        )
        .collect()
    }
    torn_files = {f for f, r in per_file.items() if r["last_bad"] is not None and r["last_bad"] == r["last"]}
    broken = {f: r["bad"] - (f in torn_files) for f, r in per_file.items() if r["bad"] - (f in torn_files)}
    if broken:
        flagged = rows.where(F.col("problem").isNotNull())
        samples = flagged.orderBy("file", "block", "rank").limit(MALFORMED_SAMPLES).collect()
        listed = "; ".join(str(_malformed(numbered, row)) for row in samples)
        counted = ", ".join(f"{file}: {n}" for file, n in sorted(broken.items()))
        total = sum(broken.values())
        rows.unpersist()
        raise HistoryError(
            f"--history: {total} malformed line{'s' if total != 1 else ''} ({counted}), "
            f"not a history entry the ledger can read; first: {listed}"
        )
    torn = []
    if torn_files:
        last_lines = rows.where(F.col("problem").isNotNull() & F.col("file").isin(*torn_files)).collect()
        for row in last_lines:
            if (row["block"], row["rank"]) == tuple(per_file[row["file"]]["last"]):
                torn.append(_malformed(numbered, row, line=per_file[row["file"]]["lines"]))
    entries = rows.where(F.col("problem").isNull() & ~F.col("blank")).drop("problem", "blank", "block", "rank")
    history = History(
        list(files),
        entries,
        sum(r["lines"] for r in per_file.values()),
        torn=sorted(torn, key=lambda t: t.file),
        topics=sorted({t for r in per_file.values() for t in r["topics"]}),
        cached=[rows],
    )
    _facts(history)
    return history


def _numbered_lines(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """Every line of ``files``: file (as given), line, and (block, rank), its place in the file:
    the byte offset of the split holding it, then its rank within the split (Spark numbers
    rows per task in order). One scan per file, so that ``file`` is the name the job was given."""
    scans = [
        spark.read.text(path).select(
            F.lit(path).alias("file"),
            F.col("value").alias("line"),
            F.col("_metadata.file_block_start").alias("block"),
            F.monotonically_increasing_id().alias("rank"),
        )
        for path in files
    ]
    return functools.reduce(DataFrame.unionAll, scans)


def _problem() -> Column:
    """Why an entry is malformed (null when it is well formed)."""
    c = F.col
    is_send = _is_ok_send()
    send_ok = c("topic").isNotNull() & c("partition").isNotNull() & c("offset").isNotNull() & c("value").isNotNull()
    is_export = _is_export()
    export = F.from_json(c("line"), RECORDS_SCHEMA, _JSON_OPTIONS)
    export_ok = export[CORRUPT].isNull() & ~F.exists(
        F.coalesce(export["records"], F.array()),
        lambda r: r["topic"].isNull() | r["partition"].isNull() | r["offset"].isNull() | r["value"].isNull(),
    )
    is_promote = (c("process") == FAILOVER) & (c("f") == "promote")
    promote_ok = c("value").startswith("{") & F.from_json(c("value"), PROMOTE_SCHEMA).isNotNull()
    nothing = c("index").isNull() & c("type").isNull() & c("process").isNull() & c("f").isNull()
    return (
        F.when(c(CORRUPT).isNotNull() & nothing, F.lit("not a JSON object"))
        .when(c(CORRUPT).isNotNull(), F.lit("a field has the wrong type"))
        .when(~F.coalesce(c("type").isin(*TYPES), F.lit(False)), F.lit("no valid 'type' (invoke, ok, fail, info)"))
        .when(c("process").isNull() | c("f").isNull(), F.lit("needs 'process' and 'f' strings"))
        .when(c("index").isNull(), F.lit("needs an 'index' number"))
        .when(is_send & ~send_ok, F.lit("an acknowledged send needs topic, partition, offset and value"))
        .when(is_export & ~export_ok, F.lit("an export's records need topic, partition, offset and value"))
        .when(is_promote & ~F.coalesce(promote_ok, F.lit(False)), F.lit("a promote's 'value' must be an object"))
    )


def _malformed(numbered: DataFrame, row: Any, line: int | None = None) -> Malformed:
    """``row`` (a flagged line) with its line number (``line``, else one more than the lines
    of its file before it)."""
    if line is None:
        block, rank = row["block"], row["rank"]
        line = (
            1
            + numbered.where(
                (F.col("file") == row["file"])
                & ((F.col("block") < block) | ((F.col("block") == block) & (F.col("rank") < rank)))
            ).count()
        )
    text = str(row["line"])
    quoted = text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "..."
    return Malformed(str(row["file"]), line, str(row["problem"]), quoted)


def _is_ok_send() -> Column:
    return (F.col("type") == "ok") & (F.col("f") == "send") & ~F.col("process").isin(NEMESIS, FAILOVER)


def _is_export() -> Column:
    return (F.col("process") == FAILOVER) & (F.col("f") == "export")


def _facts(history: History) -> None:
    """The few entries held in the driver, in one pass: promotes, final reads as primary, and
    how many records the exports hold."""
    e = history.entries
    promote = (F.col("process") == FAILOVER) & (F.col("f") == "promote")
    primary = (F.col("type") == "ok") & (F.col("f") == "read") & F.col("final") & (F.col("role") == "primary")
    value = F.from_json(F.col("value"), PROMOTE_SCHEMA)
    exported = F.size(F.coalesce(F.from_json("line", RECORDS_SCHEMA, _JSON_OPTIONS)["records"], F.array()))
    rows = (
        e.where(promote | primary | _is_export())
        .select(
            "file",
            "index",
            F.when(promote, "promote").when(primary, "primary").otherwise("export").alias("kind"),
            "site",
            value["source"].alias("source"),
            value["target"].alias("target"),
            value["planned"].alias("planned"),
            F.when(_is_export(), exported).alias("exported"),
        )
        .collect()
    )
    history.promotes = sorted(
        (
            Promote(r["file"], int(r["index"]), r["source"], r["target"], r["planned"] is True)
            for r in rows
            if r["kind"] == "promote"
        ),
        key=lambda p: (p.file, p.index),
    )
    last: dict[str, tuple[int, str | None]] = {}
    for r in rows:
        if r["kind"] == "primary" and (r["file"] not in last or r["index"] >= last[r["file"]][0]):
            last[r["file"]] = (int(r["index"]), r["site"])
    history.primaries = {f: last[f][1] if f in last else None for f in history.files}
    history.exported = sum(int(r["exported"]) for r in rows if r["kind"] == "export")
