"""Moving a replica between log dirs online (AlterReplicaLogDirs): the copy, the swap, restarts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from storage import (
    AbortedTxn,
    FaultPoints,
    LogConfig,
    LogDirNotFoundError,
    LogDirOfflineError,
    LogManager,
    PartitionLog,
    ReplicaMove,
    StorageError,
    TopicPartition,
)
from storage.records import iter_batches
from tests.storage.helpers import FakeClock, batch

TP = TopicPartition("t", 0)
SMALL = LogConfig(segment_bytes=2_000, index_interval_bytes=200)


class SimulatedCrash(BaseException):
    """Raised at a fault point to stop a move where a kill -9 would (nothing cleans up after it)."""


def manager(tmp_path: Path, *, faults: FaultPoints | None = None, clock: FakeClock | None = None) -> LogManager:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    m = LogManager(dirs, SMALL, broker_id=1, clock=clock or FakeClock(), faults=faults or FaultPoints())
    m.startup()
    return m


def loaded(tmp_path: Path, records: int = 25) -> tuple[LogManager, FaultPoints, list[tuple[int, int, int, bytes]]]:
    """A manager with TP in d0 holding ``records`` batches, its fault points and TP's contents."""
    faults = FaultPoints()
    m = manager(tmp_path, faults=faults)
    plog = placed(m)
    fill(plog, records)
    return m, faults, contents(plog)


def placed(m: LogManager, tp: TopicPartition = TP, *, where: str = "d0") -> PartitionLog:
    m._preferred[tp] = next(d.path for d in m.dirs if d.path.name == where)
    return m.create_log(tp)


def wait_moves_done(m: LogManager, deadline_s: float = 20) -> None:
    end = time.monotonic() + deadline_s
    while m.moves():
        assert time.monotonic() < end, f"moves still running: {m.moves()}"
        time.sleep(0.01)


def crash_moving(m: LogManager, target: Path) -> None:
    """Move TP to ``target`` and wait until the move's thread died of a SimulatedCrash (armed by
    the caller), leaving the files as a kill -9 at that point would."""
    crashed = threading.Event()
    run_move = m._run_move

    def run(move: ReplicaMove) -> None:
        try:
            run_move(move)
        except SimulatedCrash:
            crashed.set()

    m._run_move = run  # type: ignore[method-assign]
    m.alter_replica_dir(TP, target)
    assert crashed.wait(20)


def contents(plog: PartitionLog) -> list[tuple[int, int, int, bytes]]:
    """(base offset, last offset, leader epoch, records) of every batch from the log start."""
    out = []
    data = plog.read_bytes(plog.log_start_offset, 1 << 30)
    for pos, h in iter_batches(data):
        out.append((h.base_offset, h.last_offset, h.partition_leader_epoch, data[pos + 61 : pos + h.size]))
    return out


def fill(plog: PartitionLog, n: int, *, epoch: int = 0, tag: str = "") -> None:
    for i in range(n):
        plog.append(batch(3, tag=f"{tag}{i}"), leader_epoch=epoch)


