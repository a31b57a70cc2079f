"""reconcile's comparison: two sites' records per topic-partition, by offset or (MM2 links) by content.

Input: two DataFrames of :data:`~spark_jobs.schema.RECORD_SCHEMA` rows (the source site's and the
target site's), and per partition what each side's log covers. Output: the discrepancy rows, and
per partition how every record read was classified. No I/O of its own; the job module reads the
sites and writes the results.

**Offset-preserving links** (:func:`compare_offsets`). The target holds the source's batches at
the same offsets, so records are paired by (topic, partition, offset). With each side's log
range ``[log start, log end)``:

- a source record at an offset at or past the target's log end is ``behind`` (not mirrored
  yet); a target record at or past the source's log end is ``ahead`` (the source lost records
  the mirror had copied, or its segments lack their tail). Both are counted; they are
  discrepancies only with ``require_caught_up``;
- a record below either side's log start is not compared (``not_compared``: retention);
- of the offsets both logs cover: ``missing`` (the source has the offset, the target not),
  ``extra`` (the other way round), ``different`` (both have it and the key, value, headers or
  timestamp differ: each field is hashed with xxhash64 and ``detail`` names the fields);
- offset gaps on both sides are not loss: only a record one side *has* can be missing;
- a missing (or extra) record whose key has a later record on the side that lacks it is
  ``superseded`` (compaction removed it there): counted, not a discrepancy;
- invalid rows (``valid`` false: a batch that does not decode, a CRC mismatch, a torn tail) are
  counted by error and never compared; the other side's records at the offsets they stand for
  (up to that side's next readable record) are ``unreadable``: counted, not a discrepancy.

**MM2 links** (:func:`compare_mm2`). The target topic is ``<source alias>.<topic>`` and assigns
its own offsets. Per partition, the offset syncs give a window: source offsets ``(u_lo, u_hi]``
were copied to target offsets ``(d_lo, d_hi]`` (the job picks the syncs, see
:func:`spark_jobs.jobs._reconcile_mm2.copy_window`). Inside the window both sides are matched as
multisets of content hashes (key, value, headers, timestamp): the n-th source record with a
given hash pairs with the n-th target record with it. Unpaired source records are ``missing``,
unpaired target records ``extra`` (``superseded`` when a later record of the same key was paired).
Source records after the window are ``behind``; target records after it are ``unsynced`` (copied,
their offset sync not written yet) and records before it ``outside_window``: counted, not compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

TP = tuple[str, int]

# Discrepancy kinds.
MISSING, EXTRA, DIFFERENT, BEHIND, AHEAD = "missing", "extra", "different", "behind", "ahead"
# What else a record can be (counted, never a discrepancy).
MATCHED, SUPERSEDED, UNREADABLE, NOT_COMPARED = "matched", "superseded", "unreadable", "not_compared"
OUTSIDE_WINDOW, UNSYNCED, INVALID = "outside_window", "unsynced", "invalid"
COMPARE = "compare"

#: The counts every partition (and the totals) report, in this order.
COUNT_KEYS = (
    "source_records",
    "target_records",
    "compared",
    MATCHED,
    MISSING,
    EXTRA,
    DIFFERENT,
    SUPERSEDED,
    BEHIND,
    AHEAD,
    NOT_COMPARED,
    UNREADABLE,
    "invalid_source",
    "invalid_target",
)
MM2_COUNT_KEYS = (OUTSIDE_WINDOW, UNSYNCED)

#: The discrepancy rows' columns (the shared five first).
DISCREPANCY_SCHEMA = StructType(
    [
        StructField("kind", StringType(), nullable=False),
        StructField("topic", StringType(), nullable=False),
        StructField("partition", IntegerType(), nullable=False),
        StructField("offset", LongType()),
        StructField("detail", StringType()),
        StructField("target_topic", StringType()),
        StructField("source_offset", LongType()),
        StructField("target_offset", LongType()),
        StructField("key", BinaryType()),
        StructField("source_hash", LongType()),
        StructField("target_hash", LongType()),
    ]
)
DISCREPANCY_COLUMNS = tuple(DISCREPANCY_SCHEMA.fieldNames())

#: At most this many invalid rows are described one by one (``Comparison.invalid_examples``).
INVALID_EXAMPLES = 10


@dataclass(frozen=True)
class Ranges:
    """One partition's log on each side, ``[log start, log end)``; ``(0, 0)`` when a side lacks it."""

    source: tuple[int, int]
    target: tuple[int, int]


