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


def test_every_producer_with_its_open_transaction_and_last_marker(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    partition.append_produced(batch(5))  # idempotent: offsets 0-1
    partition.append_produced(batch(7, epoch=2, transactional=True))  # opens at 2
    partition.append_produced(batch(8, transactional=True))  # opens at 4
    partition.append_marker(8, 0, True, 3)  # 8's ends at 6, coordinator epoch 3
    partition.append_produced(batch(5, seq=2))
    answer = describe(ProducersServices(FakePartitions(partition)), {"orders": [0]})
    entry = answer["orders", 0]
    assert (entry["error_code"], entry["error_message"]) == (0, None)
    producers = {p["producer_id"]: p for p in entry["active_producers"]}
    assert producers[7] == {
        "producer_id": 7,
        "producer_epoch": 2,
        "last_sequence": 1,
        "last_timestamp": -1,
        "coordinator_epoch": -1,
        "current_txn_start_offset": 2,
    }
    assert (producers[8]["coordinator_epoch"], producers[8]["current_txn_start_offset"]) == (3, -1)
    assert (producers[5]["last_sequence"], producers[5]["current_txn_start_offset"]) == (3, -1)


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
