"""Metadata, ApiVersions, topic admin, ControlledShutdown, InitProducerId and the group relay over fakes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from node.coordination import BrokerRegistration
from node.handlers import SERVED_APIS, NodeServices, dispatch_table, served_ranges
from node.handlers.controller import ControllerServices, handle_controlled_shutdown, handle_elect_leaders
from node.handlers.groups import GroupServices, handle_find_coordinator, handle_join_group, handle_list_groups
from node.handlers.metadata import MetadataServices, handle_api_versions, handle_metadata
from node.handlers.producer_id import ProducerIdServices, handle_init_producer_id
from node.handlers.topics import TopicServices, handle_create_topics, handle_delete_topics
from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import ApiKey, ErrorCode, Struct, schema
from node.security._acl import AclOperation
from node.txn_topic import TRANSACTION_TOPIC
from tests.node.handlers.fakes import (
    FakeCluster,
    FakeFollowers,
    FakeLogDirs,
    FakeMetrics,
    FakePartitions,
    FakeStates,
    RecordingTransactions,
    acl,
    node_config,
    request,
    secured,
    topic_state,
)

pytestmark = pytest.mark.unit


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def metadata_services(cluster: FakeCluster, **config: str) -> MetadataServices:
    return MetadataServices(cluster, cluster, node_config(**config), "cluster-1", served_ranges())


def test_metadata_answers_the_cluster_and_unknown_topics_without_auto_create() -> None:
    cluster = FakeCluster(topics={"orders": topic_state("orders", 2)})
    services = metadata_services(cluster, **{"auto.create.topics.enable": "false"})
    body = {"topics": [{"name": "orders"}, {"name": "missing"}], "allow_auto_topic_creation": True}
    result = run(handle_metadata, services, request(ApiKey.METADATA, 8, body))
    assert result["cluster_id"] == "cluster-1" and result["controller_id"] == 1
    assert [b["node_id"] for b in result["brokers"]] == [1]
    by_name = {t["name"]: t for t in result["topics"]}
    assert by_name["missing"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [p["leader_id"] for p in by_name["orders"]["partitions"]] == [1, 1]
    assert cluster.calls == []


def test_metadata_answers_are_kept_per_topic_until_the_topic_or_the_brokers_change() -> None:
    """The partition lists are built once per topic state: a new state (the re-read makes a new
    TopicState only when the topic changed), a broker gone or a deleted topic shows at once."""
    cluster = FakeCluster(
        topics={"a": topic_state("a", 2), "b": topic_state("b", 1)},
        brokers={
            1: BrokerRegistration(1, "127.0.0.1", 9092),
            2: BrokerRegistration(2, "127.0.0.1", 9093),
        },
    )
    services = metadata_services(cluster)

    def answer(version: int = 8) -> dict[str, Any]:
        result = run(handle_metadata, services, request(ApiKey.METADATA, version, {"topics": None}))
        return {t["name"]: t["partitions"] for t in result["topics"]}

    first = answer()
    again = answer()
    assert again["a"] is first["a"]  # nothing changed: the same list
    assert [p["leader_id"] for p in first["a"]] == [1, 1]

    moved = topic_state("a", 2, leader=2)
    cluster.topics["a"] = moved
    after = answer()
    assert [p["leader_id"] for p in after["a"]] == [2, 2] and after["b"] is first["b"]

    del cluster.brokers[2]  # its leaderships are offline now
    gone = answer()
    assert [(p["leader_id"], p["offline_replicas"]) for p in gone["a"]] == [(-1, [2]), (-1, [2])]
    assert [p["error_code"] for p in gone["a"]] == [ErrorCode.LEADER_NOT_AVAILABLE] * 2

    del cluster.topics["b"]
    assert sorted(answer()) == ["a"]
    assert answer(1)["a"] == gone["a"]  # another version: the same content


def test_metadata_auto_creates_with_the_brokers_defaults() -> None:
    cluster = FakeCluster()
    services = metadata_services(cluster, **{"num.partitions": "3"})
    body = {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": True}
    result = run(handle_metadata, services, request(ApiKey.METADATA, 8, body))
    assert result["topics"][0]["error_code"] == 0
    assert ("plan", (3, 1)) in cluster.calls
    assert len(result["topics"][0]["partitions"]) == 3


def test_a_leader_on_an_offline_replica_is_not_available() -> None:
    cluster = FakeCluster(topics={"orders": topic_state("orders")}, offline_replicas={1: frozenset({("orders", 0)})})
    result = run(handle_metadata, metadata_services(cluster), request(ApiKey.METADATA, 8, {"topics": None}))
    (partition,) = result["topics"][0]["partitions"]
    assert (partition["error_code"], partition["leader_id"], partition["offline_replicas"]) == (
        ErrorCode.LEADER_NOT_AVAILABLE,
        -1,
        [1],
    )


def test_api_versions_advertises_exactly_the_dispatch_table() -> None:
    result = run(handle_api_versions, metadata_services(FakeCluster()), request(ApiKey.API_VERSIONS, 3, {}))
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in result["api_keys"]}
    assert advertised == served_ranges()
    assert set(advertised) == set(SERVED_APIS)


def test_the_dispatch_table_serves_every_api_it_advertises_and_each_has_a_schema() -> None:
    cluster = FakeCluster()
    services = NodeServices(
        config=node_config(),
        cluster_id="c",
        partitions=FakePartitions(),
        metadata=cluster,
        admin=cluster,
        groups=FakeGroups(),
        transactions=RecordingTransactions(),
        controller=FakeController(active=False),
        followers=FakeFollowers(),
        producer_ids=FakeProducerIds(),
        metrics=FakeMetrics(),
        log_dirs=FakeLogDirs(),
        states=FakeStates(),
    )
    table = dispatch_table(services, served_ranges())
    assert sorted(table) == sorted(SERVED_APIS)
    for key in table:
        assert schema(key).api_key == key


def test_create_topics_refuses_duplicates_and_mixed_assignment_before_touching_zookeeper() -> None:
    cluster = FakeCluster()
    services = TopicServices(cluster, cluster, node_config())
    topic = {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    mixed = {
        "name": "m",
        "num_partitions": 2,
        "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [1]}],
        "configs": [],
    }
    body = {"topics": [topic, topic, mixed], "timeout_ms": 1000, "validate_only": False}
    result = run(handle_create_topics, services, request(ApiKey.CREATE_TOPICS, 4, body))
    codes = [(t["name"], t["error_code"]) for t in result["topics"]]
    assert codes == [
        ("t", ErrorCode.INVALID_REQUEST),
        ("t", ErrorCode.INVALID_REQUEST),
        ("m", ErrorCode.INVALID_REQUEST),
    ]
    assert "appears more than once" in result["topics"][0]["error_message"]
    assert cluster.calls == []


def test_create_and_delete_topics_reread_zookeeper_once_per_request() -> None:
    """Each re-read reads every topic: one per topic made a suite's churn of topics quadratic."""
    cluster = FakeCluster(topics={"old-1": topic_state("old-1", 1), "old-2": topic_state("old-2", 1)})
    services = TopicServices(cluster, cluster, node_config())
    topics = [
        {"name": f"t{i}", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for i in range(3)
    ]
    created = run(
        handle_create_topics,
        services,
        request(ApiKey.CREATE_TOPICS, 4, {"topics": topics, "timeout_ms": 1000, "validate_only": False}),
    )
    assert [t["error_code"] for t in created["topics"]] == [0, 0, 0]
    # Every topic is planned, then all are written at once and ZooKeeper is re-read once.
    assert cluster.calls[3:] == [("create_topics", (["t0", "t1", "t2"], False)), ("refresh", None)]
    assert [c[0] for c in cluster.calls[:3]] == ["plan"] * 3

    cluster.calls.clear()
    body = {"topic_names": ["old-1", "old-2"], "timeout_ms": 1000}
    deleted = run(handle_delete_topics, services, request(ApiKey.DELETE_TOPICS, 3, body))
    assert [r["error_code"] for r in deleted["responses"]] == [0, 0]
    assert cluster.calls == [("delete_topic", "old-1"), ("delete_topic", "old-2"), ("refresh", None)]

    # Nothing written (validate_only): nothing to re-read.
    cluster.calls.clear()
    run(
        handle_create_topics,
        services,
        request(ApiKey.CREATE_TOPICS, 4, {"topics": topics[:1], "timeout_ms": 1000, "validate_only": True}),
    )
    assert ("refresh", None) not in cluster.calls


def test_create_topics_answers_each_topic_in_request_order_when_some_are_refused() -> None:
    """Topics refused before the write (invalid) and by it (already exist) keep their place."""
    cluster = FakeCluster(topics={"old": topic_state("old", 1)})
    services = TopicServices(cluster, cluster, node_config())
    topics = [
        {"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
        for name, n in (("a", 1), ("old", 1), ("bad", 0), ("b", 2))
    ]
    body = {"topics": topics, "timeout_ms": 1000, "validate_only": False}
    result = run(handle_create_topics, services, request(ApiKey.CREATE_TOPICS, 4, body))
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [
        ("a", 0),
        ("old", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("bad", ErrorCode.INVALID_PARTITIONS),
        ("b", 0),
    ]
    assert ("create_topics", (["a", "old", "b"], False)) in cluster.calls
    assert sorted(cluster.topics) == ["a", "b", "old"]


def test_create_topics_with_invalid_counts_names_the_value() -> None:
    services = TopicServices(FakeCluster(), FakeCluster(), node_config())
    topic = {"name": "t", "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []}
    body = {"topics": [topic], "timeout_ms": 1000, "validate_only": False}
    (result,) = run(handle_create_topics, services, request(ApiKey.CREATE_TOPICS, 4, body))["topics"]
    assert (result["error_code"], result["error_message"]) == (
        ErrorCode.INVALID_PARTITIONS,
        "number of partitions 0 must be >= 1",
    )


@dataclass
class FakeController:
    active: bool
    moved: list[int] = field(default_factory=list)
    elections: list[tuple[list[tuple[str, int]] | None, bool]] = field(default_factory=list)

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        self.moved.append(broker_id)
        return [("orders", 2)]

    async def elect_leaders(
        self, partitions: list[tuple[str, int]] | None, *, unclean: bool
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        self.elections.append((partitions, unclean))
        return {("orders", 0): (ErrorCode.NONE, None), ("orders", 1): (ErrorCode.ELECTION_NOT_NEEDED, "led")}


def test_controlled_shutdown_needs_the_active_controller_and_a_live_broker() -> None:
    cluster = FakeCluster()

    def ask(controller: FakeController, broker_id: int) -> dict[str, Any]:
        services = ControllerServices(controller, cluster)
        return run(  # type: ignore[no-any-return]
            handle_controlled_shutdown,
            services,
            request(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": broker_id, "broker_epoch": -1}),
        )

    assert ask(FakeController(active=False), 1)["error_code"] == ErrorCode.NOT_CONTROLLER
    assert ask(FakeController(active=True), 9)["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE
    active = FakeController(active=True)
    result = ask(active, 1)
    assert result == {"error_code": 0, "remaining_partitions": [{"topic_name": "orders", "partition_index": 2}]}
    assert active.moved == [1]


@dataclass
class FakeProducerIds:
    next: int = 1000

    async def next_id(self) -> int:
        self.next += 1
        return self.next


def test_init_producer_id_hands_out_ids_and_asks_the_transaction_coordinator_for_transactional_ones() -> None:
    transactions = RecordingTransactions()
    services = ProducerIdServices(FakeProducerIds(), transactions)
    body = {"transactional_id": None, "transaction_timeout_ms": 1000}
    assert run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, 1, body))["producer_id"] == 1001
    assert transactions.calls == []
    tx = run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, 1, body | {"transactional_id": "t"}))
    assert (tx["error_code"], tx["producer_id"], tx["producer_epoch"]) == (0, 4000, 1)
    resumed = body | {"transactional_id": "t", "producer_id": 4000, "producer_epoch": 1}
    run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, 3, resumed))
    assert transactions.calls == [("init_producer_id", ("t", 1000, -1, -1)), ("init_producer_id", ("t", 1000, 4000, 1))]


@pytest.mark.parametrize(
    ("version", "expected"), [(3, ErrorCode.INVALID_PRODUCER_EPOCH), (4, ErrorCode.PRODUCER_FENCED)]
)
def test_init_producer_id_answers_producer_fenced_only_from_v4(version: int, expected: ErrorCode) -> None:
    services = ProducerIdServices(FakeProducerIds(), RecordingTransactions(error=ErrorCode.PRODUCER_FENCED))
    body = {"transactional_id": "t", "transaction_timeout_ms": 1000, "producer_id": 5, "producer_epoch": 0}
    tx = run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, version, body))
    assert (tx["error_code"], tx["producer_id"]) == (expected, -1)


