"""One consumer group: its members, generation, chosen protocol, committed offsets and state machine.

States and the moves between them (Kafka's classic group protocol)::

    Empty ──join──► PreparingRebalance ──all joined / timeout──► CompletingRebalance ──leader's sync──► Stable
      ▲                 ▲   │ (no members left)                        │                                  │
      └─────────────────┼───┘                                          │                                  │
                        └────────── member joins, leaves, fails, changes protocols ─────────────────────┘
    any state ──deleted, unloaded, expired──► Dead

This module holds the data and the rules that need nothing but the group itself: which protocol
the members agree on, who leads, who is fenced, which offsets have expired. Timers, durable
writes and waiting for other members are ``_membership``'s and ``_coordinator``'s business.
Nothing here blocks; a member's pending JoinGroup/SyncGroup is a ``Reply`` its request task awaits.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import trio

from node.protocol import ErrorCode

from ._consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from ._errors import IllegalGroupTransition, RecordFormatError
from ._records import GroupMetadataValue, MemberMetadataValue, OffsetCommitValue

T = TypeVar("T")
TopicPartition = tuple[str, int]
Protocols = tuple[tuple[str, bytes], ...]


class GroupState(enum.Enum):
    """The group states, with the names Kafka reports in DescribeGroups and ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.STABLE, _S.COMPLETING_REBALANCE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


