"""What the checkers read from a history, parsed once: acknowledgements, polls, reads, sites, faults.

A :class:`View` is built from a :class:`chaos.history.History` in two passes over its entries
and never changes afterwards; every checker reads the same one. It knows:

- every record an entry holds, as a :class:`Seen`: an acknowledged send, each record of an ok
  poll or read, each record a failover exported; with the entry's index, process and site, and
  the *span* of its operation (monotonic ns from the invoke to the completion);
- each site's *final read* (the union of its ``final`` reads, the same record read twice counted
  once) and its role; the *primary* is the site whose final read has the role ``primary``;
- the promotes (in order) and the exports paired with them (each export belongs to the latest
  promote before it, else to the first one);
- the faults: each nemesis ``start`` paired with the next ``stop`` of the same nemesis (a start
  never stopped lasts to the end), each other nemesis or failover entry an instant.

**Which site an entry happened on.** Reads carry ``site``. Any other entry that carries ``site``
is taken at its word. Otherwise: before the first promote, the first promote's ``source``; after
promote *i*, its ``target``; with no promote, the primary. One exception: a send or poll that
holds a record the failover exported (same position, same value) happened on that promote's
source (a producer still pointed at the old primary after the promote).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from chaos.errors import ChaosError
from chaos.history import FAILOVER, NEMESIS, History, Op
from chaos.ledger import Position

__all__ = ["WINDOW_NS", "CheckerError", "Fault", "Promote", "SiteRead", "Seen", "Span", "TopicPartition", "View"]

#: How far (monotonic ns) from a fault an operation may be and still be "near" it.
WINDOW_NS = 5_000_000_000

#: An operation's interval in monotonic ns: (invoke, completion).
Span = tuple[int, int]
TopicPartition = tuple[str, int]


class CheckerError(ChaosError):
    """A history entry the checkers cannot read (the message names its index and field), or an unknown checker."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One record as one history entry holds it: acknowledged (``send``), polled, read or exported."""

    topic: str
    partition: int
    offset: int
    value: str
    index: int  # the history entry holding it
    process: str
    f: str  # send | poll | read | export
    site: str | None
    span: Span | None
    group: str | None = None
    position: Position = field(init=False, compare=False)
    tp: TopicPartition = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # Computed once: the checkers key dictionaries by these millions of times.
        object.__setattr__(self, "position", Position(self.topic, self.partition, self.offset))
        object.__setattr__(self, "tp", (self.topic, self.partition))

    def record(self) -> dict[str, Any]:
        """The record as an anomaly names it (JSON-ready)."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "value": self.value,
            "process": self.process,
            "index": self.index,
            "op": self.f,
        }
        if self.site is not None:
            out["site"] = self.site
        if self.group is not None:
            out["group"] = self.group
        return out


@dataclass
class SiteRead:
    """The final read of one site: distinct records (same position and value counted once), in read order."""

    site: str | None
    role: str | None
    last_index: int = -1
    records: list[Seen] = field(default_factory=list)
    ends: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    by_value: dict[str, list[Seen]] = field(default_factory=dict)
    by_position: dict[Position, list[Seen]] = field(default_factory=dict)

    def add(self, seen: Seen) -> None:
        here = self.by_position.setdefault(seen.position, [])
        if any(other.value == seen.value for other in here):
            return  # the same record read twice: a reader artefact
        here.append(seen)
        self.records.append(seen)
        self.by_value.setdefault(seen.value, []).append(seen)

    def start(self, tp: TopicPartition) -> int:
        """The partition's log start as the read reported it (0 when it did not)."""
        bounds = self.ends.get(tp)
        return bounds[0] if bounds is not None else 0

    def offsets(self) -> dict[TopicPartition, dict[int, Seen]]:
        """Per partition, offset -> the first record read there."""
        out: dict[TopicPartition, dict[int, Seen]] = defaultdict(dict)
        for seen in self.records:
            out[seen.tp].setdefault(seen.offset, seen)
        return out


@dataclass
class Promote:
    entry: Op
    planned: bool
    source: str | None
    target: str | None
    exports: list[Op] = field(default_factory=list)

    @property
    def index(self) -> int:
        return int(self.entry["index"])

    @property
    def link(self) -> str:
        value = self.entry.get("value")
        link = value.get("link") if isinstance(value, dict) else None
        return str(link) if link is not None else "?"


@dataclass(frozen=True)
class Fault:
    """A nemesis interval (start..stop, or to the end when never stopped) or a failover instant."""

    start: int
    stop: float  # math.inf when the fault was never healed
    entries: tuple[Op, ...]


