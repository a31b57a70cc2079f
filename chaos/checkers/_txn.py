"""exactly-once: did a consume-transform-produce loop move every input record once, and nothing aborted?

It judges the ``txn`` operations of transactional workloads against the last ``txn-read`` of the
history (the output topic read to its end, with ``read_committed`` unless it says otherwise, and
the group's committed offsets of the input) and the primary's final read of the input topic.

An output record's value is ``"<input value>|<transaction>"``, the transaction being
``"<process>/<number>"`` of a ``txn`` operation (``chaos.workloads.output_value``); it *moves* the
input record of that value that the transaction's invoke lists. A transaction is *committed*
(``ok``), *aborted* (``fail``: certainly not committed) or *unknown* (``info``, or never
completed). *Visible* output: what the ``txn-read`` holds (the same record read twice counts
once). The *committed offset* of an input partition is the group's, as the ``txn-read`` found it
(nothing committed: the partition's log start).

==================== ===========================================================================
anomaly              definition
==================== ===========================================================================
``aborted-read``     a visible output record of an aborted transaction (Adya's G1a)
``txn-duplicate``    an input record moved by two or more visible output records
``txn-lost``         a record of a committed transaction's output that is not visible, or a
                     transaction of unknown outcome visible only in part (a transaction is all
                     or nothing)
``txn-gap``          an input record of the primary's final read, below its partition's
                     committed offset, that no visible output record moves: the group went past
                     it and will never move it
``offsets-mismatch`` the group's committed offset of an input partition disagrees with the
                     output: a visible output moves a record at or past it (the group would move
                     it again), or it is not the end of the partition the final read found (past
                     it; or below it, leaving records never moved although the run drained the
                     group to that end)
``phantom-output``   a visible output record no transaction of the history wrote (its value
                     names no transaction, or an input record the transaction did not hold)
==================== ===========================================================================

Skipped (``checked`` 0) without a ``txn-read``. Examines: the visible output records and the
input records of the primary's final read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.history import Op
from chaos.ledger import Position

from ._anomaly import Finding, Findings, offsets_text, plural, runs, sample
from ._view import CheckerError, Seen, Span, TopicPartition, View, parse_ends

__all__ = ["exactly_once"]


@dataclass
class _Txn:
    """One transaction of one workload process: its invoke, its outcome, the inputs it moved."""

    name: str
    invoke: Op
    outcome: str = "info"  # ok, fail or info (a transaction never completed is of unknown outcome)
    completion: Op | None = None
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # input value -> its record

    def span(self, view: View) -> Span | None:
        if self.completion is not None:
            return view.entry_span(self.completion)
        return view.entry_span(self.invoke)

    def record(self, input_record: dict[str, Any]) -> dict[str, Any]:
        return {
            **{k: input_record[k] for k in ("topic", "partition", "offset", "value")},
            "process": self.invoke["process"],
            "index": int((self.completion or self.invoke)["index"]),
            "op": "txn",
            "transaction": self.name,
            "outcome": self.outcome,
        }


def _transactions(view: View) -> dict[str, _Txn]:
    txns: dict[str, _Txn] = {}
    for entry in view.txns:
        number = entry.get("transaction")
        if not isinstance(number, int):
            raise CheckerError(f"history entry #{entry.get('index')}: a txn needs a 'transaction' number")
        name = f"{entry['process']}/{number}"
        if entry["type"] == "invoke":
            txn = txns[name] = _Txn(name, entry)
            for record in view.records({**entry, "records": entry.get("inputs") or []}, "txn", None):
                txn.inputs[record.value] = {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "value": record.value,
                }
        elif name in txns:
            txns[name].outcome = str(entry["type"])
            txns[name].completion = entry
    return txns


def _committed(entry: Op) -> dict[TopicPartition, int]:
    raw = entry.get("committed") or {}
    if not isinstance(raw, dict):
        raise CheckerError(f"history entry #{entry.get('index')}: 'committed' must be an object")
    return {tp: end for tp, (_, end) in parse_ends({"index": entry.get("index"), "ends": raw}).items()}


def exactly_once(view: View) -> Findings:
    """The anomalies of the module docstring (the last ``txn-read`` against the ``txn`` operations)."""
    if not view.txn_reads:
        return Findings(0, [])
    read = view.txn_reads[-1]
    input_topic = read.get("input")
    if not isinstance(input_topic, str):
        raise CheckerError(f"history entry #{read.get('index')}: a txn-read needs its 'input' topic")
    site = read.get("site") if isinstance(read.get("site"), str) else None
    txns = _transactions(view)
    committed = _committed(read)

    visible: dict[tuple[Position, str], Seen] = {}
    for seen in view.records(read, "txn-read", site):
        visible.setdefault((seen.position, seen.value), seen)
    outputs = list(visible.values())

    found: list[Finding] = []
    moves: dict[Position, list[tuple[Seen, _Txn]]] = defaultdict(list)  # input position -> its visible outputs
    seen_of: dict[str, set[str]] = defaultdict(set)  # transaction -> the input values visible
    aborted: list[tuple[Seen, _Txn]] = []
    phantoms: list[Seen] = []
    for out in outputs:
        input_value, bar, name = out.value.rpartition("|")
        txn = txns.get(name) if bar else None
        moved = txn.inputs.get(input_value) if txn is not None else None
        if txn is None or moved is None:
            phantoms.append(out)
            continue
        seen_of[name].add(input_value)
        moves[Position(moved["topic"], moved["partition"], moved["offset"])].append((out, txn))
        if txn.outcome == "fail":
            aborted.append((out, txn))

    isolation = read.get("isolation", "read_committed")
    for pairs in runs(aborted, key=lambda pair: pair[1].name, rank=lambda pair: pair[0].offset):
        txn = pairs[0][1]
        found.append(
            Finding(
                "aborted-read",
                f"{plural(len(pairs), 'output record')} of {txn.name}, a transaction that was aborted "
                f"({(txn.completion or {}).get('error', 'no error recorded')}), "
                f"{'is' if len(pairs) == 1 else 'are'} visible to a {isolation} reader of {pairs[0][0].topic}",
                [pair[0].record() for pair in sample(pairs)],
                [span for span in (txn.span(view),) if span is not None],
                count=len(pairs),
            )
        )

    duplicates = sorted((position, outs) for position, outs in moves.items() if len(outs) > 1)
    for dups in runs(duplicates, key=lambda item: (item[0].topic, item[0].partition), rank=lambda item: item[0].offset):
        low, high = dups[0][0], dups[-1][0]
        examples = [out.record() for _, outs in sample(dups) for out, _ in outs]
        names = sorted({txn.name for _, outs in dups for _, txn in outs})
        found.append(
            Finding(
                "txn-duplicate",
                f"{plural(len(dups), 'input record')} of {low.topic}/{low.partition} at "
                f"{offsets_text(low.offset, high.offset)} {'is' if len(dups) == 1 else 'are'} in the output "
                f"more than once (by transactions {', '.join(names[:6])}{' ...' if len(names) > 6 else ''})",
                examples,
                [span for _, outs in dups for _, txn in outs for span in (txn.span(view),) if span is not None],
                count=len(dups),
            )
        )

    for name, txn in txns.items():
        if txn.outcome not in ("ok", "info"):
            continue
        missing = [record for value, record in txn.inputs.items() if value not in seen_of.get(name, set())]
        if not missing or (txn.outcome == "info" and len(missing) == len(txn.inputs)):
            continue
        what = "a committed transaction" if txn.outcome == "ok" else "a transaction of unknown outcome, visible in part"
        found.append(
            Finding(
                "txn-lost",
                f"{plural(len(missing), 'output record')} of {txn.name}, {what}, "
                f"{'is' if len(missing) == 1 else 'are'} not visible in {read.get('output')} "
                f"({len(txn.inputs) - len(missing)} of its {len(txn.inputs)} are)",
                [txn.record(record) for record in sample(sorted(missing, key=_order))],
                [span for span in (txn.span(view),) if span is not None],
                count=len(missing),
            )
        )

    inputs = [seen for seen in (view.primary_read.records if view.primary_read else []) if seen.topic == input_topic]
    bounds = dict(view.primary_read.ends) if view.primary_read else {}
    gaps: list[Seen] = []
    ahead: list[Seen] = []
    for seen in inputs:
        if seen.offset < bounds.get(seen.tp, (0, 0))[0]:
            continue
        mark = committed.get(seen.tp, -1)
        if mark < 0:
            mark = bounds.get(seen.tp, (0, 0))[0]
        moved_out = bool(moves.get(seen.position))
        if seen.offset < mark and not moved_out:
            gaps.append(seen)
        elif seen.offset >= mark and moved_out:
            ahead.append(seen)

    def inputs_text(run: list[Seen]) -> str:
        first, last = run[0], run[-1]
        where = f"{first.topic}/{first.partition} at {offsets_text(first.offset, last.offset)}"
        return f"{plural(len(run), 'input record')} of {where}"

    def mark_of(run: list[Seen]) -> int:
        return committed.get(run[0].tp, -1)

    found.extend(
        _runs_of(
            "txn-gap",
            gaps,
            view,
            lambda run: (
                f"{inputs_text(run)}, below the group's committed offset {mark_of(run)}, "
                f"{'is' if len(run) == 1 else 'are'} in no visible output record"
            ),
        )
    )
    found.extend(
        _runs_of(
            "offsets-mismatch",
            ahead,
            view,
            lambda run: (
                f"{inputs_text(run)} {'is' if len(run) == 1 else 'are'} in the output, but the group's "
                f"committed offset {mark_of(run)} does not cover {'it' if len(run) == 1 else 'them'}: "
                f"the group would move {'it' if len(run) == 1 else 'them'} again"
            ),
        )
    )
    by_tp: dict[TopicPartition, list[Seen]] = defaultdict(list)
    for seen in inputs:
        by_tp[seen.tp].append(seen)
    for tp, (log_start, end) in sorted(bounds.items()):
        if tp[0] != input_topic:
            continue
        mark = committed.get(tp, -1)
        if mark < 0:
            mark = log_start
        left = [seen for seen in by_tp.get(tp, []) if seen.offset >= mark and not moves.get(seen.position)]
        if mark > end:
            text = f"is past the partition's end {end}"
        elif left:  # (records at or past it that were moved are the mismatch above)
            text = f"is below the partition's end {end}: {plural(len(left), 'input record')} never moved"
        else:
            continue
        found.append(
            Finding(
                "offsets-mismatch",
                f"the group {read.get('group')}'s committed offset {committed.get(tp, -1)} of {tp[0]}/{tp[1]} {text}",
                [seen.record() for seen in sample(left)],
                view.spans_of(left),
                count=max(1, len(left)),
            )
        )

    found.extend(
        _runs_of(
            "phantom-output",
            phantoms,
            view,
            lambda run: (
                f"{plural(len(run), 'output record')} of {run[0].topic}/{run[0].partition} at "
                f"{offsets_text(run[0].offset, run[-1].offset)} {'was' if len(run) == 1 else 'were'} written by no "
                f"transaction of the history"
            ),
            spans=False,
        )
    )
    return Findings(len(outputs) + len(inputs), found)


def _runs_of(
    name: str, seen: list[Seen], view: View, describe: Callable[[list[Seen]], str], *, spans: bool = True
) -> list[Finding]:
    """One ``name`` finding per run of consecutive offsets of one partition in ``seen``, described by ``describe``."""
    return [
        Finding(
            name,
            describe(run),
            [one.record() for one in sample(run)],
            view.spans_of(run) if spans else [],
            count=len(run),
        )
        for run in runs(seen, key=lambda one: one.tp, rank=lambda one: one.offset)
    ]


def _order(record: dict[str, Any]) -> tuple[str, int, int]:
    return (record["topic"], record["partition"], record["offset"])
