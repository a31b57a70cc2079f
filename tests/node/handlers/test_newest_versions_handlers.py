"""Handlers at Kafka 4.3's newest versions (Issue 20), over fakes; every answer goes through the wire codec.

FindCoordinator v4+ batches keys; OffsetFetch v8+ batches groups; CreateTopics v5+ describes what it made
(v7: its id); DeleteTopics v6 deletes by id;
DescribeCluster (KIP-700) is new.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
import trio

from node.coordination import BrokerRegistration, uuid_of
from node.handlers import served_ranges
from node.handlers.groups import GroupServices, handle_find_coordinator, handle_offset_fetch
from node.handlers.metadata import MetadataServices, handle_describe_cluster
from node.handlers.topics import TopicServices, handle_create_topics, handle_delete_topics
from node.protocol import ApiKey, ErrorCode, Struct, decode_response, encode_response, request_header
from node.security._acl import AclOperation, ResourceType
from tests.node.handlers.fakes import (
    ALICE,
    FakeCluster,
    RecordingGroups,
    acl,
    node_config,
    request,
    secured,
    topic_state,
)

pytestmark = pytest.mark.unit


def wire(api_key: ApiKey, version: int, body: dict[str, Any]) -> Struct:
    """``body`` encoded as the response of ``version`` and decoded again: what the client reads."""
    encoded = encode_response(request_header(api_key, version, 5, "unit-test"), body)
    data = b"".join(bytes(part) for part in encoded.parts if isinstance(part, bytes | bytearray))
    _, decoded = decode_response(api_key, version, data[4:])
    return decoded


def new_id() -> str:
    """A topic id as ZooKeeper holds it (base64url of 16 bytes, unpadded)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def call(handler: Any, services: Any, api_key: ApiKey, version: int, body: dict[str, Any], **kw: Any) -> Struct:
    return wire(api_key, version, trio.run(handler, services, request(api_key, version, body, **kw)))


# -- groups ------------------------------------------------------------------------------------------------------------


def test_find_coordinator_v4_answers_each_key_of_the_batch() -> None:
    cluster = FakeCluster()
    services = GroupServices(RecordingGroups(), cluster, cluster, node_config())
    for version in (4, 6):
        body = {"key_type": 0, "coordinator_keys": ["g1", "g2"]}
        answer = call(handle_find_coordinator, services, ApiKey.FIND_COORDINATOR, version, body)
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in answer.coordinators] == [
            ("g1", 0, 1, "127.0.0.1", 9092),
            ("g2", 0, 1, "127.0.0.1", 9092),
        ]
    share = {"key_type": 2, "coordinator_keys": ["g:topic:0"]}  # KIP-932 share groups: not served
    (refused,) = call(handle_find_coordinator, services, ApiKey.FIND_COORDINATOR, 6, share).coordinators
    assert (refused.key, refused.error_code, refused.node_id) == ("g:topic:0", ErrorCode.INVALID_REQUEST, -1)


def test_find_coordinator_v4_refuses_only_the_keys_the_principal_may_not_describe() -> None:
    cluster = FakeCluster()
    security, _ = secured(acl(ALICE, AclOperation.DESCRIBE, ResourceType.GROUP, "mine"))
    services = GroupServices(RecordingGroups(), cluster, cluster, node_config(), security)
    body = {"key_type": 0, "coordinator_keys": ["mine", "theirs"]}
    answer = call(handle_find_coordinator, services, ApiKey.FIND_COORDINATOR, 4, body, principal=ALICE)
    assert [(c.key, c.error_code) for c in answer.coordinators] == [
        ("mine", 0),
        ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]


