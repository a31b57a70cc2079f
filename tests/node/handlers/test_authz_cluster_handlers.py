"""What Metadata, the group APIs, the topic and config admin APIs, ControlledShutdown and
InitProducerId ask of the authorizer: a principal allowed and one refused for each, with Kafka's
error code, and no side effect (no topic made, no group touched, no id used) when refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER, SecurityServices, served_ranges
from node.handlers.configs import (
    ConfigServices,
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from node.handlers.controller import ControllerServices, handle_controlled_shutdown
from node.handlers.groups import (
    GroupServices,
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
)
from node.handlers.metadata import MetadataServices, handle_metadata
from node.handlers.producer_id import ProducerIdServices, handle_init_producer_id
from node.handlers.topics import TopicServices, handle_create_partitions, handle_create_topics, handle_delete_topics
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation, PatternType, ResourceType
from tests.node.handlers.fakes import (
    ALICE,
    BOB,
    FakeCluster,
    RecordingGroups,
    RecordingTransactions,
    acl,
    node_config,
    request,
    secured,
    topic_state,
)

pytestmark = pytest.mark.unit

CAROL = "User:carol"
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


# -- Metadata ---------------------------------------------------------------------------------------------------------


def metadata_services(cluster: FakeCluster, security: SecurityServices, *, auto_create: bool) -> MetadataServices:
    config = node_config(**{"auto.create.topics.enable": str(auto_create).lower()})
    return MetadataServices(cluster, cluster, config, "cluster-1", served_ranges(), security)


def by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in body["topics"]}


def test_metadata_hides_topics_the_principal_may_not_describe_and_refuses_them_by_name() -> None:
    cluster = FakeCluster(topics={"orders": topic_state("orders", 2), "secret": topic_state("secret")})
    security, _ = secured(acl(ALICE, Op.DESCRIBE, TOPIC, "orders"))
    services = metadata_services(cluster, security, auto_create=False)

    everything = run(handle_metadata, services, request(ApiKey.METADATA, 8, {"topics": None}, principal=ALICE))
    assert list(by_name(everything)) == ["orders"]
    assert run(handle_metadata, services, request(ApiKey.METADATA, 0, {"topics": []}, principal=BOB))["topics"] == []

    body = {"topics": [{"name": "secret"}, {"name": "ghost"}, {"name": "orders"}], "allow_auto_topic_creation": False}
    named = by_name(run(handle_metadata, services, request(ApiKey.METADATA, 8, body, principal=ALICE)))
    # An existing and a missing topic get the same answer: existence is not disclosed.
    for refused in ("secret", "ghost"):
        assert (named[refused]["error_code"], named[refused]["partitions"]) == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            [],
        )
    assert named["orders"]["error_code"] == 0 and len(named["orders"]["partitions"]) == 2


def test_metadata_auto_creates_only_with_create_on_the_cluster_or_the_topic() -> None:
    security, _ = secured(
        acl(ALICE, Op.DESCRIBE, TOPIC, "new-", pattern=PatternType.PREFIXED),
        acl(ALICE, Op.CREATE, TOPIC, "new-a"),
        acl(CAROL, Op.DESCRIBE, TOPIC, "*"),
        acl(CAROL, Op.CREATE),
    )
    body = {"topics": [{"name": "new-a"}, {"name": "new-b"}], "allow_auto_topic_creation": True}

    cluster = FakeCluster()
    services = metadata_services(cluster, security, auto_create=True)
    answer = by_name(run(handle_metadata, services, request(ApiKey.METADATA, 8, body, principal=ALICE)))
    assert (answer["new-a"]["error_code"], answer["new-b"]["error_code"]) == (0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert sorted(cluster.topics) == ["new-a"]

    cluster = FakeCluster()
    services = metadata_services(cluster, security, auto_create=True)
    answer = by_name(run(handle_metadata, services, request(ApiKey.METADATA, 8, body, principal=CAROL)))
    assert [t["error_code"] for t in answer.values()] == [0, 0]
    assert sorted(cluster.topics) == ["new-a", "new-b"]


def test_metadata_answers_authorized_operations_when_asked() -> None:
    cluster = FakeCluster(topics={"orders": topic_state("orders")})
    body = {
        "topics": [{"name": "orders"}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    security, _ = secured(
        acl(ALICE, Op.READ, TOPIC, "orders"), acl(CAROL, Op.DESCRIBE), acl(CAROL, Op.READ, TOPIC, "*")
    )
    services = metadata_services(cluster, security, auto_create=False)
    alice = run(handle_metadata, services, request(ApiKey.METADATA, 8, body, principal=ALICE))
    assert alice["topics"][0]["topic_authorized_operations"] == bits(Op.READ, Op.DESCRIBE)
    assert alice["cluster_authorized_operations"] == 0  # no DESCRIBE on the cluster
    carol = run(handle_metadata, services, request(ApiKey.METADATA, 8, body, principal=CAROL))
    assert carol["cluster_authorized_operations"] == bits(Op.DESCRIBE)

    # Without an authorizer every supported operation is reported, as Kafka does.
    open_services = metadata_services(cluster, NO_AUTHORIZER, auto_create=False)
    anyone = run(handle_metadata, open_services, request(ApiKey.METADATA, 8, body))
    assert anyone["topics"][0]["topic_authorized_operations"] == bits(
        Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS
    )


# -- groups -----------------------------------------------------------------------------------------------------------


def group_services(
    security: SecurityServices, groups: RecordingGroups | None = None, cluster: FakeCluster | None = None
) -> GroupServices:
    cluster = cluster or FakeCluster()
    return GroupServices(groups or RecordingGroups(), cluster, cluster, node_config(), security)


def both_topics() -> FakeCluster:
    return FakeCluster(topics={"orders": topic_state("orders"), "secret": topic_state("secret")})


def test_find_coordinator_needs_describe_on_the_group_and_creates_nothing_when_refused() -> None:
    security, _ = secured(acl(ALICE, Op.DESCRIBE, GROUP, "g"))
    services = group_services(security)
    body = {"key": "g", "key_type": 0}
    refused = run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, body, principal=BOB))
    assert (refused["error_code"], refused["node_id"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, -1)
    assert refused["error_message"] == "User:bob is not authorized to DESCRIBE group 'g'"
    assert services.metadata.topics == {}  # __consumer_offsets was not made
    allowed = run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, body, principal=ALICE))
    assert (allowed["error_code"], allowed["node_id"]) == (0, 1)

    transaction = {"key": "tx", "key_type": 1}
    tx = run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, transaction, principal=ALICE))
    assert tx["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert list(services.metadata.topics) == ["__consumer_offsets"]  # __transaction_state was not made


MEMBERSHIP = [
    (
        handle_join_group,
        ApiKey.JOIN_GROUP,
        5,
        {
            "group_id": "g",
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [],
        },
    ),
    (
        handle_sync_group,
        ApiKey.SYNC_GROUP,
        3,
        {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None, "assignments": []},
    ),
    (
        handle_heartbeat,
        ApiKey.HEARTBEAT,
        3,
        {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None},
    ),
    (
        handle_leave_group,
        ApiKey.LEAVE_GROUP,
        3,
        {"group_id": "g", "members": [{"member_id": "m", "group_instance_id": None}]},
    ),
]


@pytest.mark.parametrize(("handler", "api", "version", "body"), MEMBERSHIP, ids=lambda v: getattr(v, "__name__", ""))
def test_group_membership_needs_read_on_the_group(handler: Any, api: int, version: int, body: dict[str, Any]) -> None:
    groups = RecordingGroups()
    # DESCRIBE is not READ: a principal that may see the group may not join it.
    security, _ = secured(acl(ALICE, Op.READ, GROUP, "g"), acl(BOB, Op.DESCRIBE, GROUP, "g"))
    services = group_services(security, groups)
    refused = run(handler, services, request(api, version, body, principal=BOB))
    assert refused["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert groups.calls == []
    assert run(handler, services, request(api, version, body, principal=ALICE))["error_code"] == 0
    assert [call for call, _ in groups.calls] == [handler.__name__.removeprefix("handle_")]


def commit_body() -> dict[str, Any]:
    def topic(name: str) -> dict[str, Any]:
        partition = {
            "partition_index": 0,
            "committed_offset": 5,
            "committed_leader_epoch": -1,
            "committed_metadata": None,
        }
        return {"name": name, "partitions": [partition]}

    return {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [topic("orders"), topic("secret")],
    }


def codes(body: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: p["error_code"] for t in body["topics"] for p in t["partitions"]}


def test_offset_commit_needs_read_on_the_group_and_on_each_topic() -> None:
    groups = RecordingGroups()
    security, _ = secured(
        acl(ALICE, Op.READ, GROUP, "g"), acl(ALICE, Op.READ, TOPIC, "orders"), acl(BOB, Op.READ, TOPIC, "*")
    )
    services = group_services(security, groups, both_topics())

    refused = run(handle_offset_commit, services, request(ApiKey.OFFSET_COMMIT, 7, commit_body(), principal=BOB))
    assert codes(refused) == {
        "orders": ErrorCode.GROUP_AUTHORIZATION_FAILED,
        "secret": ErrorCode.GROUP_AUTHORIZATION_FAILED,
    }
    assert groups.calls == []

    partly = run(handle_offset_commit, services, request(ApiKey.OFFSET_COMMIT, 7, commit_body(), principal=ALICE))
    assert codes(partly) == {"orders": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert groups.calls == [("offset_commit", [("orders", 0)])]


def test_an_offset_commit_with_no_topic_allowed_never_reaches_the_coordinator() -> None:
    groups = RecordingGroups()
    security, _ = secured(acl(ALICE, Op.READ, GROUP, "g"))
    answer = run(
        handle_offset_commit,
        group_services(security, groups),
        request(ApiKey.OFFSET_COMMIT, 7, commit_body(), principal=ALICE),
    )
    assert set(codes(answer).values()) == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert groups.calls == []  # a simple commit would have created the group


def test_an_offset_commit_for_a_partition_the_site_lacks_is_refused_and_not_stored() -> None:
    groups = RecordingGroups()
    body = commit_body()
    body["topics"].append(
        {"name": "orders", "partitions": [dict(body["topics"][0]["partitions"][0], partition_index=7)]}
    )
    cluster = FakeCluster(topics={"orders": topic_state("orders")})  # one partition; no "secret"
    answer = run(
        handle_offset_commit, group_services(NO_AUTHORIZER, groups, cluster), request(ApiKey.OFFSET_COMMIT, 7, body)
    )
    by_partition = {
        (t["name"], p["partition_index"]): p["error_code"] for t in answer["topics"] for p in t["partitions"]
    }
    assert by_partition == {
        ("orders", 0): ErrorCode.NONE,
        ("secret", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert groups.calls == [("offset_commit", [("orders", 0)])]

    nothing_known = FakeCluster()
    groups = RecordingGroups()
    answer = run(
        handle_offset_commit,
        group_services(NO_AUTHORIZER, groups, nothing_known),
        request(ApiKey.OFFSET_COMMIT, 7, commit_body()),
    )
    assert set(codes(answer).values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert groups.calls == []  # no group is made for a commit of nothing


def test_offset_fetch_needs_describe_on_the_group_and_shows_only_describable_topics() -> None:
    groups = RecordingGroups(offsets={("orders", 0): 5, ("secret", 0): 7})
    security, _ = secured(acl(ALICE, Op.DESCRIBE, GROUP, "g"), acl(ALICE, Op.DESCRIBE, TOPIC, "orders"))
    services = group_services(security, groups)
    named = {
        "group_id": "g",
        "topics": [{"name": "orders", "partition_indexes": [0]}, {"name": "secret", "partition_indexes": [0]}],
    }

    refused = run(handle_offset_fetch, services, request(ApiKey.OFFSET_FETCH, 5, named, principal=BOB))
    assert (refused["error_code"], refused["topics"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    old = run(handle_offset_fetch, services, request(ApiKey.OFFSET_FETCH, 1, named, principal=BOB))
    assert set(codes(old).values()) == {ErrorCode.GROUP_AUTHORIZATION_FAILED}  # v0-1: no top-level error field
    assert groups.calls == []

    answer = run(handle_offset_fetch, services, request(ApiKey.OFFSET_FETCH, 5, named, principal=ALICE))
    assert codes(answer) == {"orders": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    offsets = {t["name"]: t["partitions"][0]["committed_offset"] for t in answer["topics"]}
    assert offsets == {"orders": 5, "secret": -1}
    assert groups.calls == [("offset_fetch", [("orders", 0)])]

    everything = run(
        handle_offset_fetch,
        services,
        request(ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": None}, principal=ALICE),
    )
    assert [t["name"] for t in everything["topics"]] == ["orders"]


def test_describe_list_and_delete_groups_check_each_group() -> None:
    groups = RecordingGroups(groups=["g", "h", "x"])
    security, _ = secured(
        acl(ALICE, Op.DESCRIBE, GROUP, "g"), acl(ALICE, Op.DELETE, GROUP, "h"), acl(CAROL, Op.DESCRIBE)
    )
    services = group_services(security, groups)

    body = {"groups": ["g", "x"], "include_authorized_operations": True}
    described = run(handle_describe_groups, services, request(ApiKey.DESCRIBE_GROUPS, 4, body, principal=ALICE))[
        "groups"
    ]
    assert [(d["group_id"], d["error_code"]) for d in described] == [
        ("g", 0),
        ("x", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]
    assert described[0]["authorized_operations"] == bits(Op.DESCRIBE)
    assert groups.calls == [("describe_groups", ["g"])]

    def listed(principal: str) -> list[str]:
        answer = run(handle_list_groups, services, request(ApiKey.LIST_GROUPS, 2, {}, principal=principal))
        assert answer["error_code"] == 0  # never CLUSTER_AUTHORIZATION_FAILED
        return [g["group_id"] for g in answer["groups"]]

    assert (listed(ALICE), listed(CAROL), listed(BOB)) == (
        ["g", "h"],
        ["g", "h", "x"],
        [],
    )  # DELETE h implies DESCRIBE h

    groups.calls.clear()
    deleted = run(
        handle_delete_groups, services, request(ApiKey.DELETE_GROUPS, 1, {"groups_names": ["g", "h"]}, principal=ALICE)
    )
    assert [(r["group_id"], r["error_code"]) for r in deleted["results"]] == [
        ("g", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("h", 0),
    ]
    assert groups.calls == [("delete_groups", ["h"])]


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic() -> None:
    groups = RecordingGroups()
    security, _ = secured(
        acl(ALICE, Op.DELETE, GROUP, "g"), acl(ALICE, Op.READ, TOPIC, "orders"), acl(BOB, Op.READ, TOPIC, "*")
    )
    services = group_services(security, groups)
    body = {
        "group_id": "g",
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0}]},
            {"name": "secret", "partitions": [{"partition_index": 0}]},
        ],
    }
    refused = run(handle_offset_delete, services, request(ApiKey.OFFSET_DELETE, 0, body, principal=BOB))
    assert (refused["error_code"], refused["topics"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    assert groups.calls == []
    answer = run(handle_offset_delete, services, request(ApiKey.OFFSET_DELETE, 0, body, principal=ALICE))
    assert (answer["error_code"], codes(answer)) == (0, {"orders": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
    assert groups.calls == [("offset_delete", [("orders", 0)])]


# -- topics and configs -----------------------------------------------------------------------------------------------


def test_create_topics_needs_create_on_the_cluster_or_on_each_topic() -> None:
    security, _ = secured(acl(ALICE, Op.CREATE, TOPIC, "a"), acl(CAROL, Op.CREATE))
    topics = [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for name in ("a", "b")
    ]
    body = {"topics": topics, "timeout_ms": 1000, "validate_only": False}

    cluster = FakeCluster()
    answer = run(
        handle_create_topics,
        TopicServices(cluster, cluster, node_config(), security),
        request(ApiKey.CREATE_TOPICS, 4, body, principal=ALICE),
    )
    results = {t["name"]: (t["error_code"], t["error_message"]) for t in answer["topics"]}
    assert results == {
        "a": (0, None),
        "b": (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "User:alice is not authorized to CREATE topic 'b'"),
    }
    assert sorted(cluster.topics) == ["a"] and ("plan", (1, 1)) in cluster.calls

    cluster = FakeCluster()
    answer = run(
        handle_create_topics,
        TopicServices(cluster, cluster, node_config(), security),
        request(ApiKey.CREATE_TOPICS, 4, body, principal=CAROL),
    )
    assert [t["error_code"] for t in answer["topics"]] == [0, 0]


def test_delete_topics_needs_delete_and_create_partitions_alter_on_the_topic() -> None:
    cluster = FakeCluster(topics={"old": topic_state("old"), "kept": topic_state("kept")})
    security, _ = secured(acl(ALICE, Op.DELETE, TOPIC, "old"), acl(ALICE, Op.ALTER, TOPIC, "kept"))
    services = TopicServices(cluster, cluster, node_config(), security)
    body = {"topic_names": ["old", "kept"], "timeout_ms": 1000}
    deleted = run(handle_delete_topics, services, request(ApiKey.DELETE_TOPICS, 3, body, principal=ALICE))
    assert [(r["name"], r["error_code"]) for r in deleted["responses"]] == [
        ("old", 0),
        ("kept", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert cluster.calls == [("delete_topic", "old"), ("refresh", None)]

    cluster.calls.clear()
    grow = {
        "topics": [{"name": name, "count": 3, "assignments": None} for name in ("old", "kept")],
        "timeout_ms": 1000,
        "validate_only": False,
    }
    grown = run(handle_create_partitions, services, request(ApiKey.CREATE_PARTITIONS, 1, grow, principal=ALICE))
    assert [(r["name"], r["error_code"]) for r in grown["results"]] == [
        ("old", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("kept", 0),
    ]
    assert cluster.calls == [("add_partitions", ("kept", 3, None, False))]


def test_configs_need_describe_and_alter_configs_on_the_topic_or_the_cluster() -> None:
    cluster = FakeCluster(topics={"orders": topic_state("orders")})
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    security, _ = secured(acl(ALICE, Op.ALTER_CONFIGS, TOPIC, "orders"))
    services = ConfigServices(cluster, cluster, node_config(), security)
    describe = {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configuration_keys": ["retention.ms"]},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    described = run(handle_describe_configs, services, request(ApiKey.DESCRIBE_CONFIGS, 3, describe, principal=ALICE))
    topic, broker = described["results"]
    assert (topic["error_code"], [c["name"] for c in topic["configs"]]) == (0, ["retention.ms"])
    assert (broker["error_code"], broker["configs"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    assert broker["error_message"] == "User:alice is not authorized to DESCRIBE_CONFIGS the cluster"

    alter = {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configs": [{"name": "retention.ms", "value": "1000"}]}
        ],
        "validate_only": False,
    }
    refused = run(handle_alter_configs, services, request(ApiKey.ALTER_CONFIGS, 1, alter, principal=BOB))
    assert refused["responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert cluster.calls == []
    allowed = run(handle_alter_configs, services, request(ApiKey.ALTER_CONFIGS, 1, alter, principal=ALICE))
    assert allowed["responses"][0]["error_code"] == 0
    assert cluster.calls == [("set_topic_config", ("orders", {"retention.ms": "1000"}, False))]

    cluster.calls.clear()
    incremental = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "orders",
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "5"}],
            },
            {"resource_type": 4, "resource_name": "1", "configs": []},
        ],
        "validate_only": False,
    }
    answer = run(
        handle_incremental_alter_configs,
        services,
        request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, incremental, principal=BOB),
    )
    assert [r["error_code"] for r in answer["responses"]] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ]
    assert cluster.calls == []


# -- ControlledShutdown, InitProducerId -------------------------------------------------------------------------------


@dataclass
class ShutdownController:
    active: bool = True
    moved: list[int] = field(default_factory=list)

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        self.moved.append(broker_id)
        return []


def test_controlled_shutdown_needs_cluster_action() -> None:
    controller = ShutdownController()
    security, _ = secured(acl("User:broker", Op.CLUSTER_ACTION))
    services = ControllerServices(controller, FakeCluster(), security)
    body = {"broker_id": 1, "broker_epoch": -1}
    refused = run(handle_controlled_shutdown, services, request(ApiKey.CONTROLLED_SHUTDOWN, 2, body, principal=ALICE))
    assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and controller.moved == []
    allowed = run(
        handle_controlled_shutdown, services, request(ApiKey.CONTROLLED_SHUTDOWN, 2, body, principal="User:broker")
    )
    assert allowed["error_code"] == 0 and controller.moved == [1]


@dataclass
class CountingIds:
    handed_out: int = 0

    async def next_id(self) -> int:
        self.handed_out += 1
        return 1000 + self.handed_out


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic() -> None:
    ids = CountingIds()
    security, _ = secured(
        acl(ALICE, Op.WRITE, TOPIC, "orders-", pattern=PatternType.PREFIXED), acl(CAROL, Op.IDEMPOTENT_WRITE)
    )
    services = ProducerIdServices(ids, RecordingTransactions(), security)
    body = {"transactional_id": None, "transaction_timeout_ms": 1000}

    def init(principal: str) -> dict[str, Any]:
        return run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, 1, body, principal=principal))  # type: ignore[no-any-return]

    refused = init(BOB)
    assert (refused["error_code"], refused["producer_id"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1)
    assert ids.handed_out == 0
    assert (init(ALICE)["error_code"], init(CAROL)["error_code"]) == (0, 0)
    assert ids.handed_out == 2
