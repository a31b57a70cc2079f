"""What the report plots, computed from one scenario's history: pure functions, no HTML, no I/O.

Times are seconds since the history's first entry, from ``mono`` (the monotonic clock every
entry carries), so a wall-clock step in the middle of a run bends no plot. The pieces:

- :func:`throughput`: sends completed per bucket (ok / fail / info), buckets of
  :func:`bucket_width` seconds (1 s up to 10 minutes of history, wider after that so that a
  soak's plot keeps at most ``MAX_BUCKETS`` points);
- :func:`latencies`: one :class:`Latency` per completed operation, as chaos-spec.md defines it
  (a send: its completion's ``mono`` minus its invoke's, same process and value; any other op:
  minus the same process's last invoke of the same ``f``); :func:`latency_buckets` their p50,
  p99 and max per bucket (nearest rank); :func:`sample` the points a scatter keeps;
- :func:`nemesis_intervals`: each nemesis ``start`` paired with its ``stop`` (same nemesis and
  target, first started first stopped); one never stopped runs to the end of the history and is
  marked not healed; a ``stop`` with no ``start`` is left out;
- :func:`failover_markers`: every failover entry (``promote``, ``export``) as a point in time;
- :func:`lag_samples`: the mirror's ``lag`` samples, per target site;
- :func:`summarize`: the few numbers a runner prints after a scenario.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from chaos.history import FAILOVER, NEMESIS, History, Op

__all__ = [
    "MAX_BUCKETS",
    "Interval",
    "LagSample",
    "Latency",
    "LatencyBucket",
    "Marker",
    "Summary",
    "Throughput",
    "ThroughputBucket",
    "Timeline",
    "bucket_width",
    "failover_markers",
    "lag_samples",
    "latencies",
    "latency_buckets",
    "nemesis_intervals",
    "percentile",
    "sample",
    "summarize",
    "throughput",
    "times_of",
]

NS_PER_S = 1_000_000_000
#: The most buckets a time series has: a plot about 900 pixels wide shows no more.
MAX_BUCKETS = 600
#: Bucket widths in seconds, the smallest that keeps a series within MAX_BUCKETS is used.
WIDTHS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Where a history sits in time: its first entry's clocks, and how long it runs."""

    start_mono: int  # nanoseconds, the first entry's ``mono``
    start_wall: float  # seconds since the epoch, the first entry's ``time``
    span_s: float  # from the first entry to the last

    @classmethod
    def of(cls, history: History) -> Timeline | None:
        """The timeline of ``history``; None when it has no entry with a ``mono``."""
        monos = [op["mono"] for op in history.ops if _is_number(op.get("mono"))]
        if not monos:
            return None
        first = min(monos)
        walls = [op["time"] for op in history.ops if op.get("mono") == first and _is_number(op.get("time"))]
        return cls(
            start_mono=first, start_wall=float(walls[0]) if walls else 0.0, span_s=(max(monos) - first) / NS_PER_S
        )

    def at(self, op: Mapping[str, Any]) -> float | None:
        """Seconds from the start to ``op``; None for an entry without a ``mono``."""
        mono = op.get("mono")
        return (mono - self.start_mono) / NS_PER_S if _is_number(mono) else None


@dataclass(frozen=True, slots=True)
class ThroughputBucket:
    start_s: float
    ok: int  # sends acknowledged in [start_s, start_s + width)
    fail: int  # sends refused
    info: int  # sends whose outcome is unknown (timed out)


@dataclass(frozen=True, slots=True)
class Throughput:
    width_s: float
    span_s: float  # the last bucket ends here (it may be narrower than the others)
    buckets: list[ThroughputBucket]

    def points(self) -> list[tuple[float, float, float]]:
        """Per bucket: (its middle, acknowledged sends/s, failed or indeterminate sends/s).

        A last bucket narrower than half a width is left out: a rate over a sliver of time
        jumps about (its sends are in the counts all the same).
        """
        found = []
        for bucket in self.buckets:
            covered = min(self.width_s, self.span_s - bucket.start_s) if self.span_s > 0 else self.width_s
            if covered < self.width_s / 2:
                continue
            found.append((bucket.start_s + covered / 2, bucket.ok / covered, (bucket.fail + bucket.info) / covered))
        return found


@dataclass(frozen=True, slots=True)
class Latency:
    time_s: float  # when the operation completed
    ms: float  # completion minus invoke, milliseconds
    f: str
    type: str  # ok, fail or info
    process: str
    index: int | None  # the completion's history index


@dataclass(frozen=True, slots=True)
class LatencyBucket:
    start_s: float
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class Interval:
    """One fault, from its nemesis ``start`` to its ``stop`` (or to the end, when never healed)."""

    number: int  # 1, 2, ... in order of start: how the report labels it
    nemesis: str
    target: str
    start_s: float
    stop_s: float
    healed: bool  # False: no stop was recorded, stop_s is the end of the history


