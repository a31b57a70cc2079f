"""The consumer-group APIs: FindCoordinator (10) here, the rest relayed to ``node.groups``.

FindCoordinator makes ``__consumer_offsets`` on first use and answers with the broker that
leads the group's partition of it (key type 1: ``__transaction_state`` and the transactional
id's partition, the transaction coordinator), at its address on the listener the request came in on
(COORDINATOR_NOT_AVAILABLE when that broker has no such listener, as in Kafka). Every other
group API goes to this node's ``GroupCoordinator``, which answers NOT_COORDINATOR for groups
whose partition it does not lead (clients then ask FindCoordinator again).

Authorisation (Kafka's table), checked before the coordinator sees the request, so a refused
request changes nothing (no group is created, no offset committed, no topic made):

| API | needs | refused with (``*`` = _AUTHORIZATION_FAILED) |
|---|---|---|
| FindCoordinator | DESCRIBE on the group (transactional id for key type 1) | GROUP* (TRANSACTIONAL_ID*) |
| JoinGroup, SyncGroup, Heartbeat, LeaveGroup | READ on the group | GROUP* |
| OffsetCommit | READ on the group, then on each topic | GROUP* / TOPIC* per partition (2) |
| OffsetFetch | DESCRIBE on the group, then on each topic | GROUP* (top level from v2) / TOPIC* (1) |
| DescribeGroups | DESCRIBE on each group | GROUP* for that group |
| ListGroups | DESCRIBE on the cluster, else lists only groups it may DESCRIBE | never an error |
| DeleteGroups | DELETE on each group | GROUP* for that group |
| OffsetDelete | DELETE on the group, then READ on each topic | GROUP* (top level) / TOPIC* per partition |
| TxnOffsetCommit | WRITE on the transactional id, READ on group and topics | TRANSACTIONAL_ID*, GROUP*, TOPIC* (2) |

(1) per partition named; when every offset is asked for, the topics it may not DESCRIBE are left out.
(2) then UNKNOWN_TOPIC_OR_PARTITION for a partition the site does not have (nothing is stored for it).

The batched versions are checked item by item: FindCoordinator v4+ key by key (a refused key answers
its own error, the others their coordinator), OffsetFetch v8+ group by group, each as the v7 request
of that one group would be.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from node.config import NodeConfig
from node.errors import BrokerError
from node.groups import partition_for
from node.offsets_topic import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG
from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from node.txn_topic import TRANSACTION_TOPIC, transaction_topic_config

from ._services import NO_AUTHORIZER, GroupService, MetadataView, SecurityServices, TopicAdmin, denied

log = logging.getLogger("strait.node.groups")

GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass(frozen=True, slots=True)
class GroupServices:
    coordinator: GroupService
    metadata: MetadataView
    admin: TopicAdmin
    config: NodeConfig
    security: SecurityServices = NO_AUTHORIZER


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


async def ensure_transaction_topic(services: GroupServices) -> None:
    """Create ``__transaction_state`` if it does not exist yet (BrokerError if it cannot be)."""
    if TRANSACTION_TOPIC in services.metadata.topics:
        return
    admin = services.admin
    config = services.config
    assignment = await admin.plan(
        config.transaction_state_log_num_partitions, config.transaction_state_log_replication_factor
    )
    try:
        await admin.create_topic(TRANSACTION_TOPIC, assignment, transaction_topic_config(config), validate_only=False)
    except BrokerError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
        await admin.refresh()


async def handle_find_coordinator(services: GroupServices, request: Request) -> dict[str, Any]:
    """FindCoordinator: one key up to v3, from v4 a batch (``coordinator_keys``) answered key by key."""
    req = request.body
    version = request.api_version
    key_type = req.key_type if version >= 1 else GROUP_KEY
    if version < 4:
        found = await _find_coordinator(services, request, req.key, key_type)
        del found["key"]
        return {"throttle_time_ms": 0, **found}
    coordinators = [await _find_coordinator(services, request, key, key_type) for key in req.coordinator_keys]
    return {"throttle_time_ms": 0, "coordinators": coordinators}


async def _find_coordinator(services: GroupServices, request: Request, key: str, key_type: int) -> dict[str, Any]:
    """The coordinator of one key: ``{key, error_code, error_message, node_id, host, port}``.

    A key type other than group (0) or transaction (1), such as KIP-932's share groups (2), is
    INVALID_REQUEST: strait has no share groups.
    """
    body: dict[str, Any] = {
        "key": key,
        "error_code": 0,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    resource = ResourceType.TRANSACTIONAL_ID if key_type == TRANSACTION_KEY else ResourceType.GROUP
    if key_type in (GROUP_KEY, TRANSACTION_KEY) and not services.security.allowed(
        request, AclOperation.DESCRIBE, resource, key
    ):
        refusal = denied(request, AclOperation.DESCRIBE, resource, key)
        body.update(error_code=refusal.code, error_message=refusal.message)
        return body
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        body["error_code"] = ErrorCode.INVALID_REQUEST
        body["error_message"] = f"unknown coordinator key type {key_type}"
        return body
    config = services.config
    if key_type == GROUP_KEY:
        internal, ensure = OFFSETS_TOPIC, ensure_offsets_topic
        partition = services.coordinator.partition_for(key)
    else:
        internal, ensure = TRANSACTION_TOPIC, ensure_transaction_topic
        partition = partition_for(key, config.transaction_state_log_num_partitions)
    try:
        await ensure(services)
    except BrokerError as exc:
        log.warning("cannot create %s: %s", internal, exc.message)
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"{internal} cannot be created: {exc.message}"
        return body
    cluster = services.metadata
    topic = cluster.topics.get(internal)
    if topic is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"{internal} is being created"
        return body
    leader = cluster.leader_of(topic, partition)
    registration = cluster.brokers.get(leader)
    if registration is None:
        body["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        body["error_message"] = f"the leader of {internal}-{partition} (broker {leader}) is not live"
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


def _may_read_group(services: GroupServices, request: Request) -> bool:
    return services.security.allowed(request, AclOperation.READ, ResourceType.GROUP, request.body.group_id)


async def handle_join_group(services: GroupServices, request: Request) -> dict[str, Any]:
    req = request.body
    if not _may_read_group(services, request):
        # Kafka's JoinGroupResult(memberId, GROUP_AUTHORIZATION_FAILED).
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "generation_id": -1,
            "protocol_name": "",
            "leader": "",
            "member_id": req.member_id,
            "members": [],
        }
    client_host = f"/{request.connection.host}"
    return await services.coordinator.join_group(req, request.api_version, request.client_id, client_host)


def _relay(method: str) -> Callable[[GroupServices, Request], Awaitable[dict[str, Any]]]:
    """A handler that passes the request and its version to ``GroupService.<method>`` once READ on the group is allowed.

    Refused, the answer is the API's body with GROUP_AUTHORIZATION_FAILED and its other fields at their defaults.
    """

    async def handle(services: GroupServices, request: Request) -> dict[str, Any]:
        if not _may_read_group(services, request):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        result: dict[str, Any] = await getattr(services.coordinator, method)(request.body, request.api_version)
        return result

    handle.__name__ = f"handle_{method}"
    return handle


handle_sync_group = _relay("sync_group")
handle_heartbeat = _relay("heartbeat")
handle_leave_group = _relay("leave_group")


def _with(req: Struct, **fields: Any) -> Struct:
    """A copy of a decoded request with some fields replaced (the coordinator sees only what was allowed)."""
    return Struct(**{**req.__dict__, **fields})


def _grouped(entries: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``[(topic, partition entry)]`` -> ``[{"name": topic, "partitions": [...]}]``, topics in first-seen order."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, entry in entries:
        topics.setdefault(topic, []).append(entry)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def _answered(body: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["name"], p["partition_index"]): p for t in body["topics"] for p in t["partitions"]}


async def handle_offset_commit(services: GroupServices, request: Request) -> dict[str, Any]:
    if not _may_read_group(services, request):
        return _refused_commit(request.body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await _commit_readable(services, request, services.coordinator.offset_commit)


def _refused_commit(req: Struct, code: ErrorCode) -> dict[str, Any]:
    """An OffsetCommit or TxnOffsetCommit answer refusing every partition with ``code``."""
    entries = [
        (t.name, {"partition_index": p.partition_index, "error_code": code}) for t in req.topics for p in t.partitions
    ]
    return {"throttle_time_ms": 0, "topics": _grouped(entries)}


async def _commit_readable(
    services: GroupServices, request: Request, commit: Callable[[Struct, int], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Pass to ``commit`` the partitions of the topics the principal may READ that the site has; refuse the others."""
    req = request.body
    version = request.api_version
    requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    security = services.security
    refused: dict[tuple[str, int], ErrorCode] = {}
    committable = []
    for t in req.topics:
        if not security.allowed(request, AclOperation.READ, ResourceType.TOPIC, t.name):
            refused.update(((t.name, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions)
            continue
        # As Kafka: a commit for a partition the site does not have is refused, never stored.
        state = services.metadata.topics.get(t.name)
        known = [p for p in t.partitions if state is not None and p.partition_index in state.assignment]
        refused.update(
            ((t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in t.partitions if p not in known
        )
        if known:
            committable.append(_with(t, partitions=known))
    if not refused:
        return await commit(req, version)
    answered: dict[tuple[str, int], dict[str, Any]] = {}
    if committable:  # nothing committable: the coordinator is not asked (a simple commit would create the group)
        answered = _answered(await commit(_with(req, topics=committable), version))
    entries = [
        (topic, answered.get((topic, p)) or {"partition_index": p, "error_code": refused[(topic, p)]})
        for topic, p in requested
    ]
    return {"throttle_time_ms": 0, "topics": _grouped(entries)}


def _unfetched(partition: int, code: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "committed_offset": -1,
        "committed_leader_epoch": -1,
        "metadata": "",
        "error_code": code,
    }


async def handle_offset_fetch(services: GroupServices, request: Request) -> dict[str, Any]:
    """OffsetFetch: one group up to v7; from v8 several, each answered as a v7 request of its own would be.

    v9's member id and epoch only matter to KIP-848 groups; a classic group's offsets are fetched without them.
    """
    req = request.body
    version = request.api_version
    if version < 8:
        return await _fetch_group(services, request, req, version)
    groups = []
    for group in req.groups:
        one = Struct(group_id=group.group_id, topics=group.topics, require_stable=req.require_stable)
        body = await _fetch_group(services, request, one, version)
        groups.append({"group_id": group.group_id, "topics": body["topics"], "error_code": body["error_code"]})
    return {"throttle_time_ms": 0, "groups": groups}


async def _fetch_group(services: GroupServices, request: Request, req: Struct, version: int) -> dict[str, Any]:
    """The v0-7 answer for one group (``req``: group_id, topics, require_stable), authorised as Kafka does."""
    security = services.security
    coordinator = services.coordinator
    if not security.allowed(request, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if version >= 2:
            return {"throttle_time_ms": 0, "topics": [], "error_code": code}
        refused = [(t.name, _unfetched(p, code)) for t in req.topics or [] for p in t.partition_indexes]
        return {"throttle_time_ms": 0, "topics": _grouped(refused), "error_code": ErrorCode.NONE}
    if req.topics is None:  # every committed offset: only of the topics the principal may DESCRIBE
        body = await coordinator.offset_fetch(req, version)
        body["topics"] = [
            t
            for t in body["topics"]
            if security.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"], log_denied=False)
        ]
        return body
    describable = [
        t for t in req.topics if security.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
    ]
    if len(describable) == len(req.topics):
        return await coordinator.offset_fetch(req, version)
    body = await coordinator.offset_fetch(_with(req, topics=describable), version)
    if body.get("error_code", ErrorCode.NONE) != ErrorCode.NONE:
        return body  # a group-level error (v2+) stands alone, as in Kafka
    answered = _answered(body)
    entries = [
        (t.name, answered.get((t.name, p), _unfetched(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
        for t in req.topics
        for p in t.partition_indexes
    ]
    body["topics"] = _grouped(entries)
    return body


async def handle_describe_groups(services: GroupServices, request: Request) -> dict[str, Any]:
    req = request.body
    security = services.security
    allowed = [g for g in req.groups if security.allowed(request, AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    operations = request.api_version >= 3 and req.include_authorized_operations
    if len(allowed) == len(req.groups) and not (operations and security.authorizer_enabled):
        # Everything allowed, and any operations asked for are every group operation: the coordinator's answer.
        return await services.coordinator.describe_groups(req, request.api_version)
    described: dict[str, dict[str, Any]] = {}
    if allowed:
        body = await services.coordinator.describe_groups(_with(req, groups=allowed), request.api_version)
        described = {entry["group_id"]: entry for entry in body["groups"]}
    groups = []
    for group_id in req.groups:
        entry = described.get(group_id)
        if entry is None:
            entry = {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": group_id}
        elif operations and entry["error_code"] == ErrorCode.NONE:
            entry = entry | {
                "authorized_operations": security.authorized_operations(request, ResourceType.GROUP, group_id)
            }
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}


async def handle_list_groups(services: GroupServices, request: Request) -> dict[str, Any]:
    security = services.security
    body: dict[str, Any] = await services.coordinator.list_groups(request.body, request.api_version)
    if not security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, log_denied=False):
        body["groups"] = [
            g
            for g in body["groups"]
            if security.allowed(request, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"], log_denied=False)
        ]
    return body


async def handle_delete_groups(services: GroupServices, request: Request) -> dict[str, Any]:
    names = list(request.body.groups_names)
    security = services.security
    allowed = [g for g in names if security.allowed(request, AclOperation.DELETE, ResourceType.GROUP, g)]
    results = await services.coordinator.delete_groups(allowed) if allowed else []
    if len(allowed) < len(names):
        codes = dict(results)
        results = [(g, codes.get(g, ErrorCode.GROUP_AUTHORIZATION_FAILED)) for g in names]
    return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": code} for g, code in results]}


async def handle_offset_delete(services: GroupServices, request: Request) -> dict[str, Any]:
    req = request.body
    security = services.security
    if not security.allowed(request, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    readable = {t.name for t in req.topics if security.allowed(request, AclOperation.READ, ResourceType.TOPIC, t.name)}
    requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    allowed = [tp for tp in requested if tp[0] in readable]
    code, results = await services.coordinator.offset_delete(req.group_id, allowed)
    if code != ErrorCode.NONE:
        return {"error_code": code, "throttle_time_ms": 0, "topics": []}
    if len(allowed) < len(requested):
        answered = {(topic, partition): error for topic, partition, error in results}
        refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        results = [(topic, p, answered.get((topic, p), refused)) for topic, p in requested]
    entries = [(topic, {"partition_index": p, "error_code": error}) for topic, p, error in results]
    return {"error_code": code, "throttle_time_ms": 0, "topics": _grouped(entries)}


async def handle_txn_offset_commit(services: GroupServices, request: Request) -> dict[str, Any]:
    """TxnOffsetCommit (28): WRITE on the transactional id, READ on the group, then READ on each topic."""
    req = request.body
    if not services.security.allowed(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return _refused_commit(req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not _may_read_group(services, request):
        return _refused_commit(req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await _commit_readable(services, request, services.coordinator.txn_offset_commit)
