"""The admin API's read-only view of a running broker (``node.admin_http.AdminView``).

Every call reads the broker's in-memory state afresh: ZooKeeper's picture of the cluster as the
last refresh left it (``ClusterState.topics``, ``.brokers``, ``.controller``, ``.offline_replicas``),
this node's replicas (``ClusterState.partitions``), the controller and the replica manager.
Nothing here blocks, awaits or changes state.

Replication state of one partition, as reported by ``topics()`` and counted by ``cluster()``:

- ``leader``, ``leader_epoch``, ``isr``: the partition state in ZooKeeper. When this node leads the
  partition and has already written a newer ISR itself (its compare-and-set succeeded but the
  watch has not brought the new state back yet), that newer ISR.
- ``role``: what this node's replica acts as (``leader``, ``follower``, ``none``), or None
  when no replica of the partition is assigned to this node.
- ``under_replicated``: the ISR is smaller than the replica list.
- ``offline``: the partition has no live leader: none was elected (leader -1), or the leader
  is not registered in ZooKeeper, or its replica sits on a failed log dir. This is how the
  controller decides it (Kafka's OfflinePartitionsCount), so during the seconds between a
  leader's death and the election the partition counts as offline.
- ``followers`` (leader only): each follower's log end offset as its last fetch told it, and how
  long ago it was last caught up with the leader's log end (for ISR members, at most since this
  node became leader); None where not known yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from node.cluster import ClusterState, TopicState
from node.config import NodeConfig
from node.groups import GroupSnapshot
from node.ids import NodeId
from node.partition import LEADER, Partition
from storage import LogDirOfflineError, TopicPartition, wall_clock_ms

__all__ = ["BrokerView"]


@dataclass(frozen=True, slots=True)
class _Replication:
    """One partition's replication state as this node sees it (see the module docstring)."""

    topic: str
    partition: int
    leader: NodeId
    leader_epoch: int
    replicas: tuple[NodeId, ...]
    isr: tuple[NodeId, ...]
    offline: bool
    local: Partition | None

    @property
    def role(self) -> str | None:
        return self.local.role if self.local is not None else None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def led_here(self) -> bool:
        return self.local is not None and self.local.role == LEADER


class ControllerRole(Protocol):
    @property
    def active(self) -> bool: ...


class ReplicaFetchStats(Protocol):
    @property
    def fetch_errors(self) -> int: ...


class GroupsView(Protocol):
    def group_ids(self) -> list[str]: ...

    def describe(self, group_id: str) -> GroupSnapshot | None: ...


