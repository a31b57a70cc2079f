"""The consumer-group APIs: FindCoordinator (10) here, the rest relayed to ``node.groups``.

FindCoordinator makes ``__consumer_offsets`` on first use and answers with the broker that
leads the group's partition of it. Every other group API goes to this node's
``GroupCoordinator``, which answers NOT_COORDINATOR for groups whose partition it does not
lead (clients then ask FindCoordinator again).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from node.errors import BrokerError
from node.offsets_topic import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG
from node.protocol import ErrorCode, RequestHeader, Struct
from node.server import CURRENT_CONNECTION

if TYPE_CHECKING:
    from node.broker import Broker

log = logging.getLogger("strait.node.groups")

GROUP_KEY = 0


async def ensure_offsets_topic(broker: Broker) -> None:
    """Create ``__consumer_offsets`` if it does not exist yet (BrokerError if it cannot be)."""
    cluster = broker.cluster
    if OFFSETS_TOPIC in cluster.topics:
        return
    config = broker.config
    assignment = await cluster.plan(config.offsets_topic_num_partitions, config.offsets_topic_replication_factor)
    try:
        topic_config = {**OFFSETS_TOPIC_CONFIG, "segment.bytes": str(config.offsets_topic_segment_bytes)}
        await cluster.create_topic(OFFSETS_TOPIC, assignment, topic_config, validate_only=False)
    except BrokerError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
        await cluster.refresh()  # made concurrently (by another request or broker): pick it up


async def handle_find_coordinator(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    if header.api_version >= 1 and req.key_type != GROUP_KEY:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = "transaction coordinators are not supported by strait yet"
        return body
    try:
        await ensure_offsets_topic(broker)
    except BrokerError as exc:
        log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc.message)
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"{OFFSETS_TOPIC} cannot be created: {exc.message}"
        return body
    cluster = broker.cluster
    topic = cluster.topics.get(OFFSETS_TOPIC)
    if topic is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"{OFFSETS_TOPIC} is being created"
        return body
    partition = broker.groups.partition_for(req.key)
    leader = cluster.leader_of(topic, partition)
    registration = cluster.brokers.get(leader)
    if registration is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"the leader of {OFFSETS_TOPIC}-{partition} (broker {leader}) is not live"
        return body
    body.update(node_id=leader, host=registration.host, port=registration.port)
    return body


async def handle_join_group(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    conn = CURRENT_CONNECTION.get(None)
    client_host = f"/{conn.host}" if conn is not None else ""
    return await broker.groups.join_group(req, header.api_version, header.client_id or "", client_host)


def _relay(method: str) -> Callable[[Broker, RequestHeader, Struct], Awaitable[dict[str, Any]]]:
    """A handler that passes the request and its version to ``GroupCoordinator.<method>``."""

    async def handle(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
        result: dict[str, Any] = await getattr(broker.groups, method)(req, header.api_version)
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


async def handle_delete_groups(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    results = await broker.groups.delete_groups(list(req.groups_names))
    return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": code} for g, code in results]}


async def handle_offset_delete(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    partitions = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    code, results = await broker.groups.offset_delete(req.group_id, partitions)
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, partition, error in results:
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return {
        "error_code": code,
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }
