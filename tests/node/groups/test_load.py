"""Loading and unloading ``__consumer_offsets`` partitions: replay, ownership errors, failover of live groups."""

from __future__ import annotations

import logging

import pytest
import trio

from node.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupSnapshot,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from tests.node.groups.helpers import (
    CONFIG,
    Client,
    Env,
    MemoryStore,
    heartbeat_until_rebalance,
    keep_alive,
    run,
    run_trio,
    stable_group,
    subscription,
    wall_ms,
)

NOT_COORDINATOR = 16
LOAD_IN_PROGRESS = 14
REBALANCE_IN_PROGRESS = 27


def snapshots(coordinator: GroupCoordinator) -> dict[str, GroupSnapshot | None]:
    return {g: coordinator.describe(g) for g in coordinator.group_ids()}


def reload(env: Env) -> GroupCoordinator:
    """A second coordinator (as on another node) that loads every partition the first one wrote."""
    fresh = GroupCoordinator(CONFIG, MemoryStore(), wall_clock_ms=wall_ms)
    for p in range(CONFIG.offsets_partitions):
        fresh.load_partition(p, list(env.store.records[p]))
    return fresh


def test_replay_gives_back_the_same_groups_and_offsets() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        await c.commit("simple", {("t", 0): (1, "first"), ("t", 1): (5, None)})
        await c.commit("simple", {("t", 0): (2, "second")})  # overwrite
        await c.commit("simple", {("t", 2): (9, None)})
        assert await env.coordinator.offset_delete("simple", [("t", 1)]) == (0, [("t", 1, 0)])  # tombstone
        members = await stable_group(env, 2, "live", static=True)
        await members[0].client.commit("live", {("t", 0): (40, "m")}, generation=1, member_id=members[0].member_id)
        await c.commit("doomed", {("t", 0): (3, None)})
        assert await env.coordinator.delete_groups(["doomed"]) == [("doomed", 0)]

        before = snapshots(env.coordinator)
        assert set(before) == {"simple", "live"}
        fresh = reload(env)
        after = snapshots(fresh)
        assert after == before
        simple = after["simple"]
        assert simple is not None and simple.offsets == {("t", 0): (2, "second"), ("t", 2): (9, "")}
        live = after["live"]
        assert live is not None and (live.state, live.generation) == ("Stable", 1)
        assert {m.group_instance_id for m in live.members} == {"instance-0", "instance-1"}

    run(body)


def test_loaded_members_that_keep_heartbeating_keep_their_generation() -> None:
    async def body(env: Env) -> None:
        a, b = await stable_group(env, 2)
        fresh = reload(env)
        async with trio.open_nursery() as nursery:
            await nursery.start(fresh.run)
            a.client.coordinator = fresh
            b.client.coordinator = fresh
            assert await b.client.heartbeat("g", 1, b.member_id) == 0
            quiet_since = trio.current_time()
            await keep_alive(a, 9)  # both still members: no rebalance yet
            # b went quiet after the failover: its session ends and a is asked to rejoin.
            assert await heartbeat_until_rebalance(a) - quiet_since == 12
            rejoined = await a.client.join("g", a.member_id)
            assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (2, [a.member_id])
            assert (await a.client.sync("g", 2, a.member_id, {a.member_id: b"mine"})).assignment == b"mine"
            nursery.cancel_scope.cancel()

    run(body)


def test_a_loaded_group_whose_members_are_gone_becomes_empty_and_is_stored_so() -> None:
    async def body(env: Env) -> None:
        await stable_group(env, 1)
        store = MemoryStore()
        fresh = GroupCoordinator(CONFIG, store, wall_clock_ms=wall_ms)
        for p in range(CONFIG.offsets_partitions):
            fresh.load_partition(p, list(env.store.records[p]))
        async with trio.open_nursery() as nursery:
            await nursery.start(fresh.run)
            await trio.sleep(15)  # the session timeout (10 s) passes without a heartbeat
            snap = fresh.describe("g")
            assert snap is not None and (snap.state, snap.generation, snap.members) == ("Empty", 2, ())
            (record,) = store.records[fresh.partition_for("g")]
            assert record[0] == encode_key(GroupMetadataKey("g"))
            assert record[1] is not None and b"range" not in record[1]
            nursery.cancel_scope.cancel()

    run(body)


def test_replay_of_hand_written_records() -> None:
    member = MemberMetadataValue("m-1", None, "client", "/h", 30000, 10000, subscription("t"), b"asg")

    def offset(group: str, topic: str, partition: int, value: OffsetCommitValue | None) -> tuple[bytes, bytes | None]:
        key = encode_key(OffsetCommitKey(group, topic, partition))
        return key, None if value is None else encode_offset_commit_value(value)

    def metadata(group: str, value: GroupMetadataValue | None) -> tuple[bytes, bytes | None]:
        return encode_key(GroupMetadataKey(group)), None if value is None else encode_group_metadata_value(value)

    records: list[tuple[bytes | None, bytes | None]] = [
        offset("g", "t", 0, OffsetCommitValue(1, "", 1)),
        metadata("g", GroupMetadataValue("consumer", 4, "range", "m-1", 5, (member,))),
        offset("g", "t", 0, OffsetCommitValue(7, "new", 2)),  # overwrites
        offset("gone", "t", 0, OffsetCommitValue(1, "", 1)),
        offset("gone", "t", 0, None),  # tombstone: nothing left of "gone"
        metadata("metadata-deleted", GroupMetadataValue("consumer", 1, None, None, 5)),
        offset("metadata-deleted", "x", 3, OffsetCommitValue(3, "", 1)),
        metadata("metadata-deleted", None),  # its offsets stay: it comes back as a group without protocol
        (None, b"a record without a key is ignored"),
        (b"\x00\x09unknown key version", b"skipped"),
    ]

    async def main() -> None:
        coordinator = GroupCoordinator(GroupConfig(offsets_partitions=1), MemoryStore(), wall_clock_ms=wall_ms)
        coordinator.load_partition(0, records)
        assert coordinator.group_ids() == ["g", "metadata-deleted"]
        g = coordinator.describe("g")
        assert g is not None
        assert (g.state, g.generation, g.protocol, g.leader) == ("Stable", 4, "range", "m-1")
        assert g.offsets == {("t", 0): (7, "new")}
        leftover = coordinator.describe("metadata-deleted")
        assert leftover is not None and (leftover.state, leftover.protocol_type) == ("Empty", None)
        assert leftover.offsets == {("x", 3): (3, "")}

    run_trio(main)


def test_a_corrupt_record_is_skipped_and_named(caplog: pytest.LogCaptureFixture) -> None:
    records: list[tuple[bytes | None, bytes | None]] = [
        (encode_key(OffsetCommitKey("g", "t", 0)), b"\x00\x03\x00"),
        (encode_key(OffsetCommitKey("g", "t", 1)), encode_offset_commit_value(OffsetCommitValue(4, "", 1))),
    ]

    async def main() -> None:
        coordinator = GroupCoordinator(CONFIG, MemoryStore(), wall_clock_ms=wall_ms)
        partition = coordinator.partition_for("g")
        with caplog.at_level(logging.WARNING, logger="strait.node.groups"):
            coordinator.load_partition(partition, records)
        assert f"__consumer_offsets-{partition}: skipping record 0" in caplog.text
        snap = coordinator.describe("g")
        assert snap is not None and snap.offsets == {("t", 1): (4, "")}

    run_trio(main)


def test_groups_of_partitions_not_loaded_here_get_not_coordinator() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        p = env.coordinator.partition_for("g")
        assert not env.coordinator.is_loaded(p)
        assert (await c.join("g")).error_code == NOT_COORDINATOR
        assert await c.heartbeat("g", 1, "m") == NOT_COORDINATOR
        assert await c.commit("g", {("t", 0): (1, None)}) == {("t", 0): NOT_COORDINATOR}
        assert (await c.fetch("g", None)).error_code == NOT_COORDINATOR
        assert (await c.describe("g")).groups[0].error_code == NOT_COORDINATOR
        assert await env.coordinator.delete_groups(["g"]) == [("g", NOT_COORDINATOR)]
        assert await env.coordinator.offset_delete("g", [("t", 0)]) == (NOT_COORDINATOR, [])

        env.coordinator.begin_loading(p)
        assert (await c.join("g")).error_code == LOAD_IN_PROGRESS
        assert await c.heartbeat("g", 1, "m") == 0  # "respond blindly" while loading, as Kafka does
        assert (await c.sync("g", 1, "m")).error_code == REBALANCE_IN_PROGRESS
        assert (await c.list_groups()).error_code == LOAD_IN_PROGRESS
        v1 = await c.fetch("g", [("t", 0)], version=1)
        assert v1.topics[0].partitions[0].error_code == LOAD_IN_PROGRESS

        env.coordinator.load_partition(p, [])
        assert env.coordinator.is_loaded(p)
        assert (await c.join_member("g")).error_code == 0

    run(body, load=False)


def test_unloading_answers_waiting_members_not_coordinator() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)

        async def unload_soon() -> None:
            await trio.sleep(1)  # the member waits out the initial rebalance delay
            env.coordinator.unload_partition(env.coordinator.partition_for("g"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(unload_soon)
            answer = await c.join("g", version=3)
        assert answer.error_code == NOT_COORDINATOR
        assert env.coordinator.group_ids() == []

    run(body)


def test_apis_wait_for_run() -> None:
    async def main() -> None:
        coordinator = GroupCoordinator(CONFIG, MemoryStore(), wall_clock_ms=wall_ms)
        coordinator.load_partition(coordinator.partition_for("g"), [])
        c = Client(coordinator)
        assert (await c.join("g")).error_code == 15  # COORDINATOR_NOT_AVAILABLE
        assert (await c.list_groups()).error_code == 15
        async with trio.open_nursery() as nursery:
            await nursery.start(coordinator.run)
            with pytest.raises(RuntimeError, match="already running"):
                await coordinator.run()
            assert (await c.join("g")).error_code == 79
            nursery.cancel_scope.cancel()

    run_trio(main)


def test_partition_numbers_are_checked() -> None:
    coordinator = GroupCoordinator(GroupConfig(offsets_partitions=3), MemoryStore(), wall_clock_ms=lambda: 0)
    with pytest.raises(ValueError, match=r"partition 3 is outside 0..2"):
        coordinator.load_partition(3, [])
    with pytest.raises(ValueError, match="offsets_partitions must be at least 1, got 0"):
        GroupConfig(offsets_partitions=0)
