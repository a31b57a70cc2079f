"""Fetch (API 1): whole batches by sendfile, long polling on ``max_wait_ms`` / ``min_bytes``.

Only the leader serves a partition (NOT_LEADER_OR_FOLLOWER elsewhere; FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH when the request's current_leader_epoch is not the leader's; from v12 such an
answer names the current leader, from v16 with its address: ``_services.leader_hint``). Followers fetch
with their broker id as ``replica_id`` (v15+: in the tagged ``replica_state``): they read up to
the log end offset, and the offset they fetch from is their log end offset, which moves the high
watermark and the ISR. From v13 topics are named by id (KIP-516): an id this node does not know
answers UNKNOWN_TOPIC_ID.

Sizes, as Kafka applies them (``ReplicaManager.readFromLog``): partitions are read in the order of
the request (of the session, for an incremental fetch), each from the batch that contains
``fetch_offset`` (clients skip the records before it), up to the high watermark, and up to the
smaller of its ``partition_max_bytes`` and what is left of the response's ``max_bytes``, in whole
batches. The first batch of the first partition that returns any is returned whole even when it
is larger than those limits (Kafka's ``minOneMessage``), so that a consumer can always make
progress; nothing else goes past them. ``min_bytes`` counts at most ``max_bytes`` (a fetch never
waits for more than it may take). Before v3 (no ``max_bytes``) the limits are hard, as
Kafka's ``hardMaxBytesLimit``: a first batch larger than its partition's limit is cut at the limit
(the client sees a partial batch and reports it as too large rather than waiting forever).

With ``last_fetched_epoch`` (v12+, KIP-595's check, which followers send) a fetch whose last epoch
ended below its fetch offset in this log, or that the leader does not know, answers
``diverging_epoch`` (the epoch and its end here) and no records: the fetcher truncates there.

Fetch from follower (KIP-392): from v11 a consumer may fetch from a follower, which serves it up
to its own high watermark (or last stable offset). A leader with ``replica.selector.class`` set to
Kafka's rack-aware selector answers a consumer whose ``rack_id`` (its ``client.rack``) is not the
leader's rack with ``preferred_read_replica``, an in-sync replica in the consumer's rack that holds
its fetch offset (``node.replica_selector``), and no records, at once; the consumer fetches from
there until that replica fails it.

Fetch sessions (KIP-227) follow ``node.fetch_sessions``: a full fetch opens a session, an
incremental one names only what changed and is answered only what changed. A session error is the
answer's top-level ``error_code``, without partitions.

Transactions (KIP-98): every answer carries the partition's true ``last_stable_offset`` (v4+).
A consumer's read_committed fetch (``isolation_level`` 1) stops at the last stable offset
instead of the high watermark and answers ``aborted_transactions``: each aborted transaction
(producer id, first offset) that overlaps the offsets it may return, from the log's
aborted-transaction index, so the client drops their records (and every marker). A
read_uncommitted fetch returns aborted records and markers as they are.

Authorisation (Kafka's): a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each
topic; a partition not authorised answers TOPIC_AUTHORIZATION_FAILED (for a follower too, as
Kafka answers) and is neither read nor counted as the follower's position.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import trio

from node.coordination import uuid_of
from node.errors import ANSWERED, BrokerError, answer_errors, write_error
from node.fetch_sessions import Answer, FetchPosition, FetchSessionCache, PartitionKey
from node.ids import NodeId
from node.partition import Partition
from node.protocol import ErrorCode, Struct
from node.replica_selector import preferred_read_replica
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from storage import FileSlice
from storage.records import LeaderEpoch, Offset

from ._services import (
    NO_AUTHORIZER,
    FollowerTracker,
    MetadataView,
    PartitionSource,
    RequestMetrics,
    SecurityServices,
    add_endpoint,
    leader_hint,
)

INT32_MAX = 2**31 - 1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # Fetch and ListOffsets isolation_level
SOFT_LIMITS_VERSION = 3  # max_bytes, and the first batch above the limits (KIP-74)
ZSTD_MIN_VERSION = 10  # Fetch versions that may carry zstd batches (KIP-110)
FOLLOWER_READS_VERSION = 11  # rack_id, preferred_read_replica: consumers may read from followers (KIP-392)
LEADER_HINT_VERSION = 12  # current_leader on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH (KIP-951)
TOPIC_ID_VERSION = 13  # topics named by id (KIP-516)
REPLICA_STATE_VERSION = 15  # replica_id moves into the tagged replica_state (KIP-903)
MAX_WAIT_CAP_MS = 300_000
NO_TOPIC_ID = uuid.UUID(int=0)
_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def _no_sessions() -> FetchSessionCache:
    return FetchSessionCache(max_slots=0)


class TopicIds:
    """Topic id -> name, from the metadata view's topics; rebuilt only when an id is not found
    where it was (a topic created, deleted or re-created), so a fetch by ids costs a dict lookup."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[uuid.UUID, tuple[str, str]] = {}  # id -> (name, the id as ZooKeeper holds it)

    def name(self, view: MetadataView | None, topic_id: uuid.UUID) -> str | None:
        if view is None:
            return None
        topics = view.topics
        found = self._names.get(topic_id)
        if found is not None:
            name, stored = found
            state = topics.get(name)
            if state is not None and state.topic_id == stored:
                return name
        self._names = {uuid_of(state.topic_id): (name, state.topic_id) for name, state in topics.items()}
        found = self._names.get(topic_id)
        return found[0] if found is not None else None


