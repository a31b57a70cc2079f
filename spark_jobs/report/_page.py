"""``DIR/report.html``: one self-contained page made from ``DIR/summary.json``.

It opens offline: one inline style block, inline SVG, no script, no image, no font, no link.
Its Content-Security-Policy says so (``default-src 'none'``, the style block pinned by its
SHA-256 hash, ``script-src 'none'``), so even a value that slipped through unescaped could
not run or fetch anything; and nothing slips through: every text from the summary passes
:func:`spark_jobs.report._svg.esc`.

What a reader sees, top to bottom:

1. the job and its verdict (CLEAN on a light panel, FOUND on a dark one: it reads in grey
   scale too), the command as run, when it started, how long it took, Spark's master and
   version, and the job's inputs;
2. the totals: discrepancies, invalid rows, partitions, then the job's own counts;
3. discrepancies by kind as bars (or, plainly, that there are none);
4. the partitions, most discrepancies first: counts per side, discrepancies per kind, each
   side's [log start, log end) and, for the first :data:`STRIP_CAP`, a strip drawing the
   ranges with the sample discrepancies as ticks; the rest are listed, folded, below;
5. invalid rows by error; the sample discrepancies (at most :data:`SAMPLE_CAP`); the notes.

For tests and scripts: ``body[data-verdict]``, ``#verdict``, ``#command``, ``svg.bars`` with
``g.bar[data-kind][data-count]``, ``tr.partition[data-topic][data-partition][data-discrepancies]``,
``svg.strip``, ``tr.sample[data-kind]``, and ``[data-cut]`` on every sentence that says what was left out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ._summary import Partition, Sample, Summary, load_summary, parse_summary
from ._svg import KIND_COLOURS, bars, esc, strip

__all__ = ["CONTENT_SECURITY_POLICY", "SAMPLE_CAP", "STRIP_CAP", "render", "render_summary"]

STRIP_CAP = 200  # partitions drawn as strips; a summary may list thousands
SAMPLE_CAP = 100  # sample rows shown (the spec's most a job writes)
CELL_CHARS = 300  # a longer sample value is cut, saying by how much

STYLE = """
:root { --ink: #0f172a; --soft: #475569; --rule: #cbd5e1; --paper: #fff; --desk: #eef2f6;
  --clean: #166534; --clean-bg: #dcfce7; --found: #fff; --found-bg: #991b1b; --hit: #991b1b; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--desk); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 1rem 1.4rem 3rem; }
h1 { font-size: 1.45rem; margin: 0; }
h2 { font-size: 0.9rem; margin: 0 0 0.6rem; color: var(--soft); text-transform: uppercase; letter-spacing: 0.05em; }
code { font: 12.5px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; overflow-wrap: anywhere; }
section, header { background: var(--paper); border: 1px solid var(--rule); border-radius: 8px;
  padding: 0.9rem 1.2rem; margin-bottom: 1rem; }
header { display: flex; flex-wrap: wrap; gap: 1rem 1.5rem; }
header .about { flex: 1 1 32rem; display: flex; flex-direction: column; gap: 0.45rem; min-width: 0; }
#verdict { flex: 0 0 13rem; display: flex; flex-direction: column; justify-content: center; text-align: center;
  border-radius: 8px; padding: 0.7rem 1rem; border: 3px solid; }
#verdict .word { font-size: 2.3rem; font-weight: 800; letter-spacing: 0.06em; line-height: 1.1; }
#verdict .tally { font-weight: 600; margin-top: 0.2rem; line-height: 1.3; }
#verdict.clean { color: var(--clean); background: var(--clean-bg); border-color: var(--clean); }
#verdict.found { color: var(--found); background: var(--found-bg); border-color: #450a0a; border-width: 5px; }
#command { display: block; padding: 0.45rem 0.7rem; background: var(--ink); color: #f8fafc; border-radius: 6px;
  user-select: all; }
