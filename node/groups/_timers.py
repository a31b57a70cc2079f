"""``Timers``: keyed deadlines on the trio clock, fired by one task (the coordinator's ``run``).

A key has at most one deadline: scheduling it again moves the deadline, cancelling it removes it.
Deadlines are trio time (seconds), so ``trio.testing.MockClock`` makes every timeout in the group
coordinator instant and deterministic. Superseded deadlines stay in the heap until they come up
and are then dropped, which keeps ``schedule`` O(log n) with no search.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable
from typing import Generic, TypeVar

import trio

K = TypeVar("K", bound=Hashable)


class Timers(Generic[K]):
    """Deadlines by key; ``next_due`` waits for the earliest and hands back every key that is due."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._deadlines: dict[K, float] = {}
        self._seq = itertools.count()
        self._wakeup = trio.Event()
        self._sleeping_until = math.inf

    def __len__(self) -> int:
        return len(self._deadlines)

    def schedule(self, key: K, deadline: float) -> None:
        """Set ``key`` to fire at ``deadline`` (trio time), replacing any deadline it had."""
        self._deadlines[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), key))
        if deadline < self._sleeping_until:
            self._wakeup.set()

    def schedule_in(self, key: K, delay_ms: int) -> None:
        """Set ``key`` to fire ``delay_ms`` milliseconds from now (must be called inside trio)."""
        self.schedule(key, trio.current_time() + delay_ms / 1000)

    def cancel(self, key: K) -> None:
        """Forget ``key``'s deadline, if it has one."""
        self._deadlines.pop(key, None)

    def deadline(self, key: K) -> float | None:
        """When ``key`` fires, or None."""
        return self._deadlines.get(key)

    def pop_due(self, now: float) -> list[K]:
        """Remove and return the keys whose deadline is at or before ``now``, earliest first."""
        due: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            if self._deadlines.get(key) == deadline:
                del self._deadlines[key]
                due.append(key)
        self._drop_stale_top()
        return due

    def next_deadline(self) -> float:
        """The earliest live deadline, or +inf."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else math.inf

    async def next_due(self) -> list[K]:
        """Wait until at least one key is due and return the due keys. Cancellable; nothing is lost if cancelled."""
        while True:
            due = self.pop_due(trio.current_time())
            if due:
                return due
            self._wakeup = trio.Event()
            self._sleeping_until = self.next_deadline()
            try:
                with trio.move_on_at(self._sleeping_until):
                    await self._wakeup.wait()
            finally:
                self._sleeping_until = math.inf

    def _drop_stale_top(self) -> None:
        heap = self._heap
        while heap and self._deadlines.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
