"""The aborted-transaction index (``.txnindex``): its bytes, lookups for a fetch range, and how it
follows the log through truncation, deletion, compaction and crash recovery."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from storage import (
    AbortedTxn,
    CorruptIndexError,
    FaultPoints,
    LogConfig,
    PartitionLog,
    StorageError,
    create_log,
    load_log,
    verify,
)
from storage._txn_index import ENTRY, TransactionIndex
from storage.records import BatchBuilder, build_control_batch
from tests.storage.helpers import TP, FakeClock, batch
from tests.storage.test_cleaner import CONFIG as COMPACTED

MakeLog = Callable[..., PartitionLog]
SMALL = LogConfig(segment_bytes=400, index_interval_bytes=64)


def txn_batch(pid: int, seq: int, *, epoch: int = 0, n: int = 2) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    for i in range(n):
        builder.append(1_700_000_000_000, b"k%d" % i, b"txn-%d-%d" % (pid, seq + i))
    return builder.build()


def marker(pid: int, *, commit: bool, epoch: int = 0) -> bytes:
    return build_control_batch(commit=commit, timestamp=1_700_000_000_000, producer_id=pid, producer_epoch=epoch)


class Writer:
    """Appends to a log as a partition leader would: an ABORT marker that ends an open
    transaction is indexed, with the LSO of that moment. Returns the entries it wrote."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.open: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []

    def data(self, pid: int, seq: int) -> None:
        info = self.log.append(txn_batch(pid, seq))
        self.open.setdefault(pid, info.base_offset)

    def plain(self) -> None:
        self.log.append(batch(2))

    def end(self, pid: int, *, commit: bool) -> None:
        info = self.log.append(marker(pid, commit=commit))
        first = self.open.pop(pid)
        if not commit:
            lso = min(self.open.values(), default=info.base_offset + 1)
            txn = AbortedTxn(pid, first, info.base_offset, lso)
            self.log.append_aborted_txn(txn)
            self.aborted.append(txn)


def all_entries(log: PartitionLog) -> list[AbortedTxn]:
    return [e for s in log.segments for e in s.txn_index.entries]


def workload(log: PartitionLog) -> Writer:
    """Interleaved transactions of three producers over several segments, some aborted."""
    w = Writer(log)
    w.data(1, 0)
    w.plain()
    w.data(2, 0)
    w.end(1, commit=False)  # aborted while 2 is open: its LSO is 2's first offset
    w.data(3, 0)
    w.plain()
    w.end(2, commit=True)
    w.data(1, 2)
    w.end(3, commit=False)
    for _i in range(3):
        w.plain()
    w.end(1, commit=False)
    w.data(2, 2)
    w.plain()
    w.end(2, commit=False)
    return w


# -- the file ----------------------------------------------------------------------------------


def test_entries_are_kafkas_34_bytes_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    index.load()
    assert len(index) == 0 and not path.exists(), "a missing file is an empty index; none is made until needed"
    index.append(AbortedTxn(7, 10, 20, 21))
    index.append(AbortedTxn(8, 15, 30, 31))
    index.flush()
    assert path.read_bytes()[: ENTRY.size] == (
        b"\x00\x00"
        + (7).to_bytes(8, "big")
        + (10).to_bytes(8, "big")
        + (20).to_bytes(8, "big")
        + (21).to_bytes(8, "big")
    )
    again = TransactionIndex(path)
    again.load()
    assert again.entries == [AbortedTxn(7, 10, 20, 21), AbortedTxn(8, 15, 30, 31)]
    with pytest.raises(StorageError, match="does not follow"):
        again.append(AbortedTxn(9, 25, 30, 31))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (ENTRY.pack(0, 1, 2, 3, 4)[:-1], "not a multiple"),
        (ENTRY.pack(1, 1, 2, 3, 4), "version 1"),
        (ENTRY.pack(0, 1, 2, 9, 10) + ENTRY.pack(0, 2, 2, 9, 10), "not after"),
    ],
)
def test_a_torn_or_disordered_file_is_corrupt(tmp_path: Path, data: bytes, why: str) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError, match=why):
        TransactionIndex(path).load()


def test_a_lookup_returns_overlapping_transactions_and_stops_at_a_covering_lso(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "x.txnindex")
    index.extend([AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 8, 9), AbortedTxn(3, 12, 20, 21)])
    assert index.collect(6, 10) == ([AbortedTxn(2, 3, 8, 9)], True)  # producer 3's LSO 21 covers 10
    assert index.collect(6, 30) == ([AbortedTxn(2, 3, 8, 9), AbortedTxn(3, 12, 20, 21)], False)
    assert index.collect(0, 9) == ([AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 8, 9)], True)
    assert index.collect(21, 30) == ([], False)


# -- the log -----------------------------------------------------------------------------------


def test_a_fetch_range_finds_the_aborted_transactions_across_segments(make_log: MakeLog) -> None:
    log = make_log(SMALL)
    w = workload(log)
    assert len(log.segments) > 2
    assert all_entries(log) == w.aborted
    end = log.log_end_offset
    assert log.collect_aborted_txns(0, end) == w.aborted
    for start in range(end):
        for upper in range(start + 1, end + 1):
            expected = [t for t in w.aborted if t.last_offset >= start and t.first_offset < upper]
            assert log.collect_aborted_txns(start, upper) == expected, (start, upper)


def test_the_index_survives_a_clean_reopen(make_log: MakeLog, reopen: Callable[..., PartitionLog]) -> None:
    log = make_log(SMALL)
    w = workload(log)
    log.close()
    again = reopen(SMALL)
    assert all_entries(again) == w.aborted
    assert verify(again.dir)[0] == len(again.segments)
    again.close()


