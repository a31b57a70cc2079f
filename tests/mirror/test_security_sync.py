"""A link copies ACLs and SCRAM credentials to the target, so clients are authenticated and
authorised there as on the source; it removes only what it made (``mirror._security_sync``).

Each site is one real node with an authorizer, a PLAINTEXT listener whose anonymous principal is
a super user (the link's and the test's own connections) and a SASL_PLAINTEXT listener where the
users log in. east secures its ZooKeeper (``zookeeper.set.acl``): its SCRAM credentials are
readable only with its digest, which the link's source names. ACLs and credentials are made and
read with confluent-kafka's admin client; users log in with confluent-kafka consumers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from mirror import LinkRunner, load_links
from mirror._security_sync import FileLedger
from tests.mirror.test_link import RunningLink
from tests.node.harness import NodeProcess, wait_for

pytestmark = pytest.mark.integration

AUTHORIZED = {
    "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "default.replication.factor": "1",
}
ANY = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)
Acl = tuple[str, str, str, str, str, str]  # resource type, name, pattern type, principal, operation, permission
CLUSTER_TYPE = "BROKER"  # confluent-kafka's name of Kafka's CLUSTER resource type


class Site:
    def __init__(self, node: NodeProcess, zookeeper: str) -> None:
        listeners = json.loads(node.ready_path.read_text())["listeners"]
        self.node = node
        self.zookeeper = zookeeper
        self.plaintext = str(listeners["PLAINTEXT"])
        self.sasl = str(listeners["CLIENTS"])
        self.admin = AdminClient({"bootstrap.servers": self.plaintext})

    def add_acls(self, *acls: Acl) -> None:
        for future in self.admin.create_acls([_binding(a) for a in acls]).values():
            future.result(30)

    def remove_acls(self, *acls: Acl) -> None:
        filters = [
            AclBindingFilter(
                ResourceType[t], n, ResourcePatternType[p], pr, "*", AclOperation[o], AclPermissionType[perm]
            )
            for t, n, p, pr, o, perm in acls
        ]
        for future in self.admin.delete_acls(filters).values():
            future.result(30)

    def acls(self) -> set[Acl]:
        return {
            (
                "CLUSTER" if b.restype.name == CLUSTER_TYPE else b.restype.name,
                b.name,
                b.resource_pattern_type.name,
                b.principal,
                b.operation.name,
                b.permission_type.name,
            )
            for b in self.admin.describe_acls(ANY).result(30)
        }

    def set_user(self, user: str, password: str, mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_256) -> None:
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        for future in self.admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)

    def remove_user(self, user: str, mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_256) -> None:
        deletion = UserScramCredentialDeletion(user, mechanism)
        for future in self.admin.alter_user_scram_credentials([deletion]).values():
            future.result(30)

    def users(self) -> set[str]:
        return set(self.admin.describe_user_scram_credentials().result(30))

    def reads_as(self, user: str, password: str, topic: str, group: str, count: int) -> list[bytes]:
        """``count`` records of ``topic`` read as ``user`` over SASL (SCRAM-SHA-256) in ``group``;
        KafkaException when the login or an authorisation fails."""
        consumer = Consumer({
            "bootstrap.servers": self.sasl,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": password,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": _raise,
        })  # fmt: skip
        try:
            consumer.subscribe([topic])
            values: list[bytes] = []
            for _ in range(60):
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    raise KafkaException(message.error())
                values.append(message.value())
                if len(values) == count:
                    return values
            raise AssertionError(f"{user} read {len(values)} of {count} records of {topic} in 30 s")
        finally:
            consumer.close()


def _raise(error: object) -> None:
    raise KafkaException(error)


def _binding(acl: Acl) -> AclBinding:
    rtype, name, ptype, principal, operation, permission = acl
    return AclBinding(
        ResourceType[CLUSTER_TYPE if rtype == "CLUSTER" else rtype],
        name,
        ResourcePatternType[ptype],
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType[permission],
    )


def start_site(tmp_path: Path, zookeeper: str, name: str, extra: dict[str, str]) -> Site:
    chroot = f"{zookeeper}/{name}-{uuid.uuid4().hex[:8]}"
    node = NodeProcess(1, tmp_path / name, chroot, {**AUTHORIZED, **extra})
    node.start()
    return Site(node, chroot)


@pytest.fixture
def sites(tmp_path: Path, zookeeper: str) -> Iterator[tuple[Site, Site, Path]]:
    digest = tmp_path / "east-zk.digest"
    digest.write_text("east-nodes:east-zk-secret\n")
    started: list[Site] = []
    try:
        east = start_site(
            tmp_path,
            zookeeper,
            "east",
            {"zookeeper.set.acl": "true", "strait.zookeeper.digest.file": str(digest)},
        )
        started.append(east)
        started.append(start_site(tmp_path, zookeeper, "west", {}))
        yield started[0], started[1], digest
    finally:
        for site in started:
            site.node.stop()


def link_toml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / f"links-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(f'[[link]]\nname = "east-to-west"\nsync_interval_s = 0.5\n{body}')
    return path


ORDERS_READ: Acl = ("TOPIC", "orders", "LITERAL", "User:alice", "READ", "ALLOW")
GROUP_READ: Acl = ("GROUP", "audit", "LITERAL", "User:alice", "READ", "ALLOW")
PREFIXED_WRITE: Acl = ("TOPIC", "ord", "PREFIXED", "User:carol", "WRITE", "ALLOW")
TXN_WRITE: Acl = ("TRANSACTIONAL_ID", "tx-1", "LITERAL", "User:alice", "WRITE", "ALLOW")
DENY_ALL: Acl = ("TOPIC", "*", "LITERAL", "User:mallory", "ALL", "DENY")
NOT_MIRRORED: Acl = ("TOPIC", "private", "LITERAL", "User:bob", "READ", "ALLOW")
CLUSTER: Acl = ("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "CREATE", "ALLOW")
WEST_OWN: Acl = ("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "ALTER", "ALLOW")


def test_acls_and_scram_credentials_reach_the_target_and_revocations_follow(
    sites: tuple[Site, Site, Path], tmp_path: Path
) -> None:
    east, west, east_digest = sites
    east.admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    producer = Producer({"bootstrap.servers": east.plaintext, "acks": "all"})
    for i in range(20):
        producer.produce("orders", value=f"v{i}".encode())
    assert producer.flush(30) == 0

    east.add_acls(ORDERS_READ, GROUP_READ, PREFIXED_WRITE, TXN_WRITE, DENY_ALL, NOT_MIRRORED, CLUSTER)
    east.set_user("alice", "alice-secret")
    east.set_user("mirror", "east-mirror-secret")
    west.set_user("mirror", "west-mirror-secret")  # west's own login: never overwritten
    west.add_acls(WEST_OWN, GROUP_READ)  # west's own; GROUP_READ is on both sites

    copied = {ORDERS_READ, GROUP_READ, PREFIXED_WRITE, TXN_WRITE, DENY_ALL}
    (link,) = load_links(
        link_toml(
            tmp_path,
            f'topics = {{ exclude = ["private"] }}\nsync_users = true\n'
            f'source = {{ name = "east", bootstrap = "{east.plaintext}", zookeeper = "{east.zookeeper}", '
            f'zookeeper_digest_file = "{east_digest}" }}\n'
            f'target = {{ name = "west", bootstrap = "{west.plaintext}", zookeeper = "{west.zookeeper}" }}\n',
        )
    )
    with RunningLink(LinkRunner(link)) as running:
        wait_for("east's ACLs on west", lambda: west.acls() == copied | {WEST_OWN}, 30)
        wait_for("alice on west", lambda: "alice" in west.users(), 30)
        # The same password logs in on west; the copied ACLs let alice read the mirror there.
        wait_for("orders on west", lambda: len(west.reads_as("alice", "alice-secret", "orders", "audit", 20)) == 20, 60)
        with pytest.raises(KafkaException):
            west.reads_as("alice", "wrong-password", "orders", "audit", 1)

        security = running.status()["security_sync"]
        assert security["acls"]["owned"] == 4, security  # GROUP_READ was west's before the link
        assert security["users"]["owned"] == 1, security
        (conflict,) = security["users"]["conflicts"]
        assert conflict.startswith("mirror (SCRAM-SHA-256)"), conflict
        assert security["ledger"].endswith("/strait/mirror/east-to-west/security"), security

        # Revoked on east: gone from west, except what west had of its own.
        east.remove_acls(ORDERS_READ, GROUP_READ)
        east.remove_user("alice")
        wait_for(
            "the revocations on west",
            lambda: west.acls() == {GROUP_READ, PREFIXED_WRITE, TXN_WRITE, DENY_ALL, WEST_OWN},
            30,
        )
        wait_for("alice gone from west", lambda: "alice" not in west.users(), 30)
        with pytest.raises(KafkaException):
            west.reads_as("alice", "alice-secret", "orders", "audit", 1)

    # The ledger is in west's ZooKeeper: a revocation made while no mirror runs still follows.
    east.remove_acls(PREFIXED_WRITE)
    with RunningLink(LinkRunner(link)):
        wait_for("carol's ACL gone from west", lambda: PREFIXED_WRITE not in west.acls(), 30)
    assert west.acls() == {GROUP_READ, TXN_WRITE, DENY_ALL, WEST_OWN}
    assert "mirror" in west.users()


def test_nothing_is_removed_when_the_source_has_no_authorizer(tmp_path: Path, zookeeper: str) -> None:
    east_node = NodeProcess(1, tmp_path / "east", f"{zookeeper}/plain-{uuid.uuid4().hex[:8]}", {})
    west = start_site(tmp_path, zookeeper, "west", {})
    try:
        east_node.start()
        west.add_acls(ORDERS_READ, WEST_OWN)
        ledger = tmp_path / "security-east-to-west.json"
        # What an earlier run made: ORDERS_READ is the link's, yet east answers no ACLs at all.
        ledger.write_text(
            json.dumps(
                {
                    "version": 1,
                    "acls": [
                        {
                            "resource_type": "TOPIC",
                            "name": "orders",
                            "pattern_type": "LITERAL",
                            "principal": "User:alice",
                            "host": "*",
                            "operation": "READ",
                            "permission": "ALLOW",
                        }
                    ],
                    "users": [],
                }
            )
        )
        (link,) = load_links(
            link_toml(
                tmp_path,
                f'source = {{ name = "east", bootstrap = "{east_node.bootstrap}" }}\n'
                f'target = {{ name = "west", bootstrap = "{west.plaintext}" }}\n',
            )
        )
        with RunningLink(LinkRunner(link, security_ledger=FileLedger(ledger))) as running:
            wait_for("two security passes", lambda: running.status()["security_sync"]["acls"]["passes"] >= 2, 30)
            acls = running.status()["security_sync"]["acls"]
        assert "has no authorizer" in acls["note"], acls
        assert acls["owned"] == 1 and acls["deleted"] == 0, acls
        assert west.acls() == {ORDERS_READ, WEST_OWN}
    finally:
        east_node.stop()
        west.node.stop()