@dataclass
class FakeGroups:
    joins: list[tuple[str, str]] = field(default_factory=list)

    def partition_for(self, group_id: str) -> int:
        return 0

    async def join_group(self, req: Struct, version: int, client_id: str, client_host: str) -> dict[str, Any]:
        self.joins.append((client_id, client_host))
        return {"error_code": 0}

    async def list_groups(self, req: Struct, version: int) -> dict[str, Any]:
        return {"error_code": 0, "groups": [], "throttle_time_ms": 0, "version": version}

    async def sync_group(self, req: Struct, version: int) -> dict[str, Any]:
        raise NotImplementedError

    heartbeat = leave_group = offset_commit = offset_fetch = describe_groups = txn_offset_commit = sync_group

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]:
        raise NotImplementedError

    async def offset_delete(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, list[tuple[str, int, int]]]:
        raise NotImplementedError


def group_services(cluster: FakeCluster, groups: FakeGroups) -> GroupServices:
    return GroupServices(groups, cluster, cluster, node_config())


def test_join_group_passes_the_connections_host_and_the_client_id() -> None:
    groups = FakeGroups()
    body = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [],
    }
    run(
        handle_join_group,
        group_services(FakeCluster(), groups),
        request(ApiKey.JOIN_GROUP, 5, body, peer="10.1.2.3:4567"),
    )
    assert groups.joins == [("unit-test", "/10.1.2.3")]


