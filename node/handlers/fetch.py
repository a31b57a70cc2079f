"""Fetch (API 1): whole batches by sendfile, long polling on ``max_wait_ms`` / ``min_bytes``.

Only the leader serves a partition (NOT_LEADER_OR_FOLLOWER elsewhere; FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH when the request's current_leader_epoch is not the leader's). Followers
fetch with their broker id as ``replica_id``: they read up to the log end offset, and the
offset they fetch from is their log end offset, which moves the high watermark and the ISR.
Per partition the read starts at the batch that contains ``fetch_offset`` (clients skip the
records before it) and stops at the high watermark, at ``partition_max_bytes`` and at what is
left of the response's ``max_bytes``; the first batch of the first non-empty partition is
returned even when it is larger than those limits, so a consumer can always make progress
(Kafka's rule). Fetch sessions (KIP-227) are answered with session id 0: every fetch is a full
fetch, which every client supports.

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
from dataclasses import dataclass
from typing import Any

import trio

from node.errors import BrokerError, answer_errors
from node.ids import NodeId
from node.partition import Partition
from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from storage import FileSlice

from ._services import NO_AUTHORIZER, FollowerTracker, PartitionSource, RequestMetrics, SecurityServices

INT32_MAX = 2**31 - 1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # Fetch and ListOffsets isolation_level
ZSTD_MIN_VERSION = 10  # Fetch versions that may carry zstd batches (KIP-110)
MAX_WAIT_CAP_MS = 300_000


@dataclass(frozen=True, slots=True)
class FetchServices:
    partitions: PartitionSource
    followers: FollowerTracker
    metrics: RequestMetrics
    security: SecurityServices = NO_AUTHORIZER


def _partition_entry(index: int, code: int = 0) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def _denied_topics(services: FetchServices, request: Request) -> frozenset[str]:
    """The requested topics this fetch may not read: every one for a follower without CLUSTER_ACTION."""
    req = request.body
    names = frozenset(topic.topic for topic in req.topics)
    security = services.security
    if req.replica_id >= 0:
        return frozenset() if security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER) else names
    return frozenset(
        name for name in names if not security.allowed(request, AclOperation.READ, ResourceType.TOPIC, name)
    )


def _read_once(
    services: FetchServices,
    req: Struct,
    max_bytes: int,
    *,
    first: bool,
    denied: frozenset[str] = frozenset(),
    zstd_readable: bool = True,
) -> tuple[list[dict[str, Any]], int, bool, list[Partition]]:
    """One pass over the requested partitions: (responses, bytes, any error, partitions read).

    A follower's fetch (``replica_id`` >= 0) reads up to the log end offset and, on the first
    pass, tells the leader where the follower's log ends; a consumer reads up to the high
    watermark. A topic in ``denied`` answers TOPIC_AUTHORIZATION_FAILED without being looked up.
    Without ``zstd_readable`` (Fetch before v10) a consumer's partition of a topic whose
    compression.type is zstd answers UNSUPPORTED_COMPRESSION_TYPE, as Kafka's does.
    """
    replica_id = NodeId(req.replica_id)  # < 0: a consumer, not a replica
    read_committed = replica_id < 0 and getattr(req, "isolation_level", READ_UNCOMMITTED) == READ_COMMITTED
    responses = []
    budget = max_bytes
    total = 0
    errors = False
    seen: list[Partition] = []
    for topic in req.topics:
        partitions = []
        for fp in topic.partitions:
            entry = _partition_entry(fp.partition)
            if topic.topic in denied:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                errors = True
                partitions.append(entry)
                continue
            with answer_errors(entry) as answer:
                partition = services.partitions.partition(topic.topic, fp.partition)
                partition.check_epoch(getattr(fp, "current_leader_epoch", -1))
                if not zstd_readable and replica_id < 0 and partition.policy.compression == "zstd":
                    raise BrokerError(
                        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                        f"{topic.topic}-{fp.partition} is stored with zstd, which needs Fetch v10 or later",
                    )
                if replica_id >= 0 and first:
                    plog = partition.log
                    if plog.log_start_offset <= fp.fetch_offset <= plog.log_end_offset:
                        services.followers.follower_fetched(partition, replica_id, fp.fetch_offset)
            if answer.failed:
                errors = True
                partitions.append(entry)
                continue
            seen.append(partition)
            plog = partition.log
            hw = plog.high_watermark
            lso = partition.last_stable_offset
            end = plog.log_end_offset if replica_id >= 0 else lso if read_committed else hw
            entry["high_watermark"] = hw
            entry["last_stable_offset"] = lso
            entry["log_start_offset"] = plog.log_start_offset
            limit = min(fp.partition_max_bytes, budget)
            if plog.log_start_offset <= fp.fetch_offset < end and (limit > 0 or total == 0):
                slices: list[FileSlice] = []
                with answer_errors(entry) as answer:
                    slices = plog.read(fp.fetch_offset, max(limit, 0), max_offset=end, min_one=total == 0)
                errors = errors or answer.failed
                size = sum(s.length for s in slices)
                if slices:
                    entry["records"] = list(slices)
                    if read_committed:
                        entry["aborted_transactions"] = [
                            {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                            for txn in plog.collect_aborted_txns(fp.fetch_offset, end)
                        ]
                    total += size
                    budget -= size
            elif fp.fetch_offset > plog.log_end_offset or fp.fetch_offset < plog.log_start_offset:
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                errors = True
            partitions.append(entry)
        responses.append({"topic": topic.topic, "partitions": partitions})
    return responses, total, errors, seen


def _woken_after(seen: list[Partition]) -> float:
    """Seconds since the latest wake of a partition in ``seen``: how long a woken fetch took to run."""
    return max(0.0, time.perf_counter() - max(p.woken_at for p in seen))


async def handle_fetch(services: FetchServices, request: Request) -> dict[str, Any]:
    started = time.perf_counter()
    req = request.body
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}
    if req.session_id != 0:
        body["error_code"] = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        return body
    max_bytes = req.max_bytes if request.api_version >= 3 else INT32_MAX
    max_wait = min(max(req.max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    deadline = trio.current_time() + max_wait
    denied = _denied_topics(services, request)
    first = True
    while True:
        responses, total, errors, seen = _read_once(
            services, req, max_bytes, first=first, denied=denied, zstd_readable=request.api_version >= ZSTD_MIN_VERSION
        )
        first = False
        if total >= req.min_bytes or errors or not seen or trio.current_time() >= deadline:
            break
        arrived = trio.Event()
        for p in seen:
            p.add_waiter(arrived)
        waiting = time.perf_counter()
        try:
            with trio.move_on_at(deadline):
                await arrived.wait()
        finally:
            for p in seen:
                p.discard_waiter(arrived)
        request.timing.remote += time.perf_counter() - waiting
        if req.replica_id >= 0 and arrived.is_set():
            services.metrics.observe_replica_wakeup(_woken_after(seen))
    body["responses"] = responses
    services.metrics.observe_fetch(time.perf_counter() - started)
    return body
