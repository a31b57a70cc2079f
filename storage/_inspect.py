"""Read-only inspection of segment files: listing batches and verifying logs and indexes.

These never modify a file; ``strait log dump`` and ``strait log verify`` are built on them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._errors import CorruptBatchError, CorruptIndexError, StorageError
from ._files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_partition_dir,
    parse_segment_file,
    segment_paths,
    txn_index_path,
)
from ._index import OffsetIndex, TimeIndex
from ._scan import scan_batches
from ._txn_index import TransactionIndex
from .records import HEADER_SIZE, LOG_OVERHEAD, PREFIX, BatchHeader, RecordBatch, crc_of, read_header

_UNBOUNDED_INDEX = 2**62


@dataclass(frozen=True, slots=True)
class BatchInfo:
    position: int
    header: BatchHeader
    crc_ok: bool


def segment_files(path: Path) -> list[Path]:
    """The ``.log`` files under ``path`` in offset order: one file, a partition dir, or a log dir."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise StorageError(f"{path} does not exist")
    if parse_partition_dir(path.name) is not None or any(path.glob(f"*{LOG_SUFFIX}")):
        return sorted(p for p in path.iterdir() if _is_log(p))
    out: list[Path] = []
    for child in sorted(path.iterdir()):
        if child.is_dir() and parse_partition_dir(child.name) is not None:
            out += sorted(p for p in child.iterdir() if _is_log(p))
    return out


def _is_log(p: Path) -> bool:
    parsed = parse_segment_file(p.name)
    return parsed is not None and parsed[1] == LOG_SUFFIX


def list_batches(log_path: Path) -> Iterator[BatchInfo]:
    """Every batch of a ``.log`` file with whether its CRC matches.

    Stops with CorruptBatchError at a batch whose length does not fit the file (a torn
    tail): past that point there is no way to find the next batch.
    """
    size = log_path.stat().st_size
    with log_path.open("rb") as f:
        fd = f.fileno()
        pos = 0
        while pos < size:
            raw = os.pread(fd, HEADER_SIZE, pos)
            if len(raw) < HEADER_SIZE:
                raise CorruptBatchError(f"torn batch header: {len(raw)} bytes left", position=pos, path=log_path)
            _, batch_length = PREFIX.unpack_from(raw)
            if batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + batch_length + LOG_OVERHEAD > size:
                raise CorruptBatchError(
                    f"batchLength {batch_length} does not fit the file", position=pos, path=log_path
                )
            header = read_header(raw)
            body = os.pread(fd, header.size, pos)
            yield BatchInfo(pos, header, header.magic == 2 and crc_of(body, 0, header.size) == header.crc)
            pos += header.size


def read_batch(log_path: Path, position: int, header: BatchHeader) -> RecordBatch:
    with log_path.open("rb") as f:
        return RecordBatch(os.pread(f.fileno(), header.size, position), validate=False)


def index_entries(path: Path) -> list[tuple[int, int]]:
    """Entries of an index file as absolute values: ``(offset, position)`` or ``(timestamp, offset)``."""
    parsed = parse_segment_file(path.name)
    if parsed is None:
        raise StorageError(f"{path.name} is not a segment file name")
    base, suffix = parsed
    if suffix == INDEX_SUFFIX:
        index = OffsetIndex(path, base, _UNBOUNDED_INDEX)
        index.load(_UNBOUNDED_INDEX)
        return [index.lookup_entry(i) for i in range(len(index))]
    if suffix == TIME_INDEX_SUFFIX:
        tindex = TimeIndex(path, base, _UNBOUNDED_INDEX)
        tindex.load()
        return [tindex.lookup_entry(i) for i in range(len(tindex))]
    raise StorageError(f"{path.name} is not an index file")


def verify(path: Path) -> tuple[int, int]:
    """Check every batch and index under ``path``; returns ``(segments, batches)`` checked.

    Raises CorruptBatchError / CorruptIndexError / StorageError naming the first bad file
    and position. A missing index is fine (it is rebuilt when the log is opened).
    """
    logs = segment_files(path)
    batches = 0
    previous_end: dict[Path, int] = {}
    for log_path in logs:
        base, _ = parse_segment_file(log_path.name) or (0, "")
        size = log_path.stat().st_size
        positions: dict[int, BatchHeader] = {}
        with log_path.open("rb") as f:
            for position, header in scan_batches(f.fileno(), size, path=log_path, base_offset=base):
                positions[position] = header
        batches += len(positions)
        next_offset = max((h.next_offset for h in positions.values()), default=base)
        prior = previous_end.get(log_path.parent)
        if prior is not None and base < prior:
            raise CorruptBatchError(
                f"segment starts at offset {base}, inside the previous segment", position=0, path=log_path
            )
        previous_end[log_path.parent] = next_offset
        max_ts = max((h.max_timestamp for h in positions.values()), default=-1)
        _verify_indexes(log_path, base, size, positions, next_offset, max_ts)
    return len(logs), batches


def _verify_indexes(
    log_path: Path, base: int, size: int, positions: dict[int, BatchHeader], next_offset: int, max_ts: int
) -> None:
    _, index_path, time_path = segment_paths(log_path.parent, base)
    if index_path.exists():
        index = OffsetIndex(index_path, base, _UNBOUNDED_INDEX)
        index.load(size)
        for i in range(len(index)):
            offset, position = index.lookup_entry(i)
            header = positions.get(position)
            if header is None or not header.base_offset <= offset <= header.last_offset:
                raise CorruptIndexError(
                    index_path,
                    f"entry {i} (offset {offset}, position {position}) does not point at the batch holding it",
                )
    txn_index = TransactionIndex(txn_index_path(log_path.parent, base))
    txn_index.load()
    markers = {h.base_offset for h in positions.values() if h.is_control}
    for i, entry in enumerate(txn_index.entries):
        if entry.last_offset not in markers or entry.first_offset > entry.last_offset:
            raise CorruptIndexError(
                txn_index.path, f"entry {i} (offsets {entry.first_offset}..{entry.last_offset}) ends at no marker"
            )
    if time_path.exists():
        tindex = TimeIndex(time_path, base, _UNBOUNDED_INDEX)
        tindex.load(next_offset)
        for i in range(len(tindex)):
            timestamp, offset = tindex.lookup_entry(i)
            if timestamp > max_ts:
                raise CorruptIndexError(
                    time_path, f"entry {i} (timestamp {timestamp}) is later than every batch (max {max_ts})"
                )
