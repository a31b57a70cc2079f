"""Scale-out membership through a real ZooKeeper: members split a link's partitions, with no overlap.

Members run in one trio run (and one in a subprocess, to be killed with -9); each "copies" a
partition by entering ``claim`` and sleeping in the body, as ``LinkRunner`` does with a copier.
A checker task asserts at every step that no partition is held by two members at once.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]

from chaos.nemesis import kill_9
from mirror._config import MirrorError
from mirror._members import ZkMembership, check_member_id, owner_of
from node.proc import spawn
from tests.node.coordination.fake_kazoo import FakeClient, FakeZooKeeper

TOPIC = "orders"
PARTITIONS = 12
SESSION_TIMEOUT_S = 4.0  # ZooKeeper's minimum with the embedded server's 2 s tick
DEADLINE_S = 40.0
REPO = Path(__file__).resolve().parents[2]


# -- rendezvous hashing (unit) ---------------------------------------------------------------------


def test_rendezvous_hashing_spreads_partitions_and_moves_only_the_leavers() -> None:
    members = ("m1", "m2", "m3")
    before = {p: owner_of(members, TOPIC, p) for p in range(300)}
    counts = Counter(before.values())
    assert set(counts) == set(members) and min(counts.values()) >= 70, counts
    # The same answer whatever the order of the list.
    assert before == {p: owner_of(list(reversed(members)), TOPIC, p) for p in range(300)}
    # m2 leaves: only m2's partitions move, and they spread over the others.
    after = {p: owner_of(("m1", "m3"), TOPIC, p) for p in range(300)}
    moved = {p for p in before if before[p] != after[p]}
    assert moved == {p for p in before if before[p] == "m2"}
    assert owner_of((), TOPIC, 0) is None


def test_a_member_id_must_be_able_to_name_a_znode() -> None:
    assert check_member_id("mirror-1.east_a") == "mirror-1.east_a"
    for bad in ("", "a/b", "..", "x" * 129, "caf\u00e9"):
        with pytest.raises(MirrorError, match="member id"):
            check_member_id(bad)
    with pytest.raises(MirrorError, match="names no host"):
        ZkMembership("/chroot-only", "l", "m1")


def test_the_member_znode_carries_the_injected_clock_and_claims_never_take_anothers_znode() -> None:
    """``_register_sync`` and ``_take_sync`` over the in-memory kazoo stand-in (no ZooKeeper)."""
    server = FakeZooKeeper()
    mine, theirs = FakeClient(server), FakeClient(server)
    membership = ZkMembership("127.0.0.1:2181/site", "l", "m1", clock_ms=lambda: 1234)
    membership._client = mine
    path = "/site/strait/mirror/l/members/m1"
    assert membership._register_sync(mine.session) is None  # created
    assert json.loads(mine.get(path)[0])["registered_ms"] == 1234
    assert membership._register_sync(mine.session) is None  # ours already
    server.end_session(mine.session)
    theirs.create(path, b"{}", ephemeral=True)
    assert membership._register_sync(mine.session) == theirs.session  # held by another session

    owner = "/site/strait/mirror/l/owners/orders-0"
    theirs.create(owner, b"m2", ephemeral=True, makepath=True)
    assert membership._take_sync(owner, mine.session) == "m2"  # someone else's: wait for it
    assert membership._take_sync(owner, mine.session + 1) == ""  # not our session any more
    theirs.delete(owner)
    assert membership._take_sync(owner, mine.session) is True  # created
    assert mine.get(owner)[1].ephemeralOwner == mine.session
    assert membership._take_sync(owner, mine.session) is True  # ours already


# -- real ZooKeeper (integration) ------------------------------------------------------------------


class Member:
    """A membership plus one claiming task per partition, recording what it holds."""

    def __init__(self, connect: str, link: str, member_id: str) -> None:
        self.membership = ZkMembership(connect, link, member_id, session_timeout_s=SESSION_TIMEOUT_S, recheck_s=1.0)
        self.id = member_id
        self.held: set[int] = set()
        self.moved_away: list[int] = []  # bodies cancelled because the partition moved
        self.scope = trio.CancelScope()
        self.stopped = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with self.scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.membership.run)
                    for p in range(PARTITIONS):
                        nursery.start_soon(self._copy, p)
                    task_status.started()
        finally:
            self.held.clear()
            self.stopped.set()

    async def _copy(self, partition: int) -> None:
        while True:
            async with self.membership.claim(TOPIC, partition):
                self.held.add(partition)
                try:
                    await trio.sleep_forever()
                finally:
                    self.held.discard(partition)
            self.moved_away.append(partition)  # the claim ended the body: ownership moved
            await trio.lowlevel.checkpoint()

    async def stop(self) -> None:
        self.scope.cancel()
        with trio.fail_after(10):
            await self.stopped.wait()


async def wait_until(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    with trio.move_on_after(timeout):
        while not check():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def split(members: list[Member]) -> dict[int, list[str]]:
    holders: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for m in members:
        for p in m.held:
            holders[p].append(m.id)
    return holders


def settled(members: list[Member]) -> bool:
    """Every partition held by exactly the member rendezvous hashing names among ``members``."""
    ids = tuple(sorted(m.id for m in members))
    if not all(m.membership.members == ids for m in members):
        return False
    return all(holders == [owner_of(ids, TOPIC, p)] for p, holders in split(members).items())


@contextlib.asynccontextmanager
async def no_overlap(members: list[Member]) -> AsyncIterator[None]:
    """Check, as often as trio schedules it, that no partition has two holders."""
    overlaps: list[dict[int, list[str]]] = []

    async def check() -> None:
        while True:
            holders = split(members)
            doubled = {p: h for p, h in holders.items() if len(h) > 1}
            if doubled:
                overlaps.append(doubled)
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(check)
        yield
        nursery.cancel_scope.cancel()
    assert overlaps == [], f"partitions held by two members at once: {overlaps[:3]}"


def owner_znodes(zk: KazooClient, connect: str, link: str) -> dict[int, str]:
    chroot = "/" + connect.partition("/")[2]
    path = f"{chroot}/strait/mirror/{link}/owners"
    out = {}
    for child in zk.get_children(path):
        try:
            data, _ = zk.get(f"{path}/{child}")
        except NoNodeError:
            continue  # released between the two reads
        out[int(child.rsplit("-", 1)[1])] = data.decode()
    return out


async def wait_owner_znodes(zk: KazooClient, connect: str, link: str, expected: dict[int, str]) -> None:
    """Owner znodes are released just after a claim's body ends: wait for them to say ``expected``."""
    last: dict[int, str] = {}
    with trio.move_on_after(10):
        while (last := await trio.to_thread.run_sync(owner_znodes, zk, connect, link)) != expected:
            await trio.sleep(0.05)
        return
    raise AssertionError(f"owner znodes {last} after 10 s, expected {expected}")


