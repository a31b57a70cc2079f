"""The group APIs at Kafka 4.3's newest classic-group versions (Issue 20): what each version adds.

JoinGroup v7 names the protocol type, v9 lets a rejoining static leader skip the assignment (KIP-814);
SyncGroup v5 checks and names the protocol (KIP-559); OffsetCommit v9 answers GROUP_ID_NOT_FOUND for a
generation of an unknown group; OffsetFetch v7's ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for a
partition an open transaction has written; DescribeGroups v6 answers GROUP_ID_NOT_FOUND (KIP-1043);
ListGroups v4/v5 name and filter by state and type (KIP-518, KIP-848). Every body goes through the wire
encoding of its version (``helpers.response``).
"""

from __future__ import annotations

import pytest

from node.protocol import ApiKey, ErrorCode, Struct
from tests.node.groups.helpers import Client, Env, committed, request, response, run, snapshot, stable_group
from tests.node.groups.test_txn_offsets import PID, txn_commit

pytestmark = pytest.mark.unit


async def sync_v5(
    env: Env, joined: Struct, assignments: dict[str, bytes], *, protocol_type: str | None, protocol_name: str | None
) -> Struct:
    req = request(
        ApiKey.SYNC_GROUP,
        5,
        group_id="g",
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[{"member_id": m, "assignment": a} for m, a in assignments.items()],
    )
    return response(ApiKey.SYNC_GROUP, 5, await env.coordinator.sync_group(req, 5))


def test_join_v9_names_the_protocol_type_and_sync_v5_checks_and_names_the_protocol() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        joined = await c.join_member("g", version=9)
        assert (joined.error_code, joined.protocol_type, joined.protocol_name) == (0, "consumer", "range")
        assert joined.skip_assignment is False and joined.leader == joined.member_id
        wrong_type = await sync_v5(env, joined, {}, protocol_type="connect", protocol_name=None)
        wrong_name = await sync_v5(env, joined, {}, protocol_type="consumer", protocol_name="roundrobin")
        assert wrong_type.error_code == wrong_name.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert (wrong_type.protocol_type, wrong_type.protocol_name) == (None, None)
        synced = await sync_v5(
            env, joined, {joined.member_id: b"plan"}, protocol_type="consumer", protocol_name="range"
        )
        assert (synced.error_code, synced.assignment) == (0, b"plan")
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        again = await sync_v5(env, joined, {}, protocol_type=None, protocol_name=None)  # Stable: the same answer
        assert (again.assignment, again.protocol_name) == (b"plan", "range")
        assert await c.heartbeat("g", joined.generation_id, joined.member_id, version=4) == 0
        req = request(
            ApiKey.LEAVE_GROUP, 5, group_id="g", members=[{"member_id": joined.member_id, "reason": "closing"}]
        )
        left = response(ApiKey.LEAVE_GROUP, 5, await env.coordinator.leave_group(req, 5))
        assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])

    run(body)


def test_a_static_leader_rejoining_a_stable_group_skips_the_assignment_from_v9_only() -> None:
    async def body(env: Env) -> None:
        members = await stable_group(env, 2, static=True)
        leader_id = snapshot(env, "g").leader
        (leader,) = [m for m in members if m.member_id == leader_id]
        (follower,) = [m for m in members if m.member_id != leader_id]
        old = await Client(env.coordinator, "old").join("g", instance_id=leader.instance_id, version=8)
        assert (old.error_code, old.skip_assignment, old.members) == (0, False, [])
        assert old.leader != old.member_id  # before v9: told another id leads, so it does not assign
        new = await Client(env.coordinator, "new").join("g", instance_id=leader.instance_id, version=9)
        assert (new.error_code, new.generation_id, new.skip_assignment) == (0, 1, True)
        assert new.leader == new.member_id  # KIP-814: it knows it leads, and has the members' metadata
        assert sorted(m.member_id for m in new.members) == sorted([new.member_id, follower.member_id])
        # A static follower rejoining is told neither.
        rejoined = await Client(env.coordinator, "f2").join("g", instance_id=follower.instance_id, version=9)
        assert (rejoined.skip_assignment, rejoined.members, rejoined.leader) == (False, [], new.member_id)

    run(body)


