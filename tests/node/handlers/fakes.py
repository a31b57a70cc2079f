"""Small fakes of the services the handlers use (node.handlers._services), and real requests.

Requests go through the real codec (encode, then decode as the server does), so a handler
sees exactly the Struct it would see on the wire. Partitions are real ``Partition`` objects
over real logs in a temporary directory: the fakes stand in for the cluster around them.
Authorisation runs the real ``Authorizer`` over ACLs held by ``FakeSecurityStore``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from node.cluster import TopicState
from node.config import NodeConfig, TopicPolicy
from node.coordination import BrokerRegistration, PartitionState
from node.errors import BrokerError
from node.handlers import SecurityServices
from node.partition import Partition
from node.protocol import ErrorCode, Struct, decode_request, encode_request, read_request_header, request_header
from node.request import ANONYMOUS, ConnectionInfo, Request
from node.security._acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from node.security._scram import ScramCredential
from node.security._store import SecurityStoreError
from node.txn import InitResult, TxnDescription
from storage import DirUsage, FaultPoints, LogConfig, TopicPartition, create_log

NOW_MS = 1_700_000_000_000
BROKER_ID = 1


def node_config(**extra: str) -> NodeConfig:
    props = {"broker.id": str(BROKER_ID), "zookeeper.connect": "127.0.0.1:2181/t"} | extra
    return NodeConfig.from_properties(props, source="test.properties")


def request(
    api_key: int,
    version: int,
    body: Mapping[str, Any],
    *,
    peer: str = "127.0.0.1:50000",
    listener: str = "PLAINTEXT",
    principal: str = ANONYMOUS,
    security_protocol: str = "PLAINTEXT",
) -> Request:
    """``body`` encoded and decoded by the real codec, from ``peer`` on listener ``listener`` as ``principal``."""
    frame = encode_request(request_header(api_key, version, 7, "unit-test"), body)[4:]
    header, at = read_request_header(frame)
    connection = ConnectionInfo(peer, listener, principal=principal, security_protocol=security_protocol)
    return Request(header, decode_request(header, frame, at), connection)


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

    def partition(self, topic: str, index: int, *, leader: bool = True) -> Partition:
        found = self.by_tp.get(TopicPartition(topic, index))
        if found is None:
            raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {topic}-{index}")
        if leader and not found.is_leader:
            raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this server does not lead {topic}-{index}")
        return found


@dataclass
class FakeMetrics:
    """RequestMetrics that remembers what it was told."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    produces: int = 0
    fetches: int = 0
    wakeups: list[float] = field(default_factory=list)
    sessions: tuple[int, int] = (0, 0)  # (sessions, partitions) the fetch session cache last reported
    evictions: int = 0
    fetch_kinds: list[str] = field(default_factory=list)

    def record_error(self, api: str, error: str) -> None:
        self.errors.append((api, error))

    def observe_produce(self, seconds: float) -> None:
        self.produces += 1

    def observe_fetch(self, seconds: float) -> None:
        self.fetches += 1

    def observe_replica_wakeup(self, seconds: float) -> None:
        self.wakeups.append(seconds)

    def fetch_sessions(self, sessions: int, partitions: int) -> None:
        self.sessions = (sessions, partitions)

    def fetch_session_evicted(self) -> None:
        self.evictions += 1

    def fetch_by_session(self, kind: str) -> None:
        self.fetch_kinds.append(kind)


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

    async def create_topics(
        self, topics: Sequence[tuple[str, dict[int, tuple[int, ...]], Mapping[str, str]]], *, validate_only: bool
    ) -> dict[str, BrokerError | None]:
        self.calls.append(("create_topics", ([name for name, _, _ in topics], validate_only)))
        outcome: dict[str, BrokerError | None] = {}
        for name, assignment, _ in topics:
            if name in self.topics:
                outcome[name] = BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
                continue
            outcome[name] = None
            if not validate_only:
                self.topics[name] = topic_state(name, len(assignment))
        return outcome

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


# -- security ---------------------------------------------------------------------------------------------------------

