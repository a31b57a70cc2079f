"""Truncation to a cut from the client's side (TruncatePartitions, strait's API 1001).

:func:`truncate_partitions` is ``AdminClient.truncate_partitions``: it sends the cuts to the
controller (found through Metadata, retried while it moves), then waits, bounded, until every
partition the controller accepted is at its cut. The broker's side and the rules are in
``node.truncation``; docs/replication.md ("Fencing and truncation") is the contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from node.protocol import ApiKey, ErrorCode, Struct, error_info

from ._connection import ClientError, NodeConnection
from ._site import Route

TRUNCATE_VERSION = 0
METADATA_VERSION = 8
POLL_S = 0.1
_IO_MARGIN_S = 5.0

PartitionKey = tuple[str, int]
# Retriable in Kafka's table, but final from the controller, which re-read ZooKeeper before answering.
_FINAL = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


@dataclass(frozen=True)
class TruncationResult:
    """One partition's answer.

    ``error_code`` 0: the partition is led at ``leader_epoch`` or later, its leader's log ends at
    ``offset`` and its ISR holds every live replica. ``truncated``: this call recorded the
    truncation (a leader epoch bump); False when the partition was at the cut already (a
    repeated call). ``log_end_before`` is the leader's log end when the controller checked
    (-1 when unknown). On an error, ``error_message`` names the values involved.
    """

    topic: str
    partition: int
    offset: int
    error_code: int
    error_message: str | None = None
    leader_epoch: int = -1
    truncated: bool = False
    log_end_before: int = -1

    @property
    def ok(self) -> bool:
        return self.error_code == 0


def _body(cuts: Mapping[PartitionKey, int], timeout_s: float, *, validate_only: bool) -> dict[str, Any]:
    topics: dict[str, list[dict[str, int]]] = {}
    for (topic, p), offset in sorted(cuts.items()):
        topics.setdefault(topic, []).append({"index": p, "offset": offset})
    return {
        "timeout_ms": max(0, int(timeout_s * 1000)),
        "validate_only": validate_only,
        "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
    }


def _entries(response: Struct) -> dict[PartitionKey, Any]:
    return {(t.name, p.index): p for t in response.topics for p in t.partitions}


async def _metadata(route: Route, topics: list[str] | None) -> Struct:
    return await route.on_admin(
        ApiKey.METADATA,
        METADATA_VERSION,
        lambda _v: {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        },
    )


async def _on_node(
    route: Route, node_id: int, address: str, api_key: ApiKey, highest: int, body: dict[str, Any], timeout: float
) -> Struct:
    """One request on the route's connection to a given node; the connection is dropped if it fails."""
    conn: NodeConnection | None = None
    try:
        conn = await route.coordinator(node_id, address)
        return await conn.request(api_key, conn.version(api_key, highest), body, timeout=timeout)
    except ClientError:
        if conn is not None:
            await route.drop(node_id, address)
        raise


def _address(meta: Struct, node_id: int) -> str | None:
    return next((f"{b.host}:{b.port}" for b in meta.brokers if b.node_id == node_id), None)


async def _ask_controller(
    route: Route, cuts: dict[PartitionKey, int], deadline: float
) -> tuple[dict[PartitionKey, TruncationResult], dict[PartitionKey, TruncationResult]]:
    """Phase 1: send the cuts to the controller until each has a final answer or time is up.

    Returns (accepted, refused). Raises ClientError when no controller answered at all in time.
    """
    accepted: dict[PartitionKey, TruncationResult] = {}
    refused: dict[PartitionKey, TruncationResult] = {}
    pending = dict(cuts)
    last: ClientError | None = None
    answered = False
    while pending:
        left = deadline - trio.current_time()
        if left <= 0:
            break
        try:
            meta = await _metadata(route, None)
            address = _address(meta, meta.controller_id)
            if address is None:
                raise ClientError(f"no controller{route.where} right now", ErrorCode.NOT_CONTROLLER)
            response = await _on_node(
                route,
                meta.controller_id,
                address,
                ApiKey.TRUNCATE_PARTITIONS,
                TRUNCATE_VERSION,
                _body(pending, max(0.1, left - 0.5), validate_only=False),
                left + _IO_MARGIN_S,
            )
        except ClientError as exc:
            last = exc
            await trio.sleep(min(0.2, max(0.0, deadline - trio.current_time())))
            continue
        answered = True
        for key, entry in _entries(response).items():
            if key not in pending:
                continue
            result = TruncationResult(
                key[0],
                key[1],
                pending[key],
                entry.error_code,
                entry.error_message,
                entry.leader_epoch,
                entry.truncated,
                entry.log_end_offset,
            )
            if entry.error_code == 0:
                accepted[key] = result
                del pending[key]
            elif entry.error_code in _FINAL or not error_info(entry.error_code).retriable:
                refused[key] = result
                del pending[key]
            else:
                refused[key] = result  # the last retriable answer, replaced if a later try succeeds
        if pending:
            await trio.sleep(min(POLL_S * 2, max(0.0, deadline - trio.current_time())))
    if not answered and pending:
        raise ClientError(
            f"truncating partitions{route.where}: no controller answered ({last})", ErrorCode.NOT_CONTROLLER
        )
    for key in accepted:
        refused.pop(key, None)
    for key, offset in pending.items():
        refused.setdefault(
            key,
            TruncationResult(key[0], key[1], offset, ErrorCode.REQUEST_TIMED_OUT, f"no answer in time ({last})"),
        )
    return accepted, refused