@dataclass(frozen=True, slots=True)
class FetchServices:
    partitions: PartitionSource
    followers: FollowerTracker
    metrics: RequestMetrics
    security: SecurityServices = NO_AUTHORIZER
    #: The node's fetch sessions; by default none (every fetch answered as a sessionless one).
    sessions: FetchSessionCache = field(default_factory=_no_sessions)
    #: Topic ids (v13+) and leader hints come from here; without it every topic id is unknown.
    metadata: MetadataView | None = None
    topic_ids: TopicIds = field(default_factory=TopicIds)
    #: ``replica.selector.class`` (KIP-392); None: consumers read from the leader.
    replica_selector: str | None = None


@dataclass(slots=True)
class _Target:
    """One partition a fetch reads: its session key, its name (None: an unknown topic id), its position."""

    key: PartitionKey
    topic: str | None
    index: int
    position: FetchPosition


def _partition_entry(index: int, code: int = 0) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "diverging_epoch": None,
        "current_leader": None,
        "snapshot_id": None,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def _replica_id(req: Struct, version: int) -> NodeId:
    """The fetching replica's broker id, or a negative id for a consumer."""
    if version >= REPLICA_STATE_VERSION:
        state = req.replica_state
        return NodeId(state.replica_id if state is not None else -1)
    return NodeId(req.replica_id)


def _denied_topics(services: FetchServices, request: Request, replica_id: int, names: set[str]) -> frozenset[str]:
    """The requested topics this fetch may not read: every one for a follower without CLUSTER_ACTION."""
    security = services.security
    if replica_id >= 0:
        allowed = security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
        return frozenset() if allowed else frozenset(names)
    return frozenset(
        name for name in names if not security.allowed(request, AclOperation.READ, ResourceType.TOPIC, name)
    )


@dataclass(slots=True)
class _Pass:
    """What one pass over the partitions read."""

    entries: list[tuple[_Target, dict[str, Any], int]]  # (target, response entry, records bytes)
    total: int
    errors: bool
    seen: list[Partition]
    redirected: bool = False  # a partition answered preferred_read_replica: answer at once


@dataclass(frozen=True, slots=True)
class _Reader:
    """Who fetches, for fetch from follower (KIP-392): a consumer of Fetch v11+ may be served by a
    follower, and is sent to a replica in its ``rack`` when the leader's selector finds one."""

    follower_ok: bool = False
    rack: str = ""


