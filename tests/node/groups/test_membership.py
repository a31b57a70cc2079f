"""The classic group protocol: JoinGroup / SyncGroup / Heartbeat / LeaveGroup, rebalances and their timeouts.

Every test runs on trio's MockClock: timeouts pass instantly and the times asserted are exact.
"""

from __future__ import annotations

import pytest
import trio
from kafka.protocol.consumer.group import JoinGroupRequest

from node.groups import GroupConfig, decode_group_metadata_value, decode_key
from node.protocol import Struct, decode_request, read_request_header
from tests.node.groups.helpers import (
    CONFIG,
    REBALANCE_MS,
    SESSION_MS,
    Client,
    Env,
    Joined,
    assignment_for,
    gather,
    heartbeat_until_rebalance,
    run,
    snapshot,
    stable_group,
    subscription,
)

MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
FENCED_INSTANCE_ID = 82
DELAY_S = CONFIG.initial_rebalance_delay_ms / 1000


# -- joining -----------------------------------------------------------------------------------------------------------


def test_one_member_joins_after_the_initial_delay_and_syncs() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        joined = await c.join_member("g")
        assert trio.current_time() == pytest.approx(DELAY_S)
        assert joined.error_code == 0
        assert joined.generation_id == 1
        assert joined.protocol_name == "range"
        assert joined.member_id.startswith("consumer-1-")
        assert joined.leader == joined.member_id
        assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, subscription("t"))]
        plan = {joined.member_id: assignment_for(0)}
        synced = await c.sync("g", 1, joined.member_id, plan)
        assert (synced.error_code, synced.assignment) == (0, assignment_for(0))
        assert await c.heartbeat("g", 1, joined.member_id) == 0
        snap = env.coordinator.describe("g")
        assert snap is not None
        assert (snap.state, snap.generation, snap.leader) == ("Stable", 1, joined.member_id)
        assert snap.members[0].assignment == (("t", 0),)
        # The assignment is durable: the last record of the group's partition holds it.
        key, value = env.store.records[env.coordinator.partition_for("g")][-1]
        assert value is not None and decode_key(key) is not None
        stored = decode_group_metadata_value(value)
        assert (stored.generation, stored.protocol, stored.leader) == (1, "range", joined.member_id)
        assert [(m.member_id, m.assignment) for m in stored.members] == [(joined.member_id, assignment_for(0))]

    run(body)


def test_three_members_one_leader_and_followers_wait_for_its_assignment() -> None:
    async def body(env: Env) -> None:
        clients = [Client(env.coordinator, f"c{i}") for i in range(3)]
        joins = await gather(*[lambda c=c, i=i: c.join_member("g", topics=[f"t{i}"]) for i, c in enumerate(clients)])
        assert {j.generation_id for j in joins} == {1}
        leader = joins[0].leader
        assert {j.leader for j in joins} == {leader}
        ids = {j.member_id for j in joins}
        assert len(ids) == 3 and leader in ids
        with_members = [j for j in joins if j.members]
        assert len(with_members) == 1 and with_members[0].member_id == leader
        metadata = {m.member_id: m.metadata for m in with_members[0].members}
        assert metadata == {j.member_id: subscription(f"t{i}") for i, j in enumerate(joins)}
        plan = {j.member_id: assignment_for(i) for i, j in enumerate(joins)}
        start = trio.current_time()
        done_at: dict[str, float] = {}

        async def member(c: Client, j: Struct) -> Struct:
            if j.member_id == leader:
                await trio.sleep(5)
            synced = await c.sync("g", 1, j.member_id, plan if j.member_id == leader else {})
            done_at[j.member_id] = trio.current_time() - start
            return synced

        syncs = await gather(*[lambda c=c, j=j: member(c, j) for c, j in zip(clients, joins, strict=True)])
        assert [s.assignment for s in syncs] == [plan[j.member_id] for j in joins]
        assert set(done_at.values()) == {5.0}  # followers waited for the leader
        assert snapshot(env, "g").state == "Stable"

    run(body)


def test_member_id_required_handshake() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator, "my-client")
        first = await c.join("g", version=4)
        assert first.error_code == MEMBER_ID_REQUIRED
        assert first.member_id.startswith("my-client-")
        assert first.generation_id == -1
        assert trio.current_time() == 0  # answered at once
        second = await c.join("g", first.member_id, version=4)
        assert (second.error_code, second.member_id, second.generation_id) == (0, first.member_id, 1)
        # Before v4 a new member is admitted directly.
        old = await Client(env.coordinator, "old").join("h", version=3)
        assert old.error_code == 0 and old.member_id.startswith("old-")

    run(body)


