"""The leader-epoch cache: Kafka's assign and OffsetsForLeaderEpoch rules, its checkpoint file,
and how the partition log keeps it in step with appends, truncation, deletion and recovery."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import (
    CorruptBatchError,
    EpochEntry,
    FaultPoints,
    InvalidOffsetError,
    LeaderEpochCache,
    LogConfig,
    LogDirOfflineError,
    PartitionLog,
    create_log,
    load_log,
)
from storage.records import build_batch, check_batch, iter_batches, set_partition_leader_epoch
from tests.storage.helpers import TP, FakeClock, batch

MakeLog = Callable[..., PartitionLog]
Reopen = Callable[..., PartitionLog]
CHECKPOINT = "leader-epoch-checkpoint"


def epoch_batch(base_offset: int, records: int, epoch: int) -> bytes:
    """A batch of ``records`` records at ``base_offset`` written in leader ``epoch`` (a fetched batch)."""
    buf = bytearray(build_batch([(1_000 + i, b"k%d" % i, b"v") for i in range(records)], base_offset=base_offset))
    set_partition_leader_epoch(buf, epoch)
    return bytes(buf)


def no_headers() -> list:
    raise AssertionError("a valid checkpoint must not be rebuilt from the batches")


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / CHECKPOINT)
    for epoch, start in entries:
        assert cache.assign(epoch, start)
    return cache


# -- the cache on its own -------------------------------------------------------------------


def test_assign_adds_only_newer_epochs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = LeaderEpochCache(tmp_path / CHECKPOINT)
    assert (cache.latest_epoch, cache.latest_entry, cache.entries) == (-1, None, ())
    assert cache.assign(0, 0)
    assert cache.assign(2, 10)
    assert not cache.assign(2, 15)  # the latest epoch again: ignored, its start stays
    assert not cache.assign(-1, 20)  # "no epoch"
    with caplog.at_level(logging.WARNING, logger="strait.storage"):
        assert not cache.assign(1, 30)  # older: ignored with a warning, never an error
    assert "ignoring leader epoch 1 at offset 30" in caplog.text
    assert cache.entries == ((0, 0), (2, 10))
    assert cache.latest_epoch == 2 and cache.latest_entry == EpochEntry(2, 10)
    with pytest.raises(ValueError, match="negative offset -1"):
        cache.assign(3, -1)


def test_assign_below_the_latest_start_removes_the_later_entries(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10), (3, 20))
    assert cache.assign(5, 10)  # starts where epoch 2 started: 2 and 3 go
    assert cache.entries == ((0, 0), (5, 10))
    assert cache.assign(6, 10)  # the same start again: 5 is replaced
    assert cache.entries == ((0, 0), (6, 10))
    assert LeaderEpochCache.load(tmp_path, no_headers)[0].entries == cache.entries


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 5), (3, 10), (6, 25))
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 24, 25, 1000)] == [-1, -1, 1, 1, 3, 3, 6, 6]
    assert LeaderEpochCache(tmp_path / "other").epoch_for_offset(0) == -1


def test_end_offset_for_follows_offsets_for_leader_epoch(tmp_path: Path) -> None:
    leo = 40
    assert LeaderEpochCache(tmp_path / "empty").end_offset_for(0, leo) == (-1, -1)  # nothing known
    cache = cache_with(tmp_path, (1, 5), (3, 10), (6, 25))
    answers = {epoch: cache.end_offset_for(epoch, leo) for epoch in range(-1, 9)}
    assert answers == {
        -1: (-1, -1),  # undefined epoch
        0: (0, 5),  # before the first known epoch: its data is gone, replicate from the first start
        1: (1, 10),  # exact: ends where the next epoch starts
        2: (1, 10),  # between epochs: the largest epoch below it, and where that one ended
        3: (3, 25),
        4: (3, 25),
        5: (3, 25),
        6: (6, 40),  # the latest epoch is still being written: the log end offset
        7: (-1, -1),  # newer than anything known
        8: (-1, -1),
    }


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 5), (3, 10), (6, 25))
    assert not cache.truncate_from_end(26)
    assert cache.truncate_from_end(25)  # an entry starting at the new end has no records left
    assert cache.entries == ((1, 5), (3, 10))
    assert cache.truncate_from_end(0)
    assert cache.entries == ()
    assert LeaderEpochCache.load(tmp_path, no_headers)[0].entries == ()


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 5), (3, 10), (6, 25))
    assert not cache.truncate_from_start(3)  # before the first entry
    assert not cache.truncate_from_start(5)  # exactly at it
    assert cache.truncate_from_start(12)  # epoch 1 is gone, epoch 3 now starts at 12
    assert cache.entries == ((3, 12), (6, 25))
    assert cache.truncate_from_start(25)
    assert cache.entries == ((6, 25),)
    assert cache.truncate_from_start(30)  # past the last start: the last entry moves up
    assert cache.entries == ((6, 30),)
    assert LeaderEpochCache.load(tmp_path, no_headers)[0].entries == ((6, 30),)


def test_clear(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 5))
    assert cache.clear() and not cache.clear()
    assert (tmp_path / CHECKPOINT).read_text() == "0\n0\n"


# -- the checkpoint file --------------------------------------------------------------------


def test_the_file_is_kafkas_text_checkpoint_and_round_trips(tmp_path: Path) -> None:
    cache_with(tmp_path, (0, 0), (4, 100), (7, 2345))
    assert (tmp_path / CHECKPOINT).read_text() == "0\n3\n0 0\n4 100\n7 2345\n"
    loaded, rebuilt = LeaderEpochCache.load(tmp_path, no_headers)
    assert not rebuilt
    assert loaded.entries == ((0, 0), (4, 100), (7, 2345))


def test_every_change_rewrites_the_file_atomically_and_only_changes_do(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT
    cache = cache_with(tmp_path, (0, 0))
    first = path.stat().st_ino
    assert not cache.assign(0, 5) and not cache.truncate_from_end(10) and not cache.truncate_from_start(0)
    assert path.stat().st_ino == first  # nothing changed: nothing written
    cache.assign(1, 8)
    assert path.stat().st_ino != first  # a new file renamed over the old one, never written in place
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT]  # no temp file left


def test_a_failed_write_leaves_the_entries_unchanged(tmp_path: Path) -> None:
    blocked = tmp_path / CHECKPOINT
    blocked.mkdir()
    (blocked / "x").write_text("the rename over a non-empty directory fails")
    cache = LeaderEpochCache(blocked)
    with pytest.raises(OSError):
        cache.assign(1, 0)
    assert cache.entries == () and cache.latest_epoch == -1


# -- the partition log ----------------------------------------------------------------------


def test_leader_appends_assign_their_epoch_at_the_first_batch(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(2))  # no epoch (-1): nothing
    log.append(batch(3), leader_epoch=1)
    log.append(batch(1), leader_epoch=1)
    log.append(batch(2), leader_epoch=4)
    assert log.epochs.entries == ((1, 2), (4, 6))
    assert log.latest_epoch == 4
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(4) == (4, 8)


def test_a_new_leader_assigns_its_epoch_at_the_log_end(make_log: MakeLog, reopen: Reopen) -> None:
    log = make_log()
    log.append(batch(3), leader_epoch=0)
    assert log.assign_epoch(2)
    assert not log.assign_epoch(2)
    assert log.end_offset_for_epoch(0) == (0, 3)  # epoch 0 ended where the new leader started
    assert log.end_offset_for_epoch(2) == (2, 3)
    log.append(batch(2), leader_epoch=2)  # the same epoch: the entry stays at 3
    assert log.epochs.entries == ((0, 0), (2, 3))
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.assign_epoch(3)
    log.close()
    # Epoch 3 started at the log end and holds nothing: reopening drops it, as Kafka's load does.
    assert reopen().epochs.entries == ((0, 0), (2, 3))


def test_follower_appends_assign_epochs_from_the_batch_headers(make_log: MakeLog, reopen: Reopen) -> None:
    log = make_log()
    for data in (epoch_batch(0, 2, 0), epoch_batch(2, 3, 0), epoch_batch(5, 1, 2)):
        log.append(data, assign_offsets=False)
    assert log.epochs.entries == ((0, 0), (2, 5))
    assert check_batch(log.read_bytes(5, 1 << 20)).partition_leader_epoch == 2  # stored as fetched
    log.close()
    assert reopen().epochs.entries == ((0, 0), (2, 5))


def test_truncate_to_removes_the_epochs_of_the_removed_batches(make_log: MakeLog, reopen: Reopen) -> None:
    log = make_log(LogConfig(segment_bytes=len(epoch_batch(0, 2, 0)) * 2))
    for base, epoch in [(0, 0), (2, 1), (4, 1), (6, 3), (8, 4)]:
        log.append(epoch_batch(base, 2, epoch), assign_offsets=False)
    assert log.epochs.entries == ((0, 0), (1, 2), (3, 6), (4, 8))
    log.truncate_to(7)  # inside the batch [6, 7]: it goes, so epoch 3 has no records left
    assert log.log_end_offset == 6
    assert log.epochs.entries == ((0, 0), (1, 2))
    assert log.end_offset_for_epoch(1) == (1, 6)
    log.close()
    assert reopen().epochs.entries == ((0, 0), (1, 2))


def test_truncate_to_the_log_end_keeps_a_new_leaders_epoch(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(2), leader_epoch=0)
    log.assign_epoch(1)
    assert log.truncate_to(2) == 0
    assert log.epochs.entries == ((0, 0), (1, 2))


def test_truncate_fully_clears_the_epochs(make_log: MakeLog, reopen: Reopen) -> None:
    log = make_log()
    log.append(batch(2), leader_epoch=3)
    log.truncate_fully_and_start_at(50)
    assert log.epochs.entries == ()
    log.append(batch(1), leader_epoch=5)
    assert log.epochs.entries == ((5, 50),)
    log.close()
    assert reopen().epochs.entries == ((5, 50),)


def test_delete_records_before_moves_the_first_epoch_up(make_log: MakeLog, reopen: Reopen) -> None:
    log = make_log(LogConfig(segment_bytes=len(batch(2)) * 2))
    for epoch in (0, 0, 1, 1, 2, 2):
        log.append(batch(2), leader_epoch=epoch)
    assert log.epochs.entries == ((0, 0), (1, 4), (2, 8))
    log.high_watermark = log.log_end_offset
    log.delete_records_before(3)
    assert log.epochs.entries == ((0, 3), (1, 4), (2, 8))
    log.delete_records_before(9)
    assert log.epochs.entries == ((2, 9),)
    log.close()
    assert reopen().epochs.entries == ((2, 9),)


def test_retention_moves_the_first_epoch_to_the_new_log_start(make_log: MakeLog, clock: FakeClock) -> None:
    one = len(batch(2))
    log = make_log(LogConfig(segment_bytes=one * 2, retention_bytes=one * 3, retention_ms=-1))
    for epoch in (0, 0, 0, 1, 1, 1, 1, 1):
        log.append(batch(2), leader_epoch=epoch)
    assert log.apply_retention(clock.now) == 2
    assert log.log_start_offset == 8
    assert log.epochs.entries == ((1, 8),)


# -- loading and recovery ---------------------------------------------------------------------


def write_epoch_log(make_log: MakeLog) -> PartitionLog:
    """Offsets 0-2 without an epoch, then epoch 1 at 3, epoch 4 at 7 and 9 (two batches)."""
    log = make_log(LogConfig(segment_bytes=len(batch(2)) * 2))
    log.append(batch(3))
    log.append(batch(2), leader_epoch=1)
    log.append(batch(2), leader_epoch=1)
    log.append(batch(2), leader_epoch=4)
    log.append(batch(2), leader_epoch=4)
    assert log.epochs.entries == ((1, 3), (4, 7))
    log.close()
    return log


def load(directory: Path, *, clean: bool = True) -> tuple[PartitionLog, bool]:
    log, report = load_log(directory, TP, LogConfig(), clean_shutdown=clean, faults=FaultPoints(), clock=FakeClock())
    return log, report.epochs_rebuilt


@pytest.mark.parametrize(
    "content",
    [
        None,  # missing
        b"",
        b"\x00\xff garbage",
        b"1\n2\n1 3\n4 7\n",  # unknown version
        b"0\n3\n1 3\n4 7\n",  # fewer entries than the count says
        b"0\n1\n1 3\n4 7\n",  # more
        b"0\n2\n4 3\n1 7\n",  # epochs not increasing
        b"0\n2\n1 7\n4 3\n",  # start offsets not increasing
        b"0\n2\n1 3\n4 x\n",
    ],
)
def test_a_missing_or_unparseable_checkpoint_is_rebuilt_from_the_batch_headers(
    make_log: MakeLog, content: bytes | None
) -> None:
    directory = write_epoch_log(make_log).dir
    path = directory / CHECKPOINT
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    log, rebuilt = load(directory)
    assert rebuilt
    assert log.epochs.entries == ((1, 3), (4, 7))
    assert path.read_text() == "0\n2\n1 3\n4 7\n"  # written back
    log.close()


def test_a_valid_checkpoint_is_trusted(make_log: MakeLog) -> None:
    directory = write_epoch_log(make_log).dir
    (directory / CHECKPOINT).write_text("0\n2\n1 3\n2 5\n")  # as Kafka writes it; differs from the batches
    log, rebuilt = load(directory)
    assert not rebuilt and log.epochs.entries == ((1, 3), (2, 5))
    log.close()


def test_a_log_without_epochs_writes_no_checkpoint(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(2))
    log.close()
    again, rebuilt = load(log.dir)
    assert rebuilt and again.epochs.entries == ()
    assert not (log.dir / CHECKPOINT).exists()
    again.close()


def test_recovery_of_a_torn_tail_drops_the_epochs_past_the_new_end(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = create_log(directory, TP, LogConfig(), faults=FaultPoints(), clock=FakeClock())
    for base, epoch in [(0, 0), (3, 1), (6, 2), (9, 2)]:
        log.append(epoch_batch(base, 3, epoch), assign_offsets=False)
    assert log.epochs.entries == ((0, 0), (1, 3), (2, 6))
    log.close()
    segment = directory / f"{0:020d}.log"
    size = len(epoch_batch(0, 3, 0))
    os.truncate(segment, size * 2 + 10)  # torn inside the batch at 6: epoch 2 has no records left

    log, rebuilt = load(directory, clean=False)
    assert not rebuilt
    assert log.log_end_offset == 6
    assert log.epochs.entries == ((0, 0), (1, 3))
    assert (directory / CHECKPOINT).read_text() == "0\n2\n0 0\n1 3\n"
    assert log.end_offset_for_epoch(2) == (-1, -1)
    assert log.end_offset_for_epoch(1) == (1, 6)
    log.close()


def test_a_new_epoch_is_written_at_once_and_fsynced_with_the_log(
    make_log: MakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log()
    log.append(batch(3), leader_epoch=0)
    log.flush()
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    assert log.assign_epoch(1)  # a new leader: no fsync on its path
    assert synced == []
    assert (log.dir / CHECKPOINT).read_text() == "0\n2\n0 0\n1 3\n"  # the file has it (a process crash keeps it)
    log.append(batch(1), leader_epoch=1)
    assert synced == []
    log.flush()  # the recovery point moves past epoch 1's start: the checkpoint and its dir are fsynced first
    assert len(synced) >= 3  # the segment, the checkpoint, the directory (and the indexes)
    synced.clear()
    log.flush()
    assert len([fd for fd in synced]) == 1 + 2  # the segment and its two indexes again; the epochs are synced
    assert log.epochs.truncate_from_end(3)  # a truncation still waits for the disk
    assert len(synced) == 3 + 2


def test_recovery_rebuilds_the_epochs_a_power_loss_took_from_the_checkpoint(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = create_log(directory, TP, LogConfig(), faults=FaultPoints(), clock=FakeClock())
    log.append(epoch_batch(0, 3, 0), assign_offsets=False)
    log.flush()  # recovery point 3, epoch 0 on disk
    for base, epoch in [(3, 1), (6, 1), (9, 4)]:
        log.append(epoch_batch(base, 3, epoch), assign_offsets=False)
    assert log.epochs.entries == ((0, 0), (1, 3), (4, 9))
    log.close()
    # What a power loss can leave: the renames of the unsynced checkpoint never reached the disk.
    (directory / CHECKPOINT).write_text("0\n1\n0 0\n")

    again, report = load_log(
        directory, TP, LogConfig(), clean_shutdown=False, recovery_point=3, faults=FaultPoints(), clock=FakeClock()
    )
    assert not report.epochs_rebuilt  # the file was read, then completed from the recovered batches
    assert again.epochs.entries == ((0, 0), (1, 3), (4, 9))
    assert again.end_offset_for_epoch(1) == (1, 9)
    again.close()
    assert (directory / CHECKPOINT).read_text() == "0\n3\n0 0\n1 3\n4 9\n"

    # A clean shutdown's checkpoint is trusted as it is: its epochs were fsynced by the last flush.
    (directory / CHECKPOINT).write_text("0\n1\n0 0\n")
    clean, _ = load(directory)
    assert clean.epochs.entries == ((0, 0),)
    clean.close()


# -- append_batches ---------------------------------------------------------------------------


def fetched(*batches: bytes) -> bytes:
    return b"".join(batches)


def test_append_batches_keeps_offsets_and_epochs(make_log: MakeLog) -> None:
    log = make_log()
    data = fetched(epoch_batch(0, 2, 0), epoch_batch(2, 2, 0), epoch_batch(4, 3, 2))
    assert log.append_batches(data) == 3
    assert log.log_end_offset == 7
    assert log.epochs.entries == ((0, 0), (2, 4))
    assert log.read_bytes(0, 1 << 20) == data
    assert log.append_batches(b"") == 0


def test_append_batches_with_a_leader_epoch_restamps_every_batch(make_log: MakeLog, reopen: Reopen) -> None:
    # A mirror copies batches written under the source's epochs; the target stores its own.
    log = make_log()
    log.assign_epoch(3)
    source = [epoch_batch(0, 2, 7), epoch_batch(2, 1, 9)]
    assert log.append_batches(fetched(*source), leader_epoch=3) == 2
    assert log.epochs.entries == ((3, 0),)
    stored = log.read_bytes(0, 1 << 20)
    headers = [h for _, h in iter_batches(stored)]  # CRCs still valid: the epoch is outside them
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 3), (2, 3)]
    assert [h.crc for h in headers] == [check_batch(b).crc for b in source]
    for (pos, header), src in zip(iter_batches(stored), source, strict=True):
        copy = stored[pos : pos + header.size]
        assert copy[:12] == src[:12] and copy[16:] == src[16:]  # only partitionLeaderEpoch (12..16) differs
    assert log.append_batches(epoch_batch(3, 1, 1), leader_epoch=5) == 1
    assert log.epochs.entries == ((3, 0), (5, 3))
    with pytest.raises(ValueError, match="leader epoch -1 is negative"):
        log.append_batches(epoch_batch(4, 1, 1), leader_epoch=-1)
    log.close()
    assert reopen().epochs.entries == ((3, 0), (5, 3))


def test_append_batches_ignores_a_partial_last_batch(make_log: MakeLog) -> None:
    log = make_log()
    whole = fetched(epoch_batch(0, 2, 0), epoch_batch(2, 2, 0))
    last = epoch_batch(4, 3, 2)
    assert log.append_batches(whole + last[:40]) == 2
    for cut in (5, 12, 40, len(last) - 1):  # inside the prefix, the header, and the records
        assert log.append_batches(whole + last[:cut]) == 0  # the first two are there already
        assert log.log_end_offset == 4 and log.epochs.entries == ((0, 0),)
    assert log.append_batches(whole + last) == 1
    assert log.log_end_offset == 7 and log.epochs.entries == ((0, 0), (2, 4))


def test_append_batches_skips_the_batches_it_already_has(make_log: MakeLog) -> None:
    log = make_log()
    log.append_batches(fetched(epoch_batch(0, 2, 0), epoch_batch(2, 2, 1)))
    assert log.append_batches(fetched(epoch_batch(0, 2, 0), epoch_batch(2, 2, 1), epoch_batch(4, 1, 1))) == 1
    assert log.log_end_offset == 5
    assert log.epochs.entries == ((0, 0), (1, 2))


def test_append_batches_keeps_the_holes_of_a_compacted_leader(make_log: MakeLog) -> None:
    log = make_log()
    # Offset 2 was compacted away on the leader: the copy has the same hole.
    assert log.append_batches(fetched(epoch_batch(0, 2, 0), epoch_batch(3, 1, 0))) == 2
    assert log.log_end_offset == 4
    assert check_batch(log.read_bytes(2, 1000)).base_offset == 3  # reading into the hole finds the next batch


def test_append_batches_refuses_a_batch_overlapping_the_log_end(make_log: MakeLog) -> None:
    log = make_log()
    log.append_batches(fetched(epoch_batch(0, 2, 0)))
    with pytest.raises(InvalidOffsetError, match="starts at offset 1 but the log ends at 2"):
        log.append_batches(fetched(epoch_batch(1, 3, 0)))
    assert log.log_end_offset == 2


def test_append_batches_validates_every_batch(make_log: MakeLog) -> None:
    log = make_log()
    bad = bytearray(epoch_batch(2, 1, 0))
    bad[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        log.append_batches(fetched(epoch_batch(0, 2, 0), bytes(bad)))
    assert log.log_end_offset == 2


def test_epoch_queries_on_an_offline_log_raise(make_log: MakeLog, faults: FaultPoints) -> None:
    log = make_log()
    log.append(batch(1), leader_epoch=0)
    faults.arm("fsync", times=1)
    with pytest.raises(LogDirOfflineError):
        log.flush()
    with pytest.raises(LogDirOfflineError):
        log.end_offset_for_epoch(0)
    with pytest.raises(LogDirOfflineError):
        log.append_batches(epoch_batch(1, 1, 0))
