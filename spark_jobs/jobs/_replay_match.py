"""Replay's decisions, as Spark columns: which exported records are selected, where each goes on
the new primary, and which of them the new primary already holds.

**Selection.** A record is ``filtered`` (with the reason) when its topic is not among
``--topics``, its timestamp is before ``--from`` or at or after ``--to``, or it was written in a
transaction (unless ``--include-transactional``): the export holds no transaction markers, so it
cannot say whether that transaction committed, and a replayed record is not transactional.

**Placement.** A record goes to the partition it had in the export. When the topic on the new
primary has fewer partitions than the export names (some exported partition does not exist
there), every record of that topic is placed as Kafka's Java producer places a keyed record:
``(murmur2(key) & 0x7fffffff) % partitions`` (:func:`murmur2`, librdkafka's ``murmur2_random``),
so a key's records stay together and land where the topic's producers send that key; a record
with a null key goes to ``partition % partitions`` (deterministic, so that a second run looks for
it where the first one wrote it).

**Presence.** Two records are the same when their topic, target partition, key, value, headers
(names, values and order) and timestamp are equal: the content hash is the SHA-256 of the JSON
of ``(key, value, headers)`` (Spark's ``to_json``: binary as base64, a null field left out, so a
null and an empty value differ). On a topic whose ``message.timestamp.type`` is LogAppendTime the
new primary stamps its own time on every write, so there the timestamp is not compared. Records
are matched as multisets: when the export holds a record n times and the new primary holds it m
times, min(n, m) are ``present`` and the rest are replayed; the k-th copy in export order
(epoch, link, partition, offset) matches the k-th copy in the new primary's offset order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

FILTERED, PRESENT, WOULD_REPLAY, REPLAYED, MISSING = "filtered", "present", "would-replay", "replayed", "missing"

BY_KEY_NOTE = " (placed by key: the topic has fewer partitions now)"

#: Export order: how records of one target partition are numbered, matched and written.
EXPORT_ORDER = ("epoch", "link", "partition", "offset")

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a non-null ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# A lambda: pyspark reads a def's type hints to guess a pandas UDF (and warns when it cannot).
_key_partition = F.udf(lambda key, count: None if key is None else key_partition(bytes(key), count), IntegerType())


@dataclass(frozen=True)
class Rules:
    """What replay selects and how it places and matches, decided in the driver."""

    topics: frozenset[str] | None = None  # None: every topic of the export
    from_ms: int | None = None
    to_ms: int | None = None
    include_transactional: bool = False
    #: topic -> its partition count on the new primary, for topics placed by key.
    by_key: Mapping[str, int] = field(default_factory=dict)
    #: topics whose new primary stamps LogAppendTime (their timestamps are not compared).
    log_append: frozenset[str] = frozenset()


def content_hash(key: Column, value: Column, headers: Column) -> Column:
    """SHA-256 (hex) of a record's key, value and headers, the same for both sides."""
    return F.sha2(F.to_json(F.struct(key.alias("key"), value.alias("value"), headers.alias("headers"))), 256)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def filter_reason(rules: Rules) -> Column:
    """Why a record is not replayed (null when it is selected)."""
    reason = F.when(F.lit(False), F.lit(None).cast("string"))
    if rules.topics is not None:
        reason = reason.when(~F.col("topic").isin(*sorted(rules.topics)), F.lit("topic not among --topics"))
    if rules.from_ms is not None:
        before = f"timestamp before --from {_iso(rules.from_ms)}"
        reason = reason.when(F.col("timestampMs") < rules.from_ms, F.lit(before))
    if rules.to_ms is not None:
        after = f"timestamp at or after --to {_iso(rules.to_ms)}"
        reason = reason.when(F.col("timestampMs") >= rules.to_ms, F.lit(after))
    if not rules.include_transactional:
        reason = reason.when(
            F.col("isTransactional"),
            F.lit("transactional: the export cannot say whether it committed (--include-transactional replays it)"),
        )
    return reason


