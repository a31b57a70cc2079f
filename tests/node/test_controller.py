"""The controller (``node.controller``) against the session's real ZooKeeper: completing a
partition reassignment; deciding every partition a stopping or dead broker leads or follows and
writing their states as one batch (controlled shutdown, failover, preferred leaders), deciding
again only the partitions whose compare-and-set lost."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from node.cluster import ClusterState
from node.controller import SHUTDOWN_WRITE_ROUNDS, Controller
from node.coordination import BrokerRegistration, PartitionState, StaleState, StateWrites, ZkState
from node.errors import BrokerError
from node.ids import NO_NODE, NodeId
from node.protocol import ErrorCode
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


@asynccontextmanager
async def controller_of_two(
    zk_connect: str, tmp_path: Path, partitions: int
) -> AsyncIterator[tuple[ZkState, ClusterState, Controller, int]]:
    """Brokers 3 (the controller, in process) and 2 registered; TOPIC with ``partitions``
    partitions on broker 3 alone, which leads them."""
    async with (
        registered_broker(3, zk_connect, tmp_path) as (zk, cluster, config),
        registered_broker(2, zk_connect, tmp_path / "b2"),
    ):
        epoch = await zk.elect_controller(3)
        assert epoch is not None
        states = {p: PartitionState(NodeId(3), LeaderEpoch(0), (NodeId(3),), epoch) for p in range(partitions)}
        await zk.create_topic(TOPIC, {p: (NodeId(3),) for p in range(partitions)}, {}, states)
        await cluster.refresh()
        yield zk, cluster, Controller(config, cluster, zk), epoch


def test_a_move_that_only_adds_replicas_completes_once_they_are_in_sync(zk_connect: str, tmp_path: Path) -> None:
    """[3] -> [3, 2]: step 1 makes the assignment the target at once; the entry stays (and its
    throttle applies) until broker 2 is in the ISR."""

    async def main() -> None:
        async with controller_of_two(zk_connect, tmp_path, 1) as (zk, cluster, controller, epoch):
            await zk.start_reassignment({(TOPIC, 0): (3, 2)}, 1000)
            for _ in range(3):
                await cluster.refresh()
                await controller._reassign(cluster, epoch)
            topic = await zk.topic(TOPIC)
            assert topic is not None and topic.partitions == {0: (3, 2)}
            running = await zk.reassignment()
            assert running is not None and running.partitions == {(TOPIC, 0): (3, 2)}  # broker 2 is catching up

            state = await zk.partition_state(TOPIC, 0)
            assert state is not None
            await zk.set_partition_state(TOPIC, 0, dataclasses.replace(state, isr=(3, 2)))
            await cluster.refresh()
            await controller._reassign(cluster, epoch)
            assert await zk.reassignment() is None
            after = await zk.partition_state(TOPIC, 0)
            assert after is not None and (after.leader, after.leader_epoch, after.isr) == (3, 0, (3, 2))

    trio.run(main)


def test_alter_list_and_cancel_reassignments_through_the_controller(zk_connect: str, tmp_path: Path) -> None:
    """AlterPartitionReassignments' checks and outcomes; a cancelled move goes back to the original
    replicas once the controller's next pass has run; list shows adding and removing replicas."""

    async def main() -> None:
        async with controller_of_two(zk_connect, tmp_path, 2) as (zk, cluster, controller, epoch):
            assert controller.epoch is None  # not (yet) the active controller
            with pytest.raises(BrokerError, match="not the controller"):
                await controller.alter_reassignments({(TOPIC, 0): (2,)})
            with pytest.raises(BrokerError, match="not the controller"):
                await controller.list_reassignments(None)
            controller.epoch = epoch

            assert await controller.alter_reassignments(
                {
                    (TOPIC, 0): (3, 3),
                    (TOPIC, 1): (3, 9),
                    (TOPIC, 4): (3,),
                    ("nowhere", 0): (3,),
                }
            ) == {
                (TOPIC, 0): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list [3, 3] has duplicates"),
                (TOPIC, 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "brokers [9] are not registered"),
                (TOPIC, 4): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
                ("nowhere", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
            }
            assert await controller.alter_reassignments({(TOPIC, 0): ()}) == {
                (TOPIC, 0): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list is empty")
            }
            assert await controller.alter_reassignments(
                {(TOPIC, 0): (2, 3)}, allow_replication_factor_change=False
            ) == {(TOPIC, 0): (ErrorCode.INVALID_REPLICATION_FACTOR, "the replication factor would change from 1 to 2")}
            assert await controller.alter_reassignments({(TOPIC, 0): None}) == {
                (TOPIC, 0): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            }
            assert await controller.alter_reassignments({(TOPIC, 1): (3,)}) == {(TOPIC, 1): (ErrorCode.NONE, None)}
            assert await zk.reassignment() is None  # none of it was written (partition 1 is on [3] already)

            assert await controller.alter_reassignments({(TOPIC, 0): (2, 3), (TOPIC, 1): (2,)}) == {
                (TOPIC, 0): (ErrorCode.NONE, None),
                (TOPIC, 1): (ErrorCode.NONE, None),
            }
            assert await controller.list_reassignments(None) == {
                (TOPIC, 0): ((2, 3), (2,), ()),
                (TOPIC, 1): ((2, 3), (2,), (3,)),
            }
            assert await controller.list_reassignments([(TOPIC, 1), (TOPIC, 7)]) == {(TOPIC, 1): ((2, 3), (2,), (3,))}

            # The first pass makes broker 2 a replica of partition 0 (catching up, not in the ISR).
            await cluster.refresh()
            await controller._reassign(cluster, epoch)
            topic = await zk.topic(TOPIC)
            assert topic is not None and topic.partitions[0] == (2, 3)
            # Cancelled: partition 0 goes back to [3] alone; partition 1 keeps moving.
            assert await controller.alter_reassignments({(TOPIC, 0): None}) == {(TOPIC, 0): (ErrorCode.NONE, None)}
            assert await controller.list_reassignments(None) == {
                (TOPIC, 0): ((3, 2), (), (2,)),
                (TOPIC, 1): ((2, 3), (2,), (3,)),
            }
            for _ in range(3):
                await cluster.refresh()
                await controller._reassign(cluster, epoch)
            topic = await zk.topic(TOPIC)
            state = await zk.partition_state(TOPIC, 0)
            assert topic is not None and topic.partitions == {0: (3,), 1: (2, 3)}
            assert state is not None and (state.leader, state.isr, state.leader_epoch) == (3, (3,), 1)
            running = await zk.reassignment()
            assert running is not None and list(running.partitions) == [(TOPIC, 1)]

    trio.run(main)


# -- many partitions at once: controlled shutdown and failover -----------------------------------

TOPICS = 30
PER_TOPIC = 6  # 180 partitions, replicas rotated over brokers 1, 2, 3
ORDERS: tuple[tuple[NodeId, ...], ...] = ((1, 2, 3), (2, 3, 1), (3, 1, 2))


@dataclasses.dataclass
class Bulk:
    """Broker 1 in process (its ``zk`` and ``cluster``), the active ``controller`` at ``epoch``;
    ``other``, a second session (broker 2's registration) that writes behind the controller's
    back; ``before``, the bulk topics' states as created (version 0)."""

    zk: ZkState
    cluster: ClusterState
    controller: Controller
    epoch: int
    other: ZkState
    before: dict[tuple[str, int], PartitionState]

    async def create(self, name: str, replicas: tuple[int, ...], state: PartitionState, **config: str) -> None:
        """A one-partition topic with ``state``; ``config`` keys with ``_`` for ``.``."""
        configs = {k.replace("_", "."): v for k, v in config.items()}
        await self.zk.create_topic(name, {0: tuple(NodeId(b) for b in replicas)}, configs, {0: state})

    async def states(self) -> dict[tuple[str, int], PartitionState]:
        return dict((await self.zk.snapshot()).states)


@asynccontextmanager
async def bulk_site(zk_connect: str, tmp_path: Path, live: tuple[int, ...] = (2,)) -> AsyncIterator[Bulk]:
    """TOPICS topics of PER_TOPIC partitions, each led by its first replica with a full ISR;
    brokers 1 and ``live`` registered (broker 3 only when named). Read the cluster again
    (``bulk.cluster.refresh()``) after creating more topics."""
    async with registered_broker(1, zk_connect, tmp_path) as (zk, cluster, config), AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(ZkState(zk_connect)) for _ in live]
        for broker_id, session in zip(live, sessions, strict=True):
            await session.register_broker(BrokerRegistration(NodeId(broker_id), "127.0.0.1", broker_id))
        epoch = await zk.elect_controller(1)
        assert epoch is not None
        before = {}
        for t in range(TOPICS):
            assignment = {p: ORDERS[(t + p) % 3] for p in range(PER_TOPIC)}
            states = {p: PartitionState(r[0], LeaderEpoch(4), r, epoch) for p, r in assignment.items()}
            await zk.create_topic(f"bulk-{t:02d}", assignment, {}, states)
            before |= {(f"bulk-{t:02d}", p): dataclasses.replace(s, version=0) for p, s in states.items()}
        await cluster.refresh()
        controller = Controller(config, cluster, zk)
        controller.epoch = epoch
        yield Bulk(zk, cluster, controller, epoch, sessions[0], before)


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


