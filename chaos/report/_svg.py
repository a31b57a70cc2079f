"""Inline SVG time plots for the report: axes, lines, dots, and the faults drawn over them.

A plot is one ``<svg>`` element with a ``viewBox`` (it scales with the page) and no script or
``style`` attribute: colours come from the page's one style block through classes, so the
report's Content-Security-Policy can refuse every inline style but that block. Every text that
came from a history is escaped here (:func:`esc`); callers pass plain strings.

Layout, top to bottom: a band of label lanes (as many as overlapping labels need, at most
``MAX_LANES``), the plot area with the faults shaded (hatched, so they show in grey scale too)
and failovers as dashed vertical lines, then the time axis. Hovering a shaded fault or a
marker shows its full description (an SVG ``<title>``).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ._series import Interval, Marker

__all__ = ["Axis", "Rug", "Series", "esc", "format_count", "format_time", "linear_axis", "log_axis", "plot"]

WIDTH = 960
LEFT = 74  # room for the y tick labels and the axis title
RIGHT = 18
PLOT_HEIGHT = 180
BOTTOM = 36
LANE_HEIGHT = 16
MAX_LANES = 3
CHAR_WIDTH = 6.6  # of an 11 px label, about: how much room a lane needs for a label
RUG_CAP = 400  # anomaly ticks drawn at most
TIME_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(text: object) -> str:
    """``text`` as HTML text or attribute value: markup escaped, control characters shown as ``\\xNN``."""
    return html.escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text)), quote=True)


def format_count(value: float) -> str:
    """A tick label: ``0``, ``250``, ``1.5k``, ``2M``."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def format_time(seconds: float, span_s: float) -> str:
    """A time-axis label: ``45 s`` for short histories, ``12:30`` (m:ss) or ``1:02:30`` (h:mm:ss) for long ones."""
    if span_s <= 120:
        return f"{seconds:g} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if span_s >= 3600 else f"{whole // 60}:{whole % 60:02d}"


@dataclass(frozen=True, slots=True)
class Axis:
    """A y axis from ``low`` to ``high`` (a logarithmic one: both > 0) with the values it labels."""

    low: float
    high: float
    ticks: tuple[float, ...]
    log: bool
    label: Callable[[float], str]

    def fraction(self, value: float) -> float:
        """Where ``value`` sits from low (0.0) to high (1.0), clamped."""
        if self.log:
            bottom, top = math.log10(self.low), math.log10(self.high)
            share = (math.log10(max(value, self.low)) - bottom) / (top - bottom)
        else:
            share = (value - self.low) / (self.high - self.low)
        return min(1.0, max(0.0, share))


def linear_axis(highest: float, label: Callable[[float], str] = format_count) -> Axis:
    """An axis from 0 to a round number at or above ``highest``, with 3 to 6 ticks."""
    step = _nice_step(highest / 4) if highest > 0 else 1.0
    top = step * max(1, math.ceil(highest / step - 1e-9))
    count = round(top / step)
    return Axis(0.0, top, tuple(step * i for i in range(count + 1)), log=False, label=label)


def log_axis(lowest: float, highest: float, label: Callable[[float], str] = format_count) -> Axis:
    """A logarithmic axis over whole decades around ``lowest`` .. ``highest`` (both > 0)."""
    low = 10.0 ** math.floor(math.log10(max(lowest, 1e-3)))
    high = 10.0 ** math.ceil(math.log10(max(highest, low * 10)))
    if high <= low:
        high = low * 10
    decades = round(math.log10(high / low))
    return Axis(low, high, tuple(low * 10.0**i for i in range(decades + 1)), log=True, label=label)


@dataclass(frozen=True, slots=True)
class Series:
    """One thing drawn: a ``line`` (None breaks it), an ``area`` under a line, or ``dots``.

    ``css`` is its class in the page's style block (its colour and dash pattern).
    """

    label: str
    kind: Literal["line", "area", "dots"]
    css: str
    points: Sequence[tuple[float, float | None]]


@dataclass(frozen=True, slots=True)
class Rug:
    """Short ticks along the bottom of the plot area at ``times`` (where anomalies were recorded)."""

    label: str
    times: Sequence[float]


def plot(
    *,
    chart_id: str,
    title: str,
    span_s: float,
    y: Axis,
    y_title: str,
    series: Sequence[Series],
    intervals: Sequence[Interval] = (),
    markers: Sequence[Marker] = (),
    rug: Rug | None = None,
) -> str:
    """The ``<svg>`` of one time plot over 0 .. ``span_s`` seconds; ``chart_id`` must be unique in the page."""
    span = max(span_s, 1e-9)
    flags = [(i.start_s, f"{i.number} {i.nemesis}", str(i.number)) for i in intervals]
    flags += [(m.time_s, m.label, m.f) for m in markers]
    labels = _lanes(flags, span)
    top = 6 + LANE_HEIGHT * (max((lane for lane, _ in labels), default=-1) + 1) + 6
    height = top + PLOT_HEIGHT + BOTTOM
    right = WIDTH - RIGHT

    def x(seconds: float) -> float:
        return LEFT + (right - LEFT) * min(1.0, max(0.0, seconds / span))

    def yy(value: float) -> float:
        return top + PLOT_HEIGHT * (1.0 - y.fraction(value))

    bottom = top + PLOT_HEIGHT
    out = [
        f'<svg class="chart" id="{esc(chart_id)}" viewBox="0 0 {WIDTH} {height}" role="img"'
        f' aria-label="{esc(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{esc(title)}</title>",
        f'<defs><pattern id="{esc(chart_id)}-hatch" width="8" height="8" patternUnits="userSpaceOnUse"'
        ' patternTransform="rotate(45)"><rect class="fault-bg" width="8" height="8"/>'
        '<line class="fault-line" x1="0" y1="0" x2="0" y2="8"/></pattern></defs>',
    ]
    for interval in intervals:  # under the data, so lines stay readable
        x0, x1 = x(interval.start_s), x(interval.stop_s)
        state = "" if interval.healed else " (never healed: shaded to the end)"
        out.append(
            f'<rect class="fault" data-fault="{interval.number}" x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 1.5):.1f}"'
            f' height="{PLOT_HEIGHT}" fill="url(#{esc(chart_id)}-hatch)"><title>'
            f"{esc(f'fault {interval.number}: {interval.nemesis} on {interval.target}')}"
            f" {esc(format_time(interval.start_s, 0))} .. {esc(format_time(interval.stop_s, 0))}{esc(state)}"
            "</title></rect>"
        )
    for value in y.ticks:
        at = yy(value)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{right}" y1="{at:.1f}" y2="{at:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{at + 4:.1f}" text-anchor="end">{esc(y.label(value))}</text>')
    for seconds in _time_ticks(span):
        at = x(seconds)
        out.append(f'<line class="axis" x1="{at:.1f}" x2="{at:.1f}" y1="{bottom}" y2="{bottom + 5}"/>')
        out.append(
            f'<text class="tick" x="{at:.1f}" y="{bottom + 18}" text-anchor="middle">'
            f"{esc(format_time(seconds, span))}</text>"
        )
    out.append(f'<line class="axis" x1="{LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}"/>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}"/>')
    middle = top + PLOT_HEIGHT / 2
    out.append(
        f'<text class="axis-title" x="14" y="{middle:.1f}" text-anchor="middle"'
        f' transform="rotate(-90 14 {middle:.1f})">{esc(y_title)}</text>'
    )
    out.append(
        f'<text class="axis-title" x="{right}" y="{bottom + 32}" text-anchor="end">time since the run started</text>'
    )
    for one in series:
        out.append(_draw(one, x, yy, bottom))
    for marker in markers:
        at = x(marker.time_s)
        out.append(
            f'<line class="marker" data-marker="{esc(marker.f)}" x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{bottom}">'
            f"<title>{esc(marker.label)} at {esc(format_time(marker.time_s, 0))}</title></line>"
        )
    if rug is not None and rug.times:
        columns = sorted({round(x(t)) for t in rug.times})[:RUG_CAP]
        ticks = "".join(f"M{c} {bottom}l-4 -8h8z" for c in columns)
        out.append(f'<path class="rug" d="{ticks}"><title>{esc(rug.label)}</title></path>')
    for (when, _, _), (lane, text) in zip(flags, labels, strict=True):
        if not text:
            continue
        at, base = x(when), 6 + LANE_HEIGHT * lane + 11
        out.append(f'<line class="flag" x1="{at:.1f}" x2="{at:.1f}" y1="{base - 10}" y2="{top}"/>')
        out.append(f'<text class="fault-label" x="{at + 3:.1f}" y="{base}">{esc(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def _draw(series: Series, x: Callable[[float], float], y: Callable[[float], float], bottom: float) -> str:
    """The path of one series: a line broken at None, an area closed down to ``bottom``, or dots."""
    if series.kind == "dots":
        # A zero-length subpath with round caps is a dot: a few bytes per point, however many.
        d = "".join(f"M{x(t):.1f} {y(v):.1f}h0" for t, v in series.points if v is not None)
        return f'<path class="{esc(series.css)}" d="{d}"/>'
    runs: list[list[tuple[float, float]]] = [[]]
    for t, v in series.points:
        if v is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((x(t), y(v)))
    parts = []
    for run in runs:
        if not run:
            continue
        path = "M" + "L".join(f"{px:.1f} {py:.1f}" for px, py in run)
        if series.kind == "area":
            path += f"L{run[-1][0]:.1f} {bottom}L{run[0][0]:.1f} {bottom}Z"
        elif len(run) == 1:
            path += "h0"  # a lone point between gaps still shows (round caps)
        parts.append(path)
    return f'<path class="{esc(series.css)}" d="{"".join(parts)}"/>'


def _lanes(labels: Sequence[tuple[float, str, str]], span: float) -> list[tuple[int, str]]:
    """For each (time, full label, short label): the lane it goes in and the text that fits there.

    Greedy, in the given order: the first lane where the full label fits after what is already
    there, else the first where the short one fits, else no text (the shading keeps its tooltip).
    """
    scale = (WIDTH - RIGHT - LEFT) / span
    ends: list[float] = []  # per lane, the x where its last label ends
    placed: list[tuple[int, str]] = []
    for when, full, short in labels:
        at = LEFT + when * scale
        for text in (full, short):
            lane = next((i for i, end in enumerate(ends) if end < at), None)
            if lane is None and len(ends) < MAX_LANES:
                lane = len(ends)
                ends.append(-math.inf)
            if lane is not None:
                ends[lane] = at + 3 + len(text) * CHAR_WIDTH + 8
                placed.append((lane, text))
                break
        else:
            placed.append((0, ""))
    return placed


def _time_ticks(span: float) -> list[float]:
    step = next((s for s in TIME_STEPS_S if span / s <= 8), math.ceil(span / 8))
    return [step * i for i in range(int(span // step) + 1)]


def _nice_step(rough: float) -> float:
    power = 10.0 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough)
