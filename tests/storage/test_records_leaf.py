"""storage.records is a leaf of storage, and its errors are storage errors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import storage
import storage.records

RECORDS_DIR = Path(storage.records.__file__).parent


def _imported_modules(path: Path) -> list[str]:
    """Every module a file imports, relative imports resolved against ``storage.records``."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.append(node.module or "")
            else:
                package = ["storage", "records"]
                base = package[: len(package) - (node.level - 1)]
                names.append(".".join(base + ([node.module] if node.module else [])))
    return names


@pytest.mark.parametrize("path", sorted(RECORDS_DIR.glob("*.py")), ids=lambda p: p.name)
def test_storage_records_imports_nothing_of_storage_outside_itself(path: Path) -> None:
    outside = [
        name
        for name in _imported_modules(path)
        if (name == "storage" or name.startswith("storage.")) and not name.startswith("storage.records")
    ]
    assert outside == [], f"{path.name} imports {outside}"


def test_the_record_format_errors_are_storage_errors_wherever_they_are_imported_from() -> None:
    assert storage.CorruptBatchError is storage.records.CorruptBatchError
    assert storage.RecordFormatError is storage.records.RecordFormatError
    assert issubclass(storage.records.CorruptBatchError, storage.RecordFormatError)
    assert issubclass(storage.records.UnsupportedCompressionError, storage.RecordFormatError)
    assert issubclass(storage.RecordFormatError, storage.StorageError)
    with pytest.raises(storage.StorageError):
        storage.records.decompress(7, b"")  # codec 7 does not exist
