"""KIP-951's leader hints: a NOT_LEADER_OR_FOLLOWER answer names the current leader (Produce v10+,
Fetch v12+) and that leader's address on the request's listener (Produce v10+, Fetch v16+); older
versions and unknown leaders carry none. Fetch v13+ by an unknown topic id: UNKNOWN_TOPIC_ID.
Every answer goes through the real codec."""

from __future__ import annotations

import base64
import uuid
from dataclasses import replace
from typing import Any

import pytest
import trio

from node.coordination import BrokerRegistration
from node.errors import BrokerError
from node.handlers.fetch import FetchServices, handle_fetch
from node.handlers.produce import ProduceServices, handle_produce
from node.partition import Partition
from node.protocol import ApiKey, ErrorCode, decode_response, encode_response
from storage.records import build_batch
from tests.node.handlers.fakes import NOW_MS, FakeCluster, FakeFollowers, FakeMetrics, request, topic_state

pytestmark = pytest.mark.unit


class ElsewhereLed:
    """PartitionSource for a node that holds no replica of the partition, which another node leads."""

    def partition(self, topic: str, index: int, *, leader: bool = True) -> Partition:
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker 1 does not lead {topic}-{index}")


TOPIC_ID = uuid.UUID(int=0x5EED)


def cluster(leader: int = 2) -> FakeCluster:
    view = FakeCluster()
    stored = base64.urlsafe_b64encode(TOPIC_ID.bytes).rstrip(b"=").decode()  # as ZooKeeper holds it
    view.topics["t"] = replace(topic_state("t", 2, leader=leader), topic_id=stored)
    view.brokers[2] = BrokerRegistration(
        2, "10.0.0.2", 9092, endpoints=("PLAINTEXT://10.0.0.2:9092", "WAN://198.51.100.2:19092"), rack="r2"
    )
    return view


def round_trip(api_key: int, version: int, body: Any) -> Any:
    """The body as a client reads it: encoded by the node's codec and decoded again."""
    req = request(api_key, version, {})
    frame = encode_response(req.header, body)
    data = b"".join(bytes(p) for p in frame.parts)  # type: ignore[arg-type]
    return decode_response(api_key, version, data[4:])[1]


def produce(version: int, listener: str = "PLAINTEXT") -> Any:
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": build_batch([(NOW_MS, None, b"v")])}]}],
    }
    services = ProduceServices(ElsewhereLed(), FakeMetrics(), metadata=cluster())
    answer = trio.run(handle_produce, services, request(ApiKey.PRODUCE, version, body, listener=listener))
    return round_trip(ApiKey.PRODUCE, version, answer)


def test_produce_v10_names_the_leader_and_its_address_on_the_requests_listener() -> None:
    for version in (10, 11):
        answer = produce(version)
        (entry,) = answer.responses[0].partition_responses
        assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == (2, 0)
        assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [(2, "10.0.0.2", 9092, "r2")]
    wan = produce(11, listener="WAN")
    assert [(e.host, e.port) for e in wan.node_endpoints] == [("198.51.100.2", 19092)]


def test_produce_before_v10_has_no_hint() -> None:
    answer = produce(9)
    (entry,) = answer.responses[0].partition_responses
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and entry.current_leader is None
    assert answer.node_endpoints == []


def fetch(version: int, topics: list[dict[str, Any]], view: FakeCluster | None = None) -> Any:
    body = {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 2**20, "session_epoch": -1, "topics": topics}
    services = FetchServices(ElsewhereLed(), FakeFollowers(), FakeMetrics(), metadata=view or cluster())
    answer = trio.run(handle_fetch, services, request(ApiKey.FETCH, version, body))
    return round_trip(ApiKey.FETCH, version, answer)


def test_fetch_v12_names_the_leader_and_v16_its_address() -> None:
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}
    answer = fetch(12, [{"topic": "t", "partitions": [part]}])
    entry = answer.responses[0].partitions[0]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == (2, 0)
    answer = fetch(16, [{"topic_id": TOPIC_ID, "partitions": [part]}])
    entry = answer.responses[0].partitions[0]
    assert (answer.responses[0].topic_id, entry.current_leader.leader_id) == (TOPIC_ID, 2)
    assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(2, "10.0.0.2", 9092)]
    assert fetch(11, [{"topic": "t", "partitions": [part]}]).responses[0].partitions[0].error_code == 6


def test_fetch_by_an_unknown_topic_id_and_a_leader_the_node_does_not_know() -> None:
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}
    stranger = uuid.uuid4()
    answer = fetch(13, [{"topic_id": stranger, "partitions": [part]}])
    assert (answer.responses[0].topic_id, answer.responses[0].partitions[0].error_code) == (
        stranger,
        ErrorCode.UNKNOWN_TOPIC_ID,
    )
    entry = fetch(12, [{"topic": "t", "partitions": [part]}], cluster(leader=-1)).responses[0].partitions[0]
    assert entry.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and entry.current_leader is None
