"""The leader's side of the ISR (``node.replica_manager``) against the session's real ZooKeeper.

One in-process "broker 2" (a ``ClusterState`` and a ``ReplicaManager`` over a real log dir) and
a controller (broker 3) share a chroot; the test plays broker 1's fetches and chooses what
each ZooKeeper read sees, so the racy interleavings happen every time, in the order named.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import trio

from node.controller import Controller
from node.coordination import PartitionState, ZkState
from node.replica_manager import ReplicaManager
from storage import TopicPartition
from tests.node.inprocess import registered_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DEADLINE_S = 15.0
TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)


async def _settled(replicas: ReplicaManager) -> None:
    """Wait until the leader has no ISR write in flight for the partition."""
    with trio.fail_after(DEADLINE_S):
        while TP in replicas._isr_writes:
            await trio.sleep(0.01)


async def _assignment_and_state(zk: ZkState) -> tuple[tuple[int, ...], PartitionState]:
    topic = await zk.topic(TOPIC)
    state = await zk.partition_state(TOPIC, 0)
    assert topic is not None and state is not None
    return topic.partitions[0], state


def test_a_fetch_by_a_replica_the_reassignment_just_removed_never_rejoins_the_isr(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race seen in tests/strait/test_reassign.py: the controller completes moving
    ``moving-0`` from [1, 2] to [2, 3] (leadership 1 -> 2, ISR [2, 3]); broker 2's snapshot
    straddles that completion (round 2 read the assignment before it, round 3 the state
    after it, as ``read_snapshot`` may), so broker 2 leads with broker 1 still listed as a
    replica; broker 1, whose view straddles the same way, fetches at the new epoch. The ISR
    must never again name broker 1."""

    async def main() -> None:
        async with (
            registered_broker(3, zk_connect, tmp_path) as (zk3, cluster3, config3),
            registered_broker(2, zk_connect, tmp_path) as (zk2, cluster2, config2),
            trio.open_nursery() as nursery,
        ):
            epoch = await zk3.elect_controller(3)
            assert epoch is not None
            # Mid-reassignment: [1, 2] grew to [2, 3, 1]; broker 3 caught up and joined the ISR.
            await zk3.create_topic(TOPIC, {0: (2, 3, 1)}, {}, {0: PartitionState(1, 4, (1, 2, 3), epoch)})
            await zk3.start_reassignment({(TOPIC, 0): (2, 3)})
            replicas = ReplicaManager(config2, cluster2, zk2)
            cluster2.on_roles_changed.append(replicas.roles_changed)
            await nursery.start(replicas.run)
            await cluster2.refresh()
            assert not cluster2.partitions[TP].is_leader  # broker 2 follows broker 1

            before = await zk2.snapshot()  # what round 2 of broker 2's next snapshot reads
            controller = Controller(config3, cluster3, zk3)
            await cluster3.refresh()
            await controller._reassign(cluster3, epoch)
            assigned, state = await _assignment_and_state(zk3)
            assert assigned == (2, 3) and state.leader == 2 and set(state.isr) == {2, 3}

            after = await zk2.snapshot()
            straddling = dataclasses.replace(after, topics=before.topics, configs=before.configs)

            async def straddled_once(*_: Any, **__: Any) -> Any:
                monkeypatch.undo()  # the next refresh reads ZooKeeper again
                return straddling

            monkeypatch.setattr(zk2, "snapshot", straddled_once)
            await cluster2.refresh()
            partition = cluster2.partitions[TP]
            assert partition.is_leader and partition.leader_epoch == state.leader_epoch
            assert 1 in partition.replicas  # the straddled view: broker 1 still listed

            # Broker 1 fetches at the new epoch from the leader's log end: fully caught up.
            partition.check_epoch(state.leader_epoch)
            replicas.follower_fetched(partition, 1, partition.log.log_end_offset)
            await _settled(replicas)
            await cluster2.refresh()  # the watch on the assignment fires
            await _settled(replicas)

            assigned, state = await _assignment_and_state(zk3)
            assert set(state.isr) <= set(assigned), f"ISR {list(state.isr)} names a non-replica of {list(assigned)}"
            assert 1 not in cluster2.partitions[TP].isr
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_an_isr_change_decided_on_an_older_state_is_not_written_over_a_newer_one(
    zk_connect: str, tmp_path: Path
) -> None:
    """Broker 1's fetch decides "ISR [2, 3] + 1"; before that write goes out, the leader learns
    that the controller dropped dead broker 3 (ISR [2]). The write must not bring 3 back."""

    async def main() -> None:
        async with (
            registered_broker(3, zk_connect, tmp_path) as (zk3, _, _),
            registered_broker(2, zk_connect, tmp_path) as (zk2, cluster2, config2),
            trio.open_nursery() as nursery,
        ):
            await zk3.create_topic(TOPIC, {0: (2, 3, 1)}, {}, {0: PartitionState(2, 4, (2, 3), 1)})
            replicas = ReplicaManager(config2, cluster2, zk2)
            await nursery.start(replicas.run)
            await cluster2.refresh()
            partition = cluster2.partitions[TP]
            assert partition.is_leader and partition.isr == (2, 3)
            _, state = await _assignment_and_state(zk3)
            shrunk = dataclasses.replace(state, isr=(2,))
            shrunk = dataclasses.replace(shrunk, version=await zk3.set_partition_state(TOPIC, 0, shrunk))

            replicas.follower_fetched(partition, 1, partition.log.log_end_offset)  # decided on [2, 3]
            partition.apply_state(shrunk, partition.replicas)  # the refresh lands before the write runs
            await _settled(replicas)

            _, state = await _assignment_and_state(zk3)
            assert 3 not in state.isr, f"the dead broker 3 is back in the ISR {list(state.isr)}"
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_the_shrink_loop_removes_isr_members_that_are_no_longer_replicas(zk_connect: str, tmp_path: Path) -> None:
    """What the race used to leave behind: assignment [2, 3], ISR [1, 2, 3]. No fetch from
    broker 1 will ever come to age it out; the leader removes it because it is not a replica."""

    async def main() -> None:
        async with (
            registered_broker(2, zk_connect, tmp_path, replica_lag_time_max_ms="1000") as (zk2, cluster2, config2),
            trio.open_nursery() as nursery,
        ):
            await zk2.create_topic(TOPIC, {0: (2, 3)}, {}, {0: PartitionState(2, 4, (1, 2, 3), 1)})
            replicas = ReplicaManager(config2, cluster2, zk2)
            await nursery.start(replicas.run)
            await cluster2.refresh()
            assert cluster2.partitions[TP].is_leader
            with trio.fail_after(DEADLINE_S):
                while 1 in (await _assignment_and_state(zk2))[1].isr:
                    await trio.sleep(0.1)
            _, state = await _assignment_and_state(zk2)
            assert 2 in state.isr and set(state.isr) <= {2, 3}
            nursery.cancel_scope.cancel()

    trio.run(main)
