"""nonmonotonic-send and nonmonotonic-poll: one client's offsets in one partition only go forward.

Offsets are compared within one site: after an unplanned failover the new primary's offsets
restart at the cut, below what the old primary acknowledged, and that is not an anomaly here.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

from ._anomaly import Finding, Findings, site_text
from ._view import Seen, View

__all__ = ["PolledRecord", "nonmonotonic_poll", "nonmonotonic_send", "polled_in_segments"]


@dataclass(frozen=True, slots=True)
class PolledRecord:
    """A polled record and the stretch of its consumer's life it belongs to."""

    seen: Seen
    segment: int  # the consumer's assignments (and its group's resets) so far
    epoch: int  # its group's resets so far


def polled_in_segments(view: View) -> list[PolledRecord]:
    """Every polled record in history order, with its consumer's segment and its group's reset epoch.

    A consumer's segment changes at each of its ``assign`` entries and at each ``reset`` of its
    group (a deliberate rewind); a group's epoch at each of its resets.
    """
    records_at = {int(entry["index"]): records for entry, records in view.poll_entries}
    entries = sorted(
        (*view.assigns, *view.resets, *(entry for entry, _ in view.poll_entries)), key=lambda entry: entry["index"]
    )
    assigned: dict[str, int] = {}
    group_resets: dict[str | None, int] = {}
    started_in: dict[str, int] = {}  # process -> the group epoch of its latest poll
    out: list[PolledRecord] = []
    for entry in entries:
        if entry["f"] == "assign":
            assigned[entry["process"]] = assigned.get(entry["process"], 0) + 1
        elif entry["f"] == "reset":
            group = entry.get("group")
            group_resets[group] = group_resets.get(group, 0) + 1
        else:
            for seen in records_at[int(entry["index"])]:
                epoch = group_resets.get(seen.group, 0) if seen.group is not None else 0
                if started_in.get(seen.process, epoch) != epoch:
                    assigned[seen.process] = assigned.get(seen.process, 0) + 1
                started_in[seen.process] = epoch
                out.append(PolledRecord(seen, assigned.get(seen.process, 0), epoch))
    return out


def _went_back(keyed: Iterable[tuple[Hashable, Seen]]) -> Iterator[tuple[Seen, Seen]]:
    """(previous, this) for each record at or below the offset of the previous record with its key."""
    last: dict[Hashable, Seen] = {}
    for key, seen in keyed:
        before = last.get(key)
        last[key] = seen
        if before is not None and seen.offset <= before.offset:
            yield before, seen


def nonmonotonic_send(view: View) -> Findings:
    """``nonmonotonic-send``: a producer's acknowledged offsets of one partition, in invoke order, not increasing.

    Each offset at or below the one acknowledged for the producer's previous send to that
    partition on that site is one anomaly. Examines: the acknowledged sends.
    """
    in_order = sorted(view.acks, key=lambda ack: view.invoked.get(ack.index, ack.index))
    found = [
        Finding(
            "nonmonotonic-send",
            f"{ack.process}'s send of {ack.value!r} to {ack.topic}/{ack.partition} on {site_text(ack.site)} "
            f"was acknowledged at offset {ack.offset} (#{ack.index}), not after its previous send's offset "
            f"{before.offset} ({before.value!r}, #{before.index})",
            [before.record(), ack.record()],
            view.spans_of([before, ack]),
        )
        for before, ack in _went_back(((ack.process, ack.site, ack.tp), ack) for ack in in_order)
    ]
    return Findings(len(view.acks), found)


def nonmonotonic_poll(view: View) -> Findings:
    """``nonmonotonic-poll``: a consumer's polled offsets of a partition, between assigns, not strictly increasing.

    A consumer's stretch between two of its ``assign`` entries (or a ``reset`` of its group)
    must poll each partition of one site at strictly increasing offsets; each offset at or below
    the previous one is one anomaly. Examines: the polled records.
    """
    polled = polled_in_segments(view)
    keyed = (((one.seen.process, one.segment, one.seen.site, one.seen.tp), one.seen) for one in polled)
    found = [
        Finding(
            "nonmonotonic-poll",
            f"{seen.process} polled {seen.topic}/{seen.partition} on {site_text(seen.site)} at offset "
            f"{seen.offset} (#{seen.index}) after offset {before.offset} (#{before.index}), "
            "with no assignment or reset between",
            [before.record(), seen.record()],
            view.spans_of([before, seen]),
        )
        for before, seen in _went_back(keyed)
    ]
    return Findings(len(polled), found)
