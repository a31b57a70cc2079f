"""All the log dirs of one node (JBOD): placement, loading, checkpoints, failure, shutdown.

Each log dir holds ``meta.properties``, partition dirs, the three offset checkpoints and,
after a clean stop, ``.kafka_cleanshutdown``. The manager is the one owner of log-dir
failure (as Kafka's LogDirFailureChannel): the first OSError seen in a dir takes that dir
offline, once; its partitions are then reported offline and refuse every operation, while
the other dirs keep working. A new partition goes to the online dir with the fewest
partitions, then the most free bytes (never "fill the first disk").
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ._checkpoint import read_offsets, read_properties, write_atomically, write_offsets, write_properties
from ._config import LogConfig
from ._errors import InconsistentMetaPropertiesError, LogDirOfflineError, StorageError
from ._faults import FaultPoints
from ._files import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
    parse_partition_dir,
)
from ._log import Clock, PartitionLog
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

    # -- startup ---------------------------------------------------------------------------

    def startup(self, topic_configs: dict[str, LogConfig] | None = None) -> list[LoadReport]:
        """Check ``meta.properties`` and load every partition of every dir (recovering if needed).

        A dir that fails with an OSError goes offline and the others load.
        Raises InconsistentMetaPropertiesError if a dir belongs to another broker or cluster.
        """
        reports: list[LoadReport] = []
        for d in self.dirs:
            try:
                reports += self._load_dir(d, topic_configs or {})
            except OSError as exc:
                self.fail_dir(d.path, exc)
        return reports

    def _load_dir(self, d: LogDir, topic_configs: dict[str, LogConfig]) -> list[LoadReport]:
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
        usages = []
        for d, path, error, logs in dirs:
            if error is not None:
                usages.append(DirUsage(path, error, []))
                continue
            replicas = [
                ReplicaUsage(tp, plog.size_bytes, plog.high_watermark, plog.log_end_offset)
                for tp, plog in sorted(logs, key=lambda item: (item[0].topic, item[0].partition))
            ]
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
            d = self.choose_dir()
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
            logs = d.logs.items()
            try:
                write_offsets(d.path / RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in logs})
                write_offsets(d.path / LOG_START_OFFSET_CHECKPOINT, {tp: lg.log_start_offset for tp, lg in logs})
                write_offsets(d.path / HIGH_WATERMARK_CHECKPOINT, {tp: lg.high_watermark for tp, lg in logs})
            except OSError as exc:
                self.fail_dir(d.path, exc)

    def shutdown(self) -> None:
        """Clean stop: flush and close every log, write checkpoints and the clean-shutdown marker."""
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
