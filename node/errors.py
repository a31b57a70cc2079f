"""The broker's typed errors: raised inside the node, turned into Kafka error codes at the response.

Each carries the Kafka ``ErrorCode`` it becomes and a message naming the values involved
(topic, partition, offsets, sizes); for Produce v8+ the message also reaches the client.
"""

from __future__ import annotations

from node.protocol import ErrorCode


class BrokerError(Exception):
    """A request-level failure that maps to one Kafka error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def unknown_topic_or_partition(topic: str, partition: int | None = None) -> BrokerError:
    where = topic if partition is None else f"{topic}-{partition}"
    return BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {where}")


def invalid_record(message: str) -> BrokerError:
    return BrokerError(ErrorCode.INVALID_RECORD, message)
