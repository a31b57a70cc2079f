"""Transaction markers: the COMMIT or ABORT control batch every partition of a transaction gets.

Once a PrepareCommit or PrepareAbort record is durable the coordinator must see a marker written
on each partition of the transaction before it may write CompleteCommit or CompleteAbort; it sends
them with ``WriteTxnMarkers`` to each partition's leader (``MarkerWriter``, which the broker binds
to ``node.client``) and keeps sending until each partition has taken its marker, as Kafka's
``TransactionMarkerChannelManager`` does:

- NONE: written. A partition whose topic no longer exists (the writer's ``leader_of`` is None) is
  done too, and so is one that answers UNSUPPORTED_FOR_MESSAGE_FORMAT;
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer epoch
  has been seen there; this coordinator stops sending (``CoordinatorFenced``) and leaves the
  transaction to the coordinator that fenced it;
- anything else (no leader, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, not enough
  replicas, a timeout, no connection): sent again after ``marker_retry_backoff_ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import trio

from node.protocol import ErrorCode

from ._errors import MarkerWriteError, TxnError
from ._records import TopicPartition

log = logging.getLogger("strait.node.txn")

NO_LEADER = -1
_DONE = frozenset({ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT})
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry: the marker of one producer's transaction on these partitions."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


class MarkerWriter(Protocol):
    """Writes markers on the partition leaders; the broker's binding sends WriteTxnMarkers (27) v0-1."""

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's leader now, NO_LEADER (-1) while it has none, None when the partition does not exist."""
        ...

    async def write_markers(self, node_id: int, markers: Sequence[TxnMarker]) -> Mapping[TopicPartition, int]:
        """Send ``markers`` to node ``node_id``; the error code it answered for each partition.

        Raises MarkerWriteError when the node cannot be asked (no connection, no answer in time).
        """
        ...


class CoordinatorFenced(TxnError):
    """A partition leader has seen a newer coordinator (or producer epoch): stop completing this transaction."""

    def __init__(self, transactional_id: str, tp: TopicPartition, code: int) -> None:
        super().__init__(
            f"transaction {transactional_id!r}: {tp[0]}-{tp[1]} answered {ErrorCode(code).name} to its marker"
        )
        self.code = code


async def write_all_markers(
    writer: MarkerWriter,
    transactional_id: str,
    marker: TxnMarker,
    *,
    backoff_ms: int,
    still_coordinator: Callable[[], bool],
) -> bool:
    """Send ``marker`` until every partition of it has taken it (see the module docstring).

    Returns True once all have, False when ``still_coordinator()`` turns false first (the
    transaction's ``__transaction_state`` partition moved away: its new coordinator completes it).
    Raises CoordinatorFenced. Cancellable.
    """
    remaining = set(marker.partitions)
    while remaining:
        if not still_coordinator():
            return False
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(remaining):
            leader = writer.leader_of(*tp)
            if leader is None:
                log.info("transaction %r: %s-%d no longer exists; no marker for it", transactional_id, *tp)
                remaining.discard(tp)
            elif leader != NO_LEADER:
                by_leader.setdefault(leader, []).append(tp)
        for leader, partitions in by_leader.items():
            sent = TxnMarker(marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch,
                             tuple(partitions))  # fmt: skip
            try:
                answers = await writer.write_markers(leader, [sent])
            except MarkerWriteError as exc:
                log.info("transaction %r: no markers written on node %d (%s); again", transactional_id, leader, exc)
                continue
            for tp in partitions:
                code = answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if code in _DONE:
                    remaining.discard(tp)
                elif code in _FENCED:
                    raise CoordinatorFenced(transactional_id, tp, code)
        if remaining:
            await trio.sleep(backoff_ms / 1000)
    return True