@pytest.fixture
def zk(zookeeper: str) -> KazooClient:
    client = KazooClient(hosts=zookeeper)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.mark.integration
def test_members_split_the_partitions_and_take_over_from_one_that_leaves(zk_connect: str, zk: KazooClient) -> None:
    link = "east-to-west"

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            members = [Member(zk_connect, link, f"m{i}") for i in (1, 2, 3)]
            async with trio.open_nursery() as nursery, no_overlap(members):
                for m in members:
                    await nursery.start(m.run)
                await wait_until("three members splitting the partitions", lambda: settled(members))
                holders = split(members)
                assert all(len(h) == 1 for h in holders.values())
                assert all(m.held for m in members), {m.id: m.held for m in members}
                assert [m.membership.leader for m in members] == [True, False, False]
                await wait_owner_znodes(zk, zk_connect, link, {p: h[0] for p, h in holders.items()})

                # m1 (the leader) stops: its session closes, m2 and m3 take its partitions at once
                # (no session timeout to wait for), and m2 becomes the leader.
                leaving = members[0]
                theirs = set(leaving.held)
                await leaving.stop()
                rest = members[1:]
                await wait_until("m2 and m3 taking over", lambda: settled(rest), timeout=10)
                assert set().union(*(m.held for m in rest)) == set(range(PARTITIONS))
                assert theirs <= set().union(*(m.held for m in rest))
                assert [m.membership.leader for m in rest] == [True, False]
                expected = {p: owner_of(("m2", "m3"), TOPIC, p) for p in range(PARTITIONS)}
                await wait_owner_znodes(zk, zk_connect, link, expected)
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.integration
def test_a_claim_body_is_cancelled_when_its_partition_moves_to_a_new_member(zk_connect: str) -> None:
    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            a, b = Member(zk_connect, "l", "a"), Member(zk_connect, "l", "b")
            async with trio.open_nursery() as nursery, no_overlap([a, b]):
                await nursery.start(a.run)
                await wait_until("a holding everything", lambda: settled([a]))
                assert a.held == set(range(PARTITIONS)) and a.moved_away == []
                await nursery.start(b.run)
                await wait_until("a and b splitting the partitions", lambda: settled([a, b]))
                expected_b = {p for p in range(PARTITIONS) if owner_of(("a", "b"), TOPIC, p) == "b"}
                assert expected_b, "rendezvous hashing gave b nothing: pick other ids"
                assert b.held == expected_b
                # Exactly b's partitions were taken from a, each by cancelling a's body once.
                assert sorted(a.moved_away) == sorted(expected_b)
                assert b.moved_away == []
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.integration
def test_an_expired_session_cancels_the_bodies_and_the_member_comes_back(zookeeper: str, zk_connect: str) -> None:
    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            a, b = Member(zk_connect, "l", "a"), Member(zk_connect, "l", "b")
            async with trio.open_nursery() as nursery, no_overlap([a, b]):
                await nursery.start(a.run)
                await nursery.start(b.run)
                await wait_until("a and b splitting the partitions", lambda: settled([a, b]))
                held_before = set(a.held)
                old_session = a.membership.status()["session"]
                # Expire a's session from outside, as ZooKeeper does when a process stalls: a
                # second client joins the session and closes it.
                session_id, password = a.membership._client.client_id
                await trio.to_thread.run_sync(_close_session, zookeeper, session_id, password)
                await wait_until("a's bodies cancelled", lambda: set(a.moved_away) >= held_before)
                await wait_until(
                    "a registered again and the split restored",
                    lambda: a.membership.status()["session"] not in (None, old_session) and settled([a, b]),
                )
                assert a.held == held_before  # rendezvous hashing gives it the same partitions back
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.integration
def test_a_member_id_held_by_another_live_session_is_waited_out(zk_connect: str) -> None:
    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            first, second = Member(zk_connect, "l", "a"), Member(zk_connect, "l", "a")
            async with trio.open_nursery() as nursery, no_overlap([first, second]):
                await nursery.start(first.run)
                await wait_until("the first 'a' holding everything", lambda: settled([first]))
                nursery.start_soon(second.run)
                await wait_until("the second 'a' connected", lambda: second.membership.status()["connected"])
                await trio.sleep(1.0)  # ample time to register, were the id free
                assert second.membership.status()["session"] is None and second.held == set()
                await first.stop()
                await wait_until("the second 'a' taking over", lambda: settled([second]))
                nursery.cancel_scope.cancel()

    trio.run(main)


