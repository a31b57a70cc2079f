"""Kafka's consumer embedded protocol: what ``protocol_type="consumer"`` members put in their metadata.

The coordinator never assigns partitions (the clients' assignors do: range, roundrobin,
cooperative-sticky) and relays these bytes untouched. It decodes them only to describe a group
(who owns what) and for OffsetDelete (which topics the group subscribes to).

ConsumerProtocolSubscription (a JoinGroup protocol's metadata), versions 0-3::

    field                                   v0  v1  v2  v3
    version int16                            x   x   x   x
    topics  int32 count, strings             x   x   x   x
    user_data nullable bytes                 x   x   x   x
    owned_partitions int32 count, each:          x   x   x
      topic string, partitions int32 count + int32s
    generation_id int32                              x   x   (-1 = unknown)
    rack_id nullable string                              x

ConsumerProtocolAssignment (a SyncGroup assignment), versions 0-3 share one layout::

    version int16
    assigned_partitions int32 count, each: topic string, partitions int32 count + int32s
    user_data nullable bytes

As Kafka's clients do, a version newer than 3 is read with the version-3 layout (newer versions
may only append fields). An empty assignment (zero bytes) means "nothing assigned".
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import RecordFormatError
from ._records import I16, I32, Reader, put_bytes, put_nullable_string, put_string

PROTOCOL_TYPE = "consumer"
MAX_VERSION = 3

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's subscription: what it wants, what it owns (cooperative rebalancing), where it runs."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = MAX_VERSION


@dataclass(frozen=True, slots=True)
class Assignment:
    """The partitions the group leader's assignor gave one member."""

    partitions: TopicPartitions
    user_data: bytes | None = None
    version: int = MAX_VERSION

    def topic_partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition), in the order the assignor listed them."""
        return [(topic, p) for topic, parts in self.partitions for p in parts]


def decode_subscription(data: bytes | memoryview) -> Subscription:
    """Parse a subscription; raises RecordFormatError naming the field that does not parse."""
    r = Reader(data, "ConsumerProtocolSubscription")
    version = r.int16()
    if version < 0:
        raise RecordFormatError(f"ConsumerProtocolSubscription version {version} is negative")
    layout = min(version, MAX_VERSION)
    topics = tuple(r.string() for _ in range(r.count()))
    user_data = r.nullable_bytes()
    owned = _read_topic_partitions(r) if layout >= 1 else ()
    generation = r.int32() if layout >= 2 else -1
    rack = r.nullable_string() if layout >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)


def encode_subscription(sub: Subscription) -> bytes:
    """The bytes of ``sub`` at ``sub.version`` (0-3); raises ValueError for another version."""
    version = _check_version(sub.version)
    out = bytearray(I16.pack(version))
    out += I32.pack(len(sub.topics))
    for topic in sub.topics:
        put_string(out, topic)
    put_bytes(out, sub.user_data)
    if version >= 1:
        _write_topic_partitions(out, sub.owned_partitions)
    if version >= 2:
        out += I32.pack(sub.generation_id)
    if version >= 3:
        put_nullable_string(out, sub.rack_id)
    return bytes(out)


def decode_assignment(data: bytes | memoryview) -> Assignment:
    """Parse an assignment (zero bytes: nothing assigned); raises RecordFormatError when it does not parse."""
    if len(data) == 0:
        return Assignment(())
    r = Reader(data, "ConsumerProtocolAssignment")
    version = r.int16()
    if version < 0:
        raise RecordFormatError(f"ConsumerProtocolAssignment version {version} is negative")
    partitions = _read_topic_partitions(r)
    return Assignment(partitions, r.nullable_bytes(), version)


def encode_assignment(assignment: Assignment) -> bytes:
    """The bytes of ``assignment`` at its version (0-3); raises ValueError for another version."""
    out = bytearray(I16.pack(_check_version(assignment.version)))
    _write_topic_partitions(out, assignment.partitions)
    put_bytes(out, assignment.user_data)
    return bytes(out)


def _read_topic_partitions(r: Reader) -> TopicPartitions:
    result = []
    for _ in range(r.count()):
        topic = r.string()
        result.append((topic, tuple(r.int32() for _ in range(r.count()))))
    return tuple(result)


def _write_topic_partitions(out: bytearray, items: TopicPartitions) -> None:
    out += I32.pack(len(items))
    for topic, partitions in items:
        put_string(out, topic)
        out += I32.pack(len(partitions))
        for p in partitions:
            out += I32.pack(p)


def _check_version(version: int) -> int:
    if not 0 <= version <= MAX_VERSION:
        raise ValueError(f"consumer protocol version {version} is not one of 0-{MAX_VERSION}")
    return version
