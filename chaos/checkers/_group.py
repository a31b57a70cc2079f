"""skipped-read, commit-regression and unseen: what a consumer group was delivered, and what it committed.

A group is every consumer whose polls carry its name; its consumers come and go and partitions
move between them at each ``assign``. These checkers judge the group as a whole, the way an
application on top of it would see it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Any

from chaos.history import Op

from ._anomaly import Finding, Findings, offsets_text, plural, runs, sample, site_text
from ._order import polled_in_segments
from ._view import CheckerError, Seen, TopicPartition, View, parse_ends

__all__ = ["commit_regression", "skipped_read", "unseen"]


class _Logs:
    """The records each site's log held, for judging what a consumer of that site skipped.

    A site's own final read when there is one; for the old primary of a promote that was not
    read at the end, the new primary's final read with the records the failover exported put
    back at their offsets (below the cut both logs are the same; beyond it, the export is what
    the old primary held).
    """

    def __init__(self, view: View) -> None:
        self._view = view
        self._logs: dict[str | None, dict[TopicPartition, dict[int, Seen]] | None] = {}
        self._offsets: dict[tuple[str | None, TopicPartition], list[int]] = {}

    def log(self, site: str | None) -> dict[TopicPartition, dict[int, Seen]] | None:
        if site not in self._logs:
            view = self._view
            read = view.final.get(site)
            log: dict[TopicPartition, dict[int, Seen]] | None = None
            if read is not None:
                log = read.offsets()
            elif view.primary_read is not None and any(p.source == site for p in view.promotes):
                log = view.primary_read.offsets()
                for seen in view.exported:
                    if seen.site == site:
                        log[seen.tp][seen.offset] = seen
            self._logs[site] = log
        return self._logs[site]

    def offsets(self, site: str | None, tp: TopicPartition) -> list[int]:
        """The offsets holding a record in ``site``'s log of ``tp``, ascending (empty without a log)."""
        if (site, tp) not in self._offsets:
            log = self.log(site)
            self._offsets[(site, tp)] = sorted(log.get(tp, {})) if log is not None else []
        return self._offsets[(site, tp)]


def skipped_read(view: View) -> Findings:
    """``poll-skip``: a group's polls jumped over offsets that the final read shows hold records.

    Two ways, each an anomaly per jump (with the count of records jumped over):

    1. one consumer, between two of its assignments (or a reset of its group), polled offset
       *a* then *b* > *a* + 1 of a partition of one site, and that site's log holds records
       between them;
    2. no consumer of the group polled a record the primary's final read holds, at an offset
       between the lowest and the highest the group polled of that partition (between two
       resets of the group), except the jumps of 1: a consumer started past where the last one
       stopped (a commit ahead of what was processed, a bad offset sync at a failover). The
       group's polls count here where they hold the primary's record at that position.

    Examines: the polled records of groups, where a log to judge them by is known (their site's
    final read, or the primary's).
    """
    logs = _Logs(view)
    primary = view.primary_read
    on_primary = primary.by_position if primary is not None else {}
    checked = 0
    last: dict[tuple[str, int, str | None, TopicPartition], Seen] = {}
    polled: dict[tuple[str, TopicPartition, int], dict[int, Seen]] = defaultdict(dict)
    jumped: dict[tuple[str, TopicPartition, int], set[int]] = defaultdict(set)
    found: list[Finding] = []
    for one in polled_in_segments(view):
        seen = one.seen
        log = logs.log(seen.site)
        if seen.group is None or (log is None and primary is None):
            continue
        checked += 1
        key = (seen.group, seen.tp, one.epoch)
        if any(read.value == seen.value for read in on_primary.get(seen.position, ())):
            polled[key].setdefault(seen.offset, seen)
        if log is None:
            continue
        segment = (seen.process, one.segment, seen.site, seen.tp)
        before = last.get(segment)
        last[segment] = seen
        if before is None or seen.offset <= before.offset + 1:
            continue
        offsets = logs.offsets(seen.site, seen.tp)
        gap = offsets[bisect_right(offsets, before.offset) : bisect_left(offsets, seen.offset)]
        if not gap:
            continue
        jumped[key].update(gap)
        skipped = [log[seen.tp][offset] for offset in gap]
        found.append(
            Finding(
                "poll-skip",
                f"{seen.process} (group {seen.group}) polled {seen.topic}/{seen.partition} on "
                f"{site_text(seen.site)} at offset {before.offset} (#{before.index}) then {seen.offset} "
                f"(#{seen.index}) in one assignment, jumping over {plural(len(gap), 'record')} its log holds "
                f"({offsets_text(gap[0], gap[-1])})",
                [before.record(), *(record.record() for record in sample(skipped)), seen.record()],
                view.spans_of([before, seen]),
                count=len(gap),
            )
        )
    if primary is not None:
        found += _group_gaps(view, logs, polled, jumped)
    return Findings(checked, found)


