"""The history of a chaos run: every operation and every fault, as Jepsen records them, in JSON Lines.

A workload *process* (a named client: ``producer-0``, ``group-1``, ``mirror-reader``) records
each operation twice: an ``invoke`` when it starts it, then its completion, one of

- ``ok``: it happened (a send the broker acknowledged, a poll that returned records);
- ``fail``: it certainly did not happen (a send refused with an error that proves it absent);
- ``info``: indeterminate, it may or may not have happened (a send that timed out).

Faults and other events a run makes (a nemesis starting and stopping, a failover) are
``info`` entries of the process ``nemesis`` (or ``failover``) with no invoke. Every entry
carries ``index`` (its position in the file, from 0), ``time`` (wall clock, seconds) and
``mono`` (monotonic clock, nanoseconds: what latencies and plots are computed from).

One entry per line, written and flushed as it happens, so that a run killed halfway leaves a
history that :func:`load` reads (a torn last line is skipped) and that a Spark job can audit.

=========  ==========================================  ===============================================================
``f``      invoke carries                              completion carries
=========  ==========================================  ===============================================================
``send``   ``topic``, ``value``                        ok: ``topic``, ``partition``, ``offset``, ``value``;
                                                       fail/info: ``topic``, ``value``, ``error``
``poll``   ``group`` (or none: a plain reader)         ok: ``records`` = [{topic, partition, offset, value}, ...]
``commit`` ``group``, ``offsets`` = [{topic,           ok / fail / info (``error``) with the same ``group`` and
           partition, offset}, ...] (the next offset)  ``offsets``
``reset``  ``group``, ``offsets``                      ok: a deliberate rewind (the commit-regression checker
                                                       allows the committed offset to go back here)
``read``   ``site``, ``topic``                         ok: ``site``, ``role`` ("primary", "mirror" or
                                                       "old-primary"), ``records`` (as for poll), ``final`` (true:
                                                       a complete read of every partition from its log start to
                                                       its high watermark, what the lost-write checker trusts),
                                                       ``ends`` = {"<topic>/<partition>": [log start, end], ...}
``assign`` (a consumer, no invoke: an ``info``)        ``group``, ``partitions`` = [{topic, partition}, ...]: its
                                                       assignment after a rebalance (empty: all revoked)
``drain``  ``group``, ``ends``                         ok: the group polled up to ``ends`` at the end of the run;
                                                       fail: it could not in time (``error``)
``lag``    (no invoke: an ``info`` sample)             ``site``, ``value`` = {"records": N, "partitions": {...}}
``start``  (nemesis, no invoke)                        ``nemesis`` (name), ``target`` (what it hit, in words)
``stop``   (nemesis, no invoke)                        ``nemesis``, ``target``
``promote`` (failover, no invoke)                      ``value`` = {link, rpo_records, cut: {...}, ...}
``export`` (failover, no invoke)                       ``records`` = the divergence the failover exported
``txn``    ``transaction`` (number), ``group``,         ok: committed (``outputs``: the output records written);
           ``input``, ``output`` (topics), ``inputs``   fail: certainly not committed (``error``); info: unknown
           (records consumed), ``offsets`` (the next
           offsets it commits), ``abort`` (on purpose)
``txn-drain`` (no invoke)                              ``group``, ``ends``: ok, the group's committed offsets reached
                                                       them; fail (``error``)
``txn-read`` ``site``, ``input``, ``output``, ``group``, ok: ``records`` (the output, as ``isolation`` reads it),
           ``isolation``                               ``ends``, ``open`` (partitions whose LSO stayed below the high
                                                       watermark), ``committed`` = {"<input>/<p>": offset or -1}
=========  ==========================================  ===============================================================

Values are text (the workloads write ``"<run id>-<process>-<seq>"``, unique per write; the
transactional workload's output records ``"<input value>|<process>/<transaction>"``).
Sends, polls and commits may carry ``site`` (where they happened); without it the checkers place
them by the promotes before them. Any other key a workload adds is kept and ignored by checkers
that do not know it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Self

from chaos.errors import ChaosError

__all__ = ["History", "HistoryError", "Op", "OpType", "load", "NEMESIS", "FAILOVER"]

OpType = Literal["invoke", "ok", "fail", "info"]
TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})

#: The process name of fault events, and of failover events.
NEMESIS = "nemesis"
FAILOVER = "failover"

#: One history entry, as a JSON object.
Op = dict[str, Any]


class HistoryError(ChaosError):
    """A history file that cannot be read, or an entry that is not one."""


class History:
    """An append-only history, in memory and (given a path) in a JSON Lines file flushed per entry.

    Safe to append to from several threads: each entry gets the next ``index`` under a lock,
    and lines are written in index order. ``ops`` is the list of every entry appended so far
    (or loaded).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def append(self, type: OpType, process: str, f: str, **fields: Any) -> Op:
        """Record one entry now and return it (with its ``index``, ``time`` and ``mono``)."""
        if type not in TYPES:
            raise HistoryError(f"invalid op type {type!r}; it must be one of {sorted(TYPES)}")
        with self._lock:
            op: Op = {
                "index": len(self.ops),
                "type": type,
                "process": process,
                "f": f,
                "time": time.time(),
                "mono": time.monotonic_ns(),
                **fields,
            }
            self.ops.append(op)
            if self._file is not None:
                self._file.write(json.dumps(op, separators=(",", ":")) + "\n")
                self._file.flush()
        return op

    def invoke(self, process: str, f: str, **fields: Any) -> Op:
        return self.append("invoke", process, f, **fields)

    def complete(self, invoked: Op, type: OpType, **fields: Any) -> Op:
        """Record the completion of ``invoked`` (same process and ``f``)."""
        return self.append(type, invoked["process"], invoked["f"], **fields)

    def nemesis(self, f: Literal["start", "stop"], name: str, target: str, **fields: Any) -> Op:
        """Record a fault starting (``f="start"``) or healed (``f="stop"``)."""
        return self.append("info", NEMESIS, f, nemesis=name, target=target, **fields)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Op]:
        return iter(list(self.ops))

    def __len__(self) -> int:
        return len(self.ops)

    @classmethod
    def of(cls, ops: Iterable[Mapping[str, Any]]) -> History:
        """An in-memory history of ``ops`` as they are (for checkers' tests and offline checks)."""
        history = cls()
        history.ops = [dict(op) for op in ops]
        return history


def load(path: str | os.PathLike[str]) -> History:
    """The history a JSON Lines file records (in memory; the file is not appended to).

    Raises HistoryError naming the file and line of an entry that is not a JSON object with a
    valid ``type``, ``process`` and ``f``; a torn last line (a process killed mid-write) is skipped.
    """
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"cannot read history file {source}: {exc}") from exc
    ops: list[Op] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            if number == len(lines):
                break
            raise HistoryError(f"{source}:{number}: not JSON: {exc}") from exc
        if not isinstance(entry, dict) or entry.get("type") not in TYPES:
            raise HistoryError(f"{source}:{number}: not a history entry (no valid 'type'): {line[:200]!r}")
        if not isinstance(entry.get("process"), str) or not isinstance(entry.get("f"), str):
            raise HistoryError(f"{source}:{number}: a history entry needs 'process' and 'f' strings: {line[:200]!r}")
        ops.append(entry)
    return History.of(ops)