def test_the_relayed_group_apis_get_the_request_version() -> None:
    result = run(handle_list_groups, group_services(FakeCluster(), FakeGroups()), request(ApiKey.LIST_GROUPS, 2, {}))
    assert result["version"] == 2


def test_find_coordinator_creates_the_offsets_topic_once_and_names_its_leader() -> None:
    cluster = FakeCluster()
    services = group_services(cluster, FakeGroups())
    body = {"key": "g", "key_type": 0}
    result = run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, body))
    assert (result["error_code"], result["node_id"], result["port"]) == (0, 1, 9092)
    created = [args for name, args in cluster.calls if name == "create_topic"]
    assert [args[0] for args in created] == [OFFSETS_TOPIC]
    run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, body))
    assert len([c for c in cluster.calls if c[0] == "create_topic"]) == 1
    tx = run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, {"key": "t", "key_type": 1}))
    assert (tx["error_code"], tx["node_id"], tx["port"]) == (0, 1, 9092)
    created = [args for name, args in cluster.calls if name == "create_topic"]
    assert [args[0] for args in created] == [OFFSETS_TOPIC, TRANSACTION_TOPIC]
    _, assignment, configs, _ = created[1]
    assert len(assignment) == 50
    assert configs == {"cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "104857600"}
    unknown = run(handle_find_coordinator, services, request(ApiKey.FIND_COORDINATOR, 2, {"key": "t", "key_type": 2}))
    assert unknown["error_code"] == ErrorCode.INVALID_REQUEST


def elect(controller: FakeController, version: int, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    services = ControllerServices(controller, FakeCluster(), **kwargs)
    return run(handle_elect_leaders, services, request(ApiKey.ELECT_LEADERS, version, body))  # type: ignore[no-any-return]


NAMED = {"topic_partitions": [{"topic": "orders", "partitions": [0, 1]}], "timeout_ms": 1000}


def results(answer: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["topic"], r["partition_id"]): r["error_code"]
        for t in answer["replica_election_results"]
        for r in t["partition_result"]
    }


def test_elect_leaders_hands_the_controller_the_partitions_and_the_kind() -> None:
    controller = FakeController(active=True)
    answer = elect(controller, 2, NAMED | {"election_type": 1})
    assert controller.elections == [([("orders", 0), ("orders", 1)], True)]
    assert answer["error_code"] == 0
    assert results(answer) == {("orders", 0): 0, ("orders", 1): ErrorCode.ELECTION_NOT_NEEDED}
    elect(controller, 0, NAMED)  # v0 knows only preferred elections
    elect(controller, 1, {"topic_partitions": None, "timeout_ms": 1000, "election_type": 0})
    assert controller.elections[1:] == [([("orders", 0), ("orders", 1)], False), (None, False)]


def test_elect_leaders_refusals_answer_every_partition_named() -> None:
    controller = FakeController(active=False)
    assert set(results(elect(controller, 1, NAMED | {"election_type": 0})).values()) == {ErrorCode.NOT_CONTROLLER}
    bad = elect(FakeController(active=True), 1, NAMED | {"election_type": 7})
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST
    assert set(results(bad).values()) == {ErrorCode.INVALID_REQUEST}
    security, _ = secured(acl("User:ANONYMOUS", AclOperation.DESCRIBE))
    denied = elect(FakeController(active=True), 2, NAMED | {"election_type": 0}, security=security)
    assert denied["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert set(results(denied).values()) == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert controller.elections == []
