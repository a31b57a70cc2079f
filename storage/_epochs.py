"""The leader-epoch cache: at which offset each leader epoch started (Kafka KIP-101, KIP-279).

Every leader change starts a new epoch at the new leader's log end offset. Knowing where
each epoch started lets a returning replica ask the leader "where did my last epoch end?"
(OffsetsForLeaderEpoch) and truncate exactly the divergent tail, never blindly to its
high watermark.

The cache lives in ``leader-epoch-checkpoint`` in the partition directory, in Kafka's text
checkpoint format, so a directory written by Kafka reads here and the other way round::

    0            version
    3            number of entries
    0 0          epoch, start offset
    2 1200
    5 1873

Invariants: epochs strictly increase, and so do start offsets; every epoch is >= 0. Every
mutation that changes the entries rewrites the file atomically (temp file, rename) before the
change is visible in memory. Truncations also wait for the disk (fsync of the file and the
directory). A new epoch (``assign``) does not: a new leader, or a follower's first batch of an
epoch, must not wait for fsyncs on the event loop (thousands of partitions change leaders at
once in a failover), so ``sync`` fsyncs it later, and the partition log calls it before its
recovery point moves past the epoch's start. A power loss can then lose only entries past the
recovery point, and recovery rebuilds those from the batches it re-reads (as Kafka does since
KAFKA-15046). A missing or unparseable file is not an error: the owner rebuilds the cache from the
``partitionLeaderEpoch`` of the log's batch headers (``LeaderEpochCache.load``).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from ._checkpoint import fsync_file, write_atomically
from ._errors import StorageError
from ._files import LEADER_EPOCH_CHECKPOINT
from .records import NO_OFFSET, BatchHeader, LeaderEpoch, Offset

log = logging.getLogger("strait.storage")

UNDEFINED_EPOCH = LeaderEpoch(-1)
UNDEFINED_EPOCH_OFFSET = NO_OFFSET
_VERSION = 0


class EpochEntry(NamedTuple):
    epoch: LeaderEpoch
    start_offset: Offset


class LeaderEpochCache:
    """The ordered ``(epoch, start_offset)`` entries of one partition, persisted on every change.

    Thread-safe: an internal lock serialises mutations (the partition log also calls it
    under its own lock). Mutations raise OSError when the file cannot be written; the
    entries in memory are then unchanged.
    """

    def __init__(self, path: Path, entries: Iterable[EpochEntry] = ()) -> None:
        """A cache over ``entries`` backed by ``path``; nothing is read or written here.

        Raises ValueError when the entries break the invariants (see the module docstring).
        """
        self.path = path
        self._entries = [EpochEntry(e, o) for e, o in entries]
        _check_monotonic(self._entries, path)
        self._lock = threading.Lock()
        self._unsynced = False  # the file on disk may be older than the entries (assign without fsync)

    @classmethod
    def load(cls, directory: Path, batch_headers: Callable[[], Iterable[BatchHeader]]) -> tuple[LeaderEpochCache, bool]:
        """Read ``leader-epoch-checkpoint`` in ``directory``; returns ``(cache, rebuilt)``.

        When the file is missing or unparseable, the entries are rebuilt from
        ``batch_headers()`` (called only then): an epoch starts at the base offset of its
        first batch, and batches without an epoch (-1) are skipped. A rebuilt cache is
        written back when it has entries, or when it replaces an unparseable file. Raises
        OSError when the file cannot be read (other than missing) or written.
        """
        path = directory / LEADER_EPOCH_CHECKPOINT
        try:
            return cls(path, read_epoch_checkpoint(path)), False
        except FileNotFoundError:
            corrupt = False
        except StorageError as exc:
            log.warning("%s; rebuilding the leader epochs from the batch headers", exc)
            corrupt = True
        cache = cls(path, rebuild_entries(batch_headers()))
        if cache._entries or corrupt:
            cache._persist(cache._entries)
        return cache, True

    # -- queries ---------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> LeaderEpoch:
        """The newest epoch, or -1 when the cache is empty."""
        entries = self._entries
        return entries[-1].epoch if entries else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    def epoch_for_offset(self, offset: Offset) -> LeaderEpoch:
        """The epoch the record at ``offset`` was written in: the entry with the largest start
        offset <= ``offset``. Returns -1 when ``offset`` lies before the first entry."""
        entries = self._entries
        i = bisect.bisect_right([e.start_offset for e in entries], offset)
        return entries[i - 1].epoch if i else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: LeaderEpoch, log_end_offset: Offset) -> tuple[LeaderEpoch, Offset]:
        """``(epoch, end offset)`` for OffsetsForLeaderEpoch, as Kafka answers it.

        - ``requested_epoch`` is -1 (undefined) or above every known epoch, or the cache is
          empty: ``(-1, -1)``.
        - it is the latest epoch, still being written to: ``(latest, log_end_offset)``.
        - it is below the first known epoch (its data was deleted): ``(requested_epoch,
          start of the first entry)``, so a follower replicates from the leader's history.
        - otherwise: the largest known epoch E <= ``requested_epoch`` and the start offset
          of the first entry after E, which is where E ended.
        """
        with self._lock:
            entries = self._entries
            if requested_epoch < 0 or not entries or requested_epoch > entries[-1].epoch:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == entries[-1].epoch:
                return requested_epoch, log_end_offset
            i = bisect.bisect_right([e.epoch for e in entries], requested_epoch)  # entries[i] is the first later epoch
            if i == 0:
                return requested_epoch, entries[0].start_offset
            return entries[i - 1].epoch, entries[i].start_offset

    # -- mutations -------------------------------------------------------------------------

    def assign(self, epoch: LeaderEpoch, start_offset: Offset) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether an entry was added.

        Only an epoch newer than the latest is added; the latest epoch again is ignored, and
        an older one is ignored with a warning (never an error: a stale caller must not fail
        an append). Entries starting at or after ``start_offset`` are removed first, so the
        start offsets keep increasing (Kafka's rule). A negative epoch means "no epoch" and
        is ignored. Raises ValueError for a negative ``start_offset``.
        """
        if start_offset < 0:
            raise ValueError(f"{self.path}: leader epoch {epoch} cannot start at negative offset {start_offset}")
        if epoch < 0:
            return False
        with self._lock:
            latest = self._entries[-1] if self._entries else None
            if latest is not None and epoch <= latest.epoch:
                if epoch < latest.epoch:
                    log.warning(
                        "%s: ignoring leader epoch %d at offset %d: older than the latest epoch %d (from offset %d)",
                        self.path,
                        epoch,
                        start_offset,
                        latest.epoch,
                        latest.start_offset,
                    )
                return False
            kept = [e for e in self._entries if e.start_offset < start_offset]
            if len(kept) != len(self._entries):
                log.warning(
                    "%s: leader epoch %d starts at offset %d, before epochs %s; removing them",
                    self.path,
                    epoch,
                    start_offset,
                    self._entries[len(kept) :],
                )
            self._replace([*kept, EpochEntry(epoch, start_offset)], sync=False)
            return True

    def truncate_from_end(self, end_offset: Offset) -> bool:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated to it).

        Returns whether anything was removed.
        """
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < end_offset]
            if len(kept) == len(self._entries):
                return False
            self._replace(kept)
            return True

    def truncate_from_start(self, start_offset: Offset) -> bool:
        """The log start offset advanced to ``start_offset``: drop the entries wholly before it
        and move the start of the entry that contains it up to it. Returns whether anything changed."""
        with self._lock:
            entries = self._entries
            i = bisect.bisect_right([e.start_offset for e in entries], start_offset)  # entries[: i] start <= it
            if i == 0 or (i == 1 and entries[0].start_offset == start_offset):
                return False
            containing = entries[i - 1]
            self._replace([EpochEntry(containing.epoch, start_offset), *entries[i:]])
            return True

    def clear(self) -> bool:
        """Remove every entry (the log was emptied). Returns whether there were any."""
        with self._lock:
            if not self._entries:
                return False
            self._replace([])
            return True

    def copy_from(self, other: LeaderEpochCache) -> None:
        """Take ``other``'s entries, written and fsynced to this cache's own file (a moved replica's
        future log taking the current log's epochs at the swap)."""
        entries = list(other.entries)
        with self._lock:
            self._replace(entries)

    def sync(self) -> None:
        """fsync what ``assign`` wrote without waiting for the disk (nothing when all is synced)."""
        with self._lock:
            if self._unsynced:
                fsync_file(self.path)
                self._unsynced = False

    def _replace(self, entries: list[EpochEntry], *, sync: bool = True) -> None:
        self._persist(entries, sync=sync)
        self._entries = entries

    def _persist(self, entries: list[EpochEntry], *, sync: bool = True) -> None:
        lines = [str(_VERSION), str(len(entries)), *(f"{e.epoch} {e.start_offset}" for e in entries)]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode(), sync=sync)
        self._unsynced = not sync

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path}, {self._entries})"


