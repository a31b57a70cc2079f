"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Authorisation (Kafka's): CreateTopics needs CREATE on the cluster or on each topic, checked after
the duplicate-name check and before the name is validated; DeleteTopics DELETE on each topic;
CreatePartitions ALTER on each topic. A refused topic answers TOPIC_AUTHORIZATION_FAILED and
ZooKeeper is not touched for it.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from node.cluster import check_topic_name
from node.config import NodeConfig
from node.errors import BrokerError
from node.ids import NodeId
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, SecurityServices, TopicAdmin

log = logging.getLogger("strait.node.topics")


@dataclass(frozen=True, slots=True)
class TopicServices:
    admin: TopicAdmin
    config: NodeConfig
    security: SecurityServices = NO_AUTHORIZER


def _node_ids(broker_ids: list[int]) -> tuple[NodeId, ...]:
    """A replica list as the request carries it."""
    return tuple(NodeId(b) for b in broker_ids)


def _result(name: str, code: int = 0, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


async def handle_create_topics(services: TopicServices, request: Request) -> dict[str, Any]:
    req = request.body
    admin = services.admin
    config = services.config
    counts = Counter(t.name for t in req.topics)
    security = services.security
    cluster_create = security.allowed(request, AclOperation.CREATE, ResourceType.CLUSTER, log_denied=False)
    refused: dict[str, BrokerError] = {}
    ready: list[tuple[str, dict[int, tuple[NodeId, ...]], dict[str, str]]] = []
    for topic in req.topics:
        name = topic.name
        try:
            if counts[name] > 1:
                raise BrokerError(ErrorCode.INVALID_REQUEST, f"topic {name!r} appears more than once in the request")
            if not cluster_create:
                security.check(request, AclOperation.CREATE, ResourceType.TOPIC, name)
            check_topic_name(name)
            if topic.assignments:
                if topic.num_partitions != -1 or topic.replication_factor != -1:
                    raise BrokerError(
                        ErrorCode.INVALID_REQUEST,
                        "give either replica assignments or num_partitions/replication_factor, not both",
                    )
                assignment = {a.partition_index: _node_ids(a.broker_ids) for a in topic.assignments}
                if sorted(assignment) != list(range(len(assignment))):
                    raise BrokerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"assigned partitions {sorted(assignment)} must be 0..{len(assignment) - 1}",
                    )
            else:
                partitions = config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
                rf = config.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
                if partitions < 1:
                    raise BrokerError(ErrorCode.INVALID_PARTITIONS, f"number of partitions {partitions} must be >= 1")
                if rf < 1:
                    raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {rf} must be >= 1")
                assignment = await admin.plan(partitions, rf)
            ready.append((name, assignment, admin.validate_configs({c.name: c.value for c in topic.configs})))
        except BrokerError as exc:
            refused[name] = exc
    # Every topic that passed is written at once (one pipelined batch of transactions, one per
    # topic), and ZooKeeper re-read once: a request of a hundred topics costs a few round trips.
    written = await admin.create_topics(ready, validate_only=req.validate_only) if ready else {}
    if not req.validate_only and any(error is None for error in written.values()):
        await admin.refresh()  # this node answers with the topics
    results = []
    for topic in req.topics:
        name = topic.name
        error = refused.get(name) or written.get(name)
        if error is None:
            results.append(_result(name))
        else:
            log.info("CreateTopics %r: %s", name, error.message)
            results.append(_result(name, error.code, error.message))
    return {"throttle_time_ms": 0, "topics": results}


async def handle_delete_topics(services: TopicServices, request: Request) -> dict[str, Any]:
    req = request.body
    responses = []
    deleted = False
    for name in req.topic_names:
        entry: dict[str, Any] = {"name": name, "error_code": 0}
        try:
            services.security.check(request, AclOperation.DELETE, ResourceType.TOPIC, name)
            await services.admin.delete_topic(name, refresh=False)
            deleted = True
        except BrokerError as exc:
            log.info("DeleteTopics %r: %s", name, exc.message)
            entry["error_code"] = exc.code
        responses.append(entry)
    if deleted:  # one re-read of ZooKeeper for the whole request (as CreateTopics)
        await services.admin.refresh()
    return {"throttle_time_ms": 0, "responses": responses}


async def handle_create_partitions(services: TopicServices, request: Request) -> dict[str, Any]:
    req = request.body
    results = []
    for topic in req.topics:
        try:
            services.security.check(request, AclOperation.ALTER, ResourceType.TOPIC, topic.name)
            assignments = None
            if topic.assignments is not None:
                assignments = [_node_ids(a.broker_ids) for a in topic.assignments]
            await services.admin.add_partitions(topic.name, topic.count, assignments, validate_only=req.validate_only)
            results.append(_result(topic.name))
        except BrokerError as exc:
            results.append(_result(topic.name, exc.code, exc.message))
    return {"throttle_time_ms": 0, "results": results}