def test_offset_commit_v9_to_an_unknown_group_with_a_generation_is_group_id_not_found() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        offsets = {("t", 0): (5, None)}
        assert await c.commit("nope", offsets, generation=3, member_id="m", version=8) == {
            ("t", 0): ErrorCode.ILLEGAL_GENERATION
        }
        assert await c.commit("nope", offsets, generation=3, member_id="m", version=9) == {
            ("t", 0): ErrorCode.GROUP_ID_NOT_FOUND
        }
        assert await c.commit("simple", offsets, version=9) == {("t", 0): 0}  # a simple commit makes the group
        member, *_ = await stable_group(env, 1)
        assert await member.client.commit(
            "g", {("t", 0): (7, "m")}, generation=member.generation, member_id=member.member_id, version=9
        ) == {("t", 0): 0}
        assert committed(await c.fetch("g", [("t", 0)], version=6)) == {("t", 0): (7, "m")}

    run(body)


async def fetch_v7(env: Env, group: str, partitions: list[int] | None, *, stable: bool) -> Struct:
    topics = None if partitions is None else [{"name": "t", "partition_indexes": partitions}]
    req = request(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=topics, require_stable=stable)
    return response(ApiKey.OFFSET_FETCH, 7, await env.coordinator.offset_fetch(req, 7))


def test_offset_fetch_v7_require_stable_answers_unstable_for_an_open_transactions_partitions() -> None:
    async def body(env: Env) -> None:
        c = env.coordinator
        assert await Client(c).commit("g", {("t", 0): (1, ""), ("t", 1): (2, "")}) == {("t", 0): 0, ("t", 1): 0}
        assert await txn_commit(env, "g", {("t", 0): 10}) == {("t", 0): 0}
        loose = await fetch_v7(env, "g", [0, 1], stable=False)
        assert committed(loose) == {("t", 0): (1, ""), ("t", 1): (2, "")}
        for partitions in ([0, 1], None):
            strict = await fetch_v7(env, "g", partitions, stable=True)
            codes = {
                (t.name, p.partition_index): (p.error_code, p.committed_offset)
                for t in strict.topics
                for p in t.partitions
            }
            assert codes == {("t", 0): (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1), ("t", 1): (0, 2)}
        c.complete_txn_offsets(c.partition_for("g"), PID, commit=True)
        assert committed(await fetch_v7(env, "g", [0, 1], stable=True)) == {("t", 0): (10, "m"), ("t", 1): (2, "")}

    run(body)


def test_describe_groups_v6_answers_group_id_not_found_for_an_unknown_group() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        await stable_group(env, 1)
        v5 = await c.describe("g", "nope", version=5)
        v6 = await c.describe("g", "nope", version=6)
        assert [(g.error_code, g.group_state) for g in v5.groups] == [(0, "Stable"), (0, "Dead")]
        assert [(g.error_code, g.group_state) for g in v6.groups] == [
            (0, "Stable"),
            (ErrorCode.GROUP_ID_NOT_FOUND, "Dead"),
        ]
        assert [g.error_message for g in v6.groups] == [None, "Group nope not found."]

    run(body)


async def list_groups(env: Env, version: int, **filters: list[str]) -> list[tuple[str, ...]]:
    req = request(ApiKey.LIST_GROUPS, version, **filters)
    body = response(ApiKey.LIST_GROUPS, version, await env.coordinator.list_groups(req, version))
    assert body.error_code == 0
    return sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in body.groups)


def test_list_groups_v4_and_v5_name_and_filter_by_state_and_type() -> None:
    async def body(env: Env) -> None:
        await stable_group(env, 1, "active")
        assert await Client(env.coordinator).commit("idle", {("t", 0): (1, None)}) == {("t", 0): 0}
        assert await list_groups(env, 4) == [
            ("active", "consumer", "Stable", ""),
            ("idle", "", "Empty", ""),
        ]
        assert await list_groups(env, 4, states_filter=["EMPTY"]) == [("idle", "", "Empty", "")]
        assert await list_groups(env, 5, states_filter=["stable", "dead"]) == [
            ("active", "consumer", "Stable", "classic")
        ]
        assert len(await list_groups(env, 5, types_filter=["Classic"])) == 2
        assert await list_groups(env, 5, types_filter=["consumer", "share"]) == []
        assert await list_groups(env, 3) == [("active", "consumer", "", ""), ("idle", "", "", "")]

    run(body)