def _mono(entry: Op) -> int | None:
    mono = entry.get("mono")
    return mono if isinstance(mono, int) else None


def _field(entry: Op, key: str, kind: type[Any], *, holder: Op | None = None) -> Any:
    """``entry[key]`` when it is a ``kind``; ``holder`` is the history entry when ``entry`` is one of its records."""
    value = entry.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        where = holder if holder is not None else entry
        what = "a record of history entry" if holder is not None else "history entry"
        raise CheckerError(
            f"{what} #{where.get('index')} ({where.get('process')} {where.get('f')}): "
            f"{key!r} must be {kind.__name__}, found {value!r}"
        )
    return value


def _bad_record(record: dict[str, Any], entry: Op) -> NoReturn:
    for key, kind in (("topic", str), ("partition", int), ("offset", int), ("value", str)):
        _field(record, key, kind, holder=entry)
    raise AssertionError("unreachable: a record that failed the fast check passed every field")


def _tp_key(entry: Op, key: str) -> TopicPartition:
    topic, slash, partition = key.rpartition("/")
    if not slash or not partition.isdigit():
        raise CheckerError(f"history entry #{entry.get('index')}: {key!r} is not '<topic>/<partition>'")
    return (topic, int(partition))


def parse_ends(entry: Op) -> dict[TopicPartition, tuple[int, int]]:
    """``ends`` of a read or drain entry: {"t/0": [start, end]} or {"t/0": end} (start 0)."""
    raw = entry.get("ends") or {}
    if not isinstance(raw, dict):
        raise CheckerError(f"history entry #{entry.get('index')}: 'ends' must be an object, found {raw!r}")
    out: dict[TopicPartition, tuple[int, int]] = {}
    for key, bounds in raw.items():
        if isinstance(bounds, int):
            out[_tp_key(entry, key)] = (0, bounds)
        elif isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, int) for b in bounds):
            out[_tp_key(entry, key)] = (bounds[0], bounds[1])
        else:
            raise CheckerError(
                f"history entry #{entry.get('index')}: ends[{key!r}] must be [start, end], found {bounds!r}"
            )
    return out


