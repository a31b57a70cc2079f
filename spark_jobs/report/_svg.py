"""The report's two inline SVG pictures: discrepancies by kind (bars) and one partition's log ranges (a strip).

Both are plain ``<svg>`` elements with a ``viewBox`` and classes only: no script and no
``style`` attribute, so the page's Content-Security-Policy can refuse every style but its one
block. Colours come from that block: ``k0`` .. ``k5`` are the kinds (the same kind has the
same colour in the bars and in every strip), ``lane-0`` .. ``lane-3`` the sides of a strip.
Every text that came from a summary is escaped here (:func:`esc`); callers pass plain strings.
Hovering a bar, a lane or a tick shows its full text (an SVG ``<title>``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence

__all__ = ["KIND_COLOURS", "bars", "esc", "strip"]

KIND_COLOURS = 6  # k0 .. k5 in the page's style block; a seventh kind takes k0 again
LANE_COLOURS = 4
BAR_WIDTH = 760
BAR_ROW = 26
LABEL_CHARS = 30  # a longer label is cut (its bar's title has it whole)
STRIP_WIDTH = 320
STRIP_LABEL = 56
STRIP_LANE = 11
STRIP_GAP = 4

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


def esc(text: object) -> str:
    """``text`` as HTML text or attribute value: markup escaped, control characters shown as ``\\xNN``."""
    return html.escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text)), quote=True)


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def bars(chart_id: str, items: Sequence[tuple[str, int, int]], total: int) -> str:
    """Horizontal bars, one per (label, count, colour index), longest first as given; ``total`` for the shares."""
    label_width = 12 + 7 * max((len(_cut(label, LABEL_CHARS)) for label, _, _ in items), default=4)
    left, right = min(230, max(70, label_width)), BAR_WIDTH - 130
    height = 8 + BAR_ROW * len(items)
    most = max((count for _, count, _ in items), default=0) or 1
    out = [
        f'<svg class="bars" id="{esc(chart_id)}" viewBox="0 0 {BAR_WIDTH} {height}" width="{BAR_WIDTH}"'
        f' height="{height}" role="img" aria-label="discrepancies by kind" xmlns="http://www.w3.org/2000/svg">'
    ]
    for row, (label, count, colour) in enumerate(items):
        top = 4 + row * BAR_ROW
        width = max(2.0, (right - left) * count / most) if count else 0.0
        share = f"{100 * count / total:.1f}%" if total else "—"
        tip = f"{label}: {count:,} ({share} of {total:,})"
        out.append(
            f'<g class="bar" data-kind="{esc(label)}" data-count="{count}"><title>{esc(tip)}</title>'
            f'<text class="label" x="{left - 8}" y="{top + 17}" text-anchor="end">'
            f"{esc(_cut(label, LABEL_CHARS))}</text>"
            f'<rect class="k{colour % KIND_COLOURS}" x="{left}" y="{top + 4}" width="{width:.1f}" height="17"'
            ' rx="2"/>'
            f'<text class="count" x="{left + width + 8:.1f}" y="{top + 17}">{count:,}'
            f' <tspan class="share">{esc(share)}</tspan></text></g>'
        )
    out.append(f'<line class="base" x1="{left}" y1="2" x2="{left}" y2="{height - 2}"/></svg>')
    return "".join(out)


def strip(ranges: Mapping[str, tuple[int, int] | None], ticks: Sequence[tuple[int, str, int]]) -> str:
    """One partition: a lane per side showing its [start, end) and a tick per (offset, kind, colour index).

    All lanes share one offset scale (from the lowest start or tick to the highest end or tick),
    labelled with its first and last offset, so a side that ends early or starts late shows as a shorter lane.
    A side whose range is None says "unknown"; an empty log (start == end) is a thin bar at its end.
    """
    known = [bounds for bounds in ranges.values() if bounds is not None]
    low = min([start for start, _ in known] + [offset for offset, _, _ in ticks], default=0)
    high = max([end for _, end in known] + [offset + 1 for offset, _, _ in ticks], default=1)
    high = max(high, low + 1)
    left, right = STRIP_LABEL, STRIP_WIDTH - 6
    lanes_bottom = 3 + (STRIP_LANE + STRIP_GAP) * max(1, len(ranges)) - STRIP_GAP
    height = lanes_bottom + 14

    def x(offset: float) -> float:
        return left + (right - left) * (offset - low) / (high - low)

    out = [
        f'<svg class="strip" viewBox="0 0 {STRIP_WIDTH} {height}" width="{STRIP_WIDTH}" height="{height}"'
        ' role="img" aria-label="log ranges and sample discrepancies" xmlns="http://www.w3.org/2000/svg">',
        f'<rect class="track" x="{left}" y="1" width="{right - left}" height="{lanes_bottom + 1}"/>',
    ]
    for lane, (side, bounds) in enumerate(ranges.items()):
        top = 3 + lane * (STRIP_LANE + STRIP_GAP)
        out.append(f'<text class="side" x="{left - 5}" y="{top + 9}" text-anchor="end">{esc(_cut(side, 8))}</text>')
        if bounds is None:
            out.append(
                f'<text class="unknown" x="{left + 4}" y="{top + 9}"><title>{esc(side)}: log range not known</title>'
                "unknown</text>"
            )
            continue
        start, end = bounds
        tip = f"{side}: [{start:,}, {end:,}), {end - start:,} offsets"
        width = max(1.5, x(end) - x(start))
        out.append(
            f'<rect class="lane-{lane % LANE_COLOURS}" x="{min(x(start), right - width):.1f}" y="{top}"'
            f' width="{width:.1f}" height="{STRIP_LANE}"><title>{esc(tip)}</title></rect>'
        )
    for offset, kind, colour in ticks:
        at = x(offset + 0.5)
        out.append(
            f'<line class="tick k{colour % KIND_COLOURS}" x1="{at:.1f}" y1="0" x2="{at:.1f}" y2="{lanes_bottom + 3}">'
            f"<title>{esc(kind)} at offset {offset:,}</title></line>"
        )
    out.append(f'<text class="scale" x="{left}" y="{height - 2}">{low:,}</text>')
    out.append(f'<text class="scale" x="{right}" y="{height - 2}" text-anchor="end">{high:,}</text></svg>')
    return "".join(out)
