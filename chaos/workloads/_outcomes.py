"""Which librdkafka errors prove an operation did not happen (``fail``) and which leave it open (``info``).

A checker trusts ``fail``: a value recorded as a failed send and later read back is an anomaly.
So ``fail`` is kept for errors that *prove* the write absent, and everything else is ``info``.

**Sends.** librdkafka retries a write internally, and the delivery report carries only the error of
the last attempt. An earlier attempt may have reached a broker and been appended before its
connection broke or its request timed out (librdkafka then marks the message *possibly persisted*
and puts it back at the head of its partition's queue). confluent-kafka does not expose that
status, so no error code alone proves a write absent once it has been routed to a partition:

- ``_PURGE_QUEUE`` means "purged from a local queue", and a retried message waits in that same
  queue: possibly persisted;
- ``_MSG_TIMED_OUT``, ``_PURGE_INFLIGHT``, connection errors, and broker errors such as
  ``NOT_ENOUGH_REPLICAS`` or ``TOPIC_AUTHORIZATION_FAILED`` in a produce response may all follow
  an attempt that was appended.

What does prove it absent:

- librdkafka refused the write in ``produce()`` (queue full for good, too large, the producer in
  a fatal state): it never took it;
- the delivery report has no partition: a message is sent only from its partition's queue, and
  it never got one. That is the case of every error met before any send: the topic's metadata
  never arrived (``_MSG_TIMED_OUT``, ``_PURGE_QUEUE`` while no broker answered), or the metadata
  refused it (``TOPIC_AUTHORIZATION_FAILED``, ``_UNKNOWN_TOPIC``, a policy violation).

**Commits.** The same reasoning: librdkafka retries an offset commit after a broken connection or
a moved coordinator, so a broker's refusal of the last attempt does not prove an earlier one was
not stored. Only errors raised before any request (:data:`UNSENT_COMMIT_CODES`) are ``fail``.
"""

from __future__ import annotations

from typing import Literal

from confluent_kafka import KafkaError

__all__ = ["UNSENT_COMMIT_CODES", "commit_outcome", "describe", "send_outcome"]

Completion = Literal["fail", "info"]

#: librdkafka errors of an offset commit raised locally, before any request went out.
UNSENT_COMMIT_CODES: frozenset[int] = frozenset(
    {
        KafkaError._NO_OFFSET,  # nothing to commit
        KafkaError._INVALID_ARG,  # a malformed offsets list
    }
)


def send_outcome(error: KafkaError, partition: int | None, *, taken: bool = True) -> Completion:
    """How a send that ended with ``error`` completes: ``fail`` (certainly absent) or ``info``.

    ``partition`` is the partition of the delivery report (None or negative: never routed to
    one); ``taken`` is False when ``produce()`` itself raised ``error``.
    """
    if not taken:
        return "fail"
    if partition is None or partition < 0:
        return "fail"
    return "info"  # whatever ``error`` is: no code proves a routed write absent (module docstring)


def commit_outcome(error: KafkaError) -> Completion:
    """How a synchronous offset commit that ended with ``error`` completes."""
    return "fail" if error.code() in UNSENT_COMMIT_CODES else "info"


def describe(error: KafkaError) -> str:
    """``NAME: text`` (and ``(fatal)``) of a librdkafka error, as histories record it."""
    text = f"{error.name()}: {error.str()}"
    return f"{text} (fatal)" if error.fatal() else text
