"""What the mm2 copier does to batches (no processes): read_committed filtering, header rewrite,
rebuilds, skip counting; and the offset-sync store's never-skip translation."""

from __future__ import annotations

import random
import struct

import crc32c
import pytest

from mirror._mm2 import OffsetSyncStore, TransactionFilter, forward, rewrite_header, sync_for
from storage.records import (
    BatchBuilder,
    Compression,
    RecordBatch,
    build_batch,
    build_control_batch,
    check_batch,
    read_header,
)


def txn_batch(base: int, pid: int, values: list[bytes], *, codec: Compression = Compression.NONE) -> bytes:
    builder = BatchBuilder(
        compression=codec, base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
    )
    for i, v in enumerate(values):
        builder.append(1_000 + base + i, None, v)
    return builder.build()


def plain(base: int, values: list[bytes], codec: Compression = Compression.NONE) -> bytes:
    return build_batch([(1_000 + base + i, b"k", v) for i, v in enumerate(values)], base_offset=base, compression=codec)


def marker(base: int, pid: int, *, commit: bool) -> bytes:
    return build_control_batch(commit=commit, timestamp=5, producer_id=pid, producer_epoch=0, base_offset=base)


def verdicts(log: bytes, aborted: list[tuple[int, int]]) -> list[tuple[int, str]]:
    view = memoryview(log)
    f = TransactionFilter(aborted)
    out = []
    pos = 0
    while pos < len(view):
        h = read_header(view, pos)
        out.append((h.base_offset, f.verdict(view[pos : pos + h.size], h)))
        pos += h.size
    return out


def test_read_committed_drops_aborted_transactions_and_markers_as_kafka_consumers_do() -> None:
    log = b"".join(
        [
            plain(0, [b"p0", b"p1"]),
            txn_batch(2, 10, [b"c2", b"c3"]),  # committed below
            txn_batch(4, 20, [b"a4", b"a5"], codec=Compression.GZIP),  # aborted
            marker(6, 10, commit=True),
            txn_batch(7, 20, [b"a7"]),  # same aborted transaction
            marker(8, 20, commit=False),
            txn_batch(9, 20, [b"n9", b"n10"]),  # a new transaction of producer 20, committed
            marker(11, 20, commit=True),
            plain(12, [b"p12"]),
        ]
    )
    assert verdicts(log, [(20, 4)]) == [
        (0, "data"),
        (2, "data"),
        (4, "aborted"),
        (6, "control"),
        (7, "aborted"),
        (8, "control"),
        (9, "data"),
        (11, "control"),
        (12, "data"),
    ]
    # Without aborted transactions in the answer, every data batch is kept (markers never are).
    kinds = ["data", "data", "data", "control", "data", "control", "data", "control", "data"]
    assert [v for _, v in verdicts(log, [])] == kinds


def test_forwarded_batches_keep_their_records_and_codec_with_only_producer_fields_changed() -> None:
    original = txn_batch(500, 77, [b"x" * 100, b"y", b"z"], codec=Compression.ZSTD)
    out, skipped = forward(memoryview(original), read_header(original), 500, 0)
    assert out is not None and skipped == 0
    header = check_batch(out.payload)  # a valid CRC-32C
    assert (header.base_offset, header.producer_id, header.producer_epoch, header.base_sequence) == (0, -1, -1, -1)
    assert not header.is_transactional and header.compression == Compression.ZSTD
    assert out.payload[61:] == original[61:]  # the compressed records are the very same bytes
    assert (out.records, out.last_upstream) == (3, 502)
    assert [r.value for r in RecordBatch(out.payload).records()] == [b"x" * 100, b"y", b"z"]
    # The rewrite is exactly: those fields, then the CRC over bytes 21.. (PROTOCOL_NOTES layout).
    manual = bytearray(original)
    struct.pack_into(">q", manual, 0, 0)
    struct.pack_into(">i", manual, 12, -1)
    struct.pack_into(">h", manual, 21, struct.unpack_from(">h", manual, 21)[0] & ~0x10)
    struct.pack_into(">qhi", manual, 43, -1, -1, -1)
    struct.pack_into(">I", manual, 17, crc32c.crc32c(bytes(manual[21:])))
    assert rewrite_header(original) == bytes(manual)


def test_a_batch_starting_before_the_position_or_with_records_to_skip_is_rebuilt() -> None:
    batch = plain(10, [b"a", b"b", b"c", b"d"], Compression.LZ4)
    header = read_header(batch)
    out, skipped = forward(memoryview(batch), header, 12, 0)  # the copy is at offset 12
    assert out is not None and skipped == 0
    rebuilt = check_batch(out.payload)
    assert rebuilt.compression == Compression.LZ4 and rebuilt.producer_id == -1
    assert [(r.value, r.timestamp) for r in RecordBatch(out.payload).records()] == [(b"c", 1_012), (b"d", 1_013)]
    assert (out.records, out.last_upstream) == (2, 13)
    out, skipped = forward(memoryview(batch), header, 10, 3)  # three of them are on the target already
    assert out is not None and skipped == 3
    assert [r.value for r in RecordBatch(out.payload).records()] == [b"d"]
    out, skipped = forward(memoryview(batch), header, 10, 9)
    assert out is None and skipped == 4


