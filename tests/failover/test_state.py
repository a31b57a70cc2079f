"""failover.state against a real ZooKeeper: the state machine's znode, journal, cuts and lock."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
import trio
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions  # type: ignore[import-untyped]

from failover.errors import FailoverError, LinkBusy, ZooKeeperSecured
from failover.state import MIRRORING, PROMOTED, ROOT, open_store
from node.coordination import ZkState
from node.zkkit import ZkDigest, kazoo_client, stop_quietly

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_a_new_link_is_mirroring_and_operations_journal_every_step(zk_connect: str) -> None:
    async def main() -> None:
        async with open_store(zk_connect, "east-to-west", "east", "west") as store:
            state = await store.state()
            assert (state.state, state.epoch, state.primary, state.standby) == (MIRRORING, 0, "east", "west")
            assert state.version == -1 and state.operation is None

            state = await store.begin(state, "promote", {"mode": "unplanned"})
            state = await store.record(state, "stop-link", {"partitions": 3})
            again = await store.state()
            assert again.operation is not None
            assert again.operation.done == ("stop-link",)
            assert again.operation.results["stop-link"] == {"partitions": 3}
            assert again.version == state.version

            # The same command resumes its operation; another one is refused, naming what to run.
            assert (await store.begin(again, "promote", {"mode": "unplanned"})).operation == again.operation
            with pytest.raises(FailoverError, match=r"a 'promote' .* is not finished: run `strait failover promote"):
                await store.begin(again, "reverse", {})

            done = await store.finish(again, state=PROMOTED, epoch=1, primary="west", standby="east")
            assert done.operation is None and done.state == PROMOTED
            journal = await store.journal()
            assert [e["step"] for e in journal] == ["begin", "stop-link", "end"]
            assert journal[0]["seq"] < journal[1]["seq"] < journal[2]["seq"]
            assert journal[2]["detail"]["primary"] == "west"
            assert all(e["by"] == store.by for e in journal)

    trio.run(main)


def test_a_write_from_a_stale_read_is_refused(zk_connect: str) -> None:
    async def main() -> None:
        async with open_store(zk_connect, "l", "east", "west") as store:
            first = await store.begin(await store.state(), "fence", {})
            await store.record(first, "one")
            with pytest.raises(FailoverError, match="changed while this command worked on it"):
                await store.record(first, "two")  # first's version is stale now
            with pytest.raises(FailoverError, match="changed while"):
                await store.write(replace(first, version=-1), "recreate")  # it exists: cannot create it again

    trio.run(main)


def test_cuts_round_trip_and_rewriting_the_same_cut_is_a_no_op(zk_connect: str) -> None:
    cut = {"orders": {0: {"mirrored_end": 10, "source_end": 12}, 1: {"mirrored_end": 0, "source_end": 0}}}

    async def main() -> None:
        async with open_store(zk_connect, "l", "east", "west") as store:
            assert await store.read_cut(1) == {}
            await store.write_cut(1, cut)
            await store.write_cut(1, cut)
            assert await store.read_cut(1) == cut

    trio.run(main)


def test_the_lock_is_exclusive_and_a_dead_local_holder_is_taken_over(zk_connect: str) -> None:
    async def main() -> None:
        async with open_store(zk_connect, "l", "east", "west") as one:
            await one.lock("strait failover promote l", wait_s=1)
            await one.lock("strait failover promote l", wait_s=1)  # re-entrant within the session
            async with open_store(zk_connect, "l", "east", "west") as two:
                busy = rf"held by `strait failover promote l` \(host .*, pid {os.getpid()}\)"
                with pytest.raises(LinkBusy, match=busy):
                    await two.lock("strait failover reverse l", wait_s=0.5)
                await one.unlock()
                await two.lock("strait failover reverse l", wait_s=1)

    trio.run(main)


def test_a_lock_left_by_a_killed_command_on_this_host_is_taken_at_once(zk_connect: str) -> None:
    # A child process takes the lock and is SIGKILLed: its session lives on in ZooKeeper for the
    # session timeout, but the next command sees the holder's pid is gone and takes the lock.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, trio\n"
            "from failover.state import open_store\n"
            "async def main():\n"
            f"    async with open_store({zk_connect!r}, 'l', 'east', 'west') as s:\n"
            "        await s.lock('strait failover promote l', wait_s=5)\n"
            "        print('locked', flush=True)\n"
            "        await trio.sleep(60)\n"
            "trio.run(main)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        child.kill()
        child.wait(10)

        async def main() -> None:
            async with open_store(zk_connect, "l", "east", "west") as store:
                with trio.fail_after(3):  # far less than the dead session's timeout
                    await store.lock("strait failover promote l", wait_s=3)

        trio.run(main)
    finally:
        child.kill()
        child.wait(10)
        assert child.stdout is not None
        child.stdout.close()


# -- a target site that secures its ZooKeeper (zookeeper.set.acl) ------------------------------------

PASSWORD = "dr-zk-s3cret"
DIGEST = ZkDigest("strait", PASSWORD)


def secured_site(zk_connect: str) -> None:
    """Lay out ``zk_connect`` as a secured site's node does: its znodes (``/strait`` among them)
    writable only with DIGEST, readable by anyone."""

    async def main() -> None:
        async with ZkState(zk_connect, digest=DIGEST, set_acl=True) as zk:
            await zk.cluster_id()

    trio.run(main)


def dr_znodes(zk_connect: str) -> dict[str, list[Any]]:
    """Every znode under /strait/dr with its ACL, read with the credential."""
    client = kazoo_client(zk_connect, 10.0, digest=DIGEST)
    client.start(timeout=15)
    try:
        found: dict[str, list[Any]] = {}

        def walk(path: str) -> None:
            found[path] = sorted(client.get_acls(path)[0])
            for child in client.get_children(path):
                walk(f"{path}/{child}")

        if client.exists(ROOT):
            walk(ROOT)
        return found
    finally:
        stop_quietly(client)


@pytest.mark.parametrize("digest", [None, ZkDigest("strait", "not-the-password")], ids=["anonymous", "wrong"])
def test_a_secured_target_refuses_the_store_without_its_credential_in_one_clear_error(
    zk_connect: str, digest: ZkDigest | None
) -> None:
    secured_site(zk_connect)

    async def main() -> None:
        async with open_store(zk_connect, "l", "east", "west", digest=digest) as store:
            assert (await store.state()).state == MIRRORING  # reading is allowed
            with pytest.raises(ZooKeeperSecured) as err:
                await store.lock("strait failover promote l", wait_s=1)
            assert err.value.exit_code == 2
            message = str(err.value)
            assert message.startswith(f"site west's ZooKeeper ({zk_connect}) ")
            assert "refused to lock link 'l'" in message and "sites.west.zookeeper_digest_file" in message
            assert "\n" not in message and PASSWORD not in message
            if digest is None:
                assert "is secured (its nodes set zookeeper.set.acl)" in message
            else:
                assert "it is not the one the site's nodes use" in message
                assert "not-the-password" not in message

    trio.run(main)
    assert dr_znodes(zk_connect) == {}  # nothing was written


def test_with_the_credential_the_store_works_and_creates_nothing_the_world_may_change(zk_connect: str) -> None:
    secured_site(zk_connect)

    async def main() -> dict[str, list[Any]]:
        async with open_store(zk_connect, "l", "east", "west", digest=DIGEST) as store:
            await store.lock("strait failover promote l", wait_s=1)
            state = await store.begin(await store.state(), "promote", {"mode": "unplanned"})
            await store.record(state, "stop-link", {"partitions": 1})
            await store.write_cut(1, {"orders": {0: {"mirrored_end": 3, "source_end": 4}}})
            assert [e["step"] for e in await store.journal()] == ["begin", "stop-link"]
            znodes = await trio.to_thread.run_sync(dr_znodes, zk_connect)  # with the lock, still held
            await store.unlock()
        return znodes

    znodes = trio.run(main)
    assert {"/strait/dr/l/lock", "/strait/dr/l/state", "/strait/dr/l/cuts/1/orders"} <= set(znodes)
    assert len([p for p in znodes if p.startswith("/strait/dr/l/journal/e-")]) == 2
    secured = sorted([DIGEST.all_acl(), ACL(Permissions.READ, ANYONE_ID_UNSAFE)])
    assert {path: acl for path, acl in znodes.items() if acl != secured} == {}