@dataclass(frozen=True)
class CopyWindow:
    """MM2: source offsets ``[source[0], source[1])`` were copied to target offsets ``[target[0], target[1])``."""

    source: tuple[int, int]
    target: tuple[int, int]


@dataclass
class Comparison:
    """What a comparison found: ``discrepancies`` (lazy; columns :data:`DISCREPANCY_COLUMNS`),
    per partition counts (keys :data:`COUNT_KEYS`), invalid rows by ``"<side>: <error>"``."""

    discrepancies: DataFrame
    counts: dict[TP, dict[str, int]]
    invalid: dict[str, int] = field(default_factory=dict)
    invalid_examples: list[dict[str, Any]] = field(default_factory=list)
    cached: list[DataFrame] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for counts in self.counts.values():
            for k, v in counts.items():
                out[k] = out.get(k, 0) + v
        return out

    def release(self) -> None:
        """Drop what the comparison kept cached (after the discrepancies were written)."""
        for df in self.cached:
            df.unpersist()
        self.cached.clear()


# -- hashing ---------------------------------------------------------------------------------------


def hashed(df: DataFrame) -> DataFrame:
    """The columns a comparison needs: position, validity, the key, and one hash per compared field.

    ``kh``/``vh`` hash the null flag with the bytes (a null key is not an empty one), ``hh`` the
    header count with the headers (in order), ``ts`` is the timestamp in microseconds (null
    stays null); ``ch`` hashes all four (the content, for MM2 matching and the rows' hashes).
    """
    kh = F.xxhash64(F.col("key").isNull(), F.col("key"))
    vh = F.xxhash64(F.col("value").isNull(), F.col("value"))
    hh = F.xxhash64(F.coalesce(F.size("headers"), F.lit(-1)), F.col("headers"))
    ts = F.unix_micros(F.col("timestamp"))
    out = df.select(
        "topic",
        "partition",
        "offset",
        "key",
        F.col("valid"),
        F.col("error"),
        kh.alias("kh"),
        vh.alias("vh"),
        hh.alias("hh"),
        ts.alias("ts"),
    )
    return out.withColumn("ch", F.xxhash64("kh", "vh", "hh", F.col("ts").isNull(), F.coalesce("ts", F.lit(0))))


def classified(df: DataFrame, frame: DataFrame, rules: Sequence[tuple[Column, str]]) -> DataFrame:
    """A side's :func:`hashed` rows with their partition's bounds (``frame``) and a ``state``:
    ``invalid``, else the first rule that holds, else ``compare``. Persisted on disk: the side is
    read (and decoded) once, and the heap stays free for the joins whatever the topic's size."""
    state = F.when(~F.col("valid"), INVALID)
    for condition, name in rules:
        state = state.when(condition, name)
    joined = hashed(df).join(frame, ["topic", "partition"], "left")
    return joined.withColumn("state", state.otherwise(COMPARE)).persist(StorageLevel.DISK_ONLY)


def ranges_frame(spark: Any, rows: list[tuple[Any, ...]], names: list[str]) -> DataFrame:
    fields = [StructField("topic", StringType(), False), StructField("partition", IntegerType(), False)]
    fields += [StructField(n, LongType(), False) for n in names]
    return F.broadcast(spark.createDataFrame(rows, StructType(fields)))


# -- offset-preserving links -----------------------------------------------------------------------