def _read_once(
    services: FetchServices,
    targets: list[_Target],
    replica_id: NodeId,
    max_bytes: int,
    *,
    first: bool,
    read_committed: bool = False,
    denied: frozenset[str] = frozenset(),
    zstd_readable: bool = True,
    hard_limits: bool = False,
    reader: _Reader = _Reader(),
) -> _Pass:
    """One pass over ``targets`` in order, by the size rules of the module docstring.

    A follower's fetch (``replica_id`` >= 0) reads up to the log end offset and, on the first
    pass, tells the leader where the follower's log ends; a consumer reads up to the high
    watermark. A topic in ``denied`` answers TOPIC_AUTHORIZATION_FAILED without being looked up.
    Without ``zstd_readable`` (Fetch before v10) a consumer's partition of a topic whose
    compression.type is zstd answers UNSUPPORTED_COMPRESSION_TYPE, as Kafka's does.
    """
    entries = []
    budget = max_bytes
    total = 0
    errors = False
    redirected = False
    seen: list[Partition] = []
    for target in targets:
        fp = target.position
        entry = _partition_entry(target.index)
        if target.topic is None:
            entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
            errors = True
            entries.append((target, entry, 0))
            continue
        if target.topic in denied:
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            errors = True
            entries.append((target, entry, 0))
            continue
        try:  # not answer_errors: a context manager per partition costs a quarter of a follower's round
            partition = services.partitions.partition(target.topic, target.index, leader=not reader.follower_ok)
            partition.check_epoch(fp.current_leader_epoch)
            if not zstd_readable and replica_id < 0 and partition.policy.compression == "zstd":
                raise BrokerError(
                    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                    f"{target.topic}-{target.index} is stored with zstd, which needs Fetch v10 or later",
                )
            diverging = _diverging_epoch(partition, fp) if fp.last_fetched_epoch >= 0 else None
            if diverging is not None:
                entry["diverging_epoch"] = diverging
            elif replica_id >= 0 and first:
                plog = partition.log
                if plog.log_start_offset <= fp.fetch_offset <= plog.log_end_offset:
                    services.followers.follower_fetched(partition, replica_id, Offset(fp.fetch_offset))
        except ANSWERED as exc:
            write_error(entry, exc)
            errors = True
            entries.append((target, entry, 0))
            continue
        plog = partition.log
        hw = plog.high_watermark
        lso = partition.last_stable_offset
        end = plog.log_end_offset if replica_id >= 0 else lso if read_committed else hw
        entry["high_watermark"] = hw
        entry["last_stable_offset"] = lso
        entry["log_start_offset"] = plog.log_start_offset
        if reader.rack and partition.is_leader:
            preferred = _preferred_replica(services, partition, reader.rack, fp.fetch_offset)
            if preferred is not None:
                entry["preferred_read_replica"] = preferred
                redirected = True
                entries.append((target, entry, 0))
                continue
        seen.append(partition)
        size = 0
        if entry["diverging_epoch"] is not None:
            errors = True  # answered at once, as an error is: the fetcher must truncate first
        elif plog.log_start_offset <= fp.fetch_offset < end and (min(fp.partition_max_bytes, budget) > 0 or total == 0):
            limit = max(min(fp.partition_max_bytes, budget), 0)
            slices: list[FileSlice] = []
            with answer_errors(entry) as answer:
                slices = plog.read(Offset(fp.fetch_offset), limit, max_offset=end, min_one=total == 0)
            errors = errors or answer.failed
            if hard_limits:
                slices = _cut(slices, limit)
            size = sum(s.length for s in slices)
            if slices:
                entry["records"] = slices
                if read_committed:
                    entry["aborted_transactions"] = [
                        {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                        for txn in plog.collect_aborted_txns(Offset(fp.fetch_offset), end)
                    ]
                total += size
                budget -= size
        elif fp.fetch_offset > plog.log_end_offset or fp.fetch_offset < plog.log_start_offset:
            entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            errors = True
        entries.append((target, entry, size))
    return _Pass(entries, total, errors, seen, redirected)


def _preferred_replica(services: FetchServices, partition: Partition, rack: str, fetch_offset: int) -> int | None:
    """The replica a consumer in ``rack`` should read from instead of this leader (KIP-392), or None."""
    metadata = services.metadata
    if services.replica_selector is None or metadata is None:
        return None
    brokers = metadata.brokers
    return preferred_read_replica(
        selector=services.replica_selector,
        client_rack=rack,
        leader=metadata.broker_id,
        racks={b: reg.rack for b, reg in brokers.items()},
        in_sync_ends={
            r: f.leo for r, f in partition.followers.items() if r in partition.isr and r in brokers and f.leo >= 0
        },
        fetch_offset=fetch_offset,
    )


def _diverging_epoch(partition: Partition, fp: FetchPosition) -> dict[str, int] | None:
    """Kafka's check of ``last_fetched_epoch``: the epoch and end offset where the fetcher's log
    diverges from this one, or None when it does not. Raises BrokerError(OFFSET_OUT_OF_RANGE) when
    the epoch's end is unknown here or the fetch offset is below the log start."""
    plog = partition.log
    epoch, end = plog.end_offset_for_epoch(LeaderEpoch(fp.last_fetched_epoch))
    if epoch < 0 or end < 0:
        raise BrokerError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"{partition.tp}: the end of last fetched epoch {fp.last_fetched_epoch} is unknown here",
        )
    if fp.fetch_offset < plog.log_start_offset:
        raise BrokerError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"{partition.tp}: fetch offset {fp.fetch_offset} is below the log start {plog.log_start_offset}",
        )
    if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
        return {"epoch": epoch, "end_offset": end}
    return None


