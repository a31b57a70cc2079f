"""ControlledShutdown (API 7): a stopping broker asks the controller to move its leaderships away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.coordination import CoordinationError
from node.protocol import ErrorCode, RequestHeader, Struct

if TYPE_CHECKING:
    from node.broker import Broker


async def handle_controlled_shutdown(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    controller = broker.controller
    if not controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    if req.broker_id not in broker.cluster.brokers:
        return {"error_code": ErrorCode.BROKER_NOT_AVAILABLE, "remaining_partitions": []}
    try:
        remaining = await controller.controlled_shutdown(req.broker_id)
    except CoordinationError:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    return {
        "error_code": 0,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }
