"""storage.records has its own errors, and they are storage errors (tests/architecture checks it is a leaf)."""

from __future__ import annotations

import pytest

import storage
import storage.records


def test_the_record_format_errors_are_storage_errors_wherever_they_are_imported_from() -> None:
    assert storage.CorruptBatchError is storage.records.CorruptBatchError
    assert storage.RecordFormatError is storage.records.RecordFormatError
    assert issubclass(storage.records.CorruptBatchError, storage.RecordFormatError)
    assert issubclass(storage.records.UnsupportedCompressionError, storage.RecordFormatError)
    assert issubclass(storage.RecordFormatError, storage.StorageError)
    with pytest.raises(storage.StorageError):
        storage.records.decompress(7, b"")  # codec 7 does not exist
