"""Reading one planned byte range of a segment file into Arrow batches (on an executor).

The file is read in chunks of :data:`READ_BYTES` (a batch larger than that is read whole),
each batch handed to :class:`spark_jobs._rows.Rows` as it is stored, and the rows flushed
whenever they fill an Arrow batch: memory stays bounded whatever the segment's size.

Damage never raises. A torn tail (fewer bytes left than a batch header, or a batchLength
that does not fit the file) or garbage (a length below the minimum, a magic byte that is no
record format's) becomes one invalid row naming the file and byte position, and the range
ends there: past it there is no way to find the next batch. A batch that is whole but whose
CRC does not match, or that does not decode, is the decoder's business (see ``_rows``), and
reading goes on after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from spark_jobs._rows import BatchRows, Rows
from storage.records import HEADER_SIZE, LOG_OVERHEAD, PREFIX

from ._segments_files import MAGIC_POS, MIN_BATCH_LENGTH
from ._segments_plan import SegmentRange

READ_BYTES = 4 * 1024 * 1024
_OFFSET_SPAN = 2**31  # a segment's offsets lie within an int32 of its base offset


def read_range(part: SegmentRange, *, include_control: bool, rows_of: str = "records") -> Iterator[pa.RecordBatch]:
    """Arrow batches of the rows of the batches that start in ``part``'s byte range (``rows_of``
    ``batches``: one row per batch, see :class:`~spark_jobs._rows.BatchRows`)."""
    kind = BatchRows if rows_of == "batches" else Rows
    rows = kind(include_control=include_control, bounds=part.bounds)
    for _ in _fill(rows, part):
        batch = rows.flush()
        if batch is not None:
            yield batch
    batch = rows.flush()
    if batch is not None:
        yield batch


class _Cursor:
    """A position in an open segment file and a chunk of the bytes from there on."""

    def __init__(self, fd: int, pos: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self.pos = pos
        self._chunk, self._at = b"", pos

    def view(self, n: int) -> memoryview:
        """Bytes ``[pos, pos + n)``, which the caller knows the file holds."""
        pos = self.pos
        if pos < self._at or pos + n > self._at + len(self._chunk):
            self._chunk, self._at = os.pread(self.fd, max(READ_BYTES, n), pos), pos
        return memoryview(self._chunk)[pos - self._at : pos - self._at + n]


def _fill(rows: Rows | BatchRows, part: SegmentRange) -> Iterator[None]:
    """Feed ``rows`` batch by batch; yields whenever they are full."""
    path = Path(part.path)
    try:
        f = path.open("rb")
    except OSError as exc:
        rows.add_invalid(part.topic, part.partition, part.first_offset, f"cannot read {path}: {exc}", part.path)
        return
    with f:
        at = _Cursor(f.fileno(), part.start)
        expected = part.first_offset
        try:
            while at.pos < part.end:
                damage, base, size, magic = _look(at)
                if damage:
                    where = _where(damage, path, at.pos)
                    rows.add_invalid(part.topic, part.partition, _offset(base, expected), where, part.path)
                    return
                assert base is not None  # a whole batch's prefix was read
                if magic == 2 and base >= part.bounds.end_offset:
                    return  # offsets only grow within a segment: the rest is past the end bound
                after = _decode(rows, at.view(size), part, base, path, at.pos)
                if magic == 2:
                    expected = max(expected, after)
                at.pos += size
                if rows.full:
                    yield
        except OSError as exc:  # a failing disk: what was read stands, the rest is one invalid row
            where = _where(f"read error {exc}", path, at.pos)
            rows.add_invalid(part.topic, part.partition, expected, where, part.path)


def _look(at: _Cursor) -> tuple[str, int | None, int, int]:
    """``(damage, base offset, size, magic)`` of what starts at the cursor; damage is empty
    when it is a whole batch (or an old-format message set, which the decoder reports)."""
    left = at.size - at.pos
    if left < HEADER_SIZE:
        base = PREFIX.unpack_from(at.view(left))[0] if left >= PREFIX.size else None
        if left <= 0:
            return f"the file ends at byte {at.size}, before the range planned to read (truncated?)", base, 0, -1
        return f"torn tail: {left} bytes left, a batch header needs {HEADER_SIZE}", base, 0, -1
    head = at.view(HEADER_SIZE)
    base, length = PREFIX.unpack_from(head)
    magic = head[MAGIC_POS]
    if length < MIN_BATCH_LENGTH:
        return f"not a record batch: batchLength {length} is below the minimum {MIN_BATCH_LENGTH}", base, 0, magic
    if length + LOG_OVERHEAD > left:
        return f"torn tail: batchLength {length} does not fit the file ({left} of {at.size} bytes left)", base, 0, magic
    if magic not in (0, 1, 2):
        return f"not a record batch: magic byte {magic}", base, 0, magic
    return "", base, length + LOG_OVERHEAD, magic


def _decode(rows: Rows | BatchRows, batch: memoryview, part: SegmentRange, base: int, path: Path, pos: int) -> int:
    """Hand one whole batch to ``rows``; returns the offset after it (``base`` if it failed)."""
    try:
        return rows.add_batch(batch, part.topic, part.partition, part.path)
    except Exception as exc:  # an audit counts what it cannot read; it does not stop there
        where = _where(f"the batch does not decode: {type(exc).__name__}: {exc}", path, pos)
        rows.add_invalid(part.topic, part.partition, base, where, part.path)
        return base


def _offset(base: int | None, expected: int) -> int:
    """The offset an invalid row carries: the damaged batch's base offset when its prefix
    is plausible (at or past the expected offset, within the segment's span), else the
    offset after the previous batch."""
    if base is not None and expected <= base < expected + _OFFSET_SPAN:
        return base
    return expected


def _where(damage: str, path: Path, pos: int) -> str:
    return f"{damage}: {path} at byte {pos}"
