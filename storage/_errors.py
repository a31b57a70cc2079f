"""The storage package's exceptions: one base, subclasses that name the values involved."""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base of every error the storage engine raises on purpose."""


class RecordFormatError(StorageError):
    """Bytes that are not a well-formed record batch or record (bad input, not bad disk)."""


class UnsupportedCompressionError(RecordFormatError):
    def __init__(self, codec: int) -> None:
        super().__init__(f"unsupported compression codec id {codec} (known: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")
        self.codec = codec


class CorruptBatchError(RecordFormatError):
    """A batch fails validation (CRC, magic, length). ``position`` is its byte offset in its buffer or file."""

    def __init__(self, reason: str, *, position: int, path: Path | None = None) -> None:
        where = f"{path} at byte {position}" if path is not None else f"byte {position}"
        super().__init__(f"corrupt record batch in {where}: {reason}")
        self.reason = reason
        self.position = position
        self.path = path


class CorruptIndexError(StorageError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"corrupt index {path}: {reason}")
        self.path = path
        self.reason = reason


class OffsetOutOfRangeError(StorageError):
    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range: the log holds [{log_start_offset}, {log_end_offset})")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(StorageError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds max.message.bytes={limit}")
        self.size = size
        self.limit = limit


class InvalidOffsetError(StorageError):
    """An offset given by the caller breaks the log's order (e.g. appending below the end)."""


class LogDirOfflineError(StorageError):
    """The log dir holding a partition failed; the partition is offline until the dir is repaired."""

    def __init__(self, log_dir: Path, cause: BaseException | None = None) -> None:
        why = f": {cause}" if cause is not None else ""
        super().__init__(f"log dir {log_dir} is offline{why}")
        self.log_dir = log_dir
        self.cause = cause


class InconsistentMetaPropertiesError(StorageError):
    def __init__(self, path: Path, key: str, found: str, expected: str) -> None:
        super().__init__(f"{path}: {key}={found} but this node is configured with {key}={expected}")
        self.path = path


class FaultInjected(OSError):
    """Raised by an armed fault point. It is an OSError so it takes the same path as a disk error."""

    def __init__(self, point: str) -> None:
        super().__init__(5, f"fault injected at {point!r}")  # 5 = EIO
        self.point = point