ALICE = "User:alice"  # the principal the tests grant things to
BOB = "User:bob"  # the principal they do not


def acl(
    principal: str,
    operation: AclOperation,
    resource_type: ResourceType = ResourceType.CLUSTER,
    name: str = CLUSTER_NAME,
    *,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
) -> AclBinding:
    """One binding: ALLOW ``principal`` ``operation`` on the named resource from any host, by default."""
    return AclBinding(
        ResourcePattern(resource_type, name, pattern), AccessControlEntry(principal, host, operation, permission)
    )


class FakeSecurityStore:
    """SecurityStore in memory over a real Authorizer; writes are recorded, and raise while ``failing`` is set."""

    def __init__(self, *bindings: AclBinding, super_users: Sequence[str] = ()) -> None:
        self.authorizer = Authorizer(super_users)
        self.authorizer.add(bindings)
        self.credentials: dict[str, dict[str, ScramCredential]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.failing: str | None = None

    def _write(self, call: str, args: Any) -> None:
        self.calls.append((call, args))
        if self.failing is not None:
            raise SecurityStoreError(self.failing)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get(user, {}).get(mechanism)

    def scram_users(self) -> dict[str, dict[str, int]]:
        return {
            user: {mechanism: c.iterations for mechanism, c in by_mechanism.items()}
            for user, by_mechanism in self.credentials.items()
            if by_mechanism
        }

    async def set_scram(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._write("set_scram", (user, mechanism))
        self.credentials.setdefault(user, {})[mechanism] = credential

    async def delete_scram(self, user: str, mechanism: str) -> bool:
        self._write("delete_scram", (user, mechanism))
        return self.credentials.get(user, {}).pop(mechanism, None) is not None

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        self._write("add_acls", list(bindings))
        self.authorizer.add(bindings)

    async def remove_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        self._write("remove_acls", acl_filter)
        return self.authorizer.remove(acl_filter)


def secured(*bindings: AclBinding, super_users: Sequence[str] = ()) -> tuple[SecurityServices, FakeSecurityStore]:
    """An enabled authorizer holding ``bindings`` (nothing else is allowed), and its store."""
    store = FakeSecurityStore(*bindings, super_users=super_users)
    return SecurityServices(store, authorizer_enabled=True), store


@dataclass
class RecordingGroups:
    """GroupService that records what reaches the coordinator and answers every request as a success.

    ``groups`` is what ListGroups lists; ``offsets`` what OffsetFetch finds for a null topic list.
    """

    groups: list[str] = field(default_factory=list)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def partition_for(self, group_id: str) -> int:
        return 0

    async def join_group(self, req: Struct, version: int, client_id: str, client_host: str) -> dict[str, Any]:
        self.calls.append(("join_group", req.group_id))
        return {"throttle_time_ms": 0, "error_code": 0, "member_id": "m-1", "generation_id": 1}

    async def sync_group(self, req: Struct, version: int) -> dict[str, Any]:
        self.calls.append(("sync_group", req.group_id))
        return {"throttle_time_ms": 0, "error_code": 0, "assignment": b"a"}

    async def heartbeat(self, req: Struct, version: int) -> dict[str, Any]:
        self.calls.append(("heartbeat", req.group_id))
        return {"throttle_time_ms": 0, "error_code": 0}

    async def leave_group(self, req: Struct, version: int) -> dict[str, Any]:
        self.calls.append(("leave_group", req.group_id))
        return {"throttle_time_ms": 0, "error_code": 0}

    async def offset_commit(self, req: Struct, version: int) -> dict[str, Any]:
        committed = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        self.calls.append(("offset_commit", committed))
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p in committed:
            topics.setdefault(topic, []).append({"partition_index": p, "error_code": 0})
        return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}

    async def offset_fetch(self, req: Struct, version: int) -> dict[str, Any]:
        wanted = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
        self.calls.append(("offset_fetch", wanted))
        found = sorted(self.offsets) if wanted is None else wanted
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p in found:
            topics.setdefault(topic, []).append(
                {
                    "partition_index": p,
                    "committed_offset": self.offsets.get((topic, p), -1),
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": 0,
                }
            )
        topic_list = [{"name": n, "partitions": ps} for n, ps in topics.items()]
        return {"throttle_time_ms": 0, "topics": topic_list, "error_code": 0}

    async def txn_offset_commit(self, req: Struct, version: int) -> dict[str, Any]:
        committed = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        self.calls.append(("txn_offset_commit", committed))
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p in committed:
            topics.setdefault(topic, []).append({"partition_index": p, "error_code": 0})
        return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}

    async def describe_groups(self, req: Struct, version: int) -> dict[str, Any]:
        self.calls.append(("describe_groups", list(req.groups)))
        described = [
            {"error_code": 0, "group_id": g, "group_state": "Empty", "protocol_type": "consumer", "members": []}
            for g in req.groups
        ]
        return {"throttle_time_ms": 0, "groups": described}

    async def list_groups(self, req: Struct, version: int) -> dict[str, Any]:
        self.calls.append(("list_groups", None))
        listed = [{"group_id": g, "protocol_type": "consumer"} for g in self.groups]
        return {"throttle_time_ms": 0, "error_code": 0, "groups": listed}

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]:
        self.calls.append(("delete_groups", list(group_ids)))
        return [(g, 0) for g in group_ids]

    async def offset_delete(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, list[tuple[str, int, int]]]:
        self.calls.append(("offset_delete", list(partitions)))
        return 0, [(topic, p, 0) for topic, p in partitions]