class View:
    """Everything the checkers need from one history (see the module docstring)."""

    def __init__(self, history: History) -> None:
        self.acks: list[Seen] = []  # ok sends, in completion order
        self.invoked: dict[int, int] = {}  # ok send's index -> its invoke's index
        self.poll_entries: list[tuple[Op, list[Seen]]] = []  # ok polls and their records
        self.reads: list[Seen] = []  # every record of every ok read
        self.final: dict[str | None, SiteRead] = {}
        self.commits: list[Op] = []  # ok commits
        self.resets: list[Op] = []  # ok resets
        self.assigns: list[Op] = []
        self.drains: list[Op] = []  # ok and fail drains
        self.txns: list[Op] = []  # every txn entry (invokes and completions), in history order
        self.txn_reads: list[Op] = []  # ok txn-reads
        self.promotes: list[Promote] = []
        self.exported: list[Seen] = []
        self.faults: list[Fault] = []
        self.spans: dict[int, Span] = {}  # completion index -> its operation's span
        self._exported_at: dict[tuple[Position, str], str | None] = {}
        self._eras: list[tuple[int, str | None]] = []  # (first index, site), ascending
        raw_acks: list[Op] = []
        raw_polls: list[Op] = []
        raw_reads: list[Op] = []
        exports: list[Op] = []
        self._first_pass(history, raw_acks, raw_polls, raw_reads, exports)
        self.primary_read = self._final_reads(raw_reads)
        self.primary = self.primary_read.site if self.primary_read is not None else None
        self._pair_exports(exports)
        self._set_eras()
        for entry in raw_acks:
            self.acks.append(self._ack(entry))
        for entry in raw_polls:
            self.poll_entries.append((entry, self._poll(entry)))
        #: Every record of every ok poll, in history order.
        self.polls: list[Seen] = [seen for _, records in self.poll_entries for seen in records]
        self.ack_by_value: dict[str, Seen] = {}
        for ack in self.acks:
            self.ack_by_value.setdefault(ack.value, ack)
        acked_offsets: dict[TopicPartition, set[int]] = defaultdict(set)
        for ack in self.acks:
            acked_offsets[ack.tp].add(ack.offset)
        self._ack_offsets = {tp: sorted(offsets) for tp, offsets in acked_offsets.items()}

    # -- parsing ---------------------------------------------------------------------------------

    def _first_pass(
        self, history: History, acks: list[Op], polls: list[Op], reads: list[Op], exports: list[Op]
    ) -> None:
        last_invoke: dict[tuple[str, str], int | None] = {}
        send_invoke: dict[tuple[str, str], tuple[int, int | None]] = {}
        nemesis: list[Op] = []
        for position, entry in enumerate(history.ops):
            index, process, f, kind = entry.get("index"), entry.get("process"), entry.get("f"), entry.get("type")
            if not isinstance(index, int) or not isinstance(process, str) or not isinstance(f, str):
                raise CheckerError(f"history entry {position}: needs an 'index' number and 'process' and 'f' strings")
            mono = _mono(entry)
            if process == NEMESIS:
                nemesis.append(entry)
                continue
            if process == FAILOVER:
                if f == "promote":
                    self._promote(entry)
                elif f == "export":
                    exports.append(entry)
                if mono is not None:
                    self.faults.append(Fault(mono, mono, (entry,)))
                continue
            if f == "txn":
                self.txns.append(entry)
            elif f == "txn-read" and kind == "ok":
                self.txn_reads.append(entry)
            if kind == "invoke":
                last_invoke[(process, f)] = mono
                if f == "send" and isinstance(entry.get("value"), str):
                    send_invoke[(process, entry["value"])] = (index, mono)
                continue
            if f == "send" and isinstance(entry.get("value"), str):
                invoked = send_invoke.get((process, entry["value"]))
                if invoked is not None:
                    self.invoked[index] = invoked[0]
                start = invoked[1] if invoked is not None else None
            else:
                start = last_invoke.get((process, f))
            if mono is not None:
                self.spans[index] = (start if start is not None else mono, mono)
            if kind == "ok" and f == "send":
                acks.append(entry)
            elif kind == "ok" and f == "poll":
                polls.append(entry)
            elif kind == "ok" and f == "read":
                reads.append(entry)
            elif kind == "ok" and f == "commit":
                self.commits.append(entry)
            elif kind == "ok" and f == "reset":
                self.resets.append(entry)
            elif f == "assign":
                self.assigns.append(entry)
            elif f == "drain" and kind in ("ok", "fail"):
                self.drains.append(entry)
        self._nemesis_faults(nemesis)

    def _promote(self, entry: Op) -> None:
        value = entry.get("value")
        if not isinstance(value, dict):
            raise CheckerError(f"history entry #{entry.get('index')}: a promote's 'value' must be an object")
        source, target = value.get("source"), value.get("target")
        self.promotes.append(
            Promote(
                entry,
                planned=value.get("planned") is True,
                source=source if isinstance(source, str) else None,
                target=target if isinstance(target, str) else None,
            )
        )

    def _nemesis_faults(self, entries: list[Op]) -> None:
        open_starts: dict[str, list[Op]] = defaultdict(list)
        for entry in entries:
            mono = _mono(entry)
            if mono is None:
                continue
            name = str(entry.get("nemesis"))
            if entry["f"] == "start":
                open_starts[name].append(entry)
            elif entry["f"] == "stop" and open_starts[name]:
                start = open_starts[name].pop(0)
                self.faults.append(Fault(int(start["mono"]), mono, (start, entry)))
            else:
                self.faults.append(Fault(mono, mono, (entry,)))
        for starts in open_starts.values():
            self.faults.extend(Fault(int(start["mono"]), math.inf, (start,)) for start in starts)
        self.faults.sort(key=lambda fault: fault.start)

    def records(self, entry: Op, f: str, site: str | None, *, group: str | None = None) -> list[Seen]:
        """The ``records`` of a poll, read or export entry, as :class:`Seen`."""
        raw = entry.get("records") or []
        if not isinstance(raw, list):
            raise CheckerError(f"history entry #{entry.get('index')}: 'records' must be a list, found {raw!r}")
        index = int(entry["index"])
        process, span = entry["process"], self.spans.get(index)
        out: list[Seen] = []
        for record in raw:
            if not isinstance(record, dict):
                raise CheckerError(f"history entry #{index}: a record must be an object, found {record!r}")
            topic, partition = record.get("topic"), record.get("partition")
            offset, value = record.get("offset"), record.get("value")
            if not (type(topic) is str and type(partition) is int and type(offset) is int and type(value) is str):
                _bad_record(record, entry)
            out.append(Seen(topic, partition, offset, value, index, process, f, site, span, group))
        return out

    def _final_reads(self, reads: list[Op]) -> SiteRead | None:
        primary: SiteRead | None = None
        for entry in reads:
            site = entry.get("site")
            site = site if isinstance(site, str) else None
            seen = self.records(entry, "read", site)
            self.reads.extend(seen)
            if entry.get("final") is not True:
                continue
            role = entry.get("role")
            final = self.final.setdefault(site, SiteRead(site, role if isinstance(role, str) else None))
            final.last_index = int(entry["index"])
            final.ends.update(parse_ends(entry))
            for one in seen:
                final.add(one)
            if final.role == "primary" and (primary is None or final.last_index >= primary.last_index):
                primary = final
        return primary

    def _pair_exports(self, exports: list[Op]) -> None:
        for entry in exports:
            before = [p for p in self.promotes if p.index < int(entry["index"])]
            owner = before[-1] if before else (self.promotes[0] if self.promotes else None)
            if owner is not None:
                owner.exports.append(entry)
            source = owner.source if owner is not None else None
            for seen in self.records(entry, "export", source):
                self.exported.append(seen)
                if owner is not None:
                    self._exported_at[(seen.position, seen.value)] = source
        self.exported_values: set[str] = {seen.value for seen in self.exported}

    def _set_eras(self) -> None:
        if not self.promotes:
            self._eras = [(-1, self.primary)]
            return
        self._eras = [(-1, self.promotes[0].source)]
        self._eras.extend((p.index, p.target) for p in self.promotes)

    def site_at(self, index: int) -> str | None:
        """The primary at history index ``index`` (by the promotes before it)."""
        site = self._eras[0][1]
        for first, era_site in self._eras:
            if index > first:
                site = era_site
        return site

    def site_of(self, entry: Op, held: Iterable[tuple[Position, str]] = ()) -> str | None:
        """The site ``entry`` happened on (see the module docstring), given the records it holds."""
        site = entry.get("site")
        if isinstance(site, str):
            return site
        if self._exported_at:
            for key in held:
                if key in self._exported_at:
                    return self._exported_at[key]
        return self.site_at(int(entry["index"]))

    def _ack(self, entry: Op) -> Seen:
        topic, value = _field(entry, "topic", str), _field(entry, "value", str)
        partition, offset = _field(entry, "partition", int), _field(entry, "offset", int)
        index = int(entry["index"])
        site = self.site_of(entry, [(Position(topic, partition, offset), value)])
        return Seen(topic, partition, offset, value, index, entry["process"], "send", site, self.spans.get(index))

    def _poll(self, entry: Op) -> list[Seen]:
        group = entry.get("group")
        group = group if isinstance(group, str) else None
        if not self._exported_at:
            return self.records(entry, "poll", self.site_of(entry), group=group)
        seen = self.records(entry, "poll", None, group=group)
        site = self.site_of(entry, [(s.position, s.value) for s in seen])
        return [replace(s, site=site) for s in seen]

    # -- questions the checkers ask ----------------------------------------------------------------

    def ack_rank(self, seen: Seen) -> int:
        """The rank of ``seen``'s offset among the acknowledged offsets of its partition (for grouping runs)."""
        return bisect_left(self._ack_offsets.get(seen.tp, []), seen.offset)

    def was_exported(self, seen: Seen) -> bool:
        """Whether ``seen`` is a record a failover exported, seen on the site it was exported from."""
        if not self._exported_at:
            return False
        key = (seen.position, seen.value)
        return key in self._exported_at and self._exported_at[key] == seen.site

    def span_of_value(self, value: str) -> Span | None:
        ack = self.ack_by_value.get(value)
        return ack.span if ack is not None else None

    def spans_of(self, seen: Iterable[Seen]) -> list[Span]:
        """The spans that place ``seen`` in time: each record's send when acknowledged, else its own entry."""
        out: list[Span] = []
        for one in seen:
            span = self.span_of_value(one.value) if one.f in ("read", "export") else one.span
            span = span or one.span
            if span is not None:
                out.append(span)
        return out

    def entry_span(self, entry: Op) -> Span | None:
        index = int(entry["index"])
        if index in self.spans:
            return self.spans[index]
        mono = _mono(entry)
        return (mono, mono) if mono is not None else None

    def near(self, spans: Iterable[Span]) -> tuple[Op, ...]:
        """The nemesis and failover entries whose interval covers, or lies within 5 s of, one of ``spans``."""
        merged: list[list[int]] = []
        for start, stop in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        if not merged:
            return ()
        starts = [lo for lo, _ in merged]
        chosen: dict[int, Op] = {}
        for fault in self.faults:
            # The spans that could overlap [fault.start - W, fault.stop + W] are those starting before its end.
            # Merged spans are disjoint and sorted, so their stops ascend too: the last such span reaches furthest.
            last = bisect_left(starts, fault.stop + WINDOW_NS + 1) - 1
            if last >= 0 and merged[last][1] >= fault.start - WINDOW_NS:
                for entry in fault.entries:
                    chosen[int(entry["index"])] = dict(entry)
        return tuple(chosen[index] for index in sorted(chosen))
