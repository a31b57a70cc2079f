"""The sparse offset index (``.index``) and time index (``.timeindex``) of a segment.

``.index`` is a sequence of 8-byte entries, strictly increasing in both fields::

    offset  size  field
         0     4  relativeOffset   int32: offset - segment base offset (the last offset of
                                   the batch that starts at position)
         4     4  position         int32: byte position of that batch in the .log file

``.timeindex`` is a sequence of 12-byte entries, strictly increasing timestamps::

    offset  size  field
         0     8  timestamp        int64: the largest timestamp seen in the segment so far
         8     4  relativeOffset   int32: the offset of the batch that holds that timestamp

Entries live in memory; ``flush()`` writes the ones not yet on disk. Kafka preallocates
index files and trims them on close, so trailing all-zero entries are padding and are
ignored when loading. The index of a segment past the recovery point is never trusted
after an unclean stop: recovery rebuilds it from the log.
"""

from __future__ import annotations

import abc
import bisect
import os
import struct
from array import array
from pathlib import Path

from ._errors import CorruptIndexError


class _Index(abc.ABC):
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY.size)
        self._keys = array("q")  # offset (offset index) or timestamp (time index)
        self._values = array("q")  # position (offset index) or absolute offset (time index)
        self._on_disk = 0  # leading entries already written to the file
        self._file_entries = -1  # entries the file holds; -1 = unknown, rewrite its length

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return len(self._keys) * self.ENTRY.size

    def lookup_entry(self, i: int) -> tuple[int, int]:
        """Entry ``i`` in absolute terms: ``(offset, position)`` or ``(timestamp, offset)``."""
        return self._keys[i], self._values[i]

    def reset(self) -> None:
        del self._keys[:]
        del self._values[:]
        self._on_disk = 0

    def _load_entries(self) -> list[tuple[int, ...]]:
        """Read the file's entries, dropping zero padding. Raises CorruptIndexError if torn."""
        data = self.path.read_bytes()
        size = self.ENTRY.size
        if len(data) % size:
            raise CorruptIndexError(self.path, f"size {len(data)} is not a multiple of the entry size {size}")
        entries = list(self.ENTRY.iter_unpack(data))
        zero = (0,) * len(self.ENTRY.format.lstrip(">"))
        while len(entries) > 1 and entries[-1] == zero:
            entries.pop()
        return entries

    def flush(self, *, fsync: bool) -> None:
        """Write the entries not yet on disk (and cut the file to the entry count); optionally fsync."""
        n = len(self._keys)
        if self._on_disk == n and self._file_entries == n and not fsync:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self._on_disk < n:
                buf = bytearray(self.ENTRY.size * (n - self._on_disk))
                for i in range(self._on_disk, n):
                    self.ENTRY.pack_into(buf, (i - self._on_disk) * self.ENTRY.size, *self._entry(i))
                os.pwrite(fd, buf, self._on_disk * self.ENTRY.size)
            if self._file_entries != n:
                os.ftruncate(fd, n * self.ENTRY.size)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._on_disk = n
        self._file_entries = n

    @abc.abstractmethod
    def _entry(self, i: int) -> tuple[int, int]:
        """Entry ``i`` as it is written to the file."""

    def _truncate_entries(self, keep: int) -> None:
        del self._keys[keep:]
        del self._values[keep:]
        self._on_disk = min(self._on_disk, keep)


class OffsetIndex(_Index):
    ENTRY = struct.Struct(">ii")  # relativeOffset, position

    def load(self, log_size: int) -> None:
        """Load and sanity-check the file against a log of ``log_size`` bytes. Raises CorruptIndexError."""
        self.reset()
        entries = self._load_entries()
        last_off, last_pos = -1, -1
        for rel, pos in entries:
            if rel <= last_off or pos <= last_pos:
                raise CorruptIndexError(
                    self.path, f"entry (offset {self.base_offset + rel}, position {pos}) is not after the one before"
                )
            if rel < 0 or pos >= log_size:
                raise CorruptIndexError(
                    self.path, f"entry (offset {self.base_offset + rel}, position {pos}) is outside the log"
                )
            last_off, last_pos = rel, pos
            self._keys.append(self.base_offset + rel)
            self._values.append(pos)
        self._on_disk = len(entries)
        self._file_entries = -1

    def append(self, offset: int, position: int) -> None:
        if self._keys and (offset <= self._keys[-1] or position <= self._values[-1]):
            raise CorruptIndexError(
                self.path,
                f"cannot add (offset {offset}, position {position}) after "
                f"(offset {self._keys[-1]}, position {self._values[-1]})",
            )
        self._keys.append(offset)
        self._values.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``, else ``(base_offset, 0)``."""
        i = bisect.bisect_right(self._keys, offset)
        if i == 0:
            return self.base_offset, 0
        return self._keys[i - 1], self._values[i - 1]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return self.base_offset, 0
        return self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset))

    def _entry(self, i: int) -> tuple[int, int]:
        return self._keys[i] - self.base_offset, self._values[i]


class TimeIndex(_Index):
    ENTRY = struct.Struct(">qi")  # timestamp, relativeOffset

    def load(self, next_offset_bound: int | None = None) -> None:
        """Load and sanity-check the file. Raises CorruptIndexError."""
        self.reset()
        entries = self._load_entries()
        last_ts, last_off = -(2**63), -1
        for ts, rel in entries:
            if ts <= last_ts or rel < last_off or rel < 0:
                raise CorruptIndexError(
                    self.path, f"entry (timestamp {ts}, offset {self.base_offset + rel}) is not after the one before"
                )
            if next_offset_bound is not None and self.base_offset + rel >= next_offset_bound:
                raise CorruptIndexError(
                    self.path, f"entry offset {self.base_offset + rel} is past the log end {next_offset_bound}"
                )
            last_ts, last_off = ts, rel
            self._keys.append(ts)
            self._values.append(self.base_offset + rel)
        self._on_disk = len(entries)
        self._file_entries = -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is larger than the last one."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        if self._values and offset < self._values[-1]:
            raise CorruptIndexError(self.path, f"offset {offset} is before the last entry's {self._values[-1]}")
        self._keys.append(timestamp)
        self._values.append(offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= ``timestamp``, else ``(-1, base_offset)``."""
        i = bisect.bisect_right(self._keys, timestamp)
        if i == 0:
            return -1, self.base_offset
        return self._keys[i - 1], self._values[i - 1]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries pointing at offsets >= ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._values, offset))

    def _entry(self, i: int) -> tuple[int, int]:
        return self._keys[i], self._values[i] - self.base_offset
