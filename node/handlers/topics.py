"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Authorisation (Kafka's): CreateTopics needs CREATE on the cluster or on each topic, checked after
the duplicate-name check and before the name is validated; DeleteTopics DELETE on each topic;
CreatePartitions ALTER on each topic. A refused topic answers TOPIC_AUTHORIZATION_FAILED and
ZooKeeper is not touched for it.

Newer versions (KIP-525, KIP-516): CreateTopics v5+ answers each topic made (or validated) with its
partition count, replication factor and effective configs, as DescribeConfigs would describe them
(TOPIC_AUTHORIZATION_FAILED in ``topic_config_error_code`` and no configs without DESCRIBE_CONFIGS
on the topic), and v7+ with its topic id. DeleteTopics v6 names each topic by name or by id (not
both: INVALID_REQUEST); an id the site does not know is UNKNOWN_TOPIC_ID, and a refused id is
answered without its name, so that it discloses nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node.cluster import check_topic_name
from node.config import ConfigError, NodeConfig, describe_topic_config
from node.coordination import uuid_of
from node.errors import BrokerError
from node.ids import NodeId
from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, MetadataView, SecurityServices, TopicAdmin

log = logging.getLogger("strait.node.topics")


@dataclass(frozen=True, slots=True)
class TopicServices:
    admin: TopicAdmin
    metadata: MetadataView
    config: NodeConfig
    security: SecurityServices = NO_AUTHORIZER


def _node_ids(broker_ids: list[int]) -> tuple[NodeId, ...]:
    """A replica list as the request carries it."""
    return tuple(NodeId(b) for b in broker_ids)


ZERO_UUID = uuid.UUID(int=0)  # Kafka's "no topic id"


def _result(name: str, code: int = 0, message: str | None = None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


def _created(
    services: TopicServices,
    request: Request,
    name: str,
    assignment: Mapping[int, tuple[NodeId, ...]],
    overrides: Mapping[str, str],
) -> dict[str, Any]:
    """CreateTopics v5+'s answer for a topic made or validated: its shape, configs (KIP-525) and id (v7)."""
    result = _result(name) | {
        "num_partitions": len(assignment),
        "replication_factor": len(next(iter(assignment.values()), ())),
    }
    state = services.metadata.topics.get(name)
    result["topic_id"] = uuid_of(state.topic_id) if state is not None else ZERO_UUID
    if not services.security.allowed(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
        result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result
    try:
        entries = describe_topic_config(services.config, overrides)
    except ConfigError as exc:  # validated before it was written: cannot happen, but answer rather than fail
        result["topic_config_error_code"] = ErrorCode.INVALID_CONFIG
        log.warning("CreateTopics %r: cannot describe its configs: %s", name, exc)
        return result
    result["configs"] = [
        {
            "name": e.name,
            "value": None if e.is_sensitive else e.value,
            "read_only": e.read_only,
            "config_source": int(e.source),
            "is_sensitive": e.is_sensitive,
        }
        for e in entries
    ]
    return result


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
    made = {name: (assignment, overrides) for name, assignment, overrides in ready}
    for topic in req.topics:
        name = topic.name
        error = refused.get(name) or written.get(name)
        if error is None and request.api_version >= 5:
            results.append(_created(services, request, name, *made[name]))
        elif error is None:
            results.append(_result(name))
        else:
            log.info("CreateTopics %r: %s", name, error.message)
            results.append(_result(name, error.code, error.message))
    return {"throttle_time_ms": 0, "topics": results}


async def handle_delete_topics(services: TopicServices, request: Request) -> dict[str, Any]:
    req = request.body
    named = req.topics if request.api_version >= 6 else [Struct(name=n, topic_id=ZERO_UUID) for n in req.topic_names]
    responses = []
    deleted = False
    for topic in named:
        entry: dict[str, Any] = {"name": topic.name, "topic_id": topic.topic_id, "error_code": 0}
        try:
            name = _deletable_name(services, request, topic, entry)
            await services.admin.delete_topic(name, refresh=False)
            deleted = True
        except BrokerError as exc:
            log.info("DeleteTopics %r (id %s): %s", topic.name, topic.topic_id, exc.message)
            entry["error_code"] = exc.code
            entry["error_message"] = exc.message
        responses.append(entry)
    if deleted:  # one re-read of ZooKeeper for the whole request (as CreateTopics)
        await services.admin.refresh()
    return {"throttle_time_ms": 0, "responses": responses}


def _deletable_name(services: TopicServices, request: Request, topic: Struct, entry: dict[str, Any]) -> str:
    """The name of a topic to delete, given by name or (v6) by id, once DELETE on it is allowed.

    Fills in ``entry``'s other identity (the id of a named topic, the name of an allowed id).
    Raises BrokerError: INVALID_REQUEST for both or neither, UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED.
    """
    by_id = topic.topic_id != ZERO_UUID
    if by_id == (topic.name is not None):
        raise BrokerError(ErrorCode.INVALID_REQUEST, "give each topic to delete by name or by id, not both or neither")
    topics = services.metadata.topics
    if not by_id:
        state = topics.get(topic.name)
        services.security.check(request, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        if state is not None:
            entry["topic_id"] = uuid_of(state.topic_id)
        name: str = topic.name
        return name
    found = next((n for n, state in topics.items() if uuid_of(state.topic_id) == topic.topic_id), None)
    if found is None:
        raise BrokerError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {topic.topic_id}")
    services.security.check(request, AclOperation.DELETE, ResourceType.TOPIC, found)
    entry["name"] = found
    return found


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
