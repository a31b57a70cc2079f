"""The ``__transaction_state`` record format, byte-compatible with Apache Kafka, and the states it names.

Every record is a (key, value) pair; all integers are big-endian, strings an int16 length and UTF-8
bytes, arrays an int32 count (-1 = null) and the items. A null value is a tombstone: the
transactional id has expired and is forgotten.

TransactionLogKey (version 0)::

    offset  size  field
         0     2  version             int16, 0
         2     2  id length           int16
         4     n  transactional_id    UTF-8

TransactionLogValue (version 0; Kafka's version 1, KIP-890's flexible layout, is not read)::

    field                                   size
    version                                 int16, 0
    producer_id                             int64
    producer_epoch                          int16
    transaction_timeout_ms                  int32
    transaction_status                      int8   (``TxnState.code``)
    transaction_partitions                  int32 count (-1 = null: written for Empty), then each:
      topic                                   string
      partition_ids                           int32 count, then int32 each
    transaction_last_update_timestamp_ms    int64
    transaction_start_timestamp_ms          int64  (-1 while no transaction has started)

A transactional id lives in partition ``partition_for(id, partitions)``: the same formula as a
group's (Java's ``String.hashCode``, made non-negative, modulo the partition count).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from node.groups import Reader as RecordReader
from node.groups import RecordFormatError, put_string

from ._errors import TxnError

KEY_VERSION = 0
VALUE_VERSION = 0

_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer_id, producer_epoch, timeout_ms, status
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TIMESTAMPS = struct.Struct(">qq")  # last_update_timestamp_ms, start_timestamp_ms


class TxnState(enum.Enum):
    """Kafka's transaction states: the name DescribeTransactions shows and the byte the log stores."""

    EMPTY = ("Empty", 0)
    ONGOING = ("Ongoing", 1)
    PREPARE_COMMIT = ("PrepareCommit", 2)
    PREPARE_ABORT = ("PrepareAbort", 3)
    COMPLETE_COMMIT = ("CompleteCommit", 4)
    COMPLETE_ABORT = ("CompleteAbort", 5)
    DEAD = ("Dead", 6)
    PREPARE_EPOCH_FENCE = ("PrepareEpochFence", 7)

    @property
    def title(self) -> str:
        return self.value[0]

    @property
    def code(self) -> int:
        return self.value[1]

    @classmethod
    def from_code(cls, code: int) -> TxnState:
        """The state stored as ``code``; raises TxnRecordError for a byte Kafka does not define."""
        for state in cls:
            if state.code == code:
                return state
        raise TxnRecordError(f"transaction state {code} is not one of Kafka's (0-7)")

    @classmethod
    def from_title(cls, title: str) -> TxnState | None:
        """The state named ``title`` (``"Ongoing"``), or None."""
        return next((state for state in cls if state.title == title), None)


class TxnRecordError(TxnError):
    """A ``__transaction_state`` key or value that does not parse."""


TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One transactional id's state as of a record: what a load rebuilds it from."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(KEY_VERSION))
    put_string(out, transactional_id)
    return bytes(out)


def decode_key(data: bytes | memoryview) -> str | None:
    """The transactional id of a key; None for a key version Kafka may write but this format does not define."""
    r = RecordReader(data, "TransactionLogKey")
    try:
        if r.int16() != KEY_VERSION:
            return None
        return r.string()
    except RecordFormatError as exc:
        raise TxnRecordError(str(exc)) from None


def encode_value(value: TxnLogValue) -> bytes:
    """Version 0; the partitions are null for Empty (as Kafka writes them) and sorted otherwise."""
    out = bytearray(
        _VALUE_HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch, value.timeout_ms, value.state.code)
    )
    if value.state is TxnState.EMPTY:
        out += _I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += _I32.pack(len(by_topic))
        for topic, indexes in by_topic.items():
            put_string(out, topic)
            out += _I32.pack(len(indexes))
            out += b"".join(_I32.pack(i) for i in indexes)
    out += _TIMESTAMPS.pack(value.last_update_ms, value.start_ms)
    return bytes(out)


def decode_value(data: bytes | memoryview) -> TxnLogValue:
    """Parse version 0; raises TxnRecordError for another version, an unknown state or short data."""
    r = RecordReader(data, "TransactionLogValue")
    try:
        version = r.int16()
        if version != VALUE_VERSION:
            raise TxnRecordError(f"TransactionLogValue version {version} is not supported (0 is)")
        producer_id = r.int64()
        producer_epoch = r.int16()
        timeout_ms = r.int32()
        state = TxnState.from_code(r.int8())
        partitions: set[TopicPartition] = set()
        topics = r.int32()  # -1: null
        for _ in range(max(topics, 0)):
            topic = r.string()
            partitions.update((topic, r.int32()) for _ in range(r.count()))
        last_update_ms = r.int64()
        start_ms = r.int64()
    except RecordFormatError as exc:
        raise TxnRecordError(str(exc)) from None
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, state, frozenset(partitions), last_update_ms, start_ms)
