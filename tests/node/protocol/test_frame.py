"""Headers and framing: request headers v1/v2, response headers v0/v1, ApiVersions' special cases,
the error-35 fallback, and every way a request frame can be broken (which must only ever raise
ProtocolError subclasses, never anything else)."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata.api_versions import ApiVersionsResponse

from node.protocol import (
    ApiKey,
    ApiSchema,
    EncodeError,
    ErrorCode,
    MalformedRequest,
    MalformedResponse,
    ProtocolError,
    RequestHeader,
    UnknownApi,
    UnsupportedVersion,
    _catalog,
    advertised_ranges,
    api_versions_fallback,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
    request_header,
)
from node.protocol._schema import INT16, INT32, STRING, A, F, S
from tests.node.protocol.helpers import Sampler, api_versions


def frame_bytes(parts: list[Any]) -> bytes:
    return b"".join(bytes(p) for p in parts)


def classic_header(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    head = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return head + struct.pack(">h", -1)
    return head + struct.pack(">h", len(client_id)) + client_id


def produce_v3(topic_count: bytes = b"\x00\x00\x00\x01", name: bytes = b"\x00\x01t") -> bytes:
    """A ProduceRequest v3 frame (no size prefix) built by hand: one topic, one partition, 3 record bytes."""
    body = (
        b"\xff\xff"  # transactional_id: null
        + struct.pack(">hi", 1, 1500)  # acks, timeout_ms
        + topic_count
        + name
        + struct.pack(">i", 1)  # partitions
        + struct.pack(">i", 0)  # index
        + struct.pack(">i", 3)
        + b"abc"  # records
    )
    return classic_header(0, 3, 77, b"cli") + body


# ---------------------------------------------------------------------------------------------------------------------
# request headers


def test_request_header_v1_for_a_non_flexible_version() -> None:
    frame = produce_v3()
    header, offset = read_request_header(frame)
    assert header == RequestHeader(ApiKey.PRODUCE, 3, 77, "cli", 1)
    assert offset == 8 + 2 + 3
    body = decode_request(header, frame, offset)
    assert body.acks == 1
    assert body.timeout_ms == 1500
    assert body.transactional_id is None
    assert bytes(body.topic_data[0].partition_data[0].records) == b"abc"


def test_records_are_a_zero_copy_view_of_the_frame() -> None:
    frame = bytearray(produce_v3())
    header, offset = read_request_header(frame)  # type: ignore[arg-type]
    records = decode_request(header, frame, offset).topic_data[0].partition_data[0].records  # type: ignore[arg-type]
    assert isinstance(records, memoryview)
    frame[-3:] = b"xyz"  # the view sees writes to the frame: it is not a copy
    assert bytes(records) == b"xyz"


def test_null_client_id() -> None:
    frame = classic_header(ApiKey.LIST_GROUPS, 1, 5, None)
    header, offset = read_request_header(frame)
    assert header.client_id is None
    assert offset == len(frame)


def test_request_header_v2_skips_tagged_fields_and_keeps_the_int16_client_id() -> None:
    # ApiVersions v3 as librdkafka sends it: header v2 (client_id int16-length, then tags), compact body.
    tags = b"\x02" + b"\x00\x02hi" + b"\x05\x01z"  # two unknown header tags: (0, b"hi"), (5, b"z")
    body = b"\x0blibrdkafka" + b"\x072.0.2x" + b"\x00"  # compact strings (length + 1), empty tag buffer
    frame = classic_header(ApiKey.API_VERSIONS, 3, 1, b"rdkafka") + tags + body
    header, offset = read_request_header(frame)
    assert header == RequestHeader(ApiKey.API_VERSIONS, 3, 1, "rdkafka", 2)
    assert offset == len(frame) - len(body)
    request = decode_request(header, frame, offset)
    assert request.client_software_name == "librdkafka"
    assert request.client_software_version == "2.0.2x"


def test_api_versions_v3_request_encodes_header_v2_with_int16_client_id() -> None:
    frame = encode_request(request_header(ApiKey.API_VERSIONS, 3, 1, "rdkafka"), {"client_software_name": "a"})
    expected = classic_header(ApiKey.API_VERSIONS, 3, 1, b"rdkafka") + b"\x00" + b"\x02a" + b"\x01" + b"\x00"
    assert frame == struct.pack(">i", len(expected)) + expected


def test_unknown_api_key_carries_the_header_values() -> None:
    frame = classic_header(999, 4, 1234, b"x") + b"body"
    with pytest.raises(UnknownApi) as caught:
        read_request_header(frame)
    assert (caught.value.api_key, caught.value.api_version, caught.value.correlation_id) == (999, 4, 1234)
    assert caught.value.header == RequestHeader(999, 4, 1234, "x", 1)
    assert "999" in str(caught.value)


@pytest.mark.parametrize(
    ("api_key", "version", "header_version"),
    [(ApiKey.PRODUCE, 12, 2), (ApiKey.FETCH, 18, 2), (ApiKey.API_VERSIONS, 5, 2), (ApiKey.METADATA, -1, 1)],
)
def test_unsupported_version_carries_the_header(api_key: int, version: int, header_version: int) -> None:
    frame = classic_header(api_key, version, 8, b"c")
    with pytest.raises(UnsupportedVersion) as caught:
        read_request_header(frame)
    assert caught.value.header == RequestHeader(api_key, version, 8, "c", header_version)
    assert str(version) in str(caught.value)


def test_decode_request_rejects_a_header_for_an_undeclared_version() -> None:
    header = RequestHeader(ApiKey.PRODUCE, 12, 1, None, 2)
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(header, b"", 0)
    assert caught.value.header == header


# ---------------------------------------------------------------------------------------------------------------------
# response headers


def test_response_header_v0_for_a_non_flexible_version() -> None:
    frame = encode_response(RequestHeader(ApiKey.HEARTBEAT, 1, 0x01020304, None, 1), {"error_code": 27})
    assert frame_bytes(frame.parts) == struct.pack(">iiih", 10, 0x01020304, 0, 27)
    assert frame.size == 14


def test_api_versions_v3_response_has_header_v0_and_a_flexible_body() -> None:
    header = RequestHeader(ApiKey.API_VERSIONS, 3, 1, "c", 2)
    frame = encode_response(header, {"api_keys": [{"api_key": 0, "min_version": 0, "max_version": 8}]})
    body = (
        b"\x00\x00"  # error_code
        + b"\x02"  # compact array: 1 item
        + struct.pack(">hhh", 0, 0, 8)
        + b"\x00"  # item tag buffer
        + struct.pack(">i", 0)  # throttle_time_ms
        + b"\x00"  # tag buffer: no feature tags set
    )
    assert frame_bytes(frame.parts) == struct.pack(">ii", 4 + len(body), 1) + body  # no header tag byte


@pytest.fixture
def flexible_test_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiSchema]:
    """A made-up API (key 1000) that is flexible from v1, and classic in v0: one schema in both encodings,
    with a tagged field (the declared flexible APIs are in test_security_messages and ApiVersions)."""
    api = ApiSchema(
        1000,
        "Test",
        max_version=1,
        flexible_from=1,
        request=S(F("name", STRING), F("ids", A(INT32))),
        response=S(
            F("error_code", INT16), F("names", A(S(F("name", STRING, nullable="0+")))), F("note", STRING, tag=0)
        ),
    )
    monkeypatch.setitem(_catalog._SCHEMAS, 1000, api)
    monkeypatch.setattr(_catalog, "_REQUEST_CODECS", {})
    monkeypatch.setattr(_catalog, "_RESPONSE_CODECS", {})
    yield api


def test_response_header_v1_for_flexible_versions(flexible_test_api: ApiSchema) -> None:
    value = {"error_code": 3, "names": [{"name": None}, {"name": "é"}], "note": "hi"}
    flexible = frame_bytes(encode_response(RequestHeader(1000, 1, 5, None, 2), value).parts)
    body = b"\x00\x03" + b"\x03" + b"\x00\x00" + b"\x03\xc3\xa9\x00" + b"\x01\x00\x03\x03hi"
    assert flexible == struct.pack(">ii", 5 + len(body), 5) + b"\x00" + body
    assert decode_response(1000, 1, flexible[4:])[1].to_dict() == value

    classic = frame_bytes(encode_response(RequestHeader(1000, 0, 5, None, 1), value).parts)
    body = b"\x00\x03" + b"\x00\x00\x00\x02" + b"\xff\xff" + b"\x00\x02\xc3\xa9"  # tagged field not in v0
    assert classic == struct.pack(">ii", 4 + len(body), 5) + body
    assert decode_response(1000, 0, classic[4:])[1].to_dict() == {**value, "note": ""}


def test_request_header_v2_for_flexible_versions(flexible_test_api: ApiSchema) -> None:
    frame = encode_request(request_header(1000, 1, 6, "c"), {"name": "n", "ids": [7]})
    assert frame[4:] == classic_header(1000, 1, 6, b"c") + b"\x00" + b"\x02n" + b"\x02" + struct.pack(">i", 7) + b"\x00"
    header, offset = read_request_header(frame[4:])
    assert header.header_version == 2
    assert decode_request(header, frame[4:], offset).to_dict() == {"name": "n", "ids": [7]}


def test_unknown_tags_are_skipped_and_known_tags_read(flexible_test_api: ApiSchema) -> None:
    tags = b"\x03" + b"\x01\x01X" + b"\x00\x03\x03ok" + b"\x07\x00"  # tag 1 unknown, tag 0 "ok", tag 7 empty
    frame = struct.pack(">i", 5) + b"\x00" + b"\x00\x00" + b"\x01" + tags
    assert decode_response(1000, 1, frame)[1].note == "ok"


def test_a_tagged_value_that_does_not_fill_its_size_is_malformed(flexible_test_api: ApiSchema) -> None:
    frame = struct.pack(">i", 5) + b"\x00" + b"\x00\x00" + b"\x01" + b"\x01\x00\x04\x03ok!"
    with pytest.raises(MalformedResponse, match="note"):
        decode_response(1000, 1, frame)


# ---------------------------------------------------------------------------------------------------------------------
# the ApiVersions fallback


def test_api_versions_fallback_is_a_v0_response_with_error_35() -> None:
    ranges = advertised_ranges([ApiKey.API_VERSIONS, ApiKey.PRODUCE, ApiKey.FETCH])
    frame = api_versions_fallback(31, ranges)
    data = frame_bytes(frame.parts)
    entries = struct.pack(">hhh", 0, 0, 11) + struct.pack(">hhh", 1, 0, 17) + struct.pack(">hhh", 18, 0, 4)
    body = struct.pack(">hi", 35, 3) + entries
    assert data == struct.pack(">ii", 4 + len(body), 31) + body
    assert frame.size == len(data)

    # kafka-python, asking v3 or v4, reads it (as v0) and learns our ranges
    for asked in (3, 4):
        theirs = ApiVersionsResponse.decode(data[4:], version=asked, header=True)
        assert theirs.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [
            (0, 0, 11),
            (1, 0, 17),
            (18, 0, 4),
        ]
        assert decode_response(ApiKey.API_VERSIONS, asked, data[4:])[1].error_code == 35


# ---------------------------------------------------------------------------------------------------------------------
# malformed frames


@pytest.mark.parametrize("cut", range(len(produce_v3())))
def test_every_truncation_is_malformed_request(cut: int) -> None:
    frame = produce_v3()[:cut]
    with pytest.raises(MalformedRequest) as caught:
        header, offset = read_request_header(frame)
        decode_request(header, frame, offset)
    # once the fixed part of the header is there, the exception carries it
    header = caught.value.header
    assert (header is None) == (cut < 10)
    assert header is None or (header.api_key, header.correlation_id) == (ApiKey.PRODUCE, 77)


def test_truncation_names_the_field_and_offset() -> None:
    frame = produce_v3()[:-5]  # cuts into the records length
    header, offset = read_request_header(frame)
    with pytest.raises(MalformedRequest) as caught:
        decode_request(header, frame, offset)
    message = str(caught.value)
    assert "ProduceRequest v3" in message
    assert "topic_data[0].partition_data[0].records" in message
    assert f"byte offset {len(frame) - 2}" in message
    assert caught.value.header == header


def test_negative_array_length_is_malformed() -> None:
    frame = produce_v3(topic_count=struct.pack(">i", -5))
    header, offset = read_request_header(frame)
    with pytest.raises(MalformedRequest, match=r"topic_data .*array length -5 is invalid"):
        decode_request(header, frame, offset)


def test_null_for_a_non_nullable_array_is_malformed() -> None:
    frame = produce_v3(topic_count=struct.pack(">i", -1))
    header, offset = read_request_header(frame)
    with pytest.raises(MalformedRequest, match="null not allowed"):
        decode_request(header, frame, offset)


def test_array_count_larger_than_the_frame_is_malformed_without_allocating() -> None:
    frame = produce_v3(topic_count=struct.pack(">i", 2**31 - 1))
    header, offset = read_request_header(frame)
    with pytest.raises(MalformedRequest, match="exceeds the"):
        decode_request(header, frame, offset)


def test_string_longer_than_the_frame_is_malformed() -> None:
    frame = produce_v3(name=b"\x10\x00t")
    header, offset = read_request_header(frame)
    with pytest.raises(MalformedRequest, match=r"topic_data\[0\]\.name .*string of 4096 bytes overruns"):
        decode_request(header, frame, offset)


def test_client_id_longer_than_the_frame_is_malformed_with_partial_header() -> None:
    frame = struct.pack(">hhih", ApiKey.METADATA, 1, 3, 50) + b"abc"
    with pytest.raises(MalformedRequest, match="client_id") as caught:
        read_request_header(frame)
    assert caught.value.header == RequestHeader(ApiKey.METADATA, 1, 3, None, 1)


def test_invalid_utf8_is_malformed() -> None:
    frame = produce_v3(name=b"\x00\x01\xff")
    header, offset = read_request_header(frame)
    with pytest.raises(MalformedRequest, match="UTF-8"):
        decode_request(header, frame, offset)


def test_overlong_varint_is_malformed() -> None:
    frame = classic_header(ApiKey.API_VERSIONS, 3, 1, b"c") + b"\x80\x80\x80\x80\x80\x01"
    with pytest.raises(MalformedRequest, match="varint"):
        read_request_header(frame)


def test_tiny_frames_are_malformed_without_a_header() -> None:
    for frame in (b"", b"\x00\x03", b"\x00\x03\x00\x01\x00\x00\x00"):
        with pytest.raises(MalformedRequest) as caught:
            read_request_header(frame)
        assert caught.value.header is None


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_only_raise_protocol_errors(frame: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        header, offset = read_request_header(frame)
        decode_request(header, frame, offset)


CASES = api_versions()


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CASES), st.binary(max_size=96), st.data())
def test_random_bodies_after_a_valid_header_only_raise_protocol_errors(
    case: tuple[ApiSchema, int], tail: bytes, data: st.DataObject
) -> None:
    api, version = case
    # sometimes start from a valid body and corrupt it, sometimes pure noise
    valid = encode_request(
        request_header(api.api_key, version, 1, "c"), Sampler().struct(api.request, version, api.is_flexible(version))
    )
    cut = data.draw(st.integers(0, len(valid) - 4))
    frame = valid[4 : 4 + cut] + tail if data.draw(st.booleans()) else valid[4 : 4 + 10] + tail
    with contextlib.suppress(ProtocolError):
        header, offset = read_request_header(frame)
        decode_request(header, frame, offset)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CASES), st.binary(max_size=96))
def test_random_response_bytes_only_raise_protocol_errors(case: tuple[ApiSchema, int], frame: bytes) -> None:
    api, version = case
    with contextlib.suppress(ProtocolError):
        decode_response(api.api_key, version, frame)


# ---------------------------------------------------------------------------------------------------------------------
# encoding errors


def test_encode_errors_name_the_field_and_value() -> None:
    header = RequestHeader(ApiKey.PRODUCE, 8, 1, None, 1)
    bad = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": "7"}]}]}
    with pytest.raises(EncodeError, match=r"responses\[0\]\.partition_responses\[0\]\.base_offset.*'7'"):
        encode_response(header, bad)
    with pytest.raises(EncodeError, match=r"responses\[0\]: unknown field\(s\) partitions"):
        encode_response(header, {"responses": [{"name": "t", "partitions": []}]})
    with pytest.raises(EncodeError, match=r"responses\[0\]\.name: None for a non-nullable string"):
        encode_response(header, {"responses": [{"name": None}]})
    with pytest.raises(EncodeError, match="int16"):
        encode_response(header, {"responses": [{"partition_responses": [{"error_code": 40000}]}]})


def test_fields_not_in_the_version_are_skipped_and_missing_ones_defaulted() -> None:
    header = RequestHeader(ApiKey.PRODUCE, 0, 1, None, 1)
    frame = encode_response(header, {"responses": [], "throttle_time_ms": 9})  # throttle is v1+
    assert frame_bytes(frame.parts) == struct.pack(">iii", 8, 1, 0)


def test_unknown_api_on_encode() -> None:
    with pytest.raises(UnknownApi):
        encode_response(RequestHeader(77, 0, 1, None, 1), {})
    with pytest.raises(UnknownApi):
        request_header(77, 0, 1, None)