class Reply(Generic[T]):
    """A one-shot answer: the coordinator ``set``s it, the waiting request task gets it from ``wait``."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None

    def set(self, value: T) -> bool:
        """Deliver ``value``; False (and nothing changes) when an answer was already delivered."""
        if self._event.is_set():
            return False
        self._value = value
        self._event.set()
        return True

    async def wait(self) -> T:
        """The answer, once delivered. Cancellable; cancelling the waiter does not change the group."""
        await self._event.wait()
        value = self._value
        if value is None:
            raise RuntimeError("a Reply was woken without a value")
        return value


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A JoinGroup answer. ``members`` (id, instance id, metadata) is filled only for the leader."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    # JoinGroup v9 (KIP-814): a static leader that rejoins a Stable group learns it leads, without assigning
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    """A SyncGroup answer: this member's assignment, as the leader's assignor wrote it.

    A successful answer also names the generation's protocol type and name (SyncGroup v5, KIP-559).
    """

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False, slots=True)
class Member:
    """One member. ``protocols`` are (name, metadata) in the member's order of preference."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    is_new: bool = False
    join_reply: Reply[JoinResult] | None = None
    sync_reply: Reply[SyncResult] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol``; raises KeyError naming it when the member does not support it."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id!r} does not support protocol {protocol!r}")

    def vote(self, candidates: set[str]) -> str:
        """The first protocol, in this member's order, that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise KeyError(f"member {self.member_id!r} supports none of {sorted(candidates)}")

    def answer_join(self, result: JoinResult) -> None:
        """Complete a pending JoinGroup, if there is one."""
        if self.join_reply is not None:
            self.join_reply.set(result)
            self.join_reply = None

    def answer_sync(self, result: SyncResult) -> None:
        """Complete a pending SyncGroup, if there is one."""
        if self.sync_reply is not None:
            self.sync_reply.set(result)
            self.sync_reply = None


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    """A member as operators see it; ``assignment`` is decoded for consumer groups (None otherwise)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] | None


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A group as operators see it: plain data, no protocol structs."""

    group_id: str
    state: str
    protocol_type: str | None
    protocol: str | None
    generation: int
    leader: str | None
    members: tuple[MemberSnapshot, ...]
    offsets: dict[TopicPartition, tuple[int, str]]


class Group:
    """One group's state. Methods keep the invariants (leader is a member, static ids map to members)."""

    def __init__(self, group_id: str, *, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_members: set[str] = set()  # told MEMBER_ID_REQUIRED, not joined yet
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_sync: set[str] = set()  # joined this generation, no SyncGroup yet
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[TopicPartition, OffsetCommitValue] = {}
        self.pending_commits: Counter[TopicPartition] = Counter()  # written, not yet acknowledged
        # The delayed join of the rebalance in progress (Kafka's InitialDelayedJoin / DelayedJoin).
        self.initial_join = False
        self.new_member_added = False
        self.join_delay_ms = 0
        self.join_remaining_ms = 0
        self._supported: Counter[str] = Counter()

    def __repr__(self) -> str:
        state = f"{self.state.value}, generation {self.generation_id}, {len(self.members)} members"
        return f"Group({self.group_id!r}, {state})"

    # -- state ------------------------------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to ``target``; raises IllegalGroupTransition for a move Kafka's state machine does not have."""
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(self.group_id, self.state.value, target.value)
        self.state = target
        self.state_timestamp_ms = now_ms

    def undo_dead(self, state_timestamp_ms: int | None) -> None:
        """Bring back an Empty group marked Dead for a removal that did not happen (its write failed).

        ``state_timestamp_ms`` is the time it had become Empty, which offset retention counts from.
        """
        if self.state is not GroupState.DEAD:
            raise IllegalGroupTransition(self.group_id, self.state.value, GroupState.EMPTY.value)
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = state_timestamp_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members: how long a rebalance waits for them."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- members ----------------------------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """``<client id>-<uuid>`` (``<instance id>-<uuid>`` for a static member), as Kafka makes them."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: Member, reply: Reply[JoinResult] | None) -> None:
        """Add a member (awaiting ``reply`` when given); the first member sets the protocol type and leads."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(member.protocol_names())
        member.join_reply = reply
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        """Remove a member (or a pending member id); a departing leader is replaced by any remaining member."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(member.protocol_names())
            self._supported += Counter()  # drop zero counts
            instance = member.group_instance_id
            if instance is not None and self.static_members.get(instance) == member_id:
                del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        reply: Reply[JoinResult] | None,
    ) -> None:
        """New protocols and timeouts for a rejoining member; a JoinGroup it still had pending is superseded."""
        self._supported.subtract(member.protocol_names())
        member.protocols = protocols
        self._supported.update(member.protocol_names())
        self._supported += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if reply is not None and member.join_reply is not None and member.join_reply is not reply:
            member.join_reply.set(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_reply = reply

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member a new member id (KIP-345); whatever the old id still awaited is fenced."""
        member = self.members.pop(old_member_id)
        member.answer_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        member.answer_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        self.static_members[instance_id] = new_member_id
        return member

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's check of a known member: FENCED_INSTANCE_ID for a replaced static id, else UNKNOWN_MEMBER_ID."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.FENCED_INSTANCE_ID if current != member_id else None
        return None if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    # -- protocols and generations ----------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Whether a member with this protocol type and protocols may join (else INCONSISTENT_GROUP_PROTOCOL)."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        everyone = len(self.members)
        return protocol_type == self.protocol_type and any(self._supported[n] == everyone for n in names)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (ties: the first member's vote wins)."""
        everyone = len(self.members)
        candidates = {name for name, count in self._supported.items() if count == everyone}
        if not self.members or not candidates:
            raise KeyError(f"group {self.group_id!r} has no protocol that all {everyone} members support")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    @property
    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else hand leadership to a member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: CompletingRebalance with a chosen protocol, or Empty without members."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self._compute_subscribed_topics()

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader's assignor gets: every member's id, instance id and metadata for the chosen protocol."""
        protocol = self.protocol_name or ""
        return tuple((m.member_id, m.group_instance_id, m.metadata(protocol)) for m in self.members.values())

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except RecordFormatError:
            return None
        return frozenset(topics)

    # -- offsets ----------------------------------------------------------------------------------------------------

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """The offsets Kafka's retention would delete now (none with a commit in flight).

        Empty group with a protocol: retention counts from when it became Empty. Stable consumer group:
        only topics no member subscribes to, counted from their commit. Group that only commits
        (no protocol type): counted from each commit. An explicit expire timestamp (OffsetCommit v2-4
        retention_time_ms) wins over all of these.
        """
        subscribed: frozenset[str] = frozenset()
        since_state: int | None = None
        if self.protocol_type is not None and self.state is GroupState.EMPTY:
            since_state = self.state_timestamp_ms
        elif self.protocol_type == PROTOCOL_TYPE and self.subscribed_topics is not None and self.is_(_S.STABLE):
            subscribed = self.subscribed_topics
        elif self.protocol_type is not None:
            return []
        expired = []
        for tp, value in self.offsets.items():
            if tp[0] in subscribed or self.pending_commits[tp]:
                continue
            if value.expire_timestamp >= 0:
                if now_ms >= value.expire_timestamp:
                    expired.append(tp)
            elif now_ms - (since_state if since_state is not None else value.commit_timestamp) >= retention_ms:
                expired.append(tp)
        return expired

    # -- records and snapshots --------------------------------------------------------------------------------------

    def to_record(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadataValue of the current generation with ``assignment`` (member id -> bytes)."""
        protocol = self.protocol_name
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            protocol,
            self.leader_id,
            self.state_timestamp_ms if self.state_timestamp_ms is not None else -1,
            members,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
        """A group as stored: Stable with its members (whose sessions restart now), or Empty.

        Raises RecordFormatError when the record has members but no protocol.
        """
        if value.members and value.protocol is None:
            raise RecordFormatError(f"group {group_id!r}: stored with {len(value.members)} members but no protocol")
        group = cls(group_id, now_ms=now_ms, state=GroupState.STABLE if value.members else GroupState.EMPTY)
        group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                ((value.protocol or "", m.subscription),),
                m.assignment,
            )
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    def snapshot(self) -> GroupSnapshot:
        """The operator's view; assignments are decoded for consumer groups (undecodable ones are None)."""
        members = tuple(
            MemberSnapshot(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, self._decoded_assignment(m.assignment)
            )
            for m in self.members.values()
        )
        return GroupSnapshot(
            self.group_id,
            self.state.value,
            self.protocol_type,
            self.protocol_name,
            self.generation_id,
            self.leader_id,
            members,
            {tp: (v.offset, v.metadata) for tp, v in sorted(self.offsets.items())},
        )

    def _decoded_assignment(self, data: bytes) -> tuple[TopicPartition, ...] | None:
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        try:
            return tuple(decode_assignment(data).topic_partitions())
        except RecordFormatError:
            return None
