"""What Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch, MirrorAppend and
TruncatePartitions ask of the authorizer: for each, a principal allowed and one refused, with
Kafka's error code and nothing written or disclosed when refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER, SecurityServices
from node.handlers.epochs import EpochServices, handle_offset_for_leader_epoch
from node.handlers.fetch import FetchServices, handle_fetch
from node.handlers.mirror import MirrorServices, handle_mirror_append
from node.handlers.offsets import OffsetsServices, handle_delete_records, handle_list_offsets
from node.handlers.produce import ProduceServices, handle_produce
from node.handlers.truncate import TruncateServices, handle_truncate_partitions
from node.partition import Partition
from node.protocol import ApiKey, ErrorCode
from node.request import CloseConnection
from node.security._acl import AclOperation, PatternType, ResourceType
from node.truncation import Outcome
from storage.records import BatchBuilder, build_batch
from tests.node.handlers.fakes import (
    ALICE,
    BOB,
    NOW_MS,
    FakeCluster,
    FakeFollowers,
    FakeMetrics,
    FakePartitions,
    acl,
    leader_partition,
    request,
    secured,
)

pytestmark = pytest.mark.unit

BROKER = "User:broker"  # holds CLUSTER_ACTION, as a broker's principal does
READ, WRITE, DESCRIBE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DELETE
TOPIC = ResourceType.TOPIC


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def values(n: int) -> bytes:
    return build_batch([(NOW_MS + i, None, f"v{i}".encode()) for i in range(n)])


def seeded(tmp_path: Path, topic: str = "orders", n: int = 3) -> Partition:
    """A led partition holding ``n`` committed records."""
    partition = leader_partition(tmp_path, topic)
    partition.append_produced(values(n), allow_zstd=True)
    return partition


def only(body: dict[str, Any], topics_key: str, partitions_key: str) -> dict[str, Any]:
    (topic,) = body[topics_key]
    (partition,) = topic[partitions_key]
    assert isinstance(partition, dict)
    return partition


def produce_body(topic: str, *, acks: int = 1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": values(2)}]}],
    }


def test_produce_needs_write_on_the_topic_and_a_refused_batch_is_not_appended(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    security, _ = secured(acl(ALICE, WRITE, TOPIC, "orders"))
    metrics = FakeMetrics()
    services = ProduceServices(FakePartitions(partition), metrics, security)

    allowed = only(
        run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders"), principal=ALICE)),
        "responses",
        "partition_responses",
    )
    assert (allowed["error_code"], allowed["base_offset"]) == (0, 0)

    refused = only(
        run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders"), principal=BOB)),
        "responses",
        "partition_responses",
    )
    assert (refused["error_code"], refused["base_offset"]) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
    assert refused["error_message"] == "User:bob is not authorized to WRITE topic 'orders'"
    assert partition.log.log_end_offset == 2
    assert metrics.errors == [("Produce", "TOPIC_AUTHORIZATION_FAILED")]

    # A topic that does not exist answers the same: a refused client learns nothing of it.
    ghost = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("ghost"), principal=BOB))
    assert only(ghost, "responses", "partition_responses")["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    # acks=0 has no response to carry the error: the connection is closed, as after any failed acks=0 produce.
    with pytest.raises(CloseConnection):
        run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders", acks=0), principal=BOB))
    assert partition.log.log_end_offset == 2


def test_transactional_produce_needs_write_on_the_transactional_id_and_on_the_topic(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    security, _ = secured(
        acl(ALICE, WRITE, TOPIC, "orders"),
        acl(ALICE, WRITE, ResourceType.TRANSACTIONAL_ID, "tx"),
        acl(BOB, WRITE, ResourceType.TRANSACTIONAL_ID, "tx"),
    )
    services = ProduceServices(FakePartitions(partition), FakeMetrics(), security)
    builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    builder.append(NOW_MS, None, b"t")
    body = produce_body("orders") | {"transactional_id": "tx"}
    body["topic_data"][0]["partition_data"][0]["records"] = builder.build()

    def answer(principal: str, txn_id: str) -> dict[str, Any]:
        sent = body | {"transactional_id": txn_id}
        return only(
            run(handle_produce, services, request(ApiKey.PRODUCE, 8, sent, principal=principal)),
            "responses",
            "partition_responses",
        )

    other = answer(ALICE, "other")
    assert other["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert other["error_message"] == "User:alice is not authorized to WRITE transactional_id 'other'"
    assert answer(BOB, "tx")["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert partition.log.log_end_offset == 0
    assert (answer(ALICE, "tx")["error_code"], partition.log.log_end_offset) == (0, 1)


def fetch_body(*, replica_id: int, topic: str = "orders") -> dict[str, Any]:
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_a_consumer_fetch_needs_read_on_the_topic(tmp_path: Path) -> None:
    security, _ = secured(acl(ALICE, READ, TOPIC, "ord", pattern=PatternType.PREFIXED))
    services = FetchServices(FakePartitions(seeded(tmp_path)), FakeFollowers(), FakeMetrics(), security)
    allowed = only(
        run(handle_fetch, services, request(ApiKey.FETCH, 11, fetch_body(replica_id=-1), principal=ALICE)),
        "responses",
        "partitions",
    )
    assert allowed["error_code"] == 0 and allowed["records"]
    refused = only(
        run(handle_fetch, services, request(ApiKey.FETCH, 11, fetch_body(replica_id=-1), principal=BOB)),
        "responses",
        "partitions",
    )
    assert (refused["error_code"], refused["records"], refused["high_watermark"]) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        b"",
        -1,
    )


def test_a_follower_fetch_needs_cluster_action_and_a_refused_one_moves_no_follower_state(tmp_path: Path) -> None:
    partition = seeded(tmp_path)
    # READ on the topic is not enough for a replica: Kafka asks CLUSTER_ACTION of followers.
    security, _ = secured(acl(BROKER, AclOperation.CLUSTER_ACTION), acl(ALICE, READ, TOPIC, "orders"))
    followers = FakeFollowers()
    services = FetchServices(FakePartitions(partition), followers, FakeMetrics(), security)

    refused = run(handle_fetch, services, request(ApiKey.FETCH, 11, fetch_body(replica_id=2), principal=ALICE))
    assert only(refused, "responses", "partitions")["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert followers.fetched == []

    allowed = run(handle_fetch, services, request(ApiKey.FETCH, 11, fetch_body(replica_id=2), principal=BROKER))
    assert only(allowed, "responses", "partitions")["error_code"] == 0
    assert followers.fetched == [(partition.tp, 2, 0)]


def test_list_offsets_needs_describe_and_delete_records_needs_delete(tmp_path: Path) -> None:
    partition = seeded(tmp_path)
    # WRITE implies DESCRIBE (ListOffsets) but not DELETE (DeleteRecords).
    security, _ = secured(acl(ALICE, WRITE, TOPIC, "orders"), acl(BOB, DELETE, TOPIC, "orders"))
    services = OffsetsServices(FakePartitions(partition), security)
    list_body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
        ],
    }

    def list_offsets(principal: str) -> dict[str, Any]:
        body = run(handle_list_offsets, services, request(ApiKey.LIST_OFFSETS, 5, list_body, principal=principal))
        return only(body, "topics", "partitions")

    assert (list_offsets(ALICE)["error_code"], list_offsets(ALICE)["offset"]) == (0, 3)
    assert (list_offsets("User:carol")["error_code"], list_offsets("User:carol")["offset"]) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        -1,
    )

    delete_body = {
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 2}]}],
        "timeout_ms": 1000,
    }

    def delete_records(principal: str) -> dict[str, Any]:
        body = run(handle_delete_records, services, request(ApiKey.DELETE_RECORDS, 1, delete_body, principal=principal))
        return only(body, "topics", "partitions")

    assert delete_records(ALICE)["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert partition.log.log_start_offset == 0
    assert (delete_records(BOB)["error_code"], delete_records(BOB)["low_watermark"]) == (0, 2)


def test_offset_for_leader_epoch_takes_cluster_action_or_describe_on_the_topic(tmp_path: Path) -> None:
    security, _ = secured(acl(BROKER, AclOperation.CLUSTER_ACTION), acl(ALICE, DESCRIBE, TOPIC, "orders"))
    services = EpochServices(FakePartitions(seeded(tmp_path)), security)
    body = {
        "replica_id": -1,
        "topics": [
            {"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
        ],
    }

    def ask(principal: str) -> dict[str, Any]:
        answer = run(
            handle_offset_for_leader_epoch,
            services,
            request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body, principal=principal),
        )
        return only(answer, "topics", "partitions")

    assert (ask(BROKER)["error_code"], ask(BROKER)["end_offset"]) == (0, 3)
    assert (ask(ALICE)["error_code"], ask(ALICE)["end_offset"]) == (0, 3)
    assert (ask(BOB)["error_code"], ask(BOB)["end_offset"]) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)


def test_mirror_append_needs_cluster_action_and_write_on_the_topic_is_not_enough(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders", mirror_link="east")
    security, _ = secured(acl("User:link", AclOperation.CLUSTER_ACTION), acl(ALICE, WRITE, TOPIC, "orders"))
    services = MirrorServices(FakePartitions(partition), FakeMetrics(), security)
    body = {
        "link": "east",
        "timeout_ms": 1000,
        "topics": [
            {
                "name": "orders",
                "partitions": [{"index": 0, "expected_end_offset": 0, "start_offset": -1, "records": values(2)}],
            }
        ],
    }

    refused = only(
        run(handle_mirror_append, services, request(ApiKey.MIRROR_APPEND, 0, body, principal=ALICE)),
        "topics",
        "partitions",
    )
    assert (refused["error_code"], refused["log_end_offset"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1)
    assert refused["error_message"] == "User:alice is not authorized to CLUSTER_ACTION the cluster"
    assert partition.log.log_end_offset == 0

    allowed = only(
        run(handle_mirror_append, services, request(ApiKey.MIRROR_APPEND, 0, body, principal="User:link")),
        "topics",
        "partitions",
    )
    assert (allowed["error_code"], allowed["log_end_offset"]) == (0, 2)


@dataclass
class RecordingController:
    active: bool = True
    asked: list[dict[tuple[str, int], int]] = field(default_factory=list)

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        raise AssertionError("no handler under test asks for a controlled shutdown")

    async def truncate_partitions(self, cuts: dict[tuple[str, int], int], timeout: float) -> dict[Any, Outcome]:
        self.asked.append(dict(cuts))
        return {key: Outcome(0, leader_epoch=3, truncated=True) for key in cuts}


def truncate_body(*, validate_only: bool) -> dict[str, Any]:
    return {
        "timeout_ms": 1000,
        "validate_only": validate_only,
        "topics": [{"name": "orders", "partitions": [{"index": 0, "offset": 1}]}],
    }


def test_truncation_needs_alter_on_the_cluster_and_the_leader_check_cluster_action_or_alter(tmp_path: Path) -> None:
    security, _ = secured(acl(ALICE, AclOperation.ALTER), acl(BROKER, AclOperation.CLUSTER_ACTION))
    controller = RecordingController()
    cluster = FakeCluster()
    services = TruncateServices(FakePartitions(seeded(tmp_path)), cluster, controller, FakeMetrics(), security)

    def truncate(principal: str, *, validate_only: bool) -> dict[str, Any]:
        body = truncate_body(validate_only=validate_only)
        answer = run(
            handle_truncate_partitions, services, request(ApiKey.TRUNCATE_PARTITIONS, 0, body, principal=principal)
        )
        return only(answer, "topics", "partitions")

    # A broker's principal may run the leader's check, not record a truncation.
    refused = truncate(BROKER, validate_only=False)
    assert (refused["error_code"], refused["truncated"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, False)
    assert refused["error_message"] == "User:broker is not authorized to ALTER the cluster"
    assert controller.asked == []
    assert truncate(BROKER, validate_only=True)["log_end_offset"] == 3  # (not fenced: POLICY_VIOLATION)
    cluster.calls.clear()
    refused_check = truncate(BOB, validate_only=True)
    assert (refused_check["error_code"], refused_check["log_end_offset"]) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        -1,
    )
    assert cluster.calls == []

    assert truncate(ALICE, validate_only=True)["log_end_offset"] == 3
    allowed = truncate(ALICE, validate_only=False)
    assert (allowed["error_code"], allowed["truncated"]) == (0, True)
    assert controller.asked == [{("orders", 0): 1}]


def test_without_an_authorizer_every_principal_is_allowed_whatever_the_store_holds(tmp_path: Path) -> None:
    store_only, _ = secured()  # no ACL: an enabled authorizer would refuse everything
    disabled = SecurityServices(store_only.store, authorizer_enabled=False)
    for security in (disabled, NO_AUTHORIZER):
        partition = leader_partition(tmp_path / str(id(security)), "orders")
        services = ProduceServices(FakePartitions(partition), FakeMetrics(), security)
        answer = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders"), principal=BOB))
        assert only(answer, "responses", "partition_responses")["error_code"] == 0


def test_an_authorizer_without_a_store_refuses_to_be_built() -> None:
    with pytest.raises(ValueError, match="no security store is wired"):
        SecurityServices(None, authorizer_enabled=True)


def test_super_users_are_allowed_everything(tmp_path: Path) -> None:
    security, _ = secured(super_users=["User:admin"])
    partition = leader_partition(tmp_path, "orders")
    services = ProduceServices(FakePartitions(partition), FakeMetrics(), security)
    answer = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders"), principal="User:admin"))
    assert only(answer, "responses", "partition_responses")["error_code"] == 0
