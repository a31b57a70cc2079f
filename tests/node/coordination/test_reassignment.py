"""Replica assignment updates and partition reassignment (``/admin/reassign_partitions``)
against the session's real ZooKeeper."""

from __future__ import annotations

import pytest
import trio

from node.coordination import (
    AlterOutcome,
    PartitionState,
    Reassignment,
    ReassignmentInProgress,
    StaleState,
    UnknownTopic,
    ZkState,
)
from tests.node.coordination.zk_helpers import next_hint, raw_session, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


# -- set_assignment -----------------------------------------------------------------------------


def test_set_assignment_is_compare_and_set(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, raw_session(zk_connect) as raw:
            created = await a.create_topic("t", {0: (1, 2), 1: (2, 1)}, {})
            read_by_b = await b.topic("t")
            assert read_by_b is not None and read_by_b.version == created.version == 0

            assert await a.set_assignment("t", {0: (2, 3), 1: (3, 2)}, created.version) == 1
            moved = await b.topic("t")
            assert moved is not None and moved.partitions == {0: (2, 3), 1: (3, 2)}
            assert moved.topic_id == created.topic_id and moved.version == 1
            assert await raw.json("/brokers/topics/t") == {
                "version": 3,
                "topic_id": created.topic_id,
                "partitions": {"0": [2, 3], "1": [3, 2]},
                "adding_replicas": {},
                "removing_replicas": {},
            }

            with pytest.raises(
                StaleState, match=r"/brokers/topics/t changed concurrently: expected it to be at version 0"
            ):
                await b.set_assignment("t", {0: (1,), 1: (1,)}, read_by_b.version)  # a wrote since b read
            assert (await b.topic("t")) == moved  # the lost write changed nothing

            with pytest.raises(ValueError, match=r"new assignment has partitions \[0\], the topic has \[0, 1\]"):
                await a.set_assignment("t", {0: (1,)}, 1)
            with pytest.raises(ValueError, match=r"partition 1: replicas \[1, 1\] must be distinct"):
                await a.set_assignment("t", {0: (1,), 1: (1, 1)}, 1)
            with pytest.raises(ValueError, match="assignment version -1 is negative"):
                await a.set_assignment("t", {0: (1,), 1: (1,)}, -1)
            with pytest.raises(UnknownTopic, match="'nope'"):
                await a.set_assignment("nope", {0: (1,)}, 0)

    run(main)


def test_set_assignment_replaces_partition_states_in_the_same_transaction(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, raw_session(zk_connect) as raw:
            created = await a.create_topic(
                "t",
                {0: (1, 2, 3), 1: (3, 1)},
                {},
                {0: PartitionState(1, 4, (1, 2, 3), 1), 1: PartitionState(3, 0, (3, 1), 1)},
            )
            moved = PartitionState(2, 5, (2, 3), 1, version=0)
            assert await a.set_assignment("t", {0: (2, 3), 1: (3, 1)}, created.version, states={0: moved}) == 1
            assert await a.partition_state("t", 0) == PartitionState(2, 5, (2, 3), 1, version=1)
            assert await a.partition_state("t", 1) == PartitionState(3, 0, (3, 1), 1, version=0)  # untouched
            assert (await raw.json("/brokers/topics/t"))["partitions"] == {"0": [2, 3], "1": [3, 1]}

            # A state that moved since it was read fails the whole transaction, assignment included.
            with pytest.raises(
                StaleState, match=r"partitions/0/state changed concurrently: expected it to be at version 0"
            ):
                await a.set_assignment("t", {0: (3, 2), 1: (3, 1)}, 1, states={0: moved})
            topic = await a.topic("t")
            assert topic is not None and topic.version == 1 and topic.partitions[0] == (2, 3)
            with pytest.raises(
                StaleState, match=r"/brokers/topics/t changed concurrently: expected it to be at version 0"
            ):
                await a.set_assignment("t", {0: (3, 2), 1: (3, 1)}, 0, states={0: PartitionState(2, 6, (2, 3), 1, 1)})
            assert await a.partition_state("t", 0) == PartitionState(2, 5, (2, 3), 1, version=1)

            with pytest.raises(ValueError, match="state for partition 2"):
                await a.set_assignment("t", {0: (2, 3), 1: (3, 1)}, 1, states={2: moved})
            with pytest.raises(ValueError, match="needs its version"):
                await a.set_assignment("t", {0: (2, 3), 1: (3, 1)}, 1, states={0: PartitionState(2, 6, (2, 3), 1)})

    run(main)


def test_racing_assignment_writers_one_wins(zk_connect: str) -> None:
    async def main() -> None:
        outcomes: list[str] = []
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            await a.create_topic("t", {0: (1,)}, {})
            async with trio.open_nursery() as nursery:
                for zk, replicas in ((a, (2,)), (b, (3,))):

                    async def write(zk: ZkState = zk, replicas: tuple[int, ...] = replicas) -> None:
                        try:
                            await zk.set_assignment("t", {0: replicas}, 0)
                            outcomes.append("written")
                        except StaleState:
                            outcomes.append("stale")

                    nursery.start_soon(write)
            assert sorted(outcomes) == ["stale", "written"]

    run(main)


# -- reassignment ---------------------------------------------------------------------------------


def test_reassignment_lifecycle(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, raw_session(zk_connect) as raw:
            await a.create_topic("t", {0: (1, 2), 1: (2, 1)}, {})
            await a.create_topic("u", {0: (1,)}, {})
            assert await a.reassignment() is None
            moves = {("t", 0): (2, 3, 1), ("t", 1): (3, 1, 2), ("u", 0): (3,)}
            started = await a.start_reassignment(moves, 10_000_000)
            originals = {("t", 0): (1, 2), ("t", 1): (2, 1), ("u", 0): (1,)}  # what cancelling goes back to
            assert started == Reassignment(moves, 10_000_000, 0, originals)
            assert await raw.json("/admin/reassign_partitions") == {
                "version": 1,
                "partitions": [
                    {"topic": "t", "partition": 0, "replicas": [2, 3, 1], "original_replicas": [1, 2]},
                    {"topic": "t", "partition": 1, "replicas": [3, 1, 2], "original_replicas": [2, 1]},
                    {"topic": "u", "partition": 0, "replicas": [3], "original_replicas": [1]},
                ],
                "throttle_bytes_per_s": 10_000_000,
            }
            assert await b.reassignment() == started

            with pytest.raises(ReassignmentInProgress, match=r"3 partitions left: t-0, t-1, u-0") as info:
                await b.start_reassignment({("u", 0): (1,)})
            assert info.value.pending == (("t", 0), ("t", 1), ("u", 0))

            left = await b.complete_reassignment("t", 1)
            assert left == Reassignment(
                {("t", 0): (2, 3, 1), ("u", 0): (3,)}, 10_000_000, 1, {("t", 0): (1, 2), ("u", 0): (1,)}
            )
            assert await a.reassignment() == left
            assert await a.complete_reassignment("t", 1) == left  # not part of it any more: no change
            assert await a.complete_reassignment("t", 0) == Reassignment(
                {("u", 0): (3,)}, 10_000_000, 2, {("u", 0): (1,)}
            )
            assert await b.complete_reassignment("u", 0) is None  # the last one
            assert not await raw.exists("/admin/reassign_partitions")
            assert await a.reassignment() is None
            assert await a.complete_reassignment("u", 0) is None

            again = await b.start_reassignment({("u", 0): (1,)})  # the next one may start
            assert again == Reassignment({("u", 0): (1,)}, None, 0, {("u", 0): (1,)})
            assert (await raw.json("/admin/reassign_partitions"))["throttle_bytes_per_s"] is None

    run(main)


@pytest.mark.parametrize(
    ("moves", "throttle", "error", "message"),
    [
        ({}, None, ValueError, "at least one partition"),
        ({("t", 5): (1,)}, None, ValueError, r"reassignment of t-5: topic 't' has partitions 0..1, not 5"),
        ({("t", 0): (1, 1)}, None, ValueError, r"reassignment of t-0: replicas \[1, 1\] must be distinct"),
        ({("t", 0): ()}, None, ValueError, "reassignment of t-0: replicas"),
        ({("t", -1): (1,)}, None, ValueError, "partition -1 is negative"),
        ({("a/b", 0): (1,)}, None, ValueError, "invalid topic name 'a/b'"),
        ({("t", 0): (1,)}, 0, ValueError, "throttle_bytes_per_s must be a positive integer or None, got 0"),
        ({("t", 0): (1,), ("gone", 0): (1,)}, None, UnknownTopic, "'gone' does not exist"),
    ],
)
def test_start_reassignment_rejects_bad_input(
    zk_connect: str,
    moves: dict[tuple[str, int], tuple[int, ...]],
    throttle: int | None,
    error: type[Exception],
    message: str,
) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk:
            await zk.create_topic("t", {0: (1,), 1: (1,)}, {})
            with pytest.raises(error, match=message):
                await zk.start_reassignment(moves, throttle)
            assert await zk.reassignment() is None  # nothing was written

    run(main)


def test_concurrent_completions_all_land(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            await a.create_topic("t", {p: (1,) for p in range(12)}, {})
            await a.start_reassignment({("t", p): (2,) for p in range(12)})
            async with trio.open_nursery() as nursery:
                for p in range(12):
                    nursery.start_soon((a if p % 2 else b).complete_reassignment, "t", p)
            assert await a.reassignment() is None

    run(main)


def test_reassignment_changes_arrive_as_hints(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as watcher, ZkState(zk_connect) as actor:
            events = watcher.events()
            await actor.create_topic("t", {0: (1,), 1: (1,)}, {})
            await actor.start_reassignment({("t", 0): (2,), ("t", 1): (2,)})
            await next_hint(events, "reassignment")  # created
            await actor.complete_reassignment("t", 0)
            await next_hint(events, "reassignment")  # changed
            await actor.complete_reassignment("t", 1)
            await next_hint(events, "reassignment")  # deleted
            assert await watcher.reassignment() is None

    run(main)


# -- alter (AlterPartitionReassignments) ------------------------------------------------------------


def test_alter_merges_into_the_running_reassignment_and_cancels(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, raw_session(zk_connect) as raw:
            await a.create_topic("t", {0: (1, 2), 1: (2, 1)}, {})
            await a.start_reassignment({("t", 0): (2, 3)}, 5_000)

            # Adding a partition keeps the running one (and its throttle); a cancel of a partition
            # not being moved, and unknown partitions, change nothing.
            outcomes, now = await b.alter_reassignment(
                {("t", 1): (3, 1), ("t", 7): (1,), ("gone", 0): (1,), ("t", 5): None}
            )
            assert outcomes == {
                ("t", 1): AlterOutcome.STARTED,
                ("t", 7): AlterOutcome.UNKNOWN_PARTITION,
                ("gone", 0): AlterOutcome.UNKNOWN_PARTITION,
                ("t", 5): AlterOutcome.UNKNOWN_PARTITION,
            }
            assert now == Reassignment(
                {("t", 0): (2, 3), ("t", 1): (3, 1)}, 5_000, 1, {("t", 0): (1, 2), ("t", 1): (2, 1)}
            )
            assert await a.reassignment() == now
            assert (await raw.json("/admin/reassign_partitions"))["throttle_bytes_per_s"] == 5_000

            # A new target for a running move keeps its original; a cancel goes back to it.
            outcomes, now = await a.alter_reassignment({("t", 0): (3,)})
            assert outcomes == {("t", 0): AlterOutcome.STARTED}
            assert now is not None and now.partitions[("t", 0)] == (3,) and now.originals[("t", 0)] == (1, 2)
            # A controller that read the old target does not complete the re-targeted move.
            assert await b.complete_reassignment("t", 0, (2, 3)) == now
            assert await b.reassignment() == now
            outcomes, now = await a.alter_reassignment({("t", 0): None})
            assert outcomes == {("t", 0): AlterOutcome.CANCELLED}
            assert now == Reassignment(
                {("t", 0): (1, 2), ("t", 1): (3, 1)}, 5_000, 3, {("t", 0): (1, 2), ("t", 1): (2, 1)}
            )

            # With nothing running, an alter creates the znode; a cancel finds nothing.
            for key in (("t", 0), ("t", 1)):
                await a.complete_reassignment(*key)
            assert await a.reassignment() is None
            assert await a.alter_reassignment({("t", 1): None}) == ({("t", 1): AlterOutcome.NOT_IN_PROGRESS}, None)
            assert not await raw.exists("/admin/reassign_partitions")
            outcomes, now = await b.alter_reassignment({("t", 1): (1,)})
            assert now == Reassignment({("t", 1): (1,)}, None, 0, {("t", 1): (2, 1)})
            assert await raw.json("/admin/reassign_partitions") == {
                "version": 1,
                "partitions": [{"topic": "t", "partition": 1, "replicas": [1], "original_replicas": [2, 1]}],
                "throttle_bytes_per_s": None,
            }

    run(main)


def test_cancelling_an_entry_without_its_original_removes_it(zk_connect: str) -> None:
    """An entry another tool wrote (Kafka's JSON, no ``original_replicas``) stops where it is."""

    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            await zk.create_topic("t", {0: (1,), 1: (1,)}, {})
            await raw.create(
                "/admin/reassign_partitions",
                b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2]},'
                b'{"topic":"t","partition":1,"replicas":[3]}]}',
            )
            outcomes, now = await zk.alter_reassignment({("t", 0): None})
            assert outcomes == {("t", 0): AlterOutcome.CANCELLED}
            assert now == Reassignment({("t", 1): (3,)}, None, 1)
            outcomes, now = await zk.alter_reassignment({("t", 1): None})
            assert (outcomes, now) == ({("t", 1): AlterOutcome.CANCELLED}, None)
            assert not await raw.exists("/admin/reassign_partitions")

    run(main)


def test_concurrent_alters_all_land(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            await a.create_topic("t", {p: (1,) for p in range(8)}, {})
            async with trio.open_nursery() as nursery:
                for p in range(8):
                    nursery.start_soon((a if p % 2 else b).alter_reassignment, {("t", p): (2,)})
            now = await a.reassignment()
            assert now is not None and now.partitions == {("t", p): (2,) for p in range(8)}
            assert now.originals == {("t", p): (1,) for p in range(8)}

    run(main)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({("t", 0): ()}, "reassignment of t-0: replicas"),
        ({("t", 0): (1, 1)}, r"replicas \[1, 1\] must be distinct"),
        ({("t", -1): (1,)}, "partition -1 is negative"),
        ({("a/b", 0): None}, "invalid topic name 'a/b'"),
    ],
)
def test_alter_rejects_bad_input(
    zk_connect: str, changes: dict[tuple[str, int], tuple[int, ...] | None], message: str
) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk:
            await zk.create_topic("t", {0: (1,)}, {})
            with pytest.raises(ValueError, match=message):
                await zk.alter_reassignment(changes)
            assert await zk.reassignment() is None

    run(main)