@dataclass
class FakeLogDirs:
    """A node's log dirs as ``storage.LogManager.describe_dirs`` reports them."""

    dirs: list[DirUsage] = field(default_factory=list)

    def describe_dirs(self) -> list[DirUsage]:
        return self.dirs

    def alter_replica_dir(self, tp: TopicPartition, path: str) -> bool:
        """Only DescribeLogDirs is answered over these dirs: a move reaching here is a test's mistake
        (AlterReplicaLogDirs' handler tests use their own log dirs)."""
        raise AssertionError(f"FakeLogDirs does not move replicas ({tp} to {path})")


@dataclass
class FakeStates:
    """Where a controller's pushed partition states land (``ClusterState.apply_pushed``)."""

    calls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    refuse: BrokerError | None = None

    def apply_pushed(self, controller_epoch: int, pushed: Mapping[str, Any]) -> int:
        if self.refuse is not None:
            raise self.refuse
        self.calls.append((controller_epoch, dict(pushed)))
        return sum(len(states) for _, states in pushed.values())


@dataclass
class RecordingTransactions:
    """TransactionService that records what reaches the coordinator; ``error`` is what every change answers.

    ``known`` are the ids Describe and List find: id -> (producer id, state, partitions).
    """

    error: ErrorCode = ErrorCode.NONE
    known: dict[str, tuple[int, str, tuple[tuple[str, int], ...]]] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def partition_for(self, transactional_id: str) -> int:
        return 0

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_producer_id: int, expected_epoch: int
    ) -> InitResult:
        self.calls.append(("init_producer_id", (transactional_id, timeout_ms, expected_producer_id, expected_epoch)))
        if self.error is not ErrorCode.NONE:
            return InitResult(self.error)
        return InitResult(ErrorCode.NONE, 4000, 1)

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> ErrorCode:
        self.calls.append(("add_partitions", (transactional_id, producer_id, epoch, list(partitions))))
        return self.error

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        self.calls.append(("end_txn", (transactional_id, producer_id, epoch, commit)))
        return self.error

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        self.calls.append(("describe", transactional_id))
        found = self.known.get(transactional_id)
        if found is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        pid, state, partitions = found
        return ErrorCode.NONE, TxnDescription(transactional_id, state, 60_000, NOW_MS, pid, 3, partitions)

    def list_transactions(
        self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int
    ) -> tuple[ErrorCode, list[str], list[tuple[str, int, str]]]:
        self.calls.append(("list_transactions", (list(states), list(producer_ids), duration_ms)))
        return ErrorCode.NONE, [], [(tid, pid, state) for tid, (pid, state, _) in sorted(self.known.items())]
