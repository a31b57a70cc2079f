"""The broker's typed errors: raised inside the node, turned into Kafka error codes at the response.

Each carries the Kafka ``ErrorCode`` it becomes and a message naming the values involved
(topic, partition, offsets, sizes); for Produce v8+ the message also reaches the client.

``as_broker_error`` is the one place that says which storage errors a client sees as which
code; ``answer_errors`` applies it to one entry of a response (a partition, a topic, a
resource), so handlers do not repeat the same ``except`` blocks.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode
from storage import LogDirOfflineError, OffsetOutOfRangeError


class BrokerError(Exception):
    """A request-level failure that maps to one Kafka error code.

    ``record_errors`` (Produce v8+, KIP-467): ``(index of the record in its batch, why)`` for each
    record that made a batch fail; ``answer_errors`` writes them to entries with that field.
    """

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


def unknown_topic_or_partition(topic: str, partition: int | None = None) -> BrokerError:
    where = topic if partition is None else f"{topic}-{partition}"
    return BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {where}")


def invalid_record(message: str) -> BrokerError:
    return BrokerError(ErrorCode.INVALID_RECORD, message)


# Storage errors a client may cause or meet, and the code each becomes on the wire. Any other
# exception is a bug: it is not mapped, so it reaches the server, which logs it and closes
# only that connection.
_STORAGE_CODES: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (LogDirOfflineError, ErrorCode.KAFKA_STORAGE_ERROR),
    (OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
)
#: The exceptions ``answer_errors`` writes to a response entry (a BrokerError, or a mapped storage error).
ANSWERED: tuple[type[Exception], ...] = (BrokerError, *(kind for kind, _ in _STORAGE_CODES))


def as_broker_error(exc: BaseException) -> BrokerError | None:
    """The BrokerError ``exc`` stands for at the response boundary; None when it is not a Kafka error."""
    if isinstance(exc, BrokerError):
        return exc
    for kind, code in _STORAGE_CODES:
        if isinstance(exc, kind):
            return BrokerError(code, str(exc))
    return None


@dataclass(slots=True)
class Answer:
    """How one ``answer_errors`` block ended: ``error`` is None when it completed."""

    error: BrokerError | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def write_error(entry: MutableMapping[str, Any] | None, exc: BaseException) -> BrokerError:
    """The Kafka error ``exc`` (one of ``ANSWERED``) stands for, written to ``entry``: its
    ``error_code``, and its ``error_message`` and ``record_errors`` when the entry has those fields.
    ``answer_errors`` does this; a loop over many partitions may catch ``ANSWERED`` itself and call
    this, which costs less than a context manager per partition."""
    error = as_broker_error(exc)
    assert error is not None
    if entry is not None:
        entry["error_code"] = error.code
        if "error_message" in entry:
            entry["error_message"] = error.message
        if error.record_errors and "record_errors" in entry:
            entry["record_errors"] = [
                {"batch_index": index, "batch_index_error_message": why} for index, why in error.record_errors
            ]
    return error


@contextmanager
def answer_errors(entry: MutableMapping[str, Any] | None = None) -> Iterator[Answer]:
    """Run a block for one response entry; a Kafka error ends the block and is written to the entry.

    On a ``BrokerError`` (or a storage error ``as_broker_error`` maps) the block stops there, the
    entry's ``error_code`` is set and so is its ``error_message`` when the entry has that field,
    and the yielded ``Answer`` holds the error for callers that also log or count it. Any other
    exception propagates unchanged, and so does cancellation.
    """
    answer = Answer()
    try:
        yield answer
    except ANSWERED as exc:
        answer.error = write_error(entry, exc)
