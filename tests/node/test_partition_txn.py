"""Transactions on one partition replica (``node.partition.Partition``): producer state rebuilt
from the log, the last stable offset, markers and the aborted-transaction index. Real logs in a
temporary directory, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.coordination import PartitionState
from node.errors import BrokerError
from node.partition import Partition
from node.protocol import ErrorCode
from storage import AbortedTxn, FaultPoints, LogConfig, Offset, PartitionLog, TopicPartition, create_log, load_log
from storage.records import BatchBuilder, build_batch, build_control_batch
from tests.node.handlers.fakes import NOW_MS, policy

TP = TopicPartition("txn", 0)
ME = 1


def txn_batch(pid: int, epoch: int, seq: int, n: int = 2, *, transactional: bool = True) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    for i in range(n):
        builder.append(NOW_MS, None, b"p%d-s%d" % (pid, seq + i))
    return builder.build()


def plain(n: int) -> bytes:
    return build_batch([(NOW_MS, None, b"plain%d" % i) for i in range(n)])


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


def leader(tmp_path: Path, *, isr: tuple[int, ...] = (ME,)) -> Partition:
    partition = Partition(TP, new_log(tmp_path), policy(), broker_id=ME, leader_epoch=-1, clock=lambda: NOW_MS)
    partition.apply_state(PartitionState(ME, 0, isr, 1, version=0), (ME, 2) if len(isr) > 1 else (ME,))
    assert partition.is_leader
    return partition


def produce(partition: Partition, batch: bytes) -> int:
    return partition.append_produced(memoryview(batch)).base_offset


def code_of(fn: object, *args: object) -> ErrorCode:
    with pytest.raises(BrokerError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.code


def test_the_lso_stops_at_an_open_transaction_and_moves_once_its_marker_is_replicated(tmp_path: Path) -> None:
    partition = leader(tmp_path, isr=(ME, 2))
    produce(partition, plain(2))  # 0-1
    first = produce(partition, txn_batch(7, 0, 0))  # 2-3
    produce(partition, plain(1))  # 4
    partition.record_follower_fetch(2, partition.log.log_end_offset)
    assert partition.log.high_watermark == 5
    assert partition.last_stable_offset == first == 2
    offset = partition.append_marker(7, 0, True, 0)  # 5
    assert partition.last_stable_offset == 2, "the marker is not below the high watermark yet"
    partition.record_follower_fetch(2, partition.log.log_end_offset)
    assert partition.last_stable_offset == partition.log.high_watermark == offset + 1
    assert partition.log.collect_aborted_txns(0, 10) == []  # a commit is not indexed


def test_an_abort_is_indexed_with_the_lso_of_its_moment(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    produce(partition, txn_batch(7, 0, 0))  # 0-1
    produce(partition, txn_batch(8, 0, 0))  # 2-3
    offset = partition.append_marker(7, 0, False, 0)  # 4
    assert partition.log.collect_aborted_txns(0, 5) == [AbortedTxn(7, 0, offset, 2)]
    assert partition.last_stable_offset == 2  # producer 8's transaction is still open


def test_produce_rules_for_transactional_batches(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    produce(partition, txn_batch(7, 0, 0))
    assert code_of(produce, partition, txn_batch(7, 0, 2, transactional=False)) == ErrorCode.INVALID_TXN_STATE
    no_pid = BatchBuilder(transactional=True)
    no_pid.append(NOW_MS, None, b"x")
    assert code_of(produce, partition, no_pid.build()) == ErrorCode.INVALID_RECORD
    assert code_of(produce, partition, marker(7, 0, commit=True)) == ErrorCode.INVALID_RECORD


def test_markers_are_fenced_by_producer_and_coordinator_epochs(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    produce(partition, txn_batch(7, 1, 0))
    end = partition.log.log_end_offset
    assert code_of(partition.append_marker, 7, 0, False, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    partition.append_marker(7, 2, False, 4)  # the coordinator fenced epoch 1 with a bumped epoch
    assert code_of(produce, partition, txn_batch(7, 1, 2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(partition.append_marker, 7, 2, True, 3) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert partition.log.log_end_offset == end + 1, "a fenced marker writes nothing"
    follower = replica(new_log(tmp_path / "f"), leader=2)
    assert code_of(follower.append_marker, 7, 2, True, 4) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_replays_the_leaders_transactions_and_leads_with_them(tmp_path: Path) -> None:
    source = leader(tmp_path / "leader")
    produce(source, txn_batch(7, 0, 0))
    produce(source, txn_batch(8, 0, 0))
    source.append_marker(7, 0, False, 0)
    produce(source, txn_batch(9, 0, 0))
    source.append_marker(9, 0, True, 0)
    follower = replica(new_log(tmp_path / "follower"), leader=2)
    follower.append_replica(source.log.read_bytes(0, 1 << 20))
    follower.log.high_watermark = source.log.high_watermark
    assert follower.producers.ongoing == source.producers.ongoing == {8: 2}
    assert follower.log.collect_aborted_txns(0, 100) == source.log.collect_aborted_txns(0, 100)
    follower.apply_state(PartitionState(ME, 1, (ME,), 2, version=1), (ME,))
    assert follower.is_leader and follower.last_stable_offset == 2
    follower.append_marker(8, 0, False, 0)
    assert [t.producer_id for t in follower.log.collect_aborted_txns(0, 100)] == [7, 8]
    assert follower.last_stable_offset == follower.log.log_end_offset


def test_a_mirror_target_replays_the_sources_transactions(tmp_path: Path) -> None:
    source = leader(tmp_path / "source")
    produce(source, txn_batch(7, 0, 0))
    source.append_marker(7, 0, False, 0)
    produce(source, txn_batch(8, 0, 0))
    target = leader(tmp_path / "target")
    target.append_mirrored(source.log.read_bytes(0, 1 << 20), Offset(0))
    assert target.producers.ongoing == {8: 3}
    assert target.log.collect_aborted_txns(0, 100) == source.log.collect_aborted_txns(0, 100)
    assert target.last_stable_offset == 3


def test_truncation_below_a_marker_reopens_its_transaction(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    produce(partition, txn_batch(7, 0, 0))  # 0-1
    offset = partition.append_marker(7, 0, False, 0)  # 2
    partition.truncate_to(Offset(offset))
    assert partition.producers.ongoing == {7: 0}
    assert partition.log.collect_aborted_txns(0, 100) == []


def test_a_transactional_offset_commit_appended_by_the_broker_opens_a_transaction(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    partition.append_internal(txn_batch(7, 0, 0))
    assert partition.producers.ongoing == {7: 0}
    partition.append_marker(7, 0, True, 0)
    assert partition.producers.ongoing == {}
