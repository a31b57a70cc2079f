"""``__consumer_offsets`` records: exact bytes per Kafka's message specs, and the group -> partition mapping."""

from __future__ import annotations

import struct

import pytest

from node.groups import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for,
)


def s16(text: str | None) -> bytes:
    """A Kafka non-flexible string: int16 length (-1 = null), UTF-8."""
    if text is None:
        return b"\xff\xff"
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


# -- keys --------------------------------------------------------------------------------------------------------------


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    key = encode_key(OffsetCommitKey("g1", "t", 3))
    assert key == bytes.fromhex("0001" + "0002" + "6731" + "0001" + "74" + "00000003")
    assert decode_key(key) == OffsetCommitKey("g1", "t", 3)


def test_offset_commit_key_version_0_is_read_too() -> None:
    assert decode_key(b"\x00\x00" + s16("grp") + s16("topic") + struct.pack(">i", 12)) == OffsetCommitKey(
        "grp", "topic", 12
    )


def test_group_metadata_key_is_version_2_group() -> None:
    key = encode_key(GroupMetadataKey("g1"))
    assert key == bytes.fromhex("0002" + "0002" + "6731")
    assert decode_key(key) == GroupMetadataKey("g1")


def test_keys_of_unknown_versions_are_skipped_not_errors() -> None:
    assert decode_key(b"\x00\x03" + s16("g")) is None
    assert decode_key(b"\x00\x07anything") is None


def test_truncated_key_names_the_offset() -> None:
    with pytest.raises(RecordFormatError, match=r"needs 4 bytes at offset 9, 1 left"):
        decode_key(b"\x00\x01" + s16("g1") + s16("t") + b"\x00")


def test_utf8_names_survive() -> None:
    key = OffsetCommitKey("grüppe-✓", "tópic", 0)
    assert decode_key(encode_key(key)) == key
    assert encode_key(key)[2:4] == struct.pack(">h", len("grüppe-✓".encode()))


# -- offset commit values ----------------------------------------------------------------------------------------------


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=7)
    data = encode_offset_commit_value(value)
    assert (
        data
        == bytes.fromhex(
            "0003"  # version
            "000000000000002a"  # offset
            "00000007"  # leader epoch
            "0001" + "6d"  # metadata
            "00000000000003e8"  # commit timestamp
        )
    )
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_with_expiry_is_written_as_v1() -> None:
    value = OffsetCommitValue(offset=5, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    data = encode_offset_commit_value(value)
    assert data == bytes.fromhex("00010000000000000005000000000000000003e800000000000007d0")
    assert decode_offset_commit_value(data) == value


@pytest.mark.parametrize("version", [0, 2])
def test_offset_commit_value_v0_and_v2_are_read(version: int) -> None:
    data = struct.pack(">hq", version, 99) + s16("meta") + struct.pack(">q", 123456)
    assert decode_offset_commit_value(data) == OffsetCommitValue(99, "meta", 123456, -1, -1)


def test_offset_commit_value_of_unknown_version_is_an_error() -> None:
    with pytest.raises(RecordFormatError, match="version 4"):
        decode_offset_commit_value(struct.pack(">hq", 4, 1))


# -- group metadata values ---------------------------------------------------------------------------------------------

MEMBER = MemberMetadataValue("m1", "i1", "c", "/h", 30000, 10000, b"\x01\x02", b"\x03")


def test_group_metadata_value_v3_bytes() -> None:
    value = GroupMetadataValue("consumer", 2, "range", "m1", 5000, (MEMBER,))
    data = encode_group_metadata_value(value)
    expected = (
        b"\x00\x03"
        + s16("consumer")
        + struct.pack(">i", 2)
        + s16("range")
        + s16("m1")
        + struct.pack(">q", 5000)
        + struct.pack(">i", 1)
        + s16("m1")
        + s16("i1")
        + s16("c")
        + s16("/h")
        + struct.pack(">ii", 30000, 10000)
        + b32(b"\x01\x02")
        + b32(b"\x03")
    )
    assert data == expected
    assert data[:12].hex() == "00030008636f6e73756d6572"  # version 3, "consumer"
    assert decode_group_metadata_value(data) == value


def test_a_dynamic_member_has_a_null_instance_id() -> None:
    member = MemberMetadataValue("m2", None, "c", "/h", 30000, 10000, b"", b"")
    data = encode_group_metadata_value(GroupMetadataValue("consumer", 1, "range", "m2", 5000, (member,)))
    timeouts = struct.pack(">ii", 30000, 10000)
    expected_member = s16("m2") + b"\xff\xff" + s16("c") + s16("/h") + timeouts + bytes(8)  # instance id: -1
    assert data.endswith(struct.pack(">i", 1) + expected_member)
    assert decode_group_metadata_value(data).members == (member,)


def test_empty_group_metadata_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 3, None, None, -1, ())
    data = encode_group_metadata_value(value)
    assert data == b"\x00\x03" + s16("consumer") + struct.pack(">i", 3) + b"\xff\xff\xff\xff" + struct.pack(
        ">qi", -1, 0
    )
    assert decode_group_metadata_value(data) == value


