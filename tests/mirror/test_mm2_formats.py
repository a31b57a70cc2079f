"""MM2's record formats byte for byte, and its naming, selection and cycle rules.

Expected bytes are written out by hand from the layouts in MM2's Heartbeat, OffsetSync and
Checkpoint classes (Kafka protocol Struct: int16-length UTF-8 strings, big-endian integers,
a {version: int16} header before heartbeat and checkpoint values), not produced by our encoder.
"""

from __future__ import annotations

import re

import pytest

from mirror import NameFilter
from mirror._mm2 import (
    Checkpoint,
    Heartbeat,
    MM2FormatError,
    OffsetSync,
    checkpoint_topic_name,
    checkpoints_topic,
    decode_checkpoint,
    decode_checkpoint_key,
    decode_checkpoint_value,
    decode_heartbeat,
    decode_heartbeat_key,
    decode_heartbeat_value,
    decode_offset_sync,
    decode_offset_sync_key,
    decode_offset_sync_value,
    encode_checkpoint,
    encode_checkpoint_key,
    encode_checkpoint_value,
    encode_heartbeat_key,
    encode_heartbeat_value,
    encode_offset_sync,
    encode_offset_sync_key,
    encode_offset_sync_value,
    is_checkpoints_topic,
    is_cycle,
    is_heartbeats_topic,
    is_internal_topic,
    mm2_selects,
    offset_syncs_topic,
    original_topic,
    remote_topic,
    sync_for,
    topic_source,
    upstream_topic,
)

EIGHT = bytes.fromhex("0102030405060708")  # the int64 0x0102030405060708

# -- heartbeats ---------------------------------------------------------------------------------


def test_heartbeat_bytes() -> None:
    assert encode_heartbeat_key("east", "west") == b"\x00\x04east" + b"\x00\x04west"
    assert encode_heartbeat_value(0x0102030405060708) == b"\x00\x00" + EIGHT
    key = b"\x00\x04east\x00\x09us-west-2"
    value = b"\x00\x00" + (1_700_000_000_123).to_bytes(8, "big")
    assert decode_heartbeat(key, value) == Heartbeat("east", "us-west-2", 1_700_000_000_123)


def test_offset_sync_bytes() -> None:
    assert encode_offset_sync_key("orders", 3) == b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert encode_offset_sync_value(0x0102030405060708, 0x20) == EIGHT + b"\x00" * 7 + b"\x20"
    assert encode_offset_sync_value(-1, -1) == b"\xff" * 16  # our anchor sync
    key = b"\x00\x01t\x00\x00\x01\x00"
    value = (1000).to_bytes(8, "big") + (7).to_bytes(8, "big")
    assert decode_offset_sync(key, value) == sync_for("t", 256, 1000, 7)
    assert encode_offset_sync(sync_for("t", 256, 1000, 7)) == (key, value)


def test_checkpoint_bytes() -> None:
    key = b"\x00\x02g1" + b"\x00\x0beast.orders" + b"\x00\x00\x00\x02"
    assert encode_checkpoint_key("g1", "east.orders", 2) == key
    value = b"\x00\x00" + (41).to_bytes(8, "big") + (17).to_bytes(8, "big") + b"\x00\x02\xc3\xa9"
    assert encode_checkpoint_value(41, 17, "é") == value
    assert encode_checkpoint_value(0, 0) == b"\x00" * 18 + b"\x00\x00"  # empty metadata
    cp = decode_checkpoint(key, value)
    assert cp == Checkpoint("g1", "east.orders", 2, cp.upstream, cp.downstream, "é")
    assert (cp.upstream, cp.downstream) == (41, 17)
    assert encode_checkpoint(cp) == (key, value)


@pytest.mark.parametrize(
    "pair",
    [
        ("", "west"),
        ("ünï", "コード"),
        ("a" * 32767, "b"),
    ],
)
def test_heartbeat_round_trip(pair: tuple[str, str]) -> None:
    key = encode_heartbeat_key(*pair)
    assert decode_heartbeat_key(key) == pair
    assert decode_heartbeat_value(encode_heartbeat_value(-5)) == -5


def test_offset_sync_and_checkpoint_round_trip() -> None:
    for upstream, downstream in [(0, 0), (2**63 - 1, -(2**63)), (-1, -1)]:
        value = encode_offset_sync_value(upstream, downstream)
        assert decode_offset_sync_value(value) == (upstream, downstream)
        cp_value = encode_checkpoint_value(upstream, downstream, "meta data")
        assert decode_checkpoint_value(cp_value) == (upstream, downstream, "meta data")
    assert decode_offset_sync_key(encode_offset_sync_key("x.y-z", 2**31 - 1)) == ("x.y-z", 2**31 - 1)
    assert decode_checkpoint_key(encode_checkpoint_key("grp", "east.t", 0)) == ("grp", "east.t", 0)
    sync = OffsetSync("a", 1, sync_for("a", 1, 5, 6).upstream, sync_for("a", 1, 5, 6).downstream)
    assert decode_offset_sync(*encode_offset_sync(sync)) == sync


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (decode_heartbeat_key, b"", r"heartbeat key: sourceClusterAlias length needs 2 bytes at byte 0, only 0 left"),
        (decode_heartbeat_key, b"\x00\x0aeast", r"heartbeat key: sourceClusterAlias needs 10 bytes at byte 2"),
        (decode_heartbeat_key, b"\xff\xff", r"sourceClusterAlias has a negative length -1"),
        (decode_heartbeat_key, b"\x00\x01e", r"targetClusterAlias length needs 2 bytes"),
        (decode_heartbeat_key, b"\x00\x01e\x00\x01w!", r"heartbeat key: 1 bytes left over"),
        (decode_heartbeat_key, b"\x00\x02\xc3\x28\x00\x00", r"sourceClusterAlias is not valid UTF-8"),
        (decode_heartbeat_key, None, r"heartbeat key: null \(a tombstone\)"),
        (decode_heartbeat_value, b"\x00\x01" + EIGHT, r"heartbeat value: version 1 is not supported"),
        (decode_heartbeat_value, b"\x00\x00\x01", r"heartbeat value: timestamp needs 8 bytes at byte 2, only 1 left"),
        (decode_offset_sync_key, b"\x00\x01t\x00\x00", r"offset sync key: partition needs 4 bytes"),
        (decode_offset_sync_value, b"\x00" * 15, r"offset sync value: offset needs 8 bytes at byte 8, only 7 left"),
        (decode_offset_sync_value, b"\x00" * 17, r"offset sync value: 1 bytes left over"),
        (decode_offset_sync_value, None, r"offset sync value: null"),
        (decode_checkpoint_key, b"\x00\x01g\x00\x01t\x00", r"checkpoint key: partition needs 4 bytes"),
        (decode_checkpoint_value, b"\x00\x02" + b"\x00" * 18, r"checkpoint value: version 2 is not supported"),
        (decode_checkpoint_value, b"\x00" * 18, r"checkpoint value: metadata length needs 2 bytes"),
        (decode_checkpoint_value, b"\x00" * 18 + b"\x80\x00", r"metadata has a negative length -32768"),
    ],
)
def test_malformed_input_is_refused_naming_what_is_wrong(decode: object, data: bytes | None, message: str) -> None:
    assert callable(decode)
    with pytest.raises(MM2FormatError, match=message) as info:
        decode(data)
    assert isinstance(info.value, ValueError)


def test_strings_over_the_struct_limit_cannot_be_encoded() -> None:
    with pytest.raises(MM2FormatError, match="checkpoint key group: 32768 bytes of UTF-8, above the STRING limit"):
        encode_checkpoint_key("g" * 32768, "t", 0)


