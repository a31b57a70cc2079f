"""ControlledShutdown (API 7): a stopping broker asks the controller to move its leaderships away;
ElectLeaders (43, KIP-460): an admin asks the controller for preferred or unclean elections;
PartitionStates (strait's 1002): the controller hands a broker the partition states it just wrote.

ElectLeaders needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, at the top from v1
and for every partition named) and the active controller (else NOT_CONTROLLER for each partition:
admin clients send it to Metadata's controller id). The outcomes per partition are the
controller's (``Controller.elect_leaders``); with ``topic_partitions`` null only the partitions
where an election was needed are answered.

Authorisation (Kafka's for its inter-broker APIs): CLUSTER_ACTION on the cluster, else
CLUSTER_AUTHORIZATION_FAILED and nothing moves.

A PartitionStates entry whose state does not decode fails the whole request (CORRUPT_MESSAGE,
naming the partition) before any state is taken: a controller never sends one, so the sender is
not a strait controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node.coordination import CoordinationError, MalformedZnode, PartitionState, decode_partition_state
from node.errors import BrokerError
from node.ids import NodeId
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, ControllerService, MetadataView, PushedStateSink, SecurityServices


@dataclass(frozen=True, slots=True)
class ControllerServices:
    controller: ControllerService
    metadata: MetadataView
    security: SecurityServices = NO_AUTHORIZER


async def handle_controlled_shutdown(services: ControllerServices, request: Request) -> dict[str, Any]:
    broker_id = NodeId(request.body.broker_id)
    controller = services.controller
    if not services.security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    if not controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    if broker_id not in services.metadata.brokers:
        return {"error_code": ErrorCode.BROKER_NOT_AVAILABLE, "remaining_partitions": []}
    try:
        remaining = await controller.controlled_shutdown(broker_id)
    except CoordinationError:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    return {
        "error_code": 0,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }


@dataclass(frozen=True, slots=True)
class PartitionStatesServices:
    states: PushedStateSink
    security: SecurityServices = NO_AUTHORIZER


async def handle_partition_states(services: PartitionStatesServices, request: Request) -> dict[str, Any]:
    req = request.body
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "applied": 0}
    if not services.security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        body["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return body
    pushed: dict[str, tuple[str, dict[int, PartitionState]]] = {}
    try:
        for topic in req.topics:
            states = pushed.setdefault(topic.name, (topic.topic_id, {}))[1]
            for p in topic.partitions:
                states[p.index] = decode_partition_state(topic.name, p.index, bytes(p.state), p.version)
    except MalformedZnode as exc:
        body["error_code"] = ErrorCode.CORRUPT_MESSAGE
        body["error_message"] = str(exc)
        return body
    try:
        body["applied"] = services.states.apply_pushed(req.controller_epoch, pushed)
    except BrokerError as exc:
        body["error_code"] = exc.code
        body["error_message"] = exc.message
    return body


async def handle_elect_leaders(services: ControllerServices, request: Request) -> dict[str, Any]:
    req = request.body
    unclean = request.api_version >= 1 and req.election_type == 1
    named = None if req.topic_partitions is None else [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": []}
    outcomes: Mapping[tuple[str, int], tuple[int, str | None]]
    if request.api_version >= 1 and req.election_type not in (0, 1):
        body["error_code"] = ErrorCode.INVALID_REQUEST
        outcomes = {
            key: (ErrorCode.INVALID_REQUEST, f"election_type {req.election_type} is neither 0 nor 1")
            for key in named or []
        }
    elif not services.security.allowed(request, AclOperation.ALTER, ResourceType.CLUSTER):
        body["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        outcomes = {key: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for key in named or []}
    elif not services.controller.active:
        outcomes = {key: (ErrorCode.NOT_CONTROLLER, "this node is not the controller") for key in named or []}
    else:
        try:
            outcomes = await services.controller.elect_leaders(named, unclean=unclean)
        except BrokerError as exc:  # no longer the controller
            outcomes = {key: (exc.code, exc.message) for key in named or []}
        except CoordinationError as exc:
            outcomes = {key: (ErrorCode.NOT_CONTROLLER, str(exc)) for key in named or []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (code, message) in outcomes.items():
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    body["replica_election_results"] = [
        {"topic": topic, "partition_result": results} for topic, results in by_topic.items()
    ]
    return body
