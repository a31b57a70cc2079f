"""What the request handlers need from the rest of the node, one small protocol per area.

A handler module depends on these protocols and on ``node.request.Request``, never on the
broker, the server or another handler, so each one can be read and tested with a fake of the
few calls it makes. ``node.broker`` binds the real objects (``ClusterState`` is the partition
source, the metadata view and the topic admin; ``GroupCoordinator``, ``Controller``,
``ReplicaManager``, ``ProducerIdAllocator`` and ``NodeMetrics`` the rest) in
``node.handlers.dispatch_table``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from node.ids import NodeId
from node.protocol import Struct

if TYPE_CHECKING:
    from node.cluster import TopicState
    from node.coordination import BrokerRegistration
    from node.partition import Partition
    from node.truncation import Outcome
    from storage import Offset

Assignment = dict[int, tuple[NodeId, ...]]


class PartitionSource(Protocol):
    """Log access: the local replica of a partition."""

    def partition(self, topic: str, index: int) -> Partition:
        """The local replica if this node leads it; BrokerError with Kafka's code otherwise."""
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


class TopicAdmin(Protocol):
    """Changes to topics, written to ZooKeeper; each raises BrokerError naming what is wrong."""

    async def refresh(self) -> None: ...

    async def plan(self, partitions: int, replication_factor: int) -> Assignment: ...

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]: ...

    async def create_topic(
        self, name: str, assignment: Assignment, configs: Mapping[str, str], *, validate_only: bool, refresh: bool = ...
    ) -> object: ...

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

    async def describe_groups(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def list_groups(self, req: Struct, version: int) -> dict[str, Any]: ...

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]: ...

    async def offset_delete(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, list[tuple[str, int, int]]]: ...


class ControllerService(Protocol):
    """This node's controller role."""

    @property
    def active(self) -> bool: ...

    async def controlled_shutdown(self, broker_id: NodeId) -> list[tuple[str, int]]: ...

    async def truncate_partitions(self, cuts: dict[tuple[str, int], int], timeout: float) -> Mapping[Any, Outcome]:
        """Record truncations to a cut (``node.truncation``); an outcome per partition."""
        ...


class FollowerTracker(Protocol):
    """The leader side of replication: a follower's fetch tells where its log ends."""

    def follower_fetched(self, partition: Partition, replica_id: NodeId, fetch_offset: Offset) -> None: ...


class ProducerIdSource(Protocol):
    async def next_id(self) -> int: ...


class RequestMetrics(Protocol):
    def record_error(self, api: str, error: str) -> None: ...

    def observe_produce(self, seconds: float) -> None: ...

    def observe_fetch(self, seconds: float) -> None: ...