def _group_gaps(
    view: View,
    logs: _Logs,
    polled: dict[tuple[str, TopicPartition, int], dict[int, Seen]],
    jumped: dict[tuple[str, TopicPartition, int], set[int]],
) -> list[Finding]:
    site = view.primary
    found = []
    for (group, tp, epoch), by_offset in polled.items():
        offsets = logs.offsets(site, tp)
        seen_offsets = sorted(by_offset)
        between = offsets[bisect_right(offsets, seen_offsets[0]) : bisect_left(offsets, seen_offsets[-1])]
        missing = [o for o in between if o not in by_offset and o not in jumped[(group, tp, epoch)]]
        rank = {offset: number for number, offset in enumerate(between)}
        for run in runs(missing, key=lambda _: 0, rank=rank.__getitem__):
            below = by_offset[seen_offsets[bisect_left(seen_offsets, run[0]) - 1]]
            above = by_offset[seen_offsets[bisect_right(seen_offsets, run[-1])]]
            log = logs.log(site)
            assert log is not None  # the primary's final read exists
            found.append(
                Finding(
                    "poll-skip",
                    f"no consumer of group {group} polled {plural(len(run), 'record')} of {tp[0]}/{tp[1]} that "
                    f"{site_text(site)}'s final read holds ({offsets_text(run[0], run[-1])}), though the group "
                    f"polled offset {below.offset} ({below.process}, #{below.index}) and {above.offset} "
                    f"({above.process}, #{above.index})",
                    [below.record(), *(log[tp][o].record() for o in sample(run)), above.record()],
                    view.spans_of([below, above]),
                    count=len(run),
                )
            )
    return found


def _offsets(entry: Op) -> list[tuple[TopicPartition, int]]:
    raw = entry.get("offsets") or []
    if not isinstance(raw, list):
        raise CheckerError(f"history entry #{entry['index']}: 'offsets' must be a list, found {raw!r}")
    out = []
    for item in raw:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("topic"), str)
            and isinstance(item.get("partition"), int)
            and isinstance(item.get("offset"), int)
        ):
            raise CheckerError(
                f"history entry #{entry['index']}: an offset must be {{topic, partition, offset}}: {item!r}"
            )
        out.append(((item["topic"], item["partition"]), item["offset"]))
    return out


def _commit_record(entry: Op, tp: TopicPartition, offset: int, site: str | None) -> dict[str, Any]:
    record = {
        "topic": tp[0],
        "partition": tp[1],
        "offset": offset,
        "process": entry["process"],
        "index": entry["index"],
        "op": entry["f"],
        "group": entry.get("group"),
    }
    if site is not None:
        record["site"] = site
    return record


