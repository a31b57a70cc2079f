"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455: the Kafka APIs
that ``kafka-reassign-partitions.sh``, Cruise Control and the Java Admin's
``alterPartitionReassignments``/``listPartitionReassignments`` move replicas with.

Both are the controller's (admin clients send them to Metadata's controller id): on any other
node the answer is NOT_CONTROLLER at the top, which the Java Admin retries after a metadata
refresh. The controller merges an alter into the reassignment in progress
(``/admin/reassign_partitions``) and carries the moves out as for ``strait topics reassign``
(``Controller._reassign``); per-partition outcomes are the controller's
(``Controller.alter_reassignments``). Null replicas cancel a partition's move: it goes back to
its original replicas.

Authorisation (Kafka's): ALTER on the cluster for Alter, DESCRIBE for List; refused, the answer
is CLUSTER_AUTHORIZATION_FAILED at the top (and, for Alter, for every partition named) and
nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.coordination import CoordinationError
from node.errors import BrokerError
from node.ids import NodeId
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, ControllerService, SecurityServices


@dataclass(frozen=True, slots=True)
class ReassignServices:
    controller: ControllerService
    security: SecurityServices = NO_AUTHORIZER


async def handle_alter_partition_reassignments(services: ReassignServices, request: Request) -> dict[str, Any]:
    req = request.body
    allow_rf_change = bool(req.allow_replication_factor_change)
    changes: dict[tuple[str, int], tuple[NodeId, ...] | None] = {}
    for topic in req.topics:
        for p in topic.partitions:
            changes[topic.name, p.partition_index] = (
                None if p.replicas is None else tuple(NodeId(b) for b in p.replicas)
            )
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "allow_replication_factor_change": allow_rf_change,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "responses": [],
    }
    if not services.security.allowed(request, AclOperation.ALTER, ResourceType.CLUSTER):
        message = "ALTER on the cluster is needed to reassign partitions"
        body.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=message)
        body["responses"] = _by_topic({key: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message) for key in changes})
        return body
    if not services.controller.active:
        body.update(error_code=ErrorCode.NOT_CONTROLLER, error_message="this node is not the controller")
        return body
    try:
        outcomes = await services.controller.alter_reassignments(
            changes, allow_replication_factor_change=allow_rf_change
        )
    except BrokerError as exc:  # no longer the controller
        body.update(error_code=exc.code, error_message=exc.message)
        return body
    except CoordinationError as exc:  # ZooKeeper could not be changed: nothing (or not all) was
        body.update(error_code=ErrorCode.NOT_CONTROLLER, error_message=str(exc))
        return body
    missing = (ErrorCode.UNKNOWN_SERVER_ERROR, "the controller gave no outcome for this partition")
    body["responses"] = _by_topic({key: outcomes.get(key, missing) for key in changes})
    return body


def _by_topic(outcomes: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, p), (code, message) in outcomes.items():
        topics.setdefault(name, []).append({"partition_index": p, "error_code": code, "error_message": message})
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


async def handle_list_partition_reassignments(services: ReassignServices, request: Request) -> dict[str, Any]:
    req = request.body
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": []}
    if not services.security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        body.update(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="DESCRIBE on the cluster is needed to list partition reassignments",
        )
        return body
    if not services.controller.active:
        body.update(error_code=ErrorCode.NOT_CONTROLLER, error_message="this node is not the controller")
        return body
    named = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    try:
        listed = await services.controller.list_reassignments(named)
    except BrokerError as exc:
        body.update(error_code=exc.code, error_message=exc.message)
        return body
    except CoordinationError as exc:
        body.update(error_code=ErrorCode.NOT_CONTROLLER, error_message=str(exc))
        return body
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, p), (replicas, adding, removing) in sorted(listed.items()):
        topics.setdefault(name, []).append(
            {
                "partition_index": p,
                "replicas": list(replicas),
                "adding_replicas": list(adding),
                "removing_replicas": list(removing),
            }
        )
    body["topics"] = [{"name": name, "partitions": partitions} for name, partitions in topics.items()]
    return body
