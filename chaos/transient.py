"""Kafka states that pass on their own: a wait treats them as "not yet", never as a failure.

Right after a topic is created, a node (re)starts or a leader or group coordinator moves, a
broker answers for a moment with one of :data:`TRANSIENT_CODES`: the partition is not in its
metadata yet, its leader is still being elected or has just moved, the group's coordinator is
elsewhere or still loading the offsets. Real clients retry these. A test or a checker that waits
for some state must do the same: such an answer means the state is not reached *yet*. Every
other error is real and must fail the wait.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from node.client import ClientError
from node.protocol import ErrorCode

__all__ = ["TRANSIENT_CODES", "is_transient", "kafka_code"]

TRANSIENT_CODES: frozenset[int] = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # a just-created topic not yet in this broker's metadata
        ErrorCode.LEADER_NOT_AVAILABLE,  # a leader is being elected
        ErrorCode.NOT_LEADER_OR_FOLLOWER,  # the leader moved since the client's metadata
        ErrorCode.NOT_COORDINATOR,  # the group's coordinator moved
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,  # the new coordinator is still loading the offsets
        ErrorCode.COORDINATOR_NOT_AVAILABLE,  # the offsets partition has no leader yet
        # librdkafka's own answers for a topic or partition its metadata does not list yet (a
        # topic a mirror is about to create): the local side of UNKNOWN_TOPIC_OR_PARTITION.
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)


def kafka_code(exc: BaseException) -> int | None:
    """The Kafka error code ``exc`` carries: a confluent-kafka ``KafkaException``
    or strait's own :class:`node.client.ClientError`; None for anything else."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    if isinstance(exc, ClientError):
        return int(exc.code)
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the passing Kafka states of :data:`TRANSIENT_CODES`."""
    return kafka_code(exc) in TRANSIENT_CODES
