"""reconcile for MM2 links: the offset syncs, the window they say was copied, content matching.

An MM2 link (``docs/mm2.md``) copies source ``T``-``p`` to target ``<source alias>.T``-``p``,
where the target assigns its own offsets, and records each copy in the offset-syncs topic
``mm2-offset-syncs.<target alias>.internal`` on the source site. A sync ``(u, d)`` says source
record ``u`` is target record ``d``; the copier writes one for the last record of every batch it
produced, in order. So between two syncs ``(u1, d1)`` and ``(u2, d2)`` of one life of a
partition (offsets only grow), source offsets ``(u1, u2]`` were copied to target offsets
``(d1, d2]``, record for record (aborted transactions and control records are not copied).

The format is decoded here from its few bytes (``spark_jobs`` may not import ``mirror``):
key = topic STRING (int16 length + UTF-8) + partition INT32; value = upstream INT64 +
downstream INT64, big-endian; a null value (tombstone) clears the partition's syncs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ._reconcile_compare import (
    BEHIND,
    COMPARE,
    COUNT_KEYS,
    EXTRA,
    MATCHED,
    MISSING,
    MM2_COUNT_KEYS,
    NOT_COMPARED,
    OUTSIDE_WINDOW,
    TP,
    UNSYNCED,
    Comparison,
    CopyWindow,
    Ranges,
    add_state_counts,
    classified,
    invalid_rows,
    mark_superseded,
    ranges_frame,
    unmirrored,
)

_INT16 = struct.Struct(">h")  # STRING length
_INT32 = struct.Struct(">i")  # partition
_SYNC_VALUE = struct.Struct(
    ">q"  # upstreamOffset (source)
    "q"  # offset (downstream, target)
)


def offset_syncs_topic(target_alias: str) -> str:
    """Where MM2 (and strait's mm2 links) keep the offset syncs of links into ``target_alias``."""
    return f"mm2-offset-syncs.{target_alias}.internal"


def decode_sync_key(data: bytes) -> tuple[str, int]:
    """(topic, partition) of an offset sync's key; ValueError naming what is wrong."""
    if len(data) < _INT16.size:
        raise ValueError(f"offset sync key of {len(data)} bytes is too short")
    (n,) = _INT16.unpack_from(data, 0)
    if n < 0 or len(data) != _INT16.size + n + _INT32.size:
        raise ValueError(f"offset sync key: a topic of {n} bytes and a partition do not make {len(data)} bytes")
    topic = data[_INT16.size : _INT16.size + n].decode("utf-8")
    (partition,) = _INT32.unpack_from(data, _INT16.size + n)
    return topic, int(partition)


def decode_sync_value(data: bytes) -> tuple[int, int]:
    """(upstream, downstream) of an offset sync's value; ValueError when it is not 16 bytes."""
    if len(data) != _SYNC_VALUE.size:
        raise ValueError(f"offset sync value of {len(data)} bytes, not {_SYNC_VALUE.size}")
    u, d = _SYNC_VALUE.unpack(data)
    return int(u), int(d)


@dataclass
class Syncs:
    """Per source partition, the syncs of its current life in topic order; what did not decode."""

    by_partition: dict[TP, list[tuple[int, int]]]
    malformed: int = 0


def read_syncs(records: Iterable[tuple[bytes | None, bytes | None]]) -> Syncs:
    """Fold offset-syncs records ``(key, value)`` (in topic order) as MM2's store does: a sync
    whose offsets do not both grow starts a new life of its partition; a tombstone clears it."""
    out = Syncs({})
    for key, value in records:
        try:
            if key is None:
                raise ValueError("null key")
            tp = decode_sync_key(bytes(key))
            if value is None:
                out.by_partition.pop(tp, None)
                continue
            sync = decode_sync_value(bytes(value))
        except (ValueError, UnicodeDecodeError):
            out.malformed += 1
            continue
        life = out.by_partition.setdefault(tp, [])
        if life and sync == life[-1]:
            continue
        if life and (sync[0] <= life[-1][0] or sync[1] <= life[-1][1]):
            life.clear()
        life.append(sync)
    return out


def copy_window(syncs: list[tuple[int, int]], source_start: int, target_start: int) -> CopyWindow | None:
    """The offsets copied between the earliest usable sync and the latest one: source
    ``[u_lo + 1, u_hi + 1)`` to target ``[d_lo + 1, d_hi + 1)``. The lower sync is the earliest
    one after which both logs still hold everything (an anchor sync ``(log start - 1, end - 1)``
    written when the copy began qualifies, so a whole copy is one window). None without syncs."""
    if not syncs:
        return None
    u_hi, d_hi = syncs[-1]
    u_lo, d_lo = next(((u, d) for u, d in syncs if u + 1 >= source_start and d + 1 >= target_start), syncs[-1])
    return CopyWindow(source=(u_lo + 1, u_hi + 1), target=(d_lo + 1, d_hi + 1))


def compare_mm2(
    source: DataFrame,
    target: DataFrame,
    ranges: Mapping[TP, Ranges],
    windows: Mapping[TP, CopyWindow | None],
    source_alias: str,
    *,
    require_caught_up: bool = False,
) -> Comparison:
    """Compare an MM2 link's sides by content inside each partition's copy window.

    ``source`` holds topics ``T``, ``target`` the remote topics ``<source_alias>.T``; ``ranges``
    and ``windows`` are keyed by the source's names (a partition without a window: nothing of
    it counts as copied, so its source records are behind and its target records unsynced).
    """
    spark = source.sparkSession
    prefix = f"{source_alias}."
    rows = []
    for tp, r in sorted(ranges.items()):
        w = windows.get(tp)
        ws = w.source if w is not None else (r.source[0], r.source[0])
        wt = w.target if w is not None else (r.target[0], r.target[0])
        rows.append((*tp, r.source[0], r.target[0], ws[0], ws[1], wt[0], wt[1]))
    frame = ranges_frame(spark, rows, ["s_start", "t_start", "ws_lo", "ws_hi", "wt_lo", "wt_hi"])
    o = F.col("offset")
    s = classified(
        source,
        frame,
        [(o < F.col("s_start"), NOT_COMPARED), (o < F.col("ws_lo"), OUTSIDE_WINDOW), (o >= F.col("ws_hi"), BEHIND)],
    )
    remote = target.filter(F.col("topic").startswith(prefix)).withColumn(
        "topic", F.col("topic").substr(len(prefix) + 1, 1 << 16)
    )
    t = classified(
        remote,
        frame,
        [(o < F.col("t_start"), NOT_COMPARED), (o < F.col("wt_lo"), OUTSIDE_WINDOW), (o >= F.col("wt_hi"), UNSYNCED)],
    )
    cached = [s, t]
    counts = {tp: dict.fromkeys(COUNT_KEYS + MM2_COUNT_KEYS, 0) for tp in ranges}
    counted = {NOT_COMPARED: NOT_COMPARED, OUTSIDE_WINDOW: OUTSIDE_WINDOW}
    add_state_counts(counts, s, "source", {BEHIND: BEHIND, **counted})
    add_state_counts(counts, t, "target", {UNSYNCED: UNSYNCED, **counted})
    invalid, examples, _ = invalid_rows(s, t, counts)

    nth = Window.partitionBy("topic", "partition", "ch").orderBy("offset")

    def side(df: DataFrame, p: str) -> DataFrame:
        return (
            df.filter(F.col("state") == COMPARE)
            .withColumn("n", F.row_number().over(nth))
            .select("topic", "partition", "ch", "n", *(F.col(c).alias(f"{p}_{c}") for c in ("offset", "key", "kh")))
        )

    j = side(s, "s").join(side(t, "t"), ["topic", "partition", "ch", "n"], "full_outer")
    j = j.persist(StorageLevel.DISK_ONLY)  # every record of both sides: never on the heap
    cached.append(j)
    paired = j.filter(F.col("s_offset").isNotNull() & F.col("t_offset").isNotNull())
    d = j.filter(F.col("s_offset").isNull() | F.col("t_offset").isNull()).select(
        "topic",
        "partition",
        F.when(F.col("t_offset").isNull(), MISSING).otherwise(EXTRA).alias("outcome"),
        F.coalesce("s_offset", "t_offset").alias("offset"),
        "s_offset",
        "t_offset",
        F.coalesce("s_key", "t_key").alias("key"),
        F.coalesce("s_kh", "t_kh").alias("kh"),
        "ch",
    )

    def last_paired(p: str) -> DataFrame:
        return (
            paired.filter(F.col(f"{p}_key").isNotNull())
            .groupBy("topic", "partition", f"{p}_kh")
            .agg(F.max(f"{p}_offset").alias("_last"))
            .withColumnsRenamed({"topic": "_lt", "partition": "_lp", f"{p}_kh": "_lkh"})
        )

    d = mark_superseded(d, MISSING, last_paired("s"), "offset")
    d = mark_superseded(d, EXTRA, last_paired("t"), "offset")
    d = d.persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(d)
    for row in d.groupBy("topic", "partition", "outcome").count().collect():
        c = counts.setdefault((row["topic"], row["partition"]), dict.fromkeys(COUNT_KEYS + MM2_COUNT_KEYS, 0))
        c[str(row["outcome"]).split(":")[0]] += row["count"]
        if row["outcome"] != EXTRA and not str(row["outcome"]).endswith(":target"):
            c[MATCHED] -= row["count"]
    target_topic = F.concat(F.lit(prefix), F.col("topic"))
    detailed = d.filter(F.col("outcome").isin(MISSING, EXTRA)).join(frame, ["topic", "partition"], "left")
    detail = F.when(
        F.col("outcome") == MISSING,
        F.format_string(
            "no record with this content among the target's copied offsets [%d, %d) of %s",
            F.col("wt_lo"),
            F.col("wt_hi"),
            target_topic,
        ),
    ).otherwise(
        F.format_string(
            "target record %s@%d matches no source record among the copied offsets [%d, %d)",
            target_topic,
            F.col("t_offset"),
            F.col("ws_lo"),
            F.col("ws_hi"),
        )
    )
    found = detailed.select(
        F.col("outcome").alias("kind"),
        "topic",
        "partition",
        "offset",
        detail.alias("detail"),
        target_topic.alias("target_topic"),
        F.col("s_offset").alias("source_offset"),
        F.col("t_offset").alias("target_offset"),
        "key",
        F.when(F.col("outcome") == MISSING, F.col("ch")).alias("source_hash"),
        F.when(F.col("outcome") == EXTRA, F.col("ch")).alias("target_hash"),
    )
    if require_caught_up:
        behind = F.format_string("not copied yet: the offset syncs say source offsets below %d were", F.col("ws_hi"))
        found = found.unionByName(unmirrored(s, None, target_topic=target_topic, behind_detail=behind))
    return Comparison(found, counts, invalid, examples, cached)
