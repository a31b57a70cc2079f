"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) over a fake controller:
each answer encoded and decoded by the real codec at every version Kafka 4.3 declares; the
authorizer's and NOT_CONTROLLER's answers at the top; per-partition outcomes as the controller gives them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from node.coordination import CoordinationError
from node.errors import BrokerError
from node.handlers import NO_AUTHORIZER, SERVED_APIS, served_ranges
from node.handlers.reassign import (
    ReassignServices,
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from node.ids import NodeId
from node.protocol import ApiKey, ErrorCode, Struct, decode_response, encode_response, request_header
from node.request import Request
from node.security._acl import AclOperation
from tests.node.handlers.fakes import ALICE, BOB, acl, request, secured

pytestmark = pytest.mark.unit

Key = tuple[str, int]


@dataclass
class FakeReassigningController:
    active: bool = True
    altered: list[tuple[dict[Key, tuple[NodeId, ...] | None], bool]] = field(default_factory=list)
    asked: list[list[Key] | None] = field(default_factory=list)
    fail: Exception | None = None

    async def alter_reassignments(
        self, changes: dict[Key, tuple[NodeId, ...] | None], *, allow_replication_factor_change: bool
    ) -> Mapping[Key, tuple[ErrorCode, str | None]]:
        if self.fail is not None:
            raise self.fail
        self.altered.append((dict(changes), allow_replication_factor_change))
        outcomes: dict[Key, tuple[ErrorCode, str | None]] = {}
        for key, replicas in changes.items():
            if key[0] == "nowhere":
                outcomes[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif replicas is None:
                outcomes[key] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            elif len(set(replicas)) != len(replicas):
                outcomes[key] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "duplicates")
            else:
                outcomes[key] = (ErrorCode.NONE, None)
        return outcomes

    async def list_reassignments(
        self, partitions: list[Key] | None
    ) -> Mapping[Key, tuple[tuple[NodeId, ...], tuple[NodeId, ...], tuple[NodeId, ...]]]:
        if self.fail is not None:
            raise self.fail
        self.asked.append(partitions)
        running = {
            ("orders", 1): ((NodeId(3), NodeId(1)), (NodeId(3),), (NodeId(1),)),
            ("orders", 0): ((NodeId(1), NodeId(2)), (NodeId(2),), ()),
        }
        return {k: v for k, v in running.items() if partitions is None or k in partitions}


def answer(handler: Any, services: ReassignServices, req: Request) -> Struct:
    """The handler's answer as a client reads it: encoded and decoded at the request's version."""
    body = trio.run(handler, services, req)
    header = request_header(req.header.api_key, req.api_version, 7, "unit-test")
    frame = b"".join(bytes(p) for p in encode_response(header, body).parts)[4:]
    _, decoded = decode_response(req.header.api_key, req.api_version, frame)
    return decoded


def alter_body(*partitions: tuple[str, int, list[int] | None], allow_rf_change: bool = True) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, p, replicas in partitions:
        topics.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
    return {
        "timeout_ms": 30000,
        "allow_replication_factor_change": allow_rf_change,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }


def outcomes(response: Struct) -> dict[Key, tuple[int, str | None]]:
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message) for t in response.responses for p in t.partitions
    }


def test_both_apis_are_served_at_kafkas_flexible_versions() -> None:
    assert ApiKey.ALTER_PARTITION_REASSIGNMENTS in SERVED_APIS and ApiKey.LIST_PARTITION_REASSIGNMENTS in SERVED_APIS
    ranges = served_ranges()
    assert ranges[ApiKey.ALTER_PARTITION_REASSIGNMENTS] == (0, 1)
    assert ranges[ApiKey.LIST_PARTITION_REASSIGNMENTS] == (0, 0)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_answers_each_partition_as_the_controller_decided(version: int) -> None:
    controller = FakeReassigningController()
    services = ReassignServices(controller, NO_AUTHORIZER)
    body = alter_body(("orders", 0, [2, 3]), ("orders", 1, None), ("orders", 2, [1, 1]), ("nowhere", 0, [1]))
    response = answer(
        handle_alter_partition_reassignments,
        services,
        request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, body),
    )
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    assert outcomes(response) == {
        ("orders", 0): (ErrorCode.NONE, None),
        ("orders", 1): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None),
        ("orders", 2): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "duplicates"),
        ("nowhere", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
    }
    assert controller.altered == [
        ({("orders", 0): (2, 3), ("orders", 1): None, ("orders", 2): (1, 1), ("nowhere", 0): (1,)}, True)
    ]


