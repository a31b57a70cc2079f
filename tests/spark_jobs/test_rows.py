"""spark_jobs._rows: batches as stored -> Arrow rows of the shared schema (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_jobs._rows import BatchRows, Bounds, Rows
from spark_jobs.schema import ARROW_BATCH_SCHEMA, ARROW_SCHEMA, BATCH_COLUMNS, BATCH_SCHEMA, COLUMNS, RECORD_SCHEMA
from storage.records import (
    Compression,
    LeaderEpoch,
    Offset,
    build_batch,
    build_control_batch,
    set_base_offset,
    set_partition_leader_epoch,
)

T0 = 1_700_000_000_000


def rows_of(rows: Rows) -> list[dict[str, object]]:
    batch = rows.flush()
    assert batch is not None and batch.schema == ARROW_SCHEMA
    return batch.to_pylist()


def test_the_spark_and_arrow_schemas_agree() -> None:
    assert tuple(RECORD_SCHEMA.fieldNames()) == COLUMNS
    assert COLUMNS[:8] == ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_decodes_to_the_same_rows(codec: Compression) -> None:
    batch = build_batch(
        [(T0, b"k0", b"v0", (("h", b"x"), ("n", None))), (T0 + 5, None, b"v1"), (T0 + 9, b"k2", None)],
        compression=codec,
        base_offset=40,
        producer_id=7,
        producer_epoch=2,
        base_sequence=100,
    )
    rows = Rows()
    assert rows.add_batch(batch, "orders", 3, "/d/orders-3/0.log") == 43
    got = rows_of(rows)
    assert [r["offset"] for r in got] == [40, 41, 42]
    assert [r["key"] for r in got] == [b"k0", None, b"k2"]
    assert [r["value"] for r in got] == [b"v0", b"v1", None]
    assert got[0]["headers"] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert got[1]["headers"] == []
    assert [r["sequence"] for r in got] == [100, 101, 102]
    assert {(r["producerId"], r["producerEpoch"], r["codec"], r["batchOffset"]) for r in got} == {
        (7, 2, codec.name.lower(), 40)
    }
    assert [int(r["timestamp"].timestamp() * 1000) for r in got] == [T0, T0 + 5, T0 + 9]
    assert {(r["timestampType"], r["valid"], r["crcValid"], r["error"], r["isControl"]) for r in got} == {
        (0, True, True, None, False)
    }
    assert {(r["topic"], r["partition"], r["segment"]) for r in got} == {("orders", 3, "/d/orders-3/0.log")}


def test_a_crc_mismatch_keeps_the_rows_but_marks_them_invalid() -> None:
    batch = bytearray(build_batch([(T0, b"k", b"value")], base_offset=5))
    batch[-2] ^= 0xFF  # inside the value, after the CRC'd header fields
    rows = Rows()
    rows.add_batch(batch, "t", 0, None)
    (row,) = rows_of(rows)
    assert (row["valid"], row["crcValid"], row["offset"]) == (False, False, 5)
    assert "CRC mismatch" in row["error"]
    assert rows.invalid == 1


def test_a_batch_that_does_not_decode_is_one_invalid_row() -> None:
    batch = bytearray(build_batch([(T0, b"k", b"v" * 50)], compression=Compression.GZIP, base_offset=9))
    batch[70:80] = b"\x00" * 10  # damage the gzip stream
    rows = Rows()
    assert rows.add_batch(batch, "t", 1, "seg") == 10
    (row,) = rows_of(rows)
    assert (row["valid"], row["offset"], row["batchOffset"], row["codec"], row["key"]) == (False, 9, 9, "gzip", None)
    assert "does not decode" in row["error"] and "CRC" in row["error"]
    assert rows.invalid == 1


def test_control_batches_are_skipped_unless_asked_for() -> None:
    marker = build_control_batch(commit=True, timestamp=T0, producer_id=3, producer_epoch=0, base_offset=12)
    rows = Rows()
    assert rows.add_batch(marker, "t", 0, None) == 13
    assert rows.flush() is None
    rows = Rows(include_control=True)
    rows.add_batch(marker, "t", 0, None)
    (row,) = rows_of(rows)
    assert (row["isControl"], row["isTransactional"], row["offset"]) == (True, True, 12)


def test_bounds_keep_offsets_and_times_in_their_half_open_ranges() -> None:
    batch = build_batch([(T0 + i * 10, None, str(i).encode()) for i in range(10)], base_offset=100)
    rows = Rows(bounds=Bounds(start_offset=102, end_offset=108, start_ms=T0 + 30, end_ms=T0 + 70))
    rows.add_batch(batch, "t", 0, None)
    assert [r["offset"] for r in rows_of(rows)] == [103, 104, 105, 106]
    outside = Rows(bounds=Bounds(start_offset=200))
    outside.add_batch(batch, "t", 0, None)
    assert outside.flush() is None


def test_an_invalid_row_outside_the_offset_bounds_is_not_emitted() -> None:
    rows = Rows(bounds=Bounds(start_offset=10))
    rows.add_invalid("t", 0, 3, "torn tail", "seg")
    assert rows.flush() is None and rows.invalid == 0
    rows.add_invalid("t", 0, None, "torn tail", "seg")
    (row,) = rows_of(rows)
    assert (row["valid"], row["offset"], row["error"]) == (False, None, "torn tail")


def test_flush_starts_afresh_and_full_caps_a_batch() -> None:
    rows = Rows()
    big = build_batch([(T0, None, b"x" * 1000) for _ in range(100)])
    while not rows.full:
        rows.add_batch(big, "t", 0, None)
    first = rows.flush()
    assert first is not None and isinstance(first, pa.RecordBatch) and first.num_rows >= 100
    assert len(rows) == 0 and rows.flush() is None


# -- rows=batches ----------------------------------------------------------------------------------


def batch_rows_of(rows: BatchRows) -> list[dict[str, object]]:
    batch = rows.flush()
    assert batch is not None and batch.schema == ARROW_BATCH_SCHEMA
    return batch.to_pylist()


def test_the_spark_and_arrow_batch_schemas_agree() -> None:
    assert tuple(BATCH_SCHEMA.fieldNames()) == BATCH_COLUMNS


@pytest.mark.parametrize("codec", list(Compression))
def test_one_row_per_batch_with_its_header_and_a_digest_blind_to_offset_and_epoch(codec: Compression) -> None:
    records = [(T0, b"k0", b"v0", (("h", b"x"),)), (T0 + 5, None, b"v1"), (T0 + 9, b"k2", None)]
    batch = build_batch(records, compression=codec, base_offset=40, producer_id=7, producer_epoch=2, base_sequence=9)
    rows = BatchRows()
    assert rows.add_batch(batch, "orders", 3, "/d/orders-3/0.log") == 43
    moved = bytearray(batch)
    set_base_offset(moved, Offset(1000))
    set_partition_leader_epoch(moved, LeaderEpoch(12))  # what the target's broker rewrites
    assert rows.add_batch(moved, "orders", 3, None) == 1003
    other = build_batch([*records[:2], (T0 + 9, b"k2", b"")], compression=codec, base_offset=40, producer_id=7)
    rows.add_batch(other, "orders", 3, None)
    first, second, third = batch_rows_of(rows)
    assert (first["offset"], first["lastOffset"], first["records"], first["codec"]) == (40, 42, 3, codec.name.lower())
    assert (first["producerId"], first["producerEpoch"], first["baseSequence"]) == (7, 2, 9)
    assert int(first["maxTimestamp"].timestamp() * 1000) == T0 + 9  # type: ignore[attr-defined]
    assert (first["valid"], first["crcValid"], first["error"], first["bytes"]) == (True, True, None, len(batch))
    assert len(first["digest"]) == 16  # type: ignore[arg-type]
    assert (second["offset"], second["leaderEpoch"]) == (1000, 12)
    assert second["digest"] == first["digest"]
    assert third["digest"] != first["digest"]  # a value null in one, empty in the other


def test_a_batch_row_is_invalid_on_a_crc_mismatch_and_control_batches_are_left_out() -> None:
    batch = bytearray(build_batch([(T0, b"k", b"value")], base_offset=5))
    batch[-2] ^= 0xFF
    rows = BatchRows()
    rows.add_batch(batch, "t", 0, None)
    rows.add_batch(
        build_control_batch(commit=True, timestamp=T0, base_offset=6, producer_id=1, producer_epoch=0), "t", 0, None
    )
    rows.add_invalid("t", 0, 7, "torn tail: 3 bytes left", "/d/t-0/0.log")
    crc, torn = batch_rows_of(rows)
    assert (crc["offset"], crc["valid"], crc["crcValid"]) == (5, False, False)
    assert crc["error"] == "CRC mismatch in the batch at offset 5"
    assert (torn["offset"], torn["valid"], torn["error"], torn["digest"]) == (7, False, "torn tail: 3 bytes left", None)
    assert rows.invalid == 2
    with_control = BatchRows(include_control=True)
    marker_batch = build_control_batch(commit=True, timestamp=T0, base_offset=6, producer_id=1, producer_epoch=0)
    with_control.add_batch(marker_batch, "t", 0, None)
    (marker,) = batch_rows_of(with_control)
    assert (marker["isControl"], marker["records"], marker["valid"]) == (True, 1, True)


def test_batch_rows_keep_the_batches_that_overlap_the_bounds() -> None:
    rows = BatchRows(bounds=Bounds(start_offset=12, end_offset=20))
    for base in (0, 10, 20):
        rows.add_batch(build_batch([(T0, b"k", b"v")] * 10, base_offset=base), "t", 0, None)
    assert [r["offset"] for r in batch_rows_of(rows)] == [10]


def test_a_batch_that_starts_before_the_bounds_is_left_to_the_earlier_reader_when_asked() -> None:
    straddling = build_batch([(T0, b"k", b"v")] * 10, base_offset=95)  # 95..104
    mine = BatchRows(bounds=Bounds(start_offset=100, end_offset=200))
    theirs = BatchRows(bounds=Bounds(start_offset=100, end_offset=200), own_earlier=False)
    for rows in (mine, theirs):
        rows.add_batch(straddling, "t", 0, None)
        rows.add_batch(build_batch([(T0, b"k", b"v")], base_offset=105), "t", 0, None)
    assert [r["offset"] for r in batch_rows_of(mine)] == [95, 105]
    assert [r["offset"] for r in batch_rows_of(theirs)] == [105]
