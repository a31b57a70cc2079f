"""Lag over time, for the DR page's chart: a bounded ring of samples per link.

The mirror process samples every running link's status every ``interval_s`` (5 s by default)
and keeps the last ``capacity`` samples of each (720 by default: an hour at 5 s), so memory
stays bounded however long it runs. ``GET /v1/links/{name}/lag-history`` answers them::

    {"name": "east-to-west", "interval_s": 5.0, "capacity": 720,
     "columns": ["at_ms", "lag_records", "lag_seconds", "rpo_records"],
     "points": [[1761200000000, 300, 12.5, 300], [1761200005000, 310, 13.1, null], ...]}

oldest first. ``lag_records`` is the link's total lag: the sum over its partitions of the
source's end minus the mirrored end. When the DR status (``GET /v1/dr``) measured the link
since the previous sample, its numbers are taken (the source's and the target's ends as
ListOffsets answers them, and ``rpo_records``, the "RPO if you fail over now"); else the
link's own status (the source's end as its copiers last fetched it: a paused link's does not
move) and ``rpo_records`` null. ``lag_seconds`` is the largest per-partition lag in seconds of
the link's status. The history lives in memory: a restarted process starts a new one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_INTERVAL_S", "COLUMNS", "LagHistories", "LagHistory", "LagSample"]

DEFAULT_INTERVAL_S = 5.0
DEFAULT_CAPACITY = 720  # an hour at one sample every 5 s
COLUMNS = ("at_ms", "lag_records", "lag_seconds", "rpo_records")


@dataclass(frozen=True)
class LagSample:
    at_ms: int
    lag_records: int
    lag_seconds: float
    rpo_records: int | None  # None: not measured since the previous sample

    def to_row(self) -> list[Any]:
        return [self.at_ms, self.lag_records, round(self.lag_seconds, 3), self.rpo_records]


class LagHistory:
    """The last ``capacity`` samples of one link, oldest first; adding to a full one drops the oldest."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"a lag history holds at least one sample, not {capacity}")
        self._samples: deque[LagSample] = deque(maxlen=capacity)

    @property
    def capacity(self) -> int:
        assert self._samples.maxlen is not None
        return self._samples.maxlen

    def add(self, sample: LagSample) -> None:
        self._samples.append(sample)

    def samples(self) -> list[LagSample]:
        return list(self._samples)

    def __len__(self) -> int:
        return len(self._samples)


class LagHistories:
    """Every link's :class:`LagHistory`, fed from the links' statuses and the DR status's RPO."""

    def __init__(self, *, interval_s: float = DEFAULT_INTERVAL_S, capacity: int = DEFAULT_CAPACITY) -> None:
        if interval_s <= 0:
            raise ValueError(f"the lag sampling interval must be positive, not {interval_s}")
        LagHistory(capacity)  # checks the capacity now rather than at the first sample
        self.interval_s = interval_s
        self.capacity = capacity
        self._links: dict[str, LagHistory] = {}
        self._measured: dict[str, tuple[int, int]] = {}  # link -> (lag, RPO) records, not sampled yet
        self._measured_at: dict[str, int] = {}  # link -> when the last measurement noted was taken (ms)

    def sample(self, statuses: Iterable[Mapping[str, Any]], now_ms: int) -> None:
        """Add one sample per link status (``{"name", "totals": {"lag_records", "lag_seconds"}}``)."""
        for status in statuses:
            name = str(status["name"])
            totals = status.get("totals") or {}
            measured = self._measured.pop(name, None)
            sample = LagSample(
                at_ms=now_ms,
                lag_records=max(0, int(totals.get("lag_records") or 0)) if measured is None else measured[0],
                lag_seconds=max(0.0, float(totals.get("lag_seconds") or 0.0)),
                rpo_records=None if measured is None else measured[1],
            )
            self._links.setdefault(name, LagHistory(self.capacity)).add(sample)

    def note_measured(self, name: str, at_ms: int, lag_records: int, rpo_records: int) -> None:
        """The DR status measured link ``name``'s lag and RPO (records) at ``at_ms``: the next
        sample of the link carries them (the latest measurement wins). A measurement is noted
        once: the same one again (a cached answer) is ignored."""
        if at_ms <= self._measured_at.get(name, -1):
            return
        self._measured_at[name] = at_ms
        self._measured[name] = (lag_records, rpo_records)

    def forget(self, name: str) -> None:
        """Drop link ``name``'s history (a runtime link deleted: its name may come back as another link)."""
        self._links.pop(name, None)
        self._measured.pop(name, None)
        self._measured_at.pop(name, None)

    def to_json(self, name: str) -> dict[str, Any]:
        """The answer of ``GET /v1/links/{name}/lag-history`` (see the module docstring)."""
        history = self._links.get(name)
        return {
            "name": name,
            "interval_s": self.interval_s,
            "capacity": self.capacity,
            "columns": list(COLUMNS),
            "points": [] if history is None else [s.to_row() for s in history.samples()],
        }
