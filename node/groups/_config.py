"""``GroupConfig``: the group coordinator's settings, named after Kafka's broker keys."""

from __future__ import annotations

from dataclasses import dataclass, fields

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: how long a member may wait in its first JoinGroup
# (KIP-394) before it is dropped; a constant in Kafka, not a setting.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    """Group coordinator settings; each field is the Kafka key in its comment, in milliseconds where it says ms.

    Raises ValueError naming the field and value when one is out of range.
    """

    offsets_partitions: int = 50  # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes (in ms)
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offsets_commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"GroupConfig.{f.name} must be an int, got {value!r}")
            least = 1 if f.name in _POSITIVE else 0
            if value < least:
                raise ValueError(f"GroupConfig.{f.name} must be at least {least}, got {value}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError(
                f"GroupConfig.min_session_timeout_ms ({self.min_session_timeout_ms}) is above "
                f"max_session_timeout_ms ({self.max_session_timeout_ms})"
            )


_POSITIVE = frozenset(
    {"offsets_partitions", "offsets_retention_ms", "offsets_retention_check_interval_ms", "offsets_commit_timeout_ms"}
)
