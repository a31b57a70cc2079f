"""InitProducerId (22): producer ids for idempotent producers, from blocks claimed in ZooKeeper.

Authorisation (Kafka's, with KIP-679): without a transactional id the producer needs
IDEMPOTENT_WRITE on the cluster, or WRITE on at least one topic (which implies it), else
CLUSTER_AUTHORIZATION_FAILED and no id is used up. With a transactional id the answer is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED whatever the ACLs: strait has no transaction coordinator yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, ProducerIdSource, SecurityServices


@dataclass(frozen=True, slots=True)
class ProducerIdServices:
    producer_ids: ProducerIdSource
    security: SecurityServices = NO_AUTHORIZER


async def handle_init_producer_id(services: ProducerIdServices, request: Request) -> dict[str, Any]:
    req = request.body
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    security = services.security
    if req.transactional_id is not None:
        # No transaction coordinator yet: refuse clearly rather than pretend.
        body["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return body
    # Kafka asks IDEMPOTENT_WRITE first; asked second here, only a principal lacking both is logged.
    if not (
        security.allowed_on_some(request, AclOperation.WRITE, ResourceType.TOPIC)
        or security.allowed(request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
    ):
        body["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return body
    body["producer_id"] = await services.producer_ids.next_id()
    body["producer_epoch"] = 0
    return body
