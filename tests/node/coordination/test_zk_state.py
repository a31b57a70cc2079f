"""ZkState against the session's real ZooKeeper, one chroot per test.

Each test is a plain function running ``trio.run``. A raw kazoo client (``Raw`` in
:mod:`.zk_helpers`) checks what landed in ZooKeeper, byte for byte where Kafka compatibility matters.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace

import pytest
import trio

from chaos.nemesis import partitioned
from chaos.proxy import ProxyServer
from node.coordination import (
    BrokerIdInUse,
    CoordinationError,
    NewTopic,
    PartitionState,
    StaleState,
    StateWrites,
    TopicExists,
    UnknownTopic,
    ZkState,
)
from tests.node.coordination.zk_helpers import DEADLINE, expire_session, next_hint, raw_session, reg, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

STATE = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)


# -- lifecycle --------------------------------------------------------------------------------


def test_start_creates_the_chroot_and_kafkas_paths(zk_connect: str, zookeeper: str) -> None:
    chroot = zk_connect[len(zookeeper) :]

    async def main() -> None:
        async with ZkState(zk_connect):
            pass
        async with raw_session(zookeeper) as raw:
            for path in (
                "/brokers/ids",
                "/brokers/topics",
                "/config/topics",
                "/config/changes",
                "/admin/delete_topics",
            ):
                assert await raw.exists(chroot + path), path
            assert not await raw.exists("/brokers")  # nothing outside the chroot

    run(main)


def test_connect_timeout_names_the_connect_string() -> None:
    async def main() -> None:
        zk = ZkState("127.0.0.1:1/x", connection_timeout_ms=300)
        with pytest.raises(CoordinationError, match=r"127\.0\.0\.1:1/x within 0.3 s"):
            await zk.start()
        with pytest.raises(CoordinationError, match="closed"):
            await zk.brokers()

    run(main)


def test_use_before_start_and_after_close(zk_connect: str) -> None:
    async def main() -> None:
        zk = ZkState(zk_connect)
        with pytest.raises(CoordinationError, match="not started; cannot list topics"):
            await zk.topics()
        await zk.start()
        await zk.close()
        await zk.close()  # idempotent
        with pytest.raises(CoordinationError, match="closed; cannot list brokers"):
            await zk.brokers()
        assert [hint async for hint in zk.events()] == []  # the channel ended

    run(main)


def test_cancelled_call_returns_promptly_and_the_state_stays_usable(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk:
            with trio.CancelScope() as scope:
                scope.cancel()
                await zk.create_topic("t", {0: (1,)}, {})
            assert scope.cancelled_caught
            # The abandoned create either happened whole or not at all; a retry tells which.
            with suppress(TopicExists):
                await zk.create_topic("t", {0: (1,)}, {})
            topic = await zk.topic("t")
            assert topic is not None and topic.partitions == {0: (1,)}

    run(main)


# -- cluster id and brokers ---------------------------------------------------------------------


def test_racing_sessions_agree_on_one_cluster_id(zk_connect: str) -> None:
    async def main() -> None:
        ids: list[str] = []
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, trio.open_nursery() as nursery:
            for zk in (a, b, a, b):

                async def get(zk: ZkState = zk) -> None:
                    ids.append(await zk.cluster_id())

                nursery.start_soon(get)
        assert len(ids) == 4 and len(set(ids)) == 1 and len(ids[0]) == 22
        async with ZkState(zk_connect) as c:
            assert await c.cluster_id() == ids[0]

    run(main)


def test_register_and_list_brokers(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            assert await a.brokers() == {}
            await a.register_broker(reg(2, 9093, rack="r1"))
            await b.register_broker(reg(1))
            assert await b.brokers() == {1: reg(1), 2: reg(2, 9093, rack="r1")}
            await a.register_broker(reg(2, 9094))  # same id, same session: an update
            assert (await b.brokers())[2] == reg(2, 9094)
            with pytest.raises(ValueError, match="already registered broker 2; cannot also register 3"):
                await a.register_broker(reg(3))
            async with raw_session(zk_connect) as raw:
                registration = await raw.json("/brokers/ids/1")
            assert registration["version"] == 5 and registration["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
        async with ZkState(zk_connect) as c:
            assert await c.brokers() == {}  # close() deregistered both

    run(main)


def test_two_sessions_race_for_one_broker_id(zk_connect: str) -> None:
    async def main() -> None:
        outcomes: dict[str, str] = {}
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            async with trio.open_nursery() as nursery:
                for name, zk in (("a", a), ("b", b)):

                    async def register(name: str = name, zk: ZkState = zk) -> None:
                        try:
                            await zk.register_broker(reg(7))
                            outcomes[name] = "registered"
                        except BrokerIdInUse as exc:
                            assert exc.broker_id == 7 and "broker id 7" in str(exc)
                            outcomes[name] = "in use"

                    nursery.start_soon(register)
            assert sorted(outcomes.values()) == ["in use", "registered"]
            winner, loser = (a, b) if outcomes["a"] == "registered" else (b, a)
            with pytest.raises(BrokerIdInUse):
                await loser.register_broker(reg(7, 9999))
            await winner.close()
            await loser.register_broker(reg(7, 9999))  # the id is free once the winner is gone
            assert (await loser.brokers())[7].port == 9999

    run(main)


def test_producer_id_blocks_never_overlap(zk_connect: str) -> None:
    async def main() -> None:
        blocks: list[tuple[int, int]] = []
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, raw_session(zk_connect) as raw:
            assert await a.claim_producer_id_block(1, 10) == (0, 9)
            async with trio.open_nursery() as nursery:
                for broker_id, zk in ((1, a), (2, b)) * 5:

                    async def claim(broker_id: int = broker_id, zk: ZkState = zk) -> None:
                        blocks.append(await zk.claim_producer_id_block(broker_id, 10))

                    nursery.start_soon(claim)
            assert sorted(blocks) == [(first, first + 9) for first in range(10, 110, 10)]
            latest = await raw.json("/latest_producer_id_block")
            assert latest["version"] == 1 and (latest["block_start"], latest["block_end"]) == ("100", "109")
            with pytest.raises(ValueError, match="cannot claim 0 producer ids for broker 1"):
                await a.claim_producer_id_block(1, 0)
            # A site's floor lifts the next block to the site's own range, and blocks go on from there.
            assert await a.claim_producer_id_block(1, 10, 1 << 40) == (1 << 40, (1 << 40) + 9)
            assert await b.claim_producer_id_block(2, 10, 1 << 40) == ((1 << 40) + 10, (1 << 40) + 19)
            assert await b.claim_producer_id_block(2, 10) == ((1 << 40) + 20, (1 << 40) + 29)

    run(main)


# -- topics -----------------------------------------------------------------------------------


def test_create_topic_writes_kafkas_znodes(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            created = await zk.create_topic(
                "orders", {0: (1, 2), 1: (2, 1)}, {"retention.ms": "1000"}, states={0: STATE, 1: STATE}
            )
            assert created.name == "orders" and created.version == 0 and len(created.topic_id) == 22
            assert created.partitions == {0: (1, 2), 1: (2, 1)}
            assert await raw.json("/brokers/topics/orders") == {
                "version": 3,
                "topic_id": created.topic_id,
                "partitions": {"0": [1, 2], "1": [2, 1]},
                "adding_replicas": {},
                "removing_replicas": {},
            }
            assert await raw.json("/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}
            assert await raw.json("/brokers/topics/orders/partitions/1/state") == {
                "controller_epoch": 1,
                "leader": 1,
                "version": 1,
                "leader_epoch": 0,
                "isr": [1, 2],
            }
            assert await raw.children("/config/changes") == []  # creating is not a config change
            assert await zk.topic("orders") == created
            assert await zk.topics() == {"orders": created}
            assert await zk.topic("missing") is None
            with pytest.raises(TopicExists, match="'orders' already exists"):
                await zk.create_topic("orders", {0: (1,)}, {"retention.ms": "5"})
            assert await zk.topic_config("orders") == {"retention.ms": "1000"}  # the failed create changed nothing

    run(main)


def test_create_topics_writes_each_topic_whole_and_reports_those_that_exist(zk_connect: str) -> None:
    """Many topics in one pipelined batch: each as create_topic writes it, an existing one refused
    alone, and a left-over config znode (set before the topic) replaced as create_topic does."""

    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            await zk.create_topic("old", {0: (1,)}, {"retention.ms": "5"})
            await raw.create("/config/topics/early", b'{"version":1,"config":{"x":"1"}}')
            wanted = [
                NewTopic(f"t{i}", {0: (1, 2), 1: (2, 1)}, {"retention.ms": str(i)}, {0: STATE, 1: STATE})
                for i in range(30)
            ]
            wanted += [NewTopic("old", {0: (2,)}, {}, {}), NewTopic("early", {0: (1,)}, {"y": "2"}, {})]
            done = await zk.create_topics(wanted)
            assert isinstance(done.pop("old"), TopicExists)
            assert sorted(done) == sorted([f"t{i}" for i in range(30)] + ["early"])
            topics = await zk.topics()
            for name, created in done.items():
                assert not isinstance(created, TopicExists)
                assert topics[name] == created
            assert await zk.topic_config("t7") == {"retention.ms": "7"}
            assert await zk.topic_config("early") == {"y": "2"}
            assert await zk.topic_config("old") == {"retention.ms": "5"}  # refused: unchanged
            assert await zk.partition_state("t29", 1) == replace(STATE, version=0)
            with pytest.raises(ValueError, match="named twice"):
                await zk.create_topics([NewTopic("d", {0: (1,)}, {}, {}), NewTopic("d", {0: (1,)}, {}, {})])
            assert await zk.topic("d") is None

    run(main)


@pytest.mark.parametrize(
    ("name", "partitions", "message"),
    [
        ("a/b", {0: (1,)}, "invalid topic name 'a/b'"),
        ("t", {}, "at least one"),
        ("t", {1: (1,)}, r"partitions \[1\] must be numbered 0..0"),
        ("t", {0: (1, 1)}, r"partition 0: replicas \[1, 1\] must be distinct"),
        ("t", {0: ()}, "at least one"),
    ],
)
def test_create_topic_rejects_bad_input(
    zk_connect: str, name: str, partitions: dict[int, tuple[int, ...]], message: str
) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk:
            with pytest.raises(ValueError, match=message):
                await zk.create_topic(name, partitions, {})
            with pytest.raises(ValueError, match="state for partition 5"):
                await zk.create_topic("t", {0: (1,)}, {}, states={5: STATE})
            assert await zk.topics() == {}

    run(main)


def test_add_partitions_is_versioned_and_keeps_the_topic_id(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            created = await zk.create_topic("t", {0: (1,)}, {})
            grown = await zk.add_partitions("t", {1: (2,), 2: (1,)}, states={2: STATE})
            assert grown.partitions == {0: (1,), 1: (2,), 2: (1,)}
            assert grown.topic_id == created.topic_id and grown.version == created.version + 1
            assert await zk.topic("t") == grown
            assert await zk.partition_state("t", 2) == PartitionState(1, 0, (1, 2), 1, version=0)
            assert await zk.partition_state("t", 1) is None
            assert (await raw.json("/brokers/topics/t"))["version"] == 3
            with pytest.raises(ValueError, match=r"partitions \[4\] must be numbered 3..3"):
                await zk.add_partitions("t", {4: (1,)})
            with pytest.raises(UnknownTopic, match="'nope' does not exist"):
                await zk.add_partitions("nope", {0: (1,)})

    run(main)


def test_delete_topic_removes_assignment_states_and_config(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            await zk.create_topic("gone", {0: (1,)}, {"a": "b"}, states={0: STATE})
            await zk.create_topic("kept", {0: (1,)}, {})
            await zk.delete_topic("gone")
            assert set(await zk.topics()) == {"kept"}
            assert not await raw.exists("/brokers/topics/gone")
            assert not await raw.exists("/config/topics/gone")
            assert await zk.topic_config("gone") == {}
            with pytest.raises(UnknownTopic, match="'gone'"):
                await zk.delete_topic("gone")
            await zk.create_topic("gone", {0: (1,), 1: (1,)}, {})  # the name is free again

    run(main)


# -- topic configs ------------------------------------------------------------------------------


def test_topic_configs_are_replaced_with_a_change_notification(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            await zk.create_topic("a", {0: (1,)}, {"x": "1", "y": "2"})
            await zk.create_topic("b", {0: (1,)}, {})
            await zk.set_topic_config("a", {"x": "3"})
            assert await zk.topic_config("a") == {"x": "3"}  # a whole replacement: y is gone
            assert await zk.all_topic_configs() == {"a": {"x": "3"}, "b": {}}
            (change,) = await raw.children("/config/changes")
            assert change.startswith("config_change_") and change[len("config_change_") :].isdigit()
            assert await raw.json(f"/config/changes/{change}") == {"version": 2, "entity_path": "topics/a"}
            with pytest.raises(UnknownTopic, match="'c'"):
                await zk.set_topic_config("c", {"x": "1"})
            assert await zk.topic_config("c") == {}

    run(main)


# -- partition state ----------------------------------------------------------------------------


def test_partition_state_compare_and_set(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            await a.create_topic("t", {0: (1, 2)}, {})
            assert await a.partition_state("t", 0) is None
            assert await a.set_partition_state("t", 0, STATE) == 0
            with pytest.raises(StaleState, match="expected it not to exist yet"):
                await b.set_partition_state("t", 0, STATE)
            read_a = await a.partition_state("t", 0)
            read_b = await b.partition_state("t", 0)
            assert read_a == read_b == PartitionState(1, 0, (1, 2), 1, version=0)
            assert read_a is not None and read_b is not None
            shrunk = PartitionState(1, 0, (1,), 1, version=read_a.version)
            assert await a.set_partition_state("t", 0, shrunk) == 1
            new_leader = PartitionState(2, 1, (2,), 1, version=read_b.version)  # b read before a's write
            with pytest.raises(
                StaleState, match=r"partitions/0/state changed concurrently: expected it to be at version 0"
            ):
                await b.set_partition_state("t", 0, new_leader)
            assert await b.partition_state("t", 0) == PartitionState(1, 0, (1,), 1, version=1)
            with pytest.raises(UnknownTopic, match="'nope'"):
                await a.set_partition_state("nope", 0, STATE)
            with pytest.raises(UnknownTopic, match="'nope'"):
                await a.set_partition_state("nope", 0, PartitionState(1, 0, (1,), 1, version=3))
            with pytest.raises(ValueError, match="partition -1 is negative"):
                await a.partition_state("t", -1)

    run(main)


def test_partition_state_write_can_require_the_assignment_it_was_checked_against(zk_connect: str) -> None:
    """A leader's ISR change names only replicas of the assignment it read: with
    ``assignment_version`` the write fails if that assignment moved meanwhile."""

    async def main() -> None:
        async with ZkState(zk_connect) as a:
            created = await a.create_topic("t", {0: (1, 2, 3)}, {}, {0: PartitionState(1, 0, (1, 2), 1)})
            grown = PartitionState(1, 0, (1, 2, 3), 1, version=0)
            assert await a.set_partition_state("t", 0, grown, assignment_version=created.version) == 1
            assert await a.set_assignment("t", {0: (1, 2)}, created.version) == 1  # 3 is dropped
            shrunk = PartitionState(1, 0, (1, 2), 1, version=1)
            with pytest.raises(
                StaleState, match=r"/brokers/topics/t changed concurrently: expected it to be at version 0"
            ):
                await a.set_partition_state("t", 0, shrunk, assignment_version=created.version)
            with pytest.raises(
                StaleState, match=r"partitions/0/state changed concurrently: expected it to be at version 0"
            ):
                await a.set_partition_state("t", 0, grown, assignment_version=1)
            assert await a.partition_state("t", 0) == PartitionState(1, 0, (1, 2, 3), 1, version=1)  # nothing landed
            assert await a.set_partition_state("t", 0, shrunk, assignment_version=1) == 2
            with pytest.raises(ValueError, match="needs an existing state"):
                await a.set_partition_state("t", 1, STATE, assignment_version=1)
            with pytest.raises(UnknownTopic, match="'nope'"):
                await a.set_partition_state("nope", 0, shrunk, assignment_version=0)

    run(main)


def test_partition_states_in_one_batch_each_compare_and_set_on_its_own(zk_connect: str) -> None:
    """``set_partition_states``: the writes whose state is still at the version read land; one
    another session moved meanwhile and one of a topic deleted meanwhile lose, alone."""

    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            await a.create_topic("t", {p: (1, 2) for p in range(3)}, {}, dict.fromkeys(range(3), STATE))
            await a.create_topic("gone", {0: (1, 2)}, {}, {0: STATE})
            await b.set_partition_state("t", 1, PartitionState(2, 1, (2,), 1, version=0))
            await b.delete_topic("gone")
            shrunk = PartitionState(1, 0, (1,), 2, version=0)
            keys = [("t", 0), ("t", 1), ("t", 2), ("gone", 0)]
            written = await a.set_partition_states(dict.fromkeys(keys, shrunk))
            assert written == StateWrites({("t", 0): 1, ("t", 2): 1}, frozenset({("t", 1), ("gone", 0)}))
            snapshot = await b.snapshot()
            assert snapshot.states == {
                ("t", 0): PartitionState(1, 0, (1,), 2, version=1),
                ("t", 1): PartitionState(2, 1, (2,), 1, version=1),
                ("t", 2): PartitionState(1, 0, (1,), 2, version=1),
            }
            assert "gone" not in snapshot.topics
            assert await a.set_partition_states({}) == StateWrites({}, frozenset())

    run(main)


# -- events -----------------------------------------------------------------------------------


def test_changes_arrive_as_hints_in_trio(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as watcher, ZkState(zk_connect) as actor:
            events = watcher.events()
            await actor.create_topic("t", {0: (1,)}, {})
            await next_hint(events, "topics")
            await actor.set_topic_config("t", {"retention.ms": "5"})
            await next_hint(events, "config:t")
            await actor.add_partitions("t", {1: (1,)})
            await next_hint(events, "topic:t")
            await actor.register_broker(reg(1))
            await next_hint(events, "brokers")
            await actor.delete_topic("t")
            seen = await next_hint(events, "topics")
            await actor.create_topic("t", {0: (2,)}, {})  # the same name again gets a fresh watch
            seen += await next_hint(events, "topics")
            await actor.add_partitions("t", {1: (2,)})
            seen += await next_hint(events, "topic:t")
            await actor.close()  # deregisters broker 1
            seen += await next_hint(events, "brokers")
            assert "session" not in seen

    run(main)


def test_unread_hints_do_not_pile_up(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as watcher, ZkState(zk_connect) as actor:
            events = watcher.events()
            await actor.create_topic("t", {0: (1,)}, {})
            await next_hint(events, "topics")
            for i in range(30):
                await actor.set_topic_config("t", {"retention.ms": str(i)})
            await actor.create_topic("last", {0: (1,)}, {})
            # Read nothing until the barrier's hints are queued: the watcher's session sees the 30
            # config changes before the creation of "last", and hands hints over in that order.
            with trio.fail_after(DEADLINE):
                while events.statistics().current_buffer_used < 3:
                    await trio.sleep(0.01)
            queued = []
            while True:  # no checkpoint in this loop, so nothing is queued while we drain
                try:
                    queued.append(events.receive_nowait())
                except trio.WouldBlock:
                    break
            assert sorted(queued) == ["config:last", "config:t", "topics"]

    run(main)


# -- sessions ---------------------------------------------------------------------------------


def test_partition_state_watches_are_set_again_in_a_new_session(zookeeper: str, zk_connect: str) -> None:
    """The partition-state watches are plain ZooKeeper watches, which die with their session:
    after an expiry a state written by another session still arrives as a hint, and an
    incremental snapshot (its cache emptied by the expiry) reads it."""
    chroot = zk_connect[len(zookeeper) :]

    async def main() -> None:
        proxy = ProxyServer()
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.run)
            through = (await proxy.create_proxy("zookeeper", zookeeper)).listen
            async with ZkState(f"{through}{chroot}") as zk, ZkState(zk_connect) as other:
                events = zk.events()
                await other.create_topic("t", {0: (1, 2)}, {}, {0: STATE})
                await next_hint(events, "topics")
                assert (await zk.snapshot(incremental=True)).states["t", 0] == replace(STATE, version=0)
                old_session = zk._client.client_id  # private: the test needs the session's password
                async with partitioned(proxy, ["zookeeper"]):
                    await trio.to_thread.run_sync(expire_session, zookeeper, old_session)
                await next_hint(events, "session")
                await other.set_partition_state("t", 0, replace(STATE, isr=(1,), version=0))
                await next_hint(events, "states")
                assert (await zk.snapshot(incremental=True)).states["t", 0].isr == (1,)
                await other.set_partition_state("t", 0, replace(STATE, isr=(1, 2), version=1))
                await next_hint(events, "states")
                assert (await zk.snapshot(incremental=True)).states["t", 0].isr == (1, 2)
            nursery.cancel_scope.cancel()

    run(main)


def test_session_expiry_restores_the_registration(zookeeper: str, zk_connect: str) -> None:
    chroot = zk_connect[len(zookeeper) :]

    async def main() -> None:
        proxy = ProxyServer()
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.run)
            through = (await proxy.create_proxy("zookeeper", zookeeper)).listen
            async with ZkState(f"{through}{chroot}") as zk, raw_session(zk_connect) as raw:
                await zk.register_broker(reg(4))
                old_session = zk._client.client_id  # private: the test needs the session's password
                assert await raw.owner("/brokers/ids/4") == old_session[0]

                # zk is cut off and cannot reconnect: nobody else can win the session back
                async with partitioned(proxy, ["zookeeper"]):
                    await trio.to_thread.run_sync(expire_session, zookeeper, old_session)
                    assert not await raw.exists("/brokers/ids/4")  # the ephemeral died with the session

                await next_hint(zk.events(), "session")
                new_session = zk._client.client_id[0]
                assert new_session != old_session[0]
                assert await raw.owner("/brokers/ids/4") == new_session  # re-registered by the new session
                assert (await zk.brokers())[4] == reg(4)
                async with ZkState(zk_connect) as other:  # the watches outlived the old session
                    await other.create_topic("after", {0: (4,)}, {})
                    await next_hint(zk.events(), "topics")
            nursery.cancel_scope.cancel()

    run(main)
