"""One log segment: a ``.log`` file of batches plus its offset, time and aborted-transaction indexes.

The ``.log`` file is nothing but record batches back to back (layout in
``storage.records``); its name is the segment's base offset. The segment owns an open file
descriptor for appends (``O_APPEND``) and positional reads, which fetches hand to
``os.sendfile`` as ``FileSlice``s. A segment is not thread-safe; its log serialises calls.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._config import LogConfig
from ._errors import CorruptBatchError, CorruptIndexError, StorageError
from ._faults import FaultPoints
from ._files import DELETED_SUFFIX, segment_paths, txn_index_path
from ._index import OffsetIndex, TimeIndex
from ._scan import INT32_MAX, scan_batches
from ._txn_index import TransactionIndex
from .records import (
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Offset,
    RecordBatch,
    read_header,
)


@dataclass(frozen=True, slots=True)
class FileSlice:
    """``length`` bytes of the open file ``fd`` from ``position``: whole batches, ready for sendfile."""

    fd: int
    path: Path
    position: int
    length: int

    def read(self) -> bytes:
        """The slice's bytes (for clients and tests that do not sendfile)."""
        return _pread_exact(self.fd, self.length, self.position, self.path)


@dataclass(frozen=True, slots=True)
class SegmentLoad:
    segment: LogSegment
    recovered: bool  # every batch was validated and the indexes rebuilt
    bytes_dropped: int
    error: CorruptBatchError | None  # the first invalid batch, when bytes were dropped


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: Offset, config: LogConfig, faults: FaultPoints, now_ms: int
    ) -> None:
        self.base_offset = base_offset
        self.config = config
        self._faults = faults
        self.log_path, index_path, time_index_path = segment_paths(directory, base_offset)
        self.index = OffsetIndex(index_path, base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(time_index_path, base_offset, config.segment_index_bytes)
        self.txn_index = TransactionIndex(txn_index_path(directory, base_offset))
        #: ``recover()`` lists (position, header) of every transactional batch it scanned, so that
        #: recovery's rebuild of the aborted-transaction index need not read the file again.
        self.transactional_batches: list[tuple[int, BatchHeader]] | None = None
        self._fd = -1
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp: int = base_offset
        self._bytes_since_index = 0
        self._rolling_ts = -1  # maxTimestamp of the first batch: segment.ms counts from it
        self.created_ms = now_ms

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: Offset, config: LogConfig, faults: FaultPoints, now_ms: int
    ) -> LogSegment:
        """A new empty segment (any stale files of that name are replaced)."""
        seg = cls(directory, base_offset, config, faults, now_ms)
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        seg.index.flush(fsync=False)
        seg.time_index.flush(fsync=False)
        return seg

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: Offset,
        config: LogConfig,
        faults: FaultPoints,
        now_ms: int,
        *,
        recover: bool = False,
    ) -> SegmentLoad:
        """Open an existing segment.

        With ``recover`` every batch is validated and the indexes rebuilt (``recover()``).
        Otherwise the index files are loaded and sanity-checked and only the tail after the
        last index entry is read; a missing or corrupt index, or a damaged tail, falls back
        to ``recover()`` too. Never raises for damaged data: the result says what was done.
        A recovered segment's aborted-transaction index is left empty: only the log's
        transactions before it can rebuild it (``storage._recovery``).
        """
        seg = cls(directory, base_offset, config, faults, now_ms)
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_APPEND)
        seg.size = os.fstat(seg._fd).st_size
        if not recover:
            try:
                seg.index.load(seg.size)
                seg.time_index.load()
                seg.txn_index.load()
                seg._rescan_tail()
                return SegmentLoad(seg, False, 0, None)
            except (FileNotFoundError, CorruptIndexError, CorruptBatchError):
                pass
        dropped, error = seg.recover()
        return SegmentLoad(seg, True, dropped, error)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to_deleted(self) -> None:
        """Rename the segment's files to ``*.deleted``; the fd stays open for reads in flight."""
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            with contextlib.suppress(FileNotFoundError):
                path.rename(path.with_name(path.name + DELETED_SUFFIX))

    def relocate(self, directory: Path) -> None:
        """Point the segment's paths into ``directory``, where its dir was renamed (a moved
        replica's future dir taking the partition's name); open descriptors are unaffected."""
        self.log_path, self.index.path, self.time_index.path = segment_paths(directory, self.base_offset)
        self.txn_index.path = txn_index_path(directory, self.base_offset)

    def delete_files(self) -> None:
        """Close and unlink the segment's files (renamed or not)."""
        self.close()
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            for candidate in (path, path.with_name(path.name + DELETED_SUFFIX)):
                candidate.unlink(missing_ok=True)

    @property
    def fd(self) -> int:
        return self._fd

    # -- writes ----------------------------------------------------------------------------

    def should_roll(self, size: int, last_offset: Offset, max_timestamp: int, now_ms: int) -> bool:
        """Whether a batch of ``size`` bytes ending at ``last_offset`` must go into a new segment
        (Kafka's roll conditions)."""
        if self.size == 0:
            return False
        if self.size + size > self.config.segment_bytes:
            return True
        if self.index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > INT32_MAX:
            return True
        waited = max_timestamp - self._rolling_ts if self._rolling_ts >= 0 else now_ms - self.created_ms
        return waited > self.config.segment_ms

    def append(self, prefix: bytes, rest: bytes | memoryview, last_offset: Offset, max_timestamp: int) -> int:
        """Append one batch, given as its rewritten 16-byte prefix and the bytes after it, in one
        ``writev``; ``last_offset`` is its final last offset. Returns the batch's position.

        A short write raises OSError (the bytes written are a torn tail that recovery removes).
        """
        self._faults.hit("append")
        position = self.size
        expected = len(prefix) + len(rest)
        written = os.writev(self._fd, (prefix, rest))
        if written != expected:
            self.size = os.fstat(self._fd).st_size
            raise OSError(errno.EIO, f"{self.log_path}: short write of {written} of {expected} bytes at {position}")
        self.size += written
        self._track(last_offset, max_timestamp, written, position)
        return position

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log file and, with ``indexes``, write and fsync the three indexes."""
        self._faults.hit("fsync")
        os.fsync(self._fd)
        if indexes:
            self.index.flush(fsync=True)
            self.time_index.flush(fsync=True)
            self.txn_index.flush()

    def seal_time_index(self) -> None:
        """Record the segment's largest timestamp as the time index's last entry (on roll,
        close and recovery, as Kafka does), so the last entry is the segment's maximum."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def truncate_to(self, offset: Offset) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, header = found
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(offset)
        self._rescan_tail()
        if position == 0:
            self._rolling_ts = -1
        return removed

    # -- reads -----------------------------------------------------------------------------

    def headers(self, start_position: int = 0, end_position: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of every batch from ``start_position`` (headers only, no CRC)."""
        end = self.size if end_position is None else end_position
        pos = start_position
        while pos < end:
            raw = os.pread(self._fd, HEADER_SIZE, pos)
            if len(raw) < HEADER_SIZE:
                raise CorruptBatchError(f"torn batch header ({len(raw)} bytes)", position=pos, path=self.log_path)
            header = read_header(raw)
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
                raise CorruptBatchError(
                    f"batchLength {header.batch_length} does not fit the file", position=pos, path=self.log_path
                )
            yield pos, header
            pos += header.size

    def find_batch(self, offset: Offset, start_position: int | None = None) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, or None."""
        if start_position is None:
            _, start_position = self.index.lookup(offset)
        for pos, header in self.headers(start_position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(
        self, start_offset: Offset, max_bytes: int, max_offset: Offset | None = None, *, min_one: bool = True
    ) -> FileSlice | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` of them.

        Batches at or past ``max_offset`` (exclusive, e.g. the high watermark) are left out.
        With ``min_one`` the first batch is returned even when it is larger than ``max_bytes``.
        Returns None when nothing qualifies.
        """
        found = self.find_batch(start_offset)
        if found is None:
            return None
        start, first = found
        if max_offset is not None and first.next_offset > max_offset:
            return None
        length = first.size
        if length > max_bytes and not min_one:
            return None
        for _, header in self.headers(start + first.size):
            if length + header.size > max_bytes or (max_offset is not None and header.next_offset > max_offset):
                break
            length += header.size
        return FileSlice(self._fd, self.log_path, start, length)

    def read_batch(self, position: int, header: BatchHeader) -> RecordBatch:
        return RecordBatch(_pread_exact(self._fd, header.size, position, self.log_path))

    def find_offset_by_timestamp(self, timestamp: int, start_offset: Offset) -> tuple[Offset, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``start_offset`` stamped >= ``timestamp``."""
        _, from_offset = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(from_offset, start_offset))
        for pos, header in self.headers(position):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for record in self.read_batch(pos, header).records():
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    # -- recovery --------------------------------------------------------------------------

    def recover(self) -> tuple[int, CorruptBatchError | None]:
        """Validate every batch, rebuild both indexes, cut the file at the first invalid byte.

        Passes: (1) forget the indexes and the tracked state; (2) scan the file, checking each
        batch's length, magic, CRC-32C and offsets, re-adding index entries as an append
        would, and listing the transactional batches (``transactional_batches``); (3) truncate
        the file at the first batch that fails; (4) write the indexes. Returns
        ``(bytes_dropped, first_error)``.
        """
        self.index.reset()
        self.time_index.reset()
        file_size = os.fstat(self._fd).st_size
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        self._rolling_ts = -1
        valid_end = 0
        error: CorruptBatchError | None = None
        transactional: list[tuple[int, BatchHeader]] = []
        self.transactional_batches = transactional
        try:
            for position, header in scan_batches(self._fd, file_size, path=self.log_path, base_offset=self.base_offset):
                self._track(header.last_offset, header.max_timestamp, header.size, position)
                valid_end = position + header.size
                if header.attributes & ATTR_TRANSACTIONAL:
                    transactional.append((position, header))
        except CorruptBatchError as exc:
            error = exc
        self.seal_time_index()
        self.size = valid_end
        if valid_end < file_size:
            self._faults.hit("truncate")
            os.ftruncate(self._fd, valid_end)
        self.index.flush(fsync=False)
        self.time_index.flush(fsync=False)
        return file_size - valid_end, error

    def _track(self, last_offset: Offset, max_timestamp: int, size: int, position: int) -> None:
        """Account for the batch at ``position``: max timestamp, sparse index entries (Kafka's
        rule: an entry once more than index.interval.bytes were written since the last), next
        offset. Appends and recovery share it, so both build the same indexes."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.config.index_interval_bytes:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        if position == 0:
            self._rolling_ts = max_timestamp
        self.next_offset = Offset(last_offset + 1)

    def _rescan_tail(self) -> None:
        """Recompute next offset, max timestamp and index spacing from the last index entries."""
        ts, ts_offset = self.time_index.last_entry
        self.max_timestamp = ts
        self.offset_of_max_timestamp = ts_offset
        self.next_offset = self.base_offset
        _, position = self.index.last_entry
        self._bytes_since_index = 0
        for pos, header in self.headers(position):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self._bytes_since_index += header.size
            self.next_offset = header.next_offset
            if pos == 0:
                self._rolling_ts = header.max_timestamp
        if self._rolling_ts < 0 and self.size > 0:
            self._rolling_ts = read_header(os.pread(self._fd, HEADER_SIZE, 0)).max_timestamp

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, next_offset={self.next_offset}, size={self.size})"


def _pread_exact(fd: int, length: int, position: int, path: Path) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) != length:
        raise StorageError(f"{path}: wanted {length} bytes at {position}, the file ended after {len(data)}")
    return data
