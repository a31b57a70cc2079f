"""Change hints from kazoo's threads into trio: a coalescing, bounded memory channel.

A hint is a string naming what changed (``"topics"``, ``"topic:orders"``, ...); the reader
re-reads that state, so one queued copy of a hint is as good as many. :class:`Hints` keeps
at most one unread copy of each hint in the channel: the buffer never holds more than the
number of distinct hints, however long nobody reads.

Threading: :meth:`Hints.post` may be called from any thread (kazoo's watch and session
threads); it only schedules :meth:`Hints.push` on the trio thread with
``TrioToken.run_sync_soon``, which never blocks. Everything else runs on the trio thread.
"""

from __future__ import annotations

import collections
import contextlib
import math

import trio


class Hints:
    """A trio memory channel of coalesced hints; one producer (this object), one reader."""

    def __init__(self) -> None:
        send, receive = trio.open_memory_channel[str](math.inf)
        self._send = send
        self.receive_channel = receive
        self._token: trio.lowlevel.TrioToken | None = None
        # The hints now in the channel's buffer, oldest first. Only we send, and the reader takes
        # from the front, so the last ``current_buffer_used`` entries are exactly what is unread.
        self._queued: collections.deque[str] = collections.deque()
        self._queued_set: set[str] = set()

    def bind(self, token: trio.lowlevel.TrioToken) -> None:
        """Deliver :meth:`post`-ed hints into the trio run that ``token`` belongs to."""
        self._token = token

    def post(self, hint: str) -> None:
        """Thread-safe, non-blocking: queue ``hint`` unless an unread copy is queued already.

        Dropped silently when not bound yet, after :meth:`close`, or once the trio run is over.
        """
        token = self._token
        if token is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(self.push, hint)

    def push(self, hint: str) -> None:
        """Trio thread only: queue ``hint`` unless an unread copy is queued already."""
        self._forget_read()
        if hint in self._queued_set:
            return
        try:
            self._send.send_nowait(hint)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return
        self._queued.append(hint)
        self._queued_set.add(hint)
        self._forget_read()  # a waiting reader may have taken it directly

    def pending(self) -> int:
        """How many hints are queued and unread."""
        return self._send.statistics().current_buffer_used

    def close(self) -> None:
        """Close the sending side: the reader drains what is queued, then its loop ends."""
        self._send.close()

    def _forget_read(self) -> None:
        unread = self._send.statistics().current_buffer_used
        while len(self._queued) > unread:
            self._queued_set.discard(self._queued.popleft())