def test_truncation_drops_the_entries_of_markers_it_removes(make_log: MakeLog) -> None:
    log = make_log(SMALL)
    w = workload(log)
    cut = w.aborted[2].last_offset
    log.truncate_to(cut)
    assert all_entries(log) == w.aborted[:2]
    assert log.collect_aborted_txns(0, log.log_end_offset) == w.aborted[:2]
    log.truncate_to(w.aborted[0].last_offset)
    assert all_entries(log) == []
    assert not list(log.dir.glob("*.txnindex"))
    log.truncate_fully_and_start_at(100)
    assert all_entries(log) == []


def test_retention_deletes_a_segments_index_with_it(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(LogConfig(segment_bytes=400, index_interval_bytes=64, file_delete_delay_ms=0))
    w = workload(log)
    doomed = next(s for s in log.segments if len(s.txn_index))
    path = doomed.txn_index.path
    assert path.exists()
    log.high_watermark = log.log_end_offset
    log.delete_records_before(doomed.next_offset)
    log.purge_deleted(clock.now)
    assert not path.exists() and not path.with_name(path.name + ".deleted").exists()
    assert all_entries(log) == [t for t in w.aborted if t.last_offset >= doomed.next_offset]


def test_compaction_keeps_every_entry(make_log: MakeLog, clock: FakeClock) -> None:
    config = replace(COMPACTED, segment_bytes=400)  # test_cleaner's, with smaller segments
    log = make_log(config)
    w = workload(log)
    log.high_watermark = log.log_end_offset
    result = log.compact(clock.now, force=True)
    assert result.cleaned
    assert all_entries(log) == w.aborted
    log.close()
    again, _ = load_log(log.dir, TP, config, clean_shutdown=True, faults=FaultPoints(), clock=clock)
    assert all_entries(again) == w.aborted
    again.close()


# -- recovery ----------------------------------------------------------------------------------


def crash(log: PartitionLog) -> None:
    """Stop as a kill -9 would: the files stay as written, nothing is flushed or sealed."""
    for segment in log.segments:
        segment.close()


def test_an_unclean_stop_rebuilds_the_index_of_every_recovered_segment(tmp_path: Path, clock: FakeClock) -> None:
    directory = tmp_path / "t-0"
    log = create_log(directory, TP, SMALL, faults=FaultPoints(), clock=clock)
    w = workload(log)
    crash(log)
    for path in directory.glob("*.txnindex"):
        path.unlink()  # lost: never fsynced
    again, report = load_log(directory, TP, SMALL, clean_shutdown=False, faults=FaultPoints(), clock=clock)
    assert report.txn_indexes_rebuilt == len(again.segments)
    assert all_entries(again) == w.aborted
    again.close()


def test_a_transaction_open_across_the_recovery_point_is_found_in_the_segments_before(
    tmp_path: Path, clock: FakeClock
) -> None:
    directory = tmp_path / "t-0"
    log = create_log(directory, TP, SMALL, faults=FaultPoints(), clock=clock)
    w = Writer(log)
    w.data(5, 0)  # opens in the first segment
    while len(log.segments) < 3:
        w.plain()
    log.flush()  # the recovery point: the log end, in the last segment
    recovery_point = log.recovery_point
    w.end(5, commit=False)
    crash(log)
    for path in directory.glob("*.txnindex"):
        path.unlink()
    again, report = load_log(
        directory, TP, SMALL, clean_shutdown=False, recovery_point=recovery_point, faults=FaultPoints(), clock=clock
    )
    assert report.segments_recovered == 1 and report.txn_indexes_rebuilt == 1
    assert all_entries(again) == w.aborted and w.aborted[0].first_offset == 0
    again.close()


def test_a_torn_marker_takes_its_entry_with_it(tmp_path: Path, clock: FakeClock) -> None:
    directory = tmp_path / "t-0"
    log = create_log(directory, TP, LogConfig(), faults=FaultPoints(), clock=clock)
    w = Writer(log)
    w.data(1, 0)
    w.end(1, commit=False)
    w.data(2, 0)
    w.end(2, commit=False)
    crash(log)
    segment = directory / "00000000000000000000.log"
    os.truncate(segment, segment.stat().st_size - 5)  # the last marker is torn
    again, report = load_log(directory, TP, LogConfig(), clean_shutdown=False, faults=FaultPoints(), clock=clock)
    assert report.bytes_dropped > 0
    assert all_entries(again) == w.aborted[:1]
    assert again.collect_aborted_txns(0, again.log_end_offset) == w.aborted[:1]
    again.close()


def test_a_corrupt_index_after_a_clean_stop_is_rebuilt(tmp_path: Path, clock: FakeClock) -> None:
    directory = tmp_path / "t-0"
    log = create_log(directory, TP, SMALL, faults=FaultPoints(), clock=clock)
    w = workload(log)
    log.close()
    damaged = sorted(directory.glob("*.txnindex"))[0]
    damaged.write_bytes(damaged.read_bytes()[:-3])
    again, report = load_log(directory, TP, SMALL, clean_shutdown=True, faults=FaultPoints(), clock=clock)
    assert report.indexes_rebuilt == 1 and report.txn_indexes_rebuilt >= 1
    assert all_entries(again) == w.aborted
    again.close()


def test_an_index_entry_must_name_a_marker_of_the_log(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(2))
    with pytest.raises(StorageError, match="no marker at offset 5"):
        log.append_aborted_txn(AbortedTxn(1, 0, 5, 6))
    log.append_aborted_txn(AbortedTxn(1, 0, 1, 2))
    with pytest.raises(CorruptIndexError, match="ends at no marker"):
        log.flush()
        verify(log.dir)
