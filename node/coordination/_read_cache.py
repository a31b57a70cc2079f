"""What the last snapshot read of the watched znodes, so that the next one reads only what changed.

A broker re-reads ZooKeeper whenever a watch fires; with thousands of partitions a whole
snapshot is thousands of reads (about a second of kazoo's time at 5,000 partitions), and re-reading
everything after every change made the cost of a change grow with the size of the site: creating
topics in batches cost O(partitions²) and a failover waited for several whole re-reads. The
znodes a snapshot reads per topic and per partition are all watched (:mod:`._watches`), so a
snapshot may take the ones that did not change from the last one.

A value is kept only if the path's watch was set (**armed**) before the snapshot began: a value
read while no watch covered the path may have changed unseen. The watches arm a path once ZooKeeper
has set them (kazoo's ``DataWatch`` reads and watches in one request; the partition states' own
watches when their ``exists`` is answered) and disarm it when they fire or their session ends.

A path is **dirty** (read again next time) from the moment

- its watch reports a change: the mark is made before the hint is posted, so the re-read that
  the hint causes reads it;
- this session writes it (:class:`._zk_state.ZkState` marks every path its writes touch, before
  and after the write, so a re-read after a write of our own never takes the old value; a
  watch's report of our own write may come later).

Everything is read again (nothing is taken from the cache) on the first snapshot, after any change
of the connection's state (a connection lost, suspended or re-established, a new session: a
watch's report may have been missed), when the caller asks for it, and when the last full read
is older than :data:`FULL_READ_EVERY_S`, which bounds what a missed report could cost.

Thread-safe: marks come from kazoo's threads, snapshots run in worker threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

#: A snapshot older than this re-reads everything, whatever the marks say.
FULL_READ_EVERY_S = 60.0


class ReadCache:
    """Decoded znode values by path (with their znode versions inside) and the dirty marks."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}  # path -> decoded value, as the last snapshot read it
        self._dirty: set[str] = set()
        self._dirty_topics: set[str] = set()  # every path of the topic (assignment, config, states)
        self._armed: set[str] = set()  # paths whose watch is set: only their values may be kept
        self._valid = False
        self._invalidations = 0
        self._full_at = 0.0
        self.last_taken = 0  # how many values the last snapshot took instead of reading them

    def mark(self, paths: Iterable[str]) -> None:
        """Read ``paths`` again at the next snapshot."""
        with self._lock:
            self._dirty.update(paths)

    def mark_topic(self, name: str) -> None:
        """Read everything of topic ``name`` again at the next snapshot."""
        with self._lock:
            self._dirty_topics.add(name)

    def arm(self, paths: Iterable[str]) -> None:
        """The watches of ``paths`` are set: a value read from now on may be kept."""
        with self._lock:
            self._armed.update(paths)

    def disarm(self, paths: Iterable[str]) -> None:
        """The watches of ``paths`` are not set (fired, or their session ended): keep no value."""
        with self._lock:
            self._armed.difference_update(paths)

    def invalidate(self) -> None:
        """Read everything again at the next snapshot."""
        with self._lock:
            self._valid = False
            self._invalidations += 1

    def begin(self, *, full: bool) -> CacheView:
        """Start a snapshot: the values it may take (none for a full read), the marks so far cleared."""
        with self._lock:
            full = full or not self._valid or self._clock() - self._full_at > FULL_READ_EVERY_S
            view = CacheView(
                {} if full else dict(self._values),
                frozenset(self._dirty),
                frozenset(self._dirty_topics),
                full,
                self._invalidations,
                frozenset(self._armed),
            )
            self._dirty.clear()
            self._dirty_topics.clear()
            return view

    def end(self, view: CacheView, values: dict[str, Any]) -> None:
        """Keep what a snapshot begun with ``view`` read (every path it covers, read or taken).
        Snapshots that use one cache must not overlap (``ZkState`` runs them one at a time)."""
        with self._lock:
            if view.invalidations != self._invalidations:
                return  # invalidated meanwhile (or a failed, abandoned snapshot): the next one reads all
            self._values = values
            self.last_taken = view.taken
            if view.full:
                self._valid = True
                self._full_at = self._clock()


class CacheView:
    """One snapshot's look at the cache: :meth:`get` gives a value that may be taken, or None."""

    def __init__(
        self,
        values: dict[str, Any],
        dirty: frozenset[str],
        dirty_topics: frozenset[str],
        full: bool,
        invalidations: int,
        armed: frozenset[str],
    ) -> None:
        self._values = values
        self._dirty = dirty
        self._dirty_topics = dirty_topics
        self.full = full
        self.invalidations = invalidations  # a snapshot that saw an invalidation meanwhile is not a full read
        self.taken = 0
        self.armed = armed  # the paths whose value read by this snapshot may be kept

    def get(self, topic: str, path: str) -> Any | None:
        """The cached value of ``path`` (a znode of ``topic``) if it may be taken, else None."""
        if path in self._dirty or topic in self._dirty_topics:
            return None
        found = self._values.get(path)
        if found is not None:
            self.taken += 1
        return found
