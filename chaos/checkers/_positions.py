"""duplicate and inconsistent-offsets: a log is a function from offsets to values, and a value has one offset.

Both look at one site at a time (offsets of two sites are only comparable through the mirror:
mirror-divergence does that), over every record any entry of that site holds. Reading the same
record twice (same position, same value) is one record.
"""

from __future__ import annotations

from chaos.ledger import Position

from ._anomaly import Finding, Findings, offsets_text, plural, runs, sample, site_text
from ._view import Seen, View

__all__ = ["duplicate", "inconsistent_offsets"]


def _where(seen: list[Seen]) -> str:
    kinds = {"read": "reads", "poll": "polls", "send": "acknowledgements"}
    return " and ".join(sorted({kinds.get(one.f, one.f) for one in seen}))


def duplicate(view: View) -> Findings:
    """``duplicate``: one value at two or more positions in what one site returned: its reads and its polls.

    Values with the same number of positions, whose first two positions are consecutive offsets
    at the same distance (a batch written twice), are one anomaly. Examines: the distinct values
    read or polled, per site.
    """
    by_site: dict[str | None, dict[str, dict[Position, Seen]]] = {}
    for seen in (*view.reads, *view.polls):
        by_site.setdefault(seen.site, {}).setdefault(seen.value, {}).setdefault(seen.position, seen)
    checked = 0
    duplicates: list[tuple[str | None, list[Seen]]] = []
    for site, values in by_site.items():
        checked += len(values)
        for positions in values.values():
            if len(positions) > 1:
                duplicates.append((site, sorted(positions.values(), key=lambda one: one.position)))
    found = []
    for run in runs(
        duplicates,
        key=lambda dup: (dup[0], dup[1][0].tp, dup[1][1].tp, dup[1][1].offset - dup[1][0].offset, len(dup[1])),
        rank=lambda dup: dup[1][0].offset,
    ):
        site, first = run[0][0], run[0][1]
        last = run[-1][1]
        every = [one for _, positions in run for one in positions]
        found.append(
            Finding(
                "duplicate",
                f"{plural(len(run), 'value')} at {first[0].topic}/{first[0].partition} "
                f"{offsets_text(first[0].offset, last[0].offset)} on {site_text(site)} "
                f"{'is' if len(run) == 1 else 'are'} also at {first[1].topic}/{first[1].partition} "
                f"{offsets_text(first[1].offset, last[1].offset)}"
                + (f" (and {len(first) - 2} more positions each)" if len(first) > 2 else "")
                + f", in its {_where(every)}",
                [one.record() for _, positions in sample(run) for one in positions],
                view.spans_of(every),
                count=len(run),
            )
        )
    return Findings(checked, found)


def inconsistent_offsets(view: View) -> Findings:
    """``inconsistent-offsets``: two different values at one position of one site, across acks, polls and reads.

    The old primary's records beyond a failover's cut (the ones it exported) are replaced when
    it is reversed; at such a position the exported value is not compared with the later one.
    Consecutive offsets of one partition are one anomaly. Examines: the distinct positions seen,
    per site.
    """
    by_site: dict[str | None, dict[Position, dict[str, Seen]]] = {}
    for seen in (*view.acks, *view.reads, *view.polls):
        if view.was_exported(seen):
            continue
        by_site.setdefault(seen.site, {}).setdefault(seen.position, {}).setdefault(seen.value, seen)
    checked = 0
    conflicts: list[tuple[str | None, list[Seen]]] = []
    for site, positions in by_site.items():
        checked += len(positions)
        for values in positions.values():
            if len(values) > 1:
                conflicts.append((site, sorted(values.values(), key=lambda one: one.index)))
    found = []
    for run in runs(conflicts, key=lambda c: (c[0], c[1][0].tp), rank=lambda c: c[1][0].offset):
        site, first = run[0][0], run[0][1]
        example = ", ".join(f"{one.value!r} ({one.f} by {one.process}, #{one.index})" for one in first)
        every = [one for _, values in run for one in values]
        found.append(
            Finding(
                "inconsistent-offsets",
                f"{plural(len(run), 'position')} of {first[0].topic}/{first[0].partition} on {site_text(site)} "
                f"({offsets_text(first[0].offset, run[-1][1][0].offset)}) "
                f"{'holds' if len(run) == 1 else 'hold'} two or more different values: "
                f"at offset {first[0].offset}, {example}",
                [one.record() for _, values in sample(run) for one in values],
                view.spans_of(every),
                count=len(run),
            )
        )
    return Findings(checked, found)
