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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import trio

from node.config import NodeConfig
from node.coordination import (
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
    TopicExists,
    UnknownTopic,
    ZkState,
)
from node.errors import BrokerError
from node.partition import Partition
from node.protocol import ErrorCode
from node.topic_config import ConfigError, TopicPolicy, effective_log_config, effective_policy, validate_topic_config
from storage import LogConfig, LogManager, TopicPartition, wall_clock_ms

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


@dataclass(slots=True)
class TopicState:
    name: str
    topic_id: str
    assignment: dict[int, tuple[int, ...]]
    overrides: dict[str, str]
    log_config: LogConfig
    policy: TopicPolicy
    states: dict[int, PartitionState] = field(default_factory=dict)


class ClusterState:
    def __init__(self, config: NodeConfig, zk: ZkState, logs: LogManager) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.logs = logs
        self.topics: dict[str, TopicState] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        self._refresh_lock = trio.Lock()
        self.on_refresh: list[Callable[[], None]] = []  # called after every reconciliation
        self._log_default = config.log_config()

    # -- reading ZooKeeper -------------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read ZooKeeper and reconcile the local logs with it (serialised)."""
        async with self._refresh_lock:
            assignments = await self.zk.topics()
            configs = await self.zk.all_topic_configs()
            self.brokers = await self.zk.brokers()
            fresh: dict[str, TopicState] = {}
            for name, assignment in assignments.items():
                overrides = configs.get(name, {})
                try:
                    log_config = effective_log_config(self.config, overrides)
                    policy = effective_policy(self.config, overrides)
                except (ConfigError, ValueError) as exc:
                    log.error("topic %s has an invalid config in ZooKeeper (%s); using the broker defaults", name, exc)
                    log_config, policy = self._log_default, effective_policy(self.config, {})
                states = {}
                for p in assignment.partitions:
                    state = await self.zk.partition_state(name, p)
                    if state is not None:
                        states[p] = state
                fresh[name] = TopicState(
                    name, assignment.topic_id, dict(assignment.partitions), dict(overrides), log_config, policy, states
                )
            self._reconcile(fresh)
            self.topics = fresh
            for callback in self.on_refresh:
                callback()

    def _reconcile(self, fresh: Mapping[str, TopicState]) -> None:
        # Topics that were deleted in ZooKeeper since we last looked: remove their logs.
        for name in set(self.topics) - set(fresh):
            for tp in [tp for tp in self.partitions if tp.topic == name]:
                self._drop_partition(tp, delete_log=True)
        for name, topic in fresh.items():
            for p, replicas in topic.assignment.items():
                tp = TopicPartition(name, p)
                if self.broker_id not in replicas:
                    if tp in self.partitions:
                        self._drop_partition(tp, delete_log=False)
                    continue
                partition = self.partitions.get(tp)
                if partition is None:
                    self._open_partition(tp, topic)
                else:
                    if partition.log.config != topic.log_config:
                        partition.log.update_config(topic.log_config)
                    partition.policy = topic.policy

    def _open_partition(self, tp: TopicPartition, topic: TopicState) -> None:
        plog = self.logs.get_log(tp)
        if plog is None:
            plog = self.logs.create_log(tp, topic.log_config)
            log.info("created log for %s in %s", tp, plog.dir.parent)
        elif plog.config != topic.log_config:
            plog.update_config(topic.log_config)
        state = topic.states.get(tp.partition)
        self.partitions[tp] = Partition(
            tp,
            plog,
            topic.policy,
            leader_epoch=state.leader_epoch if state is not None else 0,
            producer_max_ids=self.config.producer_state_max_ids,
            clock=wall_clock_ms,
        )

    def _drop_partition(self, tp: TopicPartition, *, delete_log: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if delete_log:
            self.logs.delete_log(tp)
            log.info("deleted log for %s", tp)
        if partition is not None:
            partition.wake()

    # -- lookups --------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition:
        """The local partition, or BrokerError(UNKNOWN_TOPIC_OR_PARTITION / KAFKA_STORAGE_ERROR)."""
        partition = self.partitions.get(TopicPartition(topic, index))
        if partition is not None:
            if partition.log.is_offline:
                raise BrokerError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{index}: its log dir is offline")
            return partition
        state = self.topics.get(topic)
        if state is not None and index in state.assignment:
            raise BrokerError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {topic}-{index}"
            )
        raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {topic}-{index}")

    def leader_of(self, topic: TopicState, index: int) -> int:
        state = topic.states.get(index)
        if state is not None:
            return state.leader
        replicas = topic.assignment.get(index, ())
        return replicas[0] if replicas else -1

    def live_broker_ids(self) -> list[int]:
        ids = set(self.brokers) | {self.broker_id}
        return sorted(ids)

    # -- admin ----------------------------------------------------------------------------

    def plan_assignment(
        self, partitions: int, replication_factor: int, *, first_partition: int = 0, start: int | None = None
    ) -> dict[int, tuple[int, ...]]:
        """Spread replicas round-robin over the live brokers (Kafka's rack-unaware assignment)."""
        brokers = self.live_broker_ids()
        if replication_factor < 1 or replication_factor > len(brokers):
            raise BrokerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} needs that many live brokers; {len(brokers)} are live",
            )
        n = len(brokers)
        first = random.randrange(n) if start is None else start % n
        shift = random.randrange(n) if start is None else 0
        plan: dict[int, tuple[int, ...]] = {}
        for i in range(partitions):
            p = first_partition + i
            leader = (first + p) % n
            step = 1 + (shift + p // n) % max(1, n - 1) if n > 1 else 0
            replicas = [brokers[leader]]
            for r in range(1, replication_factor):
                replicas.append(brokers[(leader + r * step) % n])
            if len(set(replicas)) != len(replicas):  # fall back to consecutive brokers
                replicas = [brokers[(leader + r) % n] for r in range(replication_factor)]
            plan[p] = tuple(replicas)
        return plan

    def check_assignment(self, assignment: Mapping[int, tuple[int, ...]]) -> None:
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

    @staticmethod
    def initial_states(assignment: Mapping[int, tuple[int, ...]]) -> dict[int, PartitionState]:
        return {p: PartitionState(replicas[0], 0, tuple(replicas), 1) for p, replicas in assignment.items()}

    async def create_topic(
        self, name: str, assignment: dict[int, tuple[int, ...]], configs: Mapping[str, str], *, validate_only: bool
    ) -> TopicAssignment | None:
        check_topic_name(name)
        if name in self.topics:
            raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        self.check_assignment(assignment)
        if validate_only:
            return None
        try:
            created = await self.zk.create_topic(name, assignment, dict(configs), self.initial_states(assignment))
        except TopicExists:
            raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists") from None
        log.info("created topic %s with %d partitions %s", name, len(assignment), dict(configs) or "")
        await self.refresh()
        return created

    async def delete_topic(self, name: str) -> None:
        if not self.config.delete_topic_enable:
            raise BrokerError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false on this broker")
        try:
            await self.zk.delete_topic(name)
        except UnknownTopic:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist") from None
        log.info("deleted topic %s", name)
        await self.refresh()

    async def add_partitions(
        self, name: str, count: int, assignments: list[tuple[int, ...]] | None, *, validate_only: bool
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
        else:
            rf = len(next(iter(topic.assignment.values())))
            added = self.plan_assignment(count - current, rf, first_partition=current)
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
