"""Offline replicas (``/strait/offline_replicas/<id>``, ephemeral) against the session's real ZooKeeper."""

from __future__ import annotations

import pytest

from node.coordination import BrokerIdInUse, ZkState
from tests.node.coordination.zk_helpers import behind_proxy, expire, next_hint, raw_session, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PATH = "/strait/offline_replicas/1"


def test_offline_replicas_are_published_replaced_and_cleared(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, raw_session(zk_connect) as raw:
            assert await raw.children("/strait/offline_replicas") == []  # created at start
            await a.set_offline_replicas(1, [("t", 3), ("t", 0), ("t", 3)])
            assert await raw.json(PATH) == {"version": 1, "partitions": [["t", 0], ["t", 3]]}
            assert await raw.owner(PATH) == a._client.client_id[0]  # ephemeral, in a's session
            assert (await b.snapshot()).offline_replicas == {1: frozenset({("t", 0), ("t", 3)})}

            await a.set_offline_replicas(1, [("u", 1)])  # replaces
            assert (await b.snapshot()).offline_replicas == {1: frozenset({("u", 1)})}
            with pytest.raises(BrokerIdInUse, match="broker id 1 is already registered by ZooKeeper session"):
                await b.set_offline_replicas(1, [("t", 0)])  # another session holds broker 1's znode
            await b.set_offline_replicas(2, [("t", 0)])
            assert (await a.snapshot()).offline_replicas == {1: frozenset({("u", 1)}), 2: frozenset({("t", 0)})}

            await a.set_offline_replicas(1, [])  # none left: the znode goes
            assert not await raw.exists(PATH)
            assert (await b.snapshot()).offline_replicas == {2: frozenset({("t", 0)})}
            with pytest.raises(ValueError, match="partition -1 is negative"):
                await a.set_offline_replicas(1, [("t", -1)])
            with pytest.raises(ValueError, match="broker id -2 is negative"):
                await a.set_offline_replicas(-2, [("t", 0)])

    run(main)


def test_offline_replicas_end_with_the_session(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as watcher, raw_session(zk_connect) as raw:
            events = watcher.events()
            async with ZkState(zk_connect) as broker:
                await broker.set_offline_replicas(1, [("t", 0)])
                await next_hint(events, "offline")  # created
                await broker.set_offline_replicas(1, [("t", 0), ("t", 1)])
                await next_hint(events, "offline")  # changed
                assert await raw.exists(PATH)
            assert not await raw.exists(PATH)  # closed: the ephemeral is gone
            await next_hint(events, "offline")
            assert (await watcher.snapshot()).offline_replicas == {}

    run(main)


def test_offline_replicas_are_restored_after_session_expiry(zookeeper: str, zk_connect: str) -> None:
    async def main() -> None:
        async with behind_proxy(zookeeper, zk_connect) as (zk, proxy), raw_session(zk_connect) as raw:
            await zk.set_offline_replicas(1, [("t", 0), ("t", 2)])
            old_session = await expire(zk, proxy, zookeeper)
            await next_hint(zk.events(), "session")  # sent after the ephemerals were restored
            new_session = zk._client.client_id[0]
            assert new_session != old_session
            assert await raw.owner(PATH) == new_session
            assert await raw.json(PATH) == {"version": 1, "partitions": [["t", 0], ["t", 2]]}
            assert (await zk.snapshot()).offline_replicas == {1: frozenset({("t", 0), ("t", 2)})}

            await zk.set_offline_replicas(1, [])  # cleared: not restored after the next expiry
            await expire(zk, proxy, zookeeper)
            await next_hint(zk.events(), "session")
            assert not await raw.exists(PATH)

    run(main)
