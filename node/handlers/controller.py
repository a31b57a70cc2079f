"""ControlledShutdown (API 7): a stopping broker asks the controller to move its leaderships away;
PartitionStates (strait's 1002): the controller hands a broker the partition states it just wrote.

Authorisation (Kafka's for its inter-broker APIs): CLUSTER_ACTION on the cluster, else
CLUSTER_AUTHORIZATION_FAILED and nothing moves.

A PartitionStates entry whose state does not decode fails the whole request (CORRUPT_MESSAGE,
naming the partition) before any state is taken: a controller never sends one, so the sender is
not a strait controller.
"""

from __future__ import annotations

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
