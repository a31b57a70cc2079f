"""The record format's exceptions, and the root of every storage exception.

``storage.records`` is a leaf: it imports nothing of ``storage`` outside itself. Its errors
must still be storage errors (``except StorageError`` catches a bad batch), so the base class
``StorageError`` is declared here, below everything that raises it, and ``storage`` re-exports
it with the rest of its exceptions from ``storage._errors``.

::

    StorageError
    └── RecordFormatError            bytes that are not a well-formed batch or record
        ├── UnsupportedCompressionError
        └── CorruptBatchError        CRC, magic or length check failed (names the position)
"""

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
