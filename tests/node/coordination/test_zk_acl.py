"""ZooKeeper digest authentication and znode ACLs (``zookeeper.set.acl``, ``strait.zookeeper.digest.file``).

Unit: the digest file, the credential's repr, the config rules and the log filter. Integration,
against the session's real ZooKeeper: what ACL each kind of znode gets from a secured session,
what a client without the credential (or with a wrong one) may still do, that nothing changes
without ``zookeeper.set.acl``, and one real node serving with both keys set.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoAuthError  # type: ignore[import-untyped]
from kazoo.protocol.serialization import Auth  # type: ignore[import-untyped]
from kazoo.security import ACL, ANYONE_ID_UNSAFE, OPEN_ACL_UNSAFE, Permissions  # type: ignore[import-untyped]

from node.config import ConfigError, NodeConfig
from node.coordination import CoordinationError, PartitionState, ZkSecurityStore, ZkState
from node.ids import NodeId
from node.security._scram import ScramMechanism, make_credential
from node.zkkit import HIDDEN, ZkDigest, kazoo_client, read_digest_file, stop_quietly
from tests.node.coordination.zk_helpers import DEADLINE, reg, run
from tests.node.harness import NodeProcess

PASSWORD = "zk-s3cret:with-a-colon"
DIGEST = ZkDigest("strait", PASSWORD)
SECURE = [DIGEST.all_acl(), ACL(Permissions.READ, ANYONE_ID_UNSAFE)]  # the credential: all; the world: read
PRIVATE = [DIGEST.all_acl()]  # the credential only
ALICE = make_credential(ScramMechanism.SCRAM_SHA_256, "alice-secret", salt=b"alice-salt")
STATE = PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t-1"}

# Every kind of znode a node writes, with the ACL a secured session gives it ("" is the chroot).
PUBLIC_PATHS = (
    "",
    "/cluster/id",
    "/brokers/ids",
    "/brokers/ids/1",  # ephemeral
    "/brokers/topics/orders",
    "/brokers/topics/orders/partitions/0/state",
    "/config/topics/orders",
    "/config/changes",
    "/controller",  # ephemeral, created in a transaction
    "/controller_epoch",
    "/latest_producer_id_block",
    "/consumers",
    "/kafka-acl",
    "/strait/offline_replicas",
)
PRIVATE_PATHS = ("/config/users", "/config/users/alice", "/config/brokers")


def started(connect: str, digest: ZkDigest | None = None) -> Any:
    """A started kazoo client for the checks, anonymous or with ``digest`` (blocking)."""
    client = kazoo_client(connect, 10.0, digest=digest)
    client.start(timeout=DEADLINE)
    return client


def acls(client: Any, path: str) -> list[Any]:
    found, _ = client.get_acls(path or "/")
    return sorted(found)


async def secured_site(zk: ZkState, store: ZkSecurityStore) -> None:
    """Write one of each kind of znode: the cluster id, a registration, a topic with a config, the
    controller, producer ids, a SCRAM user."""
    await zk.cluster_id()
    await zk.register_broker(reg(1))
    await zk.create_topic("orders", {0: (NodeId(1),)}, {"retention.ms": "60000"}, {0: STATE})
    await zk.elect_controller(NodeId(1))
    await zk.claim_producer_id_block(NodeId(1), 1000)
    await store.set_scram("alice", "SCRAM-SHA-256", ALICE)


# -- unit: the credential, its file and the config keys ------------------------------------------


@pytest.mark.parametrize("text", [f"strait:{PASSWORD}", f"strait:{PASSWORD}\n", f"strait:{PASSWORD}\r\n"])
def test_the_digest_file_holds_one_line_user_password(tmp_path: Path, text: str) -> None:
    path = tmp_path / "zk.digest"
    path.write_text(text, newline="")
    assert read_digest_file(path) == DIGEST  # the password is everything after the first ':'


@pytest.mark.parametrize(
    "text", ["", "\n", "strait", f":{PASSWORD}", "strait:", f"strait:{PASSWORD}\nother:x", f"str ait:{PASSWORD}"]
)
def test_a_malformed_digest_file_is_refused_quoting_nothing_of_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "zk.digest"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"^expected one line user:password") as err:
        read_digest_file(path)
    assert "s3cret" not in str(err.value) and "strait" not in str(err.value)  # neither part of it


def test_the_password_is_in_no_repr_or_str() -> None:
    assert PASSWORD not in repr(DIGEST) and PASSWORD not in str(DIGEST)
    assert repr(DIGEST) == "ZkDigest(user='strait')"
    with pytest.raises(ValueError) as err:
        ZkDigest("a:b", PASSWORD)
    assert "a:b" not in str(err.value)


def test_the_digest_acl_is_zookeepers_sha1_of_user_and_password() -> None:
    # what ZooKeeper's own `java ... DigestAuthenticationProvider strait:zk-s3cret:with-a-colon` prints
    assert DIGEST.all_acl().id.id == "strait:5jkd0hVgzw0JUollZzIbiQsPbJ8="
    assert DIGEST.all_acl().perms == Permissions.ALL


def test_secured_znodes_need_a_credential() -> None:
    with pytest.raises(ValueError, match="digest"):
        kazoo_client("127.0.0.1:1", 1.0, secure_acl=True)
    with pytest.raises(ValueError, match=r"zookeeper\.set\.acl"):
        ZkState("127.0.0.1:1/x", set_acl=True)


def test_set_acl_without_a_digest_file_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        NodeConfig.from_properties(BASE | {"zookeeper.set.acl": "true"}, source="server.properties")
    assert (err.value.key, err.value.value) == ("zookeeper.set.acl", "true")
    assert "strait.zookeeper.digest.file" in str(err.value)


def test_the_digest_file_is_read_at_start_and_its_errors_name_the_key(tmp_path: Path) -> None:
    path = tmp_path / "zk.digest"
    config = NodeConfig.from_properties(
        BASE | {"zookeeper.set.acl": "true", "strait.zookeeper.digest.file": str(path)}, source="server.properties"
    )
    assert config.zookeeper_set_acl is True
    with pytest.raises(ConfigError, match="No such file") as missing:
        config.read_zookeeper_digest()
    assert (missing.value.key, missing.value.value) == ("strait.zookeeper.digest.file", str(path))
    path.write_text(f"strait {PASSWORD}\n")
    with pytest.raises(ConfigError, match="user:password") as malformed:
        config.read_zookeeper_digest()
    assert malformed.value.key == "strait.zookeeper.digest.file" and "s3cret" not in str(malformed.value)
    path.write_text(f"strait:{PASSWORD}\n")
    assert config.read_zookeeper_digest() == DIGEST
    assert NodeConfig.from_properties(BASE).read_zookeeper_digest() is None


def test_kazoos_log_of_the_auth_packet_hides_the_credential() -> None:
    kazoo_client("127.0.0.1:1", 1.0, digest=DIGEST)  # installs the filter
    record = logging.LogRecord(
        "kazoo.client", logging.DEBUG, __file__, 1, "Sending request(xid=%s): %s", (-4, Auth(0, "digest", "u:pw")), None
    )
    assert logging.getLogger("kazoo.client").filter(record)
    assert record.getMessage() == f"Sending request(xid=-4): Auth(auth_type=0, scheme='digest', auth='{HIDDEN}')"


# -- integration: real ZooKeeper ----------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_a_secured_session_gives_every_znode_kafkas_secure_acl(zk_connect: str) -> None:
    def check() -> None:
        owner = started(zk_connect, DIGEST)
        try:
            for path in PUBLIC_PATHS:
                assert acls(owner, path) == sorted(SECURE), path
            for path in PRIVATE_PATHS:
                assert acls(owner, path) == PRIVATE, path
            for child in owner.get_children("/config/changes"):  # sequential notifications
                assert acls(owner, f"/config/changes/{child}") == sorted(SECURE)
        finally:
            stop_quietly(owner)

    async def main() -> None:
        async with ZkState(zk_connect, digest=DIGEST, set_acl=True) as zk, ZkSecurityStore(zk) as store:
            await secured_site(zk, store)
            await trio.to_thread.run_sync(check)

    run(main)


@pytest.mark.integration
@pytest.mark.timeout(60)
@pytest.mark.parametrize("who", ["anonymous", "wrong password"])
def test_without_the_credential_a_client_reads_but_cannot_change_anything(zk_connect: str, who: str) -> None:
    digest = None if who == "anonymous" else ZkDigest("strait", "not-the-password")

    def check() -> None:
        other = started(zk_connect, digest)
        try:
            assert other.get("/brokers/ids/1")[0].startswith(b"{")
            assert other.get("/brokers/topics/orders")[0].startswith(b"{")
            assert other.get_children("/brokers/topics") == ["orders"]
            refused: list[tuple[str, Callable[[], object]]] = [
                ("create a topic", lambda: other.create("/brokers/topics/evil", b"{}")),
                ("change a topic", lambda: other.set("/brokers/topics/orders", b"{}")),
                ("change a partition state", lambda: other.set("/brokers/topics/orders/partitions/0/state", b"{}")),
                ("delete a partition state", lambda: other.delete("/brokers/topics/orders/partitions/0/state")),
                ("delete a registration", lambda: other.delete("/brokers/ids/1")),
                ("register a broker", lambda: other.create("/brokers/ids/2", b"{}", ephemeral=True)),
                ("take the controller", lambda: other.set("/controller", b"{}")),
                ("change an ACL", lambda: other.set_acls("/brokers/topics/orders", OPEN_ACL_UNSAFE)),
                ("read a SCRAM credential", lambda: other.get("/config/users/alice")),
                ("list the SCRAM users", lambda: other.get_children("/config/users")),
                ("add a SCRAM user", lambda: other.create("/config/users/mallory", b"{}")),
            ]
            for what, attempt in refused:
                with pytest.raises(NoAuthError):
                    attempt()
                    pytest.fail(f"{who} could {what}")
        finally:
            stop_quietly(other)

    async def main() -> None:
        async with ZkState(zk_connect, digest=DIGEST, set_acl=True) as zk, ZkSecurityStore(zk) as store:
            await secured_site(zk, store)
            await trio.to_thread.run_sync(check)
            # A node without the credential starts (it only reads) but cannot change the site's state.
            async with ZkState(zk_connect, digest=digest) as outsider:
                assert list(await outsider.brokers()) == [1]
                with pytest.raises(CoordinationError, match="create topic 'evil' failed: NoAuthError"):
                    await outsider.create_topic("evil", {0: (NodeId(1),)}, {})
            # Another node of the site (same credential) may change what the first one created.
            async with ZkState(zk_connect, digest=DIGEST, set_acl=True) as sibling:
                await sibling.set_topic_config("orders", {"retention.ms": "1000"})
                assert await zk.topic_config("orders") == {"retention.ms": "1000"}

    run(main)


@pytest.mark.integration
@pytest.mark.timeout(60)
@pytest.mark.parametrize("digest", [None, DIGEST], ids=["no credential", "credential only"])
def test_without_set_acl_every_znode_is_open_as_before(zk_connect: str, digest: ZkDigest | None) -> None:
    def check() -> None:
        anyone = started(zk_connect)
        try:
            for path in PUBLIC_PATHS + PRIVATE_PATHS:
                assert acls(anyone, path) == OPEN_ACL_UNSAFE, path
            anyone.set("/brokers/topics/orders", anyone.get("/brokers/topics/orders")[0])
        finally:
            stop_quietly(anyone)

    async def main() -> None:
        async with ZkState(zk_connect, digest=digest) as zk, ZkSecurityStore(zk) as store:
            await secured_site(zk, store)
            await trio.to_thread.run_sync(check)

    run(main)


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_the_password_is_not_logged_even_at_debug(zk_connect: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def main() -> None:
        async with ZkState(zk_connect, digest=DIGEST, set_acl=True) as zk:
            await zk.create_topic("orders", {0: (NodeId(1),)}, {})

    run(main)
    assert f"auth='{HIDDEN}'" in caplog.text  # kazoo did log the authentication packet
    assert PASSWORD not in caplog.text


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_node_with_set_acl_serves_and_its_znodes_are_protected(
    node_factory: Callable[..., NodeProcess], zk_connect: str, tmp_path: Path
) -> None:
    digest_file = tmp_path / "zk.digest"
    digest_file.write_text(f"strait:{PASSWORD}\n")
    node = node_factory(1, zookeeper_set_acl="true", strait_zookeeper_digest_file=str(digest_file))
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(300):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 10:
                break
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(10)]

    anyone, owner = started(zk_connect), started(zk_connect, DIGEST)
    try:
        for path in ("", "/brokers/ids/1", f"/brokers/topics/{topic}", f"/brokers/topics/{topic}/partitions/0/state"):
            assert acls(owner, path) == sorted(SECURE), path  # ZooKeeper shows the digest only to its holder
        assert acls(owner, "/config/users") == PRIVATE
        assert anyone.get("/brokers/ids/1")[0].startswith(b"{")
        with pytest.raises(NoAuthError):
            anyone.delete(f"/brokers/topics/{topic}/partitions/0/state")
        with pytest.raises(NoAuthError):
            anyone.get_children("/config/users")
    finally:
        stop_quietly(anyone)
        stop_quietly(owner)
    assert PASSWORD not in node.log_path.read_text()
