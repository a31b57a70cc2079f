"""Small fakes of the services the handlers use (node.handlers._services), and real requests.

Requests go through the real codec (encode, then decode as the server does), so a handler
sees exactly the Struct it would see on the wire. Partitions are real ``Partition`` objects
over real logs in a temporary directory: the fakes stand in for the cluster around them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from node.cluster import TopicState
from node.config import NodeConfig, TopicPolicy
from node.coordination import BrokerRegistration, PartitionState
from node.errors import BrokerError
from node.partition import Partition
from node.protocol import ErrorCode, decode_request, encode_request, read_request_header, request_header
from node.request import ConnectionInfo, Request
from storage import FaultPoints, LogConfig, TopicPartition, create_log

NOW_MS = 1_700_000_000_000
BROKER_ID = 1


def node_config(**extra: str) -> NodeConfig:
    props = {"broker.id": str(BROKER_ID), "zookeeper.connect": "127.0.0.1:2181/t"} | extra
    return NodeConfig.from_properties(props, source="test.properties")


def request(
    api_key: int, version: int, body: Mapping[str, Any], *, peer: str = "127.0.0.1:50000", listener: str = "PLAINTEXT"
) -> Request:
    """``body`` encoded and decoded by the real codec, from ``peer`` on listener ``listener``."""
    frame = encode_request(request_header(api_key, version, 7, "unit-test"), body)[4:]
    header, at = read_request_header(frame)
    return Request(header, decode_request(header, frame, at), ConnectionInfo(peer, listener))


def policy(*, mirror_link: str | None = None, min_isr: int = 1, fence: str | None = None) -> TopicPolicy:
    return TopicPolicy(
        min_insync_replicas=min_isr,
        unclean_leader_election=False,
        timestamp_before_max_ms=2**63 - 1,
        timestamp_after_max_ms=2**63 - 1,
        mirror_link=mirror_link,
        fence=fence,
    )


def leader_partition(
    tmp_path: Path, topic: str, index: int = 0, *, mirror_link: str | None = None, fence: str | None = None
) -> Partition:
    """A real replica of ``topic-index`` that this (single-replica) node leads at epoch 0."""
    tp = TopicPartition(topic, index)
    log = create_log(tmp_path / f"{topic}-{index}", tp, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)
    partition = Partition(
        tp, log, policy(mirror_link=mirror_link, fence=fence), broker_id=BROKER_ID, clock=lambda: NOW_MS
    )
    partition.apply_state(PartitionState(BROKER_ID, 0, (BROKER_ID,), 1), (BROKER_ID,))
    return partition


class FakePartitions:
    """PartitionSource over a dict, with ClusterState's answer for a partition not hosted here."""

    def __init__(self, *partitions: Partition) -> None:
        self.by_tp = {p.tp: p for p in partitions}

    def partition(self, topic: str, index: int) -> Partition:
        found = self.by_tp.get(TopicPartition(topic, index))
        if found is None:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {topic}-{index}")
        return found


@dataclass
class FakeMetrics:
    """RequestMetrics that remembers what it was told."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    produces: int = 0
    fetches: int = 0

    def record_error(self, api: str, error: str) -> None:
        self.errors.append((api, error))

    def observe_produce(self, seconds: float) -> None:
        self.produces += 1

    def observe_fetch(self, seconds: float) -> None:
        self.fetches += 1


@dataclass
class FakeFollowers:
    fetched: list[tuple[TopicPartition, int, int]] = field(default_factory=list)

    def follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        self.fetched.append((partition.tp, replica_id, fetch_offset))


def topic_state(name: str, partitions: int = 1, leader: int = BROKER_ID) -> TopicState:
    return TopicState(
        name=name,
        topic_id=f"id-{name}",
        assignment={p: (leader,) for p in range(partitions)},
        overrides={},
        log_config=LogConfig(),
        policy=policy(),
        states={p: PartitionState(leader, 0, (leader,), 1) for p in range(partitions)},
    )


@dataclass
class FakeCluster:
    """MetadataView and TopicAdmin in memory; the admin calls are recorded."""

    broker_id: int = BROKER_ID
    topics: dict[str, TopicState] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration] = field(
        default_factory=lambda: {BROKER_ID: BrokerRegistration(BROKER_ID, "127.0.0.1", 9092)}
    )
    controller: tuple[int, int] | None = (BROKER_ID, 1)
    offline_replicas: dict[int, frozenset[tuple[str, int]]] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def leader_of(self, topic: TopicState, index: int) -> int:
        state = topic.states.get(index)
        return state.leader if state is not None else -1

    async def refresh(self) -> None:
        self.calls.append(("refresh", None))

    async def plan(self, partitions: int, replication_factor: int) -> dict[int, tuple[int, ...]]:
        self.calls.append(("plan", (partitions, replication_factor)))
        return {p: (BROKER_ID,) for p in range(partitions)}

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        return {k: v for k, v in configs.items() if v is not None}

    async def create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        configs: Mapping[str, str],
        *,
        validate_only: bool,
        refresh: bool = True,
    ) -> object:
        self.calls.append(("create_topic", (name, dict(assignment), dict(configs), validate_only)))
        if name in self.topics:
            raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if not validate_only:
            self.topics[name] = topic_state(name, len(assignment))
        if refresh:
            await self.refresh()
        return None

    async def delete_topic(self, name: str, *, refresh: bool = True) -> None:
        self.calls.append(("delete_topic", name))
        if refresh:
            await self.refresh()

    async def add_partitions(
        self, name: str, count: int, assignments: list[tuple[int, ...]] | None, *, validate_only: bool
    ) -> None:
        self.calls.append(("add_partitions", (name, count, assignments, validate_only)))

    async def set_topic_config(self, name: str, overrides: Mapping[str, str], *, validate_only: bool) -> None:
        self.calls.append(("set_topic_config", (name, dict(overrides), validate_only)))


def fake_partition(**log: Any) -> Partition:
    """A stand-in Partition whose ``log`` has only the given attributes (for error paths)."""
    stub = SimpleNamespace(log=SimpleNamespace(**log), check_epoch=lambda epoch: None)
    return stub  # type: ignore[return-value]
