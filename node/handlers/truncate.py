"""TruncatePartitions (strait's API 1001): truncate partitions to a cut, through the controller.

``validate_only`` false: only the controller answers (NOT_CONTROLLER elsewhere); it records the
truncations (``Controller.truncate_partitions``, the steps are in ``node.truncation``). A
partition named twice is refused (INVALID_REQUEST).

``validate_only`` true: the leader's check, which the controller sends to each leader. Every
node answers it for the partitions it leads (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
otherwise) from its own log (``node.truncation.check_cut``), with the leader epoch and the log's
offsets; nothing changes. A topic this node does not see fenced is looked up again in ZooKeeper
once before it is refused: the fence may have been set a moment ago through another node.

Authorisation: truncating is ALTER on the cluster (what Kafka asks for the other operator
actions that move a partition's state for it: ElectLeaders, AlterPartitionReassignments; it
deletes records of every topic it names, so a per-topic DELETE would let a topic owner rewrite
history the failover tool relies on). The leader's check (``validate_only``) changes nothing and
is what the controller sends each leader, so it is allowed with CLUSTER_ACTION (the inter-broker
operation a broker's principal holds) or ALTER. Refused: CLUSTER_AUTHORIZATION_FAILED for every
partition, no offsets disclosed, no ZooKeeper read, no truncation.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from node.errors import BrokerError, as_broker_error
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from node.truncation import LeaderAnswer, PartitionKey, answer_of, check_cut

from ._services import (
    NO_AUTHORIZER,
    ControllerService,
    PartitionSource,
    RequestMetrics,
    SecurityServices,
    TopicAdmin,
    denied,
)

log = logging.getLogger("strait.node.truncate")

MAX_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class TruncateServices:
    partitions: PartitionSource
    admin: TopicAdmin
    controller: ControllerService
    metrics: RequestMetrics
    security: SecurityServices = NO_AUTHORIZER


def _entry(index: int, answer: LeaderAnswer | None, code: int, message: str | None, epoch: int = -1) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "error_message": message,
        "leader_epoch": epoch,
        "truncated": False,
        "log_start_offset": answer.log_start_offset if answer is not None else -1,
        "log_end_offset": answer.log_end_offset if answer is not None else -1,
        "high_watermark": answer.high_watermark if answer is not None else -1,
    }


def _check(services: TruncateServices, topic: str, index: int, offset: int) -> LeaderAnswer:
    partition = None
    error: BrokerError | None = None
    try:
        partition = services.partitions.partition(topic, index)
        check_cut(partition, offset)
    except Exception as exc:
        error = as_broker_error(exc)
        if error is None:
            raise
    return answer_of(partition, error)


async def handle_truncate_partitions(services: TruncateServices, request: Request) -> dict[str, Any]:
    req = request.body
    cuts: list[tuple[PartitionKey, int]] = [((t.name, p.index), p.offset) for t in req.topics for p in t.partitions]
    counts = Counter(key for key, _ in cuts)
    entries: dict[PartitionKey, dict[str, Any]] = {}
    security = services.security
    if not (
        (
            req.validate_only
            and security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, log_denied=False)
        )
        or security.allowed(request, AclOperation.ALTER, ResourceType.CLUSTER)
    ):
        refusal = denied(request, AclOperation.ALTER, ResourceType.CLUSTER)
        for key, _offset in cuts:
            entries[key] = _entry(key[1], None, refusal.code, refusal.message)
    elif req.validate_only:
        reread = False
        for key, offset in cuts:
            answer = _check(services, *key, offset)
            if answer.error_code == ErrorCode.POLICY_VIOLATION and not reread:
                reread = True
                await services.admin.refresh()
                answer = _check(services, *key, offset)
            entries[key] = _entry(key[1], answer, answer.error_code, answer.error_message, answer.leader_epoch)
    elif not services.controller.active:
        for key, _offset in cuts:
            entries[key] = _entry(key[1], None, ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
    else:
        wanted = {key: offset for key, offset in cuts if counts[key] == 1}
        timeout = min(max(req.timeout_ms, 0) / 1000, MAX_TIMEOUT_S)
        outcomes = await services.controller.truncate_partitions(wanted, timeout)
        for key, _offset in cuts:
            outcome = outcomes.get(key)
            if outcome is None:
                entries[key] = _entry(key[1], None, ErrorCode.INVALID_REQUEST, f"{key[0]}-{key[1]} is named twice")
                continue
            entry = _entry(key[1], outcome.answer, outcome.error_code, outcome.error_message, outcome.leader_epoch)
            entry["truncated"] = outcome.truncated
            entries[key] = entry
    for (topic, index), entry in entries.items():
        if entry["error_code"]:
            services.metrics.record_error("TruncatePartitions", ErrorCode(entry["error_code"]).name)
            log.info("TruncatePartitions %s-%d: %s", topic, index, entry["error_message"])
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, _index), entry in entries.items():
        topics.setdefault(topic, []).append(entry)
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]}
