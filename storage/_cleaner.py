"""Log compaction (``cleanup.policy=compact``), as Kafka's LogCleaner: keep the latest record of each key.

One run of ``PartitionLog.compact`` (a :class:`CleanerRun`) goes through these passes:

1. **Plan.** The cleanable segments are the leading non-active segments below the first
   uncleanable offset: the base of the first segment that is active, reaches past the high
   watermark (Kafka stops at the last stable offset, which is never above it), or — in the
   dirty section — holds a record newer than ``min.compaction.lag.ms`` (KIP-58). The dirty
   section starts at the cleaner checkpoint (or the log start offset when there is none);
   the run goes ahead when dirty bytes / cleanable bytes is above
   ``min.cleanable.dirty.ratio``, when a cleaned tombstone's delete horizon has passed, or
   when forced.
2. **Map.** Read every record of the dirty section: key -> its latest offset.
3. **Build.** Group adjacent cleanable segments while their sizes stay within
   ``segment.bytes`` and their index entries within ``segment.index.bytes`` (Kafka's
   groupSegmentsBySize), and rewrite each group, from the first segment on, into
   ``<base>.log.cleaned``. A record is kept iff no later offset of its key is in the map;
   a kept tombstone (null value) is kept until its batch's delete horizon has passed. A
   group that comes out unchanged is not swapped.
4. **Swap** (under the log's lock; aborted when the log was truncated meanwhile or lost one
   of the segments): rename ``.cleaned`` to ``.swap`` (the commit point), rename the old
   segments' files to ``.deleted``, rename ``.swap`` to ``<base>.log``, rebuild the indexes
   from the new file and fsync; the directory is fsynced between the steps. Old segments stay
   readable until ``file.delete.delay.ms``. A crash before the commit point leaves
   ``.cleaned`` files, which recovery deletes; after it, :func:`finish_interrupted_swaps`
   (recovery's first pass) completes the swap.
5. **Checkpoint.** The first uncleanable offset becomes the new checkpoint.

Rewritten batches keep their base offset, lastOffsetDelta, record offset deltas, producer
id/epoch/base sequence, partitionLeaderEpoch, codec (recompressed) and LogAppendTime; the
CRC-32C is recomputed. So offsets never change; gaps appear where records went. A batch
left with no records is dropped, unless it is the last batch of its producer id in the log:
then it stays as an empty batch (header only) so that idempotence state survives.

Decisions (where strait differs from Kafka, or Kafka leaves a choice):

- **Tombstones** follow KIP-534: the run that first keeps a tombstone stamps its batch with a
  delete horizon (attribute bit 6; baseTimestamp = now + ``delete.retention.ms``, record
  timestamp deltas adjusted so every record keeps its timestamp). A later run at or after
  the horizon removes it. The horizon lives in the batch, so it survives restarts and uses
  the log's clock, not file modification times.
- **Null keys**: Kafka refuses them at produce time in compacted topics and its cleaner drops
  them; strait keeps them (they cannot be superseded) so that no produced record is lost.
- **Control batches** (transaction markers) are kept as they are. **Transactional data
  batches** are kept as they are too and take no part in the map: strait has no record of
  aborted transactions, and an aborted record must never supersede a committed one. A
  tombstone is never removed while an earlier transactional batch holds its key.
- **Memory**: the map is a dict of the dirty section's distinct keys (Kafka bounds it by
  ``log.cleaner.dedupe.buffer.size`` and cleans in several runs).

``cleaner.offset`` (one per partition directory, written atomically) holds the checkpoint::

    line  content
       1  0        version
       2  1234     first dirty offset: below it, each key has at most one record (its
                   latest as of the last run), apart from null keys and transactional batches

A missing or unreadable file means "nothing is clean yet", which is always safe: the next
run maps the whole log. Truncation lowers the checkpoint (``PartitionLog``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._checkpoint import write_atomically
from ._config import LogConfig
from ._errors import CorruptBatchError, RecordFormatError, StorageError
from ._faults import FaultPoints
from ._files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    file_name,
    parse_segment_file,
    segment_paths,
)
from ._scan import INT32_MAX, scan_batches
from ._segment import LogSegment
from .records import HEADER_SIZE, LOG_OVERHEAD, PREFIX, BatchHeader, Compression, check_batch, compress, crc_of
from .records import decompress as decompress_block
from .records import read_header as read_batch_header
from .records._batch import ATTR_COMPRESSION_MASK, ATTR_DELETE_HORIZON, CRC_POS, CURRENT_MAGIC, HEADER
from .records._varint import decode_varint, encode_varint

log = logging.getLogger("strait.storage")

CLEANER_CHECKPOINT_FILE = "cleaner.offset"
_CHECKPOINT_VERSION = 0
_CRC = struct.Struct(">I")
_CHUNK_BYTES = 1024 * 1024
_OFFSET_INDEX_ENTRY = 8  # bytes per .index entry
_TIME_INDEX_ENTRY = 12  # bytes per .timeindex entry


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one ``PartitionLog.compact`` call did. ``skipped`` says why nothing was cleaned."""

    first_dirty_offset: int  # where the dirty section started
    end_offset: int  # the first uncleanable offset: the new checkpoint after a clean
    dirty_ratio: float  # dirty bytes / cleanable bytes when the run was planned
    skipped: str | None = None
    segments_before: int = 0  # cleanable segments read
    segments_after: int = 0  # segments that replace them (groups are merged)
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0  # superseded records
    tombstones_removed: int = 0  # tombstones past their delete horizon

    @property
    def cleaned(self) -> bool:
        return self.skipped is None