@dataclass
class _Progress:
    """The last thing seen of one partition while waiting, for the timeout message."""

    seen: str = "nothing yet"
    done: bool = False


async def _check_done(
    route: Route, accepted: dict[PartitionKey, TruncationResult], progress: dict[PartitionKey, _Progress], left: float
) -> None:
    """One round of phase 2: ask each leader where its partitions are; mark those at their cut."""
    waiting = {k: r for k, r in accepted.items() if not progress[k].done}
    meta = await _metadata(route, sorted({t for t, _ in waiting}))
    live = {b.node_id for b in meta.brokers}
    by_leader: dict[int, dict[PartitionKey, Any]] = {}
    for t in meta.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if key in waiting:
                by_leader.setdefault(p.leader_id, {})[key] = p
    for leader, parts in by_leader.items():
        address = _address(meta, leader)
        if leader < 0 or address is None:
            for key in parts:
                progress[key].seen = "no leader"
            continue
        cuts = {key: waiting[key].offset for key in parts}
        timeout = max(0.5, left)
        check = _entries(
            await _on_node(
                route,
                leader,
                address,
                ApiKey.TRUNCATE_PARTITIONS,
                TRUNCATE_VERSION,
                _body(cuts, timeout, validate_only=True),
                timeout,
            )
        )
        own = await _on_node(
            route, leader, address, ApiKey.METADATA, METADATA_VERSION, _topics_body(cuts), timeout
        )  # the leader's own view of its ISR, which it writes
        isr_of = {(t.name, p.partition_index): p for t in own.topics for p in t.partitions}
        for key, result in ((k, waiting[k]) for k in parts):
            entry, view = check.get(key), isr_of.get(key)
            if entry is None or view is None:
                continue
            replicas_live = sorted(r for r in view.replica_nodes if r in live)
            progress[key].seen = (
                f"leader {leader} at epoch {entry.leader_epoch} (want {result.leader_epoch}+), log end "
                f"{entry.log_end_offset} (want {result.offset}), ISR {sorted(view.isr_nodes)} of live replicas "
                f"{replicas_live}"
            )
            progress[key].done = (
                entry.leader_epoch >= result.leader_epoch >= 0
                and entry.log_end_offset == result.offset
                and set(replicas_live) <= set(view.isr_nodes)
            )


def _topics_body(cuts: Mapping[PartitionKey, int]) -> dict[str, Any]:
    return {"topics": [{"name": t} for t in sorted({t for t, _ in cuts})], "allow_auto_topic_creation": False}


async def truncate_partitions(
    route: Route, cuts: Mapping[PartitionKey, int], timeout: float
) -> dict[PartitionKey, TruncationResult]:
    """Truncate each ``(topic, partition)`` to its offset and wait, at most ``timeout`` seconds in
    all, until each is at the cut (see :class:`TruncationResult`).

    Refusals come back per partition, never raised: UNKNOWN_TOPIC_OR_PARTITION,
    OFFSET_OUT_OF_RANGE (the message names the log start and end), INVALID_REQUEST (inside a
    batch), POLICY_VIOLATION (the topic still takes client writes: fence it first); retriable
    states still there at the deadline (LEADER_NOT_AVAILABLE, ...), and REQUEST_TIMED_OUT for a
    partition accepted but not at its cut in time, naming what was seen last. Idempotent: a
    partition already at its cut answers success with ``truncated`` False. Raises ClientError
    when no controller answers at all; ValueError for a negative offset. Cancellable.
    """
    for (topic, index), offset in cuts.items():
        if offset < 0:
            raise ValueError(f"{topic}-{index}: offset {offset} is negative")
    deadline = trio.current_time() + timeout
    accepted, results = await _ask_controller(route, dict(cuts), deadline)
    progress = {key: _Progress() for key in accepted}
    while not all(p.done for p in progress.values()):
        left = deadline - trio.current_time()
        if left <= 0:
            break
        try:
            with trio.move_on_after(left):
                await _check_done(route, accepted, progress, left)
        except ClientError as exc:
            for seen in progress.values():
                if not seen.done:
                    seen.seen = f"{seen.seen}; then {exc}"
        if not all(p.done for p in progress.values()):
            await trio.sleep(min(POLL_S, max(0.0, deadline - trio.current_time())))
    for key, result in accepted.items():
        if progress[key].done:
            results[key] = result
        else:
            results[key] = TruncationResult(
                result.topic,
                result.partition,
                result.offset,
                ErrorCode.REQUEST_TIMED_OUT,
                f"{key[0]}-{key[1]}: not at the cut {result.offset} within {timeout} s: {progress[key].seen}",
                result.leader_epoch,
                result.truncated,
                result.log_end_before,
            )
    return results
