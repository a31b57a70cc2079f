"""ApiVersions (18), Metadata (3), with ``auto.create.topics.enable``, and DescribeCluster (60).

Metadata answers with the addresses of the listener the request came in on, as Kafka does: a
client bootstrapped on ``WAN`` learns every broker's ``WAN`` endpoint, and a broker without that
listener is left out of the broker list; a partition it leads has no leader for this client
(LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before).

Authorisation (Kafka's ``handleTopicMetadataRequest``): a topic the principal may not DESCRIBE
is left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named, without
looking whether it exists. Auto-creating a named topic needs CREATE on the cluster or on the
topic; without either the topic answers TOPIC_AUTHORIZATION_FAILED and nothing is created.
``include_*_authorized_operations`` (v8) are answered with KIP-430's bit fields; the cluster's
is 0 without DESCRIBE on the cluster, as in Kafka.

From v10 each topic carries its topic id (KIP-516), so a client can tell a topic re-created under
the same name from the one deleted; a topic asked for by id (name null) that no topic has answers
UNKNOWN_TOPIC_ID. Asking by id does not auto-create. v9 and later are flexible (KIP-482).

DescribeCluster (KIP-700; what Kafka's Admin 4.x asks ``describeCluster`` with) answers what
Metadata answers of the cluster: its id, the controller, and every live broker on the request's
listener. It needs no permission; the cluster's authorized operations, when asked for, are 0 without
DESCRIBE on the cluster, as Metadata's. strait's nodes are brokers: v1's endpoint type must be
broker (1), else MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers; no broker is ever fenced (v2).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from node.config import NodeConfig
from node.coordination import uuid_of
from node.errors import BrokerError
from node.ids import NodeId
from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import CLUSTER_NAME, AclOperation, ResourceType

from ._services import NO_AUTHORIZER, MetadataView, SecurityServices, TopicAdmin

if TYPE_CHECKING:
    from node.cluster import TopicState

log = logging.getLogger("strait.node.metadata")

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # Kafka: "not requested"
ZERO_UUID = uuid.UUID(int=0)  # Kafka's "no topic id"


class PartitionAnswers:
    """Each topic's partition list as Metadata answers it, kept until something it depends on changes.

    A Metadata request for all topics built a dict per partition every time: at thousands of
    partitions that was most of the request's time, on the one thread that serves every client.
    An answer depends on the topic's state (the re-read keeps the same ``TopicState`` object while
    the topic does not change, so identity tells), the live brokers, the offline replicas, the
    addresses on the request's listener and whether the version knows LISTENER_NOT_FOUND (v6). The
    lists handed out are shared between answers: nothing may change them.
    """

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str, bool], tuple[object, object, object, object, list[dict[str, Any]]]] = {}

    def partitions(
        self,
        state: TopicState,
        cluster: MetadataView,
        listener: str,
        version: int,
        addresses: Mapping[NodeId, tuple[str, int]],
    ) -> list[dict[str, Any]]:
        key = (state.name, listener, version >= 6)
        found = self._answers.get(key)
        brokers = frozenset(cluster.brokers)
        if (
            found is not None
            and found[0] is state
            and found[1] == brokers
            and found[2] == cluster.offline_replicas
            and found[3] == addresses
        ):
            return found[4]
        answer = _partitions(state, cluster, version, addresses)
        self._answers[key] = (state, brokers, dict(cluster.offline_replicas), dict(addresses), answer)
        return answer

    def prune(self, topics: Mapping[str, object]) -> None:
        """Forget the answers of deleted topics (now and then: not on every request)."""
        if len(self._answers) > 2 * len(topics) + 64:
            self._answers = {key: found for key, found in self._answers.items() if key[0] in topics}


@dataclass(frozen=True, slots=True)
class MetadataServices:
    metadata: MetadataView
    admin: TopicAdmin
    config: NodeConfig
    cluster_id: str
    api_ranges: Mapping[int, tuple[int, int]]
    security: SecurityServices = NO_AUTHORIZER
    answers: PartitionAnswers = field(default_factory=PartitionAnswers)


async def handle_api_versions(services: MetadataServices, request: Request) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(services.api_ranges.items())
        ],
        "throttle_time_ms": 0,
    }


async def handle_metadata(services: MetadataServices, request: Request) -> dict[str, Any]:
    req = request.body
    cluster = services.metadata
    version = request.api_version
    unknown_ids: list[uuid.UUID] = []
    if req.topics is None or (version == 0 and not req.topics):
        names = sorted(cluster.topics)
        requested_all = True
    else:
        names = []
        for t in req.topics:
            if t.name is not None:
                names.append(t.name)
                continue
            # v10+: asked for by topic id (KIP-516); an id no topic has answers UNKNOWN_TOPIC_ID.
            named = next((n for n, state in cluster.topics.items() if uuid_of(state.topic_id) == t.topic_id), None)
            if named is None:
                unknown_ids.append(t.topic_id)
            else:
                names.append(named)
        requested_all = False
    auto_create = services.config.auto_create_topics_enable and (version < 4 or req.allow_auto_topic_creation)
    security = services.security
    describable = {
        name
        for name in names
        if security.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=not requested_all)
    }
    if requested_all:
        names = [name for name in names if name in describable]
    missing = [n for n in names if n in describable and n not in cluster.topics] if auto_create else []
    uncreatable = set(missing) - _creatable(services, request, missing)
    operations = version >= 8 and req.include_topic_authorized_operations
    listener = request.connection.listener
    addresses = {
        b: found for b, reg in sorted(cluster.brokers.items()) if (found := reg.endpoint(listener)) is not None
    }
    topics = []
    for name in names:
        if name not in describable or name in uncreatable:
            # Existence is not disclosed: the same answer whether or not the topic exists.
            topics.append(
                {
                    "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "name": name,
                    "is_internal": name == OFFSETS_TOPIC and name in describable,
                    "partitions": [],
                    "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                }
            )
            continue
        code = ErrorCode.NONE
        if name not in cluster.topics and not requested_all:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if auto_create:
                code = await _auto_create(services, name)
        state = cluster.topics.get(name)
        partitions: list[dict[str, Any]] = []
        if state is not None and code == ErrorCode.NONE:
            partitions = services.answers.partitions(state, cluster, listener, version, addresses)
        topics.append(
            {
                "error_code": code,
                "name": name,
                "topic_id": uuid_of(state.topic_id) if state is not None else ZERO_UUID,
                "is_internal": name == OFFSETS_TOPIC,
                "partitions": partitions,
                "topic_authorized_operations": (
                    security.authorized_operations(request, ResourceType.TOPIC, name)
                    if operations
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
            }
        )
    for topic_id in unknown_ids:
        topics.append(
            {
                "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                "name": None,
                "topic_id": topic_id,
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    services.answers.prune(cluster.topics)
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if version >= 8 and req.include_cluster_authorized_operations:
        cluster_operations = (
            security.authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)
            if security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER)
            else 0
        )
    brokers = [
        {"node_id": b, "host": host, "port": port, "rack": cluster.brokers[b].rack}
        for b, (host, port) in addresses.items()
    ]
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": services.cluster_id,
        "controller_id": cluster.controller[0] if cluster.controller is not None else -1,
        "topics": topics,
        "cluster_authorized_operations": cluster_operations,
    }


BROKER_ENDPOINT = 1  # DescribeCluster's endpoint types (KIP-919): 1 broker, 2 controller


async def handle_describe_cluster(services: MetadataServices, request: Request) -> dict[str, Any]:
    req = request.body
    cluster = services.metadata
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINT,
        "cluster_id": services.cluster_id,
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
    if request.api_version >= 1 and req.endpoint_type != BROKER_ENDPOINT:
        body["error_code"] = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        body["error_message"] = (
            f"the request was sent to an endpoint of type broker ({BROKER_ENDPOINT}), "
            f"but it wants endpoint type {req.endpoint_type}"
        )
        return body
    listener = request.connection.listener
    for broker_id, registration in sorted(cluster.brokers.items()):
        address = registration.endpoint(listener)
        if address is not None:
            body["brokers"].append(
                {"broker_id": broker_id, "host": address[0], "port": address[1], "rack": registration.rack}
            )
    body["controller_id"] = cluster.controller[0] if cluster.controller is not None else -1
    if req.include_cluster_authorized_operations:
        security = services.security
        body["cluster_authorized_operations"] = (
            security.authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)
            if security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER)
            else 0
        )
    return body


def _partitions(
    state: TopicState, cluster: MetadataView, version: int, addresses: Mapping[NodeId, tuple[str, int]]
) -> list[dict[str, Any]]:
    """The topic's partitions as Metadata answers them on a listener with ``addresses``."""
    name = state.name
    partitions = []
    for p in sorted(state.assignment):
        replicas = list(state.assignment[p])
        part_state = state.states.get(p)
        isr = list(part_state.isr) if part_state is not None else replicas
        leader = cluster.leader_of(state, p)
        offline = [
            b
            for b in replicas
            if (b not in cluster.brokers and b != cluster.broker_id) or (name, p) in cluster.offline_replicas.get(b, ())
        ]
        unavailable = leader < 0 or leader in offline
        error = ErrorCode.LEADER_NOT_AVAILABLE if unavailable else ErrorCode.NONE
        if not unavailable and leader not in addresses:
            unavailable = True
            error = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append(
            {
                "error_code": error,
                "partition_index": p,
                "leader_id": -1 if unavailable else leader,
                "leader_epoch": part_state.leader_epoch if part_state is not None else -1,
                "replica_nodes": replicas,
                "isr_nodes": isr,
                "offline_replicas": offline,
            }
        )
    return partitions


def _creatable(services: MetadataServices, request: Request, missing: list[str]) -> frozenset[str]:
    """Those of the ``missing`` topics the principal may auto-create: CREATE on the cluster, else on each topic."""
    security = services.security
    if not missing or security.allowed(request, AclOperation.CREATE, ResourceType.CLUSTER, log_denied=False):
        return frozenset(missing)
    return frozenset(
        name for name in missing if security.allowed(request, AclOperation.CREATE, ResourceType.TOPIC, name)
    )


async def _auto_create(services: MetadataServices, name: str) -> ErrorCode:
    admin = services.admin
    config = services.config
    try:
        assignment = await admin.plan(config.num_partitions, config.default_replication_factor)
        await admin.create_topic(name, assignment, {}, validate_only=False)
    except BrokerError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        log.info("auto-creating topic %r failed: %s", name, exc.message)
        return exc.code
    log.info("auto-created topic %s (%d partitions)", name, config.num_partitions)
    return ErrorCode.NONE
