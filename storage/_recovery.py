"""Loading a partition log from disk, with recovery after an unclean stop (as Kafka's LogLoader).

``load_log`` runs these passes over a partition directory:

0. Finish a compaction swap a crash interrupted: a ``<base>.log.swap`` replaces the
   segments in its offset range (``storage._cleaner.finish_interrupted_swaps``).
1. Remove leftovers of interrupted work: ``*.deleted``, ``*.cleaned`` and ``*.tmp`` files,
   and index files whose ``.log`` is gone.
2. List the segments by base offset.
3. Open each segment. After a clean stop every segment trusts its index files (a missing or
   corrupt index, or a damaged tail, is still rebuilt). After an unclean stop, every
   segment from the one holding the recovery point onwards is recovered: each batch's
   length, magic, CRC-32C and offsets are checked, the file is cut at the first invalid
   byte, and the indexes are rebuilt.
4. Once a segment lost bytes, every later segment is deleted: it follows a hole. A segment
   that ends cleanly before the next one starts is kept; the gap is reported (compacted
   Kafka logs have such gaps, and deleting data recovery cannot prove bad is worse).
5. With no segment left, start an empty one at the log start offset.
6. Load the leader-epoch cache from ``leader-epoch-checkpoint``; when that file is missing
   or unparseable, rebuild it from the batch headers. Then drop the entries at or past the
   recovered log end offset (a torn tail took their batches, or a leader assigned an epoch
   and wrote nothing in it), after moving the first entry up to the log start offset.
7. Rebuild the aborted-transaction index (``.txnindex``) of every segment from the first one
   that was recovered or had an index rebuilt: replay the transactions of those segments
   (a transactional batch opens its producer's transaction, a marker ends it; an ABORT adds
   an entry). A marker whose transaction began before them makes the replay start over with
   the transactions left open by the segments before (read once, only then).

The result says how many bytes were dropped and where the first bad batch was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ._cleaner import finish_interrupted_swaps
from ._config import LogConfig
from ._epochs import LeaderEpochCache
from ._errors import StorageError
from ._faults import FaultPoints
from ._files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    TEMP_SUFFIX,
    TopicPartition,
    parse_segment_file,
    segment_paths,
    txn_index_path,
)
from ._log import Clock, PartitionLog
from ._segment import LogSegment
from ._txn_index import OpenTransactions
from .records import CorruptBatchError, RecordFormatError, read_control_marker
from .records._offsets import FIRST_OFFSET, Offset

log = logging.getLogger("strait.storage")


@dataclass
class LoadReport:
    tp: TopicPartition
    directory: Path
    clean: bool
    bytes_dropped: int = 0
    segments_recovered: int = 0
    segments_deleted: int = 0
    indexes_rebuilt: int = 0
    first_error: str | None = None
    gaps: list[tuple[int, int]] = field(default_factory=list)  # [from, to) offsets no segment holds
    leftovers_removed: list[str] = field(default_factory=list)
    swaps_finished: list[str] = field(default_factory=list)  # compaction .swap files completed or rolled back
    epochs_rebuilt: bool = False  # leader-epoch-checkpoint was missing or unparseable: rebuilt from batch headers
    txn_indexes_rebuilt: int = 0  # segments whose aborted-transaction index was rebuilt from the log


def load_log(
    directory: Path,
    tp: TopicPartition,
    config: LogConfig,
    *,
    clean_shutdown: bool,
    recovery_point: Offset = FIRST_OFFSET,
    log_start_offset: Offset = FIRST_OFFSET,
    high_watermark: Offset = FIRST_OFFSET,
    faults: FaultPoints,
    clock: Clock,
    on_io_error: Callable[[OSError], None] | None = None,
) -> tuple[PartitionLog, LoadReport]:
    """Open the partition log in ``directory``, recovering it if the stop was unclean.

    Raises OSError for I/O failures (the caller takes the log dir offline) and StorageError
    when segments overlap, which recovery cannot settle without guessing.
    """
    report = LoadReport(tp, directory, clean_shutdown)
    now = clock()

    # Pass 0: interrupted compaction swaps.
    report.swaps_finished = finish_interrupted_swaps(directory)

    # Pass 1: leftovers.
    bases: list[Offset] = []
    names = {p.name for p in directory.iterdir()}
    for name in sorted(names):
        path = directory / name
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, TEMP_SUFFIX)):
            path.unlink()
            report.leftovers_removed.append(name)
        elif (parsed := parse_segment_file(name)) is not None:
            base, suffix = parsed
            if suffix == LOG_SUFFIX:
                bases.append(base)
            elif name.removesuffix(suffix) + LOG_SUFFIX not in names:
                path.unlink()
                report.leftovers_removed.append(name)

    # Pass 2: order, and where recovery starts.
    bases.sort()
    first_to_recover = len(bases)
    if not clean_shutdown:
        first_to_recover = 0
        for i, base in enumerate(bases):
            if base <= recovery_point:
                first_to_recover = i

    # Passes 3 and 4: open, recover, and drop what follows a hole.
    segments: list[LogSegment] = []
    first_txn_rebuild = len(bases)  # pass 7 starts at the first segment recovered or re-indexed
    for i, base in enumerate(bases):
        if report.first_error is not None:
            log_path, *index_paths = segment_paths(directory, base)
            report.bytes_dropped += log_path.stat().st_size
            for stale in (log_path, *index_paths, txn_index_path(directory, base)):
                stale.unlink(missing_ok=True)
            report.segments_deleted += 1
            continue
        loaded = LogSegment.open(directory, base, config, faults, now, recover=i >= first_to_recover)
        seg = loaded.segment
        if segments and seg.base_offset < segments[-1].next_offset:
            seg.close()
            for s in segments:
                s.close()
            raise StorageError(
                f"{directory}: segment {seg.log_path.name} starts at offset {seg.base_offset}, inside the "
                f"previous segment, which ends at {segments[-1].next_offset - 1}"
            )
        if segments and seg.base_offset > segments[-1].next_offset:
            # Kafka allows holes (compaction empties segments); we keep the data and say so.
            report.gaps.append((segments[-1].next_offset, seg.base_offset))
            log.warning(
                "%s: offsets %d..%d are missing before %s",
                tp,
                segments[-1].next_offset,
                seg.base_offset - 1,
                seg.log_path.name,
            )
        if loaded.recovered:
            first_txn_rebuild = min(first_txn_rebuild, len(segments))
            if i >= first_to_recover:
                report.segments_recovered += 1
            else:
                report.indexes_rebuilt += 1
        report.bytes_dropped += loaded.bytes_dropped
        if loaded.error is not None:
            report.first_error = str(loaded.error)
            log.warning("%s: %s; dropped %d bytes", tp, loaded.error, loaded.bytes_dropped)
        segments.append(seg)

    # Pass 5: a log always has an active segment.
    if not segments:
        segments.append(LogSegment.create(directory, log_start_offset, config, faults, now))

    # Pass 6: leader epochs, cut to the recovered log (after the PartitionLog settles the start).
    epochs, report.epochs_rebuilt = LeaderEpochCache.load(
        directory, lambda: (header for seg in segments for _, header in seg.headers())
    )
    partition_log = PartitionLog(
        directory,
        tp,
        config,
        segments,
        log_start_offset=log_start_offset,
        recovery_point=segments[-1].next_offset if clean_shutdown else recovery_point,
        high_watermark=high_watermark,
        epochs=epochs,
        faults=faults,
        clock=clock,
        on_io_error=on_io_error,
    )
    epochs.truncate_from_start(partition_log.log_start_offset)
    epochs.truncate_from_end(segments[-1].next_offset)  # the log end offset
    if not clean_shutdown and not report.epochs_rebuilt:
        # A new epoch is written without waiting for the disk until the recovery point passes
        # it: after a power loss the file may lack the epochs of the batches recovered here.
        for seg in segments[min(first_to_recover, len(segments) - 1) :]:
            for _, header in seg.headers():
                if header.partition_leader_epoch > epochs.latest_epoch:
                    epochs.assign(header.partition_leader_epoch, header.base_offset)
    # Pass 7: aborted-transaction indexes of the recovered segments.
    if first_txn_rebuild < len(segments):
        report.txn_indexes_rebuilt = rebuild_txn_indexes(segments, first_txn_rebuild)
    if report.bytes_dropped:
        partition_log.flush()
    return partition_log, report


def rebuild_txn_indexes(segments: list[LogSegment], first: int) -> int:
    """Rebuild the ``.txnindex`` of ``segments[first:]`` from their batches (pass 7); returns how
    many segments were rebuilt. A marker that ends no transaction of those segments may end one
    begun earlier (or none: a partition the transaction never wrote to): the replay then starts
    over once, from the transactions the segments before ``first`` leave open. Raises OSError;
    a control batch that cannot be read counts as no marker (recovery validated every batch it
    kept, so that is a marker of an unknown kind)."""
    rebuilt = segments[first:]
    state = OpenTransactions()
    for seen_before in (False, True):
        if seen_before:
            state = OpenTransactions()
            _replay(segments[:first], state, write=False)
        for segment in rebuilt:
            segment.txn_index.reset()
        if not _replay(rebuilt, state, write=True):
            break
    for segment in segments:
        segment.transactional_batches = None  # only this pass needs them
    return len(rebuilt)


def _replay(segments: list[LogSegment], state: OpenTransactions, *, write: bool) -> bool:
    """Replay ``segments`` into ``state``, adding the aborted ones to each segment's index when
    ``write``; returns whether a marker ended no transaction the replay knew of."""
    unmatched = False
    for segment in segments:
        # A segment recovery just scanned names its transactional batches: no second read of it.
        known = segment.transactional_batches
        for pos, header in segment.headers() if known is None else known:
            if header.producer_id < 0 or not header.is_transactional:
                continue
            if not header.is_control:
                state.data(header.producer_id, header.base_offset)
                continue
            try:
                marker = read_control_marker(bytes(segment.read_batch(pos, header)))
            except (CorruptBatchError, RecordFormatError) as exc:
                log.warning("%s: control batch at offset %d unreadable: %s", segment.log_path, header.base_offset, exc)
                continue
            if marker is None:
                continue
            unmatched = unmatched or header.producer_id not in state.open
            aborted = state.end(header.producer_id, header.base_offset, commit=marker.commit)
            if aborted is not None and write:
                segment.txn_index.append(aborted)
    return unmatched


def create_log(
    directory: Path,
    tp: TopicPartition,
    config: LogConfig,
    *,
    start_offset: Offset = FIRST_OFFSET,
    faults: FaultPoints,
    clock: Clock,
    on_io_error: Callable[[OSError], None] | None = None,
) -> PartitionLog:
    """Make ``directory`` and a new empty log in it starting at ``start_offset`` (no leader epochs)."""
    directory.mkdir(parents=True, exist_ok=False)
    segment = LogSegment.create(directory, start_offset, config, faults, clock())
    return PartitionLog(
        directory,
        tp,
        config,
        [segment],
        log_start_offset=start_offset,
        recovery_point=start_offset,
        high_watermark=start_offset,
        epochs=LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT),
        faults=faults,
        clock=clock,
        on_io_error=on_io_error,
    )
