"""Named fault points the chaos suite and tests arm to make storage raise or stall.

Points: ``append`` (before a batch is written), ``roll`` (before a new segment is made),
``fsync`` (before any fsync), ``truncate`` (before a log is truncated), ``move_copy`` (before
each chunk a replica move copies into its future log) and ``move_swap`` (between the two renames
that swap a moved replica in: the old dir renamed for deletion, the future one not yet renamed). An armed point
raises FaultInjected (an OSError, so it takes the disk-error path and the log dir goes
offline) or another chosen exception, and/or stalls the calling thread first.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ._errors import FaultInjected

POINTS = frozenset({"append", "roll", "fsync", "truncate", "move_copy", "move_swap"})


@dataclass
class _Arm:
    error: BaseException | None
    stall_s: float
    remaining: int | None  # None = every hit


class FaultPoints:
    """A registry of armed fault points; ``hit(point)`` is called by storage code. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, _Arm] = {}
        self.hits: dict[str, int] = dict.fromkeys(POINTS, 0)
        self._release = threading.Event()

    def arm(
        self,
        point: str,
        *,
        error: BaseException | None = None,
        stall_s: float = 0.0,
        times: int | None = None,
        raises: bool = True,
    ) -> None:
        """Arm ``point`` for ``times`` hits (None = until disarmed).

        Each hit stalls ``stall_s`` seconds (cut short by ``disarm``), then raises ``error``
        (FaultInjected when None) unless ``raises`` is False.
        """
        if point not in POINTS:
            raise ValueError(f"unknown fault point {point!r}; known: {', '.join(sorted(POINTS))}")
        exc = (error or FaultInjected(point)) if raises else None
        with self._lock:
            self._armed[point] = _Arm(exc, stall_s, times)
            self._release.clear()

    def disarm(self, point: str | None = None) -> None:
        """Disarm one point (or all) and release threads stalled in them."""
        with self._lock:
            if point is None:
                self._armed.clear()
            else:
                self._armed.pop(point, None)
            self._release.set()

    def hit(self, point: str) -> None:
        if not self._armed:  # the hot path: nothing armed, no lock
            self.hits[point] += 1
            return
        with self._lock:
            self.hits[point] += 1
            arm = self._armed.get(point)
            if arm is None:
                return
            if arm.remaining is not None:
                arm.remaining -= 1
                if arm.remaining <= 0:
                    del self._armed[point]
            release = self._release
        if arm.stall_s > 0:
            release.wait(arm.stall_s)
        if arm.error is not None:
            raise arm.error
