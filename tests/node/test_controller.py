"""The controller (``node.controller``) against the session's real ZooKeeper: completing a
partition reassignment; deciding every partition a stopping or dead broker leads or follows and
writing their states as one batch (controlled shutdown, failover, preferred leaders), deciding
again only the partitions whose compare-and-set lost."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from node.controller import SHUTDOWN_WRITE_ROUNDS, Controller
from node.coordination import BrokerRegistration, PartitionState, StaleState, StateWrites, ZkState
from node.ids import NO_NODE, NodeId
from storage import LeaderEpoch
from tests.node.coordination.zk_helpers import raw_session
from tests.node.inprocess import registered_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = "moving"


def test_completing_a_reassignment_writes_assignment_and_state_in_one_transaction(
    zk_connect: str, tmp_path: Path
) -> None:
    """[1, 2, 3] -> [2, 3] with leader 2 staying: ISR ∩ target and leader epoch + 1 land in the
    same transaction as the new replica list, so a leader's ISR write decided before fails."""

    async def main() -> None:
        async with registered_broker(3, zk_connect, tmp_path) as (zk, cluster, config), raw_session(zk_connect) as raw:
            epoch = await zk.elect_controller(3)
            assert epoch is not None
            await zk.create_topic(TOPIC, {0: (2, 3, 1)}, {}, {0: PartitionState(2, 7, (1, 2, 3), epoch)})
            await zk.start_reassignment({(TOPIC, 0): (2, 3)})
            before = await zk.partition_state(TOPIC, 0)
            assert before is not None

            await cluster.refresh()
            await Controller(config, cluster, zk)._reassign(cluster, epoch)

            topic = await zk.topic(TOPIC)
            after = await zk.partition_state(TOPIC, 0)
            assert topic is not None and topic.partitions == {0: (2, 3)}
            assert after == PartitionState(2, 8, (2, 3), epoch, version=before.version + 1)
            assert await zk.reassignment() is None
            _, topic_stat = await trio.to_thread.run_sync(raw.client.get, f"/brokers/topics/{TOPIC}")
            _, state_stat = await trio.to_thread.run_sync(raw.client.get, f"/brokers/topics/{TOPIC}/partitions/0/state")
            assert topic_stat.mzxid == state_stat.mzxid  # one transaction

            # The leader's ISR write decided on the state before: lost.
            with pytest.raises(StaleState):
                await zk.set_partition_state(TOPIC, 0, PartitionState(2, 7, (1, 2, 3), epoch, before.version))

    trio.run(main)


# -- many partitions at once: controlled shutdown and failover -----------------------------------

TOPICS = 30
PER_TOPIC = 6  # 180 partitions, replicas rotated over brokers 1, 2, 3
ORDERS: tuple[tuple[NodeId, ...], ...] = ((1, 2, 3), (2, 3, 1), (3, 1, 2))