def compare_offsets(
    source: DataFrame,
    target: DataFrame,
    ranges: Mapping[TP, Ranges],
    *,
    require_caught_up: bool = False,
) -> Comparison:
    """Compare an offset-preserving link's two sides (see the module docstring for the rules).

    ``ranges`` must name every partition either side's rows hold.
    """
    spark = source.sparkSession
    frame = ranges_frame(
        spark,
        [(t, p, r.source[0], r.source[1], r.target[0], r.target[1]) for (t, p), r in sorted(ranges.items())],
        ["s_start", "s_end", "t_start", "t_end"],
    )
    o = F.col("offset")
    below = (o < F.col("s_start")) | (o < F.col("t_start"))
    s = classified(source, frame, [(below, NOT_COMPARED), (o >= F.col("t_end"), BEHIND)])
    t = classified(target, frame, [(below, NOT_COMPARED), (o >= F.col("s_end"), AHEAD)])
    cached = [s, t]
    counts: dict[TP, dict[str, int]] = {tp: dict.fromkeys(COUNT_KEYS, 0) for tp in ranges}
    add_state_counts(counts, s, "source", {BEHIND: BEHIND, NOT_COMPARED: NOT_COMPARED})
    add_state_counts(counts, t, "target", {AHEAD: AHEAD, NOT_COMPARED: NOT_COMPARED})
    invalid, examples, shadows = invalid_rows(s, t, counts)

    def side(df: DataFrame, p: str) -> DataFrame:
        cols = ["key", "kh", "vh", "hh", "ts", "ch"]
        return df.filter(F.col("state") == COMPARE).select(
            "topic", "partition", "offset", *(F.col(c).alias(f"{p}_{c}") for c in cols)
        )

    j = side(s, "s").join(side(t, "t"), ["topic", "partition", "offset"], "full_outer")
    fields = F.concat_ws(
        ", ",
        F.when(F.col("s_kh") != F.col("t_kh"), F.lit("key")),
        F.when(F.col("s_vh") != F.col("t_vh"), F.lit("value")),
        F.when(F.col("s_hh") != F.col("t_hh"), F.lit("headers")),
        F.when(~F.col("s_ts").eqNullSafe(F.col("t_ts")), F.lit("timestamp")),
    )
    outcome = (
        F.when(F.col("t_kh").isNull(), MISSING)
        .when(F.col("s_kh").isNull(), EXTRA)
        .when(fields != "", DIFFERENT)
        .otherwise(MATCHED)
    )
    d = (
        j.withColumn("outcome", outcome)
        .filter(F.col("outcome") != MATCHED)
        .select(
            "topic",
            "partition",
            "outcome",
            F.when(F.col("outcome") == DIFFERENT, F.concat(F.lit("differs in "), fields)).alias("fields"),
            F.when(F.col("s_kh").isNotNull(), o).alias("source_offset"),
            F.when(F.col("t_kh").isNotNull(), o).alias("target_offset"),
            o,
            F.coalesce("s_key", "t_key").alias("key"),
            F.coalesce("s_kh", "t_kh").alias("kh"),
            F.col("s_ch").alias("source_hash"),
            F.col("t_ch").alias("target_hash"),
        )
    )
    # Superseded: the side that lacks the record has a later one with the same (non-null) key.
    d = mark_superseded(d, MISSING, later_keys(t, "offset"), "offset")
    d = mark_superseded(d, EXTRA, later_keys(s, "offset"), "offset")
    d = mark_unreadable(d, shadows)
    d = d.persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(d)
    for row in d.groupBy("topic", "partition", "outcome").count().collect():
        c = counts.setdefault((row["topic"], row["partition"]), dict.fromkeys(COUNT_KEYS, 0))
        name = str(row["outcome"]).split(":")[0]
        c[name] += row["count"]
        if row["outcome"] != EXTRA and not str(row["outcome"]).endswith(":target"):
            c[MATCHED] -= row["count"]  # a source record in the join that did not match
    detail = (
        F.when(F.col("outcome") == MISSING, F.lit("on the source; the target lacks it although its log covers it"))
        .when(F.col("outcome") == EXTRA, F.lit("on the target; the source lacks it although its log covers it"))
        .otherwise(F.col("fields"))
    )
    found = d.filter(F.col("outcome").isin(MISSING, EXTRA, DIFFERENT)).select(
        F.col("outcome").alias("kind"),
        "topic",
        "partition",
        "offset",
        detail.alias("detail"),
        F.col("topic").alias("target_topic"),
        "source_offset",
        "target_offset",
        "key",
        "source_hash",
        "target_hash",
    )
    if require_caught_up:
        behind = F.format_string("not on the target yet: the target's log ends at %d", F.col("t_end"))
        found = found.unionByName(unmirrored(s, t, target_topic=F.col("topic"), behind_detail=behind))
    return Comparison(found, counts, invalid, examples, cached)


