"""Record batches: varints, layout, CRC, codecs, control batches, and other clients' builders."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy, _DefaultRecordBatchPy
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from storage import CorruptBatchError, RecordFormatError
from storage.records import (
    HEADER_SIZE,
    BatchBuilder,
    Compression,
    ControlMarker,
    Record,
    RecordBatch,
    build_batch,
    build_control_batch,
    check_batch,
    crc_of,
    iter_batches,
    read_control_marker,
    read_header,
    recompress,
    set_base_offset,
    set_partition_leader_epoch,
)
from storage.records._varint import decode_varint, encode_varint, varint_size

ALL_CODECS = list(Compression)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trips(value: int) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert len(out) == varint_size(value)
    assert decode_varint(bytes(out), 0) == (value, len(out))


def test_varint_known_encodings() -> None:
    for value, encoded in [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")]:
        out = bytearray()
        encode_varint(value, out)
        assert bytes(out) == encoded


def test_varint_cut_short_is_an_error() -> None:
    with pytest.raises(RecordFormatError, match="past the end"):
        decode_varint(b"\x80\x80", 0)


record_values = st.one_of(st.none(), st.binary(max_size=200))
records_strategy = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**40),
        record_values,
        record_values,
        st.lists(st.tuples(st.text(max_size=10), record_values), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@given(records_strategy, st.sampled_from(ALL_CODECS))
def test_build_then_decode_gives_the_same_records(records: list, codec: Compression) -> None:
    data = build_batch(records, compression=codec, base_offset=100)
    batch = RecordBatch(data)
    assert batch.header.records_count == len(records)
    assert batch.header.compression == codec
    decoded = list(batch.records())
    assert decoded == [
        Record(100 + i, ts, key, value, tuple(headers)) for i, (ts, key, value, headers) in enumerate(records)
    ]
    assert batch.header.max_timestamp == max(r[0] for r in records)


def test_header_layout_matches_the_protocol() -> None:
    data = build_batch([(5, b"k", b"v")], producer_id=7, producer_epoch=2, base_sequence=11)
    assert HEADER_SIZE == 61
    h = check_batch(data)
    assert (h.magic, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (2, 7, 2, 11, 1)
    assert data[16] == 2 and h.size == len(data)


def test_offset_and_leader_epoch_rewrite_keeps_the_crc_valid() -> None:
    buf = bytearray(build_batch([(1, b"k", b"v"), (2, None, b"w")]))
    set_base_offset(buf, 1234)
    set_partition_leader_epoch(buf, 9)
    h = check_batch(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1234, 9, 1235)
    assert [r.offset for r in RecordBatch(buf).records()] == [1234, 1235]


@pytest.mark.parametrize("position", [21, 30, 61, -1])
def test_a_flipped_byte_under_the_crc_is_detected(position: int) -> None:
    buf = bytearray(build_batch([(1, b"key", b"value" * 10)]))
    buf[position] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC-32C mismatch"):
        check_batch(buf)


def test_torn_and_malformed_batches_name_the_problem() -> None:
    data = build_batch([(1, b"k", b"v")])
    with pytest.raises(CorruptBatchError, match="cut short"):
        check_batch(data[:-1])
    bad_magic = bytearray(data)
    bad_magic[16] = 1
    with pytest.raises(CorruptBatchError, match="magic 1"):
        check_batch(bad_magic)
    tiny = bytearray(data)
    tiny[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptBatchError, match="below the minimum"):
        check_batch(tiny)


def test_a_negative_last_offset_delta_is_refused_even_with_a_matching_crc() -> None:
    buf = bytearray(build_batch([(1, b"k", b"v")]))
    buf[23:27] = (-1).to_bytes(4, "big", signed=True)  # lastOffsetDelta, under the CRC
    buf[17:21] = crc_of(buf).to_bytes(4, "big")
    with pytest.raises(CorruptBatchError, match="negative lastOffsetDelta -1"):
        check_batch(buf)


def test_a_batch_is_checked_within_its_bounds_at_any_position() -> None:
    a, b = build_batch([(1, b"a", b"1")]), build_batch([(2, b"b", b"2")] * 3)
    data = a + b
    assert check_batch(data, len(a)).records_count == 3
    assert check_batch(data, 0, len(a)).records_count == 1
    with pytest.raises(CorruptBatchError, match="cut short") as info:
        check_batch(data, len(a), len(data) - 1)
    assert info.value.position == len(a)


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", list(Compression))
def test_recompress_keeps_every_record_and_the_producer_fields(source: Compression, target: Compression) -> None:
    records = [(1_700_000_000_000 + i, f"k{i}".encode() if i % 3 else None, b"v" * (i * 40)) for i in range(30)]
    original = build_batch(records, compression=source, producer_id=77, producer_epoch=2, base_sequence=500)
    again = recompress(original, target)
    before, after = read_header(original), check_batch(again)  # a valid batch: its CRC is right
    assert after.compression == target
    same = ("last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence")
    assert [getattr(after, f) for f in same] == [getattr(before, f) for f in same]
    assert after.records_count == 30
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    assert [(r.offset, r.timestamp, r.key, r.value) for r in RecordBatch(again).records()] == [
        (r.offset, r.timestamp, r.key, r.value) for r in RecordBatch(original).records()
    ]
    # The Python clients read it too.
    assert [r.value for r in DefaultRecordBatch(bytearray(again))] == [v for _, _, v in records]


def test_recompress_refuses_a_damaged_batch() -> None:
    data = bytearray(build_batch([(1, b"k", b"v" * 100)], compression=Compression.GZIP))
    data[70] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC-32C mismatch"):
        recompress(data, Compression.LZ4)


def test_iter_batches_walks_concatenated_batches() -> None:
    a, b = build_batch([(1, b"a", b"1")]), build_batch([(2, b"b", b"2")] * 3, compression=Compression.GZIP)
    assert [(pos, h.records_count) for pos, h in iter_batches(a + b)] == [(0, 1), (len(a), 3)]
    with pytest.raises(CorruptBatchError) as info:
        list(iter_batches(a + b[:-3]))
    assert info.value.position == len(a)


def test_control_batch_is_a_transaction_marker() -> None:
    data = build_control_batch(commit=True, timestamp=9, producer_id=5, producer_epoch=1, coordinator_epoch=3)
    batch = RecordBatch(data)
    assert batch.header.is_control and batch.header.is_transactional
    (record,) = list(batch.records())
    assert record.key == b"\x00\x00\x00\x01"  # version 0, type COMMIT
    assert record.value == b"\x00\x00\x00\x00\x00\x03"
    assert batch.header.base_sequence == -1 and batch.header.producer_id == 5


def test_a_marker_reads_back_as_its_type_and_coordinator_epoch() -> None:
    for commit in (True, False):
        data = build_control_batch(commit=commit, timestamp=9, producer_id=5, producer_epoch=1, coordinator_epoch=7)
        assert read_control_marker(data) == ControlMarker(commit, 7)


def test_control_batches_of_other_types_are_no_markers_and_bad_ones_are_refused() -> None:
    leader_change = BatchBuilder(control=True)
    leader_change.append(1, b"\x00\x00\x00\x02", b"whatever")
    assert read_control_marker(leader_change.build()) is None
    with pytest.raises(RecordFormatError, match="not a control batch"):
        read_control_marker(build_batch([(1, b"k", b"v")]))
    short_key = BatchBuilder(control=True)
    short_key.append(1, b"\x00", b"")
    with pytest.raises(RecordFormatError, match="no control record key"):
        read_control_marker(short_key.build())
    no_epoch = BatchBuilder(control=True, transactional=True)
    no_epoch.append(1, b"\x00\x00\x00\x00", None)
    with pytest.raises(RecordFormatError, match="no coordinator epoch"):
        read_control_marker(no_epoch.build())


def test_log_append_time_batches_report_the_batch_timestamp() -> None:
    builder = BatchBuilder(log_append_time=True)
    builder.append(100, b"k", b"v")
    builder.append(50, b"k", b"v")
    assert [r.timestamp for r in RecordBatch(builder.build()).records()] == [100, 100]


def test_an_empty_batch_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()


def test_damaged_compressed_data_is_a_format_error() -> None:
    buf = bytearray(build_batch([(1, b"k", b"v" * 100)], compression=Compression.ZSTD))
    buf[HEADER_SIZE + 5] ^= 0xFF
    batch = RecordBatch(buf, validate=False)
    with pytest.raises(RecordFormatError):
        list(batch.records())


# -- other clients' record builders ------------------------------------------------------

KAFKA_PYTHON_CODECS = {
    Compression.NONE: 0,
    Compression.GZIP: 1,
    Compression.SNAPPY: 2,
    Compression.LZ4: 3,
    Compression.ZSTD: 4,
}


def _sample_records() -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [
        (
            1_700_000_000_000 + i,
            None if i % 3 == 0 else f"key-{i}".encode(),
            None if i % 5 == 0 else b"v" * i,
            [("h", b"x"), ("n", None)] if i % 2 else [],
        )
        for i in range(40)
    ]


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_reads_our_batches_and_we_read_theirs(codec: Compression) -> None:
    records = _sample_records()
    ours = build_batch(records, compression=codec, producer_id=3, producer_epoch=1, base_sequence=0)
    theirs_view = DefaultRecordBatch(ours)
    assert theirs_view.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in theirs_view]
    assert got == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=KAFKA_PYTHON_CODECS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (ts, k, v, h) in enumerate(records):
        builder.append(i, timestamp=ts, key=k, value=v, headers=h)
    theirs = bytes(builder.build())
    decoded = list(RecordBatch(theirs).records())
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)
    ]
    assert check_batch(theirs).compression == codec


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
def test_aiokafka_reads_our_batches_and_we_read_theirs(codec: Compression) -> None:
    records = _sample_records()
    ours = build_batch(records, compression=codec)
    view = _DefaultRecordBatchPy(ours)
    assert view.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in view]
    assert got == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]

    builder = _DefaultRecordBatchBuilderPy(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (ts, k, v, h) in enumerate(records):
        builder.append(i, timestamp=ts, key=k, value=v, headers=h)
    theirs = bytes(builder.build())
    decoded = list(RecordBatch(theirs).records())
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)
    ]
