"""Incremental fetch sessions (KIP-227): the partitions each fetcher follows, kept between its fetches.

A consumer or follower that fetches many partitions would otherwise name every one of them in
every Fetch, and read every one of them back in every answer, changed or not. With a session the
node remembers the partitions (and each one's fetch offset and size limit) under a session id;
the fetcher then sends only what changed, and the node answers only the partitions that have
something new. Kafka's rules, from ``FetchSession.scala`` / ``FetchManager``:

* **Full fetch** (``session_epoch`` 0, ``INITIAL_EPOCH``): the request names every partition. A
  ``session_id`` it names is closed first. The node reads every partition, answers every one and
  opens a new session of them all (its id in the answer's ``session_id``; 0 when the cache has no
  slot, in which case the fetcher goes on with full fetches). The session's next epoch is 1.
* **Sessionless fetch** (``session_epoch`` -1, ``FINAL_EPOCH``; every fetch before v7, and what
  librdkafka sends): as a full fetch, but no session is opened; a ``session_id`` it names is closed.
* **Incremental fetch** (``session_epoch`` > 0): ``session_id`` must name a live session
  (FETCH_SESSION_ID_NOT_FOUND otherwise) and ``session_epoch`` must be the session's epoch
  (INVALID_FETCH_SESSION_EPOCH otherwise; the epoch goes up by one with every fetch, from
  INT32_MAX back to 1). The partitions it names are added to the session or update their fetch
  offset and limits, then ``forgotten_topics_data`` is removed. The node reads every partition of
  the session, in the session's order, and answers only those with records, an error, a diverging
  epoch or a preferred read replica, or whose high watermark or log start offset differs from the
  one it last answered; a partition that returned records moves to the end of the session's order,
  so that a partition with much to read does not always take the whole ``max_bytes`` first. A
  session left with no partitions is closed and the fetch answered as a sessionless one.
* A session opened with topic ids (Fetch v13+) only takes fetches with topic ids, and one opened
  with names only fetches with names: FETCH_SESSION_TOPIC_ID_ERROR otherwise.
* Two fetches of the same session at once (a long poll still waiting): the one answered second
  finds the epoch moved on and answers INVALID_FETCH_SESSION_EPOCH.

**Cache and eviction.** At most ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's
default 1000). A full fetch that finds the cache full may evict one session: first any session
unused for ``EVICTION_MS`` (two minutes, Kafka's constant); otherwise, a follower's fetch
(privileged) may evict a consumer's session, or a follower's older than ``EVICTION_MS``, and a
consumer's fetch a consumer's session older than ``EVICTION_MS``; among those the least valuable
(consumers before followers, then fewer partitions, then the lower id), and only if it is worth
strictly less than the session being opened (a follower's beats a consumer's; more partitions beat
fewer). Kafka files sessions into its eviction sets when they are used; this cache checks the age
of each when it evicts, the same rule without the bookkeeping.

Sans-IO: no trio, no sockets; the clock is injected (milliseconds).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from node.errors import BrokerError
from node.protocol import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that opens a session
FINAL_EPOCH = -1  # a full fetch that opens none (and closes the one it names)
INT32_MAX = 2**31 - 1
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
DEFAULT_SLOTS = 1000  # max.incremental.fetch.session.cache.slots

TopicKey = str | uuid.UUID  # a topic's name (Fetch v7-v12) or id (v13+)
PartitionKey = tuple[TopicKey, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ``FetchMetadata.nextEpoch``): -1 stays -1, INT32_MAX wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True)
class FetchPosition:
    """What a fetch asks of one partition: where to read, how much, and the fetcher's epochs."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start offset


@dataclass(slots=True)
class _Cached:
    """A session's partition: the request's position and what the node last answered about it."""

    position: FetchPosition
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass(eq=False, slots=True)
class FetchSession:
    """One session: its partitions and the epoch its next incremental fetch must carry."""

    id: int
    privileged: bool  # opened by a follower (replica_id >= 0)
    uses_topic_ids: bool
    partitions: dict[PartitionKey, _Cached]  # in the session's order
    created_ms: int
    last_used_ms: int
    epoch: int = 1


