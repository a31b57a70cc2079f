"""Transactions on one partition replica (``node.partition.Partition``): producer state rebuilt
from the log, the last stable offset, markers and the aborted-transaction index. Real logs in a
temporary directory, no processes."""

from __future__ import annotations

from pathlib import Path

from node.coordination import PartitionState
from node.partition import Partition
from storage import FaultPoints, LogConfig, PartitionLog, TopicPartition, create_log, load_log
from storage.records import BatchBuilder, build_control_batch
from tests.node.handlers.fakes import NOW_MS, policy

TP = TopicPartition("txn", 0)
ME = 1


def txn_batch(pid: int, epoch: int, seq: int, n: int = 2, *, transactional: bool = True) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    for i in range(n):
        builder.append(NOW_MS, None, b"p%d-s%d" % (pid, seq + i))
    return builder.build()


def marker(pid: int, epoch: int, *, commit: bool, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(
        commit=commit, timestamp=NOW_MS, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch
    )


def new_log(tmp_path: Path) -> PartitionLog:
    return create_log(tmp_path / "txn-0", TP, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)


def reload(tmp_path: Path, plog: PartitionLog, *, clean: bool = True) -> PartitionLog:
    hw = plog.high_watermark
    if clean:
        plog.close()
    again, _ = load_log(
        tmp_path / "txn-0",
        TP,
        LogConfig(),
        clean_shutdown=clean,
        high_watermark=hw,
        faults=FaultPoints(),
        clock=lambda: NOW_MS,
    )
    return again


def replica(plog: PartitionLog, *, leader: int = ME, epoch: int = 0) -> Partition:
    partition = Partition(TP, plog, policy(), broker_id=ME, leader_epoch=-1, clock=lambda: NOW_MS)
    partition.apply_state(PartitionState(leader, epoch, (ME,), 1, version=0), (ME,))
    return partition


def test_producer_state_is_rebuilt_from_the_log_with_its_open_transaction_and_markers(tmp_path: Path) -> None:
    plog = new_log(tmp_path)
    plog.append(txn_batch(7, 0, 0))  # 0-1: producer 7's transaction, aborted below with a bumped epoch
    plog.append(txn_batch(8, 0, 0))  # 2-3: producer 8's, still open
    plog.append(marker(7, 1, commit=False, coordinator_epoch=3))  # 4
    plog.high_watermark = plog.log_end_offset
    partition = replica(reload(tmp_path, plog))
    producers = partition.producers
    assert producers.ongoing == {8: 2}
    entry = producers.entry(7)
    assert entry is not None and (entry.epoch, entry.coordinator_epoch) == (1, 3)
    assert producers.first_unstable_offset(partition.log.high_watermark) == 2
