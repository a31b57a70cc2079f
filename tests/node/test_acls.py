"""ACLs on a real two-node site: created with confluent-kafka's admin client, enforced on every node.

Both nodes run Kafka's ACL authorizer (``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``)
with ``super.users=User:admin``; clients authenticate with SASL PLAIN on a SASL_PLAINTEXT
listener (the PLAINTEXT listener carries replication). ACLs written through one node apply on
the other within seconds, without a restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.node.harness import NodeProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def sasl_address(node: NodeProcess) -> str:
    return str(json.loads(node.ready_path.read_text())["listeners"]["CLIENTS"])


def as_user(node: NodeProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": sasl_address(node),
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


@pytest.fixture
def secured(site: Callable[..., list[NodeProcess]]) -> list[NodeProcess]:
    return site(
        2,
        listeners="PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
        inter_broker_listener_name="PLAINTEXT",
        sasl_enabled_mechanisms="PLAIN",
        sasl_jaas_config=JAAS,
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:admin",
        default_replication_factor="2",
        offsets_topic_replication_factor="2",
    )


def produce_one(config: dict[str, Any], topic: str, value: bytes) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def topics_seen(config: dict[str, Any]) -> set[str]:
    admin = AdminClient(config)
    return set(admin.list_topics(timeout=10).topics)


def acl(principal: str, operation: AclOperation, resource: ResourceType, name: str,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:  # fmt: skip
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def test_acls_are_enforced_as_kafka_enforces_them_on_every_node(secured: list[NodeProcess]) -> None:
    first, second = secured
    admin = AdminClient(as_user(first, "admin"))  # a super user: allowed everything
    for topic in ("orders", "orders-eu", "payments"):
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    # Without ACLs nobody but the super user may do anything (allow.everyone.if.no.acl.found=false).
    assert produce_one(as_user(second, "alice"), "orders", b"x").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topics_seen(as_user(second, "alice")) == set()

    bindings = [
        acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED),
        acl("User:alice", AclOperation.READ, ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED),
        acl("User:alice", AclOperation.READ, ResourceType.GROUP, "billing"),
        acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders-eu", permission=AclPermissionType.DENY),
        acl("User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, "payments"),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)

    # Written through the first node, enforced by the second within seconds.
    alice = as_user(second, "alice")
    wait_for("alice may write orders on the second node", lambda: produce_one(alice, "orders", b"a1") is None, 20)
    # Deny wins over the prefixed allow.
    assert produce_one(alice, "orders-eu", b"no").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata hides what a principal may not DESCRIBE (READ/WRITE imply DESCRIBE).
    assert topics_seen(alice) == {"orders", "orders-eu"}
    assert topics_seen(as_user(second, "bob")) == {"payments"}
    assert produce_one(as_user(first, "bob"), "payments", b"b").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # A group needs READ on the group and the topic: billing yes, another group no.
    def consume(group: str) -> KafkaError | bytes | None:
        consumer = Consumer({**alice, "group.id": group, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["orders"])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                return msg.error() or msg.value()
            return None
        finally:
            consumer.close()

    assert consume("billing") == b"a1"
    refused = consume("audit")
    assert isinstance(refused, KafkaError) and refused.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    # Admin operations need their own permissions.
    alice_admin = AdminClient(alice)
    with pytest.raises(KafkaException) as err:
        alice_admin.create_topics([NewTopic("orders-new", 1, 2)])["orders-new"].result(30)
    assert err.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as err:
        alice_admin.delete_topics(["orders"])["orders"].result(30)
    assert err.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as err:
        alice_admin.create_acls([acl("User:alice", AclOperation.ALL, ResourceType.TOPIC, "*")])[
            acl("User:alice", AclOperation.ALL, ResourceType.TOPIC, "*")
        ].result(30)
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # DescribeAcls shows them; DeleteAcls removes exactly the matching ones, on every node.
    listed = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY, AclPermissionType.ANY
        )
    ).result(30)
    assert len(listed) == 4
    write_filter = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice", None,
                                    AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
    (deleted,) = admin.delete_acls([write_filter]).values()
    assert [b.name for b in deleted.result(30)] == ["orders"]
    accepted = 0  # tries made before the deletion reached that node are still allowed, and written

    def refused() -> bool:
        nonlocal accepted
        error = produce_one(alice, "orders", b"a2")
        accepted += error is None
        return error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    wait_for("alice's write permission gone on the second node", refused, 20)
    # Her READ remains: her records are still hers to read, and the refused one was never written.
    consumer = Consumer({**alice, "group.id": "billing", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("orders", 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, 1 + accepted)
