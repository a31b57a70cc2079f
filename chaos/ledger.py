"""The ledger of acknowledged writes, and the checker that proves none of them was lost.

A workload records each write it *invokes*, and then how it completed: *ok* with the
(topic, partition, offset) the broker acknowledged, or *fail* with the client's error. A write
still in flight when the run ends is *pending*: indeterminate, it may or may not be in the log.
Values must be unique per write (the workloads use ``b"<run id>-<seq>"``).

After the faults heal, the test reads every partition back and :func:`check` compares:

==============  ====================================================================================
anomaly         definition
==============  ====================================================================================
``lost``        an acknowledged value that was not read back anywhere
``moved``       an acknowledged value read back, but never at the (topic, partition, offset) acknowledged
``duplicates``  a value read back at more than one (topic, partition, offset)
``conflicts``   one (topic, partition, offset) read back with two different values
==============  ====================================================================================

Any of them makes the check fail. A value that was never acknowledged (pending, failed, or
never recorded) may appear once: a write whose acknowledgement was lost can still have been
committed, and librdkafka's delivery errors (a timeout, a broken connection) do not prove the
write absent. Reading the same record twice (same position, same value) is a reader artefact
and is counted once.

On disk (``Ledger(path)``) the history is JSON Lines, one operation per line, appended and
flushed as it happens so that another process (a Spark audit job) can read it::

    {"op": "invoke", "value": "<base64>", "time": 1718000000.123}
    {"op": "ok", "value": "<base64>", "topic": "t", "partition": 0, "offset": 41, "time": ...}
    {"op": "fail", "value": "<base64>", "error": "_MSG_TIMED_OUT: ...", "time": ...}

``time`` is the wall clock in seconds. :func:`load` replays such a file (a torn last line, from a
process killed mid-write, is skipped).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, NamedTuple

from chaos.errors import LedgerError

__all__ = ["Ack", "CheckResult", "Failure", "Ledger", "Position", "Read", "check", "load"]

#: How many examples of each anomaly ``CheckResult.summary`` names.
SUMMARY_EXAMPLES = 5


class Position(NamedTuple):
    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class Read(NamedTuple):
    """One record read back. Plain ``(topic, partition, offset, value)`` tuples work as well."""

    topic: str
    partition: int
    offset: int
    value: bytes


@dataclass(frozen=True)
class Ack:
    """An acknowledged write: the broker said ``value`` is at ``position``."""

    position: Position
    value: bytes


@dataclass(frozen=True)
class Failure:
    value: bytes
    error: str


class Ledger:
    """A thread-safe record of writes: invoked, acknowledged, failed. Optionally appended to a JSONL file.

    A value acknowledged twice keeps its first position (both are in the file). ``close`` (or
    leaving the ``with`` block) closes the file; recording after that still works in memory.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._acks: dict[bytes, Ack] = {}
        self._failures: dict[bytes, Failure] = {}
        self._pending: set[bytes] = set()
        self.path = None if path is None else Path(path)
        self._file: IO[str] | None = None
        if self.path is not None:
            try:
                self._file = self.path.open("a", encoding="utf-8")
            except OSError as exc:
                raise LedgerError(f"cannot open ledger file {self.path}: {exc}") from exc

    # -- recording ---------------------------------------------------------------------------------

    def invoke(self, value: bytes) -> None:
        """``value`` is being written: pending until :meth:`ack` or :meth:`fail`."""
        with self._lock:
            self._pending.add(value)
            self._write({"op": "invoke", "value": _b64(value)})

    def ack(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        """The broker acknowledged ``value`` at ``topic[partition]@offset``."""
        with self._lock:
            self._pending.discard(value)
            self._acks.setdefault(value, Ack(Position(topic, partition, offset), value))
            self._write({"op": "ok", "value": _b64(value), "topic": topic, "partition": partition, "offset": offset})

    def fail(self, value: bytes, error: str) -> None:
        """Writing ``value`` ended with ``error`` (the client gave up on it)."""
        with self._lock:
            self._pending.discard(value)
            self._failures.setdefault(value, Failure(value, error))
            self._write({"op": "fail", "value": _b64(value), "error": error})

    def _write(self, entry: dict[str, object]) -> None:
        if self._file is None:
            return
        entry["time"] = round(time.time(), 6)
        self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._file.flush()

    # -- reading -----------------------------------------------------------------------------------

    @property
    def acked(self) -> int:
        with self._lock:
            return len(self._acks)

    @property
    def failed(self) -> int:
        with self._lock:
            return len(self._failures)

    @property
    def pending(self) -> int:
        """Writes invoked and not yet acknowledged or failed."""
        with self._lock:
            return len(self._pending)

    def acks(self) -> list[Ack]:
        with self._lock:
            return list(self._acks.values())

    def failures(self) -> list[Failure]:
        with self._lock:
            return list(self._failures.values())

    def pending_values(self) -> list[bytes]:
        with self._lock:
            return sorted(self._pending)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Ledger:
        """The ledger a JSONL file records (in memory; the file is not appended to).

        Raises LedgerError naming the file and line of a malformed entry; a torn last line is skipped.
        """
        ledger = cls()
        source = Path(path)
        try:
            lines = source.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot read ledger file {source}: {exc}") from exc
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as exc:
                if number == len(lines):
                    break  # written by a process that was killed mid-line
                raise LedgerError(f"{source}:{number}: not JSON: {exc}") from exc
            try:
                _replay(ledger, entry)
            except (KeyError, TypeError, ValueError, binascii.Error) as exc:
                raise LedgerError(f"{source}:{number}: malformed ledger entry {line[:200]!r}: {exc!r}") from exc
        return ledger


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _replay(ledger: Ledger, entry: dict[str, object]) -> None:
    value = base64.b64decode(str(entry["value"]), validate=True)
    op = entry["op"]
    if op == "invoke":
        ledger.invoke(value)
    elif op == "ok":
        partition, offset = entry["partition"], entry["offset"]
        if not isinstance(partition, int) or not isinstance(offset, int):
            raise TypeError(f"partition and offset must be integers, got {partition!r} and {offset!r}")
        ledger.ack(str(entry["topic"]), partition, offset, value)
    elif op == "fail":
        ledger.fail(value, str(entry["error"]))
    else:
        raise ValueError(f"unknown op {op!r}; expected invoke, ok or fail")


def load(path: str | os.PathLike[str]) -> Ledger:
    """Same as :meth:`Ledger.load`."""
    return Ledger.load(path)


# -- the checker ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check` found. ``ok`` when there is no lost, moved, duplicate or conflicting record."""

    lost: list[Ack] = field(default_factory=list)
    #: Each acknowledged write read back elsewhere, with where it was read.
    moved: list[tuple[Ack, list[Position]]] = field(default_factory=list)
    #: Each value read at more than one position, with those positions.
    duplicates: list[tuple[bytes, list[Position]]] = field(default_factory=list)
    #: Each position read with more than one value, with those values.
    conflicts: list[tuple[Position, list[bytes]]] = field(default_factory=list)
    acknowledged: int = 0
    records_read: int = 0
    #: Distinct values read that were never acknowledged (allowed once each).
    unacknowledged_read: int = 0
    #: Of those, values the client reported as failed.
    failed_read: int = 0
    pending: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.moved or self.duplicates or self.conflicts)

    def summary(self, examples: int = SUMMARY_EXAMPLES) -> str:
        """One line of counts, then (when not ok) a line per anomaly naming its first ``examples`` cases."""
        counts = (
            f"{self.acknowledged} acknowledged, {self.records_read} records read, "
            f"{self.unacknowledged_read} unacknowledged values read ({self.failed_read} of them reported failed), "
            f"{self.pending} writes pending"
        )
        if self.ok:
            return f"ledger check OK: every acknowledged write read back once at its offset ({counts})"
        lines = [
            f"ledger check FAILED: {len(self.lost)} lost, {len(self.moved)} moved, {len(self.duplicates)} duplicated, "
            f"{len(self.conflicts)} conflicting ({counts})"
        ]

        def section(name: str, items: list[str], total: int) -> None:
            if items:
                more = f" ... and {total - len(items)} more" if total > len(items) else ""
                lines.append(f"  {name}: {'; '.join(items)}{more}")

        section("lost", [f"{_show(a.value)} acked at {a.position}" for a in self.lost[:examples]], len(self.lost))
        section(
            "moved",
            [f"{_show(a.value)} acked at {a.position}, read at {_where(ps)}" for a, ps in self.moved[:examples]],
            len(self.moved),
        )
        section(
            "duplicates",
            [f"{_show(v)} read at {_where(ps)}" for v, ps in self.duplicates[:examples]],
            len(self.duplicates),
        )
        section(
            "conflicts",
            [f"{p} read as {', '.join(_show(v) for v in vs)}" for p, vs in self.conflicts[:examples]],
            len(self.conflicts),
        )
        return "\n".join(lines)


