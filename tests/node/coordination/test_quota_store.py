"""ZkQuotaStore against the session's real ZooKeeper: two stores on two sessions are two nodes.

Znodes "as Kafka writes them" are spelled out by hand from Kafka's documented layout
(``/config/users/<user>/clients/<client id>``, ``<default>``, ``/config/changes``), not made with
the code under test.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
import trio

from node.coordination import QuotaStoreError, ZkQuotaStore, ZkSecurityStore, ZkSession
from node.quotas import Quotas
from node.security._scram import ScramMechanism, make_credential
from tests.node.coordination.test_security_store import eventually
from tests.node.coordination.zk_helpers import Raw, expire_session, raw_session, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ALICE = (("user", "alice"),)
ALICE_C1 = (("user", "alice"), ("client-id", "c1"))
DEFAULT_CLIENT = (("client-id", None),)


@asynccontextmanager
async def nodes(connect: str, count: int = 2) -> AsyncIterator[list[tuple[ZkQuotaStore, list[Quotas]]]]:
    """``count`` stores on sessions of their own, each with the sets its ``on_change`` was handed."""
    async with AsyncExitStack() as stack:
        stores = []
        for _ in range(count):
            session = await stack.enter_async_context(ZkSession(connect))
            seen: list[Quotas] = []
            store = ZkQuotaStore(session, seen.append)
            await store.start()
            stack.callback(store.close)
            stores.append((store, seen))
        yield stores


async def notifications(raw: Raw) -> list[dict[str, object]]:
    return [json.loads(await raw.data(f"/config/changes/{n}")) for n in await raw.children("/config/changes")]


def test_quotas_reach_the_other_node_in_kafkas_layout(zk_connect: str) -> None:
    async def main() -> None:
        async with nodes(zk_connect) as [(a, a_seen), (b, b_seen)], raw_session(zk_connect) as raw:
            await a.alter(ALICE, {"producer_byte_rate": 1024.0, "request_percentage": 50.0})
            assert a.quotas()[ALICE] == {"producer_byte_rate": 1024.0, "request_percentage": 50.0}  # at once
            assert a_seen[-1] is a.quotas()
            await b.alter(ALICE_C1, {"consumer_byte_rate": 2048.0})
            await b.alter(DEFAULT_CLIENT, {"producer_byte_rate": 10.0})
            await eventually(lambda: len(a.quotas()) == 3, "a sees b's writes")
            await eventually(lambda: len(b.quotas()) == 3, "b sees a's write")
            assert b.quotas() == a.quotas()
            assert await raw.json("/config/users/alice") == {
                "version": 1,
                "config": {"producer_byte_rate": "1024", "request_percentage": "50.0"},
            }
            assert await raw.json("/config/users/alice/clients/c1") == {
                "version": 1,
                "config": {"consumer_byte_rate": "2048"},
            }
            assert await raw.json("/config/clients/<default>") == {"version": 1, "config": {"producer_byte_rate": "10"}}
            assert await notifications(raw) == [
                {"version": 2, "entity_path": "users/alice"},
                {"version": 2, "entity_path": "users/alice/clients/c1"},
                {"version": 2, "entity_path": "clients/<default>"},
            ]
            # Removing the last key leaves the entity without quotas (the znode stays, as Kafka's).
            await a.alter(DEFAULT_CLIENT, {"producer_byte_rate": None})
            await eventually(lambda: DEFAULT_CLIENT not in b.quotas(), "b forgets the default client's quota")
            assert await raw.json("/config/clients/<default>") == {"version": 1, "config": {}}
            assert b_seen and b_seen[-1] is b.quotas()

    run(main)


def test_quotas_written_by_kafka_are_loaded_and_followed_and_scram_kept(zk_connect: str) -> None:
    async def main() -> None:
        # A session of our own first: it creates the test's chroot, which the raw session expects.
        async with ZkSession(zk_connect), raw_session(zk_connect) as raw:
            await raw.create("/config/users/<default>", b'{"version":1,"config":{"consumer_byte_rate":"500"}}')
            await raw.create("/config/users/bob%40example.com", b'{"version":1,"config":{"producer_byte_rate":"7"}}')
            await raw.create("/config/clients/bad", b'{"version":1,"config":{"producer_byte_rate":"lots"}}')
            await raw.create("/config/clients/broken", b"not json")
            # Not Kafka's name for client id "a b" (that is a%20b): skipped, as Kafka would look elsewhere.
            await raw.create("/config/clients/a+b", b'{"version":1,"config":{"producer_byte_rate":"3"}}')
            async with nodes(zk_connect, 1) as [(a, _)]:
                assert a.quotas() == {
                    (("user", None),): {"consumer_byte_rate": 500.0},
                    (("user", "bob@example.com"),): {"producer_byte_rate": 7.0},
                }
                await raw.create("/config/clients/c9", b'{"version":1,"config":{"request_percentage":"12.5"}}')
                await raw.create("/config/changes/config_change_", b'{"version":2,"entity_path":"clients/c9"}')
                await eventually(lambda: (("client-id", "c9"),) in a.quotas(), "a follows Kafka's write")
                with pytest.raises(QuotaStoreError, match="cannot change the quotas of /config/clients/broken"):
                    await a.alter((("client-id", "broken"),), {"producer_byte_rate": 1.0})
                assert await raw.data("/config/clients/broken") == b"not json"  # left as it was

                # A user znode holds SCRAM credentials and quotas side by side: each writer keeps the other's.
                async with ZkSession(zk_connect) as session, ZkSecurityStore(session) as security:
                    credential = make_credential(ScramMechanism.SCRAM_SHA_256, "pw", salt=b"salt")
                    await security.set_scram("carol", "SCRAM-SHA-256", credential)
                    await a.alter((("user", "carol"),), {"producer_byte_rate": 99.0})
                    config = (await raw.json("/config/users/carol"))["config"]
                    assert config["producer_byte_rate"] == "99" and "SCRAM-SHA-256" in config
                    await eventually(
                        lambda: security.scram_credential("SCRAM-SHA-256", "carol") == credential, "credential kept"
                    )
                    # Carol's last credential goes while her client quotas live below her znode: it stays, empty.
                    await a.alter((("user", "carol"), ("client-id", "c1")), {"consumer_byte_rate": 5.0})
                    await a.alter((("user", "carol"),), {"producer_byte_rate": None})
                    assert await security.delete_scram("carol", "SCRAM-SHA-256")
                    assert await raw.json("/config/users/carol") == {"version": 1, "config": {}}
                    assert security.scram_credential("SCRAM-SHA-256", "carol") is None
                    assert a.quotas()[(("user", "carol"), ("client-id", "c1"))] == {"consumer_byte_rate": 5.0}

    run(main)


def test_the_copy_follows_changes_after_its_session_expired(zk_connect: str) -> None:
    async def main() -> None:
        async with nodes(zk_connect, 1) as [(a, _)], raw_session(zk_connect) as raw:
            old_session = a._session._client.client_id  # private: the test needs the session's password
            await trio.to_thread.run_sync(expire_session, zk_connect, old_session)
            await raw.create("/config/clients/late", b'{"version":1,"config":{"producer_byte_rate":"5"}}')
            await raw.create("/config/changes/config_change_", b'{"version":2,"entity_path":"clients/late"}')
            await eventually(lambda: (("client-id", "late"),) in a.quotas(), "a reads the change after the expiry")

    run(main)