def commit_regression(view: View) -> Findings:
    """``commit-regression``: a group's committed offset of a partition went backwards with no reset between.

    Acknowledged (ok) commits and resets of a group, in history order, per partition and site
    (a failover's offset sync may land the new primary's committed offset lower; that replays,
    it does not lose). Each commit below the previous one is an anomaly. Examines: the
    (commit, partition) pairs acknowledged.
    """
    last: dict[tuple[Any, str | None, TopicPartition], tuple[Op, int]] = {}
    checked = 0
    found = []
    for entry in sorted((*view.commits, *view.resets), key=lambda entry: entry["index"]):
        group, site = entry.get("group"), view.site_of(entry)
        for tp, offset in _offsets(entry):
            key = (group, site, tp)
            before = last.get(key)
            last[key] = (entry, offset)
            if entry["f"] == "reset":
                continue
            checked += 1
            if before is None or offset >= before[1]:
                continue
            previous, previous_offset = before
            found.append(
                Finding(
                    "commit-regression",
                    f"group {group} committed offset {offset} of {tp[0]}/{tp[1]} on {site_text(site)} "
                    f"({entry['process']}, #{entry['index']}) after "
                    f"{'resetting it to' if previous['f'] == 'reset' else 'committing'} {previous_offset} "
                    f"({previous['process']}, #{previous['index']}), with no reset between",
                    [_commit_record(previous, tp, previous_offset, site), _commit_record(entry, tp, offset, site)],
                    [span for span in (view.entry_span(previous), view.entry_span(entry)) if span is not None],
                )
            )
    return Findings(checked, found)


def _drained_partitions(view: View, group: str, drains: list[Op]) -> dict[TopicPartition, int | None]:
    """The partitions the group's drains covered, with the end each was asked to reach (None: unknown)."""
    ends: dict[TopicPartition, int | None] = {}
    for drain in drains:
        for tp, (_, end) in parse_ends(drain).items():
            known = ends.get(tp)
            ends[tp] = end if known is None else max(known, end)
    if ends:
        return ends
    for entry in view.assigns:
        if entry.get("group") == group:
            for item in entry.get("partitions") or []:
                if not (
                    isinstance(item, dict)
                    and isinstance(item.get("topic"), str)
                    and isinstance(item.get("partition"), int)
                ):
                    raise CheckerError(
                        f"history entry #{entry['index']}: a partition must be {{topic, partition}}: {item!r}"
                    )
                ends[(item["topic"], item["partition"])] = None
    for seen in view.polls:
        if seen.group == group:
            ends[seen.tp] = None
    return ends


def unseen(view: View) -> Findings:
    """``unseen``: acknowledged, in the primary's final read, never polled by a group that recorded a drain.

    For each group with a ``drain`` entry: the acknowledged values that the primary's final read
    holds in the partitions the drains covered, below the end each drain reached, which no
    consumer of the group polled (on any site). Consecutive ones are one anomaly. A drain that
    failed is itself an anomaly, ``incomplete-drain``. Examines: those acknowledged values.
    """
    primary = view.primary_read
    drains: dict[str, list[Op]] = defaultdict(list)
    for drain in view.drains:
        drains[str(drain.get("group"))].append(drain)
    checked = 0
    found: list[Finding] = []
    for group, entries in drains.items():
        for drain in entries:
            if drain["type"] == "fail":
                span = view.entry_span(drain)
                found.append(
                    Finding(
                        "incomplete-drain",
                        f"{drain['process']} (group {group}) could not poll up to the ends it was asked to reach "
                        f"(#{drain['index']}): {drain.get('error', 'no error recorded')}",
                        [],
                        [span] if span is not None else [],
                    )
                )
        if primary is None:
            continue
        scope = _drained_partitions(view, group, entries)
        delivered = {seen.value for seen in view.polls if seen.group == group}
        missing: list[Seen] = []
        for read in primary.records:
            if read.tp not in scope or read.value not in view.ack_by_value:
                continue
            end = scope[read.tp]
            if end is not None and read.offset >= end:
                continue
            checked += 1
            if read.value not in delivered:
                missing.append(read)
        for run in runs(missing, key=lambda read: read.tp, rank=lambda read: read.offset):
            first, last = run[0], run[-1]
            acks = [view.ack_by_value[read.value] for read in run]
            found.append(
                Finding(
                    "unseen",
                    f"group {group} never polled {plural(len(run), 'acknowledged record')} of "
                    f"{first.topic}/{first.partition} that {site_text(primary.site)}'s final read holds "
                    f"({offsets_text(first.offset, last.offset)}), though it drained that partition",
                    [ack.record() for ack in sample(acks)],
                    view.spans_of(acks),
                    count=len(run),
                )
            )
    return Findings(checked, found)
