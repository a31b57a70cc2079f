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

    @property
    def fsync_every_append(self) -> bool:
        return self.flush_messages == 1

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with topic-level overrides applied (``{"retention.ms": "1000"}``).

        Raises ValueError naming the key for an unknown key or a value that is not valid.
        """
        changes: dict[str, object] = {}
        for key, raw in overrides.items():
            field = TOPIC_KEYS.get(key)
            if field is None:
                raise ValueError(f"unknown log config key {key!r}")
            if field == "message_timestamp_type":
                changes[field] = raw
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
}


def _at_least(key: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ValueError(f"{key}={value} must be at least {minimum}")
