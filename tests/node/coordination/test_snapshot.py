"""``ZkState.snapshot()`` and the ``"states"`` hint, against the session's real ZooKeeper."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import pytest
import trio

from node.coordination import ClusterSnapshot, PartitionState, Reassignment, ZkState
from node.coordination._snapshot import read_snapshot
from tests.node.coordination.zk_helpers import next_hint, raw_session, reg, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def state(leader: int, isr: tuple[int, ...], version: int = -1, leader_epoch: int = 0) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=leader_epoch, isr=isr, controller_epoch=1, version=version)


def test_an_empty_cluster(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk:
            assert await zk.snapshot() == ClusterSnapshot(
                brokers={}, topics={}, configs={}, states={}, controller=None, reassignment=None, offline_replicas={}
            )

    run(main)


def test_snapshot_holds_what_was_written(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            await a.register_broker(reg(1))
            await b.register_broker(reg(2, 9093, rack="r2"))
            orders = await a.create_topic(
                "orders", {0: (1, 2), 1: (2, 1)}, {"retention.ms": "1000"}, states={0: state(1, (1, 2))}
            )
            plain = await a.create_topic("plain", {0: (2,)}, {})
            assert await b.set_partition_state("orders", 1, state(2, (2, 1))) == 0
            assert await b.set_partition_state("orders", 0, state(2, (2,), version=0, leader_epoch=1)) == 1
            assert await b.elect_controller(2) == 1
            await a.start_reassignment({("orders", 0): (2, 1), ("plain", 0): (1, 2)}, 5_000_000)
            await b.set_offline_replicas(2, [("orders", 1), ("plain", 0)])

            snap = await a.snapshot()
            assert snap == ClusterSnapshot(
                brokers={1: reg(1), 2: reg(2, 9093, rack="r2")},
                topics={"orders": orders, "plain": plain},
                configs={"orders": {"retention.ms": "1000"}, "plain": {}},
                states={
                    ("orders", 0): state(2, (2,), version=1, leader_epoch=1),
                    ("orders", 1): state(2, (2, 1), version=0),
                },  # plain-0 has no state yet
                controller=(2, 1),
                reassignment=Reassignment(
                    {("orders", 0): (2, 1), ("plain", 0): (1, 2)},
                    5_000_000,
                    version=0,
                    originals={("orders", 0): (1, 2), ("plain", 0): (2,)},
                ),
                offline_replicas={2: frozenset({("orders", 1), ("plain", 0)})},
            )
            assert list(snap.brokers) == [1, 2] and list(snap.topics) == ["orders", "plain"]
            # The same as the one-thing-at-a-time reads.
            assert snap.topics == await b.topics()
            assert snap.brokers == await b.brokers()
            assert snap.controller == await b.controller()
            assert snap.reassignment == await b.reassignment()
            assert snap.states["orders", 0] == await b.partition_state("orders", 0)

    run(main)


class DeleteWhenRead:
    """The real kazoo client, except that reading ``trigger`` first deletes ``topic`` (through
    another session): a topic deleted at a point of the snapshot the test chooses."""

    def __init__(self, client: Any, deleter: Any, trigger: str, topic: str) -> None:
        self._client = client
        self._deleter = deleter
        self._trigger = trigger
        self._topic = topic
        self.fired = False

    def get_async(self, path: str) -> Any:
        if path == self._trigger and not self.fired:
            self.fired = True
            self._deleter.delete(f"/brokers/topics/{self._topic}", recursive=True)
            self._deleter.delete(f"/config/topics/{self._topic}", recursive=True)
        return self._client.get_async(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize(
    "trigger",
    [
        "/brokers/topics/doomed",  # listed, gone before its assignment is read
        "/config/topics/doomed",  # assignment read, gone before its config is read
        "/brokers/topics/doomed/partitions/0/state",  # assignment and config read, gone before its states
        "/brokers/topics/doomed/partitions/2/state",  # gone between two of its states
    ],
)
def test_a_topic_deleted_during_the_snapshot_is_left_out(zk_connect: str, trigger: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            kept = await zk.create_topic("kept", {0: (1,)}, {"a": "b"}, states={0: state(1, (1,))})
            three = {p: state(1, (1,)) for p in range(3)}
            await zk.create_topic("doomed", {0: (1,), 1: (1,), 2: (1,)}, {"x": "y"}, states=three)
            client = DeleteWhenRead(zk._client, raw.client, trigger, "doomed")  # private: the fault point
            snap = await trio.to_thread.run_sync(read_snapshot, client)
            assert client.fired
            assert snap.topics == {"kept": kept}
            assert snap.configs == {"kept": {"a": "b"}}
            assert snap.states == {("kept", 0): state(1, (1,), version=0)}

    run(main)


def test_snapshots_survive_topics_being_deleted_meanwhile(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as reader, ZkState(zk_connect) as admin:
            names = [f"t{i}" for i in range(20)]
            for name in names:
                await admin.create_topic(
                    name, {p: (1,) for p in range(4)}, {}, states={p: state(1, (1,)) for p in range(4)}
                )
            snapshots = []
            async with trio.open_nursery() as nursery:

                async def delete_all() -> None:
                    for name in names:
                        await admin.delete_topic(name)

                nursery.start_soon(delete_all)
                for _ in range(10):
                    snapshots.append(await reader.snapshot())
            for snap in snapshots:
                assert snap.configs.keys() == snap.topics.keys()
                assert {name for name, _ in snap.states} <= snap.topics.keys()
            assert (await reader.snapshot()).topics == {}

    run(main)


def test_partition_state_writes_arrive_as_hints(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as watcher, ZkState(zk_connect) as actor:
            events = watcher.events()
            await actor.create_topic("t", {0: (1, 2)}, {}, states={0: state(1, (1, 2))})
            await next_hint(events, "topics")  # the watcher now watches t's partition states
            await actor.set_partition_state("t", 0, state(1, (1,), version=0))  # CAS by another session
            seen = await next_hint(events, "states")
            assert "states" not in seen[:-1]

            await actor.add_partitions("t", {1: (2, 1)})  # no state yet
            await next_hint(events, "topic:t")
            await actor.set_partition_state("t", 1, state(2, (2, 1)))  # created
            await next_hint(events, "states")

            await actor.create_topic("u", {0: (1,)}, {})  # a topic created without states
            await next_hint(events, "topics")
            await actor.set_partition_state("u", 0, state(1, (1,)))
            await next_hint(events, "states")

            await actor.delete_topic("t")
            await next_hint(events, "topics")
            await actor.create_topic("t", {0: (1,)}, {}, states={0: state(1, (1,))})  # the name again
            await next_hint(events, "topics")
            await actor.set_partition_state("t", 0, state(1, (1,), version=0))
            await next_hint(events, "states")

    run(main)


def test_an_incremental_snapshot_reads_only_what_changed_and_misses_nothing(zk_connect: str) -> None:
    """Changes by another session (once their hint arrives) and by this one (at once), a config,
    a topic deleted and made again: each incremental snapshot equals a whole read."""

    async def check(zk: ZkState) -> ClusterSnapshot:
        found = await zk.snapshot(incremental=True)
        assert found == await zk.snapshot()
        return found

    async def main() -> None:
        async with ZkState(zk_connect) as watcher, ZkState(zk_connect) as actor:
            events = watcher.events()
            await actor.create_topic("a", {p: (1, 2) for p in range(3)}, {}, {p: state(1, (1, 2)) for p in range(3)})
            await actor.create_topic("b", {0: (2, 1)}, {"x": "1"}, {0: state(2, (2, 1))})
            await check(watcher)  # the first: everything read
            assert watcher.read_cache.last_taken == 0
            # A znode read before its watch was set is read once more (it may have changed between
            # the two); once the watches are set and nothing changes, nothing is read.
            with trio.fail_after(10):
                while watcher.read_cache.last_taken != 2 * 2 + 4:
                    await check(watcher)
                    await trio.sleep(0.05)
            with suppress(trio.WouldBlock):
                while True:
                    events.receive_nowait()  # those hints came before the change below

            await actor.set_partition_state("a", 0, state(2, (2,), version=0))
            await next_hint(events, "states")
            snap = await check(watcher)
            assert snap.states["a", 0].leader == 2 and watcher.read_cache.last_taken == 2 * 2 + 3

            written = await watcher.set_partition_states({("a", 1): state(1, (1,), version=0)})
            assert not written.lost
            assert (await watcher.snapshot(incremental=True)).states["a", 1].isr == (1,)  # no wait

            await actor.set_topic_config("a", {"retention.ms": "5"})
            await next_hint(events, "config:a")
            assert (await check(watcher)).configs["a"] == {"retention.ms": "5"}

            await actor.delete_topic("b")
            await actor.create_topic("b", {0: (1,), 1: (1,)}, {}, {0: state(1, (1,)), 1: state(1, (1,))})
            with trio.fail_after(10):
                while True:
                    topics = (await watcher.snapshot(incremental=True)).topics
                    if "b" in topics and len(topics["b"].partitions) == 2:
                        break
                    await trio.sleep(0.05)
            snap = await check(watcher)
            assert snap.states["b", 0] == state(1, (1,), version=0) and snap.configs["b"] == {}

    run(main)
