"""Transactional offset commits (TxnOffsetCommit, KIP-98): written now, visible once the transaction commits.

A transactional producer commits a consumer group's offsets inside its transaction. They are
written to ``__consumer_offsets`` as a *transactional* batch of the producer (its id and epoch),
durable like any commit, but kept pending per producer: OffsetFetch does not see them. When the
transaction coordinator has the group's partition take the transaction's marker, the partition
calls ``complete`` (through the broker's marker callback): on COMMIT the pending offsets become the
group's committed offsets, on ABORT they are dropped.

A load replays the same thing from the log: the records of a transactional batch are pending for
its producer until that producer's control batch (COMMIT or ABORT) in the same partition; what is
still pending at the end of the log belongs to a transaction that has not ended yet. The reader
hands them over as ``TxnRecord`` and ``TxnEnd`` entries among the plain ``(key, value)`` pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from node.protocol import ErrorCode

from ._errors import OffsetStoreError
from ._group import TopicPartition
from ._offsets import Journal, offset_record, store_error_code
from ._records import OffsetCommitValue

# partition of __consumer_offsets -> producer id -> group id -> offsets written in its open transaction
Pending = dict[int, dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]]]


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record of a transactional batch of ``__consumer_offsets``, by producer."""

    producer_id: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnEnd:
    """A transaction marker (control batch) of ``__consumer_offsets``: the producer's transaction ended."""

    producer_id: int
    commit: bool


class TxnOffsets:
    """The pending transactional offsets of every loaded ``__consumer_offsets`` partition."""

    def __init__(self, journal: Journal, partition_for: Callable[[str], int]) -> None:
        self._journal = journal
        self._partition_for = partition_for
        self.pending: Pending = {}

    async def commit(
        self, group_id: str, producer_id: int, producer_epoch: int, values: dict[TopicPartition, OffsetCommitValue]
    ) -> ErrorCode:
        """Write the offsets as the producer's transactional batch; pending once durable. NONE or the write's error."""
        partition = self._partition_for(group_id)
        records = [offset_record(group_id, tp, v) for tp, v in values.items()]

        def apply() -> None:
            by_group = self.pending.setdefault(partition, {}).setdefault(producer_id, {})
            by_group.setdefault(group_id, {}).update(values)

        try:
            await self._journal.write(partition, records, apply, producer=(producer_id, producer_epoch))
        except OffsetStoreError as exc:
            return store_error_code(exc)
        return ErrorCode.NONE

    def complete(
        self, partition: int, producer_id: int, commit: bool
    ) -> dict[str, dict[TopicPartition, OffsetCommitValue]]:
        """End the producer's transaction in ``partition``: the offsets now committed, by group (none on abort)."""
        ended = self.pending.get(partition, {}).pop(producer_id, {})
        return ended if commit else {}

    def has_pending(self, partition: int, group_id: str) -> bool:
        """Whether some open transaction holds offsets of ``group_id``."""
        return any(group_id in by_group for by_group in self.pending.get(partition, {}).values())

    def pending_partitions(self, partition: int, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` whose offsets some open transaction has written (OffsetFetch v7's
        ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them)."""
        return {tp for by_group in self.pending.get(partition, {}).values() for tp in by_group.get(group_id, {})}

    def unload(self, partition: int) -> None:
        self.pending.pop(partition, None)
