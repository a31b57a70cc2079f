"""One scenario's plots and numbers in the report, from its history: HTML around :mod:`._svg` plots.

:func:`scenario_plots` gives, in order: the numbers of the history (sends, latency, faults,
lag, anomalies), then three figures over the same time axis, each with the faults shaded and
numbered and failovers as dashed lines, and a caption that is its legend:

- acknowledged sends per second (an area), failed or indeterminate ones (a dashed line, when
  there are any), and a tick at the bottom where a record an anomaly names was written;
- acknowledged send latency, log scale: a scatter of at most ``SCATTER_CAP`` single sends
  (the slowest always among them) under p50 and p99 lines per bucket;
- the mirror's lag in records, one line per target site;

then the faults as a table (their numbers are the plots' labels). A plot with nothing to draw
is replaced by a sentence saying so (no sends, no lag samples).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from chaos.history import History

from . import _series as series
from ._results import ScenarioResult
from ._svg import Axis, Rug, Series, esc, linear_axis, log_axis, plot

__all__ = ["SCATTER_CAP", "duration", "scenario_plots", "utc"]

SCATTER_CAP = 1500  # single acknowledged sends drawn in a latency scatter, at most

FAULT_KEY = (
    '<span class="key"><svg viewBox="0 0 28 12"><rect class="fault-bg" width="28" height="12"/>'
    '<line class="fault-line" x1="8" y1="0" x2="20" y2="12"/></svg>fault (numbered)</span>'
)
FAILOVER_KEY = (
    '<span class="key"><svg viewBox="0 0 28 12"><line class="marker" x1="14" x2="14" y1="0" y2="12"/></svg>'
    "failover</span>"
)
RUG_KEY = (
    '<span class="key"><svg viewBox="0 0 28 12"><path class="rug" d="M14 12l-5 -10h10z"/></svg>'
    "a record named by an anomaly</span>"
)


@dataclass(frozen=True, slots=True)
class Figures:
    """What every plot of one scenario shares: its ids' prefix, its name, time span, faults and failovers."""

    prefix: str
    name: str
    span_s: float
    intervals: list[series.Interval]
    markers: list[series.Marker]

    def figure(
        self,
        kind: str,
        caption: str,
        keys: list[str],
        y: Axis,
        y_title: str,
        lines: list[Series],
        rug: Rug | None = None,
    ) -> str:
        """A ``<figure>``: the caption with its legend (``keys``, then faults and failovers), and the plot."""
        keys = keys + ([FAULT_KEY] if self.intervals else []) + ([FAILOVER_KEY] if self.markers else [])
        svg = plot(
            chart_id=f"{self.prefix}-{kind}",
            title=f"{self.name}: {caption}",
            span_s=self.span_s,
            y=y,
            y_title=y_title,
            series=lines,
            intervals=self.intervals,
            markers=self.markers,
            rug=rug,
        )
        return (
            f'<figure><figcaption><span class="title">{esc(caption)}</span>{"".join(keys)}</figcaption>{svg}</figure>'
        )


def scenario_plots(prefix: str, scenario: ScenarioResult, history: History, timeline: series.Timeline) -> str:
    """The numbers, plots and fault table of ``scenario``; chart ids start with ``prefix``."""
    figures = Figures(
        prefix, scenario.name, timeline.span_s, series.nemesis_intervals(history), series.failover_markers(history)
    )
    summary = series.summarize(history)
    out = [_stats(summary, timeline, scenario)]
    if summary.sends_ok + summary.sends_fail + summary.sends_info == 0:
        out.append('<p class="note no-sends">No sends in this history: no throughput or latency to plot.</p>')
    else:
        flow = series.throughput(history)
        out.append(_throughput(figures, scenario, history, flow))
        out.append(_latency(figures, history, flow))
    out.append(_lag(figures, history))
    out.append(_fault_table(figures.intervals, figures.markers))
    return "".join(out)


def _throughput(figures: Figures, scenario: ScenarioResult, history: History, flow: series.Throughput) -> str:
    rates = flow.points()
    ok = [(at, acked) for at, acked, _ in rates]
    bad = [(at, failed) for at, _, failed in rates]
    lines = [Series("acknowledged", "area", "s-ok-area", ok), Series("acknowledged", "line", "s-ok", ok)]
    keys = [_key("s-ok", "acknowledged sends")]
    if any(failed for _, failed in bad):
        lines.append(Series("failed or indeterminate", "line", "s-bad", bad))
        keys.append(_key("s-bad", "failed or indeterminate sends"))
    indexes = [
        record["index"]
        for checker in scenario.checkers
        for anomaly in checker.anomalies
        for record in (anomaly.get("records") or [])
        if isinstance(record, dict) and isinstance(record.get("index"), int)
    ]
    times = series.times_of(history, indexes)
    rug = Rug(f"{len(times):,} records named by anomalies", times) if times else None
    if rug:
        keys.append(RUG_KEY)
    per_s = "per second" if flow.width_s == 1 else f"per second, averaged over {flow.width_s:g} s"
    top = max((v for _, v in ok + bad), default=0.0)
    return figures.figure("throughput", f"Acknowledged sends, {per_s}", keys, linear_axis(top), "sends/s", lines, rug)


