"""The records MirrorMaker 2 writes to its internal topics, byte for byte.

MM2 serializes them with Kafka's protocol ``Schema``/``Struct`` types (not Connect's JSON or
Avro converters): every field in order, no field names, no tags, no length prefix for the
whole struct. Integers are big-endian; a STRING is an int16 byte length followed by that many
bytes of UTF-8 (never null: MM2's schemas use the non-nullable type). Values that may change
shape carry a header struct ``{version: int16}`` first; MM2 knows only version 0.

Heartbeat (topic ``heartbeats`` on the target, partition 0)::

    key    sourceClusterAlias STRING | targetClusterAlias STRING
    value  version INT16 (0) | timestamp INT64 (ms)

OffsetSync (topic ``mm2-offset-syncs.<target>.internal``, on the source by default, partition 0)::

    key    topic STRING | partition INT32          the *source* topic-partition
    value  upstreamOffset INT64 | offset INT64     no version header

Checkpoint (topic ``<source>.checkpoints.internal`` on the target, partition 0)::

    key    group STRING | topic STRING | partition INT32     the *target* topic-partition
    value  version INT16 (0) | upstreamOffset INT64 | offset INT64 | metadata STRING

Decoding refuses anything else (short input, bytes left over, an unknown version, a negative
string length, invalid UTF-8) with :class:`MM2FormatError` (a ``ValueError``) naming the record
kind, the field and what is wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from storage.records import Offset

from ._config import MirrorError
from ._offsets import SourceOffset, TargetOffset

#: The only value version MM2 writes and reads (``Heartbeat.VERSION``, ``Checkpoint.VERSION``).
VERSION = 0
MAX_STRING_BYTES = 0x7FFF  # Type.STRING refuses longer strings

_INT16 = struct.Struct(">h")  # a STRING's length; the version header
_INT32 = struct.Struct(">i")  # partition
_INT64 = struct.Struct(">q")  # offsets, timestamp
_HEARTBEAT_VALUE = struct.Struct(
    ">h"  # version
    "q"  # timestamp (ms)
)
_OFFSET_SYNC_VALUE = struct.Struct(
    ">q"  # upstreamOffset
    "q"  # offset (downstream)
)
_CHECKPOINT_OFFSETS = struct.Struct(
    ">h"  # version
    "q"  # upstreamOffset
    "q"  # offset (downstream)
)  # then metadata STRING


class MM2FormatError(MirrorError, ValueError):
    """Bytes that are not a valid MM2 record: the message names the record, the field and the problem."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Upstream record ``upstream`` of ``topic``-``partition`` (source names) is downstream record ``downstream``."""

    topic: str
    partition: int
    upstream: SourceOffset
    downstream: TargetOffset


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Group ``group`` committed ``upstream`` upstream; ``downstream`` is where it may resume on the target.

    ``topic`` is the target-side (remote) topic name, as MM2 writes it.
    """

    group: str
    topic: str
    partition: int
    upstream: SourceOffset
    downstream: TargetOffset
    metadata: str = ""


# -- writing ---------------------------------------------------------------------------------------


def _string(value: str, what: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise MM2FormatError(f"{what}: {len(data)} bytes of UTF-8, above the STRING limit of {MAX_STRING_BYTES}")
    return _INT16.pack(len(data)) + data


def encode_heartbeat_key(source_alias: str, target_alias: str) -> bytes:
    return _string(source_alias, "heartbeat key sourceClusterAlias") + _string(
        target_alias, "heartbeat key targetClusterAlias"
    )


def encode_heartbeat_value(timestamp_ms: int) -> bytes:
    return _HEARTBEAT_VALUE.pack(VERSION, timestamp_ms)


def encode_offset_sync_key(topic: str, partition: int) -> bytes:
    return _string(topic, "offset sync key topic") + _INT32.pack(partition)


def encode_offset_sync_value(upstream: int, downstream: int) -> bytes:
    return _OFFSET_SYNC_VALUE.pack(upstream, downstream)


def encode_checkpoint_key(group: str, topic: str, partition: int) -> bytes:
    return _string(group, "checkpoint key group") + _string(topic, "checkpoint key topic") + _INT32.pack(partition)


def encode_checkpoint_value(upstream: int, downstream: int, metadata: str = "") -> bytes:
    return _CHECKPOINT_OFFSETS.pack(VERSION, upstream, downstream) + _string(metadata, "checkpoint value metadata")


def encode_offset_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """(key, value) of an offset-syncs record."""
    return encode_offset_sync_key(sync.topic, sync.partition), encode_offset_sync_value(sync.upstream, sync.downstream)


def encode_checkpoint(cp: Checkpoint) -> tuple[bytes, bytes]:
    """(key, value) of a checkpoints record."""
    return (
        encode_checkpoint_key(cp.group, cp.topic, cp.partition),
        encode_checkpoint_value(cp.upstream, cp.downstream, cp.metadata),
    )


# -- reading ---------------------------------------------------------------------------------------


class _Reader:
    """Reads fields in order from one record's key or value; every failure names ``what`` and the field."""

    def __init__(self, data: bytes | bytearray | memoryview | None, what: str) -> None:
        if data is None:
            raise MM2FormatError(f"{what}: null (a tombstone), not a record")
        self.view = memoryview(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> memoryview:
        left = len(self.view) - self.pos
        if n > left:
            raise MM2FormatError(f"{self.what}: {field} needs {n} bytes at byte {self.pos}, only {left} left")
        out = self.view[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self, field: str) -> int:
        return int(_INT16.unpack(self._take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack(self._take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_INT64.unpack(self._take(8, field))[0])

    def offset(self, field: str) -> Offset:
        return Offset(self.int64(field))

    def string(self, field: str) -> str:
        n = self.int16(f"{field} length")
        if n < 0:
            raise MM2FormatError(f"{self.what}: {field} has a negative length {n} (STRING is never null)")
        raw = self._take(n, field)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MM2FormatError(
                f"{self.what}: {field} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None

    def version(self) -> None:
        v = self.int16("version")
        if v != VERSION:
            raise MM2FormatError(f"{self.what}: version {v} is not supported (MM2 writes version {VERSION})")

    def end(self) -> None:
        left = len(self.view) - self.pos
        if left:
            raise MM2FormatError(f"{self.what}: {left} bytes left over after the last field")


def decode_heartbeat_key(data: bytes | bytearray | memoryview | None) -> tuple[str, str]:
    """(sourceClusterAlias, targetClusterAlias). Raises MM2FormatError."""
    r = _Reader(data, "heartbeat key")
    out = r.string("sourceClusterAlias"), r.string("targetClusterAlias")
    r.end()
    return out


def decode_heartbeat_value(data: bytes | bytearray | memoryview | None) -> int:
    """The timestamp (ms). Raises MM2FormatError."""
    r = _Reader(data, "heartbeat value")
    r.version()
    ts = r.int64("timestamp")
    r.end()
    return ts


def decode_heartbeat(
    key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
) -> Heartbeat:
    source, target = decode_heartbeat_key(key)
    return Heartbeat(source, target, decode_heartbeat_value(value))


def decode_offset_sync_key(data: bytes | bytearray | memoryview | None) -> tuple[str, int]:
    """(topic, partition). Raises MM2FormatError."""
    r = _Reader(data, "offset sync key")
    out = r.string("topic"), r.int32("partition")
    r.end()
    return out


def decode_offset_sync_value(data: bytes | bytearray | memoryview | None) -> tuple[SourceOffset, TargetOffset]:
    """(upstreamOffset, offset). Raises MM2FormatError."""
    r = _Reader(data, "offset sync value")
    out = SourceOffset(r.offset("upstreamOffset")), TargetOffset(r.offset("offset"))
    r.end()
    return out


def decode_offset_sync(
    key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
) -> OffsetSync:
    topic, partition = decode_offset_sync_key(key)
    upstream, downstream = decode_offset_sync_value(value)
    return OffsetSync(topic, partition, upstream, downstream)


def decode_checkpoint_key(data: bytes | bytearray | memoryview | None) -> tuple[str, str, int]:
    """(group, topic, partition). Raises MM2FormatError."""
    r = _Reader(data, "checkpoint key")
    out = r.string("group"), r.string("topic"), r.int32("partition")
    r.end()
    return out


def decode_checkpoint_value(
    data: bytes | bytearray | memoryview | None,
) -> tuple[SourceOffset, TargetOffset, str]:
    """(upstreamOffset, offset, metadata). Raises MM2FormatError."""
    r = _Reader(data, "checkpoint value")
    r.version()
    out = SourceOffset(r.offset("upstreamOffset")), TargetOffset(r.offset("offset")), r.string("metadata")
    r.end()
    return out


def decode_checkpoint(
    key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
) -> Checkpoint:
    group, topic, partition = decode_checkpoint_key(key)
    upstream, downstream, metadata = decode_checkpoint_value(value)
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)