class Writes:
    """Counts the controller's state writes: each batch (the partitions in it) and single writes."""

    def __init__(self, zk: ZkState, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batches: list[frozenset[tuple[str, int]]] = []
        self.singles = 0
        self.before_batch: Callable[[int], Awaitable[None]] | None = None  # runs before batch n (1, 2, ...)
        batch, single = zk.set_partition_states, zk.set_partition_state

        async def counted_batch(states: dict[tuple[str, int], PartitionState]) -> StateWrites:
            self.batches.append(frozenset(states))
            if self.before_batch is not None:
                await self.before_batch(len(self.batches))
            return await batch(states)

        async def counted_single(*args: Any, **kwargs: Any) -> int:
            self.singles += 1
            return await single(*args, **kwargs)

        monkeypatch.setattr(zk, "set_partition_states", counted_batch)
        monkeypatch.setattr(zk, "set_partition_state", counted_single)


async def _bulk_topics(zk: ZkState, epoch: int) -> dict[tuple[str, int], PartitionState]:
    """TOPICS topics of PER_TOPIC partitions, each led by its first replica with a full ISR."""
    created = {}
    for t in range(TOPICS):
        assignment = {p: ORDERS[(t + p) % 3] for p in range(PER_TOPIC)}
        states = {p: PartitionState(r[0], LeaderEpoch(4), r, epoch) for p, r in assignment.items()}
        await zk.create_topic(f"bulk-{t:02d}", assignment, {}, states)
        created |= {(f"bulk-{t:02d}", p): dataclasses.replace(s, version=0) for p, s in states.items()}
    return created


async def _states(zk: ZkState) -> dict[tuple[str, int], PartitionState]:
    return dict((await zk.snapshot()).states)


def _without(broker: NodeId, assignment: tuple[NodeId, ...], state: PartitionState, epoch: int) -> PartitionState:
    """``state`` after ``broker`` left it in a controlled shutdown (others alive and in sync)."""
    isr = tuple(b for b in state.isr if b != broker)
    if state.leader != broker:
        return dataclasses.replace(state, isr=isr, controller_epoch=epoch, version=state.version + 1)
    leader = next(b for b in assignment if b in isr)
    return PartitionState(leader, LeaderEpoch(state.leader_epoch + 1), isr, epoch, state.version + 1)


def test_controlled_shutdown_moves_every_partition_in_one_batch_of_writes(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker 3 leads a third of 180 partitions and follows the rest: one batch moves its
    leaderships (first other ISR member in assignment order, leader epoch + 1) and takes it out of
    every ISR (leader epoch kept). It keeps leading where it is the last in-sync replica or the
    other ISR members are down, also on a topic that allows unclean election (a controlled
    shutdown never elects outside the ISR)."""

    async def main() -> None:
        async with registered_broker(1, zk_connect, tmp_path) as (zk, cluster, config), ZkState(zk_connect) as zk2:
            await zk2.register_broker(BrokerRegistration(2, "127.0.0.1", 2))
            epoch = await zk.elect_controller(1)
            assert epoch is not None
            before = await _bulk_topics(zk, epoch)
            alone = PartitionState(3, LeaderEpoch(2), (3,), epoch)
            await zk.create_topic("alone", {0: (3, 1, 2)}, {}, {0: alone})
            await zk.create_topic(
                "alone-unclean", {0: (3, 1, 2)}, {"unclean.leader.election.enable": "true"}, {0: alone}
            )
            dead_isr = PartitionState(3, LeaderEpoch(2), (3, 4), epoch)  # broker 4 is not registered
            await zk.create_topic("dead-isr", {0: (3, 4, 1)}, {}, {0: dead_isr})
            await cluster.refresh()
            controller = Controller(config, cluster, zk)
            controller.epoch = epoch
            writes = Writes(zk, monkeypatch)

            remaining = await controller.controlled_shutdown(NodeId(3))

            assert sorted(remaining) == [("alone", 0), ("alone-unclean", 0), ("dead-isr", 0)]
            assert writes.batches == [frozenset(before)] and writes.singles == 0
            after = await _states(zk)
            for key, state in before.items():
                assignment = cluster.topics[key[0]].assignment[key[1]]
                assert after[key] == _without(NodeId(3), assignment, state, epoch), key
            assert after["alone", 0] == after["alone-unclean", 0] == dataclasses.replace(alone, version=0)
            assert after["dead-isr", 0] == dataclasses.replace(dead_isr, version=0)
            led = [s for s in after.values() if s.leader == 3]
            assert len(led) == 3  # only the three it must keep

    trio.run(main)


def test_controlled_shutdown_decides_again_only_the_partitions_whose_write_lost(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the controller's read and its batch, two leaders change their ISR (a leader
    shrinking its ISR, as a lagging follower makes it): those two compare-and-sets lose, the
    others land; the second batch holds those two only, decided from what they are now."""

    async def main() -> None:
        async with (
            registered_broker(1, zk_connect, tmp_path) as (zk, cluster, config),
            ZkState(zk_connect) as zk2,
        ):
            await zk2.register_broker(BrokerRegistration(2, "127.0.0.1", 2))
            epoch = await zk.elect_controller(1)
            assert epoch is not None
            before = await _bulk_topics(zk, epoch)
            led_by_3 = ("bulk-00", 2)  # replicas (3, 1, 2)
            led_by_1 = ("bulk-00", 0)  # replicas (1, 2, 3)
            assert before[led_by_3].leader == 3 and before[led_by_1].leader == 1
            await cluster.refresh()
            controller = Controller(config, cluster, zk)
            controller.epoch = epoch
            writes = Writes(zk, monkeypatch)

            async def leaders_shrink_their_isrs(batch: int) -> None:
                if batch == 1:  # broker 3 drops 1 from its ISR; broker 1 drops 2 from its own
                    await zk2.set_partition_state(*led_by_3, dataclasses.replace(before[led_by_3], isr=(3, 2)))
                    await zk2.set_partition_state(*led_by_1, dataclasses.replace(before[led_by_1], isr=(1, 3)))

            writes.before_batch = leaders_shrink_their_isrs
            assert await controller.controlled_shutdown(NodeId(3)) == []

            assert writes.batches == [frozenset(before), frozenset({led_by_3, led_by_1})]
            after = await _states(zk)
            assert after[led_by_3] == PartitionState(2, LeaderEpoch(5), (2,), epoch, version=2)
            assert after[led_by_1] == PartitionState(1, LeaderEpoch(4), (1,), epoch, version=2)
            assert all(s.version == 1 and 3 not in s.isr for k, s in after.items() if k not in (led_by_3, led_by_1))

    trio.run(main)


def test_controlled_shutdown_gives_up_on_a_partition_that_keeps_moving(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition whose state moves before every batch is tried SHUTDOWN_WRITE_ROUNDS times, then
    reported among the remaining partitions, left as it is."""

    async def main() -> None:
        async with registered_broker(1, zk_connect, tmp_path) as (zk, cluster, config), ZkState(zk_connect) as zk2:
            await zk2.register_broker(BrokerRegistration(2, "127.0.0.1", 2))
            epoch = await zk.elect_controller(1)
            assert epoch is not None
            before = await _bulk_topics(zk, epoch)
            busy = ("bulk-01", 1)  # replicas (3, 1, 2)
            await cluster.refresh()
            controller = Controller(config, cluster, zk)
            controller.epoch = epoch
            writes = Writes(zk, monkeypatch)

            async def someone_writes_it_again(batch: int) -> None:
                current = await zk2.partition_state(*busy)
                assert current is not None
                await zk2.set_partition_state(*busy, current)  # same content, new version

            writes.before_batch = someone_writes_it_again
            assert await controller.controlled_shutdown(NodeId(3)) == [busy]

            assert len(writes.batches) == SHUTDOWN_WRITE_ROUNDS
            assert writes.batches[1:] == [frozenset({busy})] * (SHUTDOWN_WRITE_ROUNDS - 1)
            after = await _states(zk)
            assert after[busy] == dataclasses.replace(before[busy], version=SHUTDOWN_WRITE_ROUNDS)
            assert sum(1 for s in after.values() if 3 in s.isr) == 1

    trio.run(main)


def test_a_dead_brokers_partitions_fail_over_in_one_batch_of_writes(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker 3 is gone (not registered): one controller pass decides all 180 of its partitions
    and writes them as one batch: a new leader from the ISR (leader epoch + 1) where it led, out
    of the ISR (leader epoch kept) where it followed. Where it was the only ISR member the
    partition goes offline with its ISR kept, except on a topic that allows unclean election,
    where a live out-of-sync replica leads alone."""

    async def main() -> None:
        async with registered_broker(1, zk_connect, tmp_path) as (zk, cluster, config), ZkState(zk_connect) as zk2:
            await zk2.register_broker(BrokerRegistration(2, "127.0.0.1", 2))
            epoch = await zk.elect_controller(1)
            assert epoch is not None
            before = await _bulk_topics(zk, epoch)
            alone = PartitionState(3, LeaderEpoch(2), (3,), epoch)
            await zk.create_topic("alone", {0: (3, 1, 2)}, {}, {0: alone})
            await zk.create_topic(
                "alone-unclean", {0: (3, 2, 1)}, {"unclean.leader.election.enable": "true"}, {0: alone}
            )
            offline = PartitionState(NO_NODE, LeaderEpoch(3), (3,), epoch)
            await zk.create_topic("offline", {0: (3, 1, 2)}, {}, {0: offline})
            await cluster.refresh()
            writes = Writes(zk, monkeypatch)

            await Controller(config, cluster, zk)._reconcile(cluster, epoch)

            assert writes.batches == [frozenset(before) | {("alone", 0), ("alone-unclean", 0)}]
            assert writes.singles == 0
            after = await _states(zk)
            for key, state in before.items():
                assignment = cluster.topics[key[0]].assignment[key[1]]
                assert after[key] == _without(NodeId(3), assignment, state, epoch), key
            assert after["alone", 0] == PartitionState(NO_NODE, LeaderEpoch(3), (3,), epoch, version=1)
            assert after["alone-unclean", 0] == PartitionState(2, LeaderEpoch(3), (2,), epoch, version=1)
            assert after["offline", 0] == dataclasses.replace(offline, version=0)

    trio.run(main)


def test_preferred_leader_election_moves_every_leadership_back_in_one_batch(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After broker 3's controlled shutdown it is back in every ISR: one batch gives it back the
    leadership of each partition it is the first replica of, leader epoch + 1."""

    async def main() -> None:
        async with (
            registered_broker(1, zk_connect, tmp_path) as (zk, cluster, config),
            ZkState(zk_connect) as zk2,
            ZkState(zk_connect) as zk3,
        ):
            await zk2.register_broker(BrokerRegistration(2, "127.0.0.1", 2))
            await zk3.register_broker(BrokerRegistration(3, "127.0.0.1", 3))
            epoch = await zk.elect_controller(1)
            assert epoch is not None
            before = await _bulk_topics(zk, epoch)
            elsewhere = {k: s for k, s in before.items() if s.leader == 3}
            for (name, p), state in elsewhere.items():  # led by the next replica meanwhile, all in sync
                await zk.set_partition_state(name, p, dataclasses.replace(state, leader=NodeId(1)))
            await cluster.refresh()
            controller = Controller(config, cluster, zk)
            controller.epoch = epoch
            writes = Writes(zk, monkeypatch)

            assert await controller.elect_preferred_leaders() == len(elsewhere)

            assert writes.batches == [frozenset(elsewhere)] and writes.singles == 0
            after = await _states(zk)
            for key, state in elsewhere.items():
                assert after[key] == dataclasses.replace(state, leader_epoch=LeaderEpoch(5), version=2), key

    trio.run(main)
