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

How a batch is rewritten (offsets kept, tombstones, null keys, control and transactional
batches) is in ``_cleaner_rewrite``; the swap's file steps and their crash recovery in
``_cleaner_swap``; the checkpoint file in ``_cleaner_checkpoint``. This module plans the run,
reads the segments and drives the passes.

Decision: the **memory** of the map is a dict of the dirty section's distinct keys (Kafka
bounds it by ``log.cleaner.dedupe.buffer.size`` and cleans in several runs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._cleaner_checkpoint import read_cleaner_checkpoint, write_cleaner_checkpoint
from ._cleaner_rewrite import CleanStats, Rules, clean_batch, raw_records
from ._cleaner_swap import finish_interrupted_swaps, swap_in
from ._config import LogConfig
from ._errors import CorruptBatchError, StorageError
from ._faults import FaultPoints
from ._files import CLEANED_SUFFIX, LOG_SUFFIX, file_name
from ._scan import INT32_MAX
from ._segment import LogSegment
from .records import HEADER_SIZE, LOG_OVERHEAD, PREFIX, BatchHeader, Offset, check_batch
from .records import read_header as read_batch_header
from .records._batch import ATTR_DELETE_HORIZON

# read_cleaner_checkpoint, write_cleaner_checkpoint (PartitionLog) and finish_interrupted_swaps
# (recovery) are imported from here, where they were written before the split.
__all__ = [
    "CleanResult",
    "CleanerRun",
    "finish_interrupted_swaps",
    "read_cleaner_checkpoint",
    "write_cleaner_checkpoint",
]

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
    def base_offset(self) -> Offset:
        return self.segment.base_offset


@dataclass
class _Group:
    """Adjacent cleanable segments rewritten into one file named by the first one's base offset."""

    views: list[_SegmentView]
    cleaned_path: Path | None = None
    size_after: int = 0
    changed: bool = False

    @property
    def base_offset(self) -> Offset:
        return self.views[0].base_offset


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
        self._stats = CleanStats()
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
        rules = Rules(self._map_dirty_section(), self.now_ms, self.config.delete_retention_ms, self._is_producers_last)
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
                for record in raw_records(raw, header):
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and offset >= self.first_dirty:
                        latest[record.key] = offset
        return latest

    def _build_group(self, group: _Group, rules: Rules) -> None:
        path = self.dir / (file_name(group.base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)
        group.cleaned_path = path
        group.changed = len(group.views) > 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            out = bytearray()
            for view in group.views:
                for header, raw in _batches(view, self.dir):
                    cleaned = clean_batch(raw, header, rules, self._stats)
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
        cleaned, group.cleaned_path = group.cleaned_path, None  # from the commit point on, recovery owns it
        replaced = [v.segment for v in group.views]
        return swap_in(self.dir, group.base_offset, cleaned, replaced, self.config, self._faults, self.now_ms)

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


def _write_all(fd: int, data: bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- reading the segments ------------------------------------------------------------------------


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