def test_a_move_copies_the_log_with_its_epochs_txn_index_and_start(tmp_path: Path) -> None:
    m = manager(tmp_path)
    plog = placed(m)
    fill(plog, 20, epoch=0)
    plog.assign_epoch(3)
    fill(plog, 20, epoch=3, tag="b")
    plog.append_aborted_txn(AbortedTxn(7, 3, 10, 3))
    plog.append_aborted_txn(AbortedTxn(8, 60, 90, 60))
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(plog.log_start_offset + 31)  # inside a batch, past the first segments
    plog.assign_epoch(5)  # an epoch with no batch yet, at the log end
    before = contents(plog)
    epochs = plog.epochs.entries
    aborted = plog.collect_aborted_txns(0, plog.log_end_offset)
    start, end, hw = plog.log_start_offset, plog.log_end_offset, plog.high_watermark
    old_dir = plog.dir
    in_flight = plog.read(start, 1 << 20)  # a fetch answered before the swap, sent after it

    assert m.alter_replica_dir(TP, tmp_path / "d1") is True
    wait_moves_done(m)

    assert m.get_log(TP) is plog and plog.dir == tmp_path / "d1" / "t-0"
    assert not old_dir.exists() and len(list((tmp_path / "d0").glob("t-0.*-delete"))) == 1
    assert contents(plog) == before
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (start, end, hw)
    assert plog.epochs.entries == epochs and plog.epochs.path.parent == plog.dir
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == aborted
    assert b"".join(s.read() for s in in_flight) == plog.read_bytes(start, 1 << 20)
    assert [d.path.name for d in m.dirs if TP in d.logs] == ["d1"]
    m.maintenance(m.clock() + SMALL.file_delete_delay_ms + 1)
    assert not list((tmp_path / "d0").glob("t-0.*"))
    plog.append(batch(2, tag="after"), leader_epoch=5)  # the moved log takes appends
    m.shutdown()

    again = manager(tmp_path)
    moved = again.get_log(TP)
    assert moved is not None and moved.dir == tmp_path / "d1" / "t-0"
    assert contents(moved)[:-1] == before and moved.epochs.entries == epochs
    assert moved.collect_aborted_txns(0, moved.log_end_offset) == aborted
    assert moved.log_start_offset == start


def test_appends_and_a_truncation_during_the_copy_are_in_the_moved_log(tmp_path: Path) -> None:
    faults = FaultPoints()
    m = manager(tmp_path, faults=faults)
    plog = placed(m)
    fill(plog, 30)
    faults.arm("move_copy", stall_s=0.02, raises=False)  # every chunk waits: the copy takes a while
    m.move_bytes_per_second = 0
    m.alter_replica_dir(TP, tmp_path / "d1")
    move = m.moves()[0]
    move.chunk_bytes = 300
    fill(plog, 10, tag="x")
    plog.truncate_to(plog.log_end_offset - 6)  # a follower told to truncate: the copy starts over
    plog.assign_epoch(1)
    fill(plog, 10, epoch=1, tag="y")
    described = {u.path.name: u.replicas for u in m.describe_dirs()}
    assert [r.is_future for r in described["d1"]] == [True] and described["d1"][0].tp == TP
    assert [r.is_future for r in described["d0"]] == [False]
    faults.disarm()
    wait_moves_done(m)
    assert move.restarts >= 1
    assert plog.dir.parent.name == "d1"
    expected = contents(plog)
    m.shutdown()
    again = manager(tmp_path)
    moved = again.get_log(TP)
    assert moved is not None and contents(moved) == expected


def test_a_crash_between_the_renames_finishes_the_swap_at_load(tmp_path: Path) -> None:
    m, faults, expected = loaded(tmp_path)
    faults.arm("move_swap", error=SimulatedCrash())
    crash_moving(m, tmp_path / "d1")
    # "killed" here: the old dir is renamed -delete, the future one not yet renamed
    assert list((tmp_path / "d0").glob("t-0.*-delete")) and list((tmp_path / "d1").glob("t-0.*-future"))
    again = manager(tmp_path)
    moved = again.get_log(TP)
    assert moved is not None and moved.dir == tmp_path / "d1" / "t-0"
    assert contents(moved) == expected
    assert not list(tmp_path.glob("d*/t-0.*")) and not again.moves()


def test_an_unfinished_copy_is_removed_at_load_and_the_move_starts_again(tmp_path: Path) -> None:
    m, faults, expected = loaded(tmp_path)
    faults.arm("move_copy", error=SimulatedCrash(), times=1)
    crash_moving(m, tmp_path / "d1")
    assert list((tmp_path / "d1").glob("t-0.*-future"))
    again = manager(tmp_path)  # the leftover copy is removed and the move asked again
    wait_moves_done(again)
    moved = again.get_log(TP)
    assert moved is not None and moved.dir == tmp_path / "d1" / "t-0"
    assert contents(moved) == expected
    assert not list((tmp_path / "d1").glob("t-0.*-future"))


