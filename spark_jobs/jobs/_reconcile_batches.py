"""reconcile's first pass on offset-preserving links: whole batches, before any record is decoded.

The mirror copies the source's batches byte for byte (only the base offset and the leader
epoch, which the CRC does not cover, are the target's). So where both sides hold a batch at
the same base offset with the same last offset, record count and digest (SHA-256 of the bytes
the CRC covers, see :data:`spark_jobs.schema.BATCH_SCHEMA`), both CRCs match and the batch lies
inside both logs (at or past both log starts, before both log ends), every record in it is
``matched`` on both sides: same offset, key, value, headers and timestamp. Those batches are
*agreed*, and counted without being decoded.

Everything else is compared record by record by :func:`._reconcile_compare.compare_offsets`,
over *slow ranges*: per partition, the offsets of every batch that is not agreed on either side
(a batch one side lacks, one that differs, one cut by a log start or end, a damaged one),
merged. Two rules keep the record pass's answer exactly the one a record-by-record run of the
whole partition gives:

- damage (a row with ``valid`` false) in a partition: the partition is compared record by
  record from the damage to its end, so an invalid row's shadow ends where the side's next
  readable record really is;
- a ``missing`` or ``extra`` record with a key may be ``superseded`` by a later record of that
  key on the side that lacks it, which may sit in an agreed batch: the record pass is run again
  with the partition compared record by record from that record to its end
  (:func:`superseded_from`, :func:`extend`).

When sides disagree in too many batches (:data:`SLOW_BATCHES_LIMIT`), for instance a target that
stores the same records in other batches, there is nothing to gain: the caller compares every
record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from ._reconcile_compare import EXTRA, MISSING, TP, Comparison, Ranges, ranges_frame

#: More batches than this not agreed: the batch pass gives up (every record is compared).
SLOW_BATCHES_LIMIT = 100_000
#: Per partition, slow ranges are merged (closing the smallest gaps) down to this many; each is
#: one more read of the side.
MAX_RANGES = 8

Span = tuple[int, int]  # offsets [lo, hi)


@dataclass
class BatchPass:
    """What the batch pass found: ``agreed[tp]`` records matched in agreed batches outside the
    slow ranges, and the slow ranges (``slow[tp]``, sorted, disjoint) to compare by record."""

    agreed: dict[TP, int]
    slow: dict[TP, list[Span]]
    agreed_batches: DataFrame
    cached: DataFrame

    def release(self) -> None:
        self.cached.unpersist()


def batch_pass(source: DataFrame, target: DataFrame, ranges: Mapping[TP, Ranges]) -> BatchPass | None:
    """Pair both sides' batches (``rows=batches`` frames); None when more than
    :data:`SLOW_BATCHES_LIMIT` are not agreed."""
    spark = source.sparkSession
    frame = ranges_frame(
        spark,
        [(t, p, r.source[0], r.source[1], r.target[0], r.target[1]) for (t, p), r in sorted(ranges.items())],
        ["s_start", "s_end", "t_start", "t_end"],
    )

    def side(df: DataFrame, p: str) -> DataFrame:
        # One row per batch start (a reader never gives two; a duplicate would count twice).
        df = df.dropDuplicates(["topic", "partition", "offset"])
        return df.select(
            "topic",
            "partition",
            F.coalesce("offset", F.lit(-1)).alias("base"),
            F.col("lastOffset").alias(f"{p}_last"),
            F.col("records").alias(f"{p}_n"),
            F.col("digest").alias(f"{p}_d"),
            (F.col("valid") & F.col("offset").isNotNull()).alias(f"{p}_ok"),
            F.lit(True).alias(f"{p}_has"),
        )

    base = F.col("base")
    agreed = (
        F.col("s_ok")
        & F.col("t_ok")
        & (F.col("s_last") == F.col("t_last"))
        & (F.col("s_n") == F.col("t_n"))
        & (F.col("s_d") == F.col("t_d"))
        & (base >= F.greatest("s_start", "t_start"))
        & (F.col("s_last") < F.least("s_end", "t_end"))
    )
    joined = side(source, "s").join(side(target, "t"), ["topic", "partition", "base"], "full_outer")
    joined = joined.join(frame, ["topic", "partition"], "left").withColumn("agreed", F.coalesce(agreed, F.lit(False)))
    # One row per batch: small next to the records, and read twice below (each side is scanned once).
    joined = joined.persist(StorageLevel.MEMORY_AND_DISK)
    damaged = (F.col("s_has") & ~F.col("s_ok")) | (F.col("t_has") & ~F.col("t_ok"))
    stats = joined.groupBy("topic", "partition").agg(
        F.sum(F.when(F.col("agreed"), F.col("s_n")).otherwise(0)).alias("agreed"),
        F.sum(F.when(F.col("agreed"), 0).otherwise(1)).alias("slow"),
        F.min(F.when(F.coalesce(damaged, F.lit(False)), base)).alias("damage"),
    )
    rows = stats.collect()
    if sum(int(r["slow"]) for r in rows) > SLOW_BATCHES_LIMIT:
        joined.unpersist()
        return None
    ends = {tp: max(r.source[1], r.target[1]) for tp, r in ranges.items()}
    spans: dict[TP, list[Span]] = {}
    for r in rows:
        tp = (r["topic"], r["partition"])
        if r["damage"] is not None:
            spans.setdefault(tp, []).append((max(int(r["damage"]), 0), ends.get(tp, 0)))
    last = F.greatest(F.coalesce("s_last", "base"), F.coalesce("t_last", "base"))
    for r in joined.filter(~F.col("agreed")).select("topic", "partition", "base", last.alias("last")).collect():
        spans.setdefault((r["topic"], r["partition"]), []).append((max(int(r["base"]), 0), int(r["last"]) + 1))
    slow = {tp: fewest(merged(s), MAX_RANGES) for tp, s in spans.items()}
    agreed_batches = joined.filter(F.col("agreed")).select("topic", "partition", "base", F.col("s_n").alias("n"))
    totals = {(r["topic"], r["partition"]): int(r["agreed"]) for r in rows}
    return BatchPass(_outside(agreed_batches, slow, totals), slow, agreed_batches, joined)


def recount(bp: BatchPass, slow: dict[TP, list[Span]]) -> BatchPass:
    """The same pass with other slow ranges (after :func:`extend`)."""
    totals: dict[TP, int] = {}
    for r in bp.agreed_batches.groupBy("topic", "partition").agg(F.sum("n").alias("n")).collect():
        totals[(r["topic"], r["partition"])] = int(r["n"])
    return BatchPass(_outside(bp.agreed_batches, slow, totals), slow, bp.agreed_batches, bp.cached)


def _outside(agreed_batches: DataFrame, slow: Mapping[TP, list[Span]], totals: dict[TP, int]) -> dict[TP, int]:
    """Per partition the records of agreed batches that no slow range holds."""
    inside = [(t, p, lo, hi) for (t, p), spans in sorted(slow.items()) for lo, hi in spans]
    out = dict(totals)
    if not inside:
        return out
    schema = StructType(
        [
            StructField("_t", StringType(), False),
            StructField("_p", IntegerType(), False),
            StructField("_lo", LongType(), False),
            StructField("_hi", LongType(), False),
        ]
    )
    spans = F.broadcast(agreed_batches.sparkSession.createDataFrame(inside, schema))
    cond = (
        (F.col("topic") == F.col("_t"))
        & (F.col("partition") == F.col("_p"))
        & (F.col("base") >= F.col("_lo"))
        & (F.col("base") < F.col("_hi"))
    )
    held = agreed_batches.join(spans, cond, "inner").groupBy("topic", "partition").agg(F.sum("n").alias("n"))
    for r in held.collect():
        tp = (r["topic"], r["partition"])
        out[tp] = out.get(tp, 0) - int(r["n"])
    return out


def merged(spans: list[Span]) -> list[Span]:
    """Sorted, overlapping and touching spans joined."""
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def fewest(spans: list[Span], most: int) -> list[Span]:
    """``spans`` (sorted, disjoint) with the smallest gaps closed until at most ``most`` are left."""
    spans = list(spans)
    while len(spans) > most:
        i = min(range(len(spans) - 1), key=lambda k: spans[k + 1][0] - spans[k][1])
        spans[i : i + 2] = [(spans[i][0], spans[i + 1][1])]
    return spans


def clip(spans: list[Span], lo: int, hi: int) -> list[Span]:
    """The parts of ``spans`` inside ``[lo, hi)``."""
    return [(max(a, lo), min(b, hi)) for a, b in spans if max(a, lo) < min(b, hi)]


def superseded_from(comparison: Comparison) -> dict[TP, int]:
    """Per partition, the first offset of a ``missing`` or ``extra`` record with a key: where a
    later record of the key would have to be looked for beyond the slow ranges."""
    d = comparison.discrepancies
    keyed = d.filter(F.col("kind").isin(MISSING, EXTRA) & F.col("key").isNotNull())
    rows = keyed.groupBy("topic", "partition").agg(F.min("offset").alias("first")).collect()
    return {(r["topic"], r["partition"]): int(r["first"]) for r in rows}


def extend(
    slow: Mapping[TP, list[Span]], starts: Mapping[TP, int], ranges: Mapping[TP, Ranges]
) -> dict[TP, list[Span]]:
    """``slow`` with each partition in ``starts`` compared by record from there to its end."""
    out = {tp: list(spans) for tp, spans in slow.items()}
    for tp, start in starts.items():
        r = ranges[tp]
        end = max(r.source[1], r.target[1])
        out[tp] = fewest(merged([*out.get(tp, []), (start, end)]), MAX_RANGES)
    return out


def describe(bp: BatchPass) -> dict[str, Any]:
    """For the summary: records counted in agreed batches, and the slow ranges' extent."""
    return {
        "agreed_records": sum(bp.agreed.values()),
        "record_ranges": sum(len(s) for s in bp.slow.values()),
        "record_offsets": sum(hi - lo for s in bp.slow.values() for lo, hi in s),
    }
