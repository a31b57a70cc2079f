"""The consumer-group APIs: FindCoordinator (10) here, the rest relayed to ``node.groups``.

FindCoordinator makes ``__consumer_offsets`` on first use and answers with the broker that
leads the group's partition of it, at its address on the listener the request came in on
(COORDINATOR_NOT_AVAILABLE when that broker has no such listener, as in Kafka). Every other
group API goes to this node's ``GroupCoordinator``, which answers NOT_COORDINATOR for groups
whose partition it does not lead (clients then ask FindCoordinator again).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from node.config import NodeConfig
from node.errors import BrokerError
from node.offsets_topic import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG
from node.protocol import ErrorCode
from node.request import Request

from ._services import GroupService, MetadataView, TopicAdmin

log = logging.getLogger("strait.node.groups")

GROUP_KEY = 0


@dataclass(frozen=True, slots=True)
class GroupServices:
    coordinator: GroupService
    metadata: MetadataView
    admin: TopicAdmin
    config: NodeConfig


async def ensure_offsets_topic(services: GroupServices) -> None:
    """Create ``__consumer_offsets`` if it does not exist yet (BrokerError if it cannot be)."""
    if OFFSETS_TOPIC in services.metadata.topics:
        return
    admin = services.admin
    config = services.config
    assignment = await admin.plan(config.offsets_topic_num_partitions, config.offsets_topic_replication_factor)
    try:
        topic_config = {**OFFSETS_TOPIC_CONFIG, "segment.bytes": str(config.offsets_topic_segment_bytes)}
        await admin.create_topic(OFFSETS_TOPIC, assignment, topic_config, validate_only=False)
    except BrokerError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
        await admin.refresh()  # made concurrently (by another request or broker): pick it up


async def handle_find_coordinator(services: GroupServices, request: Request) -> dict[str, Any]:
    req = request.body
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    if request.api_version >= 1 and req.key_type != GROUP_KEY:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = "transaction coordinators are not supported by strait yet"
        return body
    try:
        await ensure_offsets_topic(services)
    except BrokerError as exc:
        log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc.message)
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"{OFFSETS_TOPIC} cannot be created: {exc.message}"
        return body
    cluster = services.metadata
    topic = cluster.topics.get(OFFSETS_TOPIC)
    if topic is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"{OFFSETS_TOPIC} is being created"
        return body
    partition = services.coordinator.partition_for(req.key)
    leader = cluster.leader_of(topic, partition)
    registration = cluster.brokers.get(leader)
    if registration is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"the leader of {OFFSETS_TOPIC}-{partition} (broker {leader}) is not live"
        return body
    # The coordinator's address on the listener this client came in on, as Metadata gives it.
    listener = request.connection.listener
    address = registration.endpoint(listener)
    if address is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"the coordinator (broker {leader}) has no listener {listener}"
        return body
    body.update(node_id=leader, host=address[0], port=address[1])
    return body


async def handle_join_group(services: GroupServices, request: Request) -> dict[str, Any]:
    client_host = f"/{request.connection.host}"
    return await services.coordinator.join_group(request.body, request.api_version, request.client_id, client_host)


def _relay(method: str) -> Callable[[GroupServices, Request], Awaitable[dict[str, Any]]]:
    """A handler that passes the request and its version to ``GroupService.<method>``."""

    async def handle(services: GroupServices, request: Request) -> dict[str, Any]:
        result: dict[str, Any] = await getattr(services.coordinator, method)(request.body, request.api_version)
        return result

    handle.__name__ = f"handle_{method}"
    return handle


handle_sync_group = _relay("sync_group")
handle_heartbeat = _relay("heartbeat")
handle_leave_group = _relay("leave_group")
handle_offset_commit = _relay("offset_commit")
handle_offset_fetch = _relay("offset_fetch")
handle_describe_groups = _relay("describe_groups")
handle_list_groups = _relay("list_groups")


async def handle_delete_groups(services: GroupServices, request: Request) -> dict[str, Any]:
    results = await services.coordinator.delete_groups(list(request.body.groups_names))
    return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": code} for g, code in results]}


async def handle_offset_delete(services: GroupServices, request: Request) -> dict[str, Any]:
    req = request.body
    partitions = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    code, results = await services.coordinator.offset_delete(req.group_id, partitions)
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition, error in results:
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return {
        "error_code": code,
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }
