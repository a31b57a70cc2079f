"""What this node knows of the cluster (from ZooKeeper) and the partitions it hosts.

ZooKeeper is the source of truth for topics, their replica assignments and config
overrides, and live brokers. ``refresh`` reads it and reconciles the local state: a log for
each partition assigned to this broker (created if missing), configs applied, logs of topics
deleted in ZooKeeper removed. It runs at startup, after every admin change made here, and
whenever a ZooKeeper watch fires. Topic admin operations (create, delete, add partitions,
alter configs) write ZooKeeper first, then refresh.

A log found on disk for a topic that ZooKeeper does not know is left alone and not served
(a wrong ``zookeeper.connect`` chroot must never delete data).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import trio

from node.config import (
    ConfigError,
    NodeConfig,
    TopicPolicy,
    effective_log_config,
    effective_policy,
    validate_topic_config,
)
from node.coordination import (
    BrokerRegistration,
    NewTopic,
    PartitionState,
    Reassignment,
    TopicAssignment,
    TopicExists,
    UnknownTopic,
    ZkState,
)
from node.errors import BrokerError
from node.ids import NO_NODE, NodeId
from node.partition import Partition
from node.protocol import ErrorCode
from node.stall import StallWatch
from storage import LeaderEpoch, LogConfig, LogManager, TopicPartition, wall_clock_ms

log = logging.getLogger("strait.node.cluster")

MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def check_topic_name(name: str | None) -> str:
    """Kafka's topic name rules; raises BrokerError(INVALID_TOPIC_EXCEPTION) naming the problem."""
    if not name:
        raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME:
        raise BrokerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise BrokerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'",
        )
    return name


#: What a controller pushes of one topic (``ClusterState.apply_pushed``): its topic id and the
#: states it wrote, by partition, each with its new znode version.
PushedTopic = tuple[str, Mapping[int, PartitionState]]


@dataclass(slots=True)
class TopicState:
    name: str
    topic_id: str
    assignment: dict[int, tuple[NodeId, ...]]
    overrides: dict[str, str]
    log_config: LogConfig
    policy: TopicPolicy
    states: dict[int, PartitionState] = field(default_factory=dict)
    version: int = -1  # of the assignment znode, for compare-and-set


class ClusterState:
    def __init__(self, config: NodeConfig, zk: ZkState, logs: LogManager) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.logs = logs
        self.topics: dict[str, TopicState] = {}
        # The live brokers, with host/port where this node reaches each one: its endpoint on this
        # node's inter.broker.listener.name, as Kafka picks it (its registered host/port if it has none).
        self.brokers: dict[NodeId, BrokerRegistration] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        self._refresh_lock = trio.Lock()
        self.controller: tuple[NodeId, int] | None = None  # (broker id, controller epoch)
        self.reassignment: Reassignment | None = None
        self.offline_replicas: dict[NodeId, frozenset[tuple[str, int]]] = {}
        self.on_refresh: list[Callable[[], None]] = []  # called after every reconciliation
        self.on_roles_changed: list[Callable[[list[Partition]], None]] = []
        self.registered = False  # roles are taken only once this broker is registered
        self.startup_claims: list[tuple[Partition, PartitionState]] = []
        self._roles_applied = False
        self._claims_pending = False
        self._log_default = config.log_config()
        #: Notices this process was stopped (see :mod:`node.stall`); set by the broker. After a
        #: stall the node leads nothing until a re-read of ZooKeeper begun after it completes.
        self.stall: StallWatch | None = None
        self._stalls_answered = 0  # the stall generation the last complete refresh began at

    @property
    def leadership_in_doubt(self) -> bool:
        """This process was stopped long enough to have lost its ZooKeeper session, and has not
        re-read ZooKeeper since: the leaderships it holds may be another broker's by now."""
        stall = self.stall
        return stall is not None and (stall.overdue() or stall.generation > self._stalls_answered)

    # -- reading ZooKeeper -------------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read ZooKeeper and reconcile the local logs with it (serialised)."""
        async with self._refresh_lock:
            stalls = self.stall.generation if self.stall is not None else 0
            # Only what changed since the last refresh is read (the watches mark it), but all of it
            # after a stall: this process may have missed anything while it was stopped.
            snap = await self.zk.snapshot(incremental=True, full=stalls > self._stalls_answered)
            inter_broker = self.config.inter_broker_listener_name
            self.brokers = {b: reg.reached_through(inter_broker) for b, reg in snap.brokers.items()}
            self.controller = snap.controller
            self.reassignment = snap.reassignment
            self.offline_replicas = dict(snap.offline_replicas)
            fresh: dict[str, TopicState] = {}
            for name, assignment in snap.topics.items():
                overrides = snap.configs.get(name, {})
                states = {p: st for p in assignment.partitions if (st := snap.states.get((name, p))) is not None}
                known = self.topics.get(name)
                if known is not None and known.topic_id == assignment.topic_id:
                    # A state the controller pushed (``apply_pushed``) while this read was on its way
                    # may be newer than the one read: never go back to an older znode version.
                    for p, held in known.states.items():
                        read = states.get(p)
                        if read is not None and held.version > read.version:
                            states[p] = held
                if known is not None and known.overrides == overrides:
                    # A topic's effective config is worked out again only when its overrides change:
                    # with thousands of topics, doing it on every re-read was most of a re-read's time.
                    log_config, policy = known.log_config, known.policy
                    if (
                        known.version == assignment.version
                        and known.topic_id == assignment.topic_id
                        and known.assignment == assignment.partitions
                        and known.states == states
                    ):
                        fresh[name] = known  # unchanged: the same object (Metadata caches its answer by it)
                        continue
                else:
                    try:
                        log_config = effective_log_config(self.config, overrides)
                        policy = effective_policy(self.config, overrides)
                    except (ConfigError, ValueError) as exc:
                        log.error(
                            "topic %s has an invalid config in ZooKeeper (%s); using the broker defaults", name, exc
                        )
                        log_config, policy = self._log_default, effective_policy(self.config, {})
                fresh[name] = TopicState(
                    name,
                    assignment.topic_id,
                    dict(assignment.partitions),
                    dict(overrides),
                    log_config,
                    policy,
                    states,
                    assignment.version,
                )
            self.startup_claims = []
            self._claims_pending = self.registered and not self._roles_applied
            changed = self._reconcile(fresh)
            self._roles_applied = self.registered
            self.topics = fresh
            self._stalls_answered = max(self._stalls_answered, stalls)
            for callback in self.on_refresh:
                callback()
            for on_change in self.on_roles_changed:
                on_change(changed)

    def apply_pushed(self, controller_epoch: int, pushed: Mapping[str, PushedTopic]) -> int:
        """Take the partition states a controller has just written to ZooKeeper (PartitionStates),
        without waiting for this node's watches and re-read; returns how many were newer.

        ZooKeeper stays the truth: a state is taken only for a topic this node knows under the same
        topic id, for a partition in its assignment, and only if its znode version is newer than the
        one held, so a push can only bring forward what a re-read would bring; a push from an
        older controller epoch than the one this node knows is refused (BrokerError
        STALE_CONTROLLER_EPOCH). Until this node has taken its roles from a whole re-read (just
        started, or stopped for a while: ``leadership_in_doubt``) it takes the states into its view
        but no role from them. Runs between two awaits of ``refresh``, which keeps what is newer.
        """
        if self.controller is not None and controller_epoch < self.controller[1]:
            raise BrokerError(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} is older than the current {self.controller[1]}",
            )
        changed: list[Partition] = []
        taken = 0
        roles = self.registered and self._roles_applied and not self._claims_pending and not self.leadership_in_doubt
        for name, (topic_id, states) in pushed.items():
            topic = self.topics.get(name)
            if topic is None or topic.topic_id != topic_id:
                continue  # not known here yet (or re-created): the re-read brings it
            newer = {
                p: state
                for p, state in states.items()
                if p in topic.assignment and state.version > (held.version if (held := topic.states.get(p)) else -1)
            }
            if not newer:
                continue
            taken += len(newer)
            # A new object: Metadata caches its answer by the TopicState it was made from.
            topic = replace(topic, states={**topic.states, **newer})
            self.topics[name] = topic
            if not roles:
                continue
            for p, state in newer.items():
                partition = self.partitions.get(TopicPartition(name, p))
                if partition is None or partition.log.is_offline or self.broker_id not in topic.assignment[p]:
                    continue
                if partition.apply_state(state, topic.assignment[p]):
                    changed.append(partition)
        if taken:
            for callback in self.on_refresh:
                callback()
            for on_change in self.on_roles_changed:
                on_change(changed)
        return taken

    def _reconcile(self, fresh: Mapping[str, TopicState]) -> list[Partition]:
        """Open, update and drop local replicas; returns the partitions whose role or leader epoch changed."""
        changed: list[Partition] = []
        # Topics that were deleted in ZooKeeper since we last looked: remove their logs.
        for name in set(self.topics) - set(fresh):
            for tp in [tp for tp in self.partitions if tp.topic == name]:
                self._drop_partition(tp, delete_log=True)
        moving = set(self.reassignment.partitions) if self.reassignment is not None else set()
        for name, topic in fresh.items():
            for p, replicas in topic.assignment.items():
                tp = TopicPartition(name, p)
                if self.broker_id not in replicas:
                    if (name, p) in moving:
                        # Reassigned away, the move still finishing: stop serving, keep the log for now.
                        if tp in self.partitions:
                            self._drop_partition(tp, delete_log=False)
                    elif tp in self.partitions or self.logs.get_log(tp) is not None:
                        # No longer a replica here (a finished reassignment, maybe while we were down).
                        self._drop_partition(tp, delete_log=True)
                    continue
                partition = self.partitions.get(tp)
                if partition is None:
                    partition = self._open_partition(tp, topic)
                else:
                    if partition.log.config != topic.log_config:
                        partition.log.update_config(topic.log_config)
                    partition.policy = topic.policy
                state = topic.states.get(p)
                if state is None or partition.log.is_offline or not self.registered:
                    continue
                if self._claims_pending and partition.leader_epoch < 0 and state.leader == self.broker_id:
                    # ZooKeeper still names this freshly started broker as leader: the state predates
                    # this process. Do not serve from it; the replica manager hands leadership over.
                    partition.replicas = replicas
                    self.startup_claims.append((partition, state))
                    continue
                if partition.apply_state(state, replicas):
                    changed.append(partition)
        return changed

    def _open_partition(self, tp: TopicPartition, topic: TopicState) -> Partition:
        plog = self.logs.get_log(tp)
        if plog is None:
            plog = self.logs.create_log(tp, topic.log_config)
            log.info("created log for %s in %s", tp, plog.dir.parent)
        elif plog.config != topic.log_config:
            plog.update_config(topic.log_config)
        partition = Partition(
            tp,
            plog,
            topic.policy,
            broker_id=self.broker_id,
            leader_epoch=LeaderEpoch(-1),
            producer_max_ids=self.config.producer_state_max_ids,
            clock=wall_clock_ms,
        )
        self.partitions[tp] = partition
        return partition

    def _drop_partition(self, tp: TopicPartition, *, delete_log: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if delete_log:
            self.logs.delete_log(tp)
            log.info("deleted log for %s", tp)
        if partition is not None:
            partition.wake()

    # -- lookups --------------------------------------------------------------------------

    def partition(self, topic: str, index: int, *, leader: bool = True) -> Partition:
        """The local replica, by default only if it leads; BrokerError with Kafka's code otherwise
        (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, KAFKA_STORAGE_ERROR)."""
        partition = self.partitions.get(TopicPartition(topic, index))
        if partition is not None:
            if partition.log.is_offline:
                raise BrokerError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{index}: its log dir is offline")
            if leader and not partition.is_leader:
                if partition.leader_id < 0:
                    raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{index} has no leader right now")
                partition.check_leader()
            if leader and self.leadership_in_doubt:
                raise BrokerError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"broker {self.broker_id} was stopped for a while and is re-reading ZooKeeper before it "
                    f"leads {topic}-{index} again",
                )
            return partition
        state = self.topics.get(topic)
        if state is not None and index in state.assignment:
            raise BrokerError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {topic}-{index}"
            )
        raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {topic}-{index}")

    def leader_of(self, topic: TopicState, index: int) -> NodeId:
        state = topic.states.get(index)
        return state.leader if state is not None else NO_NODE

    def live_broker_ids(self) -> list[NodeId]:
        ids = set(self.brokers) | {self.broker_id}
        return sorted(ids)

    # -- admin ----------------------------------------------------------------------------

    async def ensure_live(self, count: int = 0, broker_ids: tuple[NodeId, ...] = ()) -> None:
        """Re-read ZooKeeper when fewer than ``count`` brokers (or not all of ``broker_ids``) look live:
        a broker that just registered may not have reached this node's view yet."""
        live = set(self.live_broker_ids())
        if len(live) < count or not set(broker_ids) <= live:
            await self.refresh()

    async def plan(
        self, partitions: int, replication_factor: int, *, first_partition: int = 0
    ) -> dict[int, tuple[NodeId, ...]]:
        """``plan_assignment`` over the live brokers, re-reading ZooKeeper first if too few look live."""
        await self.ensure_live(replication_factor)
        return self.plan_assignment(partitions, replication_factor, first_partition=first_partition)

    def plan_assignment(
        self, partitions: int, replication_factor: int, *, first_partition: int = 0, start: int | None = None
    ) -> dict[int, tuple[NodeId, ...]]:
        """Spread replicas over the live brokers, rack-aware as Kafka does.

        Brokers are ordered alternating between racks (rack-less brokers form one rack), leaders
        go round-robin over that order from a random start, and each further replica is the next
        broker, skipping brokers whose rack already holds a replica of the partition until
        every rack has one. Without racks this is Kafka's rack-unaware round-robin.
        """
        live = self.live_broker_ids()
        if replication_factor < 1 or replication_factor > len(live):
            raise BrokerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} needs that many live brokers; {len(live)} are live",
            )
        brokers = self._rack_alternated(live)
        rack = {b: self._rack(b) for b in brokers}
        racks = len(set(rack.values()))
        n = len(brokers)
        first = random.randrange(n) if start is None else start % n
        shift = random.randrange(n) if start is None else 0
        plan: dict[int, tuple[NodeId, ...]] = {}
        for i in range(partitions):
            p = first_partition + i
            leader = (first + p) % n
            step = 1 + (shift + p // n) % max(1, n - 1) if n > 1 else 0
            chosen = [brokers[leader]]
            k = 1
            while len(chosen) < replication_factor:
                candidates = [brokers[(leader + (k + j) * max(step, 1)) % n] for j in range(n)]
                candidates += brokers  # fall back to any broker not chosen yet
                used_racks = {rack[b] for b in chosen}
                pick = next(
                    (
                        b
                        for b in candidates
                        if b not in chosen and (rack[b] not in used_racks or len(used_racks) >= racks)
                    ),
                    None,
                )
                if pick is None:
                    pick = next(b for b in candidates if b not in chosen)
                chosen.append(pick)
                k += 1
            plan[p] = tuple(chosen)
        return plan

    def _rack(self, broker_id: NodeId) -> str:
        reg = self.brokers.get(broker_id)
        if reg is not None:
            return reg.rack or ""
        return self.config.broker_rack or "" if broker_id == self.broker_id else ""

    def _rack_alternated(self, brokers: list[NodeId]) -> list[NodeId]:
        by_rack: dict[str, list[NodeId]] = {}
        for b in sorted(brokers):
            by_rack.setdefault(self._rack(b), []).append(b)
        if len(by_rack) <= 1:
            return sorted(brokers)
        ordered: list[NodeId] = []
        queues = [by_rack[r] for r in sorted(by_rack)]
        while any(queues):
            for q in queues:
                if q:
                    ordered.append(q.pop(0))
        return ordered

    def check_assignment(self, assignment: Mapping[int, tuple[NodeId, ...]]) -> None:
        live = set(self.live_broker_ids())
        for p, replicas in assignment.items():
            if not replicas:
                raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {p} has no replicas")
            if len(set(replicas)) != len(replicas):
                raise BrokerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {p} lists a broker twice: {list(replicas)}"
                )
            unknown = [b for b in replicas if b not in live]
            if unknown:
                raise BrokerError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"partition {p} is assigned to brokers {unknown} that are not live"
                )

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        present = {k: v for k, v in configs.items() if v is not None}
        try:
            checked = validate_topic_config(present)
            effective_log_config(self.config, checked)
        except (ConfigError, ValueError) as exc:
            raise BrokerError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return checked

    def initial_states(self, assignment: Mapping[int, tuple[NodeId, ...]]) -> dict[int, PartitionState]:
        """Leader: the preferred (first) replica; ISR: all replicas (they are live and empty)."""
        epoch = self.controller[1] if self.controller is not None else 0
        return {
            p: PartitionState(replicas[0], LeaderEpoch(0), tuple(replicas), epoch) for p, replicas in assignment.items()
        }

    async def create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[NodeId, ...]],
        configs: Mapping[str, str],
        *,
        validate_only: bool,
        refresh: bool = True,
    ) -> TopicAssignment | None:
        """Write the topic to ZooKeeper; then re-read it, unless ``refresh`` is false (a request that
        creates several topics re-reads once, after the last: each re-read reads every topic)."""
        check_topic_name(name)
        if name in self.topics:
            raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        await self.ensure_live(broker_ids=tuple(b for r in assignment.values() for b in r))
        self.check_assignment(assignment)
        if validate_only:
            return None
        try:
            created = await self.zk.create_topic(name, assignment, dict(configs), self.initial_states(assignment))
        except TopicExists:
            raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists") from None
        log.info("created topic %s with %d partitions %s", name, len(assignment), dict(configs) or "")
        if refresh:
            await self.refresh()
        return created

    async def create_topics(
        self, topics: Sequence[tuple[str, dict[int, tuple[NodeId, ...]], Mapping[str, str]]], *, validate_only: bool
    ) -> dict[str, BrokerError | None]:
        """Write every ``(name, assignment, configs)`` to ZooKeeper at once (``ZkState.create_topics``:
        one transaction per topic, pipelined), without re-reading: the caller refreshes once.

        Returns, by name, None for a topic created (or that would be, with ``validate_only``) or the
        BrokerError that refused it (an invalid name, an existing topic, an assignment to brokers
        that are not live). Raises CoordinationError when ZooKeeper fails: some may have been created.
        """
        await self.ensure_live(
            broker_ids=tuple({b for _, assignment, _ in topics for r in assignment.values() for b in r})
        )
        outcome: dict[str, BrokerError | None] = {}
        ready: list[NewTopic] = []
        for name, assignment, configs in topics:
            try:
                check_topic_name(name)
                if name in self.topics:
                    raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
                self.check_assignment(assignment)
            except BrokerError as exc:
                outcome[name] = exc
                continue
            outcome[name] = None
            ready.append(NewTopic(name, assignment, dict(configs), self.initial_states(assignment)))
        if validate_only or not ready:
            return outcome
        configs_of = {topic.name: topic.config for topic in ready}
        for name, created in (await self.zk.create_topics(ready)).items():
            if isinstance(created, TopicExists):
                outcome[name] = BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            else:
                log.info(
                    "created topic %s with %d partitions %s", name, len(created.partitions), configs_of[name] or ""
                )
        return outcome

    async def delete_topic(self, name: str, *, refresh: bool = True) -> None:
        """Delete the topic in ZooKeeper; then re-read it, unless ``refresh`` is false (as create_topic)."""
        if not self.config.delete_topic_enable:
            raise BrokerError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false on this broker")
        try:
            await self.zk.delete_topic(name)
        except UnknownTopic:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist") from None
        log.info("deleted topic %s", name)
        if refresh:
            await self.refresh()

    async def add_partitions(
        self, name: str, count: int, assignments: list[tuple[NodeId, ...]] | None, *, validate_only: bool
    ) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        current = len(topic.assignment)
        if count <= current:
            raise BrokerError(
                ErrorCode.INVALID_PARTITIONS, f"topic {name!r} has {current} partitions; {count} would not add any"
            )
        if assignments is not None:
            if len(assignments) != count - current:
                raise BrokerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"{len(assignments)} assignments given for {count - current} new partitions",
                )
            added = {current + i: tuple(r) for i, r in enumerate(assignments)}
            await self.ensure_live(broker_ids=tuple(b for r in added.values() for b in r))
        else:
            rf = len(next(iter(topic.assignment.values())))
            added = await self.plan(count - current, rf, first_partition=current)
        self.check_assignment(added)
        if validate_only:
            return
        await self.zk.add_partitions(name, added, self.initial_states(added))
        log.info("topic %s: %d -> %d partitions", name, current, count)
        await self.refresh()

    async def set_topic_config(self, name: str, overrides: Mapping[str, str], *, validate_only: bool) -> None:
        if name not in self.topics:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        checked = self.validate_configs(overrides)
        if validate_only:
            return
        await self.zk.set_topic_config(name, checked)
        log.info("topic %s: config set to %s", name, checked)
        await self.refresh()