# -- the checkpoint file ----------------------------------------------------------------------


def read_cleaner_checkpoint(directory: Path) -> int | None:
    """The partition's cleaner checkpoint, or None when there is none or it cannot be read (logged)."""
    path = directory / CLEANER_CHECKPOINT_FILE
    try:
        lines = path.read_text().split()
    except FileNotFoundError:
        return None
    if len(lines) == 2 and lines[0] == str(_CHECKPOINT_VERSION) and lines[1].isdigit():
        return int(lines[1])
    log.warning("%s: unreadable cleaner checkpoint %r; the whole log counts as dirty", path, lines[:2])
    return None


def write_cleaner_checkpoint(directory: Path, offset: int) -> None:
    """Replace the partition's cleaner checkpoint atomically (temp file, fsync, rename, fsync dir)."""
    if offset < 0:
        raise ValueError(f"cleaner checkpoint offset {offset} is negative")
    write_atomically(directory / CLEANER_CHECKPOINT_FILE, f"{_CHECKPOINT_VERSION}\n{offset}\n".encode())


# -- one run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _SegmentView:
    """A segment as it was when the run started; ``fd`` is the run's own duplicate of its fd."""

    segment: LogSegment
    fd: int
    size: int
    next_offset: int
    max_timestamp: int
    index_entries: int
    time_index_entries: int

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset


@dataclass
class _Group:
    """Adjacent cleanable segments rewritten into one file named by the first one's base offset."""

    views: list[_SegmentView]
    cleaned_path: Path | None = None
    size_after: int = 0
    changed: bool = False

    @property
    def base_offset(self) -> int:
        return self.views[0].base_offset


@dataclass
class _Stats:
    records_removed: int = 0
    tombstones_removed: int = 0


@dataclass
class _Rules:
    """What decides whether a record stays (filled by the plan and map passes)."""

    latest: dict[bytes, int]  # key -> its latest offset in the dirty section
    now_ms: int
    delete_retention_ms: int
    is_producers_last: Callable[[BatchHeader], bool]
    transactional_keys: set[bytes] = field(default_factory=set)  # keys in transactional batches seen so far


