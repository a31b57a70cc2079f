"""DescribeProducers (61) over fakes: the producer state of real partitions, open transactions
with their first offset, the coordinator epoch of the last marker, Kafka's errors, READ on the topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from node.coordination import PartitionState
from node.handlers.producers import ProducersServices, handle_describe_producers
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation, ResourceType
from storage.records import BatchBuilder
from tests.node.handlers.fakes import (
    ALICE,
    BOB,
    BROKER_ID,
    NOW_MS,
    FakePartitions,
    acl,
    leader_partition,
    request,
    secured,
)

pytestmark = pytest.mark.unit


def batch(pid: int, *, seq: int = 0, epoch: int = 0, transactional: bool = False) -> memoryview:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    builder.append(NOW_MS, None, b"a")
    builder.append(NOW_MS, None, b"b")
    return memoryview(builder.build())


def describe(services: ProducersServices, topics: dict[str, list[int]], principal: str = ALICE) -> dict[str, Any]:
    body = {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
    answer = trio.run(
        lambda: handle_describe_producers(services, request(ApiKey.DESCRIBE_PRODUCERS, 0, body, principal=principal))
    )
    return {(t["name"], p["partition_index"]): p for t in answer["topics"] for p in t["partitions"]}


def test_kafkas_errors_per_partition_and_read_on_the_topic(tmp_path: Path) -> None:
    led = leader_partition(tmp_path, "orders")
    led.append_produced(batch(7, transactional=True))
    follower = leader_partition(tmp_path, "followed")
    follower.apply_state(PartitionState(2, 1, (2, BROKER_ID), 1, version=1), (2, BROKER_ID))
    security, _ = secured(acl(ALICE, AclOperation.READ, ResourceType.TOPIC, "orders"))
    services = ProducersServices(FakePartitions(led, follower), security)
    answer = describe(services, {"orders": [0, 5], "followed": [0], "ghost": [0]})
    assert {key: entry["error_code"] for key, entry in answer.items()} == {
        ("orders", 0): 0,
        ("orders", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("followed", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # alice may not read it
        ("ghost", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    refused = describe(services, {"orders": [0]}, principal=BOB)["orders", 0]
    assert refused["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED and refused["active_producers"] == []
    assert "User:bob" in refused["error_message"]
    anyone = describe(ProducersServices(FakePartitions(led, follower)), {"followed": [0]})["followed", 0]
    assert anyone["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