@dataclass(frozen=True, slots=True)
class Marker:
    """A point in time the plots mark with a vertical line (a failover)."""

    time_s: float
    f: str
    label: str


@dataclass(frozen=True, slots=True)
class LagSample:
    time_s: float
    site: str
    records: int


@dataclass(frozen=True, slots=True)
class Summary:
    """The few numbers a runner prints after a scenario (:meth:`line`)."""

    span_s: float
    sends_ok: int
    sends_fail: int
    sends_info: int
    ack_p50_ms: float | None
    ack_p99_ms: float | None
    ack_max_ms: float | None
    faults: int
    unhealed: int
    peak_lag: int | None

    def line(self) -> str:
        parts = [
            f"{self.span_s:.1f} s",
            f"sends {self.sends_ok} ok, {self.sends_fail} failed, {self.sends_info} indeterminate",
        ]
        if self.ack_p50_ms is not None and self.ack_p99_ms is not None and self.ack_max_ms is not None:
            parts.append(
                f"ack latency p50 {format_ms(self.ack_p50_ms)}, p99 {format_ms(self.ack_p99_ms)},"
                f" max {format_ms(self.ack_max_ms)}"
            )
        faults = f"{self.faults} fault{'s' if self.faults != 1 else ''}"
        parts.append(faults + (f" ({self.unhealed} never healed)" if self.unhealed else ""))
        if self.peak_lag is not None:
            parts.append(f"peak mirror lag {self.peak_lag} records")
        return "; ".join(parts)


def bucket_width(span_s: float, max_buckets: int = MAX_BUCKETS) -> float:
    """The narrowest of ``WIDTHS_S`` that covers ``span_s`` in at most ``max_buckets`` buckets."""
    for width in WIDTHS_S:
        if span_s / width < max_buckets:
            return float(width)
    return float(math.ceil(span_s / max_buckets))


