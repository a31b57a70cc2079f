"""``DIR/report.html``: one self-contained HTML file made from ``DIR/results.json`` and the histories.

It opens offline: one inline style block, inline SVG, no script, no image, no font, no link.
Its Content-Security-Policy says so (``default-src 'none'``, the style block pinned by its
SHA-256 hash), so even a value that slipped through unescaped could not run or fetch anything.

What a reader sees, top to bottom:

1. the overall verdict, how many scenarios passed, and the command (and seed) that replays the run;
2. a table of scenarios by checkers: each cell a verdict in words and in colour
   (pass, FAIL with its anomaly count, skipped, not run; "found (expected)" where a positive
   control's checker fired as it must), each scenario linking to its section;
3. per scenario: its verdict, description, seed, replay command and duration (and its error,
   if it errored); the numbers and plots of its history (:mod:`chaos.report._plots`: sends per
   second, acknowledged latency, mirror lag, every fault shaded); every anomaly
   (:mod:`chaos.report._anomalies`).

For tests and scripts: ``body[data-verdict]``; ``section.scenario[data-scenario]`` with
``data-verdict``; verdict cells ``td[data-checker][data-verdict]``; plots are ``svg.chart``
with ids ``s<N>-throughput``, ``s<N>-latency``, ``s<N>-lag``; faults are ``rect.fault``.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos.history import History, HistoryError, load

from . import _series as series
from ._anomalies import anomaly_table
from ._plots import duration, scenario_plots, utc
from ._results import CheckerResult, Results, ScenarioResult, load_results
from ._svg import esc

__all__ = ["render"]

VERDICT_TEXT = {
    "pass": "✓ pass",
    "fail": "✗ FAIL",
    "skipped": "○ skipped",
    "error": "! ERROR",
    "expected": "✓ found (expected)",
    "not-run": "· not run",
}

STYLE = """
:root { --fg: #111827; --muted: #4b5563; --line: #d1d5db; --card: #ffffff; --bg: #f3f4f6;
  --ok: #14532d; --ok-bg: #dcfce7; --bad: #991b1b; --bad-bg: #fee2e2; --skip: #374151; --skip-bg: #e5e7eb;
  --err: #581c87; --err-bg: #f3e8ff; --exp: #1e3a8a; --exp-bg: #dbeafe; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.5rem; margin: 0.4rem 0 0.8rem; }
h2 { font-size: 1.35rem; margin: 0; display: flex; flex-wrap: wrap; align-items: center; gap: 0.4rem 0.8rem; }
h3 { font-size: 0.95rem; margin: 1.4rem 0 0.3rem; color: var(--muted); text-transform: uppercase;
  letter-spacing: 0.04em; }
a { color: inherit; }
code, pre { font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem;
  margin-bottom: 1.25rem; }
header.top { display: flex; flex-wrap: wrap; gap: 1rem 1.6rem; align-items: stretch; }
header.top .about { flex: 1 1 30rem; display: flex; flex-direction: column; gap: 0.35rem; }
header.top h1 { margin: 0; }
.big-verdict { flex: 0 0 auto; min-width: 13rem; display: flex; flex-direction: column; justify-content: center;
  text-align: center; padding: 0.6rem 1.2rem; border-radius: 8px; border: 4px solid; }
.big-verdict .word { font-size: 2.6rem; font-weight: 800; letter-spacing: 0.06em; line-height: 1.1; }
.big-verdict .tally { font-size: 0.9rem; font-weight: 600; margin-top: 0.3rem; }
.big-verdict.v-fail { border-width: 4px; }
.replay { display: block; padding: 0.45rem 0.7rem; background: #111827; color: #f9fafb; border-radius: 6px;
  user-select: all; overflow-wrap: anywhere; }
.facts { display: flex; flex-wrap: wrap; gap: 0.2rem 1.4rem; color: var(--muted); }
.facts b { color: var(--fg); font-weight: 600; }
.v { display: inline-block; padding: 0.1rem 0.5rem; border-radius: 4px; border: 1px solid; font-weight: 600;
  white-space: nowrap; font-size: 0.9rem; }
.v-pass { color: var(--ok); background: var(--ok-bg); }
.v-fail { color: var(--bad); background: var(--bad-bg); border-width: 2px; font-weight: 800; }
.v-skipped, .v-not-run { color: var(--skip); background: var(--skip-bg); font-style: italic; font-weight: 400; }
.v-error { color: var(--err); background: var(--err-bg); border-style: dashed; border-width: 2px; font-weight: 800; }
.v-expected { color: var(--exp); background: var(--exp-bg); border-style: double; border-width: 3px; }
.v-other { color: var(--skip); background: var(--card); }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 0.35rem 0.55rem; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { font-size: 0.85rem; color: var(--muted); font-weight: 600; border-bottom: 2px solid var(--line); }
table.matrix td, table.matrix tbody th { white-space: nowrap; }
table.matrix thead th { vertical-align: bottom; text-align: center; min-width: 5.5rem; }
table.matrix thead th:nth-child(-n + 3) { text-align: left; min-width: 0; }
.card > h3:first-child { margin-top: 0; }
table.matrix td.checker { text-align: center; }
.note { color: var(--muted); font-style: italic; margin: 0.4rem 0; }
.none { color: var(--ok); font-style: normal; font-weight: 600; }
.muted { color: var(--muted); }
.cut { color: var(--bad); font-weight: 600; }
.problem { border-left: 5px solid var(--err); background: var(--err-bg); padding: 0.5rem 0.8rem; margin: 0.6rem 0; }
section.scenario { scroll-margin-top: 1rem; }
section.scenario > .desc { margin: 0.35rem 0 0.6rem; font-size: 1.02rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; margin: 0.4rem 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.stats { display: flex; flex-wrap: wrap; gap: 0.6rem; margin: 0.6rem 0; }
.stat { border: 1px solid var(--line); border-radius: 6px; padding: 0.35rem 0.7rem; min-width: 8.5rem; }
.stat .label { font-size: 0.75rem; color: var(--muted); text-transform: uppercase; letter-spacing: 0.04em; }
.stat .value { font-size: 1.15rem; font-weight: 700; font-variant-numeric: tabular-nums; }
figure { margin: 0.8rem 0 0.4rem; }
figcaption { display: flex; flex-wrap: wrap; align-items: center; gap: 0.2rem 1.1rem; font-size: 0.88rem; }
figcaption .title { font-weight: 700; font-size: 0.98rem; margin-right: 0.4rem; }
.key { display: inline-flex; align-items: center; gap: 0.3rem; color: var(--muted); }
.key svg { width: 28px; height: 12px; }
svg.chart { display: block; width: 100%; height: auto; }
svg.chart text { font-size: 11px; fill: #374151; }
svg.chart .tick { fill: #4b5563; }
svg.chart .axis-title { fill: #374151; font-weight: 600; }
svg.chart .grid { stroke: #e5e7eb; stroke-width: 1; }
svg.chart .axis { stroke: #6b7280; stroke-width: 1; }
.fault-bg { fill: #fde68a; fill-opacity: 0.55; }
.fault-line { stroke: #d97706; stroke-width: 2.5; stroke-opacity: 0.55; }
svg.chart .fault { stroke: #b45309; stroke-width: 0.8; stroke-opacity: 0.7; }
svg.chart .flag { stroke: #92400e; stroke-width: 1; }
svg.chart .fault-label { fill: #78350f; font-weight: 700; }
svg.chart .marker, .key .marker { stroke: #7f1d1d; stroke-width: 2; stroke-dasharray: 6 3; }
svg.chart .rug, .key .rug { fill: #dc2626; stroke: #7f1d1d; stroke-width: 0.6; }
.s-ok { fill: none; stroke: #1d4ed8; stroke-width: 2; stroke-linejoin: round; stroke-linecap: round; }
.s-ok-area { fill: #93c5fd; fill-opacity: 0.45; stroke: none; }
.s-bad { fill: none; stroke: #dc2626; stroke-width: 1.8; stroke-dasharray: 5 3; stroke-linejoin: round; }
.s-dots { fill: none; stroke: #64748b; stroke-opacity: 0.45; stroke-width: 3.2; stroke-linecap: round; }
.s-p50 { fill: none; stroke: #1d4ed8; stroke-width: 2.2; stroke-linejoin: round; stroke-linecap: round; }
.s-p99 { fill: none; stroke: #c2410c; stroke-width: 2.2; stroke-dasharray: 7 3; stroke-linejoin: round;
  stroke-linecap: round; }
.s-lag0, .s-lag1, .s-lag2, .s-lag3 { fill: none; stroke-width: 2.2; stroke-linejoin: round; stroke-linecap: round; }
.s-lag0 { stroke: #0f766e; } .s-lag1 { stroke: #7c3aed; stroke-dasharray: 7 3; }
.s-lag2 { stroke: #b45309; stroke-dasharray: 2 3; } .s-lag3 { stroke: #be185d; stroke-dasharray: 10 3 2 3; }
table.faults td:first-child { font-weight: 700; color: #78350f; }
table.anomalies td { font-size: 0.9rem; }
table.anomalies thead th:nth-child(1) { width: 9%; } table.anomalies thead th:nth-child(2) { width: 24%; }
table.anomalies thead th:nth-child(3) { width: 44%; } table.anomalies thead th:nth-child(4) { width: 23%; }
table.anomalies tr.group th { background: var(--bad-bg); color: var(--bad); font-size: 0.95rem; }
table.anomalies .aname { font-weight: 700; color: var(--bad); }
ul.recs, ul.near { margin: 0; padding-left: 1rem; }
ul.recs q { overflow-wrap: anywhere; }
@media print { body { background: #fff; } .card { break-inside: avoid-page; border-color: #999; } }
"""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"style-src 'sha256-{base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()}'; "
    "script-src 'none'; img-src 'none'; form-action 'none'; base-uri 'none'"
)


@dataclass(frozen=True, slots=True)
class ScenarioView:
    """One scenario's result and its history (None, with ``problem`` saying why, when it could not be read)."""

    result: ScenarioResult
    history: History | None
    problem: str | None


def render(directory: Path) -> Path:
    """Write ``directory/report.html`` from ``directory/results.json`` and the scenarios' histories; its path.

    A scenario whose history is missing or unreadable still gets its section, saying why. Raises
    :class:`chaos.report.ReportError` when results.json is missing or malformed. Writes a
    temporary file and renames it, so a reader never sees half a report.
    """
    directory = Path(directory)
    results = load_results(directory / "results.json")
    views = [_view(directory, scenario) for scenario in results.scenarios]
    target = directory / "report.html"
    partial = directory / ".report.html.partial"
    partial.write_text(page(results, views), encoding="utf-8")
    os.replace(partial, target)
    return target


def page(results: Results, views: Sequence[ScenarioView]) -> str:
    """The whole HTML document."""
    verdict = "pass" if results.verdict == "pass" else "fail"
    title = f"strait chaos: {verdict.upper()}" + (f" (seed {results.seed})" if results.seed is not None else "")
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CONTENT_SECURITY_POLICY)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
        f'<body data-verdict="{esc(results.verdict)}"><main>'
        + _header(results)
        + _matrix(results)
        + "".join(_scenario(number, view) for number, view in enumerate(views))
        + "</main></body></html>\n"
    )


def _view(directory: Path, scenario: ScenarioResult) -> ScenarioView:
    if scenario.history is None:
        return ScenarioView(scenario, None, "results.json names no history for this scenario.")
    path = directory / scenario.history
    if not path.exists():
        return ScenarioView(scenario, None, f"its history {scenario.history} does not exist.")
    try:
        return ScenarioView(scenario, load(path), None)
    except HistoryError as exc:
        return ScenarioView(scenario, None, f"its history could not be read: {exc}")


def _header(results: Results) -> str:
    verdict = "pass" if results.verdict == "pass" else "fail"
    counts = {v: sum(s.verdict == v for s in results.scenarios) for v in ("pass", "fail", "error")}
    others = len(results.scenarios) - sum(counts.values())
    tally = (
        f"{len(results.scenarios)} scenario{'s' if len(results.scenarios) != 1 else ''}: {counts['pass']} passed,"
        f" {counts['fail']} failed, {counts['error']} errored" + (f", {others} other" if others else "")
    )
    facts = [("seed", str(results.seed) if results.seed is not None else "—")]
    if results.started is not None:
        facts.append(("started", utc(results.started)))
    if results.started is not None and results.finished is not None:
        facts.append(("took", duration(results.finished - results.started)))
    if results.machine:
        facts.append(("machine", results.machine))
    command = results.command or "(the runner recorded no command)"
    return (
        f'<header class="card top"><div class="big-verdict v-{verdict}" id="verdict">'
        f'<div class="word">{esc(VERDICT_TEXT[verdict].upper())}</div><div class="tally">{esc(tally)}</div></div>'
        '<div class="about"><h1>strait chaos report</h1>'
        '<div class="muted">Replay this run (the whole fault schedule follows from the seed):</div>'
        f'<code class="replay" id="command">{esc(command)}</code>'
        '<div class="facts">' + "".join(f"<span>{esc(k)} <b>{esc(v)}</b></span>" for k, v in facts) + "</div>"
        "</div></header>"
    )


def _matrix(results: Results) -> str:
    checkers: list[str] = []
    for scenario in results.scenarios:
        checkers += [c.name for c in scenario.checkers if c.name not in checkers]
    head = "".join(f"<th>{esc(name).replace('-', '-<wbr>')}</th>" for name in checkers)
    rows = []
    for number, scenario in enumerate(results.scenarios):
        by_name = {c.name: c for c in scenario.checkers}
        cells = "".join(_cell(scenario, by_name.get(name), name) for name in checkers)
        expect = "" if scenario.expect == "pass" else f' <span class="muted">expects {esc(scenario.expect)}</span>'
        rows.append(
            f'<tr data-scenario="{esc(scenario.name)}"><th><a href="#s{number}">{esc(scenario.name)}</a>{expect}</th>'
            f"<td>{_badge(scenario.verdict)}</td><td>{esc(duration(scenario.duration_s))}</td>{cells}</tr>"
        )
    if not rows:
        return '<section class="card"><h3>Verdicts</h3><p class="note">The run has no scenarios.</p></section>'
    return (
        '<section class="card"><h3>Verdicts: scenarios &times; checkers</h3><div class="scroll"><table class="matrix">'
        f"<thead><tr><th>scenario</th><th>verdict</th><th>took</th>{head}</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div></section>"
    )


def _cell(scenario: ScenarioResult, checker: CheckerResult | None, name: str) -> str:
    if checker is None:
        kind, extra = "not-run", ""
    elif checker.verdict == "fail":
        expected = scenario.expect != "pass" and any(a.get("name") == scenario.expect for a in checker.anomalies)
        kind, extra = ("expected" if expected else "fail"), f" · {len(checker.anomalies):,}"
    else:
        kind, extra = checker.verdict, ""
    tip = f"{name}: {checker.description or ''}" if checker else f"{name} did not run in this scenario"
    if checker is not None and checker.checked is not None:
        tip += f" (checked {checker.checked:,})"
    verdict = checker.verdict if checker else "not-run"
    return (
        f'<td class="checker" data-checker="{esc(name)}" data-verdict="{esc(verdict)}" title="{esc(tip)}">'
        f"{_badge(kind, extra)}</td>"
    )


def _badge(verdict: str, extra: str = "") -> str:
    css = verdict if verdict in VERDICT_TEXT else "other"
    return f'<span class="v v-{css}">{esc(VERDICT_TEXT.get(verdict, verdict))}{esc(extra)}</span>'


def _scenario(number: int, view: ScenarioView) -> str:
    scenario, history = view.result, view.history
    meta = [
        ("seed", esc(scenario.seed if scenario.seed is not None else "—")),
        ("replay", f'<code class="replay">{esc(scenario.replay or "—")}</code>'),
        ("took", esc(duration(scenario.duration_s))),
        ("history", f"<code>{esc(scenario.history or '—')}</code>"),
    ]
    if scenario.expect != "pass":
        meta.insert(0, ("expects", f"the anomaly <b>{esc(scenario.expect)}</b> (a positive control)"))
    parts = [
        f'<section class="card scenario" id="s{number}" data-scenario="{esc(scenario.name)}"'
        f' data-verdict="{esc(scenario.verdict)}"><h2>{esc(scenario.name)} {_badge(scenario.verdict)}</h2>',
        f'<p class="desc">{esc(scenario.description or "(no description)")}</p>',
        '<dl class="meta">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in meta) + "</dl>",
    ]
    if scenario.error:
        parts.append(
            f'<div class="problem"><strong>The scenario errored:</strong><pre>{esc(scenario.error)}</pre></div>'
        )
    if scenario.findings:
        items = "".join(f"<li>{esc(finding)}</li>" for finding in scenario.findings)
        parts.append(
            f'<div class="problem findings"><strong>Findings besides the checkers:</strong><ul>{items}</ul></div>'
        )
    if scenario.skipped_faults:
        items = "".join(f"<li>{esc(skipped)}</li>" for skipped in scenario.skipped_faults)
        parts.append(f'<p class="note skipped-faults">Faults these sites could not take:</p><ul>{items}</ul>')
    timeline = series.Timeline.of(history) if history is not None else None
    if history is None or timeline is None:
        reason = view.problem or "its history is empty."
        parts.append(f'<p class="note no-history">No plots: {esc(reason)}</p>')
    else:
        parts.append(scenario_plots(f"s{number}", scenario, history, timeline))
    parts.append("<h3>Anomalies</h3>")
    parts.append(anomaly_table(scenario, history, timeline))
    parts.append("</section>")
    return "".join(parts)