def _show(value: bytes) -> str:
    return repr(value) if len(value) <= 40 else repr(value[:40]) + "..."


def _where(positions: list[Position]) -> str:
    return ", ".join(str(p) for p in positions)


def check(ledger: Ledger, read: Iterable[tuple[str, int, int, bytes]]) -> CheckResult:
    """Compare the acknowledged writes in ``ledger`` with every record ``read`` back (see the module doc).

    ``read`` should hold every record of the topics written, from the start of each partition.
    Runs in time linear in the ledger and the records.
    """
    distinct = {Read(*record) for record in read}
    positions_of: dict[bytes, list[Position]] = {}
    values_at: dict[Position, list[bytes]] = {}
    for record in sorted(distinct):
        position = Position(record.topic, record.partition, record.offset)
        positions_of.setdefault(record.value, []).append(position)
        values_at.setdefault(position, []).append(record.value)

    acks = ledger.acks()
    lost: list[Ack] = []
    moved: list[tuple[Ack, list[Position]]] = []
    for ack in acks:
        found = positions_of.get(ack.value)
        if not found:
            lost.append(ack)
        elif ack.position not in found:
            moved.append((ack, found))

    acked_values = {ack.value for ack in acks}
    failed_values = {failure.value for failure in ledger.failures()}
    unacknowledged = [v for v in positions_of if v not in acked_values]
    return CheckResult(
        lost=sorted(lost, key=lambda a: a.position),
        moved=sorted(moved, key=lambda m: m[0].position),
        duplicates=[(v, ps) for v, ps in positions_of.items() if len(ps) > 1],
        conflicts=[(p, vs) for p, vs in values_at.items() if len(vs) > 1],
        acknowledged=len(acks),
        records_read=len(distinct),
        unacknowledged_read=len(unacknowledged),
        failed_read=sum(1 for v in unacknowledged if v in failed_values),
        pending=ledger.pending,
    )