def _close_session(hosts: str, session_id: int, password: bytes) -> None:
    intruder = KazooClient(hosts=hosts, client_id=(session_id, password))
    intruder.start(timeout=10)
    intruder.stop()
    intruder.close()


_SUBPROCESS_MEMBER = """
import sys, trio
from mirror._members import ZkMembership

async def main():
    m = ZkMembership(sys.argv[1], sys.argv[2], sys.argv[3], session_timeout_s=float(sys.argv[4]), recheck_s=1.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        for p in range(int(sys.argv[5])):
            async def copy(p=p):
                while True:
                    async with m.claim("orders", p):
                        print("held", p, flush=True)
                        await trio.sleep_forever()
            nursery.start_soon(copy)

trio.run(main)
"""


@pytest.mark.integration
@pytest.mark.chaos  # kill -9 of a mirror process
def test_a_killed_member_is_replaced_once_its_session_expires(zk_connect: str, zk: KazooClient, tmp_path: Path) -> None:
    link = "l"
    member = spawn(
        [sys.executable, "-c", _SUBPROCESS_MEMBER, zk_connect, link, "b", str(SESSION_TIMEOUT_S), str(PARTITIONS)],
        tmp_path / "member-b.log",
        name="member b",
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
    )
    try:

        async def main() -> None:
            with trio.fail_after(DEADLINE_S):
                a = Member(zk_connect, link, "a")
                ids = ("a", "b")
                b_share = {p for p in range(PARTITIONS) if owner_of(ids, TOPIC, p) == "b"}
                assert b_share, "rendezvous hashing gave b nothing: pick other ids"
                async with trio.open_nursery() as nursery:
                    await nursery.start(a.run)
                    await wait_until(
                        "a and the subprocess b splitting the partitions",
                        lambda: a.membership.members == ids and a.held == set(range(PARTITIONS)) - b_share,
                    )
                    expected = {p: owner_of(ids, TOPIC, p) for p in range(PARTITIONS)}
                    await wait_owner_znodes(zk, zk_connect, link, expected)
                    kill_9(member)  # no goodbye: its session must expire
                    killed = trio.current_time()
                    await wait_until(
                        "a taking over b's partitions", lambda: a.held == set(range(PARTITIONS)), timeout=20
                    )
                    # Not before the session timeout: b's owner znodes outlive it until then.
                    assert trio.current_time() - killed >= SESSION_TIMEOUT_S * 0.9
                    await wait_owner_znodes(zk, zk_connect, link, dict.fromkeys(range(PARTITIONS), "a"))
                    nursery.cancel_scope.cancel()

        trio.run(main)
    finally:
        member.kill()
