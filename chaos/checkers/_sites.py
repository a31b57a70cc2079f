"""mirror-divergence and rpo-accuracy: what two sites hold, and what a failover said it lost.

The mirror keeps offsets: a mirror topic's record at offset *n* is the source's record at *n*.
So a mirror's final read is compared position by position with the primary's, and after an
unplanned promote the records the new primary lacks are exactly the old primary's records
beyond the cut, which the failover exports.
"""

from __future__ import annotations

from collections import defaultdict

from ._anomaly import Finding, Findings, offsets_text, plural, runs, sample, site_text
from ._view import Seen, SiteRead, Span, TopicPartition, View

__all__ = ["mirror_divergence", "rpo_accuracy"]


def _by_partition(read: SiteRead) -> dict[TopicPartition, dict[int, list[Seen]]]:
    out: dict[TopicPartition, dict[int, list[Seen]]] = defaultdict(dict)
    for position, seen in read.by_position.items():
        out[(position.topic, position.partition)][position.offset] = seen
    return out


def _values(seen: list[Seen]) -> str:
    return " and ".join(repr(one.value) for one in seen)


def mirror_divergence(view: View) -> Findings:
    """``divergent`` and ``missing``: a mirror's final read against the primary's, position by position.

    ``divergent``: at an offset the mirror holds, the primary holds another value (or nothing,
    at or above its log start). ``missing``: an offset at or above the mirror's log start and
    below its end (as its final read reported them) where the primary holds a record and the
    mirror none. Consecutive offsets of one partition are one anomaly. Examines: the positions
    compared.
    """
    primary = view.primary_read
    mirrors = [read for read in view.final.values() if read.role == "mirror"]
    if primary is None or not mirrors:
        return Findings(0, [])
    theirs_by_tp = _by_partition(primary)
    checked = 0
    # (kind, mirror, partition, offset, the mirror's records there, the primary's records there, the mirror's end)
    problems: list[tuple[str, SiteRead, TopicPartition, int, list[Seen], list[Seen], int]] = []
    for mirror in mirrors:
        mine_by_tp = _by_partition(mirror)
        for tp in sorted(set(mirror.ends) | set(mine_by_tp)):
            mine, theirs = mine_by_tp.get(tp, {}), theirs_by_tp.get(tp, {})
            start, end = mirror.ends.get(tp, (0, max(mine, default=-1) + 1))
            for offset, held in mine.items():
                checked += 1
                other = theirs.get(offset, [])
                if (other or offset >= primary.start(tp)) and {s.value for s in held} != {s.value for s in other}:
                    problems.append(("divergent", mirror, tp, offset, held, other, end))
            for offset, other in theirs.items():
                if start <= offset < end and offset not in mine:
                    checked += 1
                    problems.append(("missing", mirror, tp, offset, [], other, end))
    found = []
    for run in runs(problems, key=lambda p: (p[0], p[1].site, p[2]), rank=lambda p: p[3]):
        kind, mirror, tp, first, held, other, end = run[0]
        where = f"{tp[0]}/{tp[1]} {offsets_text(first, run[-1][3])}"
        every = [one for problem in run for one in (*problem[4], *problem[5])]
        if kind == "divergent":
            text = (
                f"{plural(len(run), 'position')} of {where} on {site_text(mirror.site)} (a mirror) "
                f"{'holds' if len(run) == 1 else 'hold'} other values than on {site_text(primary.site)} "
                f"(the primary): at offset {first}, {_values(held)} on the mirror, "
                f"{_values(other) if other else 'nothing'} on the primary"
            )
        else:
            text = (
                f"{plural(len(run), 'record')} {site_text(primary.site)} (the primary) holds at {where} "
                f"{'is' if len(run) == 1 else 'are'} missing from {site_text(mirror.site)} (a mirror), "
                f"below its end {end}"
            )
        found.append(
            Finding(
                kind,
                text,
                [one.record() for problem in sample(run) for one in (*problem[4], *problem[5])],
                view.spans_of(every),
                count=len(run),
            )
        )
    return Findings(checked, found)


