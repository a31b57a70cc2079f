"""``TxnConfig``: the transaction coordinator's settings, named after Kafka's broker keys."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class TxnConfig:
    """Transaction coordinator settings; each field is the Kafka key in its comment, in milliseconds where it says ms.

    Raises ValueError naming the field and value when one is not a positive int.
    """

    state_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    # Not a Kafka key (Kafka bounds these appends by request.timeout.ms): how long a write to
    # __transaction_state may take to become durable before the request gets COORDINATOR_NOT_AVAILABLE.
    write_timeout_ms: int = 5000
    # Not a Kafka key either: the pause before markers are sent again to a partition that could not take them.
    marker_retry_backoff_ms: int = 100

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TxnConfig.{f.name} must be a positive int, got {value!r}")
