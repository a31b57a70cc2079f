"""ZkSecurityStore against the session's real ZooKeeper: two stores on two sessions are two nodes.

Znodes written "as Kafka writes them" are spelled out here by hand from Kafka's documented
layout (``/config/users/<sanitized user>``, ``/kafka-acl...``), not made with the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio

from chaos.nemesis import partitioned
from node.coordination import ZkSecurityStore, ZkSession
from node.security._acl import (
    MATCH_ALL,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from node.security._scram import ScramCredential, ScramMechanism, make_credential
from node.security._store import SecurityStore, SecurityStoreError
from node.zkkit import wall_clock_ms
from tests.node.coordination.zk_helpers import Raw, behind_proxy, expire_session, next_hint, raw_session, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
ALICE = make_credential(ScramMechanism.SCRAM_SHA_256, "alice-secret", salt=b"alice-salt")
ALICE_512 = make_credential(ScramMechanism.SCRAM_SHA_512, "alice-secret", salt=b"alice-salt")
CLIENT = "10.0.0.7"
READ, WRITE, ALLOW = AclOperation.READ, AclOperation.WRITE, AclPermissionType.ALLOW
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def binding(
    resource: str,
    principal: str = "User:alice",
    operation: AclOperation = READ,
    pattern_type: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, resource, pattern_type), AccessControlEntry(principal, "*", operation, ALLOW)
    )


async def eventually(check: Callable[[], bool], what: str, within: float = 2.0) -> None:
    with trio.move_on_after(within):
        while not check():
            await trio.sleep(0.01)
        return
    raise AssertionError(f"not within {within} s: {what}")


@asynccontextmanager
async def nodes(connect: str, count: int = 2, **options: Any) -> AsyncIterator[list[ZkSecurityStore]]:
    """``count`` stores, each on its own session: the security stores of ``count`` nodes."""
    async with AsyncExitStack() as stack:
        stores = []
        for _ in range(count):
            session = await stack.enter_async_context(ZkSession(connect))
            stores.append(await stack.enter_async_context(ZkSecurityStore(session, **options)))
        yield stores


def as_protocol(store: ZkSecurityStore) -> SecurityStore:
    return store  # mypy checks that the class implements the protocol


async def notifications(raw: Raw, parent: str) -> list[bytes]:
    return [await raw.data(f"{parent}/{name}") for name in await raw.children(parent)]


def allows(
    store: ZkSecurityStore, principal: str, operation: AclOperation, resource: str, kind: ResourceType = TOPIC
) -> bool:
    return store.authorizer.authorize(principal, CLIENT, operation, kind, resource)


# -- SCRAM ------------------------------------------------------------------------------------


def test_credentials_reach_the_other_node_and_keep_other_config(zk_connect: str) -> None:
    async def main() -> None:
        async with nodes(zk_connect) as (a, b), raw_session(zk_connect) as raw:
            await raw.create("/config/users/alice", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
            await a.set_scram("alice", SHA256, ALICE)
            assert a.scram_credential(SHA256, "alice") == ALICE  # its own write, at once
            await eventually(lambda: b.scram_credential(SHA256, "alice") == ALICE, "b sees alice")
            await b.set_scram("alice", SHA512, ALICE_512)
            await eventually(lambda: a.scram_credential(SHA512, "alice") == ALICE_512, "a sees alice's 512")
            assert a.scram_users() == {"alice": {SHA256: 4096, SHA512: 4096}}
            config = (await raw.json("/config/users/alice"))["config"]
            assert config["producer_byte_rate"] == "1024" and config[SHA256].startswith("salt=YWxpY2Utc2FsdA==,")
            assert [json.loads(n) for n in await notifications(raw, "/config/changes")] == [
                {"version": 2, "entity_path": "users/alice"}
            ] * 2

            assert await a.delete_scram("alice", SHA256)
            assert not await a.delete_scram("alice", SHA256)  # none left
            await eventually(lambda: b.scram_credential(SHA256, "alice") is None, "b forgets alice's 256")
            assert await b.delete_scram("alice", SHA512)
            await eventually(lambda: a.scram_users() == {}, "a forgets alice")
            assert await raw.json("/config/users/alice") == {"version": 1, "config": {"producer_byte_rate": "1024"}}

            await a.set_scram("bob@example.com", SHA256, ALICE)  # sanitized as Kafka does
            assert await raw.exists("/config/users/bob%40example.com")
            await eventually(lambda: b.scram_credential(SHA256, "bob@example.com") == ALICE, "b sees bob")
            assert await b.delete_scram("bob@example.com", SHA256)
            assert not await raw.exists("/config/users/bob%40example.com")  # nothing left in it: gone
            await eventually(lambda: a.scram_credential(SHA256, "bob@example.com") is None, "a forgets bob")

            await a.set_scram("carol", SHA256, ALICE)
            await eventually(lambda: b.scram_credential(SHA256, "carol") == ALICE, "b sees carol")
            await trio.to_thread.run_sync(raw.client.delete, "/config/users/carol")  # deleted by another tool
            await eventually(lambda: "carol" not in a.scram_users() and "carol" not in b.scram_users(), "carol gone")

    run(main)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_credentials_written_by_kafka_are_read_and_malformed_users_skipped(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    # What kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=secret]' --entity-type users
    # --entity-name 'ann@corp' leaves in ZooKeeper, computed here by RFC 5802's definitions.
    salt = bytes(range(16))
    salted = hashlib.pbkdf2_hmac("sha256", b"secret", salt, 4096)
    stored_key = hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    kafka_text = f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations=4096"
    expected = ScramCredential(salt=salt, stored_key=stored_key, server_key=server_key, iterations=4096)
    good = json.dumps({"version": 1, "config": {"SCRAM-SHA-256": kafka_text}}).encode()

    async def main() -> None:
        async with ZkSession(zk_connect) as session, raw_session(zk_connect) as raw:
            await raw.create("/config/users/ann%40corp", good)
            await raw.create("/config/users/broken", b"{not json")
            half = {"SCRAM-SHA-256": kafka_text, "SCRAM-SHA-512": "salt=c2FsdA==,iterations=4096"}
            await raw.create("/config/users/half", json.dumps({"version": 1, "config": half}).encode())
            async with ZkSecurityStore(session) as store:
                assert store.scram_credential(SHA256, "ann@corp") == expected
                assert store.scram_users() == {"ann@corp": {SHA256: 4096}}  # neither broken nor half
                assert "/config/users/broken is malformed" in caplog.text
                assert "/config/users/half is malformed" in caplog.text
                assert "SCRAM-SHA-512: SCRAM credential lacks stored_key, server_key" in caplog.text
                assert kafka_text.split(",")[1] not in caplog.text  # keys are never logged

                await raw.set("/config/users/half", good)  # repaired
                await eventually(lambda: store.scram_credential(SHA256, "half") == expected, "half repaired")
                await raw.set("/config/users/ann%40corp", b'{"version":1,"config":{"SCRAM-SHA-256":"x"}}')
                await eventually(lambda: store.scram_credential(SHA256, "ann@corp") is None, "ann broken")
                await raw.create("/config/users/dan", good)  # a new user
                await eventually(lambda: store.scram_credential(SHA256, "dan") == expected, "dan appears")
                with pytest.raises(SecurityStoreError, match="/config/users/broken is malformed"):
                    await store.set_scram("broken", SHA512, ALICE_512)  # never overwritten blindly

    run(main)


# -- ACLs -------------------------------------------------------------------------------------


def test_acls_reach_the_other_node_and_are_removed_by_filter(zk_connect: str) -> None:
    orders_alice, orders_bob = binding("orders"), binding("orders", "User:bob", WRITE)
    app_group = binding("app-", pattern_type=PatternType.PREFIXED, resource_type=GROUP)

    async def main() -> None:
        async with nodes(zk_connect) as (a, b), raw_session(zk_connect) as raw:
            await a.add_acls([orders_alice, orders_bob, app_group])
            assert allows(a, "User:alice", READ, "orders")  # its own write, at once
            await eventually(lambda: allows(b, "User:alice", READ, "orders"), "b allows alice")
            await eventually(lambda: allows(b, "User:alice", READ, "app-1", GROUP), "b applies the prefix")
            assert not allows(b, "User:alice", WRITE, "orders")
            assert await raw.json("/kafka-acl/Topic/orders") == {
                "version": 1,
                "acls": [
                    {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
                    {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"},
                ],
            }
            assert (await raw.json("/kafka-acl-extended/prefixed/Group/app-"))["acls"][0]["principal"] == "User:alice"
            assert await notifications(raw, "/kafka-acl-changes") == [b"TOPIC:orders"]
            assert [json.loads(n) for n in await notifications(raw, "/kafka-acl-extended-changes")] == [
                {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}
            ]

            await b.add_acls([orders_alice])  # already stored: nothing written, no notification
            assert await notifications(raw, "/kafka-acl-changes") == [b"TOPIC:orders"]

            alices = AclBindingFilter(
                ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH), AccessControlEntryFilter("User:alice")
            )
            assert await b.remove_acls(alices) == [orders_alice]
            assert not allows(b, "User:alice", READ, "orders")
            await eventually(lambda: not allows(a, "User:alice", READ, "orders"), "a stops allowing alice")
            assert allows(a, "User:bob", WRITE, "orders")
            assert await b.remove_acls(alices) == []
            assert await a.remove_acls(MATCH_ALL) == [orders_bob, app_group]  # sorted: TOPIC (2) before GROUP (3)
            assert await raw.children("/kafka-acl/Topic") == []  # no ACL left: no znode
            assert await raw.children("/kafka-acl-extended/prefixed/Group") == []
            await eventually(lambda: len(b.authorizer) == 0, "b holds no ACL")

    run(main)


def test_acls_written_by_kafka_are_loaded_at_start_and_followed(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with ZkSession(zk_connect) as session, raw_session(zk_connect) as raw:
            entry = {"principal": "User:etl", "permissionType": "Allow", "operation": "Read", "host": "*"}
            deny = {"principal": "User:etl", "permissionType": "Deny", "operation": "Read", "host": "10.0.0.7"}
            await raw.create("/kafka-acl/Topic/orders", json.dumps({"version": 1, "acls": [entry]}).encode())
            await raw.create(
                "/kafka-acl-extended/prefixed/Topic/logs-", json.dumps({"acls": [entry], "version": 1}).encode()
            )
            await raw.create("/kafka-acl/Topic/bad", b'{"version":1,"acls":[{"principal":"User:x"}]}')
            async with ZkSecurityStore(session) as store:
                assert allows(store, "User:etl", READ, "orders")
                assert allows(store, "User:etl", READ, "logs-app")
                assert store.authorizer.patterns() == [
                    ResourcePattern(TOPIC, "logs-", PatternType.PREFIXED),
                    ResourcePattern(TOPIC, "orders", PatternType.LITERAL),
                ]
                assert "/kafka-acl/Topic/bad is malformed" in caplog.text

                # Kafka 2.0-2.4 wrote the Scala spelling of the resource type in notifications
                await raw.set("/kafka-acl/Topic/orders", json.dumps({"version": 1, "acls": [entry, deny]}).encode())
                await trio.to_thread.run_sync(
                    lambda: raw.client.create("/kafka-acl-changes/acl_changes_", b"Topic:orders", sequence=True)
                )
                await eventually(lambda: not allows(store, "User:etl", READ, "orders"), "the deny applies")

    run(main)


def test_concurrent_adds_to_one_pattern_keep_every_entry(zk_connect: str) -> None:
    async def main() -> None:
        async with nodes(zk_connect) as (a, b), raw_session(zk_connect) as raw:
            async with trio.open_nursery() as nursery:
                for i in range(12):
                    nursery.start_soon(a.add_acls, [binding("shared", f"User:a{i}")])
                    nursery.start_soon(b.add_acls, [binding("shared", f"User:b{i}")])
            assert len((await raw.json("/kafka-acl/Topic/shared"))["acls"]) == 24
            for store in (a, b):
                await eventually(lambda store=store: len(store.authorizer) == 24, "every entry applied")

    run(main)


def test_old_acl_notifications_are_deleted(zk_connect: str) -> None:
    sixteen_minutes_on = lambda: wall_clock_ms() + 16 * 60 * 1000  # noqa: E731

    async def main() -> None:
        async with nodes(zk_connect, count=1) as (a,), raw_session(zk_connect) as raw:
            await a.add_acls([binding("orders"), binding("app-", pattern_type=PatternType.PREFIXED)])
            assert len(await raw.children("/kafka-acl-changes")) == 1
            async with ZkSession(zk_connect, clock_ms=sixteen_minutes_on) as session, ZkSecurityStore(session) as late:
                assert await raw.children("/kafka-acl-changes") == []  # deleted at start, once read
                assert await raw.children("/kafka-acl-extended-changes") == []
                await a.add_acls([binding("later")])
                await eventually(lambda: allows(late, "User:alice", READ, "later"), "the late node applies it")
                with trio.fail_after(2):
                    while await raw.children("/kafka-acl-changes"):  # and deletes it once read
                        await trio.sleep(0.02)

    run(main)


# -- sessions and errors ----------------------------------------------------------------------


def test_the_store_recovers_after_session_expiry(zookeeper: str, zk_connect: str) -> None:
    async def main() -> None:
        async with (
            behind_proxy(zookeeper, zk_connect) as (zk, proxy),
            ZkSecurityStore(zk) as cut,
            nodes(zk_connect, count=1) as (other,),
            raw_session(zk_connect) as raw,
        ):
            await other.set_scram("erin", SHA256, ALICE)
            await eventually(lambda: cut.scram_credential(SHA256, "erin") == ALICE, "cut sees erin")
            old_session = zk._client.client_id  # private: the test needs the session's password
            async with partitioned(proxy, ["zookeeper"]):
                await trio.to_thread.run_sync(expire_session, zookeeper, old_session)
                await other.set_scram("frank", SHA256, ALICE)
                await other.delete_scram("erin", SHA256)
                await other.add_acls([binding("orders")])
                silent = json.dumps(
                    {
                        "version": 1,
                        "acls": [
                            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
                        ],
                    }
                )
                await raw.create("/kafka-acl/Topic/silent", silent.encode())  # with no notification
            await next_hint(zk.events(), "session")
            await eventually(lambda: cut.scram_users() == {"frank": {SHA256: 4096}}, "cut sees the users")
            await eventually(lambda: allows(cut, "User:alice", READ, "orders"), "cut applies the new ACL")
            await eventually(lambda: allows(cut, "User:alice", READ, "silent"), "cut reads every ACL again")
            await other.add_acls([binding("after")])  # the watches outlived the old session
            await eventually(lambda: allows(cut, "User:alice", READ, "after"), "cut follows changes again")

    run(main)


def test_invalid_input_and_zookeeper_failures(zk_connect: str) -> None:
    async def main() -> None:
        session = ZkSession(zk_connect)
        await session.start()
        store = ZkSecurityStore(session)
        await store.start()
        with pytest.raises(SecurityStoreError, match="started before"):
            await store.start()
        with pytest.raises(ValueError, match="unknown SCRAM mechanism 'SCRAM-MD5'"):
            await store.set_scram("alice", "SCRAM-MD5", ALICE)
        with pytest.raises(ValueError, match="may not be empty"):
            await store.delete_scram("", SHA256)
        with pytest.raises(ValueError, match="contains '/'"):
            await store.add_acls([binding("a/b")])
        with pytest.raises(ValueError, match="cannot be stored"):
            await store.add_acls([binding("x", pattern_type=PatternType.MATCH)])
        with pytest.raises(ValueError, match="unknown pattern filter"):
            await store.remove_acls(AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)))
        await session.close()
        with pytest.raises(SecurityStoreError, match="cannot add 1 ACLs"):
            await store.add_acls([binding("orders")])
        store.close()
        with pytest.raises(SecurityStoreError, match="closed; cannot set the SCRAM-SHA-256 credential of user 'a'"):
            await store.set_scram("a", SHA256, ALICE)
        with pytest.raises(SecurityStoreError, match="not started; cannot load"):
            await ZkSecurityStore(ZkSession(zk_connect)).start()

    run(main)
