"""Committed offsets and the durable write path to ``__consumer_offsets``.

Every change the coordinator makes durable goes through ``Journal.write``: the records of one
partition are appended in the order the coordinator decided them (the order of ``write`` calls),
and the in-memory change (``apply``) is made right after its records are durable, inside the same
shielded section, so memory and log never disagree about what was acknowledged. A write that fails
changes nothing in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from node.protocol import ErrorCode

from ._errors import OffsetStoreError, OffsetStoreTimeout
from ._group import Group, GroupState, TopicPartition
from ._records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)

Records = list[tuple[bytes, bytes | None]]


class OffsetStore(Protocol):
    """Where the coordinator's records go: the local leader replicas of ``__consumer_offsets``."""

    async def append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer: tuple[int, int] | None = None
    ) -> None:
        """Make these (key, value) records durable in __consumer_offsets partition `partition` before returning;
        raise OffsetStoreError if that partition is not (or no longer) available here.

        With ``producer`` (id, epoch) they are one transactional batch of that producer (TxnOffsetCommit).
        """
        ...


def store_error_code(exc: OffsetStoreError) -> ErrorCode:
    """The wire error for a failed write: REQUEST_TIMED_OUT after the commit timeout, else NOT_COORDINATOR."""
    return ErrorCode.REQUEST_TIMED_OUT if isinstance(exc, OffsetStoreTimeout) else ErrorCode.NOT_COORDINATOR


@dataclass
class _Line:
    """The writes of one partition, served one at a time in ticket order."""

    next_ticket: int = 0
    serving: int = 0
    abandoned: set[int] = field(default_factory=set)
    waiting: dict[int, trio.Event] = field(default_factory=dict)


class Journal:
    """Ordered, durable writes to ``__consumer_offsets`` partitions through an ``OffsetStore``."""

    def __init__(self, store: OffsetStore, timeout_ms: int) -> None:
        self._store = store
        self._timeout_ms = timeout_ms
        self._lines: dict[int, _Line] = {}

    def write(
        self,
        partition: int,
        records: Records,
        apply: Callable[[], None] | None = None,
        *,
        producer: tuple[int, int] | None = None,
    ) -> Coroutine[Any, Any, None]:
        """Take the next place in ``partition``'s order now; the returned coroutine performs the write.

        The coroutine waits for the earlier writes of the partition, appends ``records`` (the whole
        append and ``apply`` are shielded from cancellation and bounded by ``offsets_commit_timeout_ms``)
        and runs ``apply`` once they are durable. It raises OffsetStoreError (OffsetStoreTimeout on
        timeout) and then ``apply`` does not run. Cancelled while waiting for its turn, it writes
        nothing. The coroutine must be awaited: later writes of the partition wait for it.
        ``producer`` (id, epoch) makes the records one transactional batch of that producer.
        """
        line = self._lines.setdefault(partition, _Line())
        ticket = line.next_ticket
        line.next_ticket += 1
        return self._perform(partition, line, ticket, records, apply, producer)

    async def _perform(
        self,
        partition: int,
        line: _Line,
        ticket: int,
        records: Records,
        apply: Callable[[], None] | None,
        producer: tuple[int, int] | None,
    ) -> None:
        try:
            if line.serving != ticket:
                event = line.waiting[ticket] = trio.Event()
                await event.wait()
            with trio.CancelScope(shield=True):
                if records:
                    with trio.move_on_after(self._timeout_ms / 1000) as scope:
                        if producer is None:
                            await self._store.append(partition, records)
                        else:
                            await self._store.append(partition, records, producer=producer)
                    if scope.cancelled_caught:
                        raise OffsetStoreTimeout(partition, self._timeout_ms)
                if apply is not None:
                    apply()
        finally:
            line.waiting.pop(ticket, None)
            self._finish(line, ticket)

    @staticmethod
    def _finish(line: _Line, ticket: int) -> None:
        if ticket != line.serving:
            line.abandoned.add(ticket)  # cancelled before its turn: skip it when the turn comes
            return
        line.serving += 1
        while line.serving in line.abandoned:
            line.abandoned.discard(line.serving)
            line.serving += 1
        event = line.waiting.get(line.serving)
        if event is not None:
            event.set()


# ---------------------------------------------------------------------------------------------------------------------
# Records of a group


def offset_record(group_id: str, tp: TopicPartition, value: OffsetCommitValue | None) -> tuple[bytes, bytes | None]:
    """An offset commit record, or its tombstone when ``value`` is None."""
    key = encode_key(OffsetCommitKey(group_id, tp[0], tp[1]))
    return key, None if value is None else encode_offset_commit_value(value)


