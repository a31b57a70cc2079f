"""DescribeProducers (61) over real partitions: every producer id the leader keeps state for, with
its epoch, last sequence, last timestamp, coordinator epoch and open transaction; Kafka's errors
per partition and READ on the topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from node.handlers.producers import ProducersServices, handle_describe_producers
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation, ResourceType
from storage.records import BatchBuilder
from tests.node.handlers.fakes import ALICE, NOW_MS, FakePartitions, acl, leader_partition, request, secured

pytestmark = pytest.mark.unit


def batch(pid: int, seq: int, *, transactional: bool, records: int = 3) -> memoryview:
    builder = BatchBuilder(producer_id=pid, producer_epoch=2, base_sequence=seq, transactional=transactional)
    for i in range(records):
        builder.append(NOW_MS + i, None, b"v")
    return memoryview(builder.build())


def describe(partitions: FakePartitions, topics: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    services = ProducersServices(partitions, **kwargs)
    return trio.run(handle_describe_producers, services, request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": topics}))  # type: ignore[no-any-return]


def test_every_producer_of_a_led_partition_with_its_open_transaction(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    partition.append_produced(batch(7, 0, transactional=False))
    partition.append_produced(batch(7, 3, transactional=False))
    partition.append_produced(batch(9, 0, transactional=True))  # at offsets 6-8: its transaction stays open
    answer = describe(FakePartitions(partition), [{"name": "orders", "partition_indexes": [0, 5]}])
    (topic,) = answer["topics"]
    found, missing = topic["partitions"]
    assert (found["error_code"], missing["error_code"]) == (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    by_id = {p["producer_id"]: p for p in found["active_producers"]}
    assert by_id[7] == {
        "producer_id": 7,
        "producer_epoch": 2,
        "last_sequence": 5,
        "last_timestamp": NOW_MS + 2,
        "coordinator_epoch": -1,
        "current_txn_start_offset": -1,
    }
    assert (by_id[9]["last_sequence"], by_id[9]["current_txn_start_offset"]) == (2, 6)
    assert missing["active_producers"] == []


def test_describe_producers_needs_read_on_the_topic(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    partition.append_produced(batch(7, 0, transactional=False))
    security, _ = secured(acl(ALICE, AclOperation.DESCRIBE, ResourceType.TOPIC, "orders"))
    answer = describe(FakePartitions(partition), [{"name": "orders", "partition_indexes": [0]}], security=security)
    (part,) = answer["topics"][0]["partitions"]
    assert (part["error_code"], part["active_producers"]) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, [])
