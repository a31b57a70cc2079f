"""The report's anomaly table: every anomaly a scenario's checkers found, grouped by checker.

Each row names the checker, the anomaly, its one-sentence description, the records involved
(topic/partition, offset, value, and the op's time when the record names its history index)
and the nemesis or failover events near it. Large lists are cut visibly: at most
``ROWS_PER_CHECKER`` anomalies per checker, ``RECORDS_PER_ANOMALY`` records and
``NEAR_PER_ANOMALY`` events per anomaly, each cut saying the exact total; a value longer than
``VALUE_CHARS`` is shortened with its length named. results.json keeps everything.

Everything shown came from a history or a checker and may be any text: it is all escaped
(:func:`chaos.report._svg.esc`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from chaos.history import History

from ._results import ScenarioResult
from ._series import Timeline
from ._svg import esc

__all__ = ["anomaly_table", "format_when"]

ROWS_PER_CHECKER = 25
RECORDS_PER_ANOMALY = 8
NEAR_PER_ANOMALY = 6
VALUE_CHARS = 120


def anomaly_table(scenario: ScenarioResult, history: History | None, timeline: Timeline | None) -> str:
    """The anomalies of ``scenario`` as an HTML table, or a line saying there are none."""
    total = scenario.anomaly_count
    if total == 0:
        if not scenario.checkers:
            return '<p class="note">No checker ran, so there are no anomalies to list.</p>'
        return '<p class="note none">No anomalies: every checker that ran passed.</p>'
    ops = _ops_by_index(history)
    rows = []
    for checker in scenario.checkers:
        if not checker.anomalies:
            continue
        count = len(checker.anomalies)
        shown = checker.anomalies[:ROWS_PER_CHECKER]
        cut = (
            f' <span class="cut" data-cut="{count}">(showing the first {len(shown)} of {count:,};'
            " results.json has them all)</span>"
            if count > len(shown)
            else ""
        )
        rows.append(
            f'<tr class="group"><th colspan="4">{esc(checker.name)}: {count:,} anomal{"y" if count == 1 else "ies"}'
            f"{cut}</th></tr>"
        )
        for anomaly in shown:
            rows.append(
                f'<tr class="anomaly" data-checker="{esc(checker.name)}" data-name="{esc(anomaly.get("name", ""))}">'
                f'<td><span class="aname">{esc(anomaly.get("name", "?"))}</span></td>'
                f"<td>{esc(anomaly.get('description', ''))}</td>"
                f"<td>{_records(anomaly.get('records'), ops, timeline)}</td>"
                f"<td>{_near(anomaly.get('near'), timeline)}</td></tr>"
            )
    return (
        f'<p class="anomaly-total" data-total="{total}"><strong>{total:,} anomal{"y" if total == 1 else "ies"}'
        "</strong> found by this scenario's checkers.</p>"
        '<div class="scroll"><table class="anomalies"><thead><tr><th>anomaly</th><th>what is wrong</th>'
        "<th>records (topic/partition @ offset: value)</th><th>faults near it</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def format_when(op: Mapping[str, Any], timeline: Timeline | None) -> str:
    """When ``op`` happened: ``+12.3 s`` into the run when its ``mono`` places it, else its wall time."""
    if timeline is not None:
        at = timeline.at(op)
        if at is not None:
            return f"+{at:.1f} s"
    wall = op.get("time")
    if isinstance(wall, int | float) and not isinstance(wall, bool):
        return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%H:%M:%S UTC")
    return "?"


def _records(records: Any, ops: dict[int, Mapping[str, Any]], timeline: Timeline | None) -> str:
    def one(record: dict[str, Any]) -> str:
        where = f"{record.get('topic', '?')}/{record.get('partition', '?')} @ {record.get('offset', '?')}"
        extra = [str(record["process"])] if "process" in record else []
        index = record.get("index")
        if isinstance(index, int):
            extra.append(f"#{index} {format_when(ops[index], timeline)}" if index in ops else f"#{index}")
        detail = f' <span class="muted">({esc(", ".join(extra))})</span>' if extra else ""
        value = record.get("value")
        shown = '<span class="muted">no value</span>' if value is None else f"<q>{esc(_shorten(str(value)))}</q>"
        return f"<code>{esc(where)}</code>: {shown}{detail}"

    return _listing("recs", records, RECORDS_PER_ANOMALY, "records", "—", one)


def _near(near: Any, timeline: Timeline | None) -> str:
    def one(event: dict[str, Any]) -> str:
        what = " ".join(str(event[k]) for k in ("f", "nemesis") if k in event)
        target = f" on {event['target']}" if "target" in event else ""
        return f"<code>{esc(format_when(event, timeline))}</code> {esc(_shorten(what + target))}"

    return _listing("near", near, NEAR_PER_ANOMALY, "events", "none recorded", one)


def _listing(css: str, entries: Any, cap: int, noun: str, empty: str, one: Callable[[dict[str, Any]], str]) -> str:
    """``entries`` (a JSON list) as a list of at most ``cap`` items, each drawn by ``one``, and the cut."""
    if not isinstance(entries, list) or not entries:
        return f'<span class="muted">{esc(empty)}</span>'
    items = [one(e) if isinstance(e, dict) else esc(_shorten(str(e))) for e in entries[:cap]]
    if len(entries) > cap:
        items.append(f'<span class="cut">… and {len(entries) - cap:,} more ({len(entries):,} {noun})</span>')
    return f'<ul class="{css}">' + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def _shorten(text: str) -> str:
    return text if len(text) <= VALUE_CHARS else f"{text[:VALUE_CHARS]}… ({len(text):,} characters)"


def _ops_by_index(history: History | None) -> dict[int, Mapping[str, Any]]:
    if history is None:
        return {}
    return {op["index"]: op for op in history.ops if isinstance(op.get("index"), int)}
