"""Per-log configuration under Kafka's topic-level key names, with Kafka's defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
SECOND_MS = 1000
HOUR_MS = 3600 * SECOND_MS
DAY_MS = 24 * HOUR_MS
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 * GiB  # segment.bytes: roll when the active segment would pass this
    segment_ms: int = 7 * DAY_MS  # segment.ms: roll a segment whose first batch is this old
    segment_index_bytes: int = 10 * MiB  # segment.index.bytes: roll when an index holds this much
    index_interval_bytes: int = 4 * KiB  # index.interval.bytes: log bytes between index entries
    retention_ms: int = 7 * DAY_MS  # retention.ms: -1 keeps forever
    retention_bytes: int = -1  # retention.bytes: per partition; -1 = no size limit
    flush_messages: int = LONG_MAX  # flush.messages: fsync after this many records; 1 = every append
    flush_ms: int = LONG_MAX  # flush.ms: fsync when the oldest unflushed write is this old
    max_message_bytes: int = 1024 * KiB + 12  # max.message.bytes: largest batch accepted
    file_delete_delay_ms: int = 60 * SECOND_MS  # file.delete.delay.ms: wait before unlinking .deleted
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    cleanup_policy: str = "delete"  # cleanup.policy: delete | compact | compact,delete (normalised to that order)
    delete_retention_ms: int = DAY_MS  # delete.retention.ms: keep a cleaned tombstone this long
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio: dirty bytes / cleanable bytes to clean
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: a record stays uncompacted at least this long

    def __post_init__(self) -> None:
        _at_least("segment.bytes", self.segment_bytes, 14)
        if self.segment_bytes > 2**31 - 1:
            raise ValueError(f"segment.bytes={self.segment_bytes} exceeds 2147483647 (index positions are int32)")
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.index.bytes", self.segment_index_bytes, 12)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("retention.bytes", self.retention_bytes, -1)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        _at_least("file.delete.delay.ms", self.file_delete_delay_ms, 0)
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(
                f"message.timestamp.type={self.message_timestamp_type!r} must be CreateTime or LogAppendTime"
            )
        object.__setattr__(self, "cleanup_policy", _cleanup_policy(self.cleanup_policy))
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:  # also refuses NaN
            raise ValueError(f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} must be between 0 and 1")
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)

    @property
    def fsync_every_append(self) -> bool:
        return self.flush_messages == 1

    @property
    def compacts(self) -> bool:
        """``cleanup.policy`` includes compact: ``PartitionLog.compact`` cleans the log."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def deletes(self) -> bool:
        """``cleanup.policy`` includes delete: retention.ms / retention.bytes delete old segments."""
        return "delete" in self.cleanup_policy.split(",")

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with topic-level overrides applied (``{"retention.ms": "1000"}``).

        Raises ValueError naming the key for an unknown key or a value that is not valid.
        """
        changes: dict[str, object] = {}
        for key, raw in overrides.items():
            field = TOPIC_KEYS.get(key)
            if field is None:
                raise ValueError(f"unknown log config key {key!r}")
            if field in _TEXT_FIELDS:
                changes[field] = raw
                continue
            if field in _FLOAT_FIELDS:
                try:
                    changes[field] = float(raw)
                except ValueError:
                    raise ValueError(f"{key}={raw!r} is not a number") from None
                continue
            try:
                changes[field] = int(raw)
            except ValueError:
                raise ValueError(f"{key}={raw!r} is not an integer") from None
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_topic_configs(self) -> dict[str, str]:
        return {key: str(getattr(self, field)) for key, field in TOPIC_KEYS.items()}


TOPIC_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "message.timestamp.type": "message_timestamp_type",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
}
_TEXT_FIELDS = frozenset({"message_timestamp_type", "cleanup_policy"})
_FLOAT_FIELDS = frozenset({"min_cleanable_dirty_ratio"})
_CLEANUP_POLICIES = ("compact", "delete")  # the canonical order


def _at_least(key: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ValueError(f"{key}={value} must be at least {minimum}")


def _cleanup_policy(value: str) -> str:
    """``value`` as a canonical list: ``"delete, compact"`` -> ``"compact,delete"``. Raises ValueError."""
    items = {item.strip() for item in value.split(",")}
    unknown = sorted(items - set(_CLEANUP_POLICIES))
    if unknown:
        raise ValueError(f"cleanup.policy={value!r}: {unknown[0]!r} is not delete or compact")
    return ",".join(p for p in _CLEANUP_POLICIES if p in items)
