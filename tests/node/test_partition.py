"""A leader's view of its followers (``node.partition.Partition``): who counts for the ISR and
the high watermark, and what an epoch bump under the same leader keeps. Real logs in a
temporary directory, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from node.coordination import PartitionState
from node.errors import BrokerError
from node.partition import Partition
from node.protocol import ErrorCode
from storage import FaultPoints, LogConfig, TopicPartition, create_log
from storage.records import build_batch
from tests.node.handlers.fakes import NOW_MS, policy

TP = TopicPartition("moving", 0)
LEADER = 2


def _leader(tmp_path: Path, replicas: tuple[int, ...], isr: tuple[int, ...], *, epoch: int = 4) -> Partition:
    """Broker 2 leading ``moving-0`` at ``epoch`` (state version 0)."""
    log = create_log(tmp_path / "moving-0", TP, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)
    partition = Partition(TP, log, policy(), broker_id=LEADER, leader_epoch=-1, clock=lambda: NOW_MS)
    partition.apply_state(PartitionState(LEADER, epoch, isr, 1, version=0), replicas)
    assert partition.is_leader
    return partition


def _append(partition: Partition, n: int = 3) -> int:
    """Append ``n`` records as a producer would; returns the last offset."""
    result = partition.append_produced(memoryview(build_batch([(NOW_MS, None, b"v%d" % i) for i in range(n)])))
    return result.last_offset


async def _answer(partition: Partition, offset: int, answers: list[ErrorCode]) -> None:
    """An acks=all produce waiting for ``offset``: appends its answer (0: committed)."""
    try:
        await partition.wait_for_hw(offset, trio.current_time() + 5)
    except BrokerError as exc:
        answers.append(exc.code)
    else:
        answers.append(ErrorCode.NONE)


def test_a_fetch_from_a_broker_outside_the_replica_list_is_refused_and_counts_for_nothing(tmp_path: Path) -> None:
    partition = _leader(tmp_path, (2, 3), (2, 3))
    _append(partition)
    end = partition.log.log_end_offset
    with pytest.raises(BrokerError) as refused:
        partition.record_follower_fetch(1, end)
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert "broker 1 is not a follower of moving-0 (replicas [2, 3])" in str(refused.value)
    assert partition.isr == (2, 3) and partition.log.high_watermark == 0 and 1 not in partition.followers


def test_a_replica_dropped_with_a_stale_state_read_is_no_follower_any_more(tmp_path: Path) -> None:
    """A snapshot may carry the new replica list with a state older than the one the leader
    acts on; the replica list still counts (before, only the state's path synced followers)."""
    partition = _leader(tmp_path, (2, 3, 1), (2, 3), epoch=5)
    assert set(partition.followers) == {1, 3}
    partition.apply_state(PartitionState(1, 4, (1, 2, 3), 1, version=0), (2, 3))  # stale: epoch 4 < 5
    assert partition.is_leader and partition.leader_epoch == 5 and partition.replicas == (2, 3)
    assert set(partition.followers) == {3}
    with pytest.raises(BrokerError):
        partition.record_follower_fetch(1, partition.log.log_end_offset)


def test_a_caught_up_replica_may_join_the_isr(tmp_path: Path) -> None:
    partition = _leader(tmp_path, (2, 3, 1), (2, 3))
    _append(partition)
    end = partition.log.log_end_offset
    assert partition.record_follower_fetch(3, end) is False  # already in the ISR
    assert partition.log.high_watermark == end
    assert partition.record_follower_fetch(1, end) is True


def test_isr_members_that_are_not_replicas_are_named_for_removal(tmp_path: Path) -> None:
    partition = _leader(tmp_path, (2, 3), (1, 2, 3))  # what the race left in ZooKeeper
    assert partition.isr_non_replicas() == [1]
    assert partition.lagging_followers(1) == []  # never a follower, so never "lagging": hence the separate check


def test_an_epoch_bump_under_the_same_leader_keeps_an_acks_all_write_waiting(tmp_path: Path) -> None:
    """Completing a reassignment bumps the epoch and the leader stays: an acks=all produce
    waiting for the high watermark is still answered once the ISR has the batch (Kafka keeps
    delayed produces across such a bump); a real loss of leadership still fails it."""

    async def main() -> None:
        partition = _leader(tmp_path, (2, 3, 1), (1, 2, 3))
        for follower in (1, 3):
            partition.record_follower_fetch(follower, 0)
        answers: list[ErrorCode] = []
        last = _append(partition)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_answer, partition, last, answers)
            await trio.testing.wait_all_tasks_blocked()
            # The reassignment to [2, 3] completes: ISR ∩ target, epoch 4 -> 5, same leader.
            partition.apply_state(PartitionState(LEADER, 5, (2, 3), 1, version=1), (2, 3))
            assert partition.is_leader and partition.leader_epoch == 5 and set(partition.followers) == {3}
            assert partition.followers[3].leo == 0  # what it knew of broker 3 is still true
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []
            partition.record_follower_fetch(3, partition.log.log_end_offset)
        assert answers == [ErrorCode.NONE] and partition.log.high_watermark == last + 1

        last = _append(partition)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_answer, partition, last, answers)
            await trio.testing.wait_all_tasks_blocked()
            partition.apply_state(PartitionState(3, 6, (3,), 1, version=2), (2, 3))  # leadership moved
        assert answers == [ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER]

    trio.run(main)


def test_a_follower_joining_the_isr_holds_the_high_watermark_until_the_write_is_done(tmp_path: Path) -> None:
    """The expansion is decided at one fetch and written to ZooKeeper later. Meanwhile the
    joining follower counts for the high watermark: otherwise the ISR members could move it past
    the joiner's log end, and the joiner would enter the ISR without a committed record (found
    by the chaos suite: a lost acknowledged write after the joiner was elected)."""
    partition = _leader(tmp_path, (2, 3, 1), (2, 3))
    _append(partition)
    end = partition.log.log_end_offset
    partition.record_follower_fetch(3, end)
    assert partition.record_follower_fetch(1, end) is True  # broker 1 may join: the write starts
    partition.joining_isr = frozenset({1})
    last = _append(partition, 1)  # a produce arrives while the ISR write is in flight
    partition.record_follower_fetch(3, last + 1)  # the one ISR follower has it
    assert partition.log.high_watermark == end  # held: broker 1 (joining) does not have it yet
    partition.record_follower_fetch(1, last + 1)
    assert partition.log.high_watermark == last + 1
    partition.joining_isr = frozenset()
