"""Records and partitions as histories write them, and the librdkafka settings the workloads share."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Message

__all__ = [
    "CLIENT_LOGGER",
    "CONSUMER_DEFAULTS",
    "IDEMPOTENT_DEFAULTS",
    "ConfigValue",
    "Record",
    "partition_key",
    "reader_config",
    "record_of",
]

ConfigValue = str | int | float | bool
#: One record as a history holds it: ``{"topic", "partition", "offset", "value"}``.
Record = dict[str, Any]

#: A paused (SIGSTOPped) broker holds requests until the socket timeout (librdkafka's default is
#: 60 s): the workloads give up on it sooner, as they do on a request.
CONSUMER_DEFAULTS: Mapping[str, ConfigValue] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_uncommitted",  # up to the high watermark, not the last stable offset
    "socket.timeout.ms": 10_000,
}

#: One request in flight per broker for the idempotent producer (both chaos producers use it:
#: :class:`chaos.workloads.Producer` and :class:`chaos.workload.ProducerWorkload`). With several,
#: librdkafka (up to 2.16 at least; confluentinc/librdkafka#4953, open) answers an OUT_OF_ORDER_SEQUENCE_NUMBER on a
#: pipelined request whose predecessor failed (NOT_ENOUGH_REPLICAS just after a leader change) by
#: bumping its producer epoch and re-sending every unacknowledged batch from sequence 0, on every
#: partition: a batch the old leader had written and replicated but not acknowledged is then
#: appended again, legitimately, under the new epoch. The Java client retries without the bump.
#: Seen once in the kills scenario (chaos-kills/2: 1068..1069 again at 1070..1071, epoch 0 seq 1068
#: then epoch 1 seq 0); tests/node/test_idempotence_leader_change.py shows the broker's side right.
IDEMPOTENT_DEFAULTS: Mapping[str, ConfigValue] = {"max.in.flight.requests.per.connection": 1}


class _ClientLog:
    """librdkafka's own log lines, at DEBUG on ``chaos.workloads.librdkafka`` instead of stderr.

    Under faults it logs every refused connection at error level; what matters reaches the
    workloads through ``error_cb`` and delivery reports. confluent-kafka calls ``log(level, msg, *args)``.
    """

    def __init__(self) -> None:
        self._logger = logging.getLogger("chaos.workloads.librdkafka")

    def log(self, level: int, msg: str, *args: object) -> None:  # every level goes to DEBUG
        self._logger.debug(msg, *args)


CLIENT_LOGGER = _ClientLog()


def partition_key(topic: str, partition: int) -> str:
    """``"<topic>/<partition>"``: how ``ends``, ``lag`` and ``drain`` entries name a partition."""
    return f"{topic}/{partition}"


def text(value: bytes | None) -> str | None:
    """A record's value as history text (the workloads write UTF-8; other bytes are escaped)."""
    return None if value is None else value.decode("utf-8", "backslashreplace")


def record_of(message: Message) -> Record:
    """The history form of a consumed record (one without an error)."""
    return {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "value": text(message.value()),
    }


def reader_config(bootstrap: str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A consumer that reads by ``assign`` (no group join, no commits): its group id is never used."""
    return {
        **CONSUMER_DEFAULTS,
        "logger": CLIENT_LOGGER,
        "bootstrap.servers": bootstrap,
        "group.id": f"chaos-reader-{uuid.uuid4().hex[:12]}",
        **(config or {}),
    }