def group_record(group: Group, assignment: dict[str, bytes] | None) -> tuple[bytes, bytes | None]:
    """The group's metadata record with ``assignment``, or its tombstone when ``assignment`` is None."""
    key = encode_key(GroupMetadataKey(group.group_id))
    if assignment is None:
        return key, None
    return key, encode_group_metadata_value(group.to_record(assignment))


# ---------------------------------------------------------------------------------------------------------------------
# Commit, fetch, delete


@dataclass(frozen=True, slots=True)
class CommitRequest:
    """One partition of an OffsetCommit, versions resolved: -1 timestamps mean "now", -1 retention "default"."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int
    retention_ms: int


class Offsets:
    """Offset commits, fetches and deletions of the groups of every loaded partition."""

    def __init__(
        self, journal: Journal, partition_for: Callable[[str], int], max_metadata_bytes: int, now_ms: Callable[[], int]
    ) -> None:
        self._journal = journal
        self._partition_for = partition_for
        self._max_metadata = max_metadata_bytes
        self._now_ms = now_ms

    async def commit(self, group: Group, requests: list[CommitRequest]) -> list[ErrorCode]:
        """Make the offsets durable, then visible; one error per request, in order.

        OFFSET_METADATA_TOO_LARGE for metadata over ``offset.metadata.max.bytes`` (Java string length),
        NOT_COORDINATOR or REQUEST_TIMED_OUT for all when the write fails.
        """
        now = self._now_ms()
        errors: list[ErrorCode] = []
        accepted: dict[TopicPartition, OffsetCommitValue] = {}
        for r in requests:
            metadata = r.metadata or ""
            if len(metadata.encode("utf-16-le", "surrogatepass")) // 2 > self._max_metadata:
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(ErrorCode.NONE)
            expire = now + r.retention_ms if r.retention_ms >= 0 else -1
            timestamp = r.commit_timestamp if r.commit_timestamp >= 0 else now
            accepted[(r.topic, r.partition)] = OffsetCommitValue(r.offset, metadata, timestamp, r.leader_epoch, expire)
        if not accepted:
            return errors
        failure = await self._write_offsets(group, accepted)
        if failure is not ErrorCode.NONE:
            errors = [failure if e is ErrorCode.NONE else e for e in errors]
        return errors

    async def _write_offsets(self, group: Group, values: dict[TopicPartition, OffsetCommitValue]) -> ErrorCode:
        records = [offset_record(group.group_id, tp, v) for tp, v in values.items()]
        group.pending_commits.update(values.keys())

        def apply() -> None:
            if not group.is_(GroupState.DEAD):
                group.offsets.update(values)

        try:
            await self._journal.write(self._partition_for(group.group_id), records, apply)
        except OffsetStoreError as exc:
            return store_error_code(exc)
        finally:
            group.pending_commits.subtract(values.keys())
            group.pending_commits += Counter()
        return ErrorCode.NONE

    async def reset(self, group: Group, offsets: dict[TopicPartition, int]) -> None:
        """Set committed offsets as an operator (no metadata); raises OffsetStoreError when the write fails."""
        now = self._now_ms()
        values = {tp: OffsetCommitValue(offset, "", now) for tp, offset in offsets.items()}
        error = await self._write_offsets(group, values)
        if error is not ErrorCode.NONE:
            raise OffsetStoreError(f"group {group.group_id!r}: resetting {len(values)} offsets failed ({error.name})")

    @staticmethod
    def fetch(
        group: Group | None, partitions: Iterable[TopicPartition] | None
    ) -> list[tuple[TopicPartition, OffsetCommitValue | None]]:
        """Committed offsets (None where nothing is committed); ``partitions`` None means all the group has."""
        offsets = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            return list(offsets.items())
        return [(tp, offsets.get(tp)) for tp in partitions]

    async def remove(
        self,
        group: Group,
        partitions: Iterable[TopicPartition],
        *,
        drop_group: bool,
        removed: Callable[[Group], None],
    ) -> None:
        """Tombstone offsets (and the group's metadata when ``drop_group``; the group is then already Dead).

        ``removed(group)`` runs once the tombstones are durable if the group was dropped. Raises
        OffsetStoreError when the write fails; nothing changes in memory then.
        """
        wanted = set(partitions)
        known = set(group.offsets) | {tp for tp, n in group.pending_commits.items() if n > 0}
        doomed = sorted(wanted & known)
        records = [offset_record(group.group_id, tp, None) for tp in doomed]
        if drop_group:
            records.append(group_record(group, None))

        def apply() -> None:
            for tp in doomed:
                group.offsets.pop(tp, None)
            if drop_group:
                removed(group)

        await self._journal.write(self._partition_for(group.group_id), records, apply)
