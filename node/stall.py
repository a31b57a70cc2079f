"""Noticing that this process was stopped (SIGSTOP, a frozen VM, a long swap): :class:`StallWatch`.

A node that was stopped for longer than its ZooKeeper session lost the session, and with it
its leaderships: the controller elected other leaders, which went on taking writes. When the
process runs again it still holds the roles it had, and a request that waited in a socket is
answered from them before the ZooKeeper client has even noticed the session is gone: a
ListOffsets would get the high watermark of long ago, a Fetch the records of then.

:class:`StallWatch` is a thread that wakes every ``beat_s``. A wake-up that comes more than
``threshold_s`` late is a stall: :attr:`StallWatch.generation` goes up and ``on_stall(seconds)``
is called (from the watch's thread), so that the node re-reads ZooKeeper.
:meth:`StallWatch.overdue` is what a request sees before the watch's thread has run again: the
last beat is older than the threshold. The node's :class:`~node.cluster.ClusterState` refuses to
lead (NOT_LEADER_OR_FOLLOWER, retriable) while the watch is overdue or a stall has not been
followed by a complete re-read of ZooKeeper begun after it.

The threshold is a third of the session timeout: ZooKeeper can only have expired the session,
and another broker taken the leaderships, if no heartbeat reached it for a whole session timeout,
and kazoo's last heartbeat before the stall is at most a third of one old. A beat that is late
for other reasons (a loaded machine) costs a re-read and a few retried requests, never a wrong answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["StallWatch"]

log = logging.getLogger(__name__)


class StallWatch:
    """A daemon thread that counts the stalls of this process longer than ``threshold_s``."""

    def __init__(
        self,
        threshold_s: float,
        on_stall: Callable[[float], None],
        *,
        beat_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold_s <= beat_s:
            raise ValueError(f"threshold_s ({threshold_s}) must be longer than beat_s ({beat_s})")
        self.threshold_s = threshold_s
        self.beat_s = beat_s
        self._on_stall = on_stall
        self._clock = clock
        self._last = clock()
        #: Stalls seen so far; a re-read of ZooKeeper begun at generation G answers for stalls up to G.
        self.generation = 0
        #: How long the latest stall lasted (seconds), for the log and the refusal's message.
        self.last_stall_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._last = self._clock()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def overdue(self) -> bool:
        """The watch's thread has not run for longer than the threshold: the process is only just
        running again (or the machine is that loaded)."""
        return self._clock() - self._last > self.threshold_s

    def beat(self) -> None:
        """One wake-up of the watch's thread (public for tests that drive the clock)."""
        now = self._clock()
        gap = now - self._last
        self._last = now
        if gap > self.threshold_s:
            self.last_stall_s = gap
            self.generation += 1
            log.warning("this process did not run for %.1f s; re-reading ZooKeeper before it leads again", gap)
            self._on_stall(gap)

    def _run(self) -> None:
        while not self._stop.wait(self.beat_s):
            self.beat()
