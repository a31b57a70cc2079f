"""The security APIs' schemas: SASL, ACLs, SCRAM credentials (issue 18).

Frames are written here by hand from Kafka's message specs and decoded to the expected fields (and
our encoder must produce the same bytes); every declared version round-trips with every field set
and with every nullable field null. The field-by-field comparison with kafka-python and aiokafka is
in ``test_interop``, which covers these APIs like the others.

Wire facts used below: classic strings are int16 length + UTF-8 (-1 = null), classic bytes and
arrays int32 length (-1 = null). Flexible versions (SaslAuthenticate v2, the SCRAM APIs' only v0)
write lengths as an unsigned varint of length + 1 (0 = null), end every struct with a tagged-field
buffer (0x00 = none), and use request header v2 (an int16-length client id, then a tag buffer) and
response header v1 (correlation id, then a tag buffer).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from node.protocol import (
    ApiKey,
    ApiSchema,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
    request_header,
    schema,
)
from node.protocol._messages_security import SECURITY_APIS
from node.protocol._schema import ArrayOf, StructDef
from tests.node.protocol.helpers import Sampler, project, wire_fields

SECURITY_KEYS = {
    ApiKey.SASL_HANDSHAKE: ("SaslHandshake", 1, None),
    ApiKey.DESCRIBE_ACLS: ("DescribeAcls", 3, 2),
    ApiKey.CREATE_ACLS: ("CreateAcls", 3, 2),
    ApiKey.DELETE_ACLS: ("DeleteAcls", 3, 2),
    ApiKey.SASL_AUTHENTICATE: ("SaslAuthenticate", 2, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ("DescribeUserScramCredentials", 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ("AlterUserScramCredentials", 0, 0),
}
CASES = [(api, v) for api in SECURITY_APIS for v in range(api.min_version, api.max_version + 1)]
IDS = [f"{api.name}-v{v}" for api, v in CASES]


def s16(text: str | None) -> bytes:
    """A classic string: int16 length, UTF-8 bytes; -1 for null."""
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b32(data: bytes) -> bytes:
    """Classic bytes: int32 length, then the bytes."""
    return struct.pack(">i", len(data)) + data


def a32(count: int) -> bytes:
    """A classic array's count."""
    return struct.pack(">i", count)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact(data: bytes | str | None) -> bytes:
    """A compact string or bytes: unsigned varint length + 1, then the bytes; 0 for null."""
    if data is None:
        return b"\x00"
    raw = data.encode() if isinstance(data, str) else data
    return uvarint(len(raw) + 1) + raw


NO_TAGS = b"\x00"