def test_offset_fetch_v8_answers_each_group_as_its_own_request() -> None:
    cluster = FakeCluster()
    groups = RecordingGroups(offsets={("t", 0): 5})
    security, _ = secured(
        acl(ALICE, AclOperation.DESCRIBE, ResourceType.GROUP, "mine"),
        acl(ALICE, AclOperation.DESCRIBE, ResourceType.TOPIC, "t"),
    )
    services = GroupServices(groups, cluster, cluster, node_config(), security)
    body = {
        "groups": [
            {"group_id": "mine", "member_id": None, "member_epoch": -1, "topics": None},
            {"group_id": "theirs", "topics": [{"name": "t", "partition_indexes": [0]}]},
            {
                "group_id": "mine",
                "topics": [{"name": "t", "partition_indexes": [0]}, {"name": "u", "partition_indexes": [1]}],
            },
        ],
        "require_stable": True,
    }
    answer = call(handle_offset_fetch, services, ApiKey.OFFSET_FETCH, 9, body, principal=ALICE)
    found = [
        (
            g.group_id,
            g.error_code,
            [(t.name, p.partition_index, p.committed_offset, p.error_code) for t in g.topics for p in t.partitions],
        )
        for g in answer.groups
    ]
    assert found == [
        ("mine", 0, [("t", 0, 5, 0)]),
        ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED, []),
        ("mine", 0, [("t", 0, 5, 0), ("u", 1, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]),
    ]
    assert groups.calls == [("offset_fetch", None), ("offset_fetch", [("t", 0)])]


# -- topics ------------------------------------------------------------------------------------------------------------


def topic(name: str, partitions: int = 2, configs: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def test_create_topics_v5_describes_what_it_made() -> None:
    cluster = FakeCluster(topics={"old": topic_state("old", 1)})
    services = TopicServices(cluster, cluster, node_config())
    body = {
        "topics": [topic("t", 3, {"retention.ms": "1000"}), topic("old")],
        "timeout_ms": 1000,
        "validate_only": False,
    }
    made, old = call(handle_create_topics, services, ApiKey.CREATE_TOPICS, 5, body).topics
    assert (made.name, made.error_code, made.num_partitions, made.replication_factor) == ("t", 0, 3, 1)
    configs = {c.name: (c.value, c.config_source, c.read_only) for c in made.configs}
    assert configs["retention.ms"] == ("1000", 1, False)  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"][0] == "delete"
    assert made.topic_config_error_code == 0
    assert (old.error_code, old.num_partitions, old.replication_factor, old.configs) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        -1,
        -1,
        [],
    )


def test_create_topics_v7_reads_the_new_topics_id_back() -> None:
    cluster = FakeCluster()
    services = TopicServices(cluster, cluster, node_config())
    body = {"topics": [topic("t")], "timeout_ms": 1000, "validate_only": False}
    made_id = new_id()

    async def create_and_answer() -> dict[str, Any]:
        answer: dict[str, Any] = await handle_create_topics(services, request(ApiKey.CREATE_TOPICS, 7, body))
        return answer

    original_refresh = cluster.refresh

    async def refresh() -> None:  # ZooKeeper gives the topic its id
        await original_refresh()
        cluster.topics["t"].topic_id = made_id

    cluster.refresh = refresh  # type: ignore[method-assign]
    (made,) = wire(ApiKey.CREATE_TOPICS, 7, trio.run(create_and_answer)).topics
    assert made.topic_id == uuid_of(made_id) != uuid.UUID(int=0)
    validated = call(
        handle_create_topics, services, ApiKey.CREATE_TOPICS, 7, {**body, "topics": [topic("v")], "validate_only": True}
    )
    assert (validated.topics[0].error_code, validated.topics[0].topic_id) == (0, uuid.UUID(int=0))


def test_create_topics_v5_without_describe_configs_answers_the_topic_but_not_its_configs() -> None:
    cluster = FakeCluster()
    security, _ = secured(acl(ALICE, AclOperation.CREATE))
    services = TopicServices(cluster, cluster, node_config(), security)
    body = {"topics": [topic("t")], "timeout_ms": 1000, "validate_only": False}
    (made,) = call(handle_create_topics, services, ApiKey.CREATE_TOPICS, 5, body, principal=ALICE).topics
    assert (made.error_code, made.num_partitions) == (0, 2)
    assert (made.topic_config_error_code, made.configs) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])


