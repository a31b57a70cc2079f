"""Cross-checks against independent implementations, for every declared API and version.

- kafka-python 3.0's JSON-driven classes: same field names and wire order; our request bytes equal
  theirs byte for byte (header included); their requests decode with ours; our responses decode with
  theirs and equal theirs byte for byte; their responses decode with ours.
- kafka-python's hand-written ``kafka.protocol.old`` classes and aiokafka's protocol classes
  (positional schemas written from the protocol guide): bodies equal byte for byte both ways.

Values come from ``Sampler``: every field set, none at its default, arrays of two.
"""

from __future__ import annotations

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
)
from node.protocol._schema import ArrayOf, StructDef
from tests.node.protocol.helpers import (
    api_versions,
    fit,
    from_kp,
    iter_sampled,
    kp_classes,
    kp_name,
    old_style_classes,
    positional,
    project,
    to_kp,
    unfit,
    wire_fields,
)

KP = kp_classes()
# kafka-python has no ControlledShutdown (inter-broker only) nor MirrorAppend (strait's own, key 1000):
# test_catalog checks their bytes by hand.
CASES = [(api, v) for api, v in api_versions() if (api.api_key, True) in KP]
IDS = [f"{api.name}-v{v}" for api, v in CASES]
CLIENT_ID = "strait-interop"


def _kp_value(api: ApiSchema, value: dict[str, Any]) -> dict[str, Any]:
    # kafka-python decodes every ApiVersions response that carries an error as v0, so keep it at 0 there.
    if api.api_key == ApiKey.API_VERSIONS and "error_code" in value:
        return {**value, "error_code": 0}
    return value


def _same_layout(ours: StructDef, theirs: Any, version: int, flexible: bool, path: str, api_key: int) -> None:
    untagged = [kp_name(api_key, f.name) for f in wire_fields(ours, version, flexible) if f.tag is None]
    tagged = {f.name: f.tag for f in wire_fields(ours, version, flexible) if f.tag is not None}
    their_untagged = theirs.untagged_fields(version)
    assert untagged == [f.name for f in their_untagged], path
    if flexible:
        assert tagged == {f.name: f.tag for f in theirs.tagged_fields(version)._fields}, path
    their_by_name = (
        {f.name: f for f in theirs.fields.values()}
        if isinstance(theirs.fields, dict)
        else {f.name: f for f in theirs.fields}
    )
    for f in wire_fields(ours, version, flexible):
        their = their_by_name[kp_name(api_key, f.name)]
        assert (version in f.nullable) == their.nullable_for_version_q(version), f"{path}.{f.name} nullability"
        if isinstance(f.type, ArrayOf) and isinstance(f.type.item, StructDef):
            _same_layout(f.type.item, their.array_of, version, flexible, f"{path}.{f.name}", api_key)
        elif isinstance(f.type, StructDef):
            _same_layout(f.type, their, version, flexible, f"{path}.{f.name}", api_key)


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_fields_names_order_and_nullability_match_kafka_python(api: ApiSchema, version: int) -> None:
    flexible = api.is_flexible(version)
    for ours, request in ((api.request, True), (api.response, False)):
        theirs = KP[api.api_key, request]
        assert theirs.flexible_version_q(version) == flexible
        _same_layout(ours, theirs._struct, version, flexible, f"{theirs.__name__}v{version}", api.api_key)


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_requests_match_kafka_python_both_ways(api: ApiSchema, version: int) -> None:
    cls = KP[api.api_key, True]
    flexible = api.is_flexible(version)
    for i, value in enumerate(iter_sampled(api, version, request=True)):
        theirs_obj = to_kp(cls, value, api.api_key, version)
        theirs_obj.with_header(correlation_id=1000 + i, client_id=CLIENT_ID)
        theirs = bytes(theirs_obj.encode(header=True, framed=True))

        ours = encode_request(request_header(api.api_key, version, 1000 + i, CLIENT_ID), value)
        assert ours == theirs

        header, offset = read_request_header(theirs[4:])
        assert header == RequestHeader(api.api_key, version, 1000 + i, CLIENT_ID, 2 if flexible else 1)
        assert project(decode_request(header, theirs[4:], offset), api.request, version, flexible) == value

        back = cls.decode(ours[4:], version=version, header=True)
        assert back.header.correlation_id == 1000 + i
        assert from_kp(back.to_dict(json=False), api.request, version, flexible, api.api_key) == value