def test_bad_moves_are_refused_and_a_move_to_where_it_is_does_nothing(tmp_path: Path) -> None:
    m = manager(tmp_path)
    plog = placed(m)
    fill(plog, 3)
    with pytest.raises(LogDirNotFoundError, match="is not a log dir of this node"):
        m.alter_replica_dir(TP, tmp_path / "elsewhere")
    assert m.alter_replica_dir(TP, tmp_path / "d0") is False and not m.moves()
    m.fail_dir(tmp_path / "d1", OSError("disk gone"))
    with pytest.raises(LogDirOfflineError):
        m.alter_replica_dir(TP, tmp_path / "d1")


def test_a_move_asked_before_the_replica_exists_places_it(tmp_path: Path) -> None:
    m = manager(tmp_path)
    new = TopicPartition("later", 0)
    with pytest.raises(StorageError, match="no replica on this node yet"):
        m.alter_replica_dir(new, tmp_path / "d1")
    for p in range(3):
        placed(m, TopicPartition("x", p), where="d1")  # d1 is the fuller dir
    assert m.create_log(new).dir.parent.name == "d1"


def test_deleting_the_partition_cancels_its_move_and_removes_the_copy(tmp_path: Path) -> None:
    faults = FaultPoints()
    m = manager(tmp_path, faults=faults)
    plog = placed(m)
    fill(plog, 10)
    faults.arm("move_copy", stall_s=30, raises=False)
    m.alter_replica_dir(TP, tmp_path / "d1")
    move = m.moves()[0]
    m.delete_log(TP)
    faults.disarm()
    assert move.thread is not None
    move.thread.join(20)
    assert not list(tmp_path.glob("d*/t-0*")) and not m.moves()


def test_a_clean_stop_in_the_middle_leaves_the_copy_for_the_next_load_to_start_again(tmp_path: Path) -> None:
    m, faults, expected = loaded(tmp_path)
    faults.arm("move_copy", stall_s=0.05, raises=False)  # every chunk waits: the copy takes a while
    m.alter_replica_dir(TP, tmp_path / "d1")
    m.moves()[0].chunk_bytes = 100
    m.shutdown()
    faults.disarm()
    assert list((tmp_path / "d1").glob("t-0.*-future")) and (tmp_path / "d0" / "t-0").is_dir()
    again = manager(tmp_path)
    wait_moves_done(again)
    moved = again.get_log(TP)
    assert moved is not None and moved.dir == tmp_path / "d1" / "t-0" and contents(moved) == expected


def test_a_disk_error_in_the_copy_takes_the_target_dir_offline_and_ends_the_move(tmp_path: Path) -> None:
    m, faults, expected = loaded(tmp_path)
    faults.arm("move_copy", error=OSError(5, "Input/output error"), times=1)
    m.alter_replica_dir(TP, tmp_path / "d1")
    wait_moves_done(m)
    assert m.offline_dirs() == [tmp_path / "d1"] and m.moves_failed == 1
    plog = m.get_log(TP)
    assert plog is not None and plog.dir == tmp_path / "d0" / "t-0" and contents(plog) == expected


def test_the_swap_lets_go_of_the_managers_lock_while_the_logs_is_held(tmp_path: Path) -> None:
    # An append that hits an I/O error holds the log's lock and takes the manager's (fail_dir):
    # the swap, which needs both, must not hold the manager's while it waits for the log's.
    m, _, expected = loaded(tmp_path)
    plog = m.get_log(TP)
    assert plog is not None
    with plog.lock:
        m.alter_replica_dir(TP, tmp_path / "d1")
        time.sleep(0.3)  # the copy is done and the swap waits for the log's lock
        assert m._lock.acquire(timeout=10), "the swap held the manager's lock while waiting for the log's"
        m._lock.release()
    wait_moves_done(m)
    assert plog.dir == tmp_path / "d1" / "t-0" and contents(plog) == expected
