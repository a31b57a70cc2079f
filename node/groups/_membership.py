"""Kafka's classic group membership protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

A rebalance, step by step (Kafka's GroupCoordinator):

1. A member joins (or rejoins with new protocols, or the leader rejoins, or a member leaves or
   fails): the group goes to PreparingRebalance and every member's JoinGroup waits.
2. The join completes when every known member has rejoined and no MEMBER_ID_REQUIRED member is
   still pending, or at the rebalance timeout (the longest of the members'). An Empty group waits
   ``initial_rebalance_delay_ms`` instead, extended while new members keep arriving, up to the
   rebalance timeout. Dynamic members that did not rejoin are dropped; static ones stay.
3. The next generation starts (CompletingRebalance): the protocol all members support that most
   prefer is chosen; the leader's JoinGroup answer lists every member's metadata.
4. The leader's SyncGroup carries the assignments: once the group's record is durable every
   waiting SyncGroup gets its member's assignment and the group is Stable. Members that send no
   SyncGroup within the rebalance timeout are dropped and the group rebalances again.

Members prove they live by heartbeats (or by any request): a member not heard from for its
session timeout is removed, which starts a rebalance. A member waiting in JoinGroup or SyncGroup
counts as alive, except a new member still in its first JoinGroup after five minutes (KIP-394).
Static members (KIP-345, ``group.instance.id``) keep their assignment across restarts: rejoining
with an empty member id replaces the old member id without a rebalance while the group is Stable
and its chosen protocol would not change; the replaced id is fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from node.protocol import ErrorCode

from ._config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from ._group import Group, GroupState, JoinResult, Member, Protocols, Reply, SyncResult
from ._timers import Timers

log = logging.getLogger("strait.node.groups")

HEARTBEAT = "heartbeat"
JOIN = "join"
SYNC = "sync"
TimerKey = tuple[str, str, str]  # (kind, group id, member id or "")

# Writes the group's record with this assignment; the sync part (building the record, taking the
# write's place in line) happens when called, the awaitable calls ``on_written`` once the record is
# durable and returns NONE, or returns the error code of a failed write.
StoreGroup = Callable[[Group, dict[str, bytes], Callable[[], None]], Awaitable[ErrorCode]]
Spawn = Callable[[Callable[[], Awaitable[None]]], None]

_S = GroupState


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup, version differences resolved (v0: rebalance timeout = session timeout)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool  # JoinGroup v4+: answer MEMBER_ID_REQUIRED first
    supports_skip_assignment: bool = False  # JoinGroup v9+ (KIP-814)


def timer_key(kind: str, group: Group, member_id: str = "") -> TimerKey:
    return (kind, group.group_id, member_id)


class Membership:
    """Runs the membership protocol on groups the coordinator hands it; owns their timers.

    Every method but ``join`` and ``sync`` returns at once. ``join`` and ``sync`` may wait for the
    rest of the group; cancelling them leaves the group as if the answer had been lost in transit.
    """

    def __init__(
        self,
        config: GroupConfig,
        timers: Timers[TimerKey],
        store_group: StoreGroup,
        spawn: Spawn,
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self._config = config
        self._timers = timers
        self._store_group = store_group
        self._spawn = spawn
        self._now_ms = wall_clock_ms

    # -- JoinGroup --------------------------------------------------------------------------------------------------

    async def join(self, group: Group, req: JoinRequest) -> JoinResult:
        """Join (or rejoin) ``group``; waits until the rebalance completes when the member must take part."""
        if group.is_(_S.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        outcome = self._join_new(group, req) if req.member_id == "" else self._join_known(group, req)
        if group.is_(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome.wait()

    def _join_new(self, group: Group, req: JoinRequest) -> JoinResult | Reply[JoinResult]:
        member_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_member_id = group.static_members.get(req.group_instance_id)
            if old_member_id is not None:
                return self._replace_static_member(group, req.group_instance_id, old_member_id, member_id, req)
            return self._add_member_and_rebalance(group, member_id, req)
        if req.require_known_member_id:
            group.pending_members.add(member_id)
            self._timers.schedule_in(timer_key(HEARTBEAT, group, member_id), req.session_timeout_ms)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member_and_rebalance(group, member_id, req)

    def _join_known(self, group: Group, req: JoinRequest) -> JoinResult | Reply[JoinResult]:
        if req.member_id in group.pending_members and req.group_instance_id is None:
            return self._add_member_and_rebalance(group, req.member_id, req)
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not None:
            return JoinResult(error, req.member_id)
        member = group.members[req.member_id]
        if group.is_(_S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, req)
        if group.is_(_S.COMPLETING_REBALANCE):
            if member.protocols == req.protocols:
                return self._current_generation(group, member, with_members=group.leader_id == member.member_id)
            return self._update_member_and_rebalance(group, member, req)
        if group.is_(_S.STABLE):
            # The leader rejoining forces a rebalance: that is how a consumer leader reacts to metadata changes.
            if group.leader_id == member.member_id or member.protocols != req.protocols:
                return self._update_member_and_rebalance(group, member, req)
            return self._current_generation(group, member, with_members=False)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)

    def _current_generation(self, group: Group, member: Member, *, with_members: bool) -> JoinResult:
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if with_members else (),
        )

    def _add_member_and_rebalance(self, group: Group, member_id: str, req: JoinRequest) -> Reply[JoinResult]:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            is_new=True,
        )
        reply: Reply[JoinResult] = Reply()
        if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, reply)
        self._timers.schedule_in(timer_key(HEARTBEAT, group, member_id), NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group)
        return reply

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest) -> Reply[JoinResult]:
        reply: Reply[JoinResult] = Reply()
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, reply)
        self._maybe_prepare_rebalance(group)
        return reply

    def _replace_static_member(
        self, group: Group, instance_id: str, old_member_id: str, new_member_id: str, req: JoinRequest
    ) -> Reply[JoinResult]:
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._timers.cancel(timer_key(HEARTBEAT, group, old_member_id))
        self._touch(group, member)
        before = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        reply: Reply[JoinResult] = Reply()
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, reply)
        if group.is_(_S.STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group)
                return reply
            generation = group.generation_id

            def written() -> None:
                # A Stable group would not hand out a new assignment, so a restarted leader must not run its
                # assignor. Before JoinGroup v9 it is told the old leader id (so it thinks it follows); from v9
                # (KIP-814) it is told it leads, with the members' metadata, and to skip the assignment.
                if member.join_reply is not reply:
                    return
                leads = req.supports_skip_assignment and group.leader_id == new_member_id
                member.answer_join(
                    JoinResult(
                        ErrorCode.NONE,
                        new_member_id,
                        generation,
                        group.protocol_type,
                        group.protocol_name,
                        new_member_id if leads else previous_leader,
                        group.current_member_metadata() if leads else (),
                        skip_assignment=leads,
                    )
                )

            def failed(error: ErrorCode) -> None:
                if group.members.get(new_member_id) is not member or member.join_reply is not reply:
                    return
                member.answer_join(JoinResult(error, ""))
                group.update_member(member, *before, None)
                group.replace_static_member(instance_id, new_member_id, old_member_id)
                self._timers.cancel(timer_key(HEARTBEAT, group, new_member_id))
                self._touch(group, member)

            assignment = {m.member_id: m.assignment for m in group.members.values()}
            self._store_in_background(group, assignment, written, failed)
        elif group.is_(_S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group)
        return reply

    # -- rebalancing ------------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.is_(_S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._clear_pending_sync(group)
        initial = group.is_(_S.EMPTY)
        group.transition_to(_S.PREPARING_REBALANCE, self._now_ms())
        group.initial_join = initial
        if initial:
            delay = self._config.initial_rebalance_delay_ms
            group.new_member_added = False
            group.join_delay_ms = delay
            group.join_remaining_ms = max(group.rebalance_timeout_ms - delay, 0)
            self._timers.schedule_in(timer_key(JOIN, group), delay)
        else:
            self._timers.schedule_in(timer_key(JOIN, group), group.rebalance_timeout_ms)
            self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.is_(_S.PREPARING_REBALANCE) and not group.initial_join and group.has_all_members_joined:
            self._complete_join(group)

    def on_join_deadline(self, group: Group) -> None:
        """The rebalance's delay or timeout passed: extend the initial delay if members keep coming, else complete."""
        if not group.is_(_S.PREPARING_REBALANCE):
            return
        if group.initial_join and group.new_member_added and group.join_remaining_ms > 0:
            group.new_member_added = False
            delay = min(self._config.initial_rebalance_delay_ms, group.join_remaining_ms)
            group.join_remaining_ms = max(group.join_remaining_ms - group.join_delay_ms, 0)
            group.join_delay_ms = delay
            self._timers.schedule_in(timer_key(JOIN, group), delay)
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._timers.cancel(timer_key(JOIN, group))
        group.initial_join = False
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                self._drop(group, member)
        if group.is_(_S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another round; session timeouts will remove the silent members.
            self._timers.schedule_in(timer_key(JOIN, group), group.rebalance_timeout_ms)
            return
        group.init_next_generation(self._now_ms())
        log.info(
            "group %r: generation %d with %d member(s), protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        if group.is_(_S.EMPTY):
            self._store_in_background(group, {}, _nothing, _ignore_error)
            return
        everyone = group.current_member_metadata()
        for member in group.members.values():
            member.answer_join(
                JoinResult(
                    ErrorCode.NONE,
                    member.member_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    everyone if member.member_id == group.leader_id else (),
                )
            )
            self._touch(group, member)
            member.is_new = False
        group.pending_sync = set(group.members)
        self._timers.schedule_in(timer_key(SYNC, group), group.rebalance_timeout_ms)

    # -- SyncGroup --------------------------------------------------------------------------------------------------

    async def sync(
        self,
        group: Group,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        assignments: dict[str, bytes],
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult:
        """Followers wait for the leader's assignments; the leader's are made durable, then handed out.

        ``protocol_type`` and ``protocol_name`` (SyncGroup v5, KIP-559), when given, must be the group's:
        else INCONSISTENT_GROUP_PROTOCOL, checked after the member and generation as Kafka does.
        """
        if group.is_(_S.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return SyncResult(error)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(_S.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        self._sync_received(group, member_id)
        if group.is_(_S.STABLE):
            self._touch(group, member)
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        if not group.is_(_S.COMPLETING_REBALANCE):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        reply: Reply[SyncResult] = Reply()
        member.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a SyncGroup this one supersedes
        member.sync_reply = reply
        if group.leader_id == member_id:
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            generation = group.generation_id

            def written() -> None:
                if group.is_(_S.COMPLETING_REBALANCE) and group.generation_id == generation:
                    for m in group.members.values():
                        m.assignment = full.get(m.member_id, b"")
                    self._propagate_assignment(group, ErrorCode.NONE)
                    group.transition_to(_S.STABLE, self._now_ms())

            def failed(error: ErrorCode) -> None:
                if group.is_(_S.COMPLETING_REBALANCE) and group.generation_id == generation:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group)

            self._store_in_background(group, full, written, failed)
        return await reply.wait()

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.awaiting_sync:
                if error is ErrorCode.NONE:
                    member.answer_sync(SyncResult(error, member.assignment, group.protocol_type, group.protocol_name))
                else:
                    member.answer_sync(SyncResult(error))
                self._touch(group, member)

    def _sync_received(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(timer_key(SYNC, group))

    def _clear_pending_sync(self, group: Group) -> None:
        group.pending_sync.clear()
        self._timers.cancel(timer_key(SYNC, group))

    def on_sync_deadline(self, group: Group) -> None:
        """Members that sent no SyncGroup within the rebalance timeout are dropped; the group rebalances."""
        if group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._drop(group, member)
        self._prepare_rebalance(group)

    # -- Heartbeat, LeaveGroup, session expiry -----------------------------------------------------------------------

    def heartbeat(self, group: Group, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        """Keep a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""
        if group.is_(_S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(_S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._touch(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(_S.PREPARING_REBALANCE) else ErrorCode.NONE

    def leave(self, group: Group, leaving: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (by member id, or by instance id alone for an operator); (group error, per-member errors)."""
        if group.is_(_S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            if member_id == "":
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_and_update(group, group.members[current])
            elif member_id in group.pending_members:
                self._remove_pending(group, member_id)
            else:
                error = group.validate_member(member_id, instance_id)
                if error is not None:
                    results.append(error)
                    continue
                self._remove_and_update(group, group.members[member_id])
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    def on_heartbeat_deadline(self, group: Group, member_id: str) -> None:
        """A session (or a pending member's, or a new member's join) timed out: remove that member."""
        if member_id in group.pending_members:
            self._remove_pending(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if member.is_new or not (member.awaiting_join or member.awaiting_sync):
            log.info("group %r: member %r timed out", group.group_id, member_id)
            self._remove_and_update(group, member)

    def check_commit(
        self, group: Group, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode | None:
        """Kafka's OffsetCommit checks; None means the commit may go ahead (it also counts as a heartbeat).

        Generation -1 with an empty member id and no instance id is a "simple" commit: allowed only
        while the group has no members.
        """
        if group.is_(_S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(_S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(_S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:
            self._touch(group, member)
        return None

    def _remove_and_update(self, group: Group, member: Member) -> None:
        # A member removed while its JoinGroup waits gets UNKNOWN_MEMBER_ID: a live client then joins afresh.
        member.answer_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        member.answer_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._timers.cancel(timer_key(HEARTBEAT, group, member.member_id))
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self._timers.cancel(timer_key(HEARTBEAT, group, member_id))
        if group.is_(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _drop(self, group: Group, member: Member) -> None:
        group.remove(member.member_id)
        self._timers.cancel(timer_key(HEARTBEAT, group, member.member_id))

    def _touch(self, group: Group, member: Member) -> None:
        self._timers.schedule_in(timer_key(HEARTBEAT, group, member.member_id), member.session_timeout_ms)

    # -- loading and unloading --------------------------------------------------------------------------------------

    def on_loaded(self, group: Group) -> None:
        """Start the session timers of a group's loaded members: those that keep heartbeating stay, as in Kafka."""
        for member in group.members.values():
            self._touch(group, member)

    def close(self, group: Group, error: ErrorCode) -> None:
        """The group is gone from this node (unloaded, deleted, expired): it is Dead, waiters get ``error``."""
        if not group.is_(_S.DEAD):
            group.transition_to(_S.DEAD, self._now_ms())
        for member in group.members.values():
            member.answer_join(JoinResult(error, member.member_id))
            member.answer_sync(SyncResult(error))
            self._timers.cancel(timer_key(HEARTBEAT, group, member.member_id))
        for member_id in group.pending_members:
            self._timers.cancel(timer_key(HEARTBEAT, group, member_id))
        self._timers.cancel(timer_key(JOIN, group))
        self._timers.cancel(timer_key(SYNC, group))

    def _store_in_background(
        self,
        group: Group,
        assignment: dict[str, bytes],
        written: Callable[[], None],
        failed: Callable[[ErrorCode], None],
    ) -> None:
        # The record is built and its place in the log's order taken now; the write runs in the
        # coordinator's nursery, so a requester that goes away cannot leave the group half-stored.
        write = self._store_group(group, assignment, written)

        async def run() -> None:
            error = await write
            if error is not ErrorCode.NONE:
                failed(error)

        self._spawn(run)


def _nothing() -> None:
    pass


def _ignore_error(error: ErrorCode) -> None:
    # The Empty record only speeds up a later load; if it is lost the loaded members simply expire.
    pass