@pytest.mark.parametrize(("api", "version"), CASES, ids=IDS)
def test_responses_match_kafka_python_both_ways(api: ApiSchema, version: int) -> None:
    cls = KP[api.api_key, False]
    flexible = api.is_flexible(version)
    for i, sampled in enumerate(iter_sampled(api, version, request=False)):
        value = _kp_value(api, sampled)
        header = request_header(api.api_key, version, 2000 + i, CLIENT_ID)
        frame = encode_response(header, value)
        ours = b"".join(bytes(p) for p in frame.parts)  # type: ignore[arg-type]
        assert len(ours) == frame.size

        back = cls.decode(ours[4:], version=version, header=True)
        assert back.header.correlation_id == 2000 + i
        assert from_kp(back.to_dict(json=False), api.response, version, flexible, api.api_key) == value

        theirs_obj = to_kp(cls, value, api.api_key, version)
        theirs_obj.with_header(correlation_id=2000 + i)
        theirs = bytes(theirs_obj.encode(header=True, framed=True))
        assert ours == theirs

        correlation_id, body = decode_response(api.api_key, version, theirs[4:])
        assert correlation_id == 2000 + i
        assert project(body, api.response, version, flexible) == value


# ---------------------------------------------------------------------------------------------------------------------
# hand-written old-style classes

OLD_LIBS = {
    "kafka.protocol.old": old_style_classes("kafka.protocol.old"),
    "aiokafka": old_style_classes("aiokafka.protocol"),
}
# Where a hand-written class disagrees with the spec (and with kafka-python): kept as strict xfails so a
# fixed library makes the test fail and the entry gets removed.
KNOWN_LIBRARY_BUGS: dict[tuple[str, int, int, bool], str] = {
    ("aiokafka", ApiKey.LIST_OFFSETS, 4, True): "aiokafka declares current_leader_epoch int64; the spec says int32",
    ("aiokafka", ApiKey.LIST_OFFSETS, 5, True): "aiokafka declares current_leader_epoch int64; the spec says int32",
    ("kafka.protocol.old", ApiKey.DESCRIBE_LOG_DIRS, 0, True): (
        "kafka-python's old class declares partitions one int32; the spec says an array of int32"
    ),
}


def _marks(lib: str, api: ApiSchema, version: int, request: bool) -> list[pytest.MarkDecorator]:
    reason = KNOWN_LIBRARY_BUGS.get((lib, api.api_key, version, request))
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


OLD_CASES = [
    pytest.param(
        api,
        version,
        request,
        lib,
        id=f"{lib}-{api.name}{'Request' if request else 'Response'}-v{version}",
        marks=_marks(lib, api, version, request),
    )
    for api, version in CASES
    if not api.is_flexible(version)
    for request in (True, False)
    for lib, table in OLD_LIBS.items()
    if (api.api_key, version, request) in table
]


def test_old_style_libraries_cover_most_versions() -> None:
    # A guard that the discovery above found the classes (a rename would silently skip the checks).
    assert len(OLD_CASES) > 300


@pytest.mark.parametrize(("api", "version", "request_side", "lib"), OLD_CASES)
def test_bodies_match_hand_written_classes(api: ApiSchema, version: int, request_side: bool, lib: str) -> None:
    cls = OLD_LIBS[lib][api.api_key, version, request_side]
    sdef = api.request if request_side else api.response
    for i, sampled in enumerate(iter_sampled(api, version, request=request_side)):
        value = _kp_value(api, sampled)  # these classes too read an ApiVersions error response as v0
        expected = fit(positional(value, sdef, version), cls.SCHEMA)
        if request_side:
            frame = encode_request(request_header(api.api_key, version, i, CLIENT_ID), value)
            _, offset = read_request_header(frame[4:])
            body = frame[4 + offset :]
        else:
            encoded = encode_response(RequestHeader(api.api_key, version, i, None, 1), value)
            body = b"".join(bytes(p) for p in encoded.parts)[8:]  # type: ignore[arg-type]
        assert body == cls(*expected).encode()
        assert fit(unfit(cls.decode(body), cls.SCHEMA), cls.SCHEMA) == expected
