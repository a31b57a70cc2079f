"""InitProducerId (22): producer ids for idempotent producers, from blocks claimed in ZooKeeper."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.protocol import ErrorCode, RequestHeader, Struct

if TYPE_CHECKING:
    from node.broker import Broker


async def handle_init_producer_id(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if req.transactional_id is not None:
        # No transaction coordinator yet: refuse clearly rather than pretend.
        body["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return body
    body["producer_id"] = await broker.producer_ids.next_id()
    body["producer_epoch"] = 0
    return body
