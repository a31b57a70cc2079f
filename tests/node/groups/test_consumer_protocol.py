"""The consumer embedded protocol, checked against kafka-python's independent codec."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from node.groups import (
    Assignment,
    RecordFormatError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def kp_subscription(version: int) -> bytes:
    tp = ConsumerProtocolSubscription.TopicPartition
    data: bytes = ConsumerProtocolSubscription(
        topics=["orders", "payments"],
        user_data=b"ud",
        owned_partitions=[tp(topic="orders", partitions=[0, 3])],
        generation_id=11,
        rack_id="rack-a",
    ).encode(version=version)
    return data


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_matches_kafka_python(version: int) -> None:
    ours = Subscription(
        topics=("orders", "payments"),
        user_data=b"ud",
        owned_partitions=(("orders", (0, 3)),) if version >= 1 else (),
        generation_id=11 if version >= 2 else -1,
        rack_id="rack-a" if version >= 3 else None,
        version=version,
    )
    theirs = kp_subscription(version)
    assert decode_subscription(theirs) == ours
    assert encode_subscription(ours) == theirs


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_matches_kafka_python(version: int) -> None:
    tp = ConsumerProtocolAssignment.TopicPartition
    theirs = ConsumerProtocolAssignment(
        assigned_partitions=[tp(topic="orders", partitions=[1, 2]), tp(topic="x", partitions=[])], user_data=None
    ).encode(version=version)
    ours = Assignment((("orders", (1, 2)), ("x", ())), None, version)
    assert decode_assignment(theirs) == ours
    assert encode_assignment(ours) == theirs
    assert ours.topic_partitions() == [("orders", 1), ("orders", 2)]


def test_newer_subscription_versions_are_read_with_the_v3_layout() -> None:
    data = bytearray(kp_subscription(3))
    data[0:2] = struct.pack(">h", 5)
    data += b"\x00\x00\x00\x09future"  # a field a later version appended
    sub = decode_subscription(bytes(data))
    assert sub.version == 5
    assert sub.topics == ("orders", "payments")
    assert sub.rack_id == "rack-a"


def test_empty_assignment_means_nothing_assigned() -> None:
    assert decode_assignment(b"").topic_partitions() == []


def test_garbage_is_a_record_format_error() -> None:
    with pytest.raises(RecordFormatError, match="ConsumerProtocolSubscription"):
        decode_subscription(b"\x00\x00\x00\x00\x00\x05\x00\x03ab")
    with pytest.raises(RecordFormatError, match="negative"):
        decode_assignment(b"\xff\xff")


def test_encoding_an_unknown_version_names_it() -> None:
    with pytest.raises(ValueError, match="version 4"):
        encode_subscription(Subscription(("t",), version=4))
