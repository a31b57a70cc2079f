"""The fetcher's side of an incremental fetch session (KIP-227), sans-IO.

A follower fetches every partition it follows from a leader, round after round. Without a
session each Fetch names all of them and each answer carries all of them, so a round costs both
nodes time in proportion to every partition followed, even when one partition changed. With a
session the leader keeps the partitions and their fetch offsets; the fetcher sends only the
partitions whose fetch position changed (and ``forgotten_topics_data`` for those it no longer
wants), and the leader answers only the partitions with something new.

Kafka's rules, as the fetcher sees them:

* With no session (``session_id`` 0) the fetcher sends a **full** fetch, ``session_epoch`` 0,
  naming every partition. An answer with a ``session_id`` opens the session, whose next epoch is
  1; an answer with ``session_id`` 0 (the leader had no room) leaves the fetcher on full fetches.
* Then each **incremental** fetch names the session and its epoch, the partitions whose position
  (fetch offset, log start offset, leader epoch, size limit) differs from what the leader holds,
  and the ones to forget. Its answer moves the epoch on by one (INT32_MAX wraps to 1).
* FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or FETCH_SESSION_TOPIC_ID_ERROR, an
  answer naming another session, or any failure of the exchange (``reset``) drop the session: the
  next fetch is full again. Nothing is lost by that; a full fetch restates everything.
* ``enabled=False`` keeps to sessionless fetches (``session_epoch`` -1, Kafka's FINAL_EPOCH).

The partitions' keys and positions are opaque values compared for equality.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from node.protocol import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)

K = TypeVar("K", bound=Hashable)
P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class SessionFetch(Generic[K, P]):
    """One Fetch to send: its session fields, the partitions to name and the ones to forget."""

    session_id: int
    session_epoch: int
    partitions: dict[K, P]
    forgotten: tuple[K, ...] = ()

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(slots=True)
class FetcherSession(Generic[K, P]):
    """The session of one fetcher on one connection to one node."""

    enabled: bool = True
    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    _held: dict[K, P] = field(default_factory=dict)  # what the node's session holds for us
    full_fetches: int = 0
    incremental_fetches: int = 0

    def next_fetch(self, wanted: Mapping[K, P]) -> SessionFetch[K, P]:
        """The Fetch that asks for ``wanted`` (every partition to fetch, with its position)."""
        if not self.enabled:
            return SessionFetch(0, FINAL_EPOCH, dict(wanted))
        if self.session_id == 0:
            return SessionFetch(0, INITIAL_EPOCH, dict(wanted))
        held = self._held
        changed = {key: pos for key, pos in wanted.items() if held.get(key, _MISSING) != pos}
        forgotten = tuple(key for key in held if key not in wanted)
        return SessionFetch(self.session_id, self.epoch, changed, forgotten)

    def answered(self, sent: SessionFetch[K, P], error_code: int, session_id: int) -> bool:
        """Take the answer to ``sent`` (its top-level error code and session id). Returns False
        when the answer is a session error: the session is dropped and the fetch is to be sent
        again, in full, before its partitions are read."""
        if error_code in SESSION_ERRORS:
            self.reset()
            return False
        if sent.full:
            self.full_fetches += 1
            if self.enabled and session_id != 0 and error_code == 0:
                self.session_id, self.epoch, self._held = session_id, 1, dict(sent.partitions)
            else:
                self.reset()
            return True
        self.incremental_fetches += 1
        if error_code or session_id != self.session_id:
            self.reset()  # closed by the node (no partitions left), or the request failed whole
            return True
        self._held.update(sent.partitions)
        for key in sent.forgotten:
            self._held.pop(key, None)
        self.epoch = 1 if self.epoch == INT32_MAX else self.epoch + 1
        return True

    def reset(self) -> None:
        """Forget the session (a failed exchange, a new connection): the next fetch is full."""
        self.session_id, self.epoch = 0, INITIAL_EPOCH
        self._held = {}

    @property
    def held(self) -> int:
        """How many partitions the node's session holds for this fetcher."""
        return len(self._held)


_MISSING = object()