def _cut(slices: list[FileSlice], limit: int) -> list[FileSlice]:
    """``slices`` cut to ``limit`` bytes (hard limits, Fetch v0-v2): the last one may end inside a batch."""
    out: list[FileSlice] = []
    left = limit
    for s in slices:
        if left <= 0:
            break
        out.append(s if s.length <= left else FileSlice(s.fd, s.path, s.position, left))
        left -= s.length
    return out


def _woken_after(seen: list[Partition]) -> float:
    """Seconds since the latest wake of a partition in ``seen``: how long a woken fetch took to run."""
    return max(0.0, time.perf_counter() - max(p.woken_at for p in seen))


def _requested(req: Struct, uses_ids: bool) -> tuple[dict[PartitionKey, FetchPosition], list[PartitionKey]]:
    """The request's partitions (by session key, in order) and its forgotten ones."""
    requested: dict[PartitionKey, FetchPosition] = {}
    for topic in req.topics:
        key = topic.topic_id if uses_ids else topic.topic
        for fp in topic.partitions:
            requested[key, fp.partition] = FetchPosition(
                fp.fetch_offset,
                fp.partition_max_bytes,
                fp.current_leader_epoch,
                fp.last_fetched_epoch,
                fp.log_start_offset,
            )
    forgotten = [
        (topic.topic_id if uses_ids else topic.topic, index)
        for topic in req.forgotten_topics_data
        for index in topic.partitions
    ]
    return requested, forgotten


async def handle_fetch(services: FetchServices, request: Request) -> dict[str, Any]:
    started = time.perf_counter()
    req = request.body
    version = request.api_version
    uses_ids = version >= TOPIC_ID_VERSION
    replica_id = _replica_id(req, version)
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}
    requested, forgotten = _requested(req, uses_ids)
    try:
        context = services.sessions.open(
            req.session_id, req.session_epoch, requested, forgotten, uses_topic_ids=uses_ids
        )
    except BrokerError as exc:
        body["error_code"] = exc.code
        services.metrics.record_error("Fetch", exc.code.name)
        return body
    targets = _targets(services, context.positions, uses_ids)
    max_bytes = req.max_bytes if version >= SOFT_LIMITS_VERSION else INT32_MAX
    min_bytes = min(req.min_bytes, max_bytes)  # Kafka's fetchMinBytes: a fetch never waits for more than it may take
    max_wait = min(max(req.max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    deadline = trio.current_time() + max_wait
    names = {t.topic for t in targets if t.topic is not None}
    denied = _denied_topics(services, request, replica_id, names)
    read_committed = replica_id < 0 and req.isolation_level == READ_COMMITTED
    consumer_v11 = replica_id < 0 and version >= FOLLOWER_READS_VERSION
    reader = _Reader(follower_ok=consumer_v11, rack=req.rack_id if consumer_v11 else "")
    first = True
    while True:
        done = _read_once(
            services,
            targets,
            replica_id,
            max_bytes,
            first=first,
            read_committed=read_committed,
            denied=denied,
            zstd_readable=version >= ZSTD_MIN_VERSION,
            hard_limits=version < SOFT_LIMITS_VERSION,
            reader=reader,
        )
        first = False
        if (
            done.total >= min_bytes
            or done.errors
            or done.redirected
            or not done.seen
            or trio.current_time() >= deadline
        ):
            break
        arrived = trio.Event()
        for p in done.seen:
            p.add_waiter(arrived)
        waiting = time.perf_counter()
        try:
            with trio.move_on_at(deadline):
                await arrived.wait()
        finally:
            for p in done.seen:
                p.discard_waiter(arrived)
        request.timing.remote += time.perf_counter() - waiting
        if replica_id >= 0 and arrived.is_set():
            services.metrics.observe_replica_wakeup(_woken_after(done.seen))
    answers = [Answer(target.key, entry, size) for target, entry, size in done.entries]
    try:
        body["session_id"], sent = context.respond(answers, privileged=replica_id >= 0, uses_topic_ids=uses_ids)
    except BrokerError as exc:
        body["error_code"] = exc.code
        services.metrics.record_error("Fetch", exc.code.name)
        return body
    body["responses"], endpoints = _responses(services, request, sent)
    if endpoints:
        body["node_endpoints"] = endpoints
    services.metrics.observe_fetch(time.perf_counter() - started)
    return body


def _targets(
    services: FetchServices, positions: list[tuple[PartitionKey, FetchPosition]], uses_ids: bool
) -> list[_Target]:
    if not uses_ids:
        return [_Target(key, str(key[0]), key[1], position) for key, position in positions]
    names: dict[Any, str | None] = {}
    targets = []
    for key, position in positions:
        topic_id = key[0]
        if topic_id not in names:
            names[topic_id] = services.topic_ids.name(services.metadata, topic_id)  # type: ignore[arg-type]
        targets.append(_Target(key, names[topic_id], key[1], position))
    return targets


def _responses(services: FetchServices, request: Request, sent: list[Answer]) -> tuple[list[Any], list[Any]]:
    """(the answer's topics, its node endpoints): consecutive partitions of one topic share a topic
    entry, as Kafka groups them; leader hints are added to the partitions that need one."""
    version = request.api_version
    responses: list[dict[str, Any]] = []
    endpoints: dict[int, Any] = {}
    last_key: object = None
    partitions: list[dict[str, Any]] = []
    for answer in sent:
        topic_key = answer.key[0]
        entry = answer.entry
        if version >= LEADER_HINT_VERSION and entry["error_code"] in _HINTED:
            name = topic_key if isinstance(topic_key, str) else services.topic_ids.name(services.metadata, topic_key)
            if name is not None:
                index = entry["partition_index"]
                current, endpoint = leader_hint(services.metadata, name, index, request.connection.listener)
                entry["current_leader"] = current
                add_endpoint(endpoints, endpoint)
        if topic_key != last_key or not responses:
            partitions = []
            if isinstance(topic_key, str):
                responses.append({"topic": topic_key, "topic_id": NO_TOPIC_ID, "partitions": partitions})
            else:
                responses.append({"topic": "", "topic_id": topic_key, "partitions": partitions})
            last_key = topic_key
        partitions.append(entry)
    return responses, sorted(endpoints.values(), key=lambda e: e["node_id"])
