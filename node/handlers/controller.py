"""ControlledShutdown (API 7): a stopping broker asks the controller to move its leaderships away.

Authorisation (Kafka's): CLUSTER_ACTION on the cluster, the inter-broker operation, else
CLUSTER_AUTHORIZATION_FAILED and no leadership moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.coordination import CoordinationError
from node.ids import NodeId
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, ControllerService, MetadataView, SecurityServices


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
