"""What ``strait-segments`` finds on disk: copies of partitions, their checkpoints and log ends.

Everything here runs in the driver while Spark plans the read, so it only lists directories,
stats files, reads checkpoint files and batch headers; it never decodes a record.

How a path is understood (each entry of the ``path`` option, in order):

- a file: a segment file ``<topic>-<partition>/<20-digit base offset>.log``;
- a partition dir ``<topic>-<partition>/`` (it holds a ``.log`` file, or no directory at all);
- a log dir: it holds ``meta.properties`` or a partition dir with a ``.log`` file;
- anything else (a node's data dir, a site's dir holding several nodes): every log dir below
  it, found by walking down and stopping at each log dir.

One partition dir is one *copy* of its partition; several nodes' dirs (or a backup next to
the original) give several copies of the same partition.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from storage import StorageError, TopicPartition, file_name, index_entries, parse_partition_dir, read_offsets
from storage.records import HEADER_SIZE, LOG_OVERHEAD, PREFIX, BatchHeader, read_header

# Kafka's file names for the checkpoints a log dir holds (storage/_files.py declares the same).
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
META_PROPERTIES = "meta.properties"

LOG = ".log"
INDEX = ".index"
MAGIC_POS = 16
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_HEADER_READ = 64 * 1024  # bytes read at once while walking batch headers
_INDEX_TRIES = 8  # index entries tried (from the last) before walking a segment from its start


@dataclass(frozen=True, slots=True)
class Segment:
    path: Path
    base_offset: int
    size: int


@dataclass(slots=True)
class Copy:
    """One partition dir: a copy of ``tp`` as one node (or one backup) holds it."""

    tp: TopicPartition
    dir: Path
    order: int  # the n-th copy found, in path order then name order (copies=longest breaks ties by it)
    segments: list[Segment]  # in offset order; only the named files when the path named files

    @property
    def log_dir(self) -> Path:
        return self.dir.parent


def segment_base(path: Path) -> int | None:
    """The base offset a ``.log`` file's name gives, or None when it is not a segment file name."""
    stem, suffix = path.stem, path.suffix
    if suffix != LOG or not stem.isdigit() or file_name(int(stem), LOG) != path.name:
        return None
    return int(stem)


def check_paths(paths: tuple[str, ...]) -> None:
    """Raises ValueError naming the first ``path`` entry that does not exist."""
    for entry in paths:
        if not Path(entry).expanduser().exists():
            raise ValueError(f"path: {entry} does not exist")


def find_copies(paths: tuple[str, ...]) -> list[Copy]:
    """Every copy of every partition under ``paths`` (deduplicated), in path order.

    Raises ValueError naming the ``path`` entry that does not exist or holds nothing
    strait-segments can read.
    """
    check_paths(paths)
    copies: dict[Path, Copy] = {}
    whole: set[Path] = set()  # partition dirs taken whole (not only some named files)
    for entry in paths:
        p = Path(entry).expanduser()
        if p.is_file():
            base = segment_base(p)
            tp = parse_partition_dir(p.parent.name)
            if base is None or tp is None:
                raise ValueError(
                    f"path: {entry} is a file but not a segment file (<topic>-<partition>/<20-digit base offset>.log)"
                )
            key = p.parent.resolve()
            if key in whole:
                continue
            copy = copies.get(key) or copies.setdefault(key, Copy(tp, p.parent.absolute(), len(copies), []))
            if all(s.path.resolve() != p.resolve() for s in copy.segments):
                copy.segments.append(Segment(p.absolute(), base, p.stat().st_size))
                copy.segments.sort(key=lambda s: s.base_offset)
            continue
        if _is_partition_dir(p):
            dirs = [p]
        else:
            log_dirs = list(_log_dirs(p))
            if not log_dirs:
                raise ValueError(f"path: {entry} holds no segment file, partition dir or log dir")
            dirs = [d for log_dir in log_dirs for d in _partition_dirs(log_dir)]
        for d in dirs:
            key = d.resolve()
            tp = parse_partition_dir(d.name)
            assert tp is not None
            if key in whole:
                continue
            whole.add(key)
            earlier = copies.get(key)
            copies[key] = Copy(tp, d.absolute(), earlier.order if earlier else len(copies), _segments_of(d))
    return sorted(copies.values(), key=lambda c: (c.tp, c.order))


def _segments_of(partition_dir: Path) -> list[Segment]:
    out = []
    for child in partition_dir.iterdir():
        base = segment_base(child)
        if base is None:
            continue
        try:
            st = child.stat()
        except FileNotFoundError:  # a live node's retention removed it just now
            continue
        if stat.S_ISREG(st.st_mode):
            out.append(Segment(child.absolute(), base, st.st_size))
    return sorted(out, key=lambda s: s.base_offset)


def _is_partition_dir(d: Path) -> bool:
    if parse_partition_dir(d.name) is None or (d / META_PROPERTIES).exists():
        return False
    children = list(d.iterdir())
    return any(segment_base(c) is not None for c in children) or not any(c.is_dir() for c in children)


def _is_log_dir(d: Path) -> bool:
    if (d / META_PROPERTIES).is_file():
        return True
    # A partition dir holds segment files (20-digit names): `node-1/node.log` is a node's log file,
    # and `node-1` a node's data dir, not partition 1 of topic "node".
    return any(
        c.is_dir()
        and parse_partition_dir(c.name) is not None
        and any(segment_base(f) is not None for f in c.glob("*" + LOG))
        for c in d.iterdir()
    )