def test_v1_carries_allow_replication_factor_change_both_ways() -> None:
    controller = FakeReassigningController()
    body = alter_body(("orders", 0, [2]), allow_rf_change=False)
    response = answer(
        handle_alter_partition_reassignments,
        ReassignServices(controller),
        request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, body),
    )
    assert response.allow_replication_factor_change is False
    assert controller.altered == [({("orders", 0): (2,)}, False)]
    # v0 has no such field: a change of the replication factor is allowed, as before KIP-860
    answer(handle_alter_partition_reassignments, ReassignServices(controller), request(45, 0, body))
    assert controller.altered[-1][1] is True


def test_not_the_controller_answers_at_the_top_and_changes_nothing() -> None:
    controller = FakeReassigningController(active=False)
    services = ReassignServices(controller)
    response = answer(
        handle_alter_partition_reassignments,
        services,
        request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, alter_body(("orders", 0, [2]))),
    )
    assert response.error_code == ErrorCode.NOT_CONTROLLER and list(response.responses) == []
    listed = answer(handle_list_partition_reassignments, services, request(46, 0, {"topics": None}))
    assert listed.error_code == ErrorCode.NOT_CONTROLLER and list(listed.topics) == []
    assert controller.altered == [] and controller.asked == []


@pytest.mark.parametrize(
    "failure",
    [
        BrokerError(ErrorCode.NOT_CONTROLLER, "broker 1 is not the controller"),
        CoordinationError("ZooKeeper is gone"),
    ],
)
def test_losing_the_controller_role_midway_answers_not_controller(failure: Exception) -> None:
    services = ReassignServices(FakeReassigningController(fail=failure))
    response = answer(handle_alter_partition_reassignments, services, request(45, 0, alter_body(("orders", 0, [2]))))
    assert response.error_code == ErrorCode.NOT_CONTROLLER and str(failure) in (response.error_message or "")
    listed = answer(handle_list_partition_reassignments, services, request(46, 0, {"topics": None}))
    assert listed.error_code == ErrorCode.NOT_CONTROLLER


def test_alter_needs_alter_on_the_cluster() -> None:
    security, _ = secured(acl(ALICE, AclOperation.ALTER))
    controller = FakeReassigningController()
    services = ReassignServices(controller, security)
    body = alter_body(("orders", 0, [2]), ("orders", 1, None))
    refused = answer(handle_alter_partition_reassignments, services, request(45, 0, body, principal=BOB))
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert {key: code for key, (code, _) in outcomes(refused).items()} == {
        ("orders", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ("orders", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }
    assert controller.altered == []
    allowed = answer(handle_alter_partition_reassignments, services, request(45, 0, body, principal=ALICE))
    assert allowed.error_code == ErrorCode.NONE and len(controller.altered) == 1


def test_list_needs_describe_on_the_cluster() -> None:
    security, _ = secured(acl(ALICE, AclOperation.DESCRIBE))
    controller = FakeReassigningController()
    services = ReassignServices(controller, security)
    refused = answer(handle_list_partition_reassignments, services, request(46, 0, {"topics": None}, principal=BOB))
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and list(refused.topics) == []
    assert controller.asked == []
    allowed = answer(handle_list_partition_reassignments, services, request(46, 0, {"topics": None}, principal=ALICE))
    assert allowed.error_code == ErrorCode.NONE and len(allowed.topics[0].partitions) == 2


def test_list_every_move_or_the_named_ones() -> None:
    controller = FakeReassigningController()
    services = ReassignServices(controller)
    everything = answer(handle_list_partition_reassignments, services, request(46, 0, {"topics": None}))
    assert [
        (t.name, p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in everything.topics
        for p in t.partitions
    ] == [("orders", 0, [1, 2], [2], []), ("orders", 1, [3, 1], [3], [1])]
    named = answer(
        handle_list_partition_reassignments,
        services,
        request(46, 0, {"topics": [{"name": "orders", "partition_indexes": [1, 7]}]}),
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in named.topics] == [("orders", [1])]
    assert controller.asked == [None, [("orders", 1), ("orders", 7)]]
