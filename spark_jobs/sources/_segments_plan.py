"""Planning a ``strait-segments`` read: which copies, which segments, which byte ranges.

Runs in the driver (Spark's planning worker): lists dirs, stats files, reads checkpoints,
index files and batch headers, never a record. The result is one :class:`SegmentRange`
per segment file, or per byte range of a segment larger than ``maxBytesPerPartition``.

A range starts at a batch boundary and holds the batches that *start* inside it, so
consecutive ranges of one segment share no batch and miss none. A boundary comes from the
segment's ``.index`` (an entry is trusted only after the batch header at its position holds
its offset) or, where the index is missing, stale or too sparse, from walking batch headers.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from spark_jobs._rows import Bounds
from storage import StorageError

from ._segments_files import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    Checkpoints,
    Copy,
    Segment,
    batch_starts,
    find_copies,
    index_of,
    indexed_header,
    longest,
)
from ._segments_options import EARLIEST, LATEST, SegmentOptions

NEVER = 2**63 - 1
_INDEX_TRIES = 8


@dataclass(frozen=True)
class SegmentRange(InputPartition):
    """One input partition: the batches of ``path`` that start in bytes ``[start, end)``.

    ``first_offset`` is the offset expected at ``start`` (an invalid row for damage found
    there carries it); ``bounds`` are the copy's offset and time bounds.
    """

    path: str
    topic: str
    partition: int
    start: int
    end: int
    first_offset: int
    bounds: Bounds


def plan(opts: SegmentOptions) -> list[SegmentRange]:
    """The input partitions of a read, in (topic, partition, copy, offset) order.

    Raises ValueError naming the option at fault: a path that is missing or holds nothing,
    a named topic no path holds, offsets JSON naming a partition that is not read, or a
    replication-offset-checkpoint that committedOnly needs and cannot read.
    """
    found = find_copies(opts.paths)
    if opts.topics is not None:
        present = {c.tp.topic for c in found}
        missing = sorted(opts.topics - present)
        if missing:
            raise ValueError(f"topics: no partition of {', '.join(missing)} under {', '.join(opts.paths)}")
    copies = [c for c in found if opts.wants_topic(c.tp.topic)]
    read = {(c.tp.topic, c.tp.partition) for c in copies}
    for spec in (opts.starting, opts.ending):
        for topic, partition in spec.named:
            if (topic, partition) not in read:
                raise ValueError(
                    f"{spec.option}: {topic}-{partition} is not read (no path holds it, or the topic filter "
                    "leaves it out)"
                )
    if opts.copies == "longest":
        copies = longest(copies)
    checkpoints = Checkpoints()
    out: list[SegmentRange] = []
    for copy in copies:
        out += _plan_copy(copy, opts, checkpoints)
    return out


def _plan_copy(copy: Copy, opts: SegmentOptions, checkpoints: Checkpoints) -> list[SegmentRange]:
    if not copy.segments:
        return []
    tp = copy.tp
    start = opts.starting.of(tp.topic, tp.partition)
    if start == EARLIEST:
        try:
            log_start = checkpoints.entry(copy.log_dir, LOG_START_OFFSET_CHECKPOINT, tp)
        except StorageError:  # a damaged checkpoint hides nothing: read from the first segment
            log_start = None
        start = max(copy.segments[0].base_offset, log_start or 0)
    end = opts.ending.of(tp.topic, tp.partition)
    if end == LATEST:
        end = NEVER
    if opts.committed_only:
        try:
            hw = checkpoints.entry(copy.log_dir, HIGH_WATERMARK_CHECKPOINT, tp)
        except StorageError as exc:
            raise ValueError(f"committedOnly=true: cannot read the high watermark of {tp}: {exc}") from None
        if hw is not None:
            end = min(end, hw)
    if start >= end:
        return []
    bounds = Bounds(start_offset=start, end_offset=end)
    if opts.start_ms is not None or opts.end_ms is not None:
        bounds = Bounds(
            start_offset=start,
            end_offset=end,
            start_ms=opts.start_ms if opts.start_ms is not None else bounds.start_ms,
            end_ms=opts.end_ms if opts.end_ms is not None else bounds.end_ms,
        )
    out: list[SegmentRange] = []
    for i, seg in enumerate(copy.segments):
        upper = copy.segments[i + 1].base_offset if i + 1 < len(copy.segments) else NEVER
        if seg.size == 0 or upper <= start or seg.base_offset >= end:
            continue  # every offset of this segment is outside [start, end)
        try:
            ranges = _byte_ranges(seg, start, opts.max_bytes)
        except OSError:  # unreadable now: one range, whose reader reports why
            ranges = [(0, seg.size, seg.base_offset)]
        for pos, stop, first in ranges:
            if first < end:
                out.append(SegmentRange(str(seg.path), tp.topic, tp.partition, pos, stop, first, bounds))
    return out


def _byte_ranges(seg: Segment, start_offset: int, max_bytes: int) -> list[tuple[int, int, int]]:
    """``(start, end, first offset)`` of each byte range of ``seg`` to read from ``start_offset`` on."""
    with seg.path.open("rb") as f:
        fd = f.fileno()
        index: list[tuple[int, int]] | None = None
        pos, first = 0, seg.base_offset
        if start_offset > seg.base_offset:
            index = index_of(seg)
            # The last indexed batch wholly before start_offset: reading from it skips at most
            # one index interval of batches (their headers say they are out of bounds).
            i = bisect.bisect_left(index, (start_offset,)) - 1
            for entry in index[max(0, i - _INDEX_TRIES + 1) : i + 1][::-1]:
                h = indexed_header(fd, seg, entry)
                if h is not None:
                    pos, first = entry[1], h.base_offset
                    break
        if seg.size - pos <= max_bytes:
            return [(pos, seg.size, first)]
        if index is None:
            index = index_of(seg)
        bounds = [(pos, first), *_cuts(fd, seg, pos, max_bytes, index)]
    ends = [b[0] for b in bounds[1:]] + [seg.size]
    return [(b[0], stop, b[1]) for b, stop in zip(bounds, ends, strict=True)]


def _cuts(fd: int, seg: Segment, start: int, max_bytes: int, index: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Batch boundaries ``(position, base offset)`` after ``start``, at most ``max_bytes``
    apart where batches allow (a batch larger than that is a range of its own)."""
    positions = [position for _, position in index]
    cuts: list[tuple[int, int]] = []
    prev = start
    while seg.size - prev > max_bytes:
        target = prev + max_bytes
        cut: tuple[int, int] | None = None
        i = bisect.bisect_right(positions, target) - 1
        if i >= 0 and positions[i] > prev:
            h = indexed_header(fd, seg, index[i])
            if h is not None:
                cut = (positions[i], int(h.base_offset))
        if cut is None:
            cut = _walk_to(fd, seg.size, prev, target)
        if cut is None:
            break  # damage or the end of the file: the rest is one range, its reader reports the damage
        cuts.append(cut)
        prev = cut[0]
    return cuts


def _walk_to(fd: int, size: int, prev: int, target: int) -> tuple[int, int] | None:
    """The last batch start in ``(prev, target]`` by walking headers from ``prev`` (a batch
    start), else the first one after ``prev``; None when there is none."""
    found = None
    for pos, h in batch_starts(fd, size, prev):
        if pos <= prev:
            continue
        if pos > target:
            return found or (pos, h.base_offset)
        found = (pos, h.base_offset)
    return found