def test_a_pending_member_holds_the_rebalance_until_its_session_expires() -> None:
    async def body(env: Env) -> None:
        (a,) = await stable_group(env, 1)
        pending = await Client(env.coordinator, "b").join("g")
        assert pending.error_code == MEMBER_ID_REQUIRED
        start = trio.current_time()
        rejoined = await a.client.join("g", a.member_id)  # the leader rejoins: a rebalance
        assert trio.current_time() - start == pytest.approx(SESSION_MS / 1000)
        assert (rejoined.error_code, rejoined.generation_id, len(rejoined.members)) == (0, 2, 1)
        late = await Client(env.coordinator, "b").join("g", pending.member_id)
        assert late.error_code == UNKNOWN_MEMBER_ID

    run(body)


def test_initial_delay_is_extended_while_new_members_arrive() -> None:
    async def body(env: Env) -> None:
        async def second() -> Struct:
            await trio.sleep(2)
            return await Client(env.coordinator, "b").join("g", version=3)

        first, late = await gather(lambda: Client(env.coordinator, "a").join("g", version=3), second)
        assert trio.current_time() == pytest.approx(2 * DELAY_S)
        assert (first.generation_id, late.generation_id) == (1, 1)
        assert len(first.members) + len(late.members) == 2

    run(body)


def test_without_initial_delay_a_lone_member_is_answered_at_once() -> None:
    async def body(env: Env) -> None:
        joined = await Client(env.coordinator).join_member("g")
        assert joined.generation_id == 1
        assert trio.current_time() == 0

    run(body, config=GroupConfig(offsets_partitions=4, initial_rebalance_delay_ms=0))


def test_join_errors() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        assert (await c.join("")).error_code == 24  # INVALID_GROUP_ID
        assert (await c.join("g", session_ms=1000)).error_code == 26  # INVALID_SESSION_TIMEOUT
        assert (await c.join("g", "stranger")).error_code == UNKNOWN_MEMBER_ID
        assert (await c.join("g", protocols=[])).error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        await stable_group(env, 1, "h")
        other_type = await c.join_member("h", protocol_type="connect")
        assert other_type.error_code == 23
        other_protocol = await c.join_member("h", protocols=[("roundrobin", b"")])
        assert other_protocol.error_code == 23

    run(body)


def test_followers_with_unchanged_metadata_get_the_current_generation_but_the_leader_rebalances() -> None:
    async def scenario(env: Env) -> None:
        members = await stable_group(env, 2)
        snap = env.coordinator.describe("g")
        assert snap is not None
        leader = next(m for m in members if m.member_id == snap.leader)
        follower = next(m for m in members if m.member_id != snap.leader)
        same = await follower.client.join("g", follower.member_id)
        assert (same.error_code, same.generation_id, list(same.members)) == (0, 1, [])
        assert snapshot(env, "g").state == "Stable"
        start = trio.current_time()

        async def follower_rejoins() -> Struct:
            await trio.sleep(1)  # it learns of the rebalance from a heartbeat
            assert await follower.client.heartbeat("g", 1, follower.member_id) == REBALANCE_IN_PROGRESS
            return await follower.client.join("g", follower.member_id)

        rejoin = await gather(lambda: leader.client.join("g", leader.member_id), follower_rejoins)
        assert [r.generation_id for r in rejoin] == [2, 2]
        assert trio.current_time() - start == 1  # complete as soon as both had rejoined

    run(scenario)


# -- leaving and failing -----------------------------------------------------------------------------------------------


def test_a_member_that_stops_heartbeating_is_removed_and_the_others_rebalance() -> None:
    async def body(env: Env) -> None:
        a, b = await stable_group(env, 2)
        synced_at = trio.current_time()
        noticed = await heartbeat_until_rebalance(a)
        # b's session (10 s from its last contact) ran out; a notices at its next heartbeat (every 3 s).
        assert noticed - synced_at == 12
        rejoined = await a.client.join("g", a.member_id)
        assert trio.current_time() == noticed  # everyone left has rejoined: no waiting
        assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (2, [a.member_id])
        assert await b.client.heartbeat("g", b.generation, b.member_id) == UNKNOWN_MEMBER_ID

    run(body)