def test_delete_topics_v6_by_name_or_by_id() -> None:
    cluster = FakeCluster(topics={name: topic_state(name) for name in ("a", "b", "secret")})
    for state in cluster.topics.values():
        state.topic_id = new_id()
    ids = {name: uuid_of(state.topic_id) for name, state in cluster.topics.items()}
    security, _ = secured(
        acl(ALICE, AclOperation.DELETE, ResourceType.TOPIC, "a"),
        acl(ALICE, AclOperation.DELETE, ResourceType.TOPIC, "b"),
    )
    services = TopicServices(cluster, cluster, node_config(), security)
    zero = uuid.UUID(int=0)
    body = {
        "topics": [
            {"name": "a", "topic_id": zero},
            {"name": None, "topic_id": ids["b"]},
            {"name": None, "topic_id": ids["secret"]},
            {"name": None, "topic_id": uuid.uuid4()},
            {"name": "a", "topic_id": ids["a"]},
            {"name": None, "topic_id": zero},
        ],
        "timeout_ms": 1000,
    }
    answer = call(handle_delete_topics, services, ApiKey.DELETE_TOPICS, 6, body, principal=ALICE)
    got = [(r.name, r.topic_id, r.error_code) for r in answer.responses]
    assert got[:3] == [
        ("a", ids["a"], 0),
        ("b", ids["b"], 0),
        (None, ids["secret"], ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # a refused id learns no name
    ]
    assert [code for _, _, code in got[3:]] == [
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert answer.responses[3].error_message is not None
    assert [c for c in cluster.calls if c[0] == "delete_topic"] == [("delete_topic", "a"), ("delete_topic", "b")]


# -- cluster -----------------------------------------------------------------------------------------------------------


def test_describe_cluster_names_the_cluster_its_controller_and_brokers_on_the_requests_listener() -> None:
    cluster = FakeCluster(
        brokers={
            1: BrokerRegistration(1, "127.0.0.1", 9092, rack="r1"),
            2: BrokerRegistration(2, "127.0.0.2", 9093),
        },
        controller=(2, 7),
    )
    services = MetadataServices(cluster, cluster, node_config(), "cluster-1", served_ranges())
    for version in (0, 1, 2):
        answer = call(handle_describe_cluster, services, ApiKey.DESCRIBE_CLUSTER, version, {})
        assert (answer.error_code, answer.cluster_id, answer.controller_id) == (0, "cluster-1", 2)
        assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in answer.brokers] == [
            (1, "127.0.0.1", 9092, "r1", False),
            (2, "127.0.0.2", 9093, None, False),
        ]
        assert answer.cluster_authorized_operations == -(2**31)  # not asked for
    controller = call(handle_describe_cluster, services, ApiKey.DESCRIBE_CLUSTER, 1, {"endpoint_type": 2})
    assert (controller.error_code, controller.brokers) == (ErrorCode.MISMATCHED_ENDPOINT_TYPE, [])
    assert controller.error_message is not None and "endpoint type 2" in controller.error_message


def test_describe_cluster_authorized_operations_need_describe_on_the_cluster() -> None:
    cluster = FakeCluster()
    security, _ = secured(acl(ALICE, AclOperation.DESCRIBE))
    services = MetadataServices(cluster, cluster, node_config(), "cluster-1", served_ranges(), security)
    body = {"include_cluster_authorized_operations": True}
    alice = call(handle_describe_cluster, services, ApiKey.DESCRIBE_CLUSTER, 2, body, principal=ALICE)
    assert alice.cluster_authorized_operations == 1 << AclOperation.DESCRIBE
    other = call(handle_describe_cluster, services, ApiKey.DESCRIBE_CLUSTER, 2, body, principal="User:bob")
    assert (other.error_code, other.cluster_authorized_operations) == (0, 0)
    assert [b.broker_id for b in other.brokers] == [1]  # the rest of the answer needs no permission