@dataclass(frozen=True, slots=True)
class Answer:
    """One partition of a fetch's answer, as the session rules look at it: the response entry (keys
    ``error_code``, ``high_watermark``, ``log_start_offset``, ``preferred_read_replica``,
    ``diverging_epoch``) and the byte count of its records."""

    key: PartitionKey
    entry: dict[str, Any]
    records_bytes: int


class SessionMetrics(Protocol):
    """Where the cache reports its size and evictions (``node.metrics.NodeMetrics``)."""

    def fetch_sessions(self, sessions: int, partitions: int) -> None: ...

    def fetch_session_evicted(self) -> None: ...

    def fetch_by_session(self, kind: str) -> None:
        """One fetch answered as ``kind``: "sessionless", "full" (opens a session) or "incremental"."""
        ...


class FetchContext:
    """One fetch's view of its session: which partitions to read (``positions``) and, once read,
    which to answer (``respond``)."""

    __slots__ = ("_cache", "_expected_epoch", "_session", "opens", "positions")

    def __init__(
        self,
        cache: FetchSessionCache,
        positions: list[tuple[PartitionKey, FetchPosition]],
        *,
        opens: bool = False,
        session: FetchSession | None = None,
    ) -> None:
        self._cache = cache
        self.positions = positions
        self.opens = opens  # a full fetch that opens a session when answered
        self._session = session  # an incremental fetch's session
        self._expected_epoch = session.epoch if session is not None else 0

    @property
    def incremental(self) -> bool:
        return self._session is not None

    def respond(self, answers: Sequence[Answer], *, privileged: bool, uses_topic_ids: bool) -> tuple[int, list[Answer]]:
        """(the session id to answer, the answers to send, in order).

        A full fetch opens its session here, from what it answers; an incremental one keeps only
        the partitions the fetcher must hear about and records what it was told. Raises
        BrokerError(INVALID_FETCH_SESSION_EPOCH) when another fetch of the session was answered
        meanwhile (it moved the epoch on, or closed the session).
        """
        session = self._session
        if session is None:
            if not self.opens:
                return INVALID_SESSION_ID, list(answers)
            pairs = zip(self.positions, answers, strict=True)
            opened = {answer.key: _cached_from(position, answer) for (_, position), answer in pairs}
            return self._cache.create(opened, privileged=privileged, uses_topic_ids=uses_topic_ids), list(answers)
        if self._cache.get(session.id) is not session or session.epoch != self._expected_epoch:
            raise BrokerError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session.id} was answered by another fetch meanwhile (epoch now {session.epoch})",
            )
        sent: list[Answer] = []
        moved: list[PartitionKey] = []
        for answer in answers:
            cached = session.partitions.get(answer.key)
            if cached is None:  # forgotten by a fetch answered meanwhile
                continue
            if _must_send(cached, answer):
                sent.append(answer)
                if answer.records_bytes > 0:
                    moved.append(answer.key)
        for key in moved:  # rotate: partitions that returned records go last
            session.partitions[key] = session.partitions.pop(key)
        return session.id, sent


def _cached_from(position: FetchPosition, answer: Answer) -> _Cached:
    entry = answer.entry
    hw = -1 if entry["error_code"] else entry["high_watermark"]
    return _Cached(position, hw, entry["log_start_offset"])


def _must_send(cached: _Cached, answer: Answer) -> bool:
    """Kafka's ``CachedPartition.maybeUpdateResponseData``: whether an incremental fetch answers this
    partition; records what is answered so the next fetch compares against it."""
    entry = answer.entry
    send = answer.records_bytes > 0
    if cached.high_watermark != entry["high_watermark"]:
        send = True
        cached.high_watermark = entry["high_watermark"]
    if cached.log_start_offset != entry["log_start_offset"]:
        send = True
        cached.log_start_offset = entry["log_start_offset"]
    if entry.get("preferred_read_replica", -1) >= 0:
        send = True
    if entry["error_code"]:
        cached.high_watermark = -1  # so the partition is answered again once the error is gone
        send = True
    if entry.get("diverging_epoch") is not None:
        send = True
    return send