def read_epoch_checkpoint(path: Path) -> list[EpochEntry]:
    """The entries of a leader-epoch checkpoint file.

    Raises FileNotFoundError when it is missing and StorageError when it is malformed: a
    bad version, a count that does not match the lines, or entries that are not increasing.
    """
    raw = path.read_bytes()
    try:
        lines = raw.decode("ascii").splitlines()
        if lines[0].strip() != str(_VERSION):
            raise StorageError(f"{path}: unsupported leader epoch checkpoint version {lines[0]!r}")
        count = int(lines[1])
        body = lines[2:]
        if count < 0 or len(body) < count or any(line.strip() for line in body[count:]):
            raise StorageError(f"{path}: header says {count} entries, found {len(body)} lines")
        entries = []
        for line in body[:count]:
            epoch, offset = line.split()
            entries.append(EpochEntry(LeaderEpoch(int(epoch)), Offset(int(offset))))
        _check_monotonic(entries, path)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise StorageError(f"{path}: malformed leader epoch checkpoint ({exc})") from exc
    return entries


def rebuild_entries(headers: Iterable[BatchHeader]) -> list[EpochEntry]:
    """Epoch entries from batch headers in offset order: each epoch newer than the last one
    seen starts at the base offset of its first batch; -1 (no epoch) and older epochs are skipped."""
    entries: list[EpochEntry] = []
    for header in headers:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
            entries.append(EpochEntry(epoch, header.base_offset))
    return entries


def _check_monotonic(entries: list[EpochEntry], path: Path) -> None:
    if entries and (entries[0].epoch < 0 or entries[0].start_offset < 0):
        raise ValueError(f"{path}: leader epoch entry {tuple(entries[0])} is negative")
    for prev, cur in itertools.pairwise(entries):
        if cur.epoch <= prev.epoch or cur.start_offset <= prev.start_offset:
            raise ValueError(f"{path}: leader epoch entry {tuple(cur)} does not follow {tuple(prev)}")