.facts { display: flex; flex-wrap: wrap; gap: 0.15rem 1.4rem; color: var(--soft); }
.facts b { color: var(--ink); font-weight: 600; }
.lead { margin: 0; font-size: 1.02rem; }
dl.inputs { display: grid; grid-template-columns: fit-content(16rem) 1fr; gap: 0.15rem 1rem; margin: 0; }
dl.inputs dt { color: var(--soft); overflow-wrap: anywhere; }
dl.inputs dd { margin: 0; min-width: 0; }
.stats { display: flex; flex-wrap: wrap; gap: 0.6rem; }
.stat { border: 1px solid var(--rule); border-radius: 6px; padding: 0.3rem 0.75rem; min-width: 9rem; }
.stat .label { font-size: 0.72rem; color: var(--soft); text-transform: uppercase; letter-spacing: 0.04em; }
.stat .value { font-size: 1.2rem; font-weight: 700; font-variant-numeric: tabular-nums; }
.stat.bad { border: 2px solid var(--hit); }
.stat.bad .value { color: var(--hit); }
.none { color: var(--clean); font-weight: 600; margin: 0.3rem 0; }
.note { color: var(--soft); font-style: italic; margin: 0.4rem 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 0.28rem 0.6rem; border-bottom: 1px solid #e2e8f0; vertical-align: middle; }
thead th { font-size: 0.8rem; color: var(--soft); font-weight: 600; border-bottom: 2px solid var(--rule);
  vertical-align: bottom; }
th.num, td.num { text-align: right; }
td.num { white-space: nowrap; }
thead th span { display: block; max-width: 10rem; overflow-wrap: break-word; }
td.zero { color: #94a3b8; }
td.hit { color: var(--hit); font-weight: 700; }
tr.partition td.topic { font-weight: 600; }
tr.found td:first-child { box-shadow: inset 4px 0 0 var(--hit); }
td.range { white-space: nowrap; color: var(--soft); }
td.text code, td.kind span, td.topic span { display: block; overflow-wrap: break-word; }
td.kind span, td.topic span { min-width: 5rem; max-width: 14rem; }
td.text code { min-width: 10rem; max-width: 30rem; }
table.samples td { vertical-align: top; }
.null { color: #94a3b8; font-style: italic; }
.cut { color: var(--hit); font-weight: 600; }
details { margin-top: 0.8rem; }
summary { cursor: pointer; font-weight: 600; }
ul.notes { margin: 0; padding-left: 1.2rem; }
svg text { font-family: system-ui, "DejaVu Sans", sans-serif; }
svg.bars { display: block; max-width: 100%; height: auto; }
svg.bars .label { font-size: 13px; fill: var(--ink); }
svg.bars .count { font-size: 13px; font-weight: 700; fill: var(--ink); }
svg.bars .share { font-weight: 400; fill: var(--soft); }
svg.bars .base { stroke: #64748b; }
svg.strip { display: block; }
svg.strip .track { fill: #f8fafc; stroke: #e2e8f0; }
svg.strip .side { font-size: 9.5px; fill: var(--soft); }
svg.strip .scale { font-size: 9px; fill: #64748b; }
svg.strip .unknown { font-size: 9.5px; fill: #64748b; font-style: italic; }
svg.strip .tick { stroke-width: 1.6; stroke-opacity: 0.8; }
svg.swatch { vertical-align: -1px; margin-right: 0.35rem; }
.lane-0 { fill: #2563eb; } .lane-1 { fill: #0d9488; } .lane-2 { fill: #7c3aed; } .lane-3 { fill: #b45309; }
.k0 { fill: #dc2626; stroke: #dc2626; } .k1 { fill: #d97706; stroke: #d97706; }
.k2 { fill: #7c3aed; stroke: #7c3aed; } .k3 { fill: #0891b2; stroke: #0891b2; }
.k4 { fill: #be185d; stroke: #be185d; } .k5 { fill: #4d7c0f; stroke: #4d7c0f; }
@media print { body { background: #fff; } section, header { break-inside: avoid-page; } }
"""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"style-src 'sha256-{base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()}'; "
    "script-src 'none'; img-src 'none'; form-action 'none'; base-uri 'none'"
)


def render(out_dir: Path) -> Path:
    """Write ``out_dir/report.html`` from ``out_dir/summary.json``; its path.

    Raises :class:`~spark_jobs.report.SummaryNotFoundError` (a FileNotFoundError) when there is
    no summary.json, :class:`~spark_jobs.report.SummaryFormatError` (a ValueError) naming the
    file and the field when it is malformed. Writes a temporary file and renames it, so a
    reader never sees half a report. Needs no Spark: a report can be re-rendered anywhere.
    """
    out_dir = Path(out_dir)
    html = page(load_summary(out_dir / "summary.json"))
    target, partial = out_dir / "report.html", out_dir / ".report.html.partial"
    partial.write_text(html, encoding="utf-8")
    os.replace(partial, target)
    return target


def render_summary(summary: Mapping[str, object]) -> str:
    """The page for a decoded summary (as summary.json holds it); raises SummaryFormatError."""
    return page(parse_summary(summary))


def page(summary: Summary) -> str:
    """The whole HTML document."""
    kinds = _kinds(summary)
    word = "CLEAN"
    if summary.verdict == "found":
        word = f"FOUND {_plural(summary.discrepancies, 'discrepancy', 'discrepancies')}"
        word += f", {_plural(summary.invalid_rows, 'invalid row')}" if summary.invalid_rows else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CONTENT_SECURITY_POLICY)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(f'strait audit {summary.job}: {word}')}</title><style>{STYLE}</style></head>"
        f'<body data-verdict="{esc(summary.verdict)}"><main>'
        + _header(summary)
        + _totals(summary)
        + _by_kind(summary, kinds)
        + _partitions(summary, kinds)
        + _invalid(summary)
        + _samples(summary, kinds)
        + _notes(summary)
        + "</main></body></html>\n"
    )


def _kinds(summary: Summary) -> dict[str, int]:
    """Every kind named anywhere -> its colour index, the most frequent first."""
    seen = dict(sorted(summary.by_kind.items(), key=lambda item: -item[1]))
    for partition in summary.partitions:
        seen.update({kind: 0 for kind in partition.by_kind if kind not in seen})
    seen.update({sample.kind: 0 for sample in summary.samples or () if sample.kind not in seen})
    return {kind: n for n, kind in enumerate(seen)}


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _number(value: float) -> str:
    whole = isinstance(value, int) or (value.is_integer() and abs(value) < 1e15)
    return f"{value:,.0f}" if whole else f"{value:,.4g}"


def _when(started: str) -> str:
    try:
        moment = datetime.fromisoformat(started)
    except ValueError:
        return started
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _took(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _value(value: object) -> str:
    """A JSON value as display text: strings as they are, null as "null", anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=repr)


def _text_cell(value: object, css: str = "text") -> str:
    if value is None:
        return f'<td class="{css}"><span class="null">null</span></td>'
    text = _value(value)
    more = len(text) - CELL_CHARS
    if more > 0:
        return (
            f'<td class="{css}"><code>{esc(text[:CELL_CHARS])}</code>'
            f'<span class="cut" data-cut="{more}"> … {_plural(more, "more character")}</span></td>'
        )
    return f'<td class="{css}"><code>{esc(text)}</code></td>'


def _swatch(colour: int) -> str:
    return (
        '<svg class="swatch" viewBox="0 0 10 10" width="10" height="10" aria-hidden="true"'
        f' xmlns="http://www.w3.org/2000/svg"><rect class="k{colour % KIND_COLOURS}" width="10" height="10"'
        ' rx="2"/></svg>'
    )


def _header(summary: Summary) -> str:
    discrepancies = _plural(summary.discrepancies, "discrepancy", "discrepancies")
    invalid = _plural(summary.invalid_rows, "invalid row")
    word = "✓ CLEAN" if summary.verdict == "clean" else "✗ FOUND"
    tally = "".join(f"<div>{esc(line)}</div>" for line in (discrepancies, invalid))
    facts: list[tuple[str, str]] = []
    if summary.started is not None:
        facts.append(("started", _when(summary.started)))
    if summary.seconds is not None:
        facts.append(("took", _took(summary.seconds)))
    facts += [(f"Spark {key}", value) for key, value in summary.spark.items()]
    inputs = "".join(
        f"<dt>{esc(key)}</dt><dd><code>{esc(_value(value))}</code></dd>" for key, value in summary.inputs.items()
    )
    command = summary.command or "(the job recorded no command)"
    return (
        f'<header><div id="verdict" class="{esc(summary.verdict)}"><div class="word">{esc(word)}</div>'
        f'<div class="tally">{tally}</div></div>'
        f'<div class="about"><h1>strait audit · {esc(summary.job)}</h1>'
        f'<p class="lead" id="finding">{_finding(summary)}</p>'
        f'<code id="command">{esc(command)}</code>'
        '<div class="facts">'
        + "".join(f"<span>{esc(k)} <b>{esc(v)}</b></span>" for k, v in facts)
        + "</div>"
        + (f'<dl class="inputs">{inputs}</dl>' if inputs else '<p class="note">The job recorded no inputs.</p>')
        + "</div></header>"
    )


def _finding(summary: Summary) -> str:
    """The verdict in one plain sentence."""
    partitions = len(summary.partitions)
    hit = sum(partition.discrepancies > 0 for partition in summary.partitions)
    if summary.verdict == "clean":
        across = f" across {_plural(partitions, 'partition')}" if partitions else ""
        return f"<b>Nothing found:</b> no discrepancies and no invalid rows{across}."
    found = []
    if summary.discrepancies:
        where = f" in {hit:,} of {_plural(partitions, 'partition')}" if hit else ""
        found.append(f"{_plural(summary.discrepancies, 'discrepancy', 'discrepancies')}{where}")
    if summary.invalid_rows:
        found.append(f"{_plural(summary.invalid_rows, 'invalid row')} (batches that could not be read)")
    return f"<b>Found</b> {' and '.join(found)}."


def _totals(summary: Summary) -> str:
    found = sum(partition.discrepancies > 0 for partition in summary.partitions)
    stats: list[tuple[str, float, bool]] = [
        ("discrepancies", summary.discrepancies, summary.discrepancies > 0),
        ("invalid rows", summary.invalid_rows, summary.invalid_rows > 0),
        ("partitions", len(summary.partitions), False),
        ("partitions with discrepancies", found, found > 0),
    ]
    stats += [(key.replace("_", " "), value, False) for key, value in summary.totals.items()]
    cards = "".join(
        f'<div class="stat{" bad" if bad else ""}"><div class="label">{esc(label)}</div>'
        f'<div class="value">{esc(_number(value))}</div></div>'
        for label, value, bad in stats
    )
    return f'<section id="totals"><h2>Totals</h2><div class="stats">{cards}</div></section>'


def _by_kind(summary: Summary, kinds: Mapping[str, int]) -> str:
    head = '<section id="kinds"><h2>Discrepancies by kind</h2>'
    if summary.discrepancies == 0:
        return head + '<p class="none">No discrepancies were found.</p></section>'
    items = [(kind, count, kinds[kind]) for kind, count in summary.by_kind.items()]
    items.sort(key=lambda item: (-item[1], item[2]))
    body = bars("by-kind", items, summary.discrepancies) if items else ""
    listed = sum(summary.by_kind.values())
    if listed != summary.discrepancies:
        body += (
            f'<p class="note" data-cut="by-kind">The kinds add up to {listed:,} of the'
            f" {summary.discrepancies:,} discrepancies the job counted.</p>"
        )
    return head + body + "</section>"


def _partitions(summary: Summary, kinds: Mapping[str, int]) -> str:
    head = '<section id="partitions"><h2>Partitions</h2>'
    if not summary.partitions:
        return head + '<p class="note">The summary lists no partitions.</p></section>'
    ordered = sorted(summary.partitions, key=lambda p: (-p.discrepancies, p.topic, p.partition))
    counts = _union(p.counts for p in ordered)
    shown_kinds = sorted(_union(p.by_kind for p in ordered), key=lambda kind: kinds[kind])
    sides = _union(p.ranges for p in ordered)
    ticks = _ticks(summary.samples or (), kinds)
    columns = (
        '<th>topic</th><th class="num">partition</th>'
        + "".join(f'<th class="num"><span>{esc(key).replace("_", "_<wbr>")}</span></th>' for key in counts)
        + "".join(f'<th class="num"><span>{_swatch(kinds[kind])}{esc(kind)}</span></th>' for kind in shown_kinds)
        + "".join(f"<th><span>{esc(side)} range</span></th>" for side in sides)
    )

    def rows(partitions: Sequence[Partition], with_strip: bool) -> str:
        out = []
        for p in partitions:
            cells = [f'<td class="topic"><span>{esc(p.topic)}</span></td><td class="num">{p.partition}</td>']
            cells += [
                f'<td class="num">{esc(_number(p.counts[key]))}</td>' if key in p.counts else '<td class="num">—</td>'
                for key in counts
            ]
            for kind in shown_kinds:
                found = p.by_kind.get(kind, 0)
                cells.append(f'<td class="num {"hit" if found else "zero"}">{found:,}</td>')
            cells += [f'<td class="range">{_range(p.ranges.get(side, None), side in p.ranges)}</td>' for side in sides]
            if with_strip:
                mine = ticks.get((p.topic, p.partition), [])
                cells.append(f"<td>{strip(p.ranges, mine)}</td>" if p.ranges else '<td class="null">no ranges</td>')
            out.append(
                f'<tr class="partition{" found" if p.discrepancies else ""}" data-topic="{esc(p.topic)}"'
                f' data-partition="{p.partition}" data-discrepancies="{p.discrepancies}">{"".join(cells)}</tr>'
            )
        return "".join(out)

    found = sum(p.discrepancies > 0 for p in ordered)
    order = f"{found:,} with discrepancies (the most first)" if found else "none with discrepancies"
    intro = (
        f'<p class="note">{_plural(len(ordered), "partition")}, {order}. A strip draws each side\'s'
        " [log start, log end) on one scale, and the sample discrepancies as ticks.</p>"
    )
    top, rest = ordered[:STRIP_CAP], ordered[STRIP_CAP:]
    parts = [head, intro]
    if rest:
        parts.append(
            f'<p class="note" data-cut="strips">Strips are drawn for the {STRIP_CAP} partitions with the most'
            f" discrepancies; the other {len(rest):,} are listed below the table, folded.</p>"
        )
    parts.append(
        f'<div class="scroll"><table class="partitions"><thead><tr>{columns}<th>ranges and samples</th></tr></thead>'
        f"<tbody>{rows(top, with_strip=True)}</tbody></table></div>"
    )
    if rest:
        parts.append(
            f"<details><summary>The other {_plural(len(rest), 'partition')}"
            f" ({sum(p.discrepancies > 0 for p in rest):,} with discrepancies)</summary>"
            f'<div class="scroll"><table class="partitions"><thead><tr>{columns}</tr></thead>'
            f"<tbody>{rows(rest, with_strip=False)}</tbody></table></div></details>"
        )
    return "".join(parts) + "</section>"


def _union(mappings: Iterable[Mapping[str, object]]) -> list[str]:
    keys: dict[str, None] = {}
    for mapping in mappings:
        keys.update(dict.fromkeys(mapping))
    return list(keys)


def _range(bounds: tuple[int, int] | None, listed: bool) -> str:
    if bounds is None:
        return '<span class="null">unknown</span>' if listed else "—"
    return esc(f"[{bounds[0]:,}, {bounds[1]:,})")


def _ticks(samples: Iterable[Sample], kinds: Mapping[str, int]) -> dict[tuple[str, int], list[tuple[int, str, int]]]:
    out: dict[tuple[str, int], list[tuple[int, str, int]]] = {}
    for sample in samples:
        if sample.offset is not None:
            tick = (sample.offset, sample.kind, kinds[sample.kind])
            out.setdefault((sample.topic, sample.partition), []).append(tick)
    return out


def _invalid(summary: Summary) -> str:
    head = '<section id="invalid"><h2>Invalid rows by error</h2>'
    if summary.invalid_rows == 0:
        return head + '<p class="none">No invalid rows: every batch the job read could be decoded.</p></section>'
    if not summary.by_error:
        rows = _plural(summary.invalid_rows, "invalid row")
        return head + f'<p class="note">{rows}; the job named no errors.</p></section>'
    rows = "".join(
        f'<tr><td class="text"><code>{esc(error)}</code></td><td class="num hit">{count:,}</td></tr>'
        for error, count in sorted(summary.by_error.items(), key=lambda item: -item[1])
    )
    return (
        head + '<div class="scroll"><table class="errors"><thead><tr><th>error</th><th class="num">rows</th></tr>'
        f"</thead><tbody>{rows}</tbody></table></div></section>"
    )


def _samples(summary: Summary, kinds: Mapping[str, int]) -> str:
    head = '<section id="samples"><h2>Sample discrepancies</h2>'
    if summary.samples is None:
        return head + '<p class="note">This job records no samples.</p></section>'
    if not summary.samples:
        if summary.discrepancies == 0:
            return head + '<p class="none">None: there are no discrepancies.</p></section>'
        return head + '<p class="note">The summary holds no samples; discrepancies/ has every row.</p></section>'
    shown = summary.samples[:SAMPLE_CAP]
    extra = _union(sample.extra for sample in shown)
    columns = (
        '<th class="num">#</th><th>kind</th><th>topic</th><th class="num">partition</th><th class="num">offset</th>'
        "<th>detail</th>" + "".join(f"<th><span>{esc(key)}</span></th>" for key in extra)
    )
    rows = []
    for n, sample in enumerate(shown, 1):
        offset = "—" if sample.offset is None else f"{sample.offset:,}"
        rows.append(
            f'<tr class="sample" data-kind="{esc(sample.kind)}"><td class="num">{n}</td>'
            f'<td class="kind"><span>{_swatch(kinds[sample.kind])}{esc(sample.kind)}</span></td>'
            f'<td class="topic"><span>{esc(sample.topic)}</span></td>'
            f'<td class="num">{sample.partition}</td><td class="num">{offset}</td>'
            + _text_cell(sample.detail)
            + "".join(_text_cell(sample.extra.get(key)) for key in extra)
            + "</tr>"
        )
    note = ""
    if len(summary.samples) > len(shown):
        note = (
            f'<p class="note" data-cut="samples">Showing the first {len(shown)} of'
            f" {len(summary.samples):,} samples.</p>"
        )
    elif summary.discrepancies > len(shown):
        note = (
            f'<p class="note" data-cut="samples">{_plural(len(shown), "sample")} of {summary.discrepancies:,}'
            " discrepancies; discrepancies/ (Parquet) has every row.</p>"
        )
    return (
        head + note + '<div class="scroll"><table class="samples">'
        f"<thead><tr>{columns}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _notes(summary: Summary) -> str:
    if not summary.notes:
        return ""
    items = "".join(f"<li>{esc(note)}</li>" for note in summary.notes)
    return f'<section id="notes"><h2>Notes</h2><ul class="notes">{items}</ul></section>'
