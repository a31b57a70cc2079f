"""``GroupCoordinator``: the consumer-group APIs of one node, for the groups whose partition it leads.

A group lives in ``__consumer_offsets`` partition ``partition_for(group)``; the node leading that
partition is the group's coordinator. The broker ``load_partition``s the partitions it comes to
lead (replaying their records) and ``unload_partition``s those it loses; requests for groups of
other partitions get NOT_COORDINATOR, and COORDINATOR_LOAD_IN_PROGRESS while their partition loads.

Handlers take a decoded request ``Struct`` and its version and return the response body as a dict
in the field names of ``node.protocol``'s schema for that API. Errors are Kafka error codes in the
body: the handlers raise nothing for bad input. ``run`` fires the timers (sessions, rebalances,
offset retention); until it runs the group APIs answer COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import trio

from node.protocol import ErrorCode, Struct

from ._config import GroupConfig
from ._errors import GroupBusy, NotCoordinatorError, OffsetStoreError, RecordFormatError
from ._group import Group, GroupSnapshot, GroupState, JoinResult, TopicPartition
from ._membership import HEARTBEAT, JOIN, SYNC, JoinRequest, Membership, TimerKey
from ._offsets import CommitRequest, Journal, Offsets, OffsetStore, group_record, store_error_code
from ._records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from ._records import partition_for as _partition_for
from ._timers import Timers
from ._txn_offsets import TxnEnd, TxnOffsets, TxnRecord

# What a load replays: plain (key, value) records, records of transactional batches, and transaction markers.
LogEntry = tuple[bytes | None, bytes | None] | TxnRecord | TxnEnd

log = logging.getLogger("strait.node.groups")

_S = GroupState
RETENTION: TimerKey = ("retention", "", "")
LOADING = "loading"
LOADED = "loaded"
# DescribeGroups authorized operations without an authorizer: READ (3), DELETE (6), DESCRIBE (8).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NO_AUTHORIZED_OPERATIONS = -(1 << 31)
# ListGroups v5's group type: every group here is a classic group (KIP-848's "consumer" groups are not served)
CLASSIC_GROUP_TYPE = "classic"


class GroupCoordinator:
    """The group coordinator of one node. All handlers are trio coroutines; none raises for bad input."""

    def __init__(self, config: GroupConfig, store: OffsetStore, *, wall_clock_ms: Callable[[], int]) -> None:
        self.config = config
        self._now_ms = wall_clock_ms
        self._partitions: dict[int, str] = {}  # partition -> LOADING | LOADED
        self._groups: dict[int, dict[str, Group]] = {}  # partition -> group id -> group
        self._timers: Timers[TimerKey] = Timers()
        self._journal = Journal(store, config.offsets_commit_timeout_ms)
        self._offsets = Offsets(self._journal, self.partition_for, config.max_metadata_bytes, wall_clock_ms)
        self._txn_offsets = TxnOffsets(self._journal, self.partition_for)
        self._membership = Membership(config, self._timers, self._store_group, self._spawn, wall_clock_ms)
        self._nursery: trio.Nursery | None = None

    # -- life -------------------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire session, rebalance and retention timers until cancelled; ``started()`` once the APIs serve.

        Raises RuntimeError if it is already running.
        """
        if self._nursery is not None:
            raise RuntimeError("GroupCoordinator.run is already running")
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                self._timers.schedule_in(RETENTION, self.config.offsets_retention_check_interval_ms)
                task_status.started()
                while True:
                    for key in await self._timers.next_due():
                        self._fire(key)
            finally:
                self._nursery = None

    def _fire(self, key: TimerKey) -> None:
        kind, group_id, member_id = key
        if key == RETENTION:
            self._timers.schedule_in(RETENTION, self.config.offsets_retention_check_interval_ms)
            self._spawn(self._expire_offsets)
            return
        group = self._group(group_id)
        if group is None:
            return
        if kind == HEARTBEAT:
            self._membership.on_heartbeat_deadline(group, member_id)
        elif kind == JOIN:
            self._membership.on_join_deadline(group)
        elif kind == SYNC:
            self._membership.on_sync_deadline(group)

    def _spawn(self, fn: Callable[[], Any]) -> None:
        if self._nursery is None:
            raise RuntimeError("GroupCoordinator.run is not running")
        self._nursery.start_soon(fn)

    # -- partitions -------------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's formula)."""
        return _partition_for(group_id, self.config.offsets_partitions)

    def is_loaded(self, partition: int) -> bool:
        """Whether this node serves the groups of ``partition`` (loaded, not loading)."""
        return self._partitions.get(partition) == LOADED

    def begin_loading(self, partition: int) -> None:
        """Mark ``partition`` as loading: its groups get COORDINATOR_LOAD_IN_PROGRESS until ``load_partition``."""
        self._check_partition(partition)
        if self._partitions.get(partition) != LOADED:
            self._partitions[partition] = LOADING

    def load_partition(self, partition: int, records: Iterable[LogEntry]) -> None:
        """Replay ``partition``'s records (in offset order) and serve its groups.

        The latest record per key wins and tombstones delete. Records of a transactional batch
        (``TxnRecord``) count once their producer's COMMIT marker (``TxnEnd``) follows, never after an
        ABORT, and are pending while neither has come. Groups stored with members come back
        Stable with those members, whose session timers start now: members that keep heartbeating
        keep their generation, the others expire and the group rebalances (as Kafka does). Records
        that do not parse are skipped with a warning naming them. A partition already loaded is
        replaced. Must be called from within trio (it arms timers). Raises ValueError for a
        partition outside ``0..offsets_partitions-1``.
        """
        self._check_partition(partition)
        if partition in self._groups:
            self.unload_partition(partition)
        self._partitions[partition] = LOADING
        try:
            groups = self._replay(partition, records)
        except BaseException:
            self._partitions.pop(partition, None)
            raise
        self._groups[partition] = groups
        for group in groups.values():
            self._membership.on_loaded(group)
        self._partitions[partition] = LOADED

    def _replay(self, partition: int, records: Iterable[LogEntry]) -> dict[str, Group]:
        metadata: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        pending: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = {}  # producer -> group -> offsets
        for n, entry in enumerate(records):
            if isinstance(entry, TxnEnd):
                for group_id, ended in pending.pop(entry.producer_id, {}).items():
                    if entry.commit:
                        offsets.setdefault(group_id, {}).update(ended)
                continue
            producer = entry.producer_id if isinstance(entry, TxnRecord) else None
            key_bytes, value_bytes = (entry.key, entry.value) if isinstance(entry, TxnRecord) else entry
            if key_bytes is None:
                continue
            try:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetCommitKey) and producer is not None:
                    if value_bytes is not None:
                        by_group = pending.setdefault(producer, {}).setdefault(key.group, {})
                        by_group[(key.topic, key.partition)] = decode_offset_commit_value(value_bytes)
                elif isinstance(key, OffsetCommitKey):
                    per_group = offsets.setdefault(key.group, {})
                    tp = (key.topic, key.partition)
                    if value_bytes is None:
                        per_group.pop(tp, None)
                    else:
                        per_group[tp] = decode_offset_commit_value(value_bytes)
                elif isinstance(key, GroupMetadataKey):
                    metadata[key.group] = None if value_bytes is None else decode_group_metadata_value(value_bytes)
            except RecordFormatError as exc:
                log.warning(
                    "__consumer_offsets-%d: skipping record %d (key %s): %s", partition, n, key_bytes.hex(), exc
                )
        if pending:
            self._txn_offsets.pending[partition] = pending
        now = self._now_ms()
        groups: dict[str, Group] = {}
        for group_id in {**metadata, **offsets}:
            value = metadata.get(group_id)
            committed = offsets.get(group_id, {})
            if value is None and not committed:
                continue
            try:
                group = Group.from_record(group_id, value, now) if value is not None else Group(group_id, now_ms=now)
            except RecordFormatError as exc:
                log.warning("__consumer_offsets-%d: group %r comes back Empty: %s", partition, group_id, exc)
                group = Group(group_id, now_ms=now)
            group.offsets.update(committed)
            groups[group_id] = group
        return groups

    def unload_partition(self, partition: int) -> None:
        """Stop serving ``partition``: its groups are dropped and their waiting requests get NOT_COORDINATOR."""
        self._partitions.pop(partition, None)
        self._txn_offsets.unload(partition)
        for group in self._groups.pop(partition, {}).values():
            self._membership.close(group, ErrorCode.NOT_COORDINATOR)

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.config.offsets_partitions:
            raise ValueError(
                f"__consumer_offsets partition {partition} is outside 0..{self.config.offsets_partitions - 1}"
            )

    # -- groups -----------------------------------------------------------------------------------------------------

    def _check(self, group_id: str, *, needs_id: bool) -> ErrorCode | None:
        """Kafka's validateGroupStatus: is this node the group's coordinator, ready to serve it?"""
        if needs_id and not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if self._nursery is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        state = self._partitions.get(self.partition_for(group_id))
        if state == LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if state is None:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _group(self, group_id: str) -> Group | None:
        return self._groups.get(self.partition_for(group_id), {}).get(group_id)

    def _create_group(self, group_id: str) -> Group:
        group = Group(group_id, now_ms=self._now_ms())
        self._groups.setdefault(self.partition_for(group_id), {})[group_id] = group
        return group

    def _forget(self, group: Group) -> None:
        groups = self._groups.get(self.partition_for(group.group_id), {})
        if groups.get(group.group_id) is group:
            del groups[group.group_id]
        self._membership.close(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _store_group(
        self, group: Group, assignment: dict[str, bytes], written: Callable[[], None]
    ) -> Coroutine[Any, Any, ErrorCode]:
        write = self._journal.write(self.partition_for(group.group_id), [group_record(group, assignment)], written)

        async def run() -> ErrorCode:
            try:
                await write
            except OffsetStoreError as exc:
                log.warning("storing group %r failed: %s", group.group_id, exc)
                return store_error_code(exc)
            return ErrorCode.NONE

        return run()

    async def _drop(self, group: Group, partitions: Iterable[TopicPartition]) -> ErrorCode:
        """Delete an Empty group and these offsets durably; NONE, or the write's error (the group then stays)."""
        became_empty = group.state_timestamp_ms
        group.transition_to(_S.DEAD, self._now_ms())  # no member may join while the tombstones are written
        done = False
        try:
            await self._offsets.remove(group, partitions, drop_group=True, removed=self._forget)
            done = True
        except OffsetStoreError as exc:
            return store_error_code(exc)
        finally:
            if not done and group.is_(_S.DEAD) and self._group(group.group_id) is group:
                group.undo_dead(became_empty)
        return ErrorCode.NONE

    async def _expire_offsets(self) -> None:
        """Kafka's offset retention pass: expired offsets go; Empty groups left without offsets go too."""
        now = self._now_ms()
        for groups in list(self._groups.values()):
            for group in list(groups.values()):
                if group.is_(_S.DEAD):
                    continue
                expired = group.expired_offsets(now, self.config.offsets_retention_ms)
                left = set(group.offsets) - set(expired)
                dropped = (
                    group.is_(_S.EMPTY)
                    and not left
                    and not group.pending_members
                    and not +group.pending_commits
                    and not self._txn_offsets.has_pending(self.partition_for(group.group_id), group.group_id)
                )
                if dropped:
                    error = await self._drop(group, expired)
                elif expired:
                    try:
                        await self._offsets.remove(group, expired, drop_group=False, removed=self._forget)
                        error = ErrorCode.NONE
                    except OffsetStoreError as exc:
                        error = store_error_code(exc)
                else:
                    continue
                if error is ErrorCode.NONE:
                    log.info("group %r: %d offsets expired (group deleted: %s)", group.group_id, len(expired), dropped)
                else:
                    log.warning("group %r: expiring %d offsets failed (%s)", group.group_id, len(expired), error.name)

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------------------

    async def join_group(self, req: Struct, version: int, client_id: str, client_host: str) -> dict[str, Any]:
        """JoinGroup v0-9. Waits until the rebalance completes or the member's rebalance timeout passes.

        v8's ``reason`` is only logged; v9 lets a rejoining static leader skip the assignment (KIP-814).
        """
        error = self._check(req.group_id, needs_id=True)
        config = self.config
        if (
            error is None
            and not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms
        ):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        group = self._group(req.group_id) if error is None else None
        if error is None and group is None:
            if req.member_id:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                group = self._create_group(req.group_id)
        if error is not None or group is None:
            return _join_response(
                JoinResult(error if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR, req.member_id), version
            )
        join = JoinRequest(
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if version >= 5 else None,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in req.protocols),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        )
        if version >= 8 and req.reason:
            log.debug("group %r: member %r joins: %s", req.group_id, req.member_id, req.reason)
        return _join_response(await self._membership.join(group, join), version)

    async def sync_group(self, req: Struct, version: int) -> dict[str, Any]:
        """SyncGroup v0-5. Followers wait for the leader's assignments; v5 checks and names the protocol."""
        error = self._check(req.group_id, needs_id=True)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.REBALANCE_IN_PROGRESS  # the rebalance's state is lost: rejoin (older clients need this)
        group = self._group(req.group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None or group is None:
            return {"throttle_time_ms": 0, "error_code": error, "assignment": b""}
        assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
        instance_id = req.group_instance_id if version >= 3 else None
        protocol = (req.protocol_type, req.protocol_name) if version >= 5 else (None, None)
        result = await self._membership.sync(
            group, req.member_id, instance_id, req.generation_id, assignments, *protocol
        )
        return {
            "throttle_time_ms": 0,
            "error_code": result.error,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        }

    async def heartbeat(self, req: Struct, version: int) -> dict[str, Any]:
        """Heartbeat v0-4; while the partition loads the answer is NONE (as Kafka: "respond blindly")."""
        error = self._check(req.group_id, needs_id=True)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.NONE
        elif error is None:
            group = self._group(req.group_id)
            instance_id = req.group_instance_id if version >= 3 else None
            if group is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                error = self._membership.heartbeat(group, req.member_id, instance_id, req.generation_id)
        return {"throttle_time_ms": 0, "error_code": error}

    async def leave_group(self, req: Struct, version: int) -> dict[str, Any]:
        """LeaveGroup: v0-2 one member (the error is the member's), v3+ a batch with per-member errors.

        v5's per-member ``reason`` is only logged.
        """
        leaving: list[tuple[str, str | None]] = [(req.member_id, None)]
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in req.members]
            for m in req.members:
                if version >= 5 and m.reason:
                    log.debug("group %r: member %r leaves: %s", req.group_id, m.member_id, m.reason)
        error = self._check(req.group_id, needs_id=True)
        errors: list[ErrorCode] = []
        if error is None:
            group = self._group(req.group_id)
            if group is None:
                error, errors = ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
            else:
                error, errors = self._membership.leave(group, leaving)
        if version < 3:
            first = next((e for e in errors if e is not ErrorCode.NONE), ErrorCode.NONE)
            return {"throttle_time_ms": 0, "error_code": first if error is ErrorCode.NONE else error}
        members = [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
            for (member_id, instance_id), code in zip(leaving, errors, strict=False)
        ]
        return {"throttle_time_ms": 0, "error_code": error, "members": members}

    # -- offsets ----------------------------------------------------------------------------------------------------

    async def offset_commit(self, req: Struct, version: int) -> dict[str, Any]:
        """OffsetCommit v0-9, acknowledged once durable. Generation -1 + empty member id: a "simple" commit.

        A generation for a group this node does not know is ILLEGAL_GENERATION, from v9 GROUP_ID_NOT_FOUND
        (as Kafka 4). v9 is otherwise v8: for a classic group the generation is still a generation.
        """
        entries = [(t.name, p) for t in req.topics for p in t.partitions]
        error = self._check(req.group_id, needs_id=False)
        group = self._group(req.group_id) if error is None else None
        instance_id = req.group_instance_id if version >= 7 else None
        generation = req.generation_id_or_member_epoch if version >= 1 else -1
        member_id = req.member_id if version >= 1 else ""
        if error is None and group is None:
            if generation < 0:
                group = self._create_group(req.group_id)
            else:
                error = ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
        if error is None and group is not None:
            error = self._membership.check_commit(group, member_id, instance_id, generation)
        if error is not None or group is None:
            codes = [error if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR] * len(entries)
        else:
            requests = [
                CommitRequest(
                    topic=topic,
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                    metadata=p.committed_metadata,
                    commit_timestamp=p.commit_timestamp if version == 1 else -1,
                    retention_ms=req.retention_time_ms if 2 <= version <= 4 else -1,
                )
                for topic, p in entries
            ]
            codes = await self._offsets.commit(group, requests)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), code in zip(entries, codes, strict=True):
            topics.setdefault(topic, []).append({"partition_index": p.partition_index, "error_code": code})
        return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}

    async def txn_offset_commit(self, req: Struct, version: int) -> dict[str, Any]:
        """TxnOffsetCommit v0-3: the offsets are written as the producer's transactional batch, once durable.

        They become committed when the transaction commits (``complete_txn_offsets``). As OffsetCommit:
        NOT_COORDINATOR and the like for the group, OFFSET_METADATA_TOO_LARGE per partition; v3 checks the
        member and generation when given (KIP-447); an unknown group is made, as Kafka does.
        """
        entries = [(t.name, p) for t in req.topics for p in t.partitions]
        error = self._check(req.group_id, needs_id=True)
        group = None
        if error is None:
            group = self._group(req.group_id) or self._create_group(req.group_id)  # as Kafka: made if unknown
            error = _check_txn_commit(group, req, version)
        codes: list[ErrorCode] = []
        if error is not None or group is None:
            codes = [error if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR] * len(entries)
        else:
            now = self._now_ms()
            accepted: dict[TopicPartition, OffsetCommitValue] = {}
            for topic, p in entries:
                metadata = p.committed_metadata or ""
                if len(metadata.encode("utf-16-le", "surrogatepass")) // 2 > self.config.max_metadata_bytes:
                    codes.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                    continue
                codes.append(ErrorCode.NONE)
                leader_epoch = p.committed_leader_epoch if version >= 2 else -1
                accepted[(topic, p.partition_index)] = OffsetCommitValue(
                    p.committed_offset, metadata, now, leader_epoch
                )
            if accepted:
                failure = await self._txn_offsets.commit(req.group_id, req.producer_id, req.producer_epoch, accepted)
                if failure is not ErrorCode.NONE:
                    codes = [failure if c is ErrorCode.NONE else c for c in codes]
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), code in zip(entries, codes, strict=True):
            topics.setdefault(topic, []).append({"partition_index": p.partition_index, "error_code": code})
        return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}

    def complete_txn_offsets(self, partition_index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of ``producer_id`` was written in ``__consumer_offsets``-``partition_index``.

        On COMMIT the producer's pending offsets there become committed (visible to OffsetFetch), on
        ABORT they are dropped. Called by the partition once the marker is in the log; never raises.
        """
        for group_id, values in self._txn_offsets.complete(partition_index, producer_id, commit).items():
            group = self._group(group_id) or self._create_group(group_id)
            if not group.is_(_S.DEAD):
                group.offsets.update(values)

    async def offset_fetch(self, req: Struct, version: int) -> dict[str, Any]:
        """OffsetFetch of one group (``group_id``, ``topics``, ``require_stable``), in the v0-7 body.

        ``topics`` null (v2+) means every committed offset of the group. From v7 ``require_stable`` answers
        UNSTABLE_OFFSET_COMMIT (retriable) for a partition some open transaction has written an offset of,
        rather than the offset committed before it (the handler splits a v8+ request into its groups).
        """
        requested = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
        error = self._check(req.group_id, needs_id=False)
        unstable: set[TopicPartition] = set()
        if error is not None:
            if version >= 2:
                return {"throttle_time_ms": 0, "topics": [], "error_code": error}
            found: list[tuple[TopicPartition, OffsetCommitValue | None]] = [(tp, None) for tp in requested or []]
        else:
            found = self._offsets.fetch(self._group(req.group_id), requested)
            if version >= 7 and req.require_stable:
                unstable = self._txn_offsets.pending_partitions(self.partition_for(req.group_id), req.group_id)
        partition_error = error if error is not None else ErrorCode.NONE
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), found_value in found:
            code, value = partition_error, found_value
            if (topic, partition) in unstable:
                code, value = ErrorCode.UNSTABLE_OFFSET_COMMIT, None
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": value.offset if value is not None else -1,
                    "committed_leader_epoch": value.leader_epoch if value is not None else -1,
                    "metadata": value.metadata if value is not None else "",
                    "error_code": code,
                }
            )
        body: dict[str, Any] = {
            "throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
            "error_code": ErrorCode.NONE,
        }
        return body

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]:
        """Delete Empty groups and their offsets durably: (group, error) for each, in order.

        NON_EMPTY_GROUP (68) while it has members, GROUP_ID_NOT_FOUND (69) for an unknown group.
        """
        results: list[tuple[str, int]] = []
        for group_id in group_ids:
            error = self._check(group_id, needs_id=False)
            group = self._group(group_id) if error is None else None
            if error is None:
                if group is None or group.is_(_S.DEAD):
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_(_S.EMPTY):
                    error = ErrorCode.NON_EMPTY_GROUP
                else:
                    error = await self._drop(group, list(group.offsets))
            results.append((group_id, int(error)))
        return results

    async def offset_delete(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, list[tuple[str, int, int]]]:
        """OffsetDelete: (group error, [(topic, partition, error)]); the list is empty when the group error is set.

        GROUP_SUBSCRIBED_TO_TOPIC (86) for topics the active members of a consumer group subscribe to;
        NON_EMPTY_GROUP for an active group of another protocol type. An Empty group left without
        offsets is deleted, as Kafka does.
        """
        error = self._check(group_id, needs_id=False)
        group = self._group(group_id) if error is None else None
        if error is not None:
            return int(error), []
        if group is None or group.is_(_S.DEAD):
            return int(ErrorCode.GROUP_ID_NOT_FOUND), []
        if group.is_(_S.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == "consumer":
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
        else:
            return int(ErrorCode.NON_EMPTY_GROUP), []
        if eligible:
            left = set(group.offsets) - set(eligible)
            if group.is_(_S.EMPTY) and not left and not group.pending_members and not +group.pending_commits:
                write_error = await self._drop(group, eligible)
            else:
                try:
                    await self._offsets.remove(group, eligible, drop_group=False, removed=self._forget)
                    write_error = ErrorCode.NONE
                except OffsetStoreError as exc:
                    write_error = store_error_code(exc)
            if write_error is not ErrorCode.NONE:
                return int(write_error), []
        allowed = set(eligible)
        codes = [
            (topic, p, int(ErrorCode.NONE if (topic, p) in allowed else ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
            for topic, p in partitions
        ]
        return int(ErrorCode.NONE), codes

    # -- describing -------------------------------------------------------------------------------------------------

    async def describe_groups(self, req: Struct, version: int) -> dict[str, Any]:
        """DescribeGroups v0-6; an unknown group is reported Dead, from v6 with GROUP_ID_NOT_FOUND (KIP-1043)."""
        operations = (
            GROUP_OPERATIONS if version >= 3 and req.include_authorized_operations else NO_AUTHORIZED_OPERATIONS
        )
        described = []
        for group_id in req.groups:
            entry: dict[str, Any] = {
                "error_code": ErrorCode.NONE,
                "group_id": group_id,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": operations,
            }
            error = self._check(group_id, needs_id=False)
            group = self._group(group_id) if error is None else None
            if error is not None:
                entry["error_code"] = error
            elif group is None:
                entry["group_state"] = _S.DEAD.value
                if version >= 6:
                    entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
                    entry["error_message"] = f"Group {group_id} not found."
            else:
                stable = group.is_(_S.STABLE) and group.protocol_name is not None
                entry["group_state"] = group.state.value
                entry["protocol_type"] = group.protocol_type or ""
                entry["protocol_data"] = group.protocol_name if stable else ""
                entry["members"] = [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata(group.protocol_name or "") if stable else b"",
                        "member_assignment": m.assignment if stable else b"",
                    }
                    for m in group.members.values()
                ]
            described.append(entry)
        return {"throttle_time_ms": 0, "groups": described}

    async def list_groups(self, req: Struct, version: int) -> dict[str, Any]:
        """ListGroups v0-5: the groups of every loaded partition; COORDINATOR_LOAD_IN_PROGRESS while any loads.

        v4 names each group's state and may filter by state (KIP-518), v5 names its type, always
        ``classic`` here, and may filter by type (KIP-848); filters match case-insensitively, empty is all.
        """
        if self._nursery is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif LOADING in self._partitions.values():
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        else:
            error = ErrorCode.NONE
        states = {s.lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        if types and CLASSIC_GROUP_TYPE not in types:
            return {"throttle_time_ms": 0, "error_code": error, "groups": []}
        groups = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": CLASSIC_GROUP_TYPE,
            }
            for groups in self._groups.values()
            for g in groups.values()
            if not g.is_(_S.DEAD) and (not states or g.state.value.lower() in states)
        ]
        return {"throttle_time_ms": 0, "error_code": error, "groups": groups}

    # -- for operators ----------------------------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        """The ids of the groups this node coordinates, sorted."""
        return sorted(g for groups in self._groups.values() for g, group in groups.items() if not group.is_(_S.DEAD))

    def describe(self, group_id: str) -> GroupSnapshot | None:
        """A snapshot of a group this node coordinates, or None."""
        group = self._group(group_id)
        return group.snapshot() if group is not None and not group.is_(_S.DEAD) else None

    async def reset_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """Set committed offsets of a group without members (created if unknown), durably.

        Raises GroupBusy naming the group, its state and member count while it has members,
        NotCoordinatorError when its partition is not loaded here, OffsetStoreError when the write fails.
        """
        partition = self.partition_for(group_id)
        state = self._partitions.get(partition)
        if state != LOADED:
            raise NotCoordinatorError(group_id, partition, loading=state == LOADING)
        group = self._group(group_id) or self._create_group(group_id)
        if not group.is_(_S.EMPTY):
            raise GroupBusy(group_id, group.state.value, len(group.members))
        await self._offsets.reset(group, offsets)


def _check_txn_commit(group: Group, req: Struct, version: int) -> ErrorCode | None:
    """Kafka's checks of a TxnOffsetCommit: a live group, and from v3 the member and generation when given."""
    if group.is_(_S.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if version < 3:
        return None
    if req.member_id or req.group_instance_id is not None:
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not None:
            return error
    if req.generation_id >= 0 and req.generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return None


def _join_response(result: JoinResult, version: int) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if version >= 7 else (result.protocol_name or ""),
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "metadata": metadata}
            for member_id, instance_id, metadata in result.members
        ],
    }