class CleanerRun:
    """One compaction of one log. Created under the log's lock, then planned and built without
    it, then swapped under it again. A context manager: leaving it closes the run's file
    descriptors and removes ``.cleaned`` files that were not swapped in (unless an OSError
    is propagating: the log dir then goes offline and recovery removes them)."""

    def __init__(
        self,
        directory: Path,
        segments: Sequence[LogSegment],
        config: LogConfig,
        *,
        log_start_offset: int,
        high_watermark: int,
        checkpoint: int | None,
        now_ms: int,
        faults: FaultPoints,
    ) -> None:
        self.dir = directory
        self.config = config
        self.now_ms = now_ms
        self._faults = faults
        self.first_dirty = max(checkpoint if checkpoint is not None else 0, log_start_offset)
        self._high_watermark = high_watermark
        self._views: list[_SegmentView] = []
        try:
            for seg in segments:
                self._views.append(
                    _SegmentView(
                        seg,
                        os.dup(seg.fd),
                        seg.size,
                        seg.next_offset,
                        seg.max_timestamp,
                        len(seg.index),
                        len(seg.time_index),
                    )
                )
        except BaseException:
            self._close_fds()
            raise
        self._cleanable: list[_SegmentView] = []
        self.end_offset = self.first_dirty
        self.dirty_ratio = 0.0
        self._groups: list[_Group] = []
        self._stats = _Stats()
        self._producers_last: dict[int, int] | None = None
        self.retired: list[LogSegment] = []

    def __enter__(self) -> CleanerRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self._close_fds()
        if exc_type is None or not issubclass(exc_type, OSError):
            self.discard()

    def _close_fds(self) -> None:
        for view in self._views:
            with contextlib.suppress(OSError):
                os.close(view.fd)
        self._views = []

    # -- pass 1: plan ------------------------------------------------------------------------

    def plan(self, *, force: bool = False) -> str | None:
        """Choose the cleanable segments; returns why the run should not go ahead, or None."""
        if not self.config.compacts:
            return f"cleanup.policy={self.config.cleanup_policy} does not compact"
        lag = self.config.min_compaction_lag_ms
        for view in self._views[:-1]:  # the active segment is never cleaned
            if view.next_offset > self._high_watermark:
                break
            dirty = view.next_offset > self.first_dirty
            if dirty and lag > 0 and view.max_timestamp > self.now_ms - lag:
                break
            self._cleanable.append(view)
        if not self._cleanable:
            return "no cleanable segment: only the active segment, or none below the high watermark"
        self.end_offset = max(self.first_dirty, self._views[len(self._cleanable)].base_offset)
        dirty_bytes = sum(v.size for v in self._cleanable if v.next_offset > self.first_dirty)
        total = sum(v.size for v in self._cleanable)
        self.dirty_ratio = dirty_bytes / total if total else 0.0
        ratio_reached = dirty_bytes > 0 and self.dirty_ratio > self.config.min_cleanable_dirty_ratio
        if not (force or ratio_reached or self._a_delete_horizon_passed()):
            return (
                f"dirty ratio {self.dirty_ratio:.3f} is not above "
                f"min.cleanable.dirty.ratio={self.config.min_cleanable_dirty_ratio}"
            )
        self._groups = _group_by_size(self._cleanable, self.config)
        return None

    def _a_delete_horizon_passed(self) -> bool:
        for view in self._cleanable:
            for _, header in _headers(view):
                if header.attributes & ATTR_DELETE_HORIZON and header.base_timestamp <= self.now_ms:
                    return True
        return False

    def _is_producers_last(self, header: BatchHeader) -> bool:
        """Whether no later batch of ``header``'s producer id is in the log (read lazily, headers only)."""
        if header.producer_id < 0:
            return False
        if self._producers_last is None:
            self._producers_last = {}
            for view in self._views:
                for _, h in _headers(view):
                    if h.producer_id >= 0:
                        self._producers_last[h.producer_id] = h.last_offset
        return self._producers_last.get(header.producer_id, -1) <= header.last_offset

    # -- passes 2 and 3: map and build -------------------------------------------------------

    def build(self) -> None:
        """Map the dirty section, then write each group's ``.cleaned`` file (fsynced).

        Raises CorruptBatchError / RecordFormatError for a batch that cannot be read (nothing
        is swapped) and OSError for I/O failures.
        """
        rules = _Rules(self._map_dirty_section(), self.now_ms, self.config.delete_retention_ms, self._is_producers_last)
        for group in self._groups:
            self._build_group(group, rules)

    def _map_dirty_section(self) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        for view in self._cleanable:
            if view.next_offset <= self.first_dirty:
                continue
            for header, raw in _batches(view, self.dir):
                if header.is_control or header.is_transactional or header.next_offset <= self.first_dirty:
                    continue
                for record in _records(raw, header):
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and offset >= self.first_dirty:
                        latest[record.key] = offset
        return latest

    def _build_group(self, group: _Group, rules: _Rules) -> None:
        path = self.dir / (file_name(group.base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)
        group.cleaned_path = path
        group.changed = len(group.views) > 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            out = bytearray()
            for view in group.views:
                for header, raw in _batches(view, self.dir):
                    cleaned = _clean_batch(raw, header, rules, self._stats)
                    if cleaned is not raw:
                        group.changed = True
                    if cleaned is None:
                        continue
                    if group.size_after + len(cleaned) > INT32_MAX:
                        raise StorageError(f"{path}: cleaned segment would pass {INT32_MAX} bytes")
                    out += cleaned
                    group.size_after += len(cleaned)
                    if len(out) >= _CHUNK_BYTES:
                        _write_all(fd, out)
                        out.clear()
            _write_all(fd, out)
            if group.changed:
                self._faults.hit("fsync")
                os.fsync(fd)
        finally:
            os.close(fd)
        if not group.changed:
            path.unlink()
            group.cleaned_path = None

    # -- pass 4: swap ------------------------------------------------------------------------

    def fits(self, segments: Sequence[LogSegment]) -> bool:
        """Whether every group to swap is still a run of adjacent segments of ``segments``."""
        return all(_find_group(segments, g) is not None for g in self._groups if g.changed)

    def swap(self, segments: list[LogSegment]) -> None:
        """Replace each changed group of ``segments`` (in place) by its cleaned segment.

        Call under the log's lock after ``fits``. The replaced segments are renamed to
        ``.deleted`` and added to ``retired`` (still open for reads in flight), also when a
        later group fails. Raises OSError; the groups swapped before stay swapped.
        """
        for group in self._groups:
            if not group.changed or group.cleaned_path is None:
                continue
            at = _find_group(segments, group)
            if at is None:
                raise StorageError(f"{self.dir}: the segments from offset {group.base_offset} changed during the swap")
            new = self._swap_group(group)
            segments[at : at + len(group.views)] = [new]
            self.retired += [v.segment for v in group.views]

    def _swap_group(self, group: _Group) -> LogSegment:
        assert group.cleaned_path is not None
        base = group.base_offset
        log_path = segment_paths(self.dir, base)[0]
        swap_path = log_path.with_name(log_path.name + SWAP_SUFFIX)
        group.cleaned_path.rename(swap_path)  # the commit point: recovery completes from here
        group.cleaned_path = None
        self._fsync_dir()
        for view in group.views:
            _rename_to_deleted(view.segment)
        self._fsync_dir()
        swap_path.rename(log_path)
        self._fsync_dir()
        loaded = LogSegment.open(self.dir, base, self.config, self._faults, self.now_ms, recover=True)
        new = loaded.segment
        try:
            if loaded.error is not None:  # the file was fsynced before the swap: this is a bad disk
                raise StorageError(f"{log_path}: the cleaned segment does not read back: {loaded.error}")
            new.flush()
        except BaseException:
            new.close()
            raise
        return new

    def _fsync_dir(self) -> None:
        self._faults.hit("fsync")
        _fsync_dir(self.dir)

    def discard(self) -> None:
        """Remove ``.cleaned`` files that were written and not swapped in."""
        for group in self._groups:
            if group.cleaned_path is not None:
                group.cleaned_path.unlink(missing_ok=True)
                group.cleaned_path = None

    # -- result ------------------------------------------------------------------------------

    def result(self, skipped: str | None = None) -> CleanResult:
        done = skipped is None
        return CleanResult(
            first_dirty_offset=self.first_dirty,
            end_offset=self.end_offset,
            dirty_ratio=self.dirty_ratio,
            skipped=skipped,
            segments_before=len(self._cleanable) if done else 0,
            segments_after=len(self._groups) if done else 0,
            bytes_before=sum(v.size for v in self._cleanable) if done else 0,
            bytes_after=sum(g.size_after for g in self._groups) if done else 0,
            records_removed=self._stats.records_removed if done else 0,
            tombstones_removed=self._stats.tombstones_removed if done else 0,
        )


def _group_by_size(views: list[_SegmentView], config: LogConfig) -> list[_Group]:
    """Kafka's groupSegmentsBySize: adjacent segments while the sum of their sizes fits
    ``segment.bytes``, their index entries fit ``segment.index.bytes`` (plus one entry per
    segment, as a rebuilt index may place them differently) and offsets stay int32-relative."""
    groups: list[_Group] = []
    i = 0
    while i < len(views):
        members = [views[i]]
        size = views[i].size
        entries = views[i].index_entries + 1
        time_entries = views[i].time_index_entries + 1
        while i + 1 < len(views):
            nxt = views[i + 1]
            if (
                size + nxt.size > config.segment_bytes
                or (entries + nxt.index_entries + 1) * _OFFSET_INDEX_ENTRY > config.segment_index_bytes
                or (time_entries + nxt.time_index_entries + 1) * _TIME_INDEX_ENTRY > config.segment_index_bytes
                or nxt.next_offset - 1 - members[0].base_offset > INT32_MAX
            ):
                break
            members.append(nxt)
            size += nxt.size
            entries += nxt.index_entries + 1
            time_entries += nxt.time_index_entries + 1
            i += 1
        groups.append(_Group(members))
        i += 1
    return groups


def _find_group(segments: Sequence[LogSegment], group: _Group) -> int | None:
    first = group.views[0].segment
    for at, seg in enumerate(segments):
        if seg is first:
            run = segments[at : at + len(group.views)]
            if len(run) == len(group.views) and all(s is v.segment for s, v in zip(run, group.views, strict=True)):
                return at
            return None
    return None


def _rename_to_deleted(segment: LogSegment) -> None:
    """Rename a replaced segment's files to ``.deleted`` and point the segment at the new names, so
    that deleting it later cannot unlink the cleaned segment that now has its old names."""
    segment.log_path = _to_deleted(segment.log_path)
    segment.index.path = _to_deleted(segment.index.path)
    segment.time_index.path = _to_deleted(segment.time_index.path)


def _to_deleted(path: Path) -> Path:
    doomed = path.with_name(path.name + DELETED_SUFFIX)
    with contextlib.suppress(FileNotFoundError):  # an index file may never have been written
        path.rename(doomed)
    return doomed


def _write_all(fd: int, data: bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- reading batches and records ---------------------------------------------------------------


def _headers(view: _SegmentView) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each batch of a segment, reading headers only."""
    pos = 0
    while pos < view.size:
        raw = os.pread(view.fd, HEADER_SIZE, pos)
        header = read_batch_header(raw)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > view.size:
            raise CorruptBatchError(
                f"batchLength {header.batch_length} does not fit the file", position=pos, path=view.segment.log_path
            )
        yield pos, header
        pos += header.size


def _batches(view: _SegmentView, directory: Path) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each batch of a segment with its bytes, validated (length, magic, CRC-32C), read in chunks."""
    path = directory / file_name(view.base_offset, LOG_SUFFIX)
    pos = 0
    while pos < view.size:
        chunk = memoryview(os.pread(view.fd, min(_CHUNK_BYTES, view.size - pos), pos))
        used = 0
        while len(chunk) - used >= LOG_OVERHEAD:
            size = PREFIX.unpack_from(chunk, used)[1] + LOG_OVERHEAD
            if used + size > len(chunk) and used > 0:
                break  # re-read from this batch's start
            if used + size > len(chunk):  # one batch larger than the chunk
                chunk = memoryview(os.pread(view.fd, max(size, LOG_OVERHEAD), pos))
            try:
                header = check_batch(chunk, used)
            except CorruptBatchError as exc:
                raise CorruptBatchError(exc.reason, position=pos + used, path=path) from None
            yield header, chunk[used : used + header.size]
            used += header.size
        if used == 0:
            raise CorruptBatchError("torn batch at the end of the segment", position=pos, path=path)
        pos += used


@dataclass(frozen=True, slots=True)
class _RawRecord:
    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    is_tombstone: bool
    tail: memoryview  # keyLength .. the end of the headers: copied as it is


def _records(raw: memoryview, header: BatchHeader) -> Iterator[_RawRecord]:
    block: bytes | memoryview = raw[HEADER_SIZE:]
    if header.compression != Compression.NONE:
        block = decompress_block(header.compression, block)
    view = memoryview(block)
    pos = 0
    for _ in range(header.records_count):
        length, pos = decode_varint(view, pos)
        end = pos + length
        if length < 3 or end > len(view):  # attributes, timestampDelta and offsetDelta take 3 bytes at least
            raise RecordFormatError(f"record of {length} bytes at offset {header.base_offset}+ runs past its batch")
        attributes = view[pos]
        ts_delta, p = decode_varint(view, pos + 1)
        offset_delta, p = decode_varint(view, p)
        tail_start = p
        key_length, p = decode_varint(view, p)
        key = bytes(view[p : p + key_length]) if key_length >= 0 else None
        value_length, _ = decode_varint(view, p + max(key_length, 0))
        yield _RawRecord(attributes, ts_delta, offset_delta, key, value_length < 0, view[tail_start:end])
        pos = end
    if pos != len(view):
        raise RecordFormatError(f"batch at offset {header.base_offset}: {len(view) - pos} bytes after its records")


# -- cleaning one batch ------------------------------------------------------------------------


def _clean_batch(raw: memoryview, header: BatchHeader, rules: _Rules, stats: _Stats) -> memoryview | bytes | None:
    """The batch to write in place of ``raw``: ``raw`` itself when nothing changes, a rebuilt
    batch, an empty batch (a producer's last), or None to drop it."""
    if header.is_control:
        return raw
    if header.is_transactional:
        rules.transactional_keys.update(r.key for r in _records(raw, header) if r.key is not None)
        return raw
    has_horizon = bool(header.attributes & ATTR_DELETE_HORIZON)
    horizon_passed = has_horizon and rules.now_ms >= header.base_timestamp
    records = list(_records(raw, header))
    kept: list[_RawRecord] = []
    keeps_tombstone = False
    for record in records:
        if record.key is not None:
            latest = rules.latest.get(record.key)
            if latest is not None and header.base_offset + record.offset_delta < latest:
                stats.records_removed += 1
                continue
            if record.is_tombstone:
                if horizon_passed and record.key not in rules.transactional_keys:
                    stats.tombstones_removed += 1
                    continue
                keeps_tombstone = True
        kept.append(record)
    if not kept:
        if not rules.is_producers_last(header):
            return None
        return raw if not records else _empty_batch(header)
    if len(kept) == len(records) and keeps_tombstone == has_horizon:
        return raw
    horizon = None
    if keeps_tombstone:
        horizon = header.base_timestamp if has_horizon else rules.now_ms + rules.delete_retention_ms
    return _rebuild(header, kept, horizon)


def _rebuild(header: BatchHeader, kept: list[_RawRecord], horizon: int | None) -> bytes:
    """A batch of ``kept`` with ``header``'s identity; timestamps are re-based, never changed."""
    timestamps = [header.base_timestamp + r.timestamp_delta for r in kept]
    base_ts = horizon if horizon is not None else timestamps[0]
    block = bytearray()
    for record, ts in zip(kept, timestamps, strict=True):
        body = bytearray((record.attributes,))
        encode_varint(ts - base_ts, body)
        encode_varint(record.offset_delta, body)
        body += record.tail
        encode_varint(len(body), block)
        block += body
    payload = compress(Compression(header.compression), block)
    attributes = header.attributes & ~ATTR_DELETE_HORIZON
    if horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    max_ts = header.max_timestamp if header.is_log_append_time else max(timestamps)
    buf = bytearray(HEADER_SIZE + len(payload))
    buf[HEADER_SIZE:] = payload
    fields = header._replace(
        batch_length=len(buf) - LOG_OVERHEAD,
        magic=CURRENT_MAGIC,
        crc=0,
        attributes=attributes,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        records_count=len(kept),
    )
    return _with_crc(buf, fields)


def _empty_batch(header: BatchHeader) -> bytes:
    """A header-only batch that keeps the offsets and producer state of ``header`` (as Kafka keeps)."""
    fields = header._replace(
        batch_length=HEADER_SIZE - LOG_OVERHEAD,
        crc=0,
        attributes=header.attributes & ~(ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON),
        base_timestamp=header.max_timestamp,
        records_count=0,
    )
    return _with_crc(bytearray(HEADER_SIZE), fields)


def _with_crc(buf: bytearray, header: BatchHeader) -> bytes:
    HEADER.pack_into(buf, 0, *header)
    _CRC.pack_into(buf, CRC_POS, crc_of(buf, 0, len(buf)))
    return bytes(buf)


# -- recovery ----------------------------------------------------------------------------------


def finish_interrupted_swaps(directory: Path) -> list[str]:
    """Complete (or roll back) compaction swaps a crash interrupted; returns the swap files handled.

    Index ``.swap`` files are deleted (indexes are rebuilt from the log). For each
    ``<base>.log.swap``: every segment whose base offset lies in ``[base, end)`` of the swap's
    batches is one it replaces, so it is deleted, and the swap becomes ``<base>.log`` (with no
    index: opening it rebuilds them). A swap that fails validation is rolled back instead when
    ``<base>.log`` still exists. Raises OSError.
    """
    handled: list[str] = []
    swaps: list[int] = []
    for path in sorted(directory.iterdir()):
        if not path.name.endswith(SWAP_SUFFIX):
            continue
        parsed = parse_segment_file(path.name.removesuffix(SWAP_SUFFIX))
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            swaps.append(parsed[0])
        else:
            path.unlink()
            handled.append(path.name)
    for base in swaps:
        log_path = segment_paths(directory, base)[0]
        swap_path = log_path.with_name(log_path.name + SWAP_SUFFIX)
        handled.append(swap_path.name)
        end, damaged = _end_of_swap(swap_path, base)
        if damaged and log_path.exists():
            log.warning("%s: damaged compaction swap file %s rolled back", directory, swap_path.name)
            swap_path.unlink()
            continue
        for path in sorted(directory.iterdir()):
            parsed = parse_segment_file(path.name)
            if parsed is not None and base <= parsed[0] < max(end, base + 1):  # .log, .index, .timeindex
                path.unlink()
        swap_path.rename(log_path)
        log.warning("%s: finished the compaction swap of %s", directory, swap_path.name)
    if handled:
        _fsync_dir(directory)
    return handled


def _end_of_swap(path: Path, base: int) -> tuple[int, bool]:
    """``(next offset after the valid batches, whether a bad batch was found)``."""
    end = base
    fd = os.open(path, os.O_RDONLY)
    try:
        for _, header in scan_batches(fd, os.fstat(fd).st_size, path=path, base_offset=base):
            end = header.next_offset
    except CorruptBatchError:
        return end, True
    finally:
        os.close(fd)
    return end, False


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