@dataclass
class FetchSessionCache:
    """This node's fetch sessions, at most ``max_slots`` of them (0: no sessions at all).

    Not thread-safe: the node's handlers all run on its trio thread.
    """

    max_slots: int = DEFAULT_SLOTS
    clock: Callable[[], float] = time.monotonic  # seconds
    eviction_ms: int = EVICTION_MS
    metrics: SessionMetrics | None = None
    rng: random.Random = field(default_factory=random.Random)
    evictions: int = 0
    _sessions: dict[int, FetchSession] = field(default_factory=dict)
    _partitions: int = 0

    @property
    def size(self) -> int:
        """Sessions in the cache."""
        return len(self._sessions)

    @property
    def partitions(self) -> int:
        """Partitions over every session."""
        return self._partitions

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def open(
        self,
        session_id: int,
        epoch: int,
        requested: Mapping[PartitionKey, FetchPosition],
        forgotten: Iterable[PartitionKey],
        *,
        uses_topic_ids: bool,
    ) -> FetchContext:
        """The context of one fetch, by the rules of the module docstring.

        Raises BrokerError with FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or
        FETCH_SESSION_TOPIC_ID_ERROR: the fetch's top-level error (answered without partitions).
        """
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            opens = epoch == INITIAL_EPOCH and self.max_slots > 0
            self._count("full" if opens else "sessionless")
            return FetchContext(self, list(requested.items()), opens=opens)
        session = self._sessions.get(session_id)
        if session is None:
            raise BrokerError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {session_id} on this node")
        if session.epoch != epoch:
            raise BrokerError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expects epoch {session.epoch}, the fetch has {epoch}",
            )
        if session.uses_topic_ids != uses_topic_ids:
            has, wants = ("ids", "names") if session.uses_topic_ids else ("names", "ids")
            raise BrokerError(
                ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
                f"fetch session {session_id} names topics by {has}, the fetch by {wants}",
            )
        before = len(session.partitions)
        for key, position in requested.items():
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = _Cached(position)
            else:
                cached.position = position
        for key in forgotten:
            session.partitions.pop(key, None)
        self._partitions += len(session.partitions) - before
        if not session.partitions:
            self.remove(session_id)
            self._count("sessionless")
            return FetchContext(self, list(requested.items()))
        session.last_used_ms = self._now_ms()
        session.epoch = next_epoch(session.epoch)
        self._report()
        self._count("incremental")
        positions = [(key, cached.position) for key, cached in session.partitions.items()]
        return FetchContext(self, positions, session=session)

    def create(self, partitions: dict[PartitionKey, _Cached], *, privileged: bool, uses_topic_ids: bool) -> int:
        """Open a session of ``partitions``; its id, or INVALID_SESSION_ID when no slot is free or can be freed."""
        now = self._now_ms()
        if len(self._sessions) >= self.max_slots and not self._evict_one(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session_id = self.rng.randint(1, INT32_MAX)
        while session_id in self._sessions:
            session_id = self.rng.randint(1, INT32_MAX)
        self._sessions[session_id] = FetchSession(session_id, privileged, uses_topic_ids, partitions, now, now)
        self._partitions += len(partitions)
        self._report()
        return session_id

    def remove(self, session_id: int) -> bool:
        """Close a session; False when there was none."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        self._partitions -= len(session.partitions)
        self._report()
        return True

    def _evict_one(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a session of ``size`` partitions (module docstring); whether one was evicted."""
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            return self._evicted(stale)
        evictable = [
            s
            for s in self._sessions.values()
            if now - s.created_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not evictable:
            return False
        victim = min(evictable, key=lambda s: (s.privileged, len(s.partitions), s.id))
        if (privileged, size, 0) < (victim.privileged, len(victim.partitions), victim.id):
            return False
        return self._evicted(victim)

    def _evicted(self, session: FetchSession) -> bool:
        self.remove(session.id)
        self.evictions += 1
        if self.metrics is not None:
            self.metrics.fetch_session_evicted()
        return True

    def _count(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.fetch_by_session(kind)

    def _report(self) -> None:
        if self.metrics is not None:
            self.metrics.fetch_sessions(len(self._sessions), self._partitions)