def throughput(history: History, width_s: float | None = None) -> Throughput:
    """Sends completed per bucket, by their completion's time; every bucket from 0 to the end
    (the last one ends with the history, and holds the entries at its very end)."""
    timeline = Timeline.of(history)
    if timeline is None:
        return Throughput(width_s or 1.0, 0.0, [])
    width = width_s or bucket_width(timeline.span_s)
    count = max(1, math.ceil(timeline.span_s / width))
    tallies = {kind: [0] * count for kind in ("ok", "fail", "info")}
    for op, at in _timed(history, lambda op: op["f"] == "send" and op["type"] != "invoke"):
        tallies[op["type"]][min(int(at // width), count - 1)] += 1
    return Throughput(
        width,
        timeline.span_s,
        [ThroughputBucket(i * width, tallies["ok"][i], tallies["fail"][i], tallies["info"][i]) for i in range(count)],
    )


def latencies(history: History, f: str | None = "send") -> list[Latency]:
    """One Latency per completion of ``f`` (every ``f`` when None) that has its invoke, in history order."""
    timeline = Timeline.of(history)
    if timeline is None:
        return []
    invoked: dict[tuple[Any, ...], Op] = {}
    found: list[Latency] = []
    for op in history.ops:
        if f is not None and op["f"] != f:
            continue
        key = _invoke_key(op)
        if op["type"] == "invoke":
            invoked[key] = op
            continue
        started = invoked.pop(key, None)
        at = timeline.at(op)
        if started is None or at is None or not _is_number(started.get("mono")):
            continue
        ms = (op["mono"] - started["mono"]) / 1_000_000
        index = op.get("index")
        found.append(Latency(at, ms, op["f"], op["type"], op["process"], index if isinstance(index, int) else None))
    return found


def latency_buckets(points: Iterable[Latency], width_s: float) -> list[LatencyBucket]:
    """p50, p99 and max of ``points`` per bucket of ``width_s``, for the buckets that have any."""
    grouped: dict[int, list[float]] = defaultdict(list)
    for point in points:
        grouped[int(point.time_s // width_s)].append(point.ms)
    buckets = []
    for number in sorted(grouped):
        values = sorted(grouped[number])
        buckets.append(
            LatencyBucket(number * width_s, len(values), percentile(values, 50), percentile(values, 99), values[-1])
        )
    return buckets


def percentile(ordered: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``ordered`` (sorted ascending, not empty)."""
    if not ordered:
        raise ValueError("the percentile of no values")
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def sample(points: Sequence[Latency], cap: int) -> list[Latency]:
    """At most ``cap`` of ``points`` for a scatter, in time order: the slowest quarter of ``cap``
    (the outliers a scatter is for) and an even stride over the others. All when they fit."""
    if len(points) <= cap:
        return list(points)
    if cap <= 0:
        return []
    slowest = set(sorted(range(len(points)), key=lambda i: (-points[i].ms, i))[: cap // 4])
    rest = [i for i in range(len(points)) if i not in slowest]
    room = cap - len(slowest)
    strided = {rest[(k * len(rest)) // room] for k in range(room)}
    return [points[i] for i in sorted(slowest | strided)]


def nemesis_intervals(history: History) -> list[Interval]:
    """Each nemesis fault as an Interval, numbered in order of start (see the module docstring)."""
    timeline = Timeline.of(history)
    if timeline is None:
        return []
    starts: list[tuple[Op, float]] = []
    stops: dict[int, float] = {}  # position in starts -> stop time
    waiting: dict[tuple[str, str], deque[int]] = defaultdict(deque)
    for op, at in _timed(history, lambda op: op["process"] == NEMESIS):
        key = (str(op.get("nemesis", "")), str(op.get("target", "")))
        if op["f"] == "start":
            waiting[key].append(len(starts))
            starts.append((op, at))
        elif op["f"] == "stop" and waiting[key]:
            stops[waiting[key].popleft()] = at
    return [
        Interval(
            number=position + 1,
            nemesis=str(op.get("nemesis", "")),
            target=str(op.get("target", "")),
            start_s=at,
            stop_s=stops.get(position, timeline.span_s),
            healed=position in stops,
        )
        for position, (op, at) in enumerate(starts)
    ]


def failover_markers(history: History) -> list[Marker]:
    """Every failover entry as a Marker: a promote names its link and sites, an export its size."""
    markers = []
    for op, at in _timed(history, lambda op: op["process"] == FAILOVER):
        value = op.get("value")
        if not isinstance(value, dict):
            value = {}
        if op["f"] == "promote":
            planned = "planned" if value.get("planned") else "unplanned"
            route = f" {value['source']}→{value['target']}" if "source" in value and "target" in value else ""
            label = f"promote{route} ({planned})"
        elif op["f"] == "export":
            records = op.get("records")
            label = f"export ({len(records) if isinstance(records, list) else 0} records)"
        else:
            label = op["f"]
        markers.append(Marker(at, op["f"], label))
    return markers


def lag_samples(history: History) -> list[LagSample]:
    """The ``lag`` samples with a whole number of records, in history order."""
    samples = []
    for op, at in _timed(history, lambda op: op["f"] == "lag" and isinstance(op.get("value"), dict)):
        records = op["value"].get("records")
        if isinstance(records, int) and not isinstance(records, bool):
            samples.append(LagSample(at, str(op.get("site", "")), records))
    return samples


def times_of(history: History, indexes: Iterable[int]) -> list[float]:
    """The times of the entries with these history ``index`` values (those that exist), ascending."""
    wanted = set(indexes)
    return sorted(at for _, at in _timed(history, lambda op: op.get("index") in wanted)) if wanted else []


def summarize(history: History) -> Summary:
    """The Summary of ``history``: its sends, acknowledged latency, faults and peak mirror lag."""
    timeline = Timeline.of(history)
    sends = [op["type"] for op in history.ops if op["f"] == "send" and op["type"] != "invoke"]
    acked = sorted(point.ms for point in latencies(history) if point.type == "ok")
    faults = nemesis_intervals(history)
    lags = [sample.records for sample in lag_samples(history)]
    return Summary(
        span_s=timeline.span_s if timeline else 0.0,
        sends_ok=sends.count("ok"),
        sends_fail=sends.count("fail"),
        sends_info=sends.count("info"),
        ack_p50_ms=percentile(acked, 50) if acked else None,
        ack_p99_ms=percentile(acked, 99) if acked else None,
        ack_max_ms=acked[-1] if acked else None,
        faults=len(faults),
        unhealed=sum(not interval.healed for interval in faults),
        peak_lag=max(lags) if lags else None,
    )


def format_ms(ms: float) -> str:
    """A latency as people read it: ``0.42 ms``, ``12 ms``, ``3.4 s``."""
    if ms >= 100_000:
        return f"{ms / 1000:,.0f} s"
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    return f"{ms:.2g} ms" if ms < 10 else f"{ms:.0f} ms"


def _timed(history: History, keep: Callable[[Op], bool]) -> Iterator[tuple[Op, float]]:
    """The entries ``keep`` accepts that have a time, each with its seconds since the start."""
    timeline = Timeline.of(history)
    if timeline is None:
        return
    for op in history.ops:
        if keep(op):
            at = timeline.at(op)
            if at is not None:
                yield op, at


def _invoke_key(op: Op) -> tuple[Any, ...]:
    # A send is matched by its value (a producer may have several in flight); others by process and f.
    if op["f"] == "send":
        return (op["process"], "send", _hashable(op.get("value")))
    return (op["process"], op["f"])


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