def request_frame(
    api_key: int, version: int, correlation_id: int, client_id: bytes, body: bytes, flexible: bool
) -> bytes:
    """A request frame without its size prefix: header v1 (or v2 with an empty tag buffer), then ``body``."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return header + (NO_TAGS if flexible else b"") + body


def decode_hand_request(frame: bytes) -> Any:
    header, offset = read_request_header(frame)
    return decode_request(header, frame, offset)


def assert_encodes_to(frame: bytes, body: dict[str, Any]) -> None:
    """Our encoder writes exactly ``frame`` (whose header this reads back) for ``body``."""
    header, _ = read_request_header(frame)
    assert encode_request(header, body) == struct.pack(">i", len(frame)) + frame


def response_bytes(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """Our encoded response frame, without its size prefix."""
    encoded = encode_response(request_header(api_key, version, correlation_id, "c"), body)
    data = b"".join(bytes(p) for p in encoded.parts)  # type: ignore[arg-type]
    return data[4:]


# ---------------------------------------------------------------------------------------------------------------------
# the catalogue


def test_keys_names_versions_and_headers() -> None:
    for key, (name, max_version, flexible_from) in SECURITY_KEYS.items():
        api = schema(key)
        assert (api.name, api.min_version, api.max_version, api.flexible_from) == (name, 0, max_version, flexible_from)
    assert {api.api_key for api in SECURITY_APIS} == set(SECURITY_KEYS)
    sasl_auth = schema(ApiKey.SASL_AUTHENTICATE)
    assert [sasl_auth.request_header_version(v) for v in (0, 1, 2)] == [1, 1, 2]
    assert [sasl_auth.response_header_version(v) for v in (0, 1, 2)] == [0, 0, 1]
    for key in (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS):
        assert (schema(key).request_header_version(0), schema(key).response_header_version(0)) == (2, 1)
    for key in (ApiKey.SASL_HANDSHAKE, ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS):
        assert (schema(key).request_header_version(1), schema(key).response_header_version(1)) == (1, 0)


# ---------------------------------------------------------------------------------------------------------------------
# round trips: every version, every field set, then every nullable field null


def with_nulls(value: dict[str, Any], sdef: StructDef, version: int, flexible: bool) -> dict[str, Any]:
    """``value`` with every field nullable at ``version`` set to None (at every depth)."""
    out = dict(value)
    for f in wire_fields(sdef, version, flexible):
        if version in f.nullable:
            out[f.name] = None
        elif isinstance(f.type, ArrayOf) and isinstance(f.type.item, StructDef):
            out[f.name] = [with_nulls(item, f.type.item, version, flexible) for item in value[f.name]]
    return out


def sampled(api: ApiSchema, version: int, request: bool) -> list[dict[str, Any]]:
    sdef = api.request if request else api.response
    flexible = api.is_flexible(version)
    value = Sampler().struct(sdef, version, flexible)
    return [value, with_nulls(value, sdef, version, flexible)]


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_requests_roundtrip_with_and_without_nulls(api: ApiSchema, version: int) -> None:
    flexible = api.is_flexible(version)
    for value in sampled(api, version, request=True):
        frame = encode_request(request_header(api.api_key, version, 7, "cli"), value)
        header, offset = read_request_header(frame[4:])
        assert header == RequestHeader(api.api_key, version, 7, "cli", 2 if flexible else 1)
        body = decode_request(header, frame[4:], offset)
        assert project(body, api.request, version, flexible) == value
        assert encode_request(header, body) == frame


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_responses_roundtrip_with_and_without_nulls(api: ApiSchema, version: int) -> None:
    flexible = api.is_flexible(version)
    for value in sampled(api, version, request=False):
        data = response_bytes(api.api_key, version, 8, value)
        correlation_id, body = decode_response(api.api_key, version, data)
        assert correlation_id == 8
        assert project(body, api.response, version, flexible) == value
        assert response_bytes(api.api_key, version, 8, body.to_dict()) == data


def test_the_nullable_fields_are_the_specs() -> None:
    # What with_nulls above sets to None: Kafka's nullableVersions, no more, no less.
    def nullable(sdef: StructDef, version: int, prefix: str = "") -> set[str]:
        found = set()
        for f in sdef.fields:
            if version in f.nullable:
                found.add(prefix + f.name)
            if isinstance(f.type, ArrayOf) and isinstance(f.type.item, StructDef):
                found |= nullable(f.type.item, version, f"{prefix}{f.name}.")
        return found

    expected = {
        ApiKey.SASL_HANDSHAKE: (set(), set()),
        ApiKey.SASL_AUTHENTICATE: (set(), {"error_message"}),
        ApiKey.DESCRIBE_ACLS: ({"resource_name_filter", "principal_filter", "host_filter"}, {"error_message"}),
        ApiKey.CREATE_ACLS: (set(), {"results.error_message"}),
        ApiKey.DELETE_ACLS: (
            {"filters.resource_name_filter", "filters.principal_filter", "filters.host_filter"},
            {"filter_results.error_message", "filter_results.matching_acls.error_message"},
        ),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ({"users"}, {"error_message", "results.error_message"}),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (set(), {"results.error_message"}),
    }
    for api, version in CASES:
        assert (nullable(api.request, version), nullable(api.response, version)) == expected[api.api_key], api.name


# ---------------------------------------------------------------------------------------------------------------------
# SaslHandshake (17)


def test_sasl_handshake_v1_request_for_scram_sha_256() -> None:
    frame = request_frame(17, 1, 3, b"rdkafka", s16("SCRAM-SHA-256"), flexible=False)
    assert frame == b"\x00\x11\x00\x01\x00\x00\x00\x03\x00\x07rdkafka\x00\x0dSCRAM-SHA-256"
    assert decode_hand_request(frame).to_dict() == {"mechanism": "SCRAM-SHA-256"}
    assert_encodes_to(frame, {"mechanism": "SCRAM-SHA-256"})


def test_sasl_handshake_v0_request_is_the_same_body() -> None:
    frame = request_frame(17, 0, 1, b"c", s16("PLAIN"), flexible=False)
    assert decode_hand_request(frame).mechanism == "PLAIN"
    assert_encodes_to(frame, {"mechanism": "PLAIN"})


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_handshake_response_lists_the_enabled_mechanisms(version: int) -> None:
    # error 33 UNSUPPORTED_SASL_MECHANISM, with the mechanisms the listener does enable
    data = struct.pack(">ih", 3, 33) + a32(2) + s16("SCRAM-SHA-256") + s16("SCRAM-SHA-512")
    correlation_id, body = decode_response(17, version, data)
    assert correlation_id == 3
    assert body.to_dict() == {"error_code": 33, "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}
    assert response_bytes(17, version, 3, body.to_dict()) == data


# ---------------------------------------------------------------------------------------------------------------------
# SaslAuthenticate (36)

PLAIN_TOKEN = b"\x00alice\x00alice-secret"  # RFC 4616: authzid NUL authcid NUL passwd


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_authenticate_classic_request(version: int) -> None:
    frame = request_frame(36, version, 4, b"c", b32(PLAIN_TOKEN), flexible=False)
    assert decode_hand_request(frame).to_dict() == {"auth_bytes": PLAIN_TOKEN}
    assert_encodes_to(frame, {"auth_bytes": PLAIN_TOKEN})


def test_sasl_authenticate_v0_response_with_an_error_message() -> None:
    data = (
        struct.pack(">ih", 4, 58) + s16("Authentication failed: bad password") + b32(b"")
    )  # 58 SASL_AUTHENTICATION_FAILED
    _, body = decode_response(36, 0, data)
    assert body.to_dict() == {
        "error_code": 58,
        "error_message": "Authentication failed: bad password",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,  # not in v0: its default
    }
    assert response_bytes(36, 0, 4, body.to_dict()) == data


def test_sasl_authenticate_v1_response_with_null_error_message_and_session_lifetime() -> None:
    data = struct.pack(">ih", 4, 0) + s16(None) + b32(b"v=abc") + struct.pack(">q", 3_600_000)
    _, body = decode_response(36, 1, data)
    assert body.to_dict() == {
        "error_code": 0,
        "error_message": None,
        "auth_bytes": b"v=abc",
        "session_lifetime_ms": 3_600_000,
    }
    # error_message left out encodes as null
    assert response_bytes(36, 1, 4, {"auth_bytes": b"v=abc", "session_lifetime_ms": 3_600_000}) == data


def test_sasl_authenticate_v2_is_flexible() -> None:
    frame = request_frame(36, 2, 5, b"c", compact(PLAIN_TOKEN) + NO_TAGS, flexible=True)
    header, offset = read_request_header(frame)
    assert header.header_version == 2
    assert decode_request(header, frame, offset).to_dict() == {"auth_bytes": PLAIN_TOKEN}
    assert_encodes_to(frame, {"auth_bytes": PLAIN_TOKEN})

    # response header v1 (correlation id, tag buffer), then error_code, compact null message,
    # compact bytes, session_lifetime_ms, tag buffer
    data = (
        struct.pack(">i", 5)
        + NO_TAGS
        + struct.pack(">h", 0)
        + compact(None)
        + compact(b"")
        + struct.pack(">q", 0)
        + NO_TAGS
    )
    _, body = decode_response(36, 2, data)
    assert body.to_dict() == {"error_code": 0, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
    assert response_bytes(36, 2, 5, body.to_dict()) == data


# ---------------------------------------------------------------------------------------------------------------------
# ACLs (29, 30, 31). Resource types: 1 ANY, 2 TOPIC, 3 GROUP; pattern types: 1 ANY, 3 LITERAL,
# 4 PREFIXED; operations: 1 ANY, 3 READ, 4 WRITE; permission types: 1 ANY, 3 ALLOW.


def test_describe_acls_v0_request_has_no_pattern_type_and_reads_as_literal() -> None:
    body = struct.pack(">b", 2) + s16("orders") + s16("User:alice") + s16(None) + struct.pack(">bb", 3, 3)
    frame = request_frame(29, 0, 6, b"c", body, flexible=False)
    decoded = decode_hand_request(frame)
    assert decoded.to_dict() == {
        "resource_type_filter": 2,
        "resource_name_filter": "orders",
        "pattern_type_filter": 3,
        "principal_filter": "User:alice",
        "host_filter": None,
        "operation": 3,
        "permission_type": 3,
    }
    assert_encodes_to(frame, decoded.to_dict())


def test_describe_acls_v1_request_with_a_pattern_type_filter_and_null_filters() -> None:
    body = struct.pack(">b", 1) + s16(None) + struct.pack(">b", 4) + s16(None) + s16(None) + struct.pack(">bb", 1, 1)
    frame = request_frame(29, 1, 6, b"c", body, flexible=False)
    decoded = decode_hand_request(frame)
    assert decoded.to_dict() == {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 4,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    assert_encodes_to(frame, decoded.to_dict())


@pytest.mark.parametrize("version", [0, 1])
def test_describe_acls_response(version: int) -> None:
    data = (
        struct.pack(">iih", 6, 0, 0)  # correlation id, throttle_time_ms, error_code
        + s16(None)
        + a32(1)
        + struct.pack(">b", 2)
        + s16("orders")
        + (struct.pack(">b", 4) if version >= 1 else b"")  # pattern_type: v1+
        + a32(1)
        + s16("User:alice")
        + s16("*")
        + struct.pack(">bb", 3, 3)
    )
    _, body = decode_response(29, version, data)
    (resource,) = body.resources
    assert (body.error_code, body.error_message) == (0, None)
    assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (2, "orders", 4 if version else 3)
    assert [acl.to_dict() for acl in resource.acls] == [
        {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    ]
    assert response_bytes(29, version, 6, body.to_dict()) == data


@pytest.mark.parametrize("version", [0, 1])
def test_create_acls_request(version: int) -> None:
    creation = (
        struct.pack(">b", 2)
        + s16("orders-")
        + (struct.pack(">b", 4) if version >= 1 else b"")  # resource_pattern_type: v1+
        + s16("User:bob")
        + s16("*")
        + struct.pack(">bb", 4, 3)
    )
    frame = request_frame(30, version, 7, b"c", a32(1) + creation, flexible=False)
    decoded = decode_hand_request(frame)
    assert [c.to_dict() for c in decoded.creations] == [
        {
            "resource_type": 2,
            "resource_name": "orders-",
            "resource_pattern_type": 4 if version else 3,
            "principal": "User:bob",
            "host": "*",
            "operation": 4,
            "permission_type": 3,
        }
    ]
    assert_encodes_to(frame, decoded.to_dict())


@pytest.mark.parametrize("version", [0, 1])
def test_create_acls_response_one_result_per_creation(version: int) -> None:
    data = (
        struct.pack(">ii", 7, 0) + a32(2) + struct.pack(">h", 0) + s16(None) + struct.pack(">h", 42) + s16("bad host")
    )
    _, body = decode_response(30, version, data)
    assert [r.to_dict() for r in body.results] == [
        {"error_code": 0, "error_message": None},
        {"error_code": 42, "error_message": "bad host"},
    ]
    assert (
        response_bytes(
            30, version, 7, {"results": [{"error_code": 0}, {"error_code": 42, "error_message": "bad host"}]}
        )
        == data
    )


@pytest.mark.parametrize("version", [0, 1])
def test_delete_acls_request(version: int) -> None:
    acl_filter = (
        struct.pack(">b", 1)
        + s16(None)
        + (struct.pack(">b", 1) if version >= 1 else b"")  # pattern_type_filter: v1+
        + s16("User:bob")
        + s16(None)
        + struct.pack(">bb", 1, 1)
    )
    frame = request_frame(31, version, 8, b"c", a32(1) + acl_filter, flexible=False)
    decoded = decode_hand_request(frame)
    assert [f.to_dict() for f in decoded.filters] == [
        {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1 if version else 3,
            "principal_filter": "User:bob",
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        }
    ]
    assert_encodes_to(frame, decoded.to_dict())


@pytest.mark.parametrize("version", [0, 1])
def test_delete_acls_response(version: int) -> None:
    matching = (
        struct.pack(">h", 0)
        + s16(None)
        + struct.pack(">b", 2)
        + s16("orders")
        + (struct.pack(">b", 3) if version >= 1 else b"")  # pattern_type: v1+
        + s16("User:bob")
        + s16("*")
        + struct.pack(">bb", 4, 3)
    )
    data = struct.pack(">ii", 8, 0) + a32(1) + struct.pack(">h", 0) + s16(None) + a32(1) + matching
    _, body = decode_response(31, version, data)
    (result,) = body.filter_results
    assert (result.error_code, result.error_message) == (0, None)
    assert [m.to_dict() for m in result.matching_acls] == [
        {
            "error_code": 0,
            "error_message": None,
            "resource_type": 2,
            "resource_name": "orders",
            "pattern_type": 3,
            "principal": "User:bob",
            "host": "*",
            "operation": 4,
            "permission_type": 3,
        }
    ]
    assert response_bytes(31, version, 8, body.to_dict()) == data


# ---------------------------------------------------------------------------------------------------------------------
# SCRAM credentials (50, 51): flexible v0 only. Mechanisms: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.


def test_describe_user_scram_credentials_null_users_means_all_users() -> None:
    frame = request_frame(50, 0, 9, b"c", compact(None) + NO_TAGS, flexible=True)
    header, offset = read_request_header(frame)
    assert header.header_version == 2
    assert decode_request(header, frame, offset).users is None
    assert_encodes_to(frame, {"users": None})
    # an empty array (also "all users" by the spec) stays distinct from null on the wire
    empty = request_frame(50, 0, 9, b"c", b"\x01" + NO_TAGS, flexible=True)
    assert decode_hand_request(empty).users == []
    assert_encodes_to(empty, {"users": []})


def test_describe_user_scram_credentials_request_for_named_users() -> None:
    users = b"\x03" + compact("alice") + NO_TAGS + compact("bob") + NO_TAGS  # compact array: 2 items
    frame = request_frame(50, 0, 9, b"c", users + NO_TAGS, flexible=True)
    assert decode_hand_request(frame).to_dict() == {"users": [{"name": "alice"}, {"name": "bob"}]}
    assert_encodes_to(frame, {"users": [{"name": "alice"}, {"name": "bob"}]})


def test_describe_user_scram_credentials_response() -> None:
    data = (
        struct.pack(">i", 9)
        + NO_TAGS  # response header v1
        + struct.pack(">ih", 0, 0)  # throttle_time_ms, error_code
        + compact(None)  # error_message
        + b"\x03"  # results: 2
        + compact("alice")
        + struct.pack(">h", 0)
        + compact(None)
        + b"\x03"  # credential_infos: 2
        + struct.pack(">bi", 1, 8192)
        + NO_TAGS
        + struct.pack(">bi", 2, 4096)
        + NO_TAGS
        + NO_TAGS  # end of alice
        + compact("nobody")
        + struct.pack(">h", 91)  # RESOURCE_NOT_FOUND
        + compact("Attempt to describe a user credential that does not exist")
        + b"\x01"  # credential_infos: empty
        + NO_TAGS
        + NO_TAGS  # end of the response
    )
    correlation_id, body = decode_response(50, 0, data)
    assert correlation_id == 9
    assert body.to_dict() == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "results": [
            {
                "user": "alice",
                "error_code": 0,
                "error_message": None,
                "credential_infos": [{"mechanism": 1, "iterations": 8192}, {"mechanism": 2, "iterations": 4096}],
            },
            {
                "user": "nobody",
                "error_code": 91,
                "error_message": "Attempt to describe a user credential that does not exist",
                "credential_infos": [],
            },
        ],
    }
    assert response_bytes(50, 0, 9, body.to_dict()) == data


SALT = bytes(range(24))
SALTED_PASSWORD = bytes(range(100, 132))  # 32 bytes: HMAC-SHA-256 output


def test_alter_user_scram_credentials_request_with_one_upsertion() -> None:
    upsertion = compact("alice") + struct.pack(">bi", 1, 4096) + compact(SALT) + compact(SALTED_PASSWORD) + NO_TAGS
    body = b"\x01" + b"\x02" + upsertion + NO_TAGS  # deletions: empty; upsertions: 1
    frame = request_frame(51, 0, 10, b"adminclient-1", body, flexible=True)
    assert frame[-len(body) :].startswith(b"\x01\x02\x06alice\x01\x00\x00\x10\x00\x19")  # lengths + 1: 6, 25
    header, offset = read_request_header(frame)
    assert header == RequestHeader(51, 0, 10, "adminclient-1", 2)
    expected = {
        "deletions": [],
        "upsertions": [
            {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": SALT, "salted_password": SALTED_PASSWORD}
        ],
    }
    assert decode_request(header, frame, offset).to_dict() == expected
    assert_encodes_to(frame, expected)


def test_alter_user_scram_credentials_request_with_a_deletion_long_bytes_and_unknown_tags() -> None:
    long_salt = b"s" * 200  # compact length 201: a two-byte varint
    deletion = compact("bob") + struct.pack(">b", 2) + NO_TAGS
    upsertion = (
        compact("carol")
        + struct.pack(">bi", 2, 8192)
        + compact(long_salt)
        + compact(SALTED_PASSWORD)
        + b"\x01\x05\x02hi"  # a tag buffer of one unknown field (tag 5, 2 bytes): skipped
    )
    frame = request_frame(51, 0, 11, b"c", b"\x02" + deletion + b"\x02" + upsertion + NO_TAGS, flexible=True)
    assert compact(long_salt)[:2] == b"\xc9\x01"
    decoded = decode_hand_request(frame)
    assert [d.to_dict() for d in decoded.deletions] == [{"name": "bob", "mechanism": 2}]
    (carol,) = decoded.upsertions
    assert (carol.name, carol.mechanism, carol.iterations, carol.salt, carol.salted_password) == (
        "carol",
        2,
        8192,
        long_salt,
        SALTED_PASSWORD,
    )


def test_alter_user_scram_credentials_response() -> None:
    data = (
        struct.pack(">i", 10)
        + NO_TAGS
        + struct.pack(">i", 0)
        + b"\x03"
        + compact("alice")
        + struct.pack(">h", 0)
        + compact(None)
        + NO_TAGS
        + compact("bob")
        + struct.pack(">h", 91)
        + compact("no credential")
        + NO_TAGS
        + NO_TAGS
    )
    _, body = decode_response(51, 0, data)
    assert [r.to_dict() for r in body.results] == [
        {"user": "alice", "error_code": 0, "error_message": None},
        {"user": "bob", "error_code": 91, "error_message": "no credential"},
    ]
    assert response_bytes(51, 0, 10, body.to_dict()) == data
