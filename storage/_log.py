"""The partition log: an ordered list of segments with offsets, reads, truncation and retention.

Invariants: segments are sorted by base offset and do not overlap; the last one is active
(the only one appended to); ``log_start_offset <= high_watermark <= log_end_offset``;
``recovery_point`` is the offset below which everything has been fsynced; ``epochs`` (the
leader-epoch cache) has no entry past the log end offset and none before the log start
offset. Mutations are
serialised by a lock so that a broker may call from worker threads; reads work on a
snapshot of the segment list and never block appends. Compaction (``compact``, in
``_cleaner``) reads and rewrites without the lock and takes it only to swap segments in.

The module is about 600 lines because it is one noun, Kafka's ``UnifiedLog``: every operation
here takes the same lock over the same segment list, and splitting them would only spread
that invariant over several files.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from ._checkpoint import fsync_dir
from ._cleaner import CleanerRun, CleanResult, read_cleaner_checkpoint, write_cleaner_checkpoint
from ._config import LogConfig
from ._epochs import LeaderEpochCache
from ._errors import (
    InvalidOffsetError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    RecordFormatError,
    RecordTooLargeError,
    StorageError,
)
from ._faults import FaultPoints
from ._files import LEADER_EPOCH_CHECKPOINT, TopicPartition
from ._segment import FileSlice, LogSegment
from ._txn_index import AbortedTxn
from .records import LOG_OVERHEAD, PREFIX, BatchHeader, LeaderEpoch, Offset, check_batch, crc_of, read_header
from .records._batch import ATTR_LOG_APPEND_TIME, CRC_POS, HEADER, NO_PARTITION_LEADER_EPOCH
from .records._offsets import FIRST_OFFSET

log = logging.getLogger("strait.storage")

Clock = Callable[[], int]  # milliseconds since the epoch
_CRC = struct.Struct(">I")
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: not under the CRC


class AppendInfo(NamedTuple):
    """What an append did: a NamedTuple, as cheap to make as a tuple (one per write)."""

    base_offset: Offset
    last_offset: Offset
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: Offset


class PartitionLog:
    """One partition's log: offsets are ``Offset``s and leader epochs ``LeaderEpoch``s."""

    def __init__(
        self,
        directory: Path,
        tp: TopicPartition,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: Offset,
        recovery_point: Offset,
        high_watermark: Offset,
        epochs: LeaderEpochCache,
        faults: FaultPoints,
        clock: Clock,
        on_io_error: Callable[[OSError], None] | None = None,
    ) -> None:
        """Take ownership of loaded ``segments`` and ``epochs`` (see ``load_log``/``create_log``)."""
        if not segments:
            raise ValueError(f"{directory}: a log needs at least one segment")
        self.dir = directory
        self.tp = tp
        self.config = config
        self.epochs = epochs
        self._segments = segments
        self._faults = faults
        self._clock = clock
        self._on_io_error = on_io_error
        self._lock = threading.RLock()
        self._cleaning = threading.Lock()  # one compaction at a time
        self._truncations = 0  # a compaction that sees this change while it runs is abandoned
        self._cleaner_checkpoint = read_cleaner_checkpoint(directory)
        self._offline: LogDirOfflineError | None = None
        self._pending_deletes: list[tuple[int, LogSegment]] = []  # (due ms, segment)
        #: (due ms, dir, its segments): the dirs a move to another log dir left behind, renamed
        #: ``-delete``; their descriptors stay open for fetches in flight until they are due.
        self._retired_dirs: list[tuple[int, Path, list[LogSegment]]] = []
        self._unflushed_records = 0
        self._first_unflushed_ms: int | None = None
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self.log_end_offset)
        self._high_watermark = self.log_start_offset
        self.high_watermark = high_watermark

    # -- state -----------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> Offset:
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def high_watermark(self) -> Offset:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: Offset) -> None:
        """Set by the replica manager; clamped to ``[log_start_offset, log_end_offset]``."""
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)

    @property
    def latest_epoch(self) -> LeaderEpoch:
        """The newest leader epoch in the epoch cache, or -1 when there is none."""
        return self.epochs.latest_epoch

    @property
    def is_offline(self) -> bool:
        return self._offline is not None

    @property
    def cleaner_checkpoint(self) -> int | None:
        """The offset compaction's dirty section starts at (``cleaner.offset``), or None before any."""
        return self._cleaner_checkpoint

    @property
    def truncations(self) -> int:
        """How many times the log was truncated: a copy of it (a replica move) that sees this
        change while it runs starts over."""
        return self._truncations

    @property
    def lock(self) -> threading.RLock:
        """The lock every mutation takes (appends among them); a replica move swaps under it."""
        return self._lock

    @contextlib.contextmanager
    def compaction_paused(self) -> Iterator[None]:
        """Wait for a compaction in progress to end and start none until the block exits."""
        with self._cleaning:
            yield

    @contextlib.contextmanager
    def _io(self) -> Iterator[None]:
        """Run a storage operation; an OSError takes the log dir offline (once, via its owner)."""
        if self._offline is not None:
            raise self._offline
        try:
            yield
        except OSError as exc:
            self.mark_offline(exc)
            assert self._offline is not None
            raise self._offline from exc

    def mark_offline(self, cause: BaseException | None = None) -> None:
        """Refuse every further operation. Called by the log dir's owner, or on our own I/O error."""
        if self._offline is not None:
            return
        self._offline = LogDirOfflineError(self.dir.parent, cause)
        if isinstance(cause, OSError) and self._on_io_error is not None:
            self._on_io_error(cause)

    # -- appends ---------------------------------------------------------------------------

    def append(
        self,
        batch: bytes | bytearray | memoryview,
        *,
        leader_epoch: LeaderEpoch = NO_PARTITION_LEADER_EPOCH,
        assign_offsets: bool = True,
        validate: bool = True,
    ) -> AppendInfo:
        """Append one batch and return the offsets it got.

        With ``assign_offsets`` (a leader) the batch is placed at the log end offset: only
        baseOffset and partitionLeaderEpoch are rewritten, which the CRC does not cover
        (LogAppendTime topics also set the timestamp and recompute the CRC, as Kafka does).
        Without it (a follower or mirror) the batch keeps its offsets, which must start at
        or past the log end offset, else InvalidOffsetError: a compacted leader's log has
        offsets no batch holds, and a copy of it has the same holes (as in Kafka). ``validate`` checks length, magic and
        CRC-32C first (CorruptBatchError); nothing is decompressed. Raises
        RecordTooLargeError above ``max.message.bytes`` and LogDirOfflineError on I/O failure.
        """
        size = len(batch)
        if size > self.config.max_message_bytes:
            raise RecordTooLargeError(size, self.config.max_message_bytes)
        header = check_batch(batch) if validate else read_header(batch)
        if header.batch_length + LOG_OVERHEAD != size:
            raise RecordFormatError(f"expected one batch of {header.size} bytes, got {size} bytes")
        # The hot path of every write: ``_io``'s checks written out (a generator-based context
        # manager costs more than the rest of the bookkeeping), no header copies.
        with self._lock:
            if self._offline is not None:
                raise self._offline
            try:
                return self._append_locked(batch, header, leader_epoch, assign_offsets)
            except OSError as exc:
                self.mark_offline(exc)
                assert self._offline is not None
                raise self._offline from exc

    def _append_locked(
        self,
        batch: bytes | bytearray | memoryview,
        header: BatchHeader,
        leader_epoch: LeaderEpoch,
        assign_offsets: bool,
    ) -> AppendInfo:
        now = self._clock()
        log_append_time = -1
        leo = self._segments[-1].next_offset
        epoch = leader_epoch
        if assign_offsets and self.config.message_timestamp_type == "LogAppendTime":
            # The timestamp is under the CRC: this path must copy and re-checksum.
            buf = bytearray(batch)
            _stamp_log_append_time(buf, header, now)
            log_append_time = now
            batch, header = buf, read_header(buf)
        elif not assign_offsets:
            if header.base_offset < leo:
                raise InvalidOffsetError(
                    f"{self.tp}: batch starts at offset {header.base_offset} but the log ends at {leo}"
                )
            if leader_epoch == NO_PARTITION_LEADER_EPOCH:
                epoch = header.partition_leader_epoch
        # Only the 16-byte prefix (baseOffset, batchLength, partitionLeaderEpoch) changes, and
        # the CRC does not cover it: write a new prefix and the producer's bytes as they are.
        base = leo if assign_offsets else header.base_offset
        last = Offset(base + header.last_offset_delta)
        if epoch > self.epochs.latest_epoch:
            # Before the batch, as Kafka: an entry without its batch is dropped on load
            # (it is at the log end), a batch without its entry would stay wrong.
            self.epochs.assign(epoch, base)
        size = len(batch)
        segment = self._segments[-1]
        if segment.should_roll(size, last, header.max_timestamp, now):
            segment = self._roll(now)
        prefix = _PREFIX.pack(base, header.batch_length, epoch)
        segment.append(prefix, memoryview(batch)[_PREFIX.size :], last, header.max_timestamp)
        self._after_append(header.records_count, now)
        return AppendInfo(base, last, log_append_time, self.log_start_offset)

    def append_batches(self, data: bytes | bytearray | memoryview, *, leader_epoch: LeaderEpoch | None = None) -> int:
        """Append fetched batches keeping their offsets (a follower or mirror); returns how many.

        ``data`` is record batches back to back, as a fetch response carries them. Each is
        validated (length, magic, CRC-32C) and appended as ``append(assign_offsets=False)``
        does, its partitionLeaderEpoch feeding the epoch cache. With ``leader_epoch`` (a
        mirror's target leader, whose epochs are not the source's) each batch is stored with
        that partitionLeaderEpoch instead: only the prefix changes, which the CRC does not
        cover. A trailing batch cut short (fetches may cut the last one) is ignored. Batches
        whose last offset is below the log end offset are skipped: the log has them. A batch
        may start past the log end offset (the source was compacted there). Raises
        InvalidOffsetError for a batch that ends past the log end while starting below it; the
        batches before it stay appended. Raises
        CorruptBatchError, RecordTooLargeError and LogDirOfflineError as ``append`` does, and
        ValueError for a negative ``leader_epoch``.
        """
        if leader_epoch is not None and leader_epoch < 0:
            raise ValueError(f"{self.tp}: leader epoch {leader_epoch} is negative")
        epoch = NO_PARTITION_LEADER_EPOCH if leader_epoch is None else leader_epoch
        view = memoryview(data)
        end = len(view)
        pos = 0
        appended = 0
        with self._lock, self._io():
            while end - pos >= PREFIX.size:
                size = PREFIX.unpack_from(view, pos)[1] + LOG_OVERHEAD
                if size > end - pos:
                    break  # a partial last batch: the next fetch brings it whole
                header = check_batch(view, pos, pos + size)
                pos += size
                if header.last_offset < self.log_end_offset:
                    continue
                self.append(view[pos - size : pos], leader_epoch=epoch, assign_offsets=False, validate=False)
                appended += 1
        return appended

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self._lock, self._io():
            if self._segments[-1].size == 0:
                return self._segments[-1]
            return self._roll(self._clock())

    def _roll(self, now: int) -> LogSegment:
        self._faults.hit("roll")
        old = self._segments[-1]
        old.seal_time_index()
        new = LogSegment.create(self.dir, self.log_end_offset, self.config, self._faults, now)
        self._segments.append(new)
        # Kafka flushes a rolled segment in the background; we do it here, off the append
        # path of every other batch, so the recovery point moves to the new segment's base.
        old.flush()
        self.epochs.sync()  # before the recovery point passes the epochs' starts
        self.recovery_point = max(self.recovery_point, new.base_offset)
        fsync_dir(self.dir)
        return new

    def _after_append(self, records: int, now: int) -> None:
        if self.config.fsync_every_append:
            self._flush_locked(indexes=False)
            return
        self._unflushed_records += records
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        if self._unflushed_records >= self.config.flush_messages:
            self._flush_locked()

    def flush(self) -> None:
        """fsync everything appended so far; the recovery point becomes the log end offset."""
        with self._lock, self._io():
            self._flush_locked()

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if the oldest unflushed append is older than ``flush.ms``; returns whether it did."""
        with self._lock, self._io():
            first = self._first_unflushed_ms
            if first is None or now_ms - first < self.config.flush_ms:
                return False
            self._flush_locked()
            return True

    def _flush_locked(self, *, indexes: bool = True) -> None:
        for segment in self._segments:
            if segment.next_offset >= self.recovery_point:  # >=: a segment truncated to it has unflushed index changes
                segment.flush(indexes=indexes)
        self.epochs.sync()  # before the recovery point passes the epochs' starts
        self.recovery_point = self.log_end_offset
        self._unflushed_records = 0
        self._first_unflushed_ms = None

    # -- reads -----------------------------------------------------------------------------

    def read(
        self, offset: Offset, max_bytes: int, *, max_offset: Offset | None = None, min_one: bool = True
    ) -> list[FileSlice]:
        """Whole batches from the one that contains ``offset``, up to ``max_bytes`` in all.

        ``max_offset`` (exclusive) bounds what is visible, e.g. the high watermark. Returns
        an empty list at the log end. Raises OffsetOutOfRangeError outside
        ``[log_start_offset, log_end_offset]``. Slices may span segments.
        """
        with self._io():
            segments = self._segments[:]
            start, end = self.log_start_offset, segments[-1].next_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(offset, start, end)
            slices: list[FileSlice] = []
            budget = max_bytes
            i = max(0, bisect.bisect_right([s.base_offset for s in segments], offset) - 1)
            for segment in segments[i:]:
                if max_offset is not None and segment.base_offset >= max_offset:
                    break
                piece = segment.read(offset, budget, max_offset, min_one=min_one and not slices)
                if piece is None:
                    if segment.next_offset > offset and slices and segment.size > 0:
                        break  # the next batch did not fit (compaction may leave a segment empty: skip it)
                    continue
                slices.append(piece)
                budget -= piece.length
                if budget <= 0 or piece.position + piece.length < segment.size:
                    break  # the segment's next batch did not fit: a later, smaller one must not be read past it
                offset = segment.next_offset
            return slices

    def read_bytes(self, offset: Offset, max_bytes: int, *, max_offset: Offset | None = None) -> bytes:
        """``read`` joined into one bytes object (tools and tests)."""
        return b"".join(s.read() for s in self.read(offset, max_bytes, max_offset=max_offset))

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[Offset, int] | None:
        """``(offset, timestamp)`` of the first record with a timestamp >= ``timestamp``, or None."""
        with self._io():
            for segment in self._segments[:]:
                if segment.max_timestamp >= timestamp and segment.next_offset > self.log_start_offset:
                    found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                    if found is not None:
                        return found
            return None

    def batch_headers(self, offset: Offset = FIRST_OFFSET) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """Headers of the batches from the one containing ``offset`` (tools, tests, mirror)."""
        for segment in self._segments[:]:
            if segment.next_offset <= offset:
                continue
            found = segment.find_batch(offset)
            if found is None:
                continue
            for pos, header in segment.headers(found[0]):
                yield segment, pos, header

    # -- aborted transactions --------------------------------------------------------------

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index a transaction an ABORT marker just appended at ``txn.last_offset`` ended, in the
        segment that holds the marker. Raises StorageError when the marker is not in the log or
        not after the segment's last entry, LogDirOfflineError on I/O failure."""
        with self._lock, self._io():
            segments = self._segments
            if not segments[0].base_offset <= txn.last_offset < segments[-1].next_offset:
                raise StorageError(
                    f"{self.tp}: no marker at offset {txn.last_offset} to index, the log holds "
                    f"{segments[0].base_offset}..{segments[-1].next_offset - 1}"
                )
            i = bisect.bisect_right([s.base_offset for s in segments], txn.last_offset) - 1
            segments[i].txn_index.append(txn)

    def collect_aborted_txns(self, fetch_offset: Offset, upper_bound: Offset) -> list[AbortedTxn]:
        """The aborted transactions that overlap ``[fetch_offset, upper_bound)``, as a
        read_committed Fetch answers them: from the segment holding ``fetch_offset`` on, until an
        entry's last stable offset reaches ``upper_bound``. Reads memory only: no lock, a
        snapshot of the segment list (every read_committed fetch of every partition calls it)."""
        segments = self._segments[:]
        i = max(0, bisect.bisect_right(segments, fetch_offset, key=_base_offset) - 1)
        found: list[AbortedTxn] = []
        for segment in segments[i:]:
            if not len(segment.txn_index):
                continue
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += entries
            if complete:
                break
        return found

    # -- leader epochs ---------------------------------------------------------------------

    def assign_epoch(self, epoch: LeaderEpoch) -> bool:
        """A new leader starts ``epoch`` at the log end offset; returns whether it was recorded.

        An epoch not newer than the latest is ignored (an older one with a warning). Raises
        LogDirOfflineError when the checkpoint cannot be written.
        """
        with self._lock, self._io():
            return self.epochs.assign(epoch, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: LeaderEpoch) -> tuple[LeaderEpoch, Offset]:
        """``(epoch, end offset)`` for OffsetsForLeaderEpoch (``LeaderEpochCache.end_offset_for``)
        with the current log end offset; ``(-1, -1)`` when undefined. Raises LogDirOfflineError."""
        with self._lock, self._io():
            return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # -- truncation and deletion -----------------------------------------------------------

    def truncate_to(self, offset: Offset) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed.

        Truncation is by whole batches: an offset inside a batch removes that batch too, so
        the new log end offset may be below ``offset``. An offset at or past the log end is a
        no-op. Below the first segment the log is emptied and restarts at ``offset``; the log
        start offset never stays above the new log end offset.
        """
        with self._lock, self._io():
            if offset >= self.log_end_offset:
                return 0
            self._faults.hit("truncate")
            if offset < self._segments[0].base_offset:
                return self._truncate_fully_locked(offset)
            removed = 0
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                removed += seg.size
                seg.delete_files()
            removed += self._segments[-1].truncate_to(offset)
            self._after_truncate()
            # After the segments, so that a crash in between leaves entries that load drops.
            self.epochs.truncate_from_end(self.log_end_offset)
            return removed

    def truncate_fully_and_start_at(self, offset: Offset) -> int:
        """Delete every segment and restart the empty log at ``offset``; returns bytes removed."""
        with self._lock, self._io():
            self._faults.hit("truncate")
            return self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: Offset) -> int:
        removed = 0
        for seg in self._segments:
            removed += seg.size
            seg.delete_files()
        new = LogSegment.create(self.dir, offset, self.config, self._faults, self._clock())
        self._segments = [new]
        self.log_start_offset = offset
        self._after_truncate()
        self.epochs.clear()
        return removed

    def _after_truncate(self) -> None:
        leo = self.log_end_offset
        self.recovery_point = min(self.recovery_point, leo)
        self._high_watermark = min(self._high_watermark, leo)
        self.log_start_offset = min(self.log_start_offset, leo)
        self._truncations += 1
        if self._cleaner_checkpoint is not None and self._cleaner_checkpoint > leo:
            # Records appended from here on are dirty: a checkpoint above them would let a
            # tombstone outlive the values it deletes.
            write_cleaner_checkpoint(self.dir, leo)
            self._cleaner_checkpoint = leo

    def delete_records_before(self, offset: Offset) -> Offset:
        """Advance the log start offset to ``offset`` (DeleteRecords); returns the new start.

        Whole segments below the new start are deleted (after file.delete.delay.ms). Raises
        OffsetOutOfRangeError past the high watermark.
        """
        with self._lock, self._io():
            if offset > self._high_watermark or offset < 0:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self._high_watermark)
            self.log_start_offset = max(self.log_start_offset, offset)
            self._delete_segments_locked(lambda seg, nxt: nxt is not None and nxt.base_offset <= offset)
            self.epochs.truncate_from_start(self.log_start_offset)
            return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes; returns how many.

        The active segment is never deleted by size; by time it is rolled first, as Kafka
        does, when all of it is past retention. The log start offset advances to the first
        remaining segment. A log whose cleanup.policy lacks delete (compact only) keeps
        everything: returns 0.
        """
        with self._lock, self._io():
            deleted = 0
            if not self.config.deletes:
                return deleted
            retention_ms = self.config.retention_ms
            if retention_ms >= 0:
                active = self._segments[-1]
                if active.size > 0 and now_ms - active.max_timestamp > retention_ms:
                    self._roll(now_ms)
                deleted += self._delete_segments_locked(
                    lambda seg, nxt: nxt is not None and now_ms - seg.max_timestamp > retention_ms
                )
            limit = self.config.retention_bytes
            if limit >= 0:
                excess = self.size_bytes - limit

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    nonlocal excess
                    if nxt is None or excess < seg.size:
                        return False
                    excess -= seg.size
                    return True

                deleted += self._delete_segments_locked(over_size)
            return deleted

    def _delete_segments_locked(self, should_delete: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        """Delete the leading segments for which ``should_delete(segment, next)`` holds."""
        count = 0
        while len(self._segments) > 1 and should_delete(self._segments[0], self._segments[1]):
            seg = self._segments.pop(0)
            seg.rename_to_deleted()
            self._pending_deletes.append((self._clock() + self.config.file_delete_delay_ms, seg))
            count += 1
        if count:
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self._high_watermark = max(self._high_watermark, self.log_start_offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            self.epochs.truncate_from_start(self.log_start_offset)
        return count

    def compact(self, now_ms: int, *, force: bool = False) -> CleanResult:
        """Compact the segments before the active one: keep the latest record of each key.

        Runs only for ``cleanup.policy`` with compact, and (unless ``force``) when the dirty
        ratio is above ``min.cleanable.dirty.ratio`` or a cleaned tombstone's delete horizon
        has passed; the result's ``skipped`` says why it did not run. Offsets never change;
        offsets at or above the high watermark and records newer than
        ``min.compaction.lag.ms`` are not compacted. Reading and rewriting happen without the
        log's lock (appends and reads go on); the swap takes it. A truncation during the
        run abandons it. Replaced segments are deleted after ``file.delete.delay.ms``.
        Raises LogDirOfflineError on I/O failure (recovery finishes or rolls back the swap)
        and CorruptBatchError / RecordFormatError for a batch it cannot read (nothing is
        swapped). Blocks while another compaction of this log runs.
        """
        with self._cleaning, self._io():
            with self._lock:
                run = CleanerRun(
                    self.dir,
                    self._segments,
                    self.config,
                    log_start_offset=self.log_start_offset,
                    high_watermark=self._high_watermark,
                    checkpoint=self._cleaner_checkpoint,
                    now_ms=now_ms,
                    faults=self._faults,
                )
                truncations = self._truncations
            with run:
                skipped = run.plan(force=force)
                if skipped is not None:
                    return run.result(skipped)
                run.build()
                with self._lock:
                    if self._truncations != truncations or not run.fits(self._segments):
                        return run.result("abandoned: the log was truncated or lost segments during the run")
                    try:
                        run.swap(self._segments)
                    finally:
                        due = self._clock() + self.config.file_delete_delay_ms
                        self._pending_deletes += [(due, seg) for seg in run.retired]
                    self._faults.hit("fsync")
                    write_cleaner_checkpoint(self.dir, run.end_offset)
                    self._cleaner_checkpoint = run.end_offset
                return run.result()

    def purge_deleted(self, now_ms: int, *, everything: bool = False) -> int:
        """Unlink ``.deleted`` segments, and remove dirs a move left behind, whose delay has
        passed; returns how many segments and dirs."""
        with self._lock, self._io():
            due = [(t, s) for t, s in self._pending_deletes if everything or t <= now_ms]
            for _, seg in due:
                seg.delete_files()
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (everything or t <= now_ms)]
            return len(due) + self._purge_retired_dirs(now_ms, everything=everything)

    def _purge_retired_dirs(self, now_ms: int, *, everything: bool) -> int:
        """Close and remove the dirs a move left behind once due. They are on another log dir than
        this log's: a failure to remove one is logged, not this log's I/O error (a leftover
        ``-delete`` dir is removed at the next load)."""
        due = [entry for entry in self._retired_dirs if everything or entry[0] <= now_ms]
        for entry in due:
            _, directory, segments = entry
            for seg in segments:
                seg.close()
            try:
                shutil.rmtree(directory)
            except OSError as exc:
                log.warning("%s: could not remove %s, left by a move to another log dir: %s", self.tp, directory, exc)
            self._retired_dirs.remove(entry)
        return len(due)

    def start_over_at(self, offset: Offset) -> None:
        """Empty the log and restart it at ``offset`` at once, with no delay (a replica move's
        future log, which nothing reads, when it must copy again)."""
        with self._lock, self._io():
            for seg in self._segments:
                seg.delete_files()
            for _, seg in self._pending_deletes:
                seg.delete_files()
            self._pending_deletes = []
            self._segments = [LogSegment.create(self.dir, offset, self.config, self._faults, self._clock())]
            self.log_start_offset = offset
            self._after_truncate()
            self.epochs.clear()

    def advance_to(self, offset: Offset) -> None:
        """End the log at ``offset`` with no batch between its end and ``offset`` (a copy of a log
        whose compaction emptied its last segment): a new empty active segment starts there."""
        with self._lock, self._io():
            if offset <= self.log_end_offset:
                return
            if self._segments[-1].size == 0:
                self._segments.pop().delete_files()
            self._segments.append(LogSegment.create(self.dir, offset, self.config, self._faults, self._clock()))
            fsync_dir(self.dir)

    def drop_segments_below(self, offset: Offset) -> int:
        """Delete at once the segments wholly below ``offset`` and start the log there (a future
        log catching up with the current log's start; nothing reads it). Returns how many."""
        with self._lock, self._io():
            count = self._delete_segments_locked(lambda seg, nxt: nxt is not None and nxt.base_offset <= offset)
            if offset > self.log_start_offset:
                self.log_start_offset = min(offset, self.log_end_offset)
                self.epochs.truncate_from_start(self.log_start_offset)
            for _, seg in self._pending_deletes:
                seg.delete_files()
            self._pending_deletes = []
            return count

    def take_over(
        self,
        future: PartitionLog,
        directory: Path,
        retired_dir: Path,
        on_io_error: Callable[[OSError], None] | None,
    ) -> None:
        """Become ``future``, a copy of this log that a replica move has renamed ``directory``
        (this partition's name in another log dir); this log's own dir was renamed ``retired_dir``.

        The caller holds this log's lock and made ``future`` complete: the same batches at the
        same offsets up to the same log end, its epochs and aborted-transaction indexes this
        log's, everything fsynced. This object stays the partition's log (every holder of it sees
        the swap); only its files change. The old segments keep their descriptors open and are
        removed with ``retired_dir`` after ``file.delete.delay.ms``, so that reads in flight
        (fetches hold ``FileSlice``s) finish.
        """
        if future.log_end_offset != self.log_end_offset:
            raise StorageError(
                f"{self.tp}: the moved log ends at {future.log_end_offset}, the current one at {self.log_end_offset}"
            )
        for seg in future._segments:
            seg.relocate(directory)
        retired = self._segments + [seg for _, seg in self._pending_deletes]
        due = self._clock() + self.config.file_delete_delay_ms
        self._retired_dirs.append((due, retired_dir, retired))
        self.dir = directory
        future.epochs.path = directory / LEADER_EPOCH_CHECKPOINT
        self._segments = future._segments
        self._pending_deletes = []
        self.epochs = future.epochs
        self._on_io_error = on_io_error
        self._cleaner_checkpoint = None  # the copy may hold records compaction had removed: all dirty again
        self.recovery_point = min(future.recovery_point, self.log_end_offset)
        self._unflushed_records = future._unflushed_records
        self._first_unflushed_ms = future._first_unflushed_ms
        self._truncations += 1

    # -- lifecycle -------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for seg in self._segments:
                seg.config = config

    def close(self) -> None:
        """Flush, then close every file (pending deletions are finished now)."""
        with self._lock:
            if self._offline is None:
                with self._io():
                    self._segments[-1].seal_time_index()
                    self._flush_locked()
                    self.purge_deleted(0, everything=True)
            for seg in self._segments:
                seg.close()
            for _, seg in self._pending_deletes:  # after an I/O error their files stay for recovery
                seg.close()
            for _, _, segments in self._retired_dirs:
                for seg in segments:
                    seg.close()

    def delete(self) -> None:
        """Close and remove every file of this log, and its directory."""
        with self._lock:
            for seg in self._segments:
                seg.delete_files()
            for _, seg in self._pending_deletes:
                seg.delete_files()
            self._pending_deletes = []
            self._purge_retired_dirs(0, everything=True)
            for leftover in self.dir.iterdir():
                leftover.unlink()
            self.dir.rmdir()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.tp}, start={self.log_start_offset}, end={self.log_end_offset}, "
            f"hw={self._high_watermark}, segments={len(self._segments)})"
        )


def _base_offset(segment: LogSegment) -> Offset:
    return segment.base_offset


def _stamp_log_append_time(buf: bytearray, header: BatchHeader, now: int) -> None:
    """Set the LogAppendTime attribute and maxTimestamp, then recompute the CRC (covers both)."""
    fields = list(header)
    fields[5] = header.attributes | ATTR_LOG_APPEND_TIME
    fields[8] = now  # maxTimestamp
    HEADER.pack_into(buf, 0, *fields)
    _CRC.pack_into(buf, CRC_POS, crc_of(buf, 0, len(buf)))