def add_state_counts(counts: dict[TP, dict[str, int]], df: DataFrame, side: str, names: Mapping[str, str]) -> None:
    """Per partition: the side's records read, its invalid rows, the named states, and (source)
    the records entering the comparison, all counted as matched until the join says otherwise."""
    for row in df.groupBy("topic", "partition", "state").count().collect():
        c = counts.setdefault((row["topic"], row["partition"]), dict.fromkeys(COUNT_KEYS, 0))
        state, n = row["state"], row["count"]
        if state == INVALID:
            c[f"invalid_{side}"] += n
            continue
        c[f"{side}_records"] += n
        if state in names:
            c[names[state]] = c.get(names[state], 0) + n
        elif state == COMPARE and side == "source":
            c["compared"] += n
            c[MATCHED] += n


def invalid_rows(
    s: DataFrame, t: DataFrame, counts: dict[TP, dict[str, int]]
) -> tuple[dict[str, int], list[dict[str, Any]], DataFrame | None]:
    """Invalid rows by ``"<side>: <error>"``, a few described, and their shadows: per side and
    partition the offsets ``[lo, hi)`` from an invalid row to that side's next valid record."""
    by_error: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    shadows: list[tuple[str, int, str, int, int]] = []
    for side, df in (("source", s), ("target", t)):
        tps = [tp for tp, c in counts.items() if c[f"invalid_{side}"]]
        if not tps:
            continue
        for row in df.filter(~F.col("valid")).groupBy("error").count().collect():
            by_error[f"{side}: {row['error']}"] = by_error.get(f"{side}: {row['error']}", 0) + row["count"]
        affected = reduce(or_, [(F.col("topic") == t_) & (F.col("partition") == p) for t_, p in tps])
        w = Window.partitionBy("topic", "partition").orderBy("offset").rowsBetween(1, Window.unboundedFollowing)
        marked = (
            df.filter(affected & F.col("offset").isNotNull())
            .select(
                "topic",
                "partition",
                "offset",
                "valid",
                "error",
                F.min(F.when(F.col("valid"), F.col("offset"))).over(w).alias("next_valid"),
            )
            .filter(~F.col("valid"))
            .orderBy("topic", "partition", "offset")
        )
        for row in marked.collect():
            if len(examples) < INVALID_EXAMPLES:
                examples.append(
                    {"side": side, "topic": row["topic"], "partition": row["partition"], "offset": row["offset"]}
                    | {"error": row["error"]}
                )
            end = row["next_valid"] if row["next_valid"] is not None else 2**63 - 1
            shadows.append((row["topic"], row["partition"], side, row["offset"], end))
        for row in df.filter(~F.col("valid") & F.col("offset").isNull()).limit(INVALID_EXAMPLES).collect():
            if len(examples) < INVALID_EXAMPLES:
                examples.append(
                    {"side": side, "topic": row["topic"], "partition": row["partition"], "offset": None}
                    | {"error": row["error"]}
                )
    if not shadows:
        return by_error, examples, None
    schema = StructType(
        [
            StructField("_st", StringType(), False),
            StructField("_sp", IntegerType(), False),
            StructField("_side", StringType(), False),
            StructField("_lo", LongType(), False),
            StructField("_hi", LongType(), False),
        ]
    )
    return by_error, examples, F.broadcast(s.sparkSession.createDataFrame(shadows, schema))


