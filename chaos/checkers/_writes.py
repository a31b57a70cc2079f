"""lost-write and moved: where did each acknowledged write end up in the primary's final read?

Both compare the acknowledged sends with the final read of the primary (the site serving
producers at the end). An acknowledgement below the partition's log start in that read (records
deleted by retention) is not examined.
"""

from __future__ import annotations

from ._anomaly import Finding, Findings, offsets_text, plural, runs, sample, site_text
from ._view import Seen, View

__all__ = ["lost_write", "moved"]


def _processes(seen: list[Seen]) -> str:
    return ", ".join(sorted({one.process for one in seen}))


def lost_write(view: View) -> Findings:
    """``lost``: an acknowledged value that no final read of the primary holds, at any position.

    Values the failover exported as divergence are not lost here (rpo-accuracy judges them).
    Consecutive lost acknowledgements of one partition (no acknowledged value read back between
    them) are one anomaly. Examines: the acknowledged sends at or above the log start.
    """
    primary = view.primary_read
    if primary is None:
        return Findings(0, [])
    checked = 0
    lost: list[Seen] = []
    for ack in view.acks:
        if ack.offset < primary.start(ack.tp):
            continue
        checked += 1
        if ack.value not in primary.by_value and ack.value not in view.exported_values:
            lost.append(ack)
    exported = ", nor in the divergence the failover exported" if view.exported else ""
    found = []
    for run in runs(lost, key=lambda ack: ack.tp, rank=view.ack_rank):
        first, last = run[0], run[-1]
        found.append(
            Finding(
                "lost",
                f"{plural(len(run), 'acknowledged write')} to {first.topic}/{first.partition} at "
                f"{offsets_text(first.offset, last.offset)} (by {_processes(run)}) "
                f"{'is' if len(run) == 1 else 'are'} in no final read of {site_text(primary.site)}, "
                f"the primary{exported}",
                [ack.record() for ack in sample(run)],
                view.spans_of(run),
                count=len(run),
            )
        )
    return Findings(checked, found)


def moved(view: View) -> Findings:
    """``moved``: an acknowledged value the primary's final read holds, but never at the position acknowledged.

    Consecutive acknowledgements moved by the same distance to the same partition are one
    anomaly. Examines: the acknowledged values the primary's final read holds.
    """
    primary = view.primary_read
    if primary is None:
        return Findings(0, [])
    checked = 0
    moves: list[tuple[Seen, list[Seen]]] = []
    for ack in view.acks:
        where = primary.by_value.get(ack.value)
        if not where:
            continue
        checked += 1
        if all(read.position != ack.position for read in where):
            moves.append((ack, where))
    found = []
    for run in runs(
        moves,
        key=lambda move: (move[0].tp, move[1][0].tp, move[1][0].offset - move[0].offset, len(move[1])),
        rank=lambda move: view.ack_rank(move[0]),
    ):
        (first, to_first), (last, to_last) = run[0], run[-1]
        target = to_first[0]
        found.append(
            Finding(
                "moved",
                f"{plural(len(run), 'acknowledged write')} to {first.topic}/{first.partition} at "
                f"{offsets_text(first.offset, last.offset)} (by {_processes([ack for ack, _ in run])}) "
                f"{'is' if len(run) == 1 else 'are'} read back from {site_text(primary.site)}, the primary, only "
                f"at {target.topic}/{target.partition} {offsets_text(target.offset, to_last[0].offset)}"
                + (f" (and {len(to_first) - 1} more positions each)" if len(to_first) > 1 else ""),
                [record for ack, reads in sample(run) for record in (ack.record(), *(r.record() for r in reads))],
                view.spans_of([ack for ack, _ in run]),
                count=len(run),
            )
        )
    return Findings(checked, found)