# -- naming -------------------------------------------------------------------------------------


def test_remote_names_sources_and_upstream_names() -> None:
    assert remote_topic("east", "orders") == "east.orders"
    assert topic_source("east.orders") == "east"
    assert upstream_topic("east.orders") == "orders"
    assert topic_source("orders") is None and upstream_topic("orders") is None
    assert topic_source("west.east.orders") == "west"
    assert upstream_topic("west.east.orders") == "east.orders"
    assert original_topic("west.east.orders") == "orders"
    assert original_topic("orders") == "orders"
    # Java's String.split drops trailing empty parts: "east." is not a remote topic.
    assert topic_source("east.") is None
    assert topic_source(".orders") == ""
    assert upstream_topic("east.orders.v2") == "orders.v2"


def test_internal_topic_names() -> None:
    assert offset_syncs_topic("west") == "mm2-offset-syncs.west.internal"
    assert checkpoints_topic("east") == "east.checkpoints.internal"
    assert is_checkpoints_topic("east.checkpoints.internal")
    for name in (
        "mm2-offset-syncs.west.internal",
        "east.checkpoints.internal",
        "mm2-configs.east.internal",
        "__consumer_offsets",
        "__transaction_state",
        ".hidden",
        "connect-offsets-internal",
    ):
        assert is_internal_topic(name), name
    for name in ("orders", "heartbeats", "east.heartbeats", "internal", "east.orders"):
        assert not is_internal_topic(name), name


def test_heartbeats_topics() -> None:
    for name in ("heartbeats", "east.heartbeats", "west.east.heartbeats"):
        assert is_heartbeats_topic(name), name
    for name in ("heartbeats2", "east.heartbeats.v2", "my-heartbeats"):
        assert not is_heartbeats_topic(name), name


def test_cycles() -> None:
    assert is_cycle("east.orders", "east")
    assert is_cycle("north.east.orders", "east")
    assert not is_cycle("east.orders", "west")
    assert not is_cycle("orders", "east")
    assert not is_cycle("eastern.orders", "east")


def test_selection_follows_mm2() -> None:
    everything = NameFilter()
    orders_only = NameFilter(include=(re.compile("orders.*"),))
    # The east -> west link, on east.
    assert mm2_selects(orders_only, "east", "west", "orders")
    assert mm2_selects(orders_only, "east", "west", "orders.eu")
    assert not mm2_selects(orders_only, "east", "west", "payments")
    assert mm2_selects(orders_only, "east", "west", "heartbeats")  # always, whatever the filter
    assert mm2_selects(orders_only, "east", "west", "north.heartbeats")
    assert not mm2_selects(everything, "east", "west", "west.orders")  # came from west: a cycle
    assert not mm2_selects(everything, "east", "west", "west.heartbeats")  # a cycle, even for heartbeats
    assert not mm2_selects(everything, "east", "west", "north.west.orders")
    assert mm2_selects(everything, "east", "west", "north.orders")
    for internal in ("mm2-offset-syncs.west.internal", "west.checkpoints.internal", "__consumer_offsets"):
        assert not mm2_selects(everything, "east", "west", internal)
    # The west -> east link, on west: east's records are never sent back.
    assert not mm2_selects(everything, "west", "east", "east.orders")
    assert not mm2_selects(everything, "west", "east", "east.heartbeats")
    assert mm2_selects(everything, "west", "east", "heartbeats")
    assert mm2_selects(everything, "west", "east", "orders")
    # A remote name Kafka could not create (over 249 characters) is not selected.
    assert mm2_selects(everything, "east", "west", "t" * 244)
    assert not mm2_selects(everything, "east", "west", "t" * 245)


def test_checkpoint_topic_names() -> None:
    assert checkpoint_topic_name("east", "west", "orders") == "east.orders"
    # A topic that came from the target is checkpointed under its original name there.
    assert checkpoint_topic_name("east", "west", "west.orders") == "orders"
