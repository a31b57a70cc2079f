"""Property tests: for every declared API and version, encode -> decode gives back what went in.

Values are generated from the declarations (nulls wherever a version allows them, unicode strings,
empty and non-empty arrays). Decoding also fills every field absent from the version with its
declared default, and re-encoding a decoded Struct reproduces the frame byte for byte.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from node.protocol import (
    ApiKey,
    ApiSchema,
    ErrorCode,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
    request_header,
)
from tests.node.protocol.helpers import api_version_ids, api_versions, on_wire, project, strategy

CASES = api_versions()
IDS = api_version_ids()
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
@PROPERTY
@given(data=st.data())
def test_request_roundtrip(api: ApiSchema, version: int, data: st.DataObject) -> None:
    flexible = api.is_flexible(version)
    value = data.draw(strategy(api.request, version, flexible), label="request")
    client_id = data.draw(st.none() | st.text(max_size=8), label="client_id")
    frame = encode_request(request_header(api.api_key, version, 41, client_id), value)

    header, offset = read_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api.api_key,
        version,
        41,
        client_id,
    )
    body = decode_request(header, frame[4:], offset)
    assert project(body, api.request, version, flexible) == value
    for f in api.request.fields:
        if not on_wire(f, version, flexible):
            assert getattr(body, f.name) == f.fresh_default(), f.name
    assert encode_request(header, body) == frame


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
@PROPERTY
@given(data=st.data())
def test_response_roundtrip(api: ApiSchema, version: int, data: st.DataObject) -> None:
    flexible = api.is_flexible(version)
    value = data.draw(strategy(api.response, version, flexible), label="response")
    # An ApiVersions error 35 is read back as v0 on purpose (see test_frame); other codes round-trip.
    assume(not (api.api_key == ApiKey.API_VERSIONS and version > 0 and value["error_code"] == 35))
    header = request_header(api.api_key, version, 42, "c")
    frame = encode_response(header, value)
    data_bytes = b"".join(bytes(p) for p in frame.parts)  # type: ignore[arg-type]
    assert len(data_bytes) == frame.size
    assert int.from_bytes(data_bytes[:4], "big", signed=True) == frame.size - 4

    correlation_id, body = decode_response(api.api_key, version, data_bytes[4:])
    assert correlation_id == 42
    assert project(body, api.response, version, flexible) == value
    for f in api.response.fields:
        if not on_wire(f, version, flexible):
            assert getattr(body, f.name) == f.fresh_default(), f.name
    again = encode_response(header, body)
    assert b"".join(bytes(p) for p in again.parts) == data_bytes  # type: ignore[arg-type]


def test_api_versions_error_35_is_read_as_v0_whatever_version_was_asked() -> None:
    v0_frame = encode_response(
        request_header(ApiKey.API_VERSIONS, 0, 9, None),
        {
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
        },
    )
    data = b"".join(bytes(p) for p in v0_frame.parts)  # type: ignore[arg-type]
    for asked in range(5):
        correlation_id, body = decode_response(ApiKey.API_VERSIONS, asked, data[4:])
        assert correlation_id == 9
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [item.to_dict() for item in body.api_keys] == [{"api_key": 18, "min_version": 0, "max_version": 4}]
