"""reconcile's comparison on synthetic DataFrames: every kind, log bounds, gaps, superseded, invalid rows, MM2."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from spark_jobs.jobs._reconcile_compare import Comparison, CopyWindow, Ranges, compare_offsets
from spark_jobs.jobs._reconcile_mm2 import (
    compare_mm2,
    copy_window,
    decode_sync_key,
    decode_sync_value,
    offset_syncs_topic,
    read_syncs,
)
from spark_jobs.schema import RECORD_SCHEMA

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)


def rec(
    offset: int | None,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    *,
    topic: str = "orders",
    partition: int = 0,
    headers: list[tuple[str, bytes | None]] | None = None,
    ts: datetime | None = T0,
    error: str | None = None,
) -> tuple[Any, ...]:
    """One row of RECORD_SCHEMA (``error`` set: an invalid row standing for unreadable data)."""
    if error is not None:
        return (None, None, topic, partition, offset, None, None, None, *(None,) * 9, False, error, None)
    hdrs = [{"key": k, "value": v} for k, v in (headers or [])]
    batch = (-1, -1, -1, 0, False, False, "none", offset, True)  # producer .. crcValid
    return (key, value, topic, partition, offset, ts, 0, hdrs, *batch, True, None, None)


def records(n: int, start: int = 0, **kw: Any) -> list[tuple[Any, ...]]:
    return [rec(o, f"k{o}".encode(), f"v{o}".encode(), **kw) for o in range(start, start + n)]


def frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, RECORD_SCHEMA)


def found(c: Comparison) -> set[tuple[str, str, int, int | None]]:
    return {(r["kind"], r["topic"], r["partition"], r["offset"]) for r in c.discrepancies.collect()}


def run(spark: Any, source: list[Any], target: list[Any], ranges: dict[Any, Ranges], **kw: Any) -> Comparison:
    return compare_offsets(frame(spark, source), frame(spark, target), ranges, **kw)


def whole(n: int, m: int | None = None) -> Ranges:
    return Ranges(source=(0, n), target=(0, n if m is None else m))


# -- offset-preserving ---------------------------------------------------------------------------------


def test_identical_sides_are_clean_and_every_record_is_matched(spark: Any) -> None:
    rows = records(20) + records(5, topic="payments", partition=2)
    c = run(spark, rows, rows, {("orders", 0): whole(20), ("payments", 2): whole(5)})
    assert found(c) == set()
    assert c.counts[("orders", 0)]["matched"] == 20 and c.counts[("payments", 2)]["matched"] == 5
    totals = c.totals()
    assert (totals["source_records"], totals["target_records"], totals["compared"]) == (25, 25, 25)
    assert sum(totals[k] for k in ("missing", "extra", "different", "behind", "ahead", "invalid_source")) == 0


def test_missing_extra_and_different_are_found_at_their_offsets_naming_the_fields(spark: Any) -> None:
    source = records(10)
    target = records(10)
    del target[3]  # missing at 3
    del source[6]  # extra at 6 (target index 5 is offset 6 after the deletion above)
    target[6] = rec(7, b"k7", b"v7-flipped")  # value
    target[7] = rec(8, b"k8", b"v8", headers=[("h", b"x")])  # headers
    target[8] = rec(9, b"other", b"v9", ts=datetime(2026, 1, 1, tzinfo=UTC))  # key and timestamp
    c = run(spark, source, target, {("orders", 0): whole(10)})
    rows = {r["offset"]: r for r in c.discrepancies.collect()}
    assert found(c) == {
        ("missing", "orders", 0, 3),
        ("extra", "orders", 0, 6),
        ("different", "orders", 0, 7),
        ("different", "orders", 0, 8),
        ("different", "orders", 0, 9),
    }
    assert rows[7]["detail"] == "differs in value"
    assert rows[8]["detail"] == "differs in headers"
    assert rows[9]["detail"] == "differs in key, timestamp"
    assert (rows[3]["source_offset"], rows[3]["target_offset"], rows[3]["key"]) == (3, None, b"k3")
    assert (rows[6]["source_offset"], rows[6]["target_offset"]) == (None, 6)
    assert rows[7]["source_hash"] != rows[7]["target_hash"]
    counts = c.counts[("orders", 0)]
    assert (counts["missing"], counts["extra"], counts["different"], counts["matched"]) == (1, 1, 3, 5)
    assert (counts["compared"], counts["source_records"], counts["target_records"]) == (9, 9, 9)


def test_a_null_key_or_value_differs_from_an_empty_one(spark: Any) -> None:
    source = [rec(0, None, b"v"), rec(1, b"k", None), rec(2, b"", b"")]
    target = [rec(0, b"", b"v"), rec(1, b"k", b""), rec(2, b"", b"")]
    c = run(spark, source, target, {("orders", 0): whole(3)})
    assert {(r["offset"], r["detail"]) for r in c.discrepancies.collect()} == {
        (0, "differs in key"),
        (1, "differs in value"),
    }


def test_behind_and_ahead_are_counted_and_found_only_when_required(spark: Any) -> None:
    ranges = {("orders", 0): Ranges(source=(0, 10), target=(0, 7)), ("orders", 1): Ranges((0, 3), (0, 5))}
    source = records(10) + records(3, partition=1)
    target = records(7) + records(5, partition=1)
    c = run(spark, source, target, ranges)
    assert found(c) == set()
    assert (c.counts[("orders", 0)]["behind"], c.counts[("orders", 1)]["ahead"]) == (3, 2)
    strict = run(spark, source, target, ranges, require_caught_up=True)
    assert found(strict) == {("behind", "orders", 0, o) for o in (7, 8, 9)} | {
        ("ahead", "orders", 1, 3),
        ("ahead", "orders", 1, 4),
    }


def test_a_partition_one_side_lacks_is_behind_or_ahead_not_missing(spark: Any) -> None:
    ranges = {("orders", 0): Ranges((0, 4), (0, 0)), ("fresh", 0): Ranges((0, 0), (0, 2))}
    c = run(spark, records(4), records(2, topic="fresh"), ranges)
    assert found(c) == set()
    assert (c.counts[("orders", 0)]["behind"], c.counts[("fresh", 0)]["ahead"]) == (4, 2)


def test_records_below_either_log_start_are_not_compared(spark: Any) -> None:
    # Retention: the target's log starts at 5 (records 0..4 deleted there), the source's at 2.
    ranges = {("orders", 0): Ranges(source=(2, 10), target=(5, 10))}
    c = run(spark, records(8, start=2), records(5, start=5), ranges)
    assert found(c) == set()
    counts = c.counts[("orders", 0)]
    assert (counts["not_compared"], counts["matched"], counts["compared"]) == (3, 5, 5)


def test_offset_gaps_on_both_sides_are_not_loss(spark: Any) -> None:
    # Compaction (or control batches) left the same holes on both sides.
    rows = [r for r in records(20) if r[4] % 3]
    c = run(spark, rows, rows, {("orders", 0): whole(20)})
    assert found(c) == set()
    assert c.counts[("orders", 0)]["matched"] == len(rows)


def test_a_missing_record_whose_key_has_a_later_record_there_is_superseded(spark: Any) -> None:
    source = [rec(0, b"a", b"1"), rec(1, b"b", b"1"), rec(2, b"a", b"2"), rec(3, b"c", b"1"), rec(4, b"n", b"x")]
    # The target was compacted: a@0 is gone (a@2 is later); b@1 is gone and b has no later record
    # (a real loss); the source was compacted too: c@3 gone there, c@5 later on the source.
    target = [rec(2, b"a", b"2"), rec(3, b"c", b"1"), rec(4, b"n", b"x")]
    source += [rec(5, b"c", b"2")]
    source.remove(rec(3, b"c", b"1"))
    target += [rec(5, b"c", b"2")]
    c = run(spark, source, target, {("orders", 0): whole(6)})
    assert found(c) == {("missing", "orders", 0, 1)}
    counts = c.counts[("orders", 0)]
    assert (counts["superseded"], counts["missing"], counts["matched"]) == (2, 1, 3)


def test_a_null_key_is_never_superseded(spark: Any) -> None:
    source = [rec(0, None, b"1"), rec(1, None, b"2")]
    c = run(spark, source, source[1:], {("orders", 0): whole(2)})
    assert found(c) == {("missing", "orders", 0, 0)}


def test_invalid_rows_are_counted_by_error_and_never_compared(spark: Any) -> None:
    source = records(10)
    # Target: a batch at 4 did not decode (its records 4..6 are unknown), and a torn tail at 9.
    target = [*records(4), rec(4, error="batch at offset 4 does not decode"), *records(2, start=7)]
    target.append(rec(9, error="torn tail"))
    c = run(spark, source, target, {("orders", 0): whole(10)})
    assert found(c) == set()
    assert c.invalid == {"target: batch at offset 4 does not decode": 1, "target: torn tail": 1}
    counts = c.counts[("orders", 0)]
    assert (counts["unreadable"], counts["invalid_target"], counts["matched"], counts["missing"]) == (4, 2, 6, 0)
    assert [e["offset"] for e in c.invalid_examples] == [4, 9]


def test_crc_mismatch_rows_on_the_source_are_invalid_and_the_target_copies_unreadable(spark: Any) -> None:
    source = [*records(3), rec(3, error="CRC mismatch in the batch at offset 3"), *records(2, start=4)]
    target = records(6)
    target[1] = rec(1, b"k1", b"changed")
    c = run(spark, source, target, {("orders", 0): whole(6)})
    assert found(c) == {("different", "orders", 0, 1)}
    assert c.invalid == {"source: CRC mismatch in the batch at offset 3": 1}
    assert c.totals()["unreadable"] == 1 and c.totals()["extra"] == 0


# -- MM2 --------------------------------------------------------------------------------------------------


def sync_key(topic: str, partition: int) -> bytes:
    data = topic.encode()
    return len(data).to_bytes(2, "big") + data + partition.to_bytes(4, "big", signed=True)


def sync_value(u: int, d: int) -> bytes:
    return u.to_bytes(8, "big", signed=True) + d.to_bytes(8, "big", signed=True)


def test_offset_syncs_decode_and_fold_into_lives() -> None:
    assert offset_syncs_topic("west") == "mm2-offset-syncs.west.internal"
    assert decode_sync_key(sync_key("orders", 3)) == ("orders", 3)
    assert decode_sync_value(bytes.fromhex("00" * 7 + "10" + "00" * 7 + "20")) == (16, 32)
    with pytest.raises(ValueError, match="16"):
        decode_sync_value(b"\x00" * 15)
    with pytest.raises(ValueError, match="do not make"):
        decode_sync_key(sync_key("orders", 3) + b"\x00")
    k = sync_key("orders", 0)
    syncs = read_syncs(
        [
            (k, sync_value(-1, -1)),  # the anchor
            (k, sync_value(4, 4)),
            (k, sync_value(4, 4)),  # written twice
            (k, sync_value(9, 9)),
            (b"\x00", sync_value(1, 1)),  # malformed key
            (sync_key("orders", 1), sync_value(7, 3)),
            (sync_key("orders", 1), None),  # tombstone
            (sync_key("gone", 0), sync_value(50, 50)),
            (sync_key("gone", 0), sync_value(2, 60)),  # went backwards: a new life
        ]
    )
    assert syncs.by_partition == {("orders", 0): [(-1, -1), (4, 4), (9, 9)], ("gone", 0): [(2, 60)]}
    assert syncs.malformed == 1
    assert copy_window([(-1, -1), (4, 4), (9, 9)], 0, 0) == CopyWindow(source=(0, 10), target=(0, 10))
    # Retention moved the source's start past the anchor: the window starts at the next usable sync.
    assert copy_window([(-1, -1), (4, 4), (9, 9)], 3, 0) == CopyWindow(source=(5, 10), target=(5, 10))
    assert copy_window([(9, 9)], 0, 0) == CopyWindow(source=(10, 10), target=(10, 10))
    assert copy_window([], 0, 0) is None


def test_mm2_matches_by_content_inside_the_window(spark: Any) -> None:
    # Source orders-0 holds 0..11; 0..9 were copied to west's east.orders-0, which held three
    # records before the copy began (anchor sync (-1, 2)); the last sync is (9, 13).
    src = records(12)
    old = [rec(None, b"old", str(i).encode()) for i in range(3)]
    altered = rec(None, b"k1", b"v1", headers=[("h", b"1")])  # source 1, changed on the way
    stray = rec(None, b"stray", b"x")  # produced to the target only
    copies = [*old, src[0], altered, src[2], src[2], src[3], src[5], stray, *src[6:10]]  # src 4 lost; 2 twice
    target = [(*r[:2], "east.orders", 0, o, *r[5:]) for o, r in enumerate(copies)]
    ranges = {("orders", 0): Ranges(source=(0, 12), target=(0, 14))}
    window = copy_window([(-1, 2), (9, 13)], 0, 0)
    assert window == CopyWindow(source=(0, 10), target=(3, 14))
    c = compare_mm2(frame(spark, src), frame(spark, target), ranges, {("orders", 0): window}, "east")
    rows = c.discrepancies.collect()
    assert {(r["kind"], r["offset"], r["source_offset"], r["target_offset"]) for r in rows} == {
        ("missing", 1, 1, None),
        ("missing", 4, 4, None),
        ("extra", 4, None, 4),  # the altered copy
        ("extra", 6, None, 6),  # the second copy of source 2
        ("extra", 9, None, 9),  # the stray record
    }
    assert {(r["topic"], r["target_topic"]) for r in rows} == {("orders", "east.orders")}
    counts = c.counts[("orders", 0)]
    assert (counts["behind"], counts["outside_window"], counts["matched"], counts["compared"]) == (2, 3, 8, 10)


def test_mm2_without_syncs_counts_everything_as_not_copied(spark: Any) -> None:
    ranges = {("orders", 0): Ranges(source=(0, 4), target=(0, 2))}
    target = records(2, topic="east.orders")
    c = compare_mm2(frame(spark, records(4)), frame(spark, target), ranges, {}, "east", require_caught_up=True)
    assert found(c) == {("behind", "orders", 0, o) for o in range(4)}
    assert c.counts[("orders", 0)]["unsynced"] == 2


def test_mm2_superseded_needs_a_later_paired_record_of_the_key(spark: Any) -> None:
    source = [rec(0, b"a", b"1"), rec(1, b"a", b"2"), rec(2, b"b", b"1")]
    target = [rec(0, b"a", b"2", topic="east.orders")]  # compacted: a@0 superseded; b lost
    ranges = {("orders", 0): Ranges(source=(0, 3), target=(0, 1))}
    window = CopyWindow(source=(0, 3), target=(0, 1))
    c = compare_mm2(frame(spark, source), frame(spark, target), ranges, {("orders", 0): window}, "east")
    assert found(c) == {("missing", "orders", 0, 2)}
    assert c.counts[("orders", 0)]["superseded"] == 1
