"""The storage package's exceptions: one base, subclasses that name the values involved.

The base ``StorageError`` and the record format's errors are declared in ``storage.records``
(a leaf package) and re-exported here; every other storage error is declared here.
"""

from __future__ import annotations

from pathlib import Path

# The record format's errors (and the StorageError base they share) live in the leaf package
# storage.records; they are re-exported here so that the rest of storage imports every error
# from one place.
from .records._errors import CorruptBatchError, RecordFormatError, StorageError, UnsupportedCompressionError

__all__ = [
    "CorruptBatchError",
    "CorruptIndexError",
    "FaultInjected",
    "InconsistentMetaPropertiesError",
    "InvalidOffsetError",
    "LogDirOfflineError",
    "OffsetOutOfRangeError",
    "RecordFormatError",
    "RecordTooLargeError",
    "StorageError",
    "UnsupportedCompressionError",
]


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


class LogDirNotFoundError(StorageError):
    """A path that is not one of this node's log dirs (AlterReplicaLogDirs' LOG_DIR_NOT_FOUND)."""

    def __init__(self, path: Path | str, log_dirs: list[Path]) -> None:
        super().__init__(f"{path} is not a log dir of this node; its log dirs: {', '.join(map(str, log_dirs))}")
        self.path = path


class ReplicaNotHereError(StorageError):
    """A replica this node holds no log of (AlterReplicaLogDirs' REPLICA_NOT_AVAILABLE)."""


class InconsistentMetaPropertiesError(StorageError):
    def __init__(self, path: Path, key: str, found: str, expected: str) -> None:
        super().__init__(f"{path}: {key}={found} but this node is configured with {key}={expected}")
        self.path = path


class FaultInjected(OSError):
    """Raised by an armed fault point. It is an OSError so it takes the same path as a disk error."""

    def __init__(self, point: str) -> None:
        super().__init__(5, f"fault injected at {point!r}")  # 5 = EIO
        self.point = point
