"""The cleaner checkpoint: how far compaction has cleaned one partition.

``cleaner.offset`` (one per partition directory, written atomically) holds the checkpoint::

    line  content
       1  0        version
       2  1234     first dirty offset: below it, each key has at most one record (its
                   latest as of the last run), apart from null keys and transactional batches

A missing or unreadable file means "nothing is clean yet", which is always safe: the next
run maps the whole log. Truncation lowers the checkpoint (``PartitionLog``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ._checkpoint import write_atomically

log = logging.getLogger("strait.storage")

CLEANER_CHECKPOINT_FILE = "cleaner.offset"
_CHECKPOINT_VERSION = 0


def read_cleaner_checkpoint(directory: Path) -> int | None:
    """The partition's cleaner checkpoint, or None when there is none or it cannot be read (logged)."""
    path = directory / CLEANER_CHECKPOINT_FILE
    try:
        lines = path.read_text().split()
    except FileNotFoundError:
        return None
    if len(lines) == 2 and lines[0] == str(_CHECKPOINT_VERSION) and lines[1].isdigit():
        return int(lines[1])
    log.warning("%s: unreadable cleaner checkpoint %r; the whole log counts as dirty", path, lines[:2])
    return None


def write_cleaner_checkpoint(directory: Path, offset: int) -> None:
    """Replace the partition's cleaner checkpoint atomically (temp file, fsync, rename, fsync dir)."""
    if offset < 0:
        raise ValueError(f"cleaner checkpoint offset {offset} is negative")
    write_atomically(directory / CLEANER_CHECKPOINT_FILE, f"{_CHECKPOINT_VERSION}\n{offset}\n".encode())