def test_leave_group() -> None:
    async def body(env: Env) -> None:
        a, b = await stable_group(env, 2)
        left = await b.client.leave("g", [(b.member_id, None), ("nobody", None)])
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [(b.member_id, 0), ("nobody", UNKNOWN_MEMBER_ID)]
        assert await a.client.heartbeat("g", a.generation, a.member_id) == REBALANCE_IN_PROGRESS
        rejoined = await a.client.join("g", a.member_id)
        assert (rejoined.generation_id, len(rejoined.members)) == (2, 1)
        # v0-2: one member, its error is the response's error
        assert (await a.client.leave("g", [("nobody", None)], version=1)).error_code == UNKNOWN_MEMBER_ID
        assert (await a.client.leave("g", [(a.member_id, None)], version=1)).error_code == 0
        assert snapshot(env, "g").members == ()

    run(body)


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def body(env: Env) -> None:
        members = await stable_group(env, 2)
        leader_id = snapshot(env, "g").leader
        leader = next(m for m in members if m.member_id == leader_id)
        lazy = next(m for m in members if m.member_id != leader_id)
        start = trio.current_time()

        async def keep_heartbeating() -> None:
            while await lazy.client.heartbeat("g", lazy.generation, lazy.member_id) in (0, REBALANCE_IN_PROGRESS):
                await trio.sleep(3)

        async def rejoin() -> tuple[Struct, float]:
            answer = await leader.client.join("g", leader.member_id)
            return answer, trio.current_time() - start

        (rejoined, waited), _ = await gather(rejoin, keep_heartbeating)
        assert waited == pytest.approx(REBALANCE_MS / 1000)  # heartbeats do not count as rejoining
        assert rejoined.generation_id == 2
        assert [m.member_id for m in rejoined.members] == [leader.member_id]
        assert await lazy.client.heartbeat("g", 2, lazy.member_id) == UNKNOWN_MEMBER_ID

    run(body)


def test_members_that_never_sync_are_dropped_after_the_rebalance_timeout() -> None:
    async def body(env: Env) -> None:
        clients = [Client(env.coordinator, f"c{i}") for i in range(2)]
        joins = await gather(*[lambda c=c: c.join_member("g") for c in clients])
        leader = next(j for j in joins if j.members)
        lead_client = clients[joins.index(leader)]
        silent = next(j for j in joins if j is not leader)
        silent_client = clients[joins.index(silent)]
        synced = await lead_client.sync("g", 1, leader.member_id, {leader.member_id: b"x"})
        assert synced.error_code == 0
        start = trio.current_time()
        me = Joined(lead_client, leader.member_id, 1, b"x")

        async def silent_heartbeats() -> None:
            while await silent_client.heartbeat("g", 1, silent.member_id) == 0:
                await trio.sleep(3)

        noticed, _ = await gather(lambda: heartbeat_until_rebalance(me), silent_heartbeats)
        assert REBALANCE_MS / 1000 <= noticed - start <= REBALANCE_MS / 1000 + 3
        assert await silent_client.heartbeat("g", 1, silent.member_id) == UNKNOWN_MEMBER_ID

    run(body)


# -- generations -------------------------------------------------------------------------------------------------------


def test_generation_and_member_errors() -> None:
    async def body(env: Env) -> None:
        (a,) = await stable_group(env, 1)
        c = a.client
        assert await c.heartbeat("g", 7, a.member_id) == ILLEGAL_GENERATION
        assert (await c.sync("g", 7, a.member_id)).error_code == ILLEGAL_GENERATION
        assert await c.heartbeat("g", 1, "someone-else") == UNKNOWN_MEMBER_ID
        assert (await c.sync("g", 1, "someone-else")).error_code == UNKNOWN_MEMBER_ID
        assert await c.heartbeat("nope", 1, a.member_id) == UNKNOWN_MEMBER_ID
        assert await c.commit("g", {("t", 0): (5, None)}, generation=7, member_id=a.member_id) == {
            ("t", 0): ILLEGAL_GENERATION
        }
        assert await c.commit("g", {("t", 0): (5, None)}, generation=1, member_id="x") == {("t", 0): UNKNOWN_MEMBER_ID}

        # A second member joins: PreparingRebalance. Heartbeats and syncs say "rejoin"; commits still count.
        newcomer = Client(env.coordinator, "b")
        joining = await newcomer.join("g")  # MEMBER_ID_REQUIRED
        async with trio.open_nursery() as nursery:
            nursery.start_soon(newcomer.join, "g", joining.member_id)
            await trio.sleep(0.5)
            assert snapshot(env, "g").state == "PreparingRebalance"
            assert await c.heartbeat("g", 1, a.member_id) == REBALANCE_IN_PROGRESS
            assert (await c.sync("g", 1, a.member_id)).error_code == REBALANCE_IN_PROGRESS
            assert await c.commit("g", {("t", 0): (5, None)}, generation=1, member_id=a.member_id) == {("t", 0): 0}
            rejoined = await c.join("g", a.member_id)
            assert rejoined.generation_id == 2
        # CompletingRebalance: commits wait for the assignment.
        assert snapshot(env, "g").state == "CompletingRebalance"
        assert await c.commit("g", {("t", 0): (6, None)}, generation=2, member_id=a.member_id) == {
            ("t", 0): REBALANCE_IN_PROGRESS
        }

    run(body)


# -- static membership (KIP-345) ---------------------------------------------------------------------------------------


