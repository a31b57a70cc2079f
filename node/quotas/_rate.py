"""A rate over sampled windows, measured as Kafka's quota sensors measure it (KIP-13).

A :class:`SampledRate` keeps ``samples`` windows of ``window_s`` seconds each. A value is added
to the current window; a new window starts (reusing the oldest slot) once the current one is
``window_s`` old. A window older than the whole span (``samples * window_s``) counts for
nothing. The rate is the sum of the windows kept over the time they cover, measured from the
start of the oldest window to now, but never less than ``samples - 1`` full windows: so a first
burst is spread over most of the span instead of being divided by a few milliseconds (Kafka's
``Rate.windowSize``). With Kafka's defaults (11 windows of 1 s) a rate is an average over
10 to 11 seconds.

The throttle time a quota asks for is how long the connection must stay silent for the rate to
come back to the quota: ``(rate - quota) / quota * span`` (Kafka's
``ClientQuotaManager.throttleTime``). Time is whatever clock the caller passes, in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Window:
    start: float  # when the window started (the clock's seconds)
    value: float


class SampledRate:
    """Values per second over the last ``samples`` windows of ``window_s`` seconds. Not thread-safe."""

    __slots__ = ("_current", "_samples", "_window_s", "_windows")

    def __init__(self, samples: int, window_s: float) -> None:
        """ValueError unless ``samples`` >= 1 and ``window_s`` > 0."""
        if samples < 1 or not window_s > 0:
            raise ValueError(f"a sampled rate needs at least one window of positive length, not {samples} x {window_s}")
        self._samples = samples
        self._window_s = window_s
        self._windows: list[_Window] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        """Add ``value`` at time ``now`` (which must not go backwards by more than a window)."""
        windows = self._windows
        if not windows:
            windows.append(_Window(now, 0.0))
        window = windows[self._current]
        if now - window.start >= self._window_s:
            self._current = (self._current + 1) % self._samples
            if self._current >= len(windows):
                windows.append(_Window(now, 0.0))
            else:
                windows[self._current] = _Window(now, 0.0)
            window = windows[self._current]
        window.value += value

    def span(self, now: float) -> float:
        """The seconds the rate is measured over at ``now``: from the oldest window kept, at least
        ``samples - 1`` windows (Kafka's ``Rate.windowSize``)."""
        self._purge(now)
        oldest = min((w.start for w in self._windows), default=now)
        elapsed = now - oldest
        full = int(elapsed // self._window_s)
        least = self._samples - 1
        if full < least:
            elapsed += (least - full) * self._window_s
        return elapsed if elapsed > 0 else 0.001

    def rate(self, now: float) -> float:
        """Values per second at ``now``."""
        span = self.span(now)
        return sum(w.value for w in self._windows) / span

    def throttle_s(self, quota: float, now: float) -> float:
        """Seconds of silence that bring the rate back to ``quota`` (> 0), or 0 when it is within it."""
        span = self.span(now)
        rate = sum(w.value for w in self._windows) / span
        if rate <= quota:
            return 0.0
        return (rate - quota) / quota * span

    def _purge(self, now: float) -> None:
        """Windows that ended a whole span ago count for nothing: they restart, empty, at ``now``."""
        horizon = self._samples * self._window_s
        for window in self._windows:
            if now - window.start >= horizon:
                window.start, window.value = now, 0.0