def _without(bulk: Bulk, broker: NodeId, key: tuple[str, int]) -> PartitionState:
    """The bulk partition's state after ``broker`` left it (its other replicas alive and in sync)."""
    state = bulk.before[key]
    isr = tuple(b for b in state.isr if b != broker)
    if state.leader != broker:
        return dataclasses.replace(state, isr=isr, version=1)
    leader = next(b for b in bulk.cluster.topics[key[0]].assignment[key[1]] if b in isr)
    return PartitionState(leader, LeaderEpoch(state.leader_epoch + 1), isr, bulk.epoch, version=1)


def test_controlled_shutdown_moves_every_partition_in_one_batch_of_writes(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker 3 leads a third of 180 partitions and follows the rest: one batch moves its
    leaderships (first other ISR member in assignment order, leader epoch + 1) and takes it out of
    every ISR (leader epoch kept). It keeps leading where it is the last in-sync replica or the
    other ISR members are down, also on a topic that allows unclean election (a controlled
    shutdown never elects outside the ISR)."""

    async def main() -> None:
        async with bulk_site(zk_connect, tmp_path) as bulk:
            alone = PartitionState(3, LeaderEpoch(2), (3,), bulk.epoch)
            await bulk.create("alone", (3, 1, 2), alone)
            await bulk.create("alone-unclean", (3, 1, 2), alone, unclean_leader_election_enable="true")
            dead_isr = PartitionState(3, LeaderEpoch(2), (3, 4), bulk.epoch)  # broker 4 is not registered
            await bulk.create("dead-isr", (3, 4, 1), dead_isr)
            writes = Writes(bulk.zk, monkeypatch)

            remaining = await bulk.controller.controlled_shutdown(NodeId(3))

            assert sorted(remaining) == [("alone", 0), ("alone-unclean", 0), ("dead-isr", 0)]
            assert writes.batches == [frozenset(bulk.before)] and writes.singles == 0
            after = await bulk.states()
            for key in bulk.before:
                assert after[key] == _without(bulk, NodeId(3), key), key
            assert after["alone", 0] == after["alone-unclean", 0] == dataclasses.replace(alone, version=0)
            assert after["dead-isr", 0] == dataclasses.replace(dead_isr, version=0)
            assert sum(1 for s in after.values() if s.leader == 3) == 3  # only the three it must keep

    trio.run(main)


def test_controlled_shutdown_decides_again_only_the_partitions_whose_write_lost(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the controller's read and its batch, two leaders change their ISR (a leader
    shrinking its ISR, as a lagging follower makes it): those two compare-and-sets lose, the
    others land; the second batch holds those two only, decided from what they are now."""

    async def main() -> None:
        async with bulk_site(zk_connect, tmp_path) as bulk:
            before, epoch = bulk.before, bulk.epoch
            led_by_3 = ("bulk-00", 2)  # replicas (3, 1, 2)
            led_by_1 = ("bulk-00", 0)  # replicas (1, 2, 3)
            assert before[led_by_3].leader == 3 and before[led_by_1].leader == 1
            writes = Writes(bulk.zk, monkeypatch)

            async def leaders_shrink_their_isrs(batch: int) -> None:
                if batch == 1:  # broker 3 drops 1 from its ISR; broker 1 drops 2 from its own
                    await bulk.other.set_partition_state(*led_by_3, dataclasses.replace(before[led_by_3], isr=(3, 2)))
                    await bulk.other.set_partition_state(*led_by_1, dataclasses.replace(before[led_by_1], isr=(1, 3)))

            writes.before_batch = leaders_shrink_their_isrs
            assert await bulk.controller.controlled_shutdown(NodeId(3)) == []

            assert writes.batches == [frozenset(before), frozenset({led_by_3, led_by_1})]
            after = await bulk.states()
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
        async with bulk_site(zk_connect, tmp_path) as bulk:
            busy = ("bulk-01", 1)  # replicas (3, 1, 2)
            writes = Writes(bulk.zk, monkeypatch)

            async def someone_writes_it_again(batch: int) -> None:
                current = await bulk.other.partition_state(*busy)
                assert current is not None
                await bulk.other.set_partition_state(*busy, current)  # same content, new version

            writes.before_batch = someone_writes_it_again
            assert await bulk.controller.controlled_shutdown(NodeId(3)) == [busy]

            assert len(writes.batches) == SHUTDOWN_WRITE_ROUNDS
            assert writes.batches[1:] == [frozenset({busy})] * (SHUTDOWN_WRITE_ROUNDS - 1)
            after = await bulk.states()
            assert after[busy] == dataclasses.replace(bulk.before[busy], version=SHUTDOWN_WRITE_ROUNDS)
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
        async with bulk_site(zk_connect, tmp_path) as bulk:
            epoch = bulk.epoch
            alone = PartitionState(3, LeaderEpoch(2), (3,), epoch)
            await bulk.create("alone", (3, 1, 2), alone)
            await bulk.create("alone-unclean", (3, 2, 1), alone, unclean_leader_election_enable="true")
            offline = PartitionState(NO_NODE, LeaderEpoch(3), (3,), epoch)
            await bulk.create("offline", (3, 1, 2), offline)
            await bulk.cluster.refresh()
            writes = Writes(bulk.zk, monkeypatch)

            await bulk.controller._reconcile(bulk.cluster, epoch)

            assert writes.batches == [frozenset(bulk.before) | {("alone", 0), ("alone-unclean", 0)}]
            assert writes.singles == 0
            after = await bulk.states()
            for key in bulk.before:
                assert after[key] == _without(bulk, NodeId(3), key), key
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
        async with bulk_site(zk_connect, tmp_path, live=(2, 3)) as bulk:
            elsewhere = {k: s for k, s in bulk.before.items() if s.leader == 3}
            for (name, p), state in elsewhere.items():  # led by the next replica meanwhile, all in sync
                await bulk.zk.set_partition_state(name, p, dataclasses.replace(state, leader=NodeId(1)))
            await bulk.cluster.refresh()
            writes = Writes(bulk.zk, monkeypatch)

            assert await bulk.controller.elect_preferred_leaders() == len(elsewhere)

            assert writes.batches == [frozenset(elsewhere)] and writes.singles == 0
            after = await bulk.states()
            for key, state in elsewhere.items():
                assert after[key] == dataclasses.replace(state, leader_epoch=LeaderEpoch(5), version=2), key

    trio.run(main)
