"""What the request handlers need from the rest of the node, one small protocol per area.

A handler module depends on these protocols and on ``node.request.Request``, never on the
broker, the server or another handler, so each one can be read and tested with a fake of the
few calls it makes. ``node.broker`` binds the real objects (``ClusterState`` is the partition
source, the metadata view and the topic admin; ``GroupCoordinator``, ``TransactionCoordinator``,
``Controller``, ``ReplicaManager``, ``ProducerIdAllocator`` and ``NodeMetrics`` the rest) in
``node.handlers.dispatch_table``.

Authorisation is the one thing here that is not a protocol: every handler asks the same
``SecurityServices.allowed`` (Kafka's ``AuthHelper.authorize``), which stands here rather than in
a module of its own because a handler imports nothing of this package but this module.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from node.errors import BrokerError
from node.ids import NodeId
from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import CLUSTER_NAME, AclOperation, ResourceType
from node.security._store import SecurityStore

if TYPE_CHECKING:
    from node.cluster import TopicState
    from node.coordination import BrokerRegistration, PartitionState
    from node.partition import Partition
    from node.truncation import Outcome
    from node.txn import InitResult, TxnDescription
    from storage import DirUsage, Offset, TopicPartition

Assignment = dict[int, tuple[NodeId, ...]]


class PartitionSource(Protocol):
    """Log access: the local replica of a partition."""

    def partition(self, topic: str, index: int, *, leader: bool = True) -> Partition:
        """The local replica, by default only if this node leads it; BrokerError with Kafka's code otherwise."""
        ...


class MetadataView(Protocol):
    """The site as this node last read it from ZooKeeper."""

    @property
    def broker_id(self) -> NodeId: ...

    @property
    def topics(self) -> Mapping[str, TopicState]: ...

    @property
    def brokers(self) -> Mapping[NodeId, BrokerRegistration]: ...

    @property
    def controller(self) -> tuple[NodeId, int] | None:
        """(broker id, controller epoch) of the active controller, None while there is none."""
        ...

    @property
    def offline_replicas(self) -> Mapping[NodeId, frozenset[tuple[str, int]]]: ...

    def leader_of(self, topic: TopicState, index: int) -> NodeId: ...


class PushedStateSink(Protocol):
    """Where a controller's PartitionStates go: ``ClusterState.apply_pushed``."""

    def apply_pushed(
        self, controller_epoch: int, pushed: Mapping[str, tuple[str, Mapping[int, PartitionState]]]
    ) -> int: ...


class TopicAdmin(Protocol):
    """Changes to topics, written to ZooKeeper; each raises BrokerError naming what is wrong."""

    async def refresh(self) -> None: ...

    async def plan(self, partitions: int, replication_factor: int) -> Assignment: ...

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]: ...

    async def create_topic(
        self, name: str, assignment: Assignment, configs: Mapping[str, str], *, validate_only: bool, refresh: bool = ...
    ) -> object: ...

    async def create_topics(
        self, topics: Sequence[tuple[str, Assignment, Mapping[str, str]]], *, validate_only: bool
    ) -> Mapping[str, BrokerError | None]: ...

    async def delete_topic(self, name: str, *, refresh: bool = ...) -> None: ...

    async def add_partitions(
        self, name: str, count: int, assignments: list[tuple[NodeId, ...]] | None, *, validate_only: bool
    ) -> None: ...

    async def set_topic_config(self, name: str, overrides: Mapping[str, str], *, validate_only: bool) -> None: ...


