"""The compaction swap: how cleaned segments replace old ones, and how recovery finishes a swap.

A run writes each group of segments it rewrites to ``<base>.log.cleaned`` (fsynced), then,
under the log's lock, swaps it in with these steps, fsyncing the directory between them:

1. rename ``<base>.log.cleaned`` to ``<base>.log.swap`` — **the commit point**;
2. rename every replaced segment's files to ``.deleted`` (they stay open for reads in flight
   until ``file.delete.delay.ms``);
3. rename ``<base>.log.swap`` to ``<base>.log``, and open it, rebuilding its indexes; its
   aborted-transaction index takes the entries of the segments it replaces (compaction keeps
   every transactional batch and marker, so they still hold).

A crash before step 1 leaves ``.cleaned`` files, which recovery deletes. After it,
:func:`finish_interrupted_swaps` (recovery's first pass) completes the swap from the
``.swap`` file alone: the offsets its batches cover name the segments it replaces.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ._checkpoint import fsync_dir
from ._config import LogConfig
from ._errors import CorruptBatchError, StorageError
from ._faults import FaultPoints
from ._files import DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, parse_segment_file, segment_paths
from ._scan import scan_batches
from ._segment import LogSegment
from .records import Offset

log = logging.getLogger("strait.storage")


def swap_in(
    directory: Path,
    base_offset: Offset,
    cleaned_path: Path,
    replaced: Sequence[LogSegment],
    config: LogConfig,
    faults: FaultPoints,
    now_ms: int,
) -> LogSegment:
    """Replace the segments ``replaced`` by the cleaned file ``cleaned_path`` (steps 1-3 above).

    Returns the new segment, open and flushed. The replaced segments are renamed to
    ``.deleted`` (their objects point at the new names) and stay open. Raises OSError (the
    directory is then left for recovery) and StorageError when the cleaned segment does not
    read back (a bad disk: it was fsynced before the swap). Once the first rename is done, the
    ``.cleaned`` file is gone: recovery, not the caller, owns what is left.
    """
    log_path = segment_paths(directory, base_offset)[0]
    swap_path = log_path.with_name(log_path.name + SWAP_SUFFIX)
    cleaned_path.rename(swap_path)  # the commit point: recovery completes from here
    _fsync_dir_at_fault_point(directory, faults)
    for segment in replaced:
        _rename_to_deleted(segment)
    _fsync_dir_at_fault_point(directory, faults)
    swap_path.rename(log_path)
    _fsync_dir_at_fault_point(directory, faults)
    loaded = LogSegment.open(directory, base_offset, config, faults, now_ms, recover=True)
    new = loaded.segment
    new.transactional_batches = None  # the replaced segments' entries are copied instead
    try:
        if loaded.error is not None:  # the file was fsynced before the swap: this is a bad disk
            raise StorageError(f"{log_path}: the cleaned segment does not read back: {loaded.error}")
        for segment in replaced:
            new.txn_index.extend(segment.txn_index.entries)
        new.flush()
    except BaseException:
        new.close()
        raise
    return new


def _rename_to_deleted(segment: LogSegment) -> None:
    """Rename a replaced segment's files to ``.deleted`` and point the segment at the new names, so
    that deleting it later cannot unlink the cleaned segment that now has its old names."""
    segment.log_path = _to_deleted(segment.log_path)
    segment.index.path = _to_deleted(segment.index.path)
    segment.time_index.path = _to_deleted(segment.time_index.path)
    segment.txn_index.path = _to_deleted(segment.txn_index.path)


def _to_deleted(path: Path) -> Path:
    doomed = path.with_name(path.name + DELETED_SUFFIX)
    with contextlib.suppress(FileNotFoundError):  # an index file may never have been written
        path.rename(doomed)
    return doomed


# -- recovery ----------------------------------------------------------------------------------


def finish_interrupted_swaps(directory: Path) -> list[str]:
    """Complete (or roll back) compaction swaps a crash interrupted; returns the swap files handled.

    Index ``.swap`` files are deleted (indexes are rebuilt from the log). For each
    ``<base>.log.swap``: every segment whose base offset lies in ``[base, end)`` of the swap's
    batches is one it replaces, so it is deleted, and the swap becomes ``<base>.log`` (with no
    index: opening it rebuilds them). A swap that fails validation is rolled back instead when
    ``<base>.log`` still exists. Raises OSError.
    """
    handled: list[str] = []
    swaps: list[int] = []
    for path in sorted(directory.iterdir()):
        if not path.name.endswith(SWAP_SUFFIX):
            continue
        parsed = parse_segment_file(path.name.removesuffix(SWAP_SUFFIX))
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            swaps.append(parsed[0])
        else:
            path.unlink()
            handled.append(path.name)
    for base in swaps:
        log_path = segment_paths(directory, base)[0]
        swap_path = log_path.with_name(log_path.name + SWAP_SUFFIX)
        handled.append(swap_path.name)
        end, damaged = _end_of_swap(swap_path, base)
        if damaged and log_path.exists():
            log.warning("%s: damaged compaction swap file %s rolled back", directory, swap_path.name)
            swap_path.unlink()
            continue
        for path in sorted(directory.iterdir()):
            parsed = parse_segment_file(path.name)
            if parsed is not None and base <= parsed[0] < max(end, base + 1):  # .log, .index, .timeindex, .txnindex
                path.unlink()
        swap_path.rename(log_path)
        log.warning("%s: finished the compaction swap of %s", directory, swap_path.name)
    if handled:
        fsync_dir(directory)
    return handled


def _end_of_swap(path: Path, base: int) -> tuple[int, bool]:
    """``(next offset after the valid batches, whether a bad batch was found)``."""
    end = base
    fd = os.open(path, os.O_RDONLY)
    try:
        for _, header in scan_batches(fd, os.fstat(fd).st_size, path=path, base_offset=base):
            end = header.next_offset
    except CorruptBatchError:
        return end, True
    finally:
        os.close(fd)
    return end, False


def _fsync_dir_at_fault_point(directory: Path, faults: FaultPoints) -> None:
    faults.hit("fsync")
    fsync_dir(directory)
