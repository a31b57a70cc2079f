"""The ``__consumer_offsets`` record format, byte-compatible with Apache Kafka, and ``partition_for``.

Every record of the topic is a (key, value) pair whose first two bytes (int16, big-endian) are a
version. The key's version says what the record is; the value's version says its layout. A null
value is a tombstone: the key's offset, or the whole group's metadata, is deleted. Strings are an
int16 length and UTF-8 bytes (length -1 = null where nullable), ``bytes`` an int32 length and the
bytes, arrays an int32 count and the items. All integers are big-endian.

OffsetCommitKey (key version 0 or 1; strait writes 1)::

    offset  size  field
         0     2  version           int16, 0 or 1
         2     2  group length      int16
         4     g  group             UTF-8
       4+g     2  topic length      int16
       6+g     t  topic             UTF-8
     6+g+t     4  partition         int32

GroupMetadataKey (key version 2)::

         0     2  version           int16, 2
         2     2  group length      int16
         4     g  group             UTF-8

OffsetCommitValue (value versions 0-3; strait writes 3, or 1 when the commit carries an expire time)::

    field               v0  v1  v2  v3
    version int16        x   x   x   x
    offset int64         x   x   x   x
    leader_epoch int32               x   (-1 = none)
    metadata string      x   x   x   x
    commit_timestamp     x   x   x   x   int64, ms since the epoch
    expire_timestamp         x           int64 (only v1)

GroupMetadataValue (value versions 0-3; strait writes 3)::

    field                           v0  v1  v2  v3
    version int16                    x   x   x   x
    protocol_type string             x   x   x   x   ("" for a group that only commits)
    generation int32                 x   x   x   x
    protocol nullable string         x   x   x   x
    leader nullable string           x   x   x   x
    current_state_timestamp int64            x   x   (-1 = unknown)
    members int32 count, then each:  x   x   x   x
      member_id string               x   x   x   x
      group_instance_id nullable str             x
      client_id string               x   x   x   x
      client_host string             x   x   x   x
      rebalance_timeout int32            x   x   x   (v0: taken to be the session timeout)
      session_timeout int32          x   x   x   x
      subscription bytes             x   x   x   x   (the metadata of the chosen protocol)
      assignment bytes               x   x   x   x

Keys of other versions (Kafka's newer group types) are reported as None by ``decode_key`` and
skipped on load, as Kafka skips unknown keys.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ._errors import RecordFormatError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3

I8 = struct.Struct(">b")  # a state byte (``__transaction_state``)
I16 = struct.Struct(">h")  # a version, a string length
I32 = struct.Struct(">i")  # partition, generation, timeouts, a bytes length, an array count
I64 = struct.Struct(">q")  # offsets and timestamps
_OFFSET_V3_HEAD = struct.Struct(">hqi")  # version, offset, leader_epoch
_OFFSET_V0_HEAD = struct.Struct(">hq")  # version, offset (v0-v2)
_MEMBER_TIMEOUTS = struct.Struct(">ii")  # rebalance_timeout, session_timeout (v1+)

_INT32_MIN = -(1 << 31)


# ---------------------------------------------------------------------------------------------------------------------
# The records


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """The key of a committed offset: one group's position in one topic partition."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """The key of a group's metadata record."""

    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset. ``leader_epoch`` and ``expire_timestamp`` are -1 when absent."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """One member as stored in a group's metadata record."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's generation, chosen protocol, leader and members, as of its last stored state."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...] = ()


# ---------------------------------------------------------------------------------------------------------------------
# Keys and values


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    """The key bytes: OffsetCommitKey at version 1, GroupMetadataKey at version 2."""
    out = bytearray()
    if isinstance(key, OffsetCommitKey):
        out += I16.pack(OFFSET_COMMIT_KEY_VERSION)
        put_string(out, key.group)
        put_string(out, key.topic)
        out += I32.pack(key.partition)
    else:
        out += I16.pack(GROUP_METADATA_KEY_VERSION)
        put_string(out, key.group)
    return bytes(out)


