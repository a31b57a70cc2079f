"""All the log dirs of one node (JBOD): placement, loading, checkpoints, failure, shutdown.

Each log dir holds ``meta.properties``, partition dirs, the three offset checkpoints and,
after a clean stop, ``.kafka_cleanshutdown``. The manager is the one owner of log-dir
failure (as Kafka's LogDirFailureChannel): the first OSError seen in a dir takes that dir
offline, once; its partitions are then reported offline and refuse every operation, while
the other dirs keep working. A new partition goes to the online dir with the fewest
partitions, then the most free bytes (never "fill the first disk"), unless a move asked for
another dir before it existed (``alter_replica_dir``, as Kafka's preferred log dir).

A replica moves to another dir online (AlterReplicaLogDirs): a thread per move copies it into a
future log in the target dir and the manager swaps it in (``storage._log_move`` describes the
copy, the swap and what a restart finds).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ._checkpoint import (
    fsync_dir,
    read_offsets,
    read_properties,
    write_atomically,
    write_offsets,
    write_properties,
)
from ._config import LogConfig
from ._errors import (
    InconsistentMetaPropertiesError,
    LogDirNotFoundError,
    LogDirOfflineError,
    ReplicaNotHereError,
    StorageError,
)
from ._faults import FaultPoints
from ._files import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
    marked_dir_name,
    parse_marked_dir,
    parse_partition_dir,
)
from ._log import Clock, PartitionLog
from ._log_move import MoveStopped, ReplicaMove, first_copied_offset
from ._recovery import LoadReport, create_log, load_log
from .records._offsets import FIRST_OFFSET, Offset

log = logging.getLogger("strait.storage")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class ReplicaUsage:
    """One replica in a log dir: its bytes on disk, high watermark and log end offset."""

    tp: TopicPartition
    size_bytes: int
    high_watermark: Offset
    log_end_offset: Offset
    is_future: bool = False  # a move's copy in progress (its offset lag is to the current log's end)


@dataclass(frozen=True, slots=True)
class DirUsage:
    """One log dir: its path, the error that took it offline (None while online), its replicas,
    and the size and usable (free to an unprivileged writer) bytes of the volume it is on, -1
    when unknown (an offline dir, or the volume could not be asked)."""

    path: Path
    error: BaseException | None
    replicas: list[ReplicaUsage]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass
class LogDir:
    path: Path
    error: BaseException | None = None
    logs: dict[TopicPartition, PartitionLog] = field(default_factory=dict)

    @property
    def online(self) -> bool:
        return self.error is None

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def volume_bytes(self) -> tuple[int, int]:
        """(total, usable) bytes of the volume, or (-1, -1) when it cannot be asked. Only for
        reporting: a failure here does not take the dir offline (appends and reads decide that)."""
        try:
            st = os.statvfs(self.path)
        except OSError:
            return -1, -1
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        config: LogConfig | None = None,
        *,
        broker_id: int,
        cluster_id: str | None = None,
        faults: FaultPoints | None = None,
        clock: Clock = wall_clock_ms,
        move_bytes_per_second: int = 0,
    ) -> None:
        self.dirs = [LogDir(Path(p).absolute()) for p in log_dirs]
        if not self.dirs:
            raise ValueError("log.dirs is empty: give at least one directory")
        if len({d.path for d in self.dirs}) != len(self.dirs):
            raise ValueError(f"log.dirs lists a directory twice: {[str(d.path) for d in self.dirs]}")
        self.config = config or LogConfig()
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.faults = faults or FaultPoints()
        self.clock = clock
        self._lock = threading.RLock()
        self._by_tp: dict[TopicPartition, LogDir] = {}
        #: Replica moves in progress (AlterReplicaLogDirs), by partition; each has its thread.
        self._moves: dict[TopicPartition, ReplicaMove] = {}
        #: Dirs asked for partitions that did not exist yet: they are created there.
        self._preferred: dict[TopicPartition, Path] = {}
        self._restart_moves: list[tuple[TopicPartition, Path]] = []
        #: bytes per second a move copies at most (Kafka's replica.alter.log.dirs.io.max.bytes.per.second), 0: no limit
        self.move_bytes_per_second = move_bytes_per_second
        self.moves_completed = 0
        self.moves_failed = 0
        self._stopping = False  # a clean stop leaves the moves' future logs for the next load to resume

    # -- startup ---------------------------------------------------------------------------

    def startup(self, topic_configs: dict[str, LogConfig] | None = None) -> list[LoadReport]:
        """Check ``meta.properties`` and load every partition of every dir (recovering if needed).

        A dir that fails with an OSError goes offline and the others load.
        Raises InconsistentMetaPropertiesError if a dir belongs to another broker or cluster.
        """
        reports: list[LoadReport] = []
        keep = self._settle_moves()
        for d in self.dirs:
            if not d.online:
                continue
            try:
                reports += self._load_dir(d, topic_configs or {}, keep)
            except OSError as exc:
                self.fail_dir(d.path, exc)
        for tp, target in self._restart_moves:
            try:
                self.alter_replica_dir(tp, target)
                log.info("%s: its move to %s, interrupted by the stop, starts again", tp, target)
            except StorageError as exc:
                log.warning("%s: its move to %s, interrupted by the stop, is dropped: %s", tp, target, exc)
        self._restart_moves = []
        return reports

    def _settle_moves(self) -> set[Path]:
        """Pass 0 of a load: finish the swaps a stop interrupted and remove unfinished copies.

        A ``-future`` dir whose id a ``-delete`` dir shares was swapped in (the old dir's rename
        is the commit point): it takes the partition's name. When it cannot (its dir is offline),
        the old dir takes its name back, which is as complete (both were equal at the commit).
        Any other ``-future`` dir is removed, and its move starts again after the load. Returns
        the ``-delete`` dirs the load must keep (none, unless a rename failed).
        """
        found: dict[str, dict[str, tuple[LogDir, Path, TopicPartition]]] = {}
        for d in self.dirs:
            try:
                d.path.mkdir(parents=True, exist_ok=True)
                for child in d.path.iterdir():
                    parsed = parse_marked_dir(child.name)
                    if parsed is not None and child.is_dir():
                        tp, move_id, suffix = parsed
                        found.setdefault(move_id, {})[suffix] = (d, child, tp)
            except OSError as exc:
                self.fail_dir(d.path, exc)
        keep: set[Path] = set()
        for pair in found.values():
            future = pair.get(FUTURE_DIR_SUFFIX)
            if future is None:
                continue
            d, path, tp = future
            old = pair.get(DELETE_DIR_SUFFIX)
            if old is None:
                try:
                    shutil.rmtree(path)
                    self._restart_moves.append((tp, d.path))
                except OSError as exc:
                    self.fail_dir(d.path, exc)
                continue
            try:
                path.rename(d.path / tp.dir_name)
                fsync_dir(d.path)
                log.info("%s: finished its move to %s, interrupted by the stop", tp, d.path)
            except OSError as exc:
                self.fail_dir(d.path, exc)
                old_dir, old_path, _ = old
                try:
                    old_path.rename(old_dir.path / tp.dir_name)
                    fsync_dir(old_dir.path)
                except OSError as exc2:
                    self.fail_dir(old_dir.path, exc2)
                    keep.add(old_path)
        return keep

    def _load_dir(self, d: LogDir, topic_configs: dict[str, LogConfig], keep: set[Path]) -> list[LoadReport]:
        d.path.mkdir(parents=True, exist_ok=True)
        self._check_meta(d.path)
        marker = d.path / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = read_offsets(d.path / RECOVERY_POINT_CHECKPOINT)
        starts = read_offsets(d.path / LOG_START_OFFSET_CHECKPOINT)
        hws = read_offsets(d.path / HIGH_WATERMARK_CHECKPOINT)
        reports = []
        for child in sorted(d.path.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                if child not in keep:
                    shutil.rmtree(child)
                continue
            tp = parse_partition_dir(child.name)
            if tp is None:
                continue
            if tp in self._by_tp:
                raise StorageError(f"partition {tp} is in two log dirs: {self._by_tp[tp].path} and {d.path}")
            partition_log, report = load_log(
                child,
                tp,
                topic_configs.get(tp.topic, self.config),
                clean_shutdown=clean,
                recovery_point=recovery.get(tp, FIRST_OFFSET),
                log_start_offset=starts.get(tp, FIRST_OFFSET),
                high_watermark=hws.get(tp, FIRST_OFFSET),
                faults=self.faults,
                clock=self.clock,
                on_io_error=self._io_error_handler(d.path),
            )
            d.logs[tp] = partition_log
            self._by_tp[tp] = d
            reports.append(report)
        # From here on, a crash must be treated as unclean.
        marker.unlink(missing_ok=True)
        return reports

    def _check_meta(self, path: Path) -> None:
        meta_path = path / META_PROPERTIES_FILE
        if not meta_path.exists():
            props = {"version": "0", "broker.id": str(self.broker_id)}
            if self.cluster_id:
                props["cluster.id"] = self.cluster_id
            write_properties(meta_path, props)
            return
        props = read_properties(meta_path)
        found = props.get("broker.id")
        if found is not None and found != str(self.broker_id):
            raise InconsistentMetaPropertiesError(meta_path, "broker.id", found, str(self.broker_id))
        found_cluster = props.get("cluster.id")
        if self.cluster_id and found_cluster and found_cluster != self.cluster_id:
            raise InconsistentMetaPropertiesError(meta_path, "cluster.id", found_cluster, self.cluster_id)

    # -- partitions ------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        d = self._by_tp.get(tp)
        return None if d is None else d.logs.get(tp)

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return {tp: d.logs[tp] for tp, d in self._by_tp.items() if d.online}

    def describe_dirs(self) -> list[DirUsage]:
        """Every log dir with what it holds (DescribeLogDirs): its replicas' sizes and positions,
        or the error that took it offline."""
        with self._lock:
            dirs = [(d, d.path, d.error, list(d.logs.items())) for d in self.dirs]
            moves = list(self._moves.values())
        usages = []
        for d, path, error, logs in dirs:
            if error is not None:
                usages.append(DirUsage(path, error, []))
                continue
            replicas = [
                ReplicaUsage(tp, plog.size_bytes, plog.high_watermark, plog.log_end_offset)
                for tp, plog in sorted(logs, key=lambda item: (item[0].topic, item[0].partition))
            ]
            for move in sorted(moves, key=lambda m: (m.tp.topic, m.tp.partition)):
                if move.target == path:
                    future, end = move.future, move.source.log_end_offset
                    replicas.append(ReplicaUsage(move.tp, future.size_bytes, end, future.log_end_offset, True))
            usages.append(DirUsage(path, None, replicas, *d.volume_bytes()))
        return usages

    def create_log(
        self, tp: TopicPartition, config: LogConfig | None = None, *, start_offset: Offset = FIRST_OFFSET
    ) -> PartitionLog:
        """Create the partition's log in the chosen dir. Raises StorageError if it exists,
        LogDirOfflineError if no dir is online."""
        with self._lock:
            existing = self._by_tp.get(tp)
            if existing is not None:
                if not existing.online:
                    raise LogDirOfflineError(existing.path, existing.error)
                raise StorageError(f"partition {tp} already exists in {existing.path}")
            preferred = self._preferred.pop(tp, None)
            d = next((d for d in self.dirs if d.path == preferred and d.online), None) or self.choose_dir()
            try:
                partition_log = create_log(
                    d.path / tp.dir_name,
                    tp,
                    config or self.config,
                    start_offset=start_offset,
                    faults=self.faults,
                    clock=self.clock,
                    on_io_error=self._io_error_handler(d.path),
                )
            except OSError as exc:
                self.fail_dir(d.path, exc)
                raise LogDirOfflineError(d.path, exc) from exc
            d.logs[tp] = partition_log
            self._by_tp[tp] = d
            return partition_log

    def choose_dir(self) -> LogDir:
        """The online dir with the fewest partitions, then the most free bytes."""
        candidates = []
        for d in self.dirs:
            if not d.online:
                continue
            try:
                candidates.append((len(d.logs), -d.free_bytes(), str(d.path), d))
            except OSError as exc:
                self.fail_dir(d.path, exc)
        if not candidates:
            raise LogDirOfflineError(self.dirs[0].path, StorageError("every log dir is offline"))
        return min(candidates, key=lambda c: c[:3])[3]

    def delete_log(self, tp: TopicPartition) -> None:
        """Remove a partition: its dir is renamed to ``<tp>.<uuid>-delete``, then removed."""
        with self._lock:
            self._preferred.pop(tp, None)
            move = self._moves.pop(tp, None)
            if move is not None:
                move.cancel()  # its thread removes the future log
            d = self._by_tp.pop(tp, None)
            if d is None:
                return
            partition_log = d.logs.pop(tp)
            if not d.online:
                return
            try:
                partition_log.close()
                doomed = d.path / f"{tp.dir_name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
                partition_log.dir.rename(doomed)
                shutil.rmtree(doomed)
            except OSError as exc:
                self.fail_dir(d.path, exc)

    # -- moves between log dirs (AlterReplicaLogDirs) ------------------------------------------

    def alter_replica_dir(self, tp: TopicPartition, path: Path | str) -> bool:
        """Move the replica of ``tp`` to the log dir at ``path``, online; returns whether a move
        started (False: it is there already, or a move there runs).

        A move to the dir the replica is in cancels a move of it in progress. For a partition
        with no log here, the dir is remembered for when it is created, and ReplicaNotHereError raised
        (Kafka's broker answers the same). Raises LogDirNotFoundError for a path that is not a
        log dir of this node, LogDirOfflineError when the target's or the replica's dir is offline.
        """
        with self._lock:
            target = self._dir_at(path)
            if not target.online:
                raise LogDirOfflineError(target.path, target.error)
            current = self._by_tp.get(tp)
            if current is None:
                self._preferred[tp] = target.path
                raise ReplicaNotHereError(f"{tp} has no replica on this node yet: it will be created in {target.path}")
            if not current.online:
                raise LogDirOfflineError(current.path, current.error)
            running = self._moves.get(tp)
            if running is not None:
                if running.target == target.path:
                    return False
                running.cancel()
                del self._moves[tp]
            if current is target:
                return False
            source = current.logs[tp]
            move_id = uuid.uuid4().hex
            future_dir = target.path / marked_dir_name(tp, move_id, FUTURE_DIR_SUFFIX)
            try:
                future = create_log(
                    future_dir,
                    tp,
                    source.config,
                    start_offset=first_copied_offset(source),
                    faults=self.faults,
                    clock=self.clock,
                    on_io_error=self._io_error_handler(target.path),  # a disk error in the copy takes its dir offline
                )
            except OSError as exc:
                self.fail_dir(target.path, exc)
                raise LogDirOfflineError(target.path, exc) from exc
            move = ReplicaMove(
                source,
                future,
                move_id=move_id,
                target=target.path,
                faults=self.faults,
                bytes_per_second=self.move_bytes_per_second,
            )
            self._moves[tp] = move
            move.thread = threading.Thread(target=self._run_move, args=(move,), name=f"move-{tp}", daemon=True)
            move.thread.start()
            log.info("%s: moving from %s to %s", tp, current.path, target.path)
            return True

    def moves(self) -> list[ReplicaMove]:
        """The replica moves in progress."""
        with self._lock:
            return list(self._moves.values())

    def _dir_at(self, path: Path | str) -> LogDir:
        wanted = os.path.normpath(path)  # an absolute path, as Kafka asks: a relative one matches no dir
        for d in self.dirs:
            if wanted == str(d.path):
                return d
        raise LogDirNotFoundError(path, [d.path for d in self.dirs])

    def _run_move(self, move: ReplicaMove) -> None:
        """A move's thread: copy, then swap in; on any failure or cancel, remove the future log."""
        done = False
        try:
            while not done:
                move.copy_until_caught_up()
                move.prepare_finish()
                done = self._commit(move)
        except MoveStopped:
            pass
        except LogDirOfflineError as exc:
            log.warning("%s: the move to %s stopped: %s", move.tp, move.target, exc)
        except OSError as exc:
            log.warning("%s: the move to %s failed: %s", move.tp, move.target, exc)
            self.fail_dir(move.target, exc)
        except Exception:
            log.exception("%s: the move to %s failed", move.tp, move.target)
        if done:
            return
        with self._lock:
            if self._moves.get(move.tp) is move:
                del self._moves[move.tp]
                self.moves_failed += 1
            if self._stopping:
                move.future.close()  # the next load removes the copy and starts the move again
                return
        try:
            move.future.close()
            move.future.delete()
        except OSError as exc:
            log.warning("%s: could not remove the unfinished copy %s: %s", move.tp, move.future.dir, exc)

    @contextlib.contextmanager
    def _locked_with(self, plog: PartitionLog) -> Iterator[None]:
        """Hold the manager's lock and then ``plog``'s. A thread appending to ``plog`` may hold the
        log's lock and wait for the manager's (an I/O error takes the dir offline through
        ``fail_dir``): the log's lock is only tried for a while, and the manager's let go
        between tries, so that such a thread goes on."""
        while True:
            with self._lock:
                if plog.lock.acquire(timeout=0.05):
                    try:
                        yield
                    finally:
                        plog.lock.release()
                    return
            time.sleep(0.001)

    def _commit(self, move: ReplicaMove) -> bool:
        """Swap the caught-up future log in (``storage._log_move`` gives the order of the renames);
        returns False when the copy must go on first. Locks: no compaction of the log, then the
        manager's, then the log's (appends wait for the last batches' copy and the renames)."""
        source, tp = move.source, move.tp
        with source.compaction_paused(), self._locked_with(source):
            if move.cancelled or self._moves.get(tp) is not move:
                raise MoveStopped(tp)
            old = self._by_tp[tp]
            target = next(d for d in self.dirs if d.path == move.target)
            if source.is_offline:
                raise LogDirOfflineError(old.path, old.error)
            try:
                if not move.finish_locked():
                    return False
                _write_checkpoints(target.path, {**target.logs, tp: move.future})
            except OSError as exc:
                self.fail_dir(target.path, exc)
                raise LogDirOfflineError(target.path, exc) from exc
            retired = old.path / marked_dir_name(tp, move.move_id, DELETE_DIR_SUFFIX)
            try:
                source.dir.rename(retired)
                fsync_dir(old.path)
            except OSError as exc:
                self.fail_dir(old.path, exc)
                raise LogDirOfflineError(old.path, exc) from exc
            new_dir = target.path / tp.dir_name
            try:
                self.faults.hit("move_swap")
                move.future.dir.rename(new_dir)
                fsync_dir(target.path)
            except OSError as exc:
                # Not swapped: the old dir takes its name back and stays the partition's log.
                self.fail_dir(target.path, exc)
                try:
                    retired.rename(source.dir)
                    fsync_dir(old.path)
                except OSError as exc2:
                    self.fail_dir(old.path, exc2)
                raise LogDirOfflineError(target.path, exc) from exc
            source.take_over(move.future, new_dir, retired, self._io_error_handler(target.path))
            del old.logs[tp]
            target.logs[tp] = source
            self._by_tp[tp] = target
            del self._moves[tp]
            self.moves_completed += 1
        log.info(
            "%s: moved from %s to %s (%d bytes copied, %d restarts)",
            tp,
            old.path,
            target.path,
            move.copied_bytes,
            move.restarts,
        )
        return True

    def offline_partitions(self) -> set[TopicPartition]:
        return {tp for tp, d in self._by_tp.items() if not d.online}

    def offline_dirs(self) -> list[Path]:
        return [d.path for d in self.dirs if not d.online]

    # -- failure ---------------------------------------------------------------------------

    def _io_error_handler(self, path: Path) -> Callable[[OSError], None]:
        return lambda exc: self.fail_dir(path, exc)

    def fail_dir(self, path: Path, exc: BaseException) -> None:
        """Take the log dir at ``path`` offline (once) and every partition on it."""
        with self._lock:
            d = next(d for d in self.dirs if d.path == path)
            if not d.online:
                return
            d.error = exc
            log.error(
                "log dir %s is offline after an I/O error: %s; partitions offline: %s",
                path,
                exc,
                ", ".join(sorted(str(tp) for tp in d.logs)) or "none",
            )
            for partition_log in d.logs.values():
                partition_log.mark_offline(LogDirOfflineError(path, exc))
            for tp, move in list(self._moves.items()):
                if path in (move.target, move.source.dir.parent):
                    move.cancel()
                    del self._moves[tp]
                    self.moves_failed += 1

    # -- periodic work and shutdown --------------------------------------------------------

    def maintenance(self, now_ms: int | None = None) -> None:
        """Retention, time-based flush, deferred deletes, then checkpoints. Call periodically."""
        now = self.clock() if now_ms is None else now_ms
        for partition_log in list(self.logs().values()):
            try:
                partition_log.apply_retention(now)
                partition_log.maybe_flush(now)
                partition_log.purge_deleted(now)
            except LogDirOfflineError:
                continue
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write the three offset checkpoints of every online dir."""
        for d in self.dirs:
            if not d.online:
                continue
            try:
                _write_checkpoints(d.path, dict(d.logs))
            except OSError as exc:
                self.fail_dir(d.path, exc)

    def shutdown(self) -> None:
        """Clean stop: stop the moves (their future logs stay; the next load removes them and starts
        the moves again), flush and close every log, write checkpoints and the clean-shutdown marker."""
        with self._lock:
            self._stopping = True
            moves = list(self._moves.values())
            self._moves.clear()
        for move in moves:
            move.cancel()
        for move in moves:
            if move.thread is not None:
                move.thread.join(timeout=30)
        with self._lock:
            for d in self.dirs:
                for partition_log in d.logs.values():
                    try:
                        partition_log.close()
                    except (LogDirOfflineError, OSError) as exc:
                        self.fail_dir(d.path, exc)
            self.checkpoint()
            for d in self.dirs:
                if d.online:
                    try:
                        write_atomically(d.path / CLEAN_SHUTDOWN_FILE, b"")
                    except OSError as exc:
                        self.fail_dir(d.path, exc)


def _write_checkpoints(path: Path, logs: dict[TopicPartition, PartitionLog]) -> None:
    items = logs.items()
    write_offsets(path / RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in items})
    write_offsets(path / LOG_START_OFFSET_CHECKPOINT, {tp: lg.log_start_offset for tp, lg in items})
    write_offsets(path / HIGH_WATERMARK_CHECKPOINT, {tp: lg.high_watermark for tp, lg in items})
