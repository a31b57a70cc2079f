"""The partition log: offsets, reads as file slices, rolls, truncation, retention, flush, faults."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import (
    CorruptBatchError,
    FaultInjected,
    FaultPoints,
    InvalidOffsetError,
    LogConfig,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)
from storage.records import RecordBatch, build_batch, check_batch, iter_batches
from tests.storage.helpers import FakeClock, batch

MakeLog = Callable[..., PartitionLog]


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for _, h in iter_batches(data) for r in RecordBatch(data[_ : _ + h.size]).records()]


def test_append_assigns_consecutive_offsets_and_rewrites_only_offset_and_epoch(make_log: MakeLog) -> None:
    log = make_log()
    original = batch(3)
    first = log.append(original, leader_epoch=4)
    second = log.append(batch(2))
    assert (first.base_offset, first.last_offset, second.base_offset, second.last_offset) == (0, 2, 3, 4)
    assert log.log_end_offset == 5
    stored = log.read_bytes(0, 1 << 20)
    assert len(stored) == len(original) + len(batch(2))
    h = check_batch(stored)  # CRC still valid after the rewrite
    assert (h.base_offset, h.partition_leader_epoch) == (0, 4)
    assert stored[12 + 4 : len(original)] == original[16:]  # everything after the epoch is as produced


def test_read_returns_whole_batches_from_the_one_holding_the_offset(make_log: MakeLog) -> None:
    log = make_log()
    for _ in range(5):
        log.append(batch(4))
    assert offsets_in(log.read_bytes(6, 1 << 20))[:4] == [4, 5, 6, 7]  # mid-batch offset: whole batch
    one = len(batch(4))
    assert offsets_in(log.read_bytes(0, one * 2 + 10)) == list(range(8))  # max_bytes cuts at a batch boundary
    assert offsets_in(log.read_bytes(0, 10)) == [0, 1, 2, 3]  # at least one batch
    assert log.read(0, 10, min_one=False) == []
    assert log.read(20, 100) == []  # at the log end: nothing, not an error
    assert offsets_in(log.read_bytes(0, 1 << 20, max_offset=8)) == list(range(8))  # high watermark bound


def test_read_outside_the_log_is_out_of_range(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(2))
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 3 is out of range: the log holds \[0, 2\)"):
        log.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_slices_are_ready_for_sendfile(make_log: MakeLog, tmp_path: Path) -> None:
    log = make_log()
    for _ in range(3):
        log.append(batch(2))
    (piece,) = log.read(0, 1 << 20)
    out = tmp_path / "out.bin"
    with out.open("wb") as f:
        sent = os.sendfile(f.fileno(), piece.fd, piece.position, piece.length)
    assert sent == piece.length and out.read_bytes() == piece.read()


def test_segments_roll_by_size_and_reads_span_them(make_log: MakeLog) -> None:
    one = len(batch(2))
    log = make_log(LogConfig(segment_bytes=one * 3))
    for _ in range(10):
        log.append(batch(2))
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
    assert offsets_in(log.read_bytes(4, 1 << 20)) == list(range(4, 20))
    assert offsets_in(log.read_bytes(5, one * 2)) == [4, 5, 6, 7]


def test_a_read_never_skips_a_batch_that_did_not_fit_for_a_smaller_one_in_the_next_segment(make_log: MakeLog) -> None:
    small, big = batch(1), batch(1, size=2000)
    log = make_log(LogConfig(segment_bytes=len(small) + len(big)))
    for b in (small, big, small):  # segments [small, big] and [small]
        log.append(b)
    assert [s.base_offset for s in log.segments] == [0, 2]
    budget = len(small) * 2  # the big batch does not fit, the small one after it would
    assert offsets_in(log.read_bytes(0, budget)) == [0]
    assert offsets_in(log.read_bytes(1, budget)) == [1]  # min_one: the big batch alone


def test_segments_roll_by_time_measured_from_the_first_batch(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_ms=1000))
    log.append(batch(1, ts=10_000))
    log.append(batch(1, ts=10_900))
    assert len(log.segments) == 1
    log.append(batch(1, ts=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_segments_roll_when_the_index_is_full(make_log: MakeLog) -> None:
    log = make_log(LogConfig(index_interval_bytes=0, segment_index_bytes=8 * 4))
    for _ in range(12):
        log.append(batch(1))
    assert len(log.segments) > 1
    assert all(len(s.index) <= 4 for s in log.segments)


def test_find_offset_by_timestamp(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=400, index_interval_bytes=0))
    for i in range(20):
        log.append(build_batch([(1000 + 10 * i, b"k", b"v"), (1000 + 10 * i + 5, b"k", b"v")]))
    assert len(log.segments) > 2
    assert log.find_offset_by_timestamp(0) == (0, 1000)
    assert log.find_offset_by_timestamp(1101) == (21, 1105)
    assert log.find_offset_by_timestamp(1105) == (21, 1105)
    assert log.find_offset_by_timestamp(1106) == (22, 1110)
    assert log.find_offset_by_timestamp(5000) is None


def test_log_append_time_stamps_the_batch_and_keeps_the_crc_valid(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(batch(2, ts=5))
    assert info.log_append_time == clock.now
    stored = log.read_bytes(0, 1 << 20)
    h = check_batch(stored)
    assert h.is_log_append_time and h.max_timestamp == clock.now
    assert [r.timestamp for r in RecordBatch(stored).records()] == [clock.now, clock.now]


def test_bad_batches_are_refused_before_anything_is_written(make_log: MakeLog) -> None:
    log = make_log(LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError, match=r"exceeds max\.message\.bytes=200"):
        log.append(batch(1, size=300))
    corrupt = bytearray(batch(1))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        log.append(corrupt)
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_follower_appends_keep_offsets_and_never_go_back(make_log: MakeLog) -> None:
    log = make_log()
    log.append(build_batch([(1, b"k", b"v")] * 2, base_offset=0), assign_offsets=False)
    with pytest.raises(InvalidOffsetError, match="starts at offset 1 but the log ends at 2"):
        log.append(build_batch([(1, b"k", b"v")], base_offset=1), assign_offsets=False)
    log.append(build_batch([(1, b"k", b"v")], base_offset=2), assign_offsets=False, leader_epoch=3)
    assert log.log_end_offset == 3
    assert check_batch(log.read_bytes(2, 1000)).partition_leader_epoch == 3
    # A compacted leader's next batch may start past our end: the copy keeps the hole.
    log.append(build_batch([(1, b"k", b"v")], base_offset=7), assign_offsets=False)
    assert log.log_end_offset == 8
    assert check_batch(log.read_bytes(4, 1000)).base_offset == 7


def test_truncate_to_removes_whole_batches(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=len(batch(2)) * 2))
    for _ in range(6):
        log.append(batch(2))
    log.high_watermark = 12
    removed = log.truncate_to(5)  # inside batch [4, 5]: the whole batch goes
    assert log.log_end_offset == 4 and removed == len(batch(2)) * 4
    assert log.high_watermark == 4
    assert offsets_in(log.read_bytes(0, 1 << 20)) == [0, 1, 2, 3]
    assert log.append(batch(1)).base_offset == 4
    assert log.truncate_to(100) == 0


def test_truncate_fully_restarts_the_log(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(3))
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log.append(batch(1)).base_offset == 50


def test_delete_records_advances_the_start_and_drops_whole_segments(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(LogConfig(segment_bytes=len(batch(2)) * 2, file_delete_delay_ms=1000))
    for _ in range(6):
        log.append(batch(2))
    log.high_watermark = log.log_end_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(13)
    assert log.delete_records_before(5) == 5
    assert [s.base_offset for s in log.segments] == [4, 8]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert offsets_in(log.read_bytes(5, 1 << 20))[0] == 4  # the batch holding 5 starts at 4
    deleted = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".deleted"))
    assert deleted == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert log.purge_deleted(clock.now) == 0
    clock.now += 1000
    assert log.purge_deleted(clock.now) == 1
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())


def test_retention_by_bytes_keeps_the_newest_segments(make_log: MakeLog, clock: FakeClock) -> None:
    one = len(batch(2))
    log = make_log(LogConfig(segment_bytes=one * 2, retention_bytes=one * 3, retention_ms=-1))
    for _ in range(8):
        log.append(batch(2))
    assert log.apply_retention(clock.now) == 2
    assert log.log_start_offset == 8 and log.size_bytes <= one * 4
    assert log.apply_retention(clock.now) == 0


def test_retention_by_time_rolls_and_deletes_an_expired_active_segment(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(LogConfig(retention_ms=1000, segment_bytes=len(batch(1)) * 2))
    for i in range(4):
        log.append(batch(1, ts=clock.now + i))
    clock.now += 500
    assert log.apply_retention(clock.now) == 0
    clock.now += 1000
    assert log.apply_retention(clock.now) == 2
    assert log.log_start_offset == 4 == log.log_end_offset
    assert log.append(batch(1)).base_offset == 4


def test_flush_policy_moves_the_recovery_point(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(LogConfig(flush_messages=5))
    log.append(batch(3))
    assert log.recovery_point == 0
    log.append(batch(3))
    assert log.recovery_point == 6
    log.update_config(LogConfig(flush_ms=100))
    log.append(batch(1))
    assert not log.maybe_flush(clock.now + 50)
    assert log.maybe_flush(clock.now + 100) and log.recovery_point == 7


def test_fsync_every_append(make_log: MakeLog, faults: FaultPoints) -> None:
    log = make_log(LogConfig(flush_messages=1))
    before = faults.hits["fsync"]
    log.append(batch(1))
    log.append(batch(1))
    assert faults.hits["fsync"] - before == 2 and log.recovery_point == 2


@pytest.mark.parametrize("point", ["append", "roll", "fsync", "truncate"])
def test_a_fault_point_takes_the_log_offline(make_log: MakeLog, faults: FaultPoints, point: str) -> None:
    log = make_log(LogConfig(segment_bytes=len(batch(1)) + 1))
    log.append(batch(1))
    faults.arm(point, times=1)
    with pytest.raises(LogDirOfflineError) as info:
        if point == "truncate":
            log.truncate_to(0)
        elif point == "fsync":
            log.flush()
        else:
            log.append(batch(1))  # rolls, as the segment is full
    assert isinstance(info.value.cause, FaultInjected)
    assert log.is_offline
    with pytest.raises(LogDirOfflineError):
        log.read(0, 100)


def test_a_stalled_fault_point_delays_then_proceeds(make_log: MakeLog, faults: FaultPoints) -> None:
    log = make_log()
    faults.arm("append", stall_s=0.05, raises=False, times=1)
    assert log.append(batch(1)).base_offset == 0
    assert faults.hits["append"] == 1
    with pytest.raises(ValueError, match="unknown fault point 'nope'"):
        faults.arm("nope")


def test_reopen_after_close_keeps_everything(make_log: MakeLog, reopen: Callable[..., PartitionLog]) -> None:
    config = LogConfig(segment_bytes=len(batch(2)) * 3, index_interval_bytes=0)
    log = make_log(config)
    for i in range(10):
        log.append(batch(2, tag=str(i)))
    expected = log.read_bytes(0, 1 << 30)
    log.close()
    again = reopen(config)
    assert again.log_end_offset == 20
    assert again.read_bytes(0, 1 << 30) == expected
    assert offsets_in(again.read_bytes(13, 1 << 30))[0] == 12


def test_truncate_then_clean_close_leaves_no_stale_index_entries(
    make_log: MakeLog, reopen: Callable[..., PartitionLog], clock: FakeClock
) -> None:
    """A segment truncated down to the recovery point must still have its indexes flushed on close."""
    log = make_log()
    log.append(build_batch([(clock.now, b"a", b"1"), (clock.now, b"a", b"2")]))
    log.roll()
    log.truncate_to(0)
    log.close()
    log = reopen()
    clock.now += 1
    log.append(build_batch([(clock.now, b"a", b"3")]))
    log.roll()  # raised CorruptIndexError from the stale time index before the fix
    assert log.read_bytes(0, 1 << 20)


def test_a_copy_with_holes_survives_an_unclean_reopen(make_log: MakeLog, reopen: Callable[..., PartitionLog]) -> None:
    log = make_log()
    log.append(build_batch([(1, b"k", b"a")] * 2, base_offset=0), assign_offsets=False)
    log.append(build_batch([(1, b"k", b"b")], base_offset=5), assign_offsets=False)
    log.append(build_batch([(1, b"k", b"c")] * 3, base_offset=9), assign_offsets=False)
    log.flush()
    again = reopen(clean=False)  # recovery scans every batch: increasing offsets with holes are valid
    assert again.log_end_offset == 12
    assert [h.base_offset for _seg, _pos, h in again.batch_headers(0)] == [0, 5, 9]