def later_keys(df: DataFrame, offset: str) -> DataFrame:
    """Per (topic, partition, key hash): the side's last offset with that (non-null) key."""
    return (
        df.filter(F.col("valid") & F.col("key").isNotNull())
        .groupBy("topic", "partition", "kh")
        .agg(F.max(offset).alias("_last"))
        .select(F.col("topic").alias("_lt"), F.col("partition").alias("_lp"), F.col("kh").alias("_lkh"), "_last")
    )


def mark_superseded(d: DataFrame, kind: str, last: DataFrame, offset: str) -> DataFrame:
    """``kind`` rows whose key's last record on the other side (``last``) is later: superseded."""
    cond = (
        (F.col("outcome") == kind)
        & F.col("key").isNotNull()
        & (F.col("topic") == F.col("_lt"))
        & (F.col("partition") == F.col("_lp"))
        & (F.col("kh") == F.col("_lkh"))
    )
    joined = d.join(last, cond, "left")
    side = "source" if kind == MISSING else "target"
    later = F.col("_last").isNotNull() & (F.col("_last") > F.col(offset))
    return joined.withColumn("outcome", F.when(later, F.lit(f"{SUPERSEDED}:{side}")).otherwise(F.col("outcome"))).drop(
        "_lt", "_lp", "_lkh", "_last"
    )


def mark_unreadable(d: DataFrame, shadows: DataFrame | None) -> DataFrame:
    """Missing (extra) rows at offsets the target's (source's) invalid rows stand for: unreadable."""
    if shadows is None:
        return d
    cond = (
        (F.col("topic") == F.col("_st"))
        & (F.col("partition") == F.col("_sp"))
        & (
            ((F.col("outcome") == MISSING) & (F.col("_side") == "target"))
            | ((F.col("outcome") == EXTRA) & (F.col("_side") == "source"))
        )
        & (F.col("offset") >= F.col("_lo"))
        & (F.col("offset") < F.col("_hi"))
    )
    hit = d.join(shadows, cond, "left_semi").select("topic", "partition", "offset", F.lit(True).alias("_hit"))
    hit = hit.dropDuplicates(["topic", "partition", "offset"])
    joined = d.join(hit, ["topic", "partition", "offset"], "left")
    side = F.when(F.col("outcome") == MISSING, F.lit("source")).otherwise(F.lit("target"))
    return joined.withColumn(
        "outcome",
        F.when(F.col("_hit"), F.concat(F.lit(f"{UNREADABLE}:"), side)).otherwise(F.col("outcome")),
    ).drop("_hit")


def unmirrored(s: DataFrame, t: DataFrame | None, *, target_topic: Column, behind_detail: Column) -> DataFrame:
    """``behind`` (and, given ``t``, ``ahead``) records as discrepancy rows (``require_caught_up``)."""
    rows = s.filter(F.col("state") == BEHIND).select(
        F.lit(BEHIND).alias("kind"),
        "topic",
        "partition",
        "offset",
        behind_detail.alias("detail"),
        target_topic.alias("target_topic"),
        F.col("offset").alias("source_offset"),
        F.lit(None).cast("long").alias("target_offset"),
        "key",
        F.col("ch").alias("source_hash"),
        F.lit(None).cast("long").alias("target_hash"),
    )
    if t is not None:
        ahead = t.filter(F.col("state") == AHEAD).select(
            F.lit(AHEAD).alias("kind"),
            "topic",
            "partition",
            "offset",
            F.format_string("past the source's log end %d", F.col("s_end")).alias("detail"),
            F.col("topic").alias("target_topic"),
            F.lit(None).cast("long").alias("source_offset"),
            F.col("offset").alias("target_offset"),
            "key",
            F.lit(None).cast("long").alias("source_hash"),
            F.col("ch").alias("target_hash"),
        )
        rows = rows.unionByName(ahead)
    return rows
