"""Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and MirrorAppend over fakes.

Each handler gets a real Partition over a real log and fakes for the rest of the node, so
these run in milliseconds and pin the error each bad request gets.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio

from node.coordination import PartitionState
from node.handlers.epochs import EpochServices, handle_offset_for_leader_epoch
from node.handlers.fetch import FetchServices, handle_fetch
from node.handlers.mirror import MirrorServices, handle_mirror_append
from node.handlers.offsets import OffsetsServices, handle_delete_records, handle_list_offsets
from node.handlers.produce import ProduceServices, handle_produce
from node.partition import Partition
from node.protocol import ApiKey, ErrorCode
from node.request import CloseConnection
from storage import FaultPoints, LogConfig, LogDirOfflineError, TopicPartition, create_log
from storage.records import BatchBuilder, build_batch, iter_batches
from tests.node.handlers.fakes import (
    BROKER_ID,
    NOW_MS,
    FakeFollowers,
    FakeMetrics,
    FakePartitions,
    fake_partition,
    leader_partition,
    policy,
    request,
)

pytestmark = pytest.mark.unit


def produce_body(topic: str, records: bytes, *, acks: int = 1, index: int = 0) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": records}]}],
    }


def values(n: int, tag: str = "v") -> bytes:
    return build_batch([(NOW_MS + i, None, f"{tag}{i}".encode()) for i in range(n)])


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def only_partition(body: dict[str, Any], topics_key: str, partitions_key: str) -> dict[str, Any]:
    (topic,) = body[topics_key]
    (partition,) = topic[partitions_key]
    assert isinstance(partition, dict)
    return partition


def fetch_request(topic: str, *, replica_id: int, offset: int, max_bytes: int) -> dict[str, Any]:
    """A Fetch v11 body for partition 0 of ``topic`` that answers at once."""
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_produce_appends_and_fetch_reads_it_back(tmp_path: Path) -> None:
    metrics = FakeMetrics()
    partitions = FakePartitions(leader_partition(tmp_path, "orders"))
    produce = ProduceServices(partitions, metrics)
    first = run(handle_produce, produce, request(ApiKey.PRODUCE, 8, produce_body("orders", values(3))))
    second = run(handle_produce, produce, request(ApiKey.PRODUCE, 8, produce_body("orders", values(2, "w"))))
    assert only_partition(first, "responses", "partition_responses")["base_offset"] == 0
    assert only_partition(second, "responses", "partition_responses")["base_offset"] == 3
    assert metrics.produces == 2 and metrics.errors == []

    fetch_body = fetch_request("orders", replica_id=-1, offset=3, max_bytes=1 << 20)
    followers = FakeFollowers()
    body = run(handle_fetch, FetchServices(partitions, followers, metrics), request(ApiKey.FETCH, 11, fetch_body))
    entry = only_partition(body, "responses", "partitions")
    assert entry["error_code"] == 0 and entry["high_watermark"] == 5
    data = b"".join(s.read() for s in entry["records"])
    assert [(h.base_offset, h.last_offset) for _, h in iter_batches(data)] == [(3, 4)]
    assert followers.fetched == []  # a consumer, not a follower


def test_a_follower_fetch_reports_its_log_end_to_the_leader(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    followers = FakeFollowers()
    body = fetch_request("orders", replica_id=2, offset=0, max_bytes=1024)
    services = FetchServices(FakePartitions(partition), followers, FakeMetrics())
    run(handle_fetch, services, request(ApiKey.FETCH, 11, body))
    assert followers.fetched == [(partition.tp, 2, 0)]


def test_produce_to_a_mirror_topic_is_a_policy_violation_naming_the_link(tmp_path: Path) -> None:
    metrics = FakeMetrics()
    partition = leader_partition(tmp_path, "orders", mirror_link="east-to-west")
    services = ProduceServices(FakePartitions(partition), metrics)
    body = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders", values(1))))
    entry = only_partition(body, "responses", "partition_responses")
    assert entry["error_code"] == ErrorCode.POLICY_VIOLATION
    assert entry["error_message"] == "topic 'orders' is a read-only mirror owned by link 'east-to-west'"
    assert entry["base_offset"] == -1
    assert metrics.errors == [("Produce", "POLICY_VIOLATION")]
    assert partition.log.log_end_offset == 0


def test_produce_to_an_unknown_partition_and_acks_zero_failure_closes_the_connection(tmp_path: Path) -> None:
    services = ProduceServices(FakePartitions(), FakeMetrics())
    body = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("nope", values(1))))
    assert (
        only_partition(body, "responses", "partition_responses")["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    with pytest.raises(CloseConnection, match="acks=0 produce failed"):
        run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("nope", values(1), acks=0)))


def test_produce_refuses_bad_acks(tmp_path: Path) -> None:
    services = ProduceServices(FakePartitions(leader_partition(tmp_path, "orders")), FakeMetrics())
    bad_acks = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders", values(1), acks=2)))
    entry = only_partition(bad_acks, "responses", "partition_responses")
    assert (entry["error_code"], entry["error_message"]) == (
        ErrorCode.INVALID_REQUIRED_ACKS,
        "acks=2 must be -1, 0 or 1",
    )


def txn_values(pid: int, seq: int, n: int = 2) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    for i in range(n):
        builder.append(NOW_MS, None, b"t%d-%d" % (pid, seq + i))
    return builder.build()


def test_transactional_batches_need_the_requests_transactional_id(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    services = ProduceServices(FakePartitions(partition), FakeMetrics())
    anonymous = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders", txn_values(7, 0))))
    entry = only_partition(anonymous, "responses", "partition_responses")
    assert entry["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert partition.log.log_end_offset == 0
    named = produce_body("orders", txn_values(7, 0)) | {"transactional_id": "tx"}
    entry = only_partition(
        run(handle_produce, services, request(ApiKey.PRODUCE, 8, named)), "responses", "partition_responses"
    )
    assert (entry["error_code"], entry["base_offset"]) == (0, 0)
    assert partition.producers.ongoing == {7: 0}
    # A transactional id with plain batches: nothing to check, as in Kafka.
    plain = produce_body("orders", values(1)) | {"transactional_id": "tx2"}
    entry = only_partition(
        run(handle_produce, services, request(ApiKey.PRODUCE, 8, plain)), "responses", "partition_responses"
    )
    assert (entry["error_code"], entry["base_offset"]) == (0, 2)


def test_read_committed_fetch_and_list_offsets_stop_at_the_lso_and_name_aborted_transactions(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    partition.append_produced(memoryview(values(2)))  # 0-1
    partition.append_produced(memoryview(txn_values(7, 0)))  # 2-3
    partition.append_marker(7, 0, False, 0)  # 4
    partition.append_produced(memoryview(txn_values(8, 0)))  # 5-6, open
    partition.append_produced(memoryview(values(1)))  # 7
    services = FetchServices(FakePartitions(partition), FakeFollowers(), FakeMetrics())

    def fetch(isolation: int, version: int = 11) -> dict[str, Any]:
        body = fetch_request("orders", replica_id=-1, offset=0, max_bytes=1 << 20) | {"isolation_level": isolation}
        return only_partition(
            run(handle_fetch, services, request(ApiKey.FETCH, version, body)), "responses", "partitions"
        )

    committed = fetch(1)
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (8, 5)
    data = b"".join(s.read() for s in committed["records"])
    assert [h.base_offset for _, h in iter_batches(data)] == [0, 2, 4]
    assert committed["aborted_transactions"] == [{"producer_id": 7, "first_offset": 2}]
    uncommitted = fetch(0)
    assert uncommitted["last_stable_offset"] == 5 and uncommitted["aborted_transactions"] is None
    data = b"".join(s.read() for s in uncommitted["records"])
    assert [h.base_offset for _, h in iter_batches(data)] == [0, 2, 4, 5, 7]
    assert fetch(1, version=3)["last_stable_offset"] == 5  # v3 has no isolation level: read_uncommitted

    offsets = OffsetsServices(FakePartitions(partition))

    def latest(isolation: int) -> int:
        body = {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        }
        answer = run(handle_list_offsets, offsets, request(ApiKey.LIST_OFFSETS, 2, body))
        return int(only_partition(answer, "topics", "partitions")["offset"])

    assert (latest(1), latest(0)) == (5, 8)
    partition.append_marker(8, 0, True, 0)
    assert (latest(1), latest(0)) == (9, 9)


def test_delete_records_refuses_a_mirror_and_checks_the_high_watermark(tmp_path: Path) -> None:
    mirror = leader_partition(tmp_path, "m", mirror_link="l")
    plain = leader_partition(tmp_path, "p")
    services = OffsetsServices(FakePartitions(mirror, plain))
    body = {
        "topics": [{"name": n, "partitions": [{"partition_index": 0, "offset": 5}]} for n in ("m", "p")],
        "timeout_ms": 1000,
    }
    result = run(handle_delete_records, services, request(ApiKey.DELETE_RECORDS, 1, body))
    codes = {t["name"]: t["partitions"][0]["error_code"] for t in result["topics"]}
    assert codes == {"m": ErrorCode.POLICY_VIOLATION, "p": ErrorCode.OFFSET_OUT_OF_RANGE}


def test_list_offsets_answers_the_ends_and_refuses_an_invalid_target(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    partition.append_produced(memoryview(values(4)))
    partition.maybe_advance_hw()
    services = OffsetsServices(FakePartitions(partition))

    def ask(timestamp: int) -> dict[str, Any]:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        }
        return only_partition(
            run(handle_list_offsets, services, request(ApiKey.LIST_OFFSETS, 4, body)), "topics", "partitions"
        )

    assert ask(-2)["offset"] == 0
    assert ask(-1)["offset"] == partition.log.high_watermark
    assert ask(-7)["error_code"] == ErrorCode.INVALID_REQUEST


def test_a_new_leader_whose_high_watermark_lags_answers_offset_not_available_until_its_followers_fetch(
    tmp_path: Path,
) -> None:
    tp = TopicPartition("orders", 0)
    log = create_log(tmp_path / "orders-0", tp, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)
    partition = Partition(tp, log, policy(), broker_id=BROKER_ID, clock=lambda: NOW_MS)
    # A follower of broker 2 holds 4 records the old leader committed, but its own high watermark
    # never heard of them; then it is elected.
    partition.apply_state(PartitionState(2, 0, (2, BROKER_ID), 1, version=0), (2, BROKER_ID))
    partition.append_replica(values(4))
    assert partition.log.high_watermark == 0
    partition.apply_state(PartitionState(BROKER_ID, 1, (BROKER_ID, 2), 1, version=1), (2, BROKER_ID))
    assert partition.is_leader and partition.epoch_start_offset == 4
    services = OffsetsServices(FakePartitions(partition))

    def ask(timestamp: int, *, replica_id: int = -1) -> dict[str, Any]:
        body = {
            "replica_id": replica_id,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        }
        return only_partition(
            run(handle_list_offsets, services, request(ApiKey.LIST_OFFSETS, 4, body)), "topics", "partitions"
        )

    assert ask(-1)["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE  # not 0: the end must not go back
    assert ask(NOW_MS)["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE  # found at 0, past the lagging HW
    assert (ask(-2)["error_code"], ask(-2)["offset"]) == (0, 0)
    assert (ask(-1, replica_id=2)["error_code"], ask(-1, replica_id=2)["offset"]) == (0, 0)  # a replica asks
    partition.record_follower_fetch(2, 4)  # the follower has them all: the HW catches up
    assert (ask(-1)["error_code"], ask(-1)["offset"]) == (0, 4)
    assert (ask(NOW_MS)["error_code"], ask(NOW_MS)["offset"]) == (0, 0)


def test_a_storage_error_becomes_kafka_storage_error(tmp_path: Path) -> None:
    def offline(epoch: int) -> tuple[int, int]:
        raise LogDirOfflineError(tmp_path / "d1", "disk gone")

    partitions = FakePartitions()
    partitions.partition = lambda topic, index: fake_partition(end_offset_for_epoch=offline)  # type: ignore[method-assign]
    body = {
        "replica_id": -1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 3}]}],
    }
    result = run(
        handle_offset_for_leader_epoch, EpochServices(partitions), request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body)
    )
    assert only_partition(result, "topics", "partitions")["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR


def test_mirror_append_only_by_the_owning_link_and_only_at_the_end(tmp_path: Path) -> None:
    metrics = FakeMetrics()
    partition = leader_partition(tmp_path, "orders", mirror_link="east-to-west")
    services = MirrorServices(FakePartitions(partition, leader_partition(tmp_path, "plain")), metrics)

    def append(topic: str, link: str, expected_end: int) -> dict[str, Any]:
        body = {
            "link": link,
            "timeout_ms": 1000,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"index": 0, "expected_end_offset": expected_end, "start_offset": 0, "records": values(2)}
                    ],
                }
            ],
        }
        return only_partition(
            run(handle_mirror_append, services, request(ApiKey.MIRROR_APPEND, 0, body)), "topics", "partitions"
        )

    wrong_link = append("orders", "other", 0)
    assert wrong_link["error_code"] == ErrorCode.POLICY_VIOLATION
    assert "owned by link 'east-to-west', not by link 'other'" in wrong_link["error_message"]
    assert append("plain", "east-to-west", 0)["error_code"] == ErrorCode.POLICY_VIOLATION
    wrong_end = append("orders", "east-to-west", 5)
    assert (wrong_end["error_code"], wrong_end["log_end_offset"]) == (ErrorCode.OFFSET_OUT_OF_RANGE, 0)
    ok = append("orders", "east-to-west", 0)
    assert (ok["error_code"], ok["log_end_offset"], ok["high_watermark"]) == (0, 2, 2)
    assert [api for api, _ in metrics.errors] == ["MirrorAppend"] * 3


def test_produce_to_a_fenced_topic_is_a_policy_violation_carrying_the_fence(tmp_path: Path) -> None:
    metrics = FakeMetrics()
    fence = "site east was failed over to west; produce to west: 127.0.0.1:9092"
    partition = leader_partition(tmp_path, "orders", fence=fence)
    services = ProduceServices(FakePartitions(partition), metrics)
    for acks in (1, -1):
        body = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders", values(1), acks=acks)))
        entry = only_partition(body, "responses", "partition_responses")
        assert (entry["error_code"], entry["base_offset"]) == (ErrorCode.POLICY_VIOLATION, -1)
        assert entry["error_message"] == f"topic 'orders' is fenced: {fence}"
    assert metrics.errors == [("Produce", "POLICY_VIOLATION")] * 2
    assert partition.log.log_end_offset == 0
    # A fenced mirror (after a reverse) names the fence, which says where to produce.
    both = leader_partition(tmp_path, "m", mirror_link="west-to-east", fence=fence)
    body = run(
        handle_produce,
        ProduceServices(FakePartitions(both), metrics),
        request(ApiKey.PRODUCE, 8, produce_body("m", values(1))),
    )
    assert only_partition(body, "responses", "partition_responses")["error_message"] == f"topic 'm' is fenced: {fence}"
    # Un-fencing (the policy the node applies after the config change) lets produce in again.
    partition.policy = replace(partition.policy, fence=None)
    body = run(handle_produce, services, request(ApiKey.PRODUCE, 8, produce_body("orders", values(2))))
    assert only_partition(body, "responses", "partition_responses")["base_offset"] == 0


def test_a_fenced_topic_still_takes_delete_records_and_mirror_appends(tmp_path: Path) -> None:
    fenced = leader_partition(tmp_path, "orders", fence="go west")
    fenced.append_produced(memoryview(values(4)))  # written before the fence
    body = {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 2}]}], "timeout_ms": 1000}
    result = run(
        handle_delete_records, OffsetsServices(FakePartitions(fenced)), request(ApiKey.DELETE_RECORDS, 1, body)
    )
    assert only_partition(result, "topics", "partitions")["low_watermark"] == 2

    mirror = leader_partition(tmp_path, "m", mirror_link="west-to-east", fence="go west")
    append = {
        "link": "west-to-east",
        "timeout_ms": 1000,
        "topics": [
            {
                "name": "m",
                "partitions": [{"index": 0, "expected_end_offset": 0, "start_offset": -1, "records": values(3)}],
            }
        ],
    }
    services = MirrorServices(FakePartitions(mirror), FakeMetrics())
    answer = only_partition(
        run(handle_mirror_append, services, request(ApiKey.MIRROR_APPEND, 0, append)), "topics", "partitions"
    )
    assert (answer["error_code"], answer["log_end_offset"]) == (0, 3)


def test_max_timestamp_is_the_first_record_with_the_largest_timestamp_below_the_fetchable_end(tmp_path: Path) -> None:
    """ListOffsets v7's -3 (KIP-734), and none while that record is not fetchable (an open
    transaction's record, for read_committed). tests/node/test_fetch_rules.py shows it is the record
    itself, not its batch's last offset."""
    partition = leader_partition(tmp_path, "orders")
    partition.append_produced(memoryview(build_batch([(NOW_MS, None, b"a"), (NOW_MS + 50, None, b"b")])))  # 0-1
    partition.append_produced(memoryview(values(2)))  # 2-3, stamped NOW_MS and NOW_MS + 1
    builder = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    builder.append(NOW_MS + 70, None, b"t")
    partition.append_produced(memoryview(builder.build()))  # 4, open
    services = OffsetsServices(FakePartitions(partition))

    def ask(isolation: int, version: int = 7) -> dict[str, Any]:
        body = {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -3}]}],
        }
        answer = run(handle_list_offsets, services, request(ApiKey.LIST_OFFSETS, version, body))
        return only_partition(answer, "topics", "partitions")

    found = ask(0)
    assert (found["error_code"], found["offset"], found["timestamp"]) == (0, 4, NOW_MS + 70)
    assert (ask(1)["offset"], ask(1)["timestamp"]) == (-1, -1)  # beyond the last stable offset
    assert ask(0, version=6)["error_code"] == ErrorCode.INVALID_REQUEST
    partition.append_marker(9, 0, False, 0)  # aborted: the record stays the largest, now below the LSO
    assert ask(1)["offset"] == 4
