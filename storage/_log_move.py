"""Moving a replica to another log dir of the same node while it serves (Kafka's "future" replica).

AlterReplicaLogDirs asks a node to move one of its replicas from one JBOD dir to another. As
Kafka's ReplicaAlterLogDirsThread, the move builds a *future log* in the target dir, in
``<topic>-<partition>.<id>-future``, and copies the current log into it batch by batch from its
log start to its end, keeping offsets (the future log's own appends build its offset and time
indexes and, from each batch's partitionLeaderEpoch, its epoch cache). The partition meanwhile
keeps taking appends and serving fetches from the current log. Once the copy has caught up,
``LogManager`` swaps it in under the log's lock (``commit``): the last batches are copied, the
future log takes the current log's epoch entries, aborted-transaction indexes and log start
offset, is fsynced, and two renames swap the dirs:

1. the current dir becomes ``<topic>-<partition>.<id>-delete`` (the same id as the future dir);
2. the future dir becomes ``<topic>-<partition>``.

The first rename is the commit point: at load (``settle_moves``) a ``-future`` dir with a
``-delete`` dir of the same id anywhere on the node is complete and takes the partition's name;
a ``-future`` dir without one is an unfinished copy, removed, and the move starts again from the
beginning once the logs are loaded (Kafka resumes the copy where it was; starting over is
simpler and never trusts a copy whose source may have been truncated since). The partition's
``PartitionLog`` object stays the same across the swap (``PartitionLog.take_over``), so whoever
holds it sees the new files; the old segments keep their descriptors until
``file.delete.delay.ms`` has passed, so fetches in flight (``FileSlice``s sent later with
sendfile) finish, as for retention and compaction.

A truncation of the current log during the copy (a follower told to, a truncation to a cut)
makes the copy start over; when retention moves the log start past the copy's end, the copy
goes on from the log start.
Producer state is not on disk (``node.partition`` rebuilds it from the log), so it needs no copy.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from pathlib import Path

from ._errors import CorruptBatchError, InvalidOffsetError, OffsetOutOfRangeError
from ._faults import FaultPoints
from ._files import TopicPartition
from ._log import PartitionLog
from .records import Offset

log = logging.getLogger("strait.storage")

COPY_CHUNK_BYTES = 1 << 20  # one read of the current log, as a fetch of the same size would


class MoveStopped(Exception):
    """The move was cancelled (the partition deleted, a dir offline, another move asked, shutdown)."""


class ReplicaMove:
    """One replica's copy into its future log in ``target``. Not thread-safe on its own: one
    thread copies (``copy_until_caught_up``), and ``LogManager.commit`` finishes it under the
    locks; ``cancel`` may be called from any thread."""

    def __init__(
        self,
        source: PartitionLog,
        future: PartitionLog,
        *,
        move_id: str,
        target: Path,
        faults: FaultPoints,
        bytes_per_second: int = 0,
        chunk_bytes: int = COPY_CHUNK_BYTES,
    ) -> None:
        self.source = source
        self.future = future
        self.tp = source.tp
        self.move_id = move_id
        self.target = target
        self.bytes_per_second = bytes_per_second
        # A throttled copy reads about a tenth of a second's worth at a time, so the limit holds
        # from the first chunk on rather than after a 1 MiB burst.
        self.chunk_bytes = min(chunk_bytes, max(1, bytes_per_second // 10)) if bytes_per_second > 0 else chunk_bytes
        self.copied_bytes = 0
        self.restarts = 0
        self.started_at = time.monotonic()
        self._faults = faults
        self._stop = threading.Event()
        self._seen_truncations = source.truncations
        self.thread: threading.Thread | None = None

    @property
    def _names(self) -> tuple[TopicPartition, Path]:
        return self.tp, self.target

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def cancel(self) -> None:
        self._stop.set()

    @property
    def offset_lag(self) -> int:
        """How many offsets the future log is behind the current one."""
        return max(0, self.source.log_end_offset - self.future.log_end_offset)

    def start_over(self) -> None:
        """Empty the future log and copy again from the current log's start."""
        self._seen_truncations = self.source.truncations
        self.future.start_over_at(first_copied_offset(self.source))
        self.restarts += 1
        log.info("%s: the move to %s starts over (the log was truncated, or its start passed the copy)", *self._names)

    def copy_chunk(self) -> int:
        """Copy the next batches (about ``chunk_bytes``) into the future log; returns the bytes
        read, 0 once it has reached the current log's end. Starts over when the current log was
        truncated, or its start moved past the copy's end."""
        if self._stop.is_set():
            raise MoveStopped(self.tp)
        self._faults.hit("move_copy")
        source, future = self.source, self.future
        seen = source.truncations
        if seen != self._seen_truncations:
            self.start_over()
            return 1
        # From the log start when retention or DeleteRecords passed the copy: what lies below it
        # is never read again, and the batch holding it starts past the copy's end.
        try:
            slices = source.read(max(future.log_end_offset, source.log_start_offset), self.chunk_bytes)
        except OffsetOutOfRangeError:  # past the end: the log was truncated since ``seen``
            self.start_over()
            return 1
        read = 0
        for piece in slices:
            data = piece.read()
            try:
                future.append_batches(data)
            except (CorruptBatchError, InvalidOffsetError):
                if source.truncations == seen:
                    raise
            if source.truncations != seen:
                return 1  # what was read may be torn: the next call starts over
            read += len(data)
        self.copied_bytes += read
        return read

    def copy_until_caught_up(self) -> None:
        """Copy until the future log has every batch the current log had when it looked, at
        ``bytes_per_second`` at most when set. Raises MoveStopped when cancelled."""
        started = time.monotonic()
        copied = 0
        while True:
            n = self.copy_chunk()
            if n == 0:
                return
            copied += n
            if self.bytes_per_second > 0:
                ahead = copied / self.bytes_per_second - (time.monotonic() - started)
                if ahead > 0 and self._stop.wait(ahead):
                    raise MoveStopped(self.tp)

    def prepare_finish(self) -> None:
        """Before the swap's lock: fsync what the copy wrote and index its aborted transactions,
        so that under the lock only the last batches are left (appends wait for that part)."""
        copy_aborted_txns(self.source, self.future)
        self.future.flush()

    def finish_locked(self) -> bool:
        """Under the current log's lock (no append can come): copy the last batches and make the
        future log the current one's equal (epochs, aborted-transaction indexes, log start,
        fsynced). Returns False when the current log was truncated since the copy began (the
        caller releases the lock and copies again)."""
        source, future = self.source, self.future
        while True:
            if source.truncations != self._seen_truncations:
                self.start_over()
                return False
            if self.copy_chunk() == 0:
                break
        # A compacted log's last batches may be gone below an empty active segment: end where it ends.
        future.advance_to(source.log_end_offset)
        future.epochs.copy_from(source.epochs)
        future.drop_segments_below(source.log_start_offset)
        copy_aborted_txns(source, future)
        future.flush()
        return True


def first_copied_offset(source: PartitionLog) -> Offset:
    """Where a copy of ``source`` starts: the base offset of the batch that holds the log start
    offset (DeleteRecords may have moved it inside a batch), never above the log start."""
    start = source.log_start_offset
    for _segment, _pos, header in source.batch_headers(start):
        return min(header.base_offset, start)
    return start


def copy_aborted_txns(source: PartitionLog, future: PartitionLog) -> int:
    """Give each of the future log's segments the aborted transactions whose marker it holds, as
    the current log indexes them; rewrites only the segments that differ. Returns how many."""
    entries = [txn for segment in source.segments for txn in segment.txn_index.entries]
    entries.sort(key=lambda txn: txn.last_offset)
    markers = [txn.last_offset for txn in entries]
    segments = future.segments
    changed = 0
    for i, segment in enumerate(segments):
        end = segments[i + 1].base_offset if i + 1 < len(segments) else None
        lo = bisect.bisect_left(markers, segment.base_offset)
        hi = len(markers) if end is None else bisect.bisect_left(markers, end)
        wanted = entries[lo:hi]
        if segment.txn_index.entries != wanted:
            segment.txn_index.reset()
            segment.txn_index.extend(wanted)
            changed += 1
    return changed
