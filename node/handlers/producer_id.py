"""InitProducerId (22): producer ids for idempotent producers, and for transactional ones their coordinator's answer.

Without a transactional id the id comes from blocks claimed in ZooKeeper (``ProducerIdSource``);
v3+ fields are ignored then, as Kafka ignores them. With one, the transaction coordinator
(``node.txn``) answers: it keeps the id's producer id, bumps its epoch (KIP-360: v3+ name the
producer id and epoch a producer resumes with) and fences the previous instance of the producer.
PRODUCER_FENCED exists from v4 (KIP-588); older versions get INVALID_PRODUCER_EPOCH instead.

Authorisation (Kafka's, with KIP-679): without a transactional id the producer needs
IDEMPOTENT_WRITE on the cluster, or WRITE on at least one topic (which implies it), else
CLUSTER_AUTHORIZATION_FAILED and no id is used up. With one it needs WRITE on that
TRANSACTIONAL_ID, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, ProducerIdSource, SecurityServices, TransactionService

FENCED_FROM_VERSION = 4  # InitProducerId answers PRODUCER_FENCED from v4 (KIP-588)


@dataclass(frozen=True, slots=True)
class ProducerIdServices:
    producer_ids: ProducerIdSource
    transactions: TransactionService
    security: SecurityServices = NO_AUTHORIZER


async def handle_init_producer_id(services: ProducerIdServices, request: Request) -> dict[str, Any]:
    req = request.body
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    security = services.security
    if req.transactional_id is not None:
        if not security.allowed(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            body["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return body
        result = await services.transactions.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, req.producer_id, req.producer_epoch
        )
        error = result.error
        if error is ErrorCode.PRODUCER_FENCED and request.api_version < FENCED_FROM_VERSION:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        body.update(error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch)
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
