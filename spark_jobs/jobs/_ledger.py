"""The ledger's anomalies: what a site holds against what a chaos history acknowledged, as DataFrame joins.

The definitions are chaos/'s checkers' (``chaos/checkers/__init__.py``), with *the site* (its
records, read from segment files or through the Kafka protocol) standing where the checkers use
the primary's final read, and only what concerns the site against the acknowledgements:

=========================  ===================================================================
kind                       one row per
=========================  ===================================================================
``lost``                   acknowledged send whose value the site holds at no position, whose
                           offset is at or above its partition's log start on the site, and
                           that no export of its history holds (rpo-accuracy's business)
``moved``                  acknowledged send whose value the site holds, but never at the
                           acknowledged topic, partition and offset
``duplicate``              value the site holds at two or more positions (``positions`` lists them;
                           ``offset`` is the first)
``inconsistent-offsets``   position of the site holding, across the site's record there and the
                           acknowledgements made *on that site*, two or more different values
                           (``values`` lists each value once, an acknowledgement before the site's
                           record); a record a failover exported from this site is not compared
=========================  ===================================================================

So a value acknowledged at two offsets surfaces as ``moved`` for the offset the site does not
hold it at (and as ``duplicate`` when it holds it at both); two values at one offset are
``inconsistent-offsets``. A write never acknowledged (failed, timed out) that landed is no
anomaly, unless it landed twice (``duplicate``, as the checker says). What the checkers also
read besides (the group's polls, the mirror's reads, earlier reads) is not the site as it is:
the ledger leaves it to them.

A partition's *log start* is its lowest offset on the site (0 when the site holds none of it):
with the site read from its log start, that is the log start a final read reports, except after
a DeleteRecords in the middle of a batch.

**Which acknowledgement happened on the site.** As the checkers place them (``chaos/checkers/_view.py``):
a send's own ``site`` when it carries one; else the source of the promote whose export holds the
same position and value; else by the promotes before it (before the first, its source; after
promote *i*, its target; with none, the history's primary). The audited site is the history's
primary unless ``--history-site`` names it. ``lost`` and ``moved`` judge every acknowledgement,
wherever it happened, as the checkers do; ``inconsistent-offsets`` only those on the audited site.

Two shuffles do the work: every acknowledgement and site record grouped by position (conflicts,
and whether the site holds the acknowledged value at the acknowledged offset), then by value
(lost, moved, duplicate). Nothing is collected but the small facts (promotes, log starts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ._history import History

if TYPE_CHECKING:
    from ._common import Job

__all__ = ["KINDS", "Ledger", "LedgerFrames", "anomalies", "audit", "prepare", "site_records"]

KINDS = ("lost", "moved", "duplicate", "inconsistent-offsets")
POSITION = ("topic", "partition", "offset")


@dataclass
class LedgerFrames:
    """The two inputs of :func:`anomalies`, placed and flagged.

    ``acks``: file, index, process, topic, partition, offset, value, site (where it happened),
    ``on_site`` (it happened on the audited site), ``excluded`` (a record its failover exported
    from that site: not compared for inconsistent offsets), ``exported`` (its value is in an
    export of its history). ``site``: topic, partition, offset, value, ``excluded`` (a record a
    failover exported from the audited site).
    """

    acks: DataFrame
    site: DataFrame


@dataclass
class Ledger:
    """One audit: its anomalies (not computed yet: a DataFrame) and what the summary says besides.

    ``partitions`` per topic-partition: ``counts`` (acknowledged, site_records) and ``ranges``
    (the site's [log start, log end) as its records show them). Call :meth:`count` once the
    anomalies are defined, and :meth:`release` once they are written.
    """

    anomalies: DataFrame
    totals: dict[str, int]
    partitions: list[dict[str, Any]]
    invalid: dict[str, int]
    notes: list[str]
    _unacknowledged: DataFrame
    _cached: list[DataFrame]

    def count(self) -> None:
        """Add the count of unacknowledged writes that landed (computing the grouped frames, which
        are cached for writing the anomalies)."""
        row = self._unacknowledged.first()
        self.totals["unacknowledged_landed"] = int(row[0] or 0) if row is not None else 0

    def release(self) -> None:
        for frame in self._cached:
            frame.unpersist()

    def finish(self, job: Job) -> dict[str, Any]:
        """Count, write the anomalies and the summary through ``job``, release; returns the summary."""
        self.count()
        try:
            return job.finish(self.anomalies, totals=self.totals, partitions=self.partitions, invalid=self.invalid)
        finally:
            self.release()


def audit(history: History, source: DataFrame, audited: Mapping[str, str | None], topics: Sequence[str]) -> Ledger:
    """The ledger of ``history`` against the site ``source`` (rows of :data:`~spark_jobs.schema.RECORD_SCHEMA`)
    on ``topics`` (acknowledgements to other topics are not examined)."""
    records, invalid_rows = site_records(source)
    records = records.persist(StorageLevel.MEMORY_AND_DISK)
    sends = history.ok_sends.where(F.col("topic").isin(*topics))
    frames = prepare(history, records, audited, sends=sends)
    cached = [records]
    found, by_value = anomalies(frames, cache=cached)
    unacknowledged = by_value.where(F.size("acks") == 0).select(F.sum(F.size("positions")))
    parts: dict[tuple[str, int], dict[str, Any]] = {}
    for row in sends.groupBy("topic", "partition").count().collect():
        part = parts.setdefault((row["topic"], row["partition"]), _partition(row["topic"], row["partition"]))
        part["counts"]["acknowledged"] = row["count"]
    stats = records.groupBy("topic", "partition").agg(
        F.count(F.lit(1)).alias("n"), F.min("offset").alias("start"), F.max("offset").alias("last")
    )
    for row in stats.collect():
        part = parts.setdefault((row["topic"], row["partition"]), _partition(row["topic"], row["partition"]))
        part["counts"]["site_records"] = row["n"]
        part["ranges"]["site"] = [row["start"], row["last"] + 1]
    partitions = [parts[key] for key in sorted(parts)]
    totals = {
        "history_files": len(history.files),
        "history_lines": history.lines,
        "torn_lines": len(history.torn),
        "acknowledged": sum(p["counts"]["acknowledged"] for p in partitions),
        "exported": history.exports().count(),
        "site_records": sum(p["counts"]["site_records"] for p in partitions),
        "partitions": len(partitions),
    }
    invalid = {row["error"]: row["count"] for row in invalid_rows.collect()}
    notes = [f"skipped a torn last line: {torn}" for torn in history.torn]
    return Ledger(found, totals, partitions, invalid, notes, unacknowledged, cached)


def _partition(topic: str, partition: int) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "counts": {"acknowledged": 0, "site_records": 0},
        "ranges": {"site": None},
    }


def site_records(source: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(the site's records: topic, partition, offset, value as text; its invalid rows by error)
    from a DataFrame of :data:`spark_jobs.schema.RECORD_SCHEMA`. Control records are not records."""
    valid = source.where(F.col("valid") & ~F.coalesce(F.col("isControl"), F.lit(False)))
    records = valid.select(*POSITION, F.col("value").cast("string").alias("value"))
    invalid = source.where(~F.col("valid")).groupBy(F.coalesce("error", F.lit("invalid")).alias("error")).count()
    return records, invalid


def prepare(
    history: History, site: DataFrame, audited: Mapping[str, str | None], *, sends: DataFrame | None = None
) -> LedgerFrames:
    """Place every acknowledged send of ``history`` (or ``sends``, some of them) on a site and
    flag what the exports excuse.

    ``audited``: per history file, the name that file gives the audited site (its primary, or
    ``--history-site``).
    """
    exports = history.exports()
    by_file: dict[str, list[tuple[int, str | None, str | None]]] = {}
    for p in history.promotes:
        by_file.setdefault(p.file, []).append((p.index, p.source, p.target))

    def came_from(file: str) -> Column:
        # An export belongs to the latest promote before it (else the first): it came from its source.
        return _era(by_file[file], use_target=False) if file in by_file else F.lit(None)

    def era(file: str) -> Column:
        return _era(by_file[file], use_target=True) if file in by_file else F.lit(history.primaries.get(file))

    # Only a history with promotes places records by its exports (the checkers' ``_exported_at``).
    owned = exports.where(F.col("file").isin(*by_file)) if by_file else exports.limit(0)
    at = owned.groupBy("file", *POSITION, "value").agg(F.max(_by_file(history, came_from)).alias("exported_from"))
    name = _by_file(history, lambda file: F.lit(audited.get(file)))
    acks = (
        (history.ok_sends if sends is None else sends)
        .join(F.broadcast(at), ["file", *POSITION, "value"], "left")
        .join(
            F.broadcast(exports.select("file", "value").distinct().withColumn("exported", F.lit(True))),
            ["file", "value"],
            "left",
        )
        .withColumn("site", F.coalesce(F.col("site"), F.col("exported_from"), _by_file(history, era)))
        .withColumn("on_site", F.col("site").eqNullSafe(name))
        .withColumn("excluded", F.col("exported_from").isNotNull() & F.col("exported_from").eqNullSafe(F.col("site")))
        .withColumn("exported", F.coalesce(F.col("exported"), F.lit(False)))
        .select("file", "index", "process", *POSITION, "value", "site", "on_site", "excluded", "exported")
    )
    from_audited = at.where(F.col("exported_from").eqNullSafe(name)).select(*POSITION, "value").distinct()
    from_audited = from_audited.withColumn("excluded", F.lit(True))
    flagged = site.join(F.broadcast(from_audited), [*POSITION, "value"], "left").withColumn(
        "excluded", F.coalesce(F.col("excluded"), F.lit(False))
    )
    return LedgerFrames(acks, flagged)


def _era(promotes: list[tuple[int, str | None, str | None]], *, use_target: bool) -> Column:
    """The site of an entry by the promotes before it: ``use_target`` the latest one's target (the
    site serving producers), else its source (where an export came from); before the first, its source."""
    site: Column = F.lit(promotes[0][1])
    for index, source, target in promotes:
        site = F.when(F.col("index") > index, F.lit(target if use_target else source)).otherwise(site)
    return site


def _by_file(history: History, choose: Callable[[str], Column]) -> Column:
    """One expression: ``choose(file)`` for the row's ``file`` (a history has a few files)."""
    chosen: Column = F.lit(None).cast("string")
    for file in history.files:
        chosen = F.when(F.col("file") == file, choose(file).cast("string")).otherwise(chosen)
    return chosen


def anomalies(frames: LedgerFrames, *, cache: list[DataFrame] | None = None) -> tuple[DataFrame, DataFrame]:
    """Every anomaly, one row each: kind, topic, partition, offset, detail, value, process, file,
    index, ``positions`` (where the site holds the value: moved, duplicate) and ``values`` (the
    values at one position: inconsistent-offsets); and the frame grouped by value (value, acks,
    positions). With ``cache``, the two grouped frames are persisted and appended to it."""
    acks, site = frames.acks, frames.site
    starts = site.groupBy("topic", "partition").agg(F.min("offset").alias("start"))
    acks = acks.join(F.broadcast(starts), ["topic", "partition"], "left").withColumn(
        "start", F.coalesce(F.col("start"), F.lit(0))
    )
    # 1. by position: the values one position holds, and whether the site holds each ack's value there.
    ack_entry = F.struct(
        F.lit(0).alias("rank"),
        F.col("file"),
        F.col("index"),
        F.col("value"),
        F.lit("send").alias("op"),
        F.col("process"),
        F.col("on_site"),
        F.col("excluded"),
        F.col("exported"),
        F.col("start"),
    )
    site_entry = F.struct(
        F.lit(1).alias("rank"),
        F.lit(None).cast("string").alias("file"),
        F.lit(None).cast("long").alias("index"),
        F.col("value"),
        F.lit("read").alias("op"),
        F.lit(None).cast("string").alias("process"),
        F.lit(True).alias("on_site"),
        F.col("excluded"),
        F.lit(False).alias("exported"),
        F.lit(None).cast("long").alias("start"),
    )
    by_position = (
        acks.select(*POSITION, ack_entry.alias("e"))
        .unionByName(site.select(*POSITION, site_entry.alias("e")))
        .groupBy(*POSITION)
        .agg(F.sort_array(F.collect_list("e")).alias("entries"))
    )
    if cache is not None:
        by_position = by_position.persist(StorageLevel.MEMORY_AND_DISK)
        cache.append(by_position)
    compared = F.filter("entries", lambda e: e["on_site"] & ~e["excluded"])
    conflicts = by_position.where(F.size(F.array_distinct(F.transform(compared, lambda e: e["value"]))) > 1)
    firsts = F.filter(
        compared,
        lambda e, i: ~F.exists(F.slice(compared, 1, i), lambda o: o["value"].eqNullSafe(e["value"])),
    )
    inconsistent = conflicts.select(
        F.lit("inconsistent-offsets").alias("kind"),
        *POSITION,
        F.transform(firsts, lambda e: F.struct(e["value"], e["op"], e["process"], e["file"], e["index"])).alias(
            "values"
        ),
    ).withColumn(
        "detail",
        F.format_string(
            "%s/%d offset %d holds %d different values: %s",
            "topic",
            "partition",
            "offset",
            F.size("values"),
            F.array_join(F.transform("values", _describe_value), "; "),
        ),
    )
    on_site_values = F.transform(F.filter("entries", lambda e: e["op"] == "read"), lambda e: e["value"])
    placed = by_position.select(
        *POSITION,
        F.explode(
            F.transform(
                F.filter("entries", lambda e: e["op"] == "send"),
                lambda e: F.struct(
                    e["file"],
                    e["index"],
                    e["process"],
                    e["value"],
                    e["exported"],
                    e["start"],
                    F.coalesce(F.array_contains(on_site_values, e["value"]), F.lit(False)).alias("here"),
                ),
            )
        ).alias("a"),
    ).select(*POSITION, "a.*")
    # 2. by value: where the site holds each value, and the acknowledgements of it.
    ack_side = placed.select(
        "value",
        F.struct("topic", "partition", "offset", "file", "index", "process", "exported", "start", "here").alias("ack"),
        F.lit(None).cast("struct<topic:string,partition:int,offset:bigint>").alias("at"),
    )
    site_side = site.where(F.col("value").isNotNull()).select(
        "value", F.lit(None).cast(ack_side.schema["ack"].dataType).alias("ack"), F.struct(*POSITION).alias("at")
    )
    by_value = (
        ack_side.unionByName(site_side)
        .groupBy("value")
        .agg(F.collect_list("ack").alias("acks"), F.sort_array(F.collect_set("at")).alias("positions"))
    )
    if cache is not None:
        by_value = by_value.persist(StorageLevel.MEMORY_AND_DISK)
        cache.append(by_value)
    held = F.array_join(F.transform("positions", lambda p: F.format_string("%s/%d offset %d", *_pos(p))), ", ")
    duplicate = by_value.where(F.size("positions") > 1).select(
        F.lit("duplicate").alias("kind"),
        F.col("positions")[0]["topic"].alias("topic"),
        F.col("positions")[0]["partition"].alias("partition"),
        F.col("positions")[0]["offset"].alias("offset"),
        F.format_string("value %s is at %d positions of the site: %s", "value", F.size("positions"), held).alias(
            "detail"
        ),
        "value",
        "positions",
    )
    acked = by_value.select("value", "positions", F.explode("acks").alias("a")).select("value", "positions", "a.*")
    acknowledged = F.format_string(
        "%s acknowledged %s at %s/%d offset %d (%s #%d)",
        *("process", "value", "topic", "partition", "offset", "file", "index"),
    )
    moved = acked.where((F.size("positions") > 0) & ~F.col("here")).select(
        F.lit("moved").alias("kind"),
        *POSITION,
        F.concat(acknowledged, F.lit("; the site holds it only at "), held).alias("detail"),
        "value",
        "process",
        "file",
        "index",
        "positions",
    )
    lost = acked.where((F.size("positions") == 0) & ~F.col("exported") & (F.col("offset") >= F.col("start"))).select(
        F.lit("lost").alias("kind"),
        *POSITION,
        F.concat(acknowledged, F.lit("; the site holds it nowhere")).alias("detail"),
        "value",
        "process",
        "file",
        "index",
    )
    columns = ["kind", *POSITION, "detail", "value", "process", "file", "index", "positions", "values"]
    out = lost.unionByName(moved, allowMissingColumns=True)
    out = out.unionByName(duplicate, allowMissingColumns=True)
    out = out.unionByName(inconsistent, allowMissingColumns=True)
    return out.select(*columns), by_value


def _pos(p: Column) -> tuple[Column, Column, Column]:
    return p["topic"], p["partition"], p["offset"]


def _describe_value(v: Column) -> Column:
    shown = F.coalesce(F.concat(F.lit("'"), v["value"], F.lit("'")), F.lit("null"))
    source = F.when(
        v["op"] == "send", F.format_string("acknowledged by %s, %s #%d", v["process"], v["file"], v["index"])
    ).otherwise(F.lit("on the site"))
    return F.concat(shown, F.lit(" ("), source, F.lit(")"))
