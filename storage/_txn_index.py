"""The aborted-transaction index (``.txnindex``) of a segment, as Kafka's ``TransactionIndex``.

A read_committed consumer must drop the records of aborted transactions. It learns which
those are from the Fetch answer's ``aborted_transactions``, which the broker reads here: one
entry per transaction an ABORT marker ended, in the segment that holds the marker. The file is
a sequence of 34-byte entries in marker order (all integers big-endian)::

    offset  size  field
         0     2  version           int16: 0
         2     8  producerId        int64: the producer whose transaction was aborted
        10     8  firstOffset       int64: its first transactional batch's base offset
        18     8  lastOffset        int64: the ABORT marker's offset (strictly increasing)
        26     8  lastStableOffset  int64: the LSO once the marker was written: the first
                                           offset of the earliest transaction still open, else
                                           lastOffset + 1

The file exists only once a segment has an entry (Kafka creates it lazily too): a missing file
is an empty index. Entries live in memory and are written as they are added; ``flush`` fsyncs
them with the segment. After an unclean stop the index of every recovered segment is rebuilt
by replaying the log's transactions (``storage._recovery``), never trusted.

``lastStableOffset`` lets a lookup stop early: once an entry's LSO is at or past the end of the
fetched range, every transaction that could overlap the range has ended before it (or is still
open, and then not below the LSO a read_committed fetch stops at).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ._errors import CorruptIndexError, StorageError

ENTRY = struct.Struct(
    ">h"  # version
    "q"  # producerId
    "q"  # firstOffset
    "q"  # lastOffset
    "q"  # lastStableOffset
)
ENTRY_VERSION = 0


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, first offset, the marker's offset, and the LSO after it."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions whose ABORT marker lies in one segment, in marker order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] = []
        self._unsynced = False

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def load(self) -> None:
        """Read the file (a missing one is empty). Raises CorruptIndexError for a torn file, an
        unknown version, or markers out of order: the caller rebuilds the index from the log."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._entries = []
            return
        if len(data) % ENTRY.size:
            raise CorruptIndexError(self.path, f"size {len(data)} is not a multiple of the entry size {ENTRY.size}")
        entries: list[AbortedTxn] = []
        for version, *fields in ENTRY.iter_unpack(data):
            if version != ENTRY_VERSION:
                raise CorruptIndexError(self.path, f"entry {len(entries)} has version {version}, not {ENTRY_VERSION}")
            entry = AbortedTxn(*fields)
            if entries and entry.last_offset <= entries[-1].last_offset:
                raise CorruptIndexError(
                    self.path,
                    f"entry {len(entries)} ends at offset {entry.last_offset}, not after {entries[-1].last_offset}",
                )
            entries.append(entry)
        self._entries = entries

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry and write it (no fsync). Raises StorageError when its marker does not
        follow the last entry's, OSError for I/O failures."""
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise StorageError(
                f"{self.path}: an aborted transaction ending at offset {txn.last_offset} does not follow the last "
                f"entry, which ends at {self._entries[-1].last_offset}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, ENTRY.pack(ENTRY_VERSION, *txn))
        finally:
            os.close(fd)
        self._entries.append(txn)
        self._unsynced = True

    def extend(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            self.append(txn)

    def flush(self) -> None:
        """fsync the entries written since the last flush."""
        if not self._unsynced:
            return
        with contextlib.suppress(FileNotFoundError):  # never written, or reset to nothing
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._unsynced = False

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or past ``offset`` (a log truncation)."""
        keep = sum(1 for e in self._entries if e.last_offset < offset)
        if keep == len(self._entries):
            return
        del self._entries[keep:]
        self._rewrite()

    def reset(self) -> None:
        """Forget every entry and remove the file (before a rebuild)."""
        self._entries = []
        self.path.unlink(missing_ok=True)
        self._unsynced = False

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """The transactions that overlap ``[fetch_offset, upper_bound)``, and whether the search
        may stop here (an entry's LSO reached ``upper_bound``: later segments add nothing)."""
        found = []
        for entry in self._entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def _rewrite(self) -> None:
        if not self._entries:
            self.path.unlink(missing_ok=True)
            self._unsynced = False
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, len(self._entries) * ENTRY.size)
        finally:
            os.close(fd)
        self._unsynced = True


class OpenTransactions:
    """Replays a log's transactions (Kafka's producer state, reduced to what the index needs):
    which producer has a transaction open since which offset."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # producer id -> first offset

    def data(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch: it opens its producer's transaction unless one is open."""
        self.open.setdefault(producer_id, base_offset)

    def end(self, producer_id: int, marker_offset: int, *, commit: bool) -> AbortedTxn | None:
        """A marker: ends the producer's transaction; returns the index entry when it aborted one."""
        first = self.open.pop(producer_id, None)
        if first is None or commit:
            return None
        return AbortedTxn(producer_id, first, marker_offset, min(self.open.values(), default=marker_offset + 1))
