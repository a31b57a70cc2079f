"""Names of everything the storage engine writes, in one place (as Kafka's LogFileUtils).

A partition directory is ``<topic>-<partition>/``; each segment is three files named by the
segment's base offset, 20 digits, zero-padded: ``00000000000000000000.log`` (the batches),
``.index`` (offset index) and ``.timeindex`` (time index), and a fourth, ``.txnindex`` (aborted
transactions), once it has an entry. A log dir holds partition dirs,
``meta.properties``, the checkpoint files and, after a clean stop, ``.kafka_cleanshutdown``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .records import Offset

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"  # segment files waiting for file.delete.delay.ms
CLEANED_SUFFIX = ".cleaned"  # compaction leftovers: removed on load
SWAP_SUFFIX = ".swap"
TEMP_SUFFIX = ".tmp"
DELETE_DIR_SUFFIX = "-delete"  # a partition dir renamed for deletion: <topic>-<p>.<uuid>-delete
FUTURE_DIR_SUFFIX = "-future"  # a replica being moved to this log dir: <topic>-<p>.<uuid>-future

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_FILE = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"  # in each partition dir: "0" / count / "epoch start_offset"

_OFFSET_DIGITS = 20
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")
_MARKED_DIR = re.compile(
    r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)\.(?P<id>[0-9a-f]{32})(?P<suffix>-delete|-future)$"
)
_SEGMENT_FILE = re.compile(r"^(?P<offset>\d{20})\.(?P<kind>log|index|timeindex|txnindex)$")


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"


def file_name(base_offset: int, suffix: str) -> str:
    """``file_name(42, ".log") == "00000000000000000042.log"``."""
    return f"{base_offset:0{_OFFSET_DIGITS}d}{suffix}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """The partition a directory name stands for, or None if it is not a partition dir."""
    m = _PARTITION_DIR.match(name)
    if m is None:
        return None
    return TopicPartition(m["topic"], int(m["partition"]))


def marked_dir_name(tp: TopicPartition, move_id: str, suffix: str) -> str:
    """``<topic>-<p>.<id><suffix>``: a partition dir renamed for deletion or a future replica's dir."""
    return f"{tp.dir_name}.{move_id}{suffix}"


def parse_marked_dir(name: str) -> tuple[TopicPartition, str, str] | None:
    """``(tp, id, suffix)`` of a ``-delete`` or ``-future`` dir name (``marked_dir_name``), else None."""
    m = _MARKED_DIR.match(name)
    if m is None:
        return None
    return TopicPartition(m["topic"], int(m["partition"])), m["id"], m["suffix"]


def parse_segment_file(name: str) -> tuple[Offset, str] | None:
    """``(base_offset, suffix)`` for a segment file name, else None."""
    m = _SEGMENT_FILE.match(name)
    if m is None:
        return None
    return Offset(int(m["offset"])), "." + m["kind"]


def segment_paths(directory: Path, base_offset: int) -> tuple[Path, Path, Path]:
    """The ``.log``, ``.index`` and ``.timeindex`` paths of one segment."""
    return (
        directory / file_name(base_offset, LOG_SUFFIX),
        directory / file_name(base_offset, INDEX_SUFFIX),
        directory / file_name(base_offset, TIME_INDEX_SUFFIX),
    )


def txn_index_path(directory: Path, base_offset: int) -> Path:
    """The ``.txnindex`` path of one segment (the file exists only once it has an entry)."""
    return directory / file_name(base_offset, TXN_INDEX_SUFFIX)
