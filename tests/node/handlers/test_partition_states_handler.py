"""PartitionStates (strait's 1002): a controller's written states, decoded as a ZooKeeper read
decodes them and handed to the cluster view; refusals for a stale controller, a principal without
CLUSTER_ACTION and a state that does not decode."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from node.coordination import PartitionState, encode_partition_state
from node.errors import BrokerError
from node.handlers.controller import PartitionStatesServices, handle_partition_states
from node.ids import NodeId
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation, ResourceType
from storage import LeaderEpoch
from tests.node.handlers.fakes import FakeStates, acl, request, secured

pytestmark = pytest.mark.unit

STATE = PartitionState(NodeId(2), LeaderEpoch(4), (NodeId(2), NodeId(3)), 7, version=-1)


def push(states: FakeStates, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    services = PartitionStatesServices(states, **kwargs)
    return trio.run(handle_partition_states, services, request(ApiKey.PARTITION_STATES, 0, body))


def body(data: bytes = encode_partition_state(STATE), *, epoch: int = 7) -> dict[str, Any]:
    return {
        "controller_id": 1,
        "controller_epoch": epoch,
        "topics": [{"name": "orders", "topic_id": "id-1", "partitions": [{"index": 3, "version": 12, "state": data}]}],
    }


def test_states_are_decoded_with_their_new_znode_version_and_handed_over() -> None:
    states = FakeStates()
    answer = push(states, body())
    assert (answer["error_code"], answer["applied"]) == (0, 1)
    [(epoch, pushed)] = states.calls
    topic_id, by_partition = pushed["orders"]
    assert (epoch, topic_id) == (7, "id-1")
    assert by_partition[3] == PartitionState(NodeId(2), LeaderEpoch(4), (NodeId(2), NodeId(3)), 7, version=12)


def test_a_state_that_does_not_decode_fails_the_request_before_anything_is_taken() -> None:
    states = FakeStates()
    answer = push(states, body(b"{not json"))
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert "orders" in answer["error_message"]
    assert states.calls == []


def test_a_stale_controller_gets_the_views_refusal() -> None:
    refusal = BrokerError(ErrorCode.STALE_CONTROLLER_EPOCH, "controller epoch 6 is older than the current 7")
    answer = push(FakeStates(refuse=refusal), body(epoch=6))
    assert answer["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    assert "older" in answer["error_message"]


def test_without_cluster_action_nothing_is_taken() -> None:
    security, _ = secured(acl("User:alice", AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"))
    states = FakeStates()
    answer = push(states, body(), security=security)
    assert answer["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert states.calls == []