class GroupService(Protocol):
    """The group coordinator: each call answers one group API's response body."""

    def partition_for(self, group_id: str) -> int: ...

    async def join_group(self, req: Struct, version: int, client_id: str, client_host: str) -> dict[str, Any]: ...

    async def sync_group(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def heartbeat(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def leave_group(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def offset_commit(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def offset_fetch(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def txn_offset_commit(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def describe_groups(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def list_groups(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]: ...

    async def offset_delete(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, list[tuple[str, int, int]]]: ...


class TransactionService(Protocol):
    """The transaction coordinator (``node.txn.TransactionCoordinator``): errors are Kafka codes, never raised."""

    def partition_for(self, transactional_id: str) -> int: ...

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_producer_id: int, expected_epoch: int
    ) -> InitResult: ...

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> ErrorCode: ...

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode: ...

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]: ...

    def list_transactions(
        self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int
    ) -> tuple[ErrorCode, list[str], list[tuple[str, int, str]]]: ...


class ControllerService(Protocol):
    """This node's controller role."""

    @property
    def active(self) -> bool: ...

    async def controlled_shutdown(self, broker_id: NodeId) -> list[tuple[str, int]]: ...

    async def elect_leaders(
        self, partitions: list[tuple[str, int]] | None, *, unclean: bool
    ) -> Mapping[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Preferred or unclean elections (``Controller.elect_leaders``); an outcome per partition."""
        ...

    async def truncate_partitions(self, cuts: dict[tuple[str, int], int], timeout: float) -> Mapping[Any, Outcome]:
        """Record truncations to a cut (``node.truncation``); an outcome per partition."""
        ...

    async def alter_reassignments(
        self, changes: dict[tuple[str, int], tuple[NodeId, ...] | None], *, allow_replication_factor_change: bool
    ) -> Mapping[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Start, change or cancel partition moves (``Controller.alter_reassignments``)."""
        ...

    async def list_reassignments(
        self, partitions: list[tuple[str, int]] | None
    ) -> Mapping[tuple[str, int], tuple[tuple[NodeId, ...], tuple[NodeId, ...], tuple[NodeId, ...]]]:
        """Partitions being moved: (replicas, adding, removing) each (``Controller.list_reassignments``)."""
        ...


class FollowerTracker(Protocol):
    """The leader side of replication: a follower's fetch tells where its log ends."""

    def follower_fetched(self, partition: Partition, replica_id: NodeId, fetch_offset: Offset) -> None: ...


class ProducerIdSource(Protocol):
    async def next_id(self) -> int: ...


class LogDirSource(Protocol):
    """This node's log dirs and what each holds (``storage.LogManager``)."""

    def describe_dirs(self) -> list[DirUsage]: ...

    def alter_replica_dir(self, tp: TopicPartition, path: str) -> bool:
        """Move a replica to another log dir, online (``LogManager.alter_replica_dir``)."""
        ...


class RequestMetrics(Protocol):
    def record_error(self, api: str, error: str) -> None: ...

    def observe_produce(self, seconds: float) -> None: ...

    def observe_fetch(self, seconds: float) -> None: ...

    def observe_replica_wakeup(self, seconds: float) -> None: ...

    def fetch_sessions(self, sessions: int, partitions: int) -> None:
        """The fetch session cache's size now (``node.fetch_sessions.SessionMetrics``)."""
        ...

    def fetch_session_evicted(self) -> None: ...

    def fetch_by_session(self, kind: str) -> None: ...


# -- leader hints (KIP-951) ------------------------------------------------------------------------------------------
#
# Produce v10+ and Fetch v12+ answer a NOT_LEADER_OR_FOLLOWER (Fetch also FENCED_LEADER_EPOCH) with the
# partition's current leader and epoch as this node last read them (``current_leader``), and from
# Produce v10 / Fetch v16 with that leader's address on the listener the request came in on
# (``node_endpoints``), so that a client goes straight to the new leader instead of first asking for
# Metadata. A hint is only a hint: without a known leader, or without an address on the listener, the
# fields stay at their defaults (absent from the answer) and the client refreshes its metadata as before.


def leader_hint(view: MetadataView | None, topic: str, index: int, listener: str) -> tuple[Any, Any]:
    """(``current_leader`` value, ``node_endpoints`` entry) for ``topic``-``index``; None for what is not known."""
    if view is None:
        return None, None
    state = view.topics.get(topic)
    partition = state.states.get(index) if state is not None else None
    if partition is None or partition.leader < 0:
        return None, None
    current = {"leader_id": partition.leader, "leader_epoch": partition.leader_epoch}
    registration = view.brokers.get(partition.leader)
    found = registration.endpoint(listener) if registration is not None else None
    if registration is None or found is None:
        return current, None
    host, port = found
    return current, {"node_id": partition.leader, "host": host, "port": port, "rack": registration.rack}


def add_endpoint(endpoints: dict[int, Any], endpoint: Any) -> None:
    """Collect ``endpoint`` once per node for the answer's ``node_endpoints``."""
    if endpoint is not None:
        endpoints.setdefault(endpoint["node_id"], endpoint)


# -- authorisation ----------------------------------------------------------------------------------------------------

log = logging.getLogger("strait.node.authorizer")

# The operations an ACL may grant on each resource type (Kafka's ``AclEntry.supportedOperations``):
# what ``authorized_operations`` reports on, and nothing else.
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

# The error a denied operation on a resource of each type answers (Kafka's ``*AuthorizationException``s).
DENIED_CODES: Mapping[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


@dataclass(frozen=True, slots=True)
class SecurityServices:
    """Where the site keeps ACLs and SCRAM credentials, and whether this node authorises requests.

    ``store`` is None when no security store is wired; ``authorizer_enabled`` is whether
    ``authorizer.class.name`` is set. Without an authorizer every request is allowed, as in Kafka;
    with one, every decision is ``store.authorizer``'s (super users, ACLs,
    ``allow.everyone.if.no.acl.found``). Raises ValueError for an authorizer without a store: a
    node that cannot read its ACLs must not start serving as if it had none.
    """

    store: SecurityStore | None = None
    authorizer_enabled: bool = False

    def __post_init__(self) -> None:
        if self.authorizer_enabled and self.store is None:
            raise ValueError("authorizer.class.name is set but no security store is wired to read the ACLs from")

    def allowed(
        self,
        request: Request,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
        *,
        log_denied: bool = True,
    ) -> bool:
        """May the request's principal, from the request's host, perform ``operation`` on the named resource.

        A denial is logged (as Kafka's authorizer logger does) unless ``log_denied`` is False:
        for checks that only filter what an answer shows, or that have a fallback.
        """
        if self.store is None or not self.authorizer_enabled:
            return True
        host = request.connection.host
        decision = self.store.authorizer.authorize(request.principal, host, operation, resource_type, name)
        if not decision and log_denied:
            log.info(
                "principal %s from %s denied %s on %s %r (API key %d, client %r)",
                request.principal,
                host,
                operation.name,
                resource_type.name,
                name,
                request.header.api_key,
                request.client_id,
            )
        return decision

    def allowed_on_some(self, request: Request, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the principal perform ``operation`` on at least one resource of ``resource_type`` (KIP-679)."""
        if self.store is None or not self.authorizer_enabled:
            return True
        return self.store.authorizer.authorize_by_resource_type(
            request.principal, request.connection.host, operation, resource_type
        )

    def check(
        self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> None:
        """Raise BrokerError with Kafka's code for ``resource_type`` unless ``allowed``, naming what is missing."""
        if not self.allowed(request, operation, resource_type, name):
            raise denied(request, operation, resource_type, name)

    def authorized_operations(self, request: Request, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``op`` set for each supported operation the principal may perform."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.allowed(request, operation, resource_type, name, log_denied=False):
                bits |= 1 << operation
        return bits


NO_AUTHORIZER = SecurityServices()  # a node without authorizer.class.name: everything is allowed


def denied(
    request: Request, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
) -> BrokerError:
    """The BrokerError for a denied operation: Kafka's code for the resource type, naming principal and resource."""
    what = "the cluster" if resource_type is ResourceType.CLUSTER else f"{resource_type.name.lower()} {name!r}"
    return BrokerError(
        DENIED_CODES.get(resource_type, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        f"{request.principal} is not authorized to {operation.name} {what}",
    )