def _latency(figures: Figures, history: History, flow: series.Throughput) -> str:
    acked = [point for point in series.latencies(history) if point.type == "ok"]
    if not acked:
        return '<p class="note no-latency">No acknowledged send: no latency to plot.</p>'
    width, span = flow.width_s, figures.span_s
    buckets = {round(b.start_s / width): b for b in series.latency_buckets(acked, width)}
    middles = [(n, (b.start_s + min(b.start_s + width, span)) / 2) for n, b in enumerate(flow.buckets)]
    p50 = [(at, buckets[n].p50_ms if n in buckets else None) for n, at in middles]
    p99 = [(at, buckets[n].p99_ms if n in buckets else None) for n, at in middles]
    shown = series.sample(acked, SCATTER_CAP)
    every = "every acknowledged send" if len(shown) == len(acked) else f"{len(shown):,} of {len(acked):,} sends"
    keys = [
        _key("s-dots", every, dots=True),
        _key("s-p50", f"p50 per {width:g} s"),
        _key("s-p99", f"p99 per {width:g} s"),
    ]
    lines = [
        Series("sends", "dots", "s-dots", [(point.time_s, point.ms) for point in shown]),
        Series("p50", "line", "s-p50", p50),
        Series("p99", "line", "s-p99", p99),
    ]
    y = log_axis(min(p.ms for p in acked), max(p.ms for p in acked), label=_ms_label)
    return figures.figure("latency", "Acknowledged send latency (log scale)", keys, y, "latency", lines)


def _lag(figures: Figures, history: History) -> str:
    samples = series.lag_samples(history)
    if not samples:
        return '<p class="note no-lag">No mirror lag samples in this history: no lag plot.</p>'
    lines = [
        Series(site, "line", f"s-lag{n % 4}", [(s.time_s, float(s.records)) for s in samples if s.site == site])
        for n, site in enumerate(sorted({s.site for s in samples}))
    ]
    keys = [_key(line.css, f"lag of {line.label or 'the mirror'} (records)") for line in lines]
    y = linear_axis(max(s.records for s in samples))
    return figures.figure("lag", "Mirror lag, records", keys, y, "records behind", lines)


def _key(css: str, label: str, *, dots: bool = False) -> str:
    shape = 'd="M6 6h0M14 6h0M22 6h0"' if dots else 'd="M1 6H27"'
    return f'<span class="key"><svg viewBox="0 0 28 12"><path class="{esc(css)}" {shape}/></svg>{esc(label)}</span>'


def _stats(summary: series.Summary, timeline: series.Timeline, scenario: ScenarioResult) -> str:
    def ms(value: float | None) -> str:
        return series.format_ms(value) if value is not None else "—"

    stats = [
        ("history spans", duration(summary.span_s)),
        ("started", utc(timeline.start_wall) if timeline.start_wall else "—"),
        ("sends acknowledged", f"{summary.sends_ok:,}"),
        ("failed / indeterminate", f"{summary.sends_fail:,} / {summary.sends_info:,}"),
        ("ack latency p50 / p99", f"{ms(summary.ack_p50_ms)} / {ms(summary.ack_p99_ms)}"),
        ("slowest ack", ms(summary.ack_max_ms)),
        ("faults", f"{summary.faults}" + (f" ({summary.unhealed} never healed)" if summary.unhealed else "")),
        ("peak mirror lag", f"{summary.peak_lag:,}" if summary.peak_lag is not None else "—"),
        ("anomalies", f"{scenario.anomaly_count:,}"),
    ]
    tiles = (
        f'<div class="stat"><div class="label">{esc(k)}</div><div class="value">{esc(v)}</div></div>' for k, v in stats
    )
    return '<div class="stats">' + "".join(tiles) + "</div>"


def _fault_table(intervals: Sequence[series.Interval], markers: Sequence[series.Marker]) -> str:
    if not intervals and not markers:
        return '<p class="note no-faults">No nemesis or failover events in this history.</p>'
    rows = [
        f"<tr><td>{i.number}</td><td>{esc(i.nemesis)}</td><td>{esc(i.target)}</td><td>+{i.start_s:.1f} s</td><td>"
        + (f"+{i.stop_s:.1f} s" if i.healed else '<span class="cut">never healed</span>')
        + f"</td><td>{esc(duration(i.stop_s - i.start_s))}</td></tr>"
        for i in intervals
    ]
    rows += [
        f"<tr><td>—</td><td>failover</td><td>{esc(m.label)}</td><td>+{m.time_s:.1f} s</td><td></td><td></td></tr>"
        for m in markers
    ]
    return (
        '<h3>Faults</h3><div class="scroll"><table class="faults"><thead><tr><th>#</th><th>nemesis</th>'
        f"<th>target</th><th>start</th><th>healed</th><th>lasted</th></tr></thead><tbody>{''.join(rows)}"
        "</tbody></table></div>"
    )


def _ms_label(value: float) -> str:
    return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"


def duration(seconds: float | None) -> str:
    """A duration as people read it: ``12.5 s``, ``4 min 05 s``, ``2 h 10 min``; None is "—"."""
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def utc(wall: float) -> str:
    """Wall-clock seconds as ``2025-10-09 08:53:20 UTC``."""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