def test_group_metadata_value_v0_takes_the_session_timeout_as_rebalance_timeout() -> None:
    data = (
        b"\x00\x00"
        + s16("consumer")
        + struct.pack(">i", 1)
        + s16("range")
        + s16("m1")
        + struct.pack(">i", 1)
        + s16("m1")
        + s16("c")
        + s16("/h")
        + struct.pack(">i", 10000)
        + b32(b"sub")
        + b32(b"asg")
    )
    member = MemberMetadataValue("m1", None, "c", "/h", 10000, 10000, b"sub", b"asg")
    assert decode_group_metadata_value(data) == GroupMetadataValue("consumer", 1, "range", "m1", -1, (member,))


@pytest.mark.parametrize("version", [1, 2])
def test_group_metadata_value_v1_and_v2_are_read(version: int) -> None:
    head = b"\x00" + bytes([version]) + s16("consumer") + struct.pack(">i", 4) + s16("rr") + s16("m1")
    if version == 2:
        head += struct.pack(">q", 777)
    member = s16("m1") + s16("c") + s16("/h") + struct.pack(">ii", 45000, 6000) + b32(b"s") + b32(b"a")
    decoded = decode_group_metadata_value(head + struct.pack(">i", 1) + member)
    assert decoded.current_state_timestamp == (777 if version == 2 else -1)
    assert decoded.members == (MemberMetadataValue("m1", None, "c", "/h", 45000, 6000, b"s", b"a"),)


def test_truncated_group_metadata_is_an_error() -> None:
    data = encode_group_metadata_value(GroupMetadataValue("consumer", 2, "range", "m1", 5000, (MEMBER,)))
    with pytest.raises(RecordFormatError, match="GroupMetadataValue"):
        decode_group_metadata_value(data[:-3])


# -- partition_for -----------------------------------------------------------------------------------------------------


def java_hash_by_definition(text: str) -> int:
    """s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1] over UTF-16 code units, wrapped to a signed int32."""
    raw = text.encode("utf-16-be")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),  # the well-known Java value
        ("world", 113318802),
        ("polygenelubricants", -(2**31)),  # the classic Integer.MIN_VALUE hash
        ("\ufeffbom@example.com", -974377058),
        ("😀", 1772899),  # two UTF-16 code units: 0xD83D 0xDE00
        ("my-group", -1906497762),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
    assert java_hash_by_definition(text) == expected


def test_partition_for_uses_kafka_utils_abs() -> None:
    # Kafka: Utils.abs(groupId.hashCode) % partitions; Utils.abs(Integer.MIN_VALUE) is 0.
    assert partition_for("my-group", 50) == abs(java_hash_by_definition("my-group")) % 50 == 12
    # A published example of Kafka's mapping: "testgroup" lives in partition 27 of 50. (Masking the sign
    # bit instead of taking the absolute value would give 21.)
    assert partition_for("testgroup", 50) == 27
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 22
    assert partition_for("", 50) == 0


def test_partition_for_stays_in_range() -> None:
    for i in range(500):
        assert 0 <= partition_for(f"group-{i}", 7) < 7


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError, match="at least 1, got 0"):
        partition_for("g", 0)