def test_static_member_restart_keeps_the_generation_and_its_assignment() -> None:
    async def body(env: Env) -> None:
        a, b = await stable_group(env, 2, static=True)
        appends = env.store.appends
        restarted = Client(env.coordinator, "c0-restarted")
        rejoin = await restarted.join("g", instance_id=a.instance_id)  # empty member id: a restart
        assert rejoin.error_code == 0
        assert rejoin.generation_id == 1  # no rebalance
        assert rejoin.member_id != a.member_id and rejoin.member_id.startswith("instance-0-")
        assert rejoin.members == []
        assert rejoin.leader != rejoin.member_id  # never asked to run the assignor
        assert env.store.appends == appends + 1  # the new member id is stored
        synced = await restarted.sync("g", 1, rejoin.member_id, instance_id=a.instance_id)
        assert synced.assignment == a.assignment
        assert await b.client.heartbeat("g", 1, b.member_id, instance_id=b.instance_id) == 0
        # The old incarnation is fenced.
        assert await a.client.heartbeat("g", 1, a.member_id, instance_id=a.instance_id) == FENCED_INSTANCE_ID
        assert (await a.client.sync("g", 1, a.member_id, instance_id=a.instance_id)).error_code == FENCED_INSTANCE_ID
        snap = env.coordinator.describe("g")
        assert snap is not None and snap.state == "Stable" and snap.generation == 1
        assert {m.member_id for m in snap.members} == {rejoin.member_id, b.member_id}

    run(body)


def test_static_member_whose_protocol_choice_changes_triggers_a_rebalance() -> None:
    async def body(env: Env) -> None:
        both = [("range", subscription("t")), ("roundrobin", subscription("t"))]
        first = await Client(env.coordinator).join("g", instance_id="i", protocols=both)
        synced = await Client(env.coordinator).sync("g", 1, first.member_id, {}, instance_id="i")
        assert (first.protocol_name, synced.error_code) == ("range", 0)
        again = await Client(env.coordinator).join("g", instance_id="i", protocols=list(reversed(both)))
        assert (again.generation_id, again.protocol_name) == (2, "roundrobin")

    run(body)


def test_a_second_process_with_the_same_instance_id_fences_the_first() -> None:
    async def body(env: Env) -> None:
        first, second = Client(env.coordinator, "first"), Client(env.coordinator, "second")

        async def late() -> Struct:
            await trio.sleep(1)
            return await second.join("g", instance_id="i")

        fenced, winner = await gather(lambda: first.join("g", instance_id="i"), late)
        assert fenced.error_code == FENCED_INSTANCE_ID
        assert (winner.error_code, winner.generation_id) == (0, 1)
        assert [m.member_id for m in winner.members] == [winner.member_id]
        assert await first.heartbeat("g", 1, fenced.member_id, instance_id="i") == FENCED_INSTANCE_ID

    run(body)


def test_operator_removes_a_static_member_by_instance_id() -> None:
    async def body(env: Env) -> None:
        a, b = await stable_group(env, 2, static=True)
        left = await Client(env.coordinator, "admin").leave("g", [("", a.instance_id), ("", "unknown")])
        assert [m.error_code for m in left.members] == [0, UNKNOWN_MEMBER_ID]
        assert await b.client.heartbeat("g", 1, b.member_id, instance_id=b.instance_id) == REBALANCE_IN_PROGRESS

    run(body)


# -- versions and real request bytes -----------------------------------------------------------------------------------


def test_version_0_join_sync_heartbeat_leave() -> None:
    async def body(env: Env) -> None:
        c = Client(env.coordinator)
        joined = await c.join("g", version=0)
        assert joined.error_code == 0 and joined.generation_id == 1
        assert (await c.sync("g", 1, joined.member_id, {joined.member_id: b"a"}, version=0)).assignment == b"a"
        assert await c.heartbeat("g", 1, joined.member_id, version=0) == 0
        assert (await c.leave("g", [(joined.member_id, None)], version=0)).error_code == 0

    run(body)


def test_a_join_request_encoded_by_kafka_python() -> None:
    async def body(env: Env) -> None:
        req = JoinGroupRequest(
            group_id="kp",
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            member_id="",
            group_instance_id="kp-1",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription("t"))],
        )
        req.with_header(correlation_id=3, client_id="kafka-python")
        frame = req.encode(version=5, header=True, framed=True)[4:]
        header, offset = read_request_header(frame)
        body_ = await env.coordinator.join_group(decode_request(header, frame, offset), 5, "kafka-python", "/10.0.0.1")
        assert body_["error_code"] == 0
        assert body_["members"][0]["group_instance_id"] == "kp-1"
        snap = env.coordinator.describe("kp")
        assert snap is not None and snap.members[0].client_host == "/10.0.0.1"

    run(body)
