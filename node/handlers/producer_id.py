"""InitProducerId (22): producer ids for idempotent producers, from blocks claimed in ZooKeeper."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode
from node.request import Request

from ._services import ProducerIdSource


@dataclass(frozen=True, slots=True)
class ProducerIdServices:
    producer_ids: ProducerIdSource


async def handle_init_producer_id(services: ProducerIdServices, request: Request) -> dict[str, Any]:
    req = request.body
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if req.transactional_id is not None:
        # No transaction coordinator yet: refuse clearly rather than pretend.
        body["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return body
    body["producer_id"] = await services.producer_ids.next_id()
    body["producer_epoch"] = 0
    return body
