"""The transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions (65)
and ListTransactions (66), relayed to this node's transaction coordinator (``node.txn``).

InitProducerId with a transactional id is in ``producer_id``; TxnOffsetCommit, which the group
coordinator answers, in ``groups``. The coordinator answers NOT_COORDINATOR for ids whose
``__transaction_state`` partition this node does not lead (clients then ask FindCoordinator
again). PRODUCER_FENCED exists from v2 of the three producer APIs (KIP-588): older versions get
INVALID_PRODUCER_EPOCH instead, as in Kafka.

Authorisation (Kafka's table), checked before the coordinator sees the request:

| API | needs | refused with (``*`` = _AUTHORIZATION_FAILED) |
|---|---|---|
| AddPartitionsToTxn | WRITE on the transactional id, then on each topic | TRANSACTIONAL_ID* for all / TOPIC* (1) |
| AddOffsetsToTxn | WRITE on the transactional id, READ on the group | TRANSACTIONAL_ID* / GROUP* |
| EndTxn | WRITE on the transactional id | TRANSACTIONAL_ID* |
| DescribeTransactions | DESCRIBE on each id (on a topic, to see its partitions) | TRANSACTIONAL_ID* for that id |
| ListTransactions | DESCRIBE on each id listed | never an error: the others are left out |

(1) as are partitions the site does not have (UNKNOWN_TOPIC_OR_PARTITION); when any partition is
refused none is added, and the others get OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, GroupService, MetadataView, SecurityServices, TransactionService

FENCED_FROM_VERSION = 2  # AddPartitionsToTxn, AddOffsetsToTxn and EndTxn answer PRODUCER_FENCED from v2


@dataclass(frozen=True, slots=True)
class TxnServices:
    coordinator: TransactionService
    groups: GroupService
    metadata: MetadataView
    security: SecurityServices = NO_AUTHORIZER


def _for_version(error: ErrorCode, version: int) -> ErrorCode:
    if error is ErrorCode.PRODUCER_FENCED and version < FENCED_FROM_VERSION:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _may_write(services: TxnServices, request: Request, transactional_id: str) -> bool:
    return services.security.allowed(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


async def handle_add_partitions_to_txn(services: TxnServices, request: Request) -> dict[str, Any]:
    req = request.body
    tid = req.v3_and_below_transactional_id
    requested = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not _may_write(services, request, tid):
        errors = dict.fromkeys(requested, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        security = services.security
        for topic, p in requested:
            state = services.metadata.topics.get(topic)
            if not security.allowed(request, AclOperation.WRITE, ResourceType.TOPIC, topic):
                errors[(topic, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif state is None or p not in state.assignment:
                errors[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if errors:
            errors = {tp: errors.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in requested}
        else:
            code = await services.coordinator.add_partitions(
                tid, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch, requested
            )
            errors = dict.fromkeys(requested, _for_version(code, request.api_version))
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), code in errors.items():
        topics.setdefault(topic, []).append({"partition_index": p, "partition_error_code": code})
    return {
        "throttle_time_ms": 0,
        "results_by_topic_v3_and_below": [{"name": n, "results_by_partition": ps} for n, ps in topics.items()],
    }


async def handle_add_offsets_to_txn(services: TxnServices, request: Request) -> dict[str, Any]:
    req = request.body
    if not _may_write(services, request, req.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not services.security.allowed(request, AclOperation.READ, ResourceType.GROUP, req.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        # The group's __consumer_offsets partition joins the transaction: its marker makes the offsets visible.
        partition = (OFFSETS_TOPIC, services.groups.partition_for(req.group_id))
        code = await services.coordinator.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch, [partition]
        )
        error = _for_version(code, request.api_version)
    return {"throttle_time_ms": 0, "error_code": error}


async def handle_end_txn(services: TxnServices, request: Request) -> dict[str, Any]:
    req = request.body
    if not _may_write(services, request, req.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        code = await services.coordinator.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed
        )
        error = _for_version(code, request.api_version)
    return {"throttle_time_ms": 0, "error_code": error}


async def handle_describe_transactions(services: TxnServices, request: Request) -> dict[str, Any]:
    security = services.security
    states = []
    for tid in request.body.transactional_ids:
        entry: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "transactional_id": tid,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        states.append(entry)
        if not security.allowed(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            continue
        error, described = services.coordinator.describe(tid)
        entry["error_code"] = error
        if described is None:
            continue
        topics: dict[str, list[int]] = {}
        for topic, p in described.partitions:
            # As Kafka: only the partitions of topics the principal may describe.
            if security.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_denied=False):
                topics.setdefault(topic, []).append(p)
        entry.update(
            transaction_state=described.state,
            transaction_timeout_ms=described.timeout_ms,
            transaction_start_time_ms=described.start_ms,
            producer_id=described.producer_id,
            producer_epoch=described.producer_epoch,
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
        )
    return {"throttle_time_ms": 0, "transaction_states": states}


async def handle_list_transactions(services: TxnServices, request: Request) -> dict[str, Any]:
    req = request.body
    duration = req.duration_filter if request.api_version >= 1 else -1
    error, unknown, found = services.coordinator.list_transactions(
        list(req.state_filters), list(req.producer_id_filters), duration
    )
    security = services.security
    listed = [
        {"transactional_id": tid, "producer_id": pid, "transaction_state": state}
        for tid, pid, state in found
        if security.allowed(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid, log_denied=False)
    ]
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown, "transaction_states": listed}
