"""How much a partition copier asks for in one fetch: the bandwidth-delay product of its link.

A copier that fetches ``size`` bytes per round trip of ``rtt`` seconds copies at most
``size / rtt`` bytes a second, however fast the source and the target are. Over a WAN the round
trip is long (50 ms and more), so a fetch must cover at least what arrives during one round trip
(rate x RTT, the bandwidth-delay product), or the copier falls behind a source it could keep up
with. A fetch much larger than that buys nothing but memory.

``FetchSizer`` keeps two estimates, each an exponentially weighted moving average:

- the **round trip**: how long a fetch that carried records took, from sending it to its
  answer read (an empty fetch waited for data up to ``fetch_max_wait_ms``: it says nothing of the
  link, and is left out);
- the **rate**: the bytes fetched over the time since the previous fetch was answered.

The first fetch asks for ``maximum`` (``fetch_max_bytes`` of the link): a copier starts behind
more often than not (after a restart, a pause, an outage), and over a WAN a ramp from a small
size would cost a round trip per doubling; a fetch of a partition with little to copy returns
little whatever it asked for. After each fetch it asks for ``BDP_HEADROOM`` x rate x RTT, rounded
up to ``GRANULE``, between ``minimum`` and ``maximum``. A fetch that came back (nearly) full was
cut by its size, so the rate it shows is a floor: the size then at least doubles, up to
``maximum``, until fetches stop coming back full. During a catch-up every fetch is full and the
size stays at ``maximum``; a copier that keeps up fetches about what one round trip brings.
Not thread-safe; one per copier. No I/O: the caller passes the clock's readings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GRANULE = 64 * 1024  # sizes are multiples of this
MIN_FETCH_BYTES = 1024 * 1024  # the least a copier asks for (capped by the maximum)
BDP_HEADROOM = 2.0  # ask for this many bandwidth-delay products: the rate may grow once not cut
FULL = 0.9  # a fetch that returned at least this share of its size was cut by it
SMOOTHING = 0.25  # weight of a new observation in the moving averages


@dataclass
class FetchSizer:
    """The next fetch's size for one partition copier (see the module docstring).

    Raises ValueError when ``maximum`` is below ``GRANULE``.
    """

    maximum: int
    minimum: int = MIN_FETCH_BYTES
    size: int = 0  # the size of the next fetch; 0 until set to the maximum
    rtt_s: float | None = None  # moving average of the round trip of fetches that carried records
    rate_bps: float | None = None  # moving average of bytes fetched per second
    _last_answer: float | None = None  # when the previous fetch was answered (the caller's clock)

    def __post_init__(self) -> None:
        if self.maximum < GRANULE:
            raise ValueError(f"the largest fetch ({self.maximum} bytes) must be at least {GRANULE} bytes")
        self.minimum = min(self.minimum, self.maximum)
        if self.size <= 0:
            self.size = self.maximum

    @property
    def bdp_bytes(self) -> int | None:
        """rate x RTT as estimated now (None before a fetch carried records)."""
        if self.rtt_s is None or self.rate_bps is None:
            return None
        return round(self.rate_bps * self.rtt_s)

    def observe(self, fetched_bytes: int, sent_at: float, answered_at: float) -> int:
        """Account for one fetch answered without an error; returns the next fetch's size.

        ``fetched_bytes`` is the size of its records (whole batches and any cut one), ``sent_at``
        and ``answered_at`` readings of one monotonic clock in seconds.
        """
        if fetched_bytes > 0:
            self.rtt_s = _smoothed(self.rtt_s, max(0.0, answered_at - sent_at))
        since = sent_at if self._last_answer is None else self._last_answer
        self._last_answer = answered_at
        interval = answered_at - since
        if interval > 0:
            self.rate_bps = _smoothed(self.rate_bps, fetched_bytes / interval)
        want = self.minimum
        bdp = self.bdp_bytes
        if bdp is not None:
            want = max(want, math.ceil(BDP_HEADROOM * bdp))
        if fetched_bytes >= FULL * self.size:
            want = max(want, 2 * self.size)  # cut by its size: the rate seen is only a floor
        self.size = min(self.maximum, max(self.minimum, -(-want // GRANULE) * GRANULE))
        return self.size


def _smoothed(average: float | None, value: float) -> float:
    return value if average is None else average + SMOOTHING * (value - average)
