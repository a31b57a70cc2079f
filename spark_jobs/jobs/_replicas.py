"""Do a partition's replicas agree? Its copies across the nodes' log dirs, offset by offset, as DataFrames.

A *copy* is one partition directory (``<topic>-<partition>/``) in one node's log dir; the nodes'
log dirs are read with ``strait-segments`` (``copies=all``, control records included: markers are
replicated data too), and each row is a record of one copy, identified by its partition dir.
Records are compared by a content hash (xxhash64 of key, value, headers, timestamp and its type,
producer id and epoch, sequence, and the transactional and control flags) and by leader epoch:
a follower appends the leader's batches unchanged, so every copy of a committed offset has the
same of both.

**The high watermark.** Each log dir's ``replication-offset-checkpoint`` holds its node's high
watermark (HW) for each partition it has. The partition's HW here is the **maximum** over its
copies. The HW only advances once every in-sync replica holds the records below it (and acks=all
producers are answered only then), so any copy's checkpointed HW is an offset below which the
partition was committed, and the largest one is the most the nodes' files prove. The minimum
would hide exactly what this job looks for: a copy that lost or changed committed records drags
its own HW down (a restarted follower reloads it, a truncated one never had it checkpointed
past its end). Checkpoints are written periodically and at a clean stop, so the HW here may lag
the true one after a crash: what lies between is judged as uncommitted (informational), never
wrongly as divergent. An unclean leader election can leave a new leader below an old HW: the
records it replaced below that HW are reported as divergent, which they are.

Each copy has a range [log start, log end): its log start is the larger of its
``log-start-offset-checkpoint`` entry and its lowest offset, its end one past its highest offset
(for a copy with no record, both are its checkpointed log start, else 0).

=================  ==================================================================================
kind               one row per
=================  ==================================================================================
``divergent``      offset below the HW that two copies hold with a different content hash or leader
                   epoch (``copies`` lists each copy's epoch and hash)
``missing``        copy and offset below the HW that another copy holds, within the copy's own
                   [log start, log end): a hole (``copy`` names it)
``short``          copy whose log ends below the HW (``offset`` is its end): a follower behind, or
                   a copy that lost its tail; informational unless ``--strict``
``uncommitted``    offset at or above the HW where the copies do not all hold the same record:
                   always informational (uncommitted tails differ legitimately)
=================  ==================================================================================

Informational rows are written to ``informational/`` (Parquet, the same columns), counted in
the summary's totals and partitions and listed in its notes; they do not change the verdict.
A batch that does not decode is an invalid row (counted, exit 1) and its offsets are absent from
its copy (so other copies' records there show as ``missing`` too). Copies of a compacted topic
are cleaned independently: ``missing`` there may be the cleaner's work.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from storage import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES_FILE,
    StorageError,
    parse_partition_dir,
    parse_segment_file,
    read_offsets,
)

if TYPE_CHECKING:
    from ._common import Job

__all__ = [
    "INFORMATIONAL",
    "KINDS",
    "Copy",
    "ReplicaInputError",
    "Replicas",
    "compare",
    "discover",
    "log_dirs_of",
    "node_dirs",
]

KINDS = ("divergent", "missing", "short", "uncommitted")
#: Kinds that never change the verdict (``short`` does with ``--strict``).
INFORMATIONAL = ("short", "uncommitted")
POSITION = ("topic", "partition", "offset")
HASHED = (
    "key",
    "value",
    "headers",
    "timestamp",
    "timestampType",
    "producerId",
    "producerEpoch",
    "sequence",
    "isTransactional",
    "isControl",
)
_CHECKPOINTS = (HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, META_PROPERTIES_FILE)

HOLDER = StructType(
    [StructField("copy", StringType()), StructField("leaderEpoch", IntegerType()), StructField("hash", LongType())]
)
_SPAN = StructType(
    [StructField("copy", StringType()), StructField("start", LongType()), StructField("end", LongType())]
)
PARTITION_INFO = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("hw", LongType()),
        StructField("spans", ArrayType(_SPAN)),
    ]
)
ROW_COLUMNS = ("kind", *POSITION, "detail", "copy", "hw", "copies")
#: Where the informational rows go in the output directory (Parquet).
INFORMATIONAL_DIR = "informational"


class ReplicaInputError(ValueError):
    """Node or log dirs that cannot be audited (missing, holding no log dir, a bad checkpoint):
    bad input (exit status 2); the message names the option and the path."""


@dataclass(frozen=True)
class Copy:
    """One partition directory in one node's log dir, with its dir's checkpoint entries."""

    name: str  # the node's label (its directory's name)
    log_dir: str
    topic: str
    partition: int
    hw: int | None  # replication-offset-checkpoint; None when the dir has no entry
    log_start: int | None  # log-start-offset-checkpoint

    @property
    def directory(self) -> str:
        return os.path.join(self.log_dir, f"{self.topic}-{self.partition}")


def node_dirs(nodes: Sequence[str], site_dir: str | None) -> list[Path]:
    """The node dirs ``--node`` names, or the ``node*`` dirs of ``--site-dir``. Raises ReplicaInputError."""
    found: list[Path] = []
    if site_dir is not None:
        root = Path(site_dir)
        if not root.is_dir():
            raise ReplicaInputError(f"--site-dir {site_dir}: no such directory")
        found += sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("node"))
        if not found:
            raise ReplicaInputError(f"--site-dir {site_dir}: holds no node directory (node-1/, node-2/, ...)")
    for node in nodes:
        path = Path(node)
        if not path.is_dir():
            raise ReplicaInputError(f"--node {node}: no such directory")
        found.append(path)
    if not found:
        raise ReplicaInputError("give the nodes' dirs: --node DIR (repeatable) or --site-dir DIR")
    return list(dict.fromkeys(p.absolute() for p in found))


def _is_log_dir(path: Path) -> bool:
    """A dir holding checkpoints or ``meta.properties``, or a partition dir with a segment file
    (a node's dir named ``node-1`` is no partition dir: it holds ``node.log``, not a segment)."""
    if any((path / name).exists() for name in _CHECKPOINTS):
        return True
    return any(
        child.is_dir()
        and parse_partition_dir(child.name) is not None
        and any(parse_segment_file(f.name) is not None for f in child.iterdir())
        for child in path.iterdir()
    )


def log_dirs_of(node: Path) -> list[Path]:
    """A node's log dirs: ``node`` itself when it is one, else its subdirectories that are."""
    if _is_log_dir(node):
        return [node]
    return sorted(child for child in node.iterdir() if child.is_dir() and _is_log_dir(child))


def discover(nodes: Sequence[Path], topics: Iterable[str] | None, option: str = "--node") -> list[Copy]:
    """Every copy of the chosen topics (None: every topic not starting with ``__``) in ``nodes``.

    Raises ReplicaInputError for a node dir with no log dir, or a malformed checkpoint file.
    """
    wanted = set(topics) if topics is not None else None
    names = [node.name for node in nodes]
    copies: list[Copy] = []
    for node, name in zip(nodes, names, strict=True):
        label = name if names.count(name) == 1 else str(node)
        dirs = log_dirs_of(node)
        if not dirs:
            raise ReplicaInputError(
                f"{option} {node}: holds no log dir (no partition directory, checkpoint or meta.properties)"
            )
        for log_dir in dirs:
            try:
                hws = read_offsets(log_dir / HIGH_WATERMARK_CHECKPOINT)
                starts = read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
            except StorageError as exc:
                raise ReplicaInputError(f"{option} {node}: {exc}") from None
            for child in sorted(log_dir.iterdir()):
                tp = parse_partition_dir(child.name) if child.is_dir() else None
                if tp is None or (wanted is not None and tp.topic not in wanted):
                    continue
                if wanted is None and tp.topic.startswith("__"):
                    continue
                hw, start = hws.get(tp), starts.get(tp)
                # A node holding one partition in two log dirs (storage refuses to load that) keeps both.
                twice = any(c.name == label and (c.topic, c.partition) == (tp.topic, tp.partition) for c in copies)
                copies.append(
                    Copy(
                        f"{label}/{log_dir.name}" if twice else label,
                        str(log_dir),
                        tp.topic,
                        tp.partition,
                        int(hw) if hw is not None else None,
                        int(start) if start is not None else None,
                    )
                )
    return copies


@dataclass
class Replicas:
    """One comparison: the discrepancy rows, the informational rows, and what the summary says besides."""

    discrepancies: DataFrame
    informational: DataFrame
    totals: dict[str, int]
    partitions: list[dict[str, Any]]
    invalid: dict[str, int]
    notes: list[str] = field(default_factory=list)
    cached: list[DataFrame] = field(default_factory=list)
    informational_kinds: tuple[str, ...] = INFORMATIONAL

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()

    def finish(self, job: Job) -> dict[str, Any]:
        """Write the informational rows (``informational/``), then the discrepancies and the
        summary through ``job`` (counting the informational rows in it); release; returns the summary."""
        try:
            self.informational.write.mode("overwrite").parquet(job.out.path(INFORMATIONAL_DIR))
            by_kind: dict[tuple[str, int], dict[str, int]] = {}
            for row in self.informational.groupBy("topic", "partition", "kind").count().collect():
                by_kind.setdefault((row["topic"], row["partition"]), {})[row["kind"]] = row["count"]
            for part in self.partitions:
                for kind, n in by_kind.get((part["topic"], part["partition"]), {}).items():
                    part["counts"][f"informational.{kind}"] = n
            for kind in self.informational_kinds:
                self.totals[f"informational.{kind}"] = sum(counts.get(kind, 0) for counts in by_kind.values())
            job.notes += self.notes
            return job.finish(self.discrepancies, totals=self.totals, partitions=self.partitions, invalid=self.invalid)
        finally:
            self.release()


def compare(spark: SparkSession, source: DataFrame, copies: Sequence[Copy], *, strict: bool = False) -> Replicas:
    """Compare the copies ``source`` (``strait-segments`` rows of every copy, ``segment`` set) holds.

    ``copies`` (from :func:`discover`) names them: a row belongs to the copy whose partition dir
    holds its segment file. ``strict``: ``short`` copies are discrepancies, not informational.
    """
    by_dir = spark.createDataFrame(
        [(_norm(c.directory), c.name) for c in copies], "directory string, copy string"
    ).hint("broadcast")
    rows = source.withColumn("directory", F.regexp_replace(F.col("segment"), "/[^/]*$", "")).join(
        by_dir, "directory", "left"
    )
    slim = rows.select(
        *POSITION,
        "copy",
        "leaderEpoch",
        F.xxhash64(*HASHED).alias("hash"),
        "valid",
        "error",
        F.col("isControl").isNotNull().alias("record"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    invalid = {
        row["error"]: row["count"]
        for row in slim.where(~F.col("valid"))
        .groupBy(F.coalesce("error", F.lit("invalid")).alias("error"))
        .count()
        .collect()
    }
    records = slim.where(F.col("record") & F.col("copy").isNotNull())
    stats = {
        (r["topic"], r["partition"], r["copy"]): (r["n"], r["first"], r["last"])
        for r in records.groupBy("topic", "partition", "copy")
        .agg(F.count(F.lit(1)).alias("n"), F.min("offset").alias("first"), F.max("offset").alias("last"))
        .collect()
    }
    parts = _partitions(copies, stats)
    info = spark.createDataFrame(
        [(p.topic, p.partition, p.hw, [(c, s, e) for c, (s, e) in p.spans.items()]) for p in parts],
        PARTITION_INFO,
    ).hint("broadcast")
    by_offset = (
        records.groupBy(*POSITION)
        .agg(F.sort_array(F.collect_list(F.struct("copy", "leaderEpoch", "hash"))).alias("copies"))
        .join(info, ["topic", "partition"])
    )
    committed = F.col("offset") < F.coalesce(F.col("hw"), F.lit(0))
    variants = F.array_distinct(F.transform("copies", lambda h: F.struct(h["leaderEpoch"], h["hash"])))
    holders = F.col("copies")["copy"]
    divergent = by_offset.where(committed & (F.size(variants) > 1)).select(
        F.lit("divergent").alias("kind"),
        *POSITION,
        F.format_string(
            "%s/%d offset %d, below the HW %d, differs between copies: %s",
            "topic",
            "partition",
            "offset",
            "hw",
            _variants_text(variants),
        ).alias("detail"),
        F.lit(None).cast("string").alias("copy"),
        "hw",
        "copies",
    )
    missing = (
        by_offset.where(committed)
        .select(
            *POSITION,
            "hw",
            "copies",
            F.explode(
                F.filter(
                    "spans",
                    lambda s: (
                        ~F.array_contains(holders, s["copy"])
                        & (s["start"] <= F.col("offset"))
                        & (F.col("offset") < s["end"])
                    ),
                )
            ).alias("s"),
        )
        .select(
            F.lit("missing").alias("kind"),
            *POSITION,
            F.format_string(
                "%s lacks %s/%d offset %d (below the HW %d, within its log [%d, %d)), which %s hold",
                "s.copy",
                "topic",
                "partition",
                "offset",
                "hw",
                "s.start",
                "s.end",
                F.array_join(holders, ", "),
            ).alias("detail"),
            F.col("s.copy").alias("copy"),
            "hw",
            "copies",
        )
    )
    uncommitted = by_offset.where(~committed & ((F.size(variants) > 1) | (F.size("copies") < F.size("spans")))).select(
        F.lit("uncommitted").alias("kind"),
        *POSITION,
        F.format_string(
            "%s/%d offset %d, at or above the HW %s, is not the same on every copy: %s; %s hold nothing there",
            "topic",
            "partition",
            "offset",
            F.coalesce(F.col("hw").cast("string"), F.lit("(unknown)")),
            _variants_text(variants),
            F.coalesce(
                F.nullif(
                    F.array_join(F.array_except(F.col("spans")["copy"], holders), ", "),
                    F.lit(""),
                ),
                F.lit("no copy"),
            ),
        ).alias("detail"),
        F.lit(None).cast("string").alias("copy"),
        "hw",
        "copies",
    )
    short = spark.createDataFrame(_short_rows(parts), _row_schema())
    found = divergent.unionByName(missing)
    informational = uncommitted.unionByName(short)
    if strict:
        found, informational = found.unionByName(short), uncommitted
    totals = {
        "nodes": len({c.name for c in copies}),
        "log_dirs": len({c.log_dir for c in copies}),
        "partitions": len(parts),
        "copies": len(copies),
        "records": sum(n for n, _, _ in stats.values()),
        "short_copies": sum(len(p.short) for p in parts),
    }
    return Replicas(
        found.select(*ROW_COLUMNS),
        informational.select(*ROW_COLUMNS),
        totals,
        [p.summary(stats) for p in parts],
        invalid,
        notes=[note for p in parts for note in p.notes(strict)],
        cached=[slim],
        informational_kinds=tuple(k for k in INFORMATIONAL if not (strict and k == "short")),
    )


def _norm(path: str) -> str:
    return os.path.abspath(path)


def _variants_text(variants: Column) -> Column:
    """Each distinct (epoch, hash) with the copies holding it: "node-1, node-2: epoch 3, hash 1f2e..."."""
    return F.array_join(
        F.transform(
            variants,
            lambda v: F.format_string(
                "%s: epoch %s, hash %s",
                F.array_join(
                    F.transform(
                        F.filter(
                            "copies",
                            lambda h: h["leaderEpoch"].eqNullSafe(v["leaderEpoch"]) & h["hash"].eqNullSafe(v["hash"]),
                        ),
                        lambda h: h["copy"],
                    ),
                    ", ",
                ),
                F.coalesce(v["leaderEpoch"].cast("string"), F.lit("?")),
                F.lower(F.hex(v["hash"])),
            ),
        ),
        "; ",
    )


def _row_schema() -> StructType:
    return StructType(
        [
            StructField("kind", StringType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("detail", StringType()),
            StructField("copy", StringType()),
            StructField("hw", LongType()),
            StructField("copies", ArrayType(HOLDER)),
        ]
    )


@dataclass
class _Partition:
    topic: str
    partition: int
    hw: int | None
    spans: dict[str, tuple[int, int]]  # copy -> [log start, log end)
    own_hw: dict[str, int | None]
    short: list[str] = field(default_factory=list)

    def summary(self, stats: dict[tuple[str, int, str], tuple[int, int, int]]) -> dict[str, Any]:
        counts: dict[str, int] = {"copies": len(self.spans)}
        if self.hw is not None:
            counts["hw"] = self.hw
        for copy in self.spans:
            counts[f"records.{copy}"] = stats.get((self.topic, self.partition, copy), (0, 0, 0))[0]
        counts["short_copies"] = len(self.short)
        return {
            "topic": self.topic,
            "partition": self.partition,
            "counts": counts,
            "ranges": {copy: [start, end] for copy, (start, end) in self.spans.items()},
        }

    def notes(self, strict: bool) -> list[str]:
        out = []
        if self.hw is None:
            out.append(
                f"{self.topic}-{self.partition}: no copy has a replication-offset-checkpoint entry; "
                "nothing is known to be committed, every difference is reported as uncommitted"
            )
        for copy in self.short:
            end = self.spans[copy][1]
            why = "a discrepancy (--strict)" if strict else "informational"
            out.append(f"{self.topic}-{self.partition}: {copy}'s copy ends at {end}, below the HW {self.hw} ({why})")
        return out


def _partitions(copies: Sequence[Copy], stats: dict[tuple[str, int, str], tuple[int, int, int]]) -> list[_Partition]:
    grouped: dict[tuple[str, int], list[Copy]] = {}
    for c in copies:
        grouped.setdefault((c.topic, c.partition), []).append(c)
    parts = []
    for (topic, partition), group in sorted(grouped.items()):
        hws = [c.hw for c in group if c.hw is not None]
        spans: dict[str, tuple[int, int]] = {}
        for c in group:
            checkpointed = c.log_start or 0
            got = stats.get((topic, partition, c.name))
            if got is None:
                spans[c.name] = (checkpointed, checkpointed)
            else:
                _, first, last = got
                spans[c.name] = (min(max(checkpointed, first), last + 1), last + 1)
        part = _Partition(topic, partition, max(hws) if hws else None, spans, {c.name: c.hw for c in group})
        if part.hw is not None:
            part.short = [copy for copy, (_, end) in spans.items() if end < part.hw]
        parts.append(part)
    return parts


def _short_rows(parts: Sequence[_Partition]) -> list[tuple[Any, ...]]:
    rows = []
    for p in parts:
        for copy in p.short:
            end = p.spans[copy][1]
            own = p.own_hw.get(copy)
            why = (
                f"it had checkpointed its own HW at {own}: it lost records it held"
                if own is not None and own > end
                else "a follower behind, or a copy that lost its tail"
            )
            detail = (
                f"{copy}'s copy of {p.topic}/{p.partition} ends at {end}, below the HW {p.hw} "
                f"({p.hw - end if p.hw is not None else 0} offsets short): {why}"
            )
            rows.append(("short", p.topic, p.partition, end, detail, copy, p.hw, None))
    return rows
