"""Offset commits and fetches, retention, DeleteGroups, OffsetDelete, reset, DescribeGroups and ListGroups."""

from __future__ import annotations

import pytest
import trio

from node.groups import (
    GroupBusy,
    GroupConfig,
    GroupMetadataKey,
    NotCoordinatorError,
    OffsetCommitKey,
    decode_key,
    decode_offset_commit_value,
)
from tests.node.groups.helpers import (
    Client,
    Env,
    MemoryStore,
    committed,
    keep_alive,
    run,
    snapshot,
    stable_group,
    subscription,
)

UNKNOWN_MEMBER_ID = 25
NOT_COORDINATOR = 16
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
GROUP_SUBSCRIBED_TO_TOPIC = 86


def partition_records(env: Env, group: str) -> list[tuple[object, bytes | None]]:
    return [(decode_key(k), v) for k, v in env.store.records[env.coordinator.partition_for(group)]]


# -- commit and fetch --------------------------------------------------------------------------------------------------


def test_simple_commits_create_a_group_without_members() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        codes = await c.commit("simple", {("t", 0): (10, "m0"), ("t", 1): (11, None), ("u", 0): (12, "")})
        assert codes == {("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
        fetched = await c.fetch("simple", [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
        assert fetched.error_code == 0
        assert committed(fetched) == {("t", 0): (10, "m0"), ("t", 1): (11, ""), ("t", 2): (-1, ""), ("u", 0): (12, "")}
        records = partition_records(env, "simple")
        assert [k for k, _ in records] == [
            OffsetCommitKey("simple", "t", 0),
            OffsetCommitKey("simple", "t", 1),
            OffsetCommitKey("simple", "u", 0),
        ]
        value = records[0][1]
        assert value is not None
        stored = decode_offset_commit_value(value)
        assert (stored.offset, stored.metadata, stored.commit_timestamp) == (10, "m0", 1_700_000_000_000)
        listed = await c.list_groups()
        assert [(g.group_id, g.protocol_type) for g in listed.groups] == [("simple", "")]

    run(body)


def test_members_commit_with_their_generation_and_simple_commits_are_refused() -> None:
    async def body(env: Env) -> None:
        (a,) = await stable_group(env, 1)
        codes = await a.client.commit("g", {("t", 0): (5, "x")}, generation=1, member_id=a.member_id, leader_epoch=3)
        assert codes == {("t", 0): 0}
        assert await a.client.commit("g", {("t", 0): (6, None)}) == {("t", 0): UNKNOWN_MEMBER_ID}
        fetched = await a.client.fetch("g", [("t", 0)])
        part = fetched.topics[0].partitions[0]
        assert (part.committed_offset, part.committed_leader_epoch, part.metadata) == (5, 3, "x")
        # A commit with a generation for a group that does not exist: an old generation.
        assert await a.client.commit("nope", {("t", 0): (1, None)}, generation=3, member_id="m") == {("t", 0): 22}

    run(body)


def test_metadata_over_the_limit_is_refused_per_partition() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        limit = 4096
        codes = await c.commit("g", {("t", 0): (1, "x" * limit), ("t", 1): (1, "x" * (limit + 1))})
        assert codes == {("t", 0): 0, ("t", 1): 12}
        assert committed(await c.fetch("g", [("t", 0), ("t", 1)]))[("t", 1)] == (-1, "")

    run(body)


def test_fetch_all_offsets_and_old_versions() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        await c.commit("g", {("a", 0): (1, "one"), ("b", 3): (2, "two")}, version=2)
        every = await c.fetch("g", None, version=2)
        assert committed(every) == {("a", 0): (1, "one"), ("b", 3): (2, "two")}
        v1 = await c.fetch("g", [("b", 3), ("c", 0)], version=1)
        assert committed(v1) == {("b", 3): (2, "two"), ("c", 0): (-1, "")}
        assert committed(await c.fetch("unknown", None)) == {}
        assert committed(await c.fetch("unknown", [("a", 0)])) == {("a", 0): (-1, "")}

    run(body)


def test_a_failed_write_is_not_coordinator_and_changes_nothing() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        env.store.unavailable.add(env.coordinator.partition_for("g"))
        assert await c.commit("g", {("t", 0): (1, None)}) == {("t", 0): NOT_COORDINATOR}
        env.store.unavailable.clear()
        assert committed(await c.fetch("g", [("t", 0)])) == {("t", 0): (-1, "")}

    run(body)


def test_a_write_that_never_becomes_durable_times_out() -> None:
    async def body(env: Env) -> None:
        env.store.gate = trio.Event()  # never set
        start = trio.current_time()
        assert await Client(env.coordinator).commit("g", {("t", 0): (1, None)}) == {("t", 0): 7}
        assert trio.current_time() - start == pytest.approx(5.0)  # offsets.commit.timeout.ms
        env.store.gate = None
        assert committed(await Client(env.coordinator).fetch("g", [("t", 0)])) == {("t", 0): (-1, "")}

    run(body)


def test_commits_reach_the_log_and_memory_in_the_order_they_were_made() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        gate = env.store.gate = trio.Event()
        async with trio.open_nursery() as nursery:
            for offset in range(5):
                nursery.start_soon(c.commit, "g", {("t", 0): (offset, None)})
                await trio.sleep(0.01)
            gate.set()
        offsets = [
            decode_offset_commit_value(v).offset for _, v in env.store.records[env.coordinator.partition_for("g")] if v
        ]
        assert offsets == [0, 1, 2, 3, 4]
        assert committed(await c.fetch("g", [("t", 0)])) == {("t", 0): (4, "")}

    run(body)


# -- retention ---------------------------------------------------------------------------------------------------------

RETENTION = GroupConfig(offsets_partitions=4, offsets_retention_ms=60_000, offsets_retention_check_interval_ms=5_000)


def test_an_empty_groups_offsets_expire_after_retention_and_the_group_goes() -> None:
    async def body(env: Env) -> None:
        (a,) = await stable_group(env, 1)
        await a.client.commit("g", {("t", 0): (7, None)}, generation=1, member_id=a.member_id)
        await keep_alive(a, 120)  # a Stable group subscribed to "t" keeps its offset however old
        assert committed(await a.client.fetch("g", [("t", 0)])) == {("t", 0): (7, "")}
        await a.client.leave("g", [(a.member_id, None)])
        await trio.sleep(0.1)
        assert snapshot(env, "g").state == "Empty"
        await trio.sleep(55)
        assert committed(await a.client.fetch("g", [("t", 0)])) == {("t", 0): (7, "")}
        await trio.sleep(10)  # retention passed since the group became Empty; the check runs every 5 s
        assert committed(await a.client.fetch("g", [("t", 0)])) == {("t", 0): (-1, "")}
        assert env.coordinator.describe("g") is None
        tail = partition_records(env, "g")[-2:]
        assert tail == [(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]

    run(body, config=RETENTION)


def test_a_stable_consumer_group_loses_only_offsets_of_topics_it_no_longer_reads() -> None:
    async def body(env: Env) -> None:
        (a,) = await stable_group(env, 1)  # subscribed to "t"
        offsets = {("t", 0): (1, None), ("old", 0): (2, None)}
        await a.client.commit("g", offsets, generation=1, member_id=a.member_id)
        await keep_alive(a, 90)
        assert committed(await a.client.fetch("g", None)) == {("t", 0): (1, "")}

    run(body, config=RETENTION)


def test_simple_group_offsets_expire_one_by_one_from_their_commit() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        await c.commit("s", {("t", 0): (1, None)})
        await trio.sleep(30)
        await c.commit("s", {("t", 1): (2, None)})
        await c.commit("s", {("t", 2): (3, None)}, version=2, retention_ms=10_000)  # explicit retention (v2-4)
        await trio.sleep(16)
        assert committed(await c.fetch("s", None)) == {("t", 0): (1, ""), ("t", 1): (2, "")}
        await trio.sleep(20)
        assert committed(await c.fetch("s", None)) == {("t", 1): (2, "")}
        await trio.sleep(30)
        assert env.coordinator.group_ids() == []

    run(body, config=RETENTION)


# -- deleting ----------------------------------------------------------------------------------------------------------


def test_delete_groups() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        await c.commit("idle", {("t", 0): (1, None), ("t", 1): (2, None)})
        await stable_group(env, 1, "busy")
        results = await env.coordinator.delete_groups(["idle", "busy", "never"])
        assert results == [("idle", 0), ("busy", NON_EMPTY_GROUP), ("never", GROUP_ID_NOT_FOUND)]
        assert env.coordinator.group_ids() == ["busy"]
        assert committed(await c.fetch("idle", None)) == {}
        tombstones = [k for k, v in partition_records(env, "idle") if v is None]
        assert set(tombstones) == {
            OffsetCommitKey("idle", "t", 0),
            OffsetCommitKey("idle", "t", 1),
            GroupMetadataKey("idle"),
        }
        assert await env.coordinator.delete_groups(["idle"]) == [("idle", GROUP_ID_NOT_FOUND)]

    run(body)


def test_a_group_whose_deletion_fails_stays() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        await c.commit("idle", {("t", 0): (1, None)})
        env.store.unavailable.add(env.coordinator.partition_for("idle"))
        assert await env.coordinator.delete_groups(["idle"]) == [("idle", NOT_COORDINATOR)]
        env.store.unavailable.clear()
        assert snapshot(env, "idle").state == "Empty"
        assert committed(await c.fetch("idle", None)) == {("t", 0): (1, "")}

    run(body)


def test_offset_delete() -> None:
    async def body(env: Env) -> None:
        (a,) = await stable_group(env, 1)  # a consumer group subscribed to "t"
        await a.client.commit("g", {("t", 0): (1, None), ("u", 0): (2, None)}, generation=1, member_id=a.member_id)
        code, results = await env.coordinator.offset_delete("g", [("t", 0), ("u", 0), ("u", 9)])
        assert code == 0
        assert results == [("t", 0, GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0, 0), ("u", 9, 0)]
        assert committed(await a.client.fetch("g", None)) == {("t", 0): (1, "")}
        assert await env.coordinator.offset_delete("never", [("t", 0)]) == (GROUP_ID_NOT_FOUND, [])

        # An Empty group: anything goes, and with its last offset the group goes too.
        c = Client(env.coordinator)
        await c.commit("idle", {("t", 0): (1, None), ("t", 1): (1, None)})
        assert await env.coordinator.offset_delete("idle", [("t", 0)]) == (0, [("t", 0, 0)])
        assert env.coordinator.describe("idle") is not None
        assert await env.coordinator.offset_delete("idle", [("t", 1)]) == (0, [("t", 1, 0)])
        assert env.coordinator.describe("idle") is None

    run(body)


def test_offset_delete_refuses_active_groups_of_other_protocols() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        joined = await c.join_member("connect-cluster", protocol_type="connect", protocols=[("default", b"")])
        assert joined.error_code == 0
        assert await env.coordinator.offset_delete("connect-cluster", [("t", 0)]) == (NON_EMPTY_GROUP, [])

    run(body)


# -- operators ---------------------------------------------------------------------------------------------------------


def test_reset_offsets_only_for_groups_without_members() -> None:
    async def body(env: Env) -> None:
        await env.coordinator.reset_offsets("stopped", {("t", 0): 100, ("t", 1): 200})
        snap = env.coordinator.describe("stopped")
        assert snap is not None and snap.offsets == {("t", 0): (100, ""), ("t", 1): (200, "")}
        await stable_group(env, 2, "running")
        with pytest.raises(GroupBusy, match=r"group 'running' is Stable with 2 active member\(s\)") as info:
            await env.coordinator.reset_offsets("running", {("t", 0): 0})
        assert info.value.members == 2
        env.coordinator.unload_partition(env.coordinator.partition_for("stopped"))
        with pytest.raises(NotCoordinatorError, match="is not served by this node"):
            await env.coordinator.reset_offsets("stopped", {("t", 0): 0})

    run(body)


def test_describe_and_list_groups() -> None:
    async def body(env: Env) -> None:
        members = await stable_group(env, 2)
        c = Client(env.coordinator, "admin")
        await c.commit("simple", {("t", 0): (1, None)})
        described = await c.describe("g", "simple", "unknown")
        g, simple, unknown = described.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
        assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
        assert {
            (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in g.members
        } == {(m.member_id, m.client.client_id, "/127.0.0.1", subscription("t"), m.assignment) for m in members}
        assert (simple.group_state, simple.protocol_type, list(simple.members)) == ("Empty", "", [])
        assert (unknown.error_code, unknown.group_state) == (0, "Dead")
        listed = await c.list_groups()
        assert sorted((x.group_id, x.protocol_type) for x in listed.groups) == [("g", "consumer"), ("simple", "")]
        assert env.coordinator.group_ids() == ["g", "simple"]
        snap = env.coordinator.describe("g")
        assert snap is not None
        assert sorted(m.assignment or () for m in snap.members) == [(("t", 0),), (("t", 1),)]

        # While rebalancing, members are listed without their metadata (as Kafka does).
        leader = next(m for m in members if m.member_id == snap.leader)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(leader.client.join, "g", leader.member_id)
            await trio.sleep(0.1)
            rebalancing = (await c.describe("g", version=0)).groups[0]
            assert rebalancing.group_state == "PreparingRebalance"
            assert {m.member_metadata for m in rebalancing.members} == {b""}
            nursery.cancel_scope.cancel()

    run(body)


def test_unloaded_store_partition_does_not_affect_others() -> None:
    store = MemoryStore()

    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        store.unavailable.add(env.coordinator.partition_for("a"))
        other = next(
            f"g{i}" for i in range(100) if env.coordinator.partition_for(f"g{i}") != env.coordinator.partition_for("a")
        )
        assert await c.commit("a", {("t", 0): (1, None)}) == {("t", 0): NOT_COORDINATOR}
        assert await c.commit(other, {("t", 0): (1, None)}) == {("t", 0): 0}

    run(body, store=store)