def decode_key(data: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey | None:
    """Parse a key; None for a key version this format does not define. Raises RecordFormatError."""
    r = Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string())
    return None


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 3, or version 1 when ``expire_timestamp`` is set (as Kafka writes an explicit retention)."""
    out = bytearray()
    if value.expire_timestamp >= 0:
        out += _OFFSET_V0_HEAD.pack(OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION, value.offset)
        put_string(out, value.metadata)
        out += I64.pack(value.commit_timestamp)
        out += I64.pack(value.expire_timestamp)
    else:
        out += _OFFSET_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
        put_string(out, value.metadata)
        out += I64.pack(value.commit_timestamp)
    return bytes(out)


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    """Parse versions 0-3; raises RecordFormatError for another version or short data."""
    r = Reader(data, "OffsetCommitValue")
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"OffsetCommitValue version {version} is not supported (0-3 are)")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Version 3 of the layout in the module docstring."""
    out = bytearray(I16.pack(GROUP_METADATA_VALUE_VERSION))
    put_string(out, value.protocol_type)
    out += I32.pack(value.generation)
    put_nullable_string(out, value.protocol)
    put_nullable_string(out, value.leader)
    out += I64.pack(value.current_state_timestamp)
    out += I32.pack(len(value.members))
    for m in value.members:
        put_string(out, m.member_id)
        put_nullable_string(out, m.group_instance_id)
        put_string(out, m.client_id)
        put_string(out, m.client_host)
        out += _MEMBER_TIMEOUTS.pack(m.rebalance_timeout, m.session_timeout)
        put_bytes(out, m.subscription)
        put_bytes(out, m.assignment)
    return bytes(out)


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    """Parse versions 0-3; raises RecordFormatError for another version or short data."""
    r = Reader(data, "GroupMetadataValue")
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"GroupMetadataValue version {version} is not supported (0-3 are)")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.count()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        members.append(
            MemberMetadataValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))


# ---------------------------------------------------------------------------------------------------------------------
# Where a group lives


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a signed int32."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it.

    Kafka: ``Utils.abs(groupId.hashCode) % partitions``, where ``Utils.abs`` maps Integer.MIN_VALUE
    to 0 and is ``Math.abs`` otherwise. Raises ValueError when ``partitions`` is not positive.
    """
    if partitions < 1:
        raise ValueError(f"offsets partitions must be at least 1, got {partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % partitions


# ---------------------------------------------------------------------------------------------------------------------
# Primitives shared with the consumer protocol


def put_string(out: bytearray, text: str) -> None:
    """Append an int16-length UTF-8 string; raises RecordFormatError when it is longer than 32767 bytes."""
    data = text.encode("utf-8")
    if len(data) > 0x7FFF:
        raise RecordFormatError(f"string of {len(data)} bytes does not fit an int16 length: {text[:40]!r}...")
    out += I16.pack(len(data))
    out += data


def put_nullable_string(out: bytearray, text: str | None) -> None:
    """Like ``put_string``; None is length -1."""
    if text is None:
        out += I16.pack(-1)
    else:
        put_string(out, text)


def put_bytes(out: bytearray, data: bytes | None) -> None:
    """Append int32-length bytes; None is length -1 (only where the field is nullable)."""
    if data is None:
        out += I32.pack(-1)
    else:
        out += I32.pack(len(data))
        out += data


class Reader:
    """Reads big-endian fields in order; every shortfall raises RecordFormatError naming ``what`` and the offset.

    Bytes after the last field read are ignored (newer versions may append fields).
    """

    __slots__ = ("_buf", "_pos", "_what")

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self._buf = memoryview(data)
        self._pos = 0
        self._what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self._pos + n > len(self._buf):
            raise RecordFormatError(
                f"{self._what}: needs {n} bytes at offset {self._pos}, {len(self._buf) - self._pos} left"
            )
        view = self._buf[self._pos : self._pos + n]
        self._pos += n
        return view

    def int8(self) -> int:
        value: int = I8.unpack(self._take(1))[0]
        return value

    def int16(self) -> int:
        value: int = I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = I64.unpack(self._take(8))[0]
        return value

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise RecordFormatError(f"{self._what}: string length {n} at offset {self._pos - 2}")
        raw = self._take(n)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"{self._what}: string at offset {self._pos - n} is not UTF-8: {exc}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise RecordFormatError(f"{self._what}: null string at offset {self._pos - 2} where one is required")
        return text

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        return bytes(self._take(n))

    def bytes_(self) -> bytes:
        data = self.nullable_bytes()
        if data is None:
            raise RecordFormatError(f"{self._what}: null bytes at offset {self._pos - 4} where bytes are required")
        return data

    def count(self) -> int:
        """An array's int32 count; a negative count (null array) raises RecordFormatError."""
        n = self.int32()
        if n < 0:
            raise RecordFormatError(f"{self._what}: array count {n} at offset {self._pos - 4}")
        return n