class BrokerView:
    """``AdminView`` over the parts of a running node; ``clock`` gives wall-clock milliseconds
    (the partitions' clock), ``status`` the node's life stage (starting, ok, stopping) and
    ``listeners`` each listener's advertised host:port, the first being the bootstrap address."""

    def __init__(
        self,
        *,
        config: NodeConfig,
        cluster_id: str,
        cluster: ClusterState | None,
        controller: ControllerRole,
        replicas: ReplicaFetchStats,
        groups: GroupsView,
        status: Callable[[], str],
        listeners: Mapping[str, str] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._config = config
        self._listeners = dict(listeners or {})
        self._cluster_id = cluster_id
        self._cluster = cluster
        self._controller = controller
        self._replicas = replicas
        self._groups = groups
        self._status = status
        self._clock = clock

    # -- health and the cluster ---------------------------------------------------------------

    def health(self) -> dict[str, object]:
        status = self._status()
        offline: list[str] = []
        controller_id = -1
        if self._cluster is not None:
            offline = [str(p) for p in self._cluster.logs.offline_dirs()]
            if status == "ok" and offline:
                status = "degraded"
            if self._cluster.controller is not None:
                controller_id = self._cluster.controller[0]
        return {
            "status": status,
            "broker_id": self._config.broker_id,
            "cluster_id": self._cluster_id,
            "offline_log_dirs": offline,
            "controller_id": controller_id,
            "is_controller": self._controller.active,
            "bootstrap": next(iter(self._listeners.values()), None),
            "listeners": dict(self._listeners),
        }

    def cluster(self) -> dict[str, object]:
        controller: dict[str, object] | None = None
        live: list[NodeId] = []
        partitions = leaders = under_replicated = under_replicated_led = offline = 0
        if self._cluster is not None:
            cluster = self._cluster
            if cluster.controller is not None:
                controller = {"broker_id": cluster.controller[0], "epoch": cluster.controller[1]}
            live = sorted(cluster.brokers)
            for state in self._replication(cluster):
                partitions += 1
                leaders += state.led_here
                under_replicated += state.under_replicated
                under_replicated_led += state.led_here and state.under_replicated
                offline += state.offline
        return {
            "broker_id": self._config.broker_id,
            "controller": controller,
            "is_controller": self._controller.active,
            "live_brokers": live,
            "partitions": partitions,
            "leaders": leaders,
            "under_replicated": under_replicated,
            "under_replicated_led": under_replicated_led,
            "offline": offline,
            "replica_fetch_errors": self._replicas.fetch_errors,
        }

    # -- topics -----------------------------------------------------------------------------------

    def topics(self) -> list[dict[str, object]]:
        if self._cluster is None:
            return []
        cluster = self._cluster
        by_topic: dict[str, list[dict[str, object]]] = {}
        for state in self._replication(cluster):
            by_topic.setdefault(state.topic, []).append(self._partition_entry(state))
        return [
            {
                "name": name,
                "topic_id": cluster.topics[name].topic_id,
                "partitions": by_topic.get(name, []),
                "configs": cluster.topics[name].overrides,
            }
            for name in sorted(cluster.topics)
        ]

    def _replication(self, cluster: ClusterState) -> Iterator[_Replication]:
        """Every partition of every topic in ZooKeeper, topics by name and partitions by index."""
        for name in sorted(cluster.topics):
            topic = cluster.topics[name]
            for p in sorted(topic.assignment):
                yield self._replication_of(cluster, topic, p)

    def _replication_of(self, cluster: ClusterState, topic: TopicState, p: int) -> _Replication:
        replicas = tuple(topic.assignment[p])
        local = cluster.partitions.get(TopicPartition(topic.name, p))
        state = topic.states.get(p)
        if state is None:
            # Written with the topic in one transaction, so absent only while the topic is created or deleted.
            leader, epoch, isr = cluster.leader_of(topic, p), -1, replicas
        else:
            leader, epoch, isr = state.leader, state.leader_epoch, state.isr
            if (
                local is not None
                and local.role == LEADER
                and local.leader_epoch == state.leader_epoch
                and local.state_version > state.version
            ):
                isr = local.isr  # this node's own ISR write, not yet read back from ZooKeeper
        offline = (
            leader < 0
            or leader not in cluster.brokers
            or (topic.name, p) in cluster.offline_replicas.get(leader, frozenset())
        )
        return _Replication(topic.name, p, leader, epoch, replicas, tuple(isr), offline, local)

    def _partition_entry(self, state: _Replication) -> dict[str, object]:
        entry: dict[str, object] = {
            "partition": state.partition,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "replicas": list(state.replicas),
            "isr": list(state.isr),
            "role": state.role,
            "under_replicated": state.under_replicated,
            "offline": state.offline,
            "followers": [],
            "log_start_offset": None,
            "high_watermark": None,
            "log_end_offset": None,
            "size_bytes": None,
            "log_dir": None,
            "online": not state.offline,
        }
        local = state.local
        if local is None:
            return entry
        plog = local.log
        entry["log_dir"] = str(plog.dir.parent)
        if plog.is_offline:
            entry["online"] = False  # its offsets are not readable any more: reported as unknown
            return entry
        try:
            entry.update(
                log_start_offset=plog.log_start_offset,
                high_watermark=plog.high_watermark,
                log_end_offset=plog.log_end_offset,
                size_bytes=plog.size_bytes,
            )
        except LogDirOfflineError:
            entry.update(log_start_offset=None, high_watermark=None, log_end_offset=None, size_bytes=None, online=False)
            return entry
        if state.led_here:
            entry["followers"] = self._followers(local)
        return entry

    def _followers(self, leader: Partition) -> list[dict[str, object]]:
        now = self._clock()
        out: list[dict[str, object]] = []
        for broker_id, follower in sorted(leader.followers.items()):
            # -1 and 0 are FollowerState's "not yet": no fetch seen, never caught up.
            caught_up = follower.last_caught_up_ms
            out.append(
                {
                    "broker_id": broker_id,
                    "log_end_offset": follower.leo if follower.leo >= 0 else None,
                    "caught_up_ms_ago": max(0, now - caught_up) if caught_up > 0 else None,
                }
            )
        return out

    # -- log dirs and groups ----------------------------------------------------------------------

    def log_dirs(self) -> list[dict[str, object]]:
        if self._cluster is None:
            return []
        out: list[dict[str, object]] = []
        moves = self._cluster.logs.moves()
        for d in self._cluster.logs.dirs:
            size: int | None = None
            if d.online:
                size = 0
                for plog in list(d.logs.values()):
                    try:
                        size += plog.size_bytes
                    except LogDirOfflineError:
                        continue
            moving_in = [m for m in moves if m.target == d.path]
            out.append(
                {
                    "path": str(d.path),
                    "online": d.online,
                    "bytes": size,
                    "partitions": len(d.logs),
                    # replicas being moved into this dir (AlterReplicaLogDirs) and how far their copies lag
                    "moves_in": [
                        {"topic": m.tp.topic, "partition": m.tp.partition, "offset_lag": m.offset_lag}
                        for m in moving_in
                    ],
                }
            )
        return out

    def groups(self) -> list[dict[str, object]]:
        if self._cluster is None:
            return []
        out: list[dict[str, object]] = []
        for group_id in self._groups.group_ids():
            snap = self._groups.describe(group_id)
            if snap is None:
                continue
            offsets: list[dict[str, object]] = []
            for (topic, partition), (committed, _metadata) in sorted(snap.offsets.items()):
                local = self._cluster.partitions.get(TopicPartition(topic, partition))
                end = local.log.high_watermark if local is not None else None
                offsets.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "committed": committed,
                        "log_end": end,
                        "lag": max(0, end - committed) if end is not None else None,
                    }
                )
            out.append(
                {
                    "group_id": snap.group_id,
                    "state": snap.state,
                    "protocol_type": snap.protocol_type,
                    "protocol": snap.protocol,
                    "generation": snap.generation,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "assignment": None if m.assignment is None else [f"{t}-{p}" for t, p in m.assignment],
                        }
                        for m in snap.members
                    ],
                    "offsets": offsets,
                }
            )
        return out