def _log_dirs(top: Path) -> Iterator[Path]:
    """Log dirs at or below ``top`` (not below a log dir; symlinked dirs are not followed)."""
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            if _is_log_dir(d):
                yield d
                continue
            children = sorted((c for c in d.iterdir() if c.is_dir() and not c.is_symlink()), reverse=True)
        except PermissionError:
            continue
        stack += children


def _partition_dirs(log_dir: Path) -> list[Path]:
    return sorted(c for c in log_dir.iterdir() if c.is_dir() and _is_partition_dir(c))


class Checkpoints:
    """A log dir's offset checkpoints, each file read once (missing file: no entries)."""

    def __init__(self) -> None:
        self._read: dict[Path, dict[TopicPartition, int] | StorageError] = {}

    def entry(self, log_dir: Path, name: str, tp: TopicPartition) -> int | None:
        """The checkpoint's offset for ``tp``, or None when it has none. Raises StorageError
        (naming the file) when the file is malformed."""
        path = log_dir / name
        if path not in self._read:
            try:
                self._read[path] = dict(read_offsets(path))
            except (StorageError, OSError) as exc:
                self._read[path] = StorageError(f"{path}: {exc}")
        found = self._read[path]
        if isinstance(found, StorageError):
            raise found
        return found.get(tp)


def batch_starts(fd: int, size: int, start: int) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each batch from byte ``start`` on, reading headers only.

    Stops (without raising) at the first batch that is torn, is not magic 2, or whose length
    does not fit the file: what follows cannot be located without decoding.
    """
    pos = start
    buf, at = b"", start
    while size - pos >= HEADER_SIZE:
        if pos < at or pos + HEADER_SIZE > at + len(buf):
            buf, at = os.pread(fd, min(_HEADER_READ, size - pos), pos), pos
        offset = pos - at
        length = PREFIX.unpack_from(buf, offset)[1]
        if length < MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > size or buf[offset + MAGIC_POS] != 2:
            return
        yield pos, read_header(buf, offset)
        pos += length + LOG_OVERHEAD


def header_at(fd: int, size: int, position: int) -> BatchHeader | None:
    """The header of a whole magic-2 batch starting at ``position``, else None."""
    return next((h for pos, h in batch_starts(fd, size, position) if pos == position), None)


def index_of(segment: Segment) -> list[tuple[int, int]]:
    """The segment's offset index as ``(offset, position)`` entries (the offset is the last
    offset of the batch at ``position``); empty when it is missing or unreadable. Callers
    check an entry against the batch header before trusting it."""
    path = segment.path.with_suffix(INDEX)
    try:
        return [e for e in index_entries(path) if 0 <= e[1] < segment.size] if path.is_file() else []
    except (StorageError, OSError):
        return []


def indexed_header(fd: int, segment: Segment, entry: tuple[int, int]) -> BatchHeader | None:
    """The header at an index entry's position if the batch there holds the entry's offset."""
    offset, position = entry
    h = header_at(fd, segment.size, position)
    return h if h is not None and h.base_offset <= offset <= h.last_offset else None


def log_end(copy: Copy) -> int:
    """The offset after the last whole batch of the copy's last segment (its base offset when
    it holds none): how far this copy's log goes, judged from headers only.

    Remembered per last segment (path, size and modification time) for the life of the process:
    an active segment's ``.index`` may be empty on disk, and walking every batch header of a
    large one costs a read per batch."""
    if not copy.segments:
        return -1
    last = copy.segments[-1]
    try:
        st = last.path.stat()
        key = (str(last.path), st.st_size, st.st_mtime_ns)
    except OSError:
        return _log_end(copy)
    if key not in _ENDS:
        if len(_ENDS) > 4096:
            _ENDS.clear()
        _ENDS[key] = _log_end(copy)
    return _ENDS[key]


_ENDS: dict[tuple[str, int, int], int] = {}


def log_ends(copies: list[Copy]) -> list[int]:
    """:func:`log_end` of each copy, the files read in parallel (the walk waits on the disk
    when the files are not in the page cache)."""
    if len(copies) < 2:
        return [log_end(c) for c in copies]
    with ThreadPoolExecutor(max_workers=min(16, len(copies))) as pool:
        return list(pool.map(log_end, copies))


def longest(copies: list[Copy]) -> list[Copy]:
    """Per partition the copy whose log ends furthest (ties: the copy found first, the lower
    ``order``), in the order partitions are first found. A partition with one copy is not read."""
    by_tp: dict[TopicPartition, list[Copy]] = {}
    for copy in copies:
        by_tp.setdefault(copy.tp, []).append(copy)
    several = [c for group in by_tp.values() if len(group) > 1 for c in group]
    ends = dict(zip((id(c) for c in several), log_ends(several), strict=True))
    return [max(group, key=lambda c: (ends.get(id(c), 0), -c.order)) for group in by_tp.values()]


def _log_end(copy: Copy) -> int:
    last = copy.segments[-1]
    end = last.base_offset
    if last.size == 0:
        return end
    try:
        with last.path.open("rb") as f:
            fd = f.fileno()
            start = 0
            for entry in reversed(index_of(last)[-_INDEX_TRIES:]):
                if indexed_header(fd, last, entry) is not None:
                    start = entry[1]
                    break
            for _, h in batch_starts(fd, last.size, start):
                end = max(end, h.next_offset)
    except OSError:
        pass  # unreadable: judged by its name; reading it reports why
    return end