def rpo_accuracy(view: View) -> Findings:
    """After a failover, the records lost are exactly the divergence the failover exported.

    For each unplanned promote (``planned`` false), with the exports that follow it, against the
    primary's final read (the new primary):

    - ``unexported-loss``: an acknowledged value missing from the new primary (at or above its
      log start) that no export holds: the failover under-reported what it lost;
    - ``exported-present``: an exported value the new primary holds: the export over-reports.

    For a planned promote followed by an export, ``planned-loss``: an acknowledged value in that
    export (a planned switchover loses nothing). Consecutive offsets are one anomaly. Skipped
    without such a promote or without the primary's final read. Examines: the acknowledged
    sends and the exported records, per promote.
    """
    primary = view.primary_read
    promotes = [p for p in view.promotes if not p.planned or p.exports]
    if primary is None or not promotes:
        return Findings(0, [])
    missing = [ack for ack in view.acks if ack.value not in primary.by_value and ack.offset >= primary.start(ack.tp)]
    checked = 0
    found: list[Finding] = []
    for promote in promotes:
        indices = {int(entry["index"]) for entry in promote.exports}
        exported = [seen for seen in view.exported if seen.index in indices]
        exported_values = {seen.value for seen in exported}
        elsewhere = view.exported_values - exported_values
        around = [span for span in map(view.entry_span, (promote.entry, *promote.exports)) if span is not None]
        what = f"the {'planned' if promote.planned else 'unplanned'} promote of {promote.link} (#{promote.index})"
        checked += len(exported) + (0 if promote.planned else len(view.acks))
        if promote.planned:
            lost = [view.ack_by_value[seen.value] for seen in exported if seen.value in view.ack_by_value]
            found += _ack_runs(
                view,
                "planned-loss",
                lost,
                f"{{}} exported as divergence after {what}: a planned switchover must lose nothing",
                around,
            )
        else:
            unexported = [ack for ack in missing if ack.value not in exported_values and ack.value not in elsewhere]
            note = "" if promote.exports else " (the failover recorded no export)"
            found += _ack_runs(
                view,
                "unexported-loss",
                unexported,
                f"{{}} missing from {site_text(primary.site)} (the new primary), yet in no divergence exported "
                f"after {what}{note}: the failover under-reported what it lost",
                around,
            )
        present = [seen for seen in exported if seen.value in primary.by_value]
        for run in runs(present, key=lambda seen: seen.tp, rank=lambda seen: seen.offset):
            held = [one for seen in run for one in primary.by_value[seen.value]]
            found.append(
                Finding(
                    "exported-present",
                    f"{plural(len(run), 'record')} of {run[0].topic}/{run[0].partition} "
                    f"({offsets_text(run[0].offset, run[-1].offset)}) exported as divergence after {what} "
                    f"{'is' if len(run) == 1 else 'are'} on {site_text(primary.site)} (the new primary) "
                    "nonetheless: the export over-reports",
                    [one.record() for seen in sample(run) for one in (seen, *primary.by_value[seen.value])],
                    [*view.spans_of(run + held), *around],
                    count=len(run),
                )
            )
    return Findings(checked, found)


def _ack_runs(view: View, name: str, acks: list[Seen], template: str, around: list[Span]) -> list[Finding]:
    """One finding per run of consecutive acknowledged offsets; ``template`` gets "N acknowledged writes to ..."."""
    found = []
    for run in runs(acks, key=lambda ack: ack.tp, rank=view.ack_rank):
        first, last = run[0], run[-1]
        subject = (
            f"{plural(len(run), 'acknowledged write')} to {first.topic}/{first.partition} at "
            f"{offsets_text(first.offset, last.offset)} {'is' if len(run) == 1 else 'are'}"
        )
        found.append(
            Finding(
                name,
                template.format(subject),
                [ack.record() for ack in sample(run)],
                [*view.spans_of(run), *around],
                count=len(run),
            )
        )
    return found