def hand_built_batch_with_holes() -> bytes:
    """Records at offset deltas 0, 2 and 5 of a batch whose lastOffsetDelta is 5 (a compacted batch),
    written from the RecordBatch v2 layout by hand."""

    def varint(n: int) -> bytes:
        z = (n << 1) ^ (n >> 63)
        out = bytearray()
        while True:
            b = z & 0x7F
            z >>= 7
            if z:
                out.append(b | 0x80)
            else:
                out.append(b)
                return bytes(out)

    records = b""
    for delta, value in [(0, b"r0"), (2, b"r2"), (5, b"r5")]:
        body = b"\x00" + varint(delta) + varint(delta) + varint(-1) + varint(len(value)) + value + varint(1)
        body += varint(1) + b"h" + varint(1) + bytes([48 + delta])
        records += varint(len(body)) + body
    header = struct.pack(">qiibIhiqqqhii", 100, 49 + len(records), 0, 2, 0, 0, 5, 2_000, 2_005, -1, -1, -1, 3)
    batch = bytearray(header + records)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_a_compacted_batch_with_holes_is_rebuilt_with_consecutive_offsets() -> None:
    batch = hand_built_batch_with_holes()
    header = check_batch(batch)
    assert (header.records_count, header.last_offset_delta) == (3, 5)
    out, _ = forward(memoryview(batch), header, 100, 0)
    assert out is not None
    rebuilt = check_batch(out.payload)
    assert (rebuilt.records_count, rebuilt.last_offset_delta) == (3, 2)
    records = list(RecordBatch(out.payload).records())
    assert [(r.offset, r.value, r.timestamp, r.headers) for r in records] == [
        (0, b"r0", 2_000, (("h", b"0"),)),
        (1, b"r2", 2_002, (("h", b"2"),)),
        (2, b"r5", 2_005, (("h", b"5"),)),
    ]
    assert out.last_upstream == 105


def test_log_append_time_batches_become_create_time_with_the_append_time() -> None:
    builder = BatchBuilder(log_append_time=True)
    builder.append(1, b"k", b"v1")
    builder.append(9, b"k", b"v2")
    batch = builder.build()
    out, _ = forward(memoryview(batch), read_header(batch), 0, 0)
    assert out is not None
    header = check_batch(out.payload)
    assert not header.is_log_append_time
    assert [r.timestamp for r in RecordBatch(out.payload).records()] == [9, 9]


def test_translation_takes_the_latest_sync_at_or_below_and_adds_one_past_it() -> None:
    store = OffsetSyncStore(None, "mm2-offset-syncs.west.internal")
    assert store.translate("t", 0, 5) is None  # nothing known
    for u, d in [(-1, -1), (9, 9), (19, 15), (29, 25)]:
        store.add(sync_for("t", 0, u, d))
    expected = {0: 0, 9: 9, 10: 10, 15: 10, 19: 15, 20: 16, 29: 25, 100: 26}
    assert {c: store.translate("t", 0, c) for c in expected} == expected
    assert store.latest("t", 0) == sync_for("t", 0, 29, 25)
    assert store.translate("t", 1, 5) is None
    # An anchor written before the first copy (source log start 5, empty target) never maps to -1.
    anchored = OffsetSyncStore(None, "syncs")
    anchored.add(sync_for("t", 0, 4, -1))
    assert (anchored.translate("t", 0, 3), anchored.translate("t", 0, 4), anchored.translate("t", 0, 5)) == (
        None,
        None,
        0,
    )
    # Offsets going backwards (a re-created topic): the older syncs are forgotten.
    store.add(sync_for("t", 0, 4, 2))
    assert store.history("t", 0) == [sync_for("t", 0, 4, 2)]
    assert store.translate("t", 0, 3) is None
    assert store.translate("t", 0, 30) == 3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_translation_never_skips_a_record(seed: int) -> None:
    """A simulated copy that drops random records (aborted, markers) and writes a sync after each
    batch; whatever offset a group committed, its translation is at or before the copy of the
    next record it would read. The history stays bounded."""
    rng = random.Random(seed)
    store = OffsetSyncStore(None, "syncs", history=8)
    copied: dict[int, int] = {}  # upstream offset -> downstream offset
    upstream = downstream = 0
    store.add(sync_for("t", 0, -1, -1))
    while upstream < 5_000:
        size = rng.randint(1, 40)
        kept = [u for u in range(upstream, upstream + size) if rng.random() > 0.2]
        upstream += size
        for u in kept:
            copied[u] = downstream
            downstream += 1
        if kept:
            store.add(sync_for("t", 0, kept[-1], copied[kept[-1]]))
    assert len(store.history("t", 0)) <= 2 * 8 + 2
    assert store.translate("t", 0, upstream) == downstream  # a caught-up group resumes at the end
    kept_offsets = sorted(copied)
    for committed in range(0, upstream + 1, 7):
        d = store.translate("t", 0, committed)
        assert d is not None
        after = [u for u in kept_offsets if u >= committed]
        bound = copied[after[0]] if after else downstream
        assert 0 <= d <= bound, (committed, d, bound)