def target_partition(rules: Rules) -> Column:
    """Where a selected record goes on the new primary (see the module docstring)."""
    placed = F.col("partition")
    for topic, count in sorted(rules.by_key.items()):
        by_key = F.coalesce(_key_partition(F.col("key"), F.lit(count)), F.pmod(F.col("partition"), F.lit(count)))
        placed = F.when(F.col("topic") == topic, by_key).otherwise(placed)
    return placed


def _match_time(rules: Rules, millis: Column) -> Column:
    if not rules.log_append:
        return millis
    return F.when(F.col("topic").isin(*sorted(rules.log_append)), F.lit(-1).cast("long")).otherwise(millis)


def classify(records: DataFrame, target: DataFrame, rules: Rules, pending: str = WOULD_REPLAY) -> DataFrame:
    """Each exported record (``records``: ``topic``, ``partition``, ``offset``, ``epoch``, ``link``,
    ``timestampMs``, ``isTransactional``, ``key``, ``value``, ``headers``, any more columns kept)
    with ``kind`` (filtered, present, or ``pending`` for one the new primary lacks), ``detail``,
    ``targetPartition``, ``targetOffset`` (where a present record is) and ``contentHash``.

    ``target``: the new primary's records (``spark_jobs.schema`` columns; only valid data rows
    are compared) over the ranges the caller chose to look in.
    """
    reason = filter_reason(rules)
    marked = records.select(
        "*",
        reason.alias("_reason"),
        F.when(reason.isNull(), target_partition(rules)).alias("targetPartition"),
        content_hash(F.col("key"), F.col("value"), F.col("headers")).alias("contentHash"),
        _match_time(rules, F.col("timestampMs")).alias("_matchTime"),
    )
    group = ("topic", "targetPartition", "contentHash", "_matchTime")
    numbered = marked.where(F.col("_reason").isNull()).select(
        *(F.col(c) for c in (*EXPORT_ORDER, "topic", "targetPartition", "contentHash", "_matchTime")),
        F.row_number().over(Window.partitionBy(*group).orderBy(*EXPORT_ORDER)).alias("_copy"),
    )
    held = target.where(F.col("valid") & ~F.coalesce(F.col("isControl"), F.lit(False))).select(
        F.col("topic"),
        F.col("partition").alias("targetPartition"),
        F.col("offset").alias("targetOffset"),
        content_hash(F.col("key"), F.col("value"), F.col("headers")).alias("contentHash"),
        _match_time(rules, F.unix_millis(F.col("timestamp"))).alias("_matchTime"),
    )
    held = held.select("*", F.row_number().over(Window.partitionBy(*group).orderBy("targetOffset")).alias("_copy"))
    found = numbered.join(held, on=[*group, "_copy"], how="inner").select(*EXPORT_ORDER, "topic", "targetOffset")
    joined = marked.join(found, on=[*EXPORT_ORDER, "topic"], how="left")
    where = F.concat(F.col("topic"), F.lit("-"), F.col("targetPartition").cast("string"))
    kind = (
        F.when(F.col("_reason").isNotNull(), F.lit(FILTERED))
        .when(F.col("targetOffset").isNotNull(), F.lit(PRESENT))
        .otherwise(F.lit(pending))
    )
    placed_by_key = F.col("topic").isin(*sorted(rules.by_key)) if rules.by_key else F.lit(False)
    detail = (
        F.when(F.col("_reason").isNotNull(), F.col("_reason"))
        .when(
            F.col("targetOffset").isNotNull(),
            F.concat(F.lit("on the new primary: "), where, F.lit(" offset "), F.col("targetOffset").cast("string")),
        )
        .otherwise(
            F.concat(
                F.lit("to "),
                where,
                F.when(placed_by_key, F.lit(BY_KEY_NOTE)).otherwise(F.lit("")),
            )
        )
    )
    return joined.select("*", kind.alias("kind"), detail.alias("detail")).drop("_reason", "_matchTime")
