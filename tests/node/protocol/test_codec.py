"""The compiled codec over every wire type, classic and compact, including types no declared API uses
yet (uuid, float64, unsigned ints) and tagged fields of every kind."""

from __future__ import annotations

import re
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.protocol import ApiKey, ApiSchema, schema
from node.protocol._codec import Codec, reference_reader, reference_writer
from node.protocol._errors import DecodeFailure, EncodeFailure
from node.protocol._generate import compile_struct
from node.protocol._schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    A,
    F,
    S,
)
from node.protocol._types import Out, uvarint
from tests.node.protocol.helpers import api_versions, project, strategy

EVERYTHING = S(
    F("i8", INT8),
    F("i16", INT16),
    F("i32", INT32, default=-1),
    F("i64", INT64),
    F("u16", UINT16),
    F("u32", UINT32),
    F("f64", FLOAT64),
    F("flag", BOOL, default=True),
    F("id", UUID),
    F("name", STRING),
    F("maybe_name", STRING, nullable="0+"),
    F("blob", BYTES),
    F("maybe_blob", BYTES, nullable="0+"),
    F("records", RECORDS, nullable="0+"),
    F("ints", A(INT32)),
    F("maybe_longs", A(INT64), nullable="0+"),
    F("names", A(STRING)),
    F("items", A(S(F("key", STRING), F("values", A(INT16)), F("new_in_1", INT32, "1+", default=7)))),
    F("maybe_items", A(S(F("x", INT8))), nullable="1+"),
    F("only_v0", INT32, "0", default=5),
    F("tag_int", INT32, tag=1, default=-1),
    F("tag_items", A(S(F("a", STRING), F("b", INT64))), tag=0),
    F("tag_str", STRING, nullable="0+", default=None, tag=40),
)


def roundtrip(value: dict[str, Any], version: int, flexible: bool) -> tuple[Any, bytes]:
    codec = compile_struct(EVERYTHING, version, flexible)
    out = Out()
    codec.write(out, value)
    data = bytes(out.buf)
    assert not out.parts
    decoded, end = codec.read(memoryview(data), 0)
    assert end == len(data)
    return decoded, data


@pytest.mark.parametrize(("version", "flexible"), [(0, False), (1, False), (0, True), (1, True)])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_type_roundtrips(version: int, flexible: bool, data: st.DataObject) -> None:
    value = data.draw(strategy(EVERYTHING, version, flexible))
    decoded, raw = roundtrip(value, version, flexible)
    assert project(decoded, EVERYTHING, version, flexible) == value
    if not flexible:  # tagged fields only exist in flexible versions
        for f in EVERYTHING.fields:
            if f.tag is not None:
                assert getattr(decoded, f.name) == f.fresh_default()
    codec = compile_struct(EVERYTHING, version, flexible)
    again = Out()
    codec.write(again, decoded)
    assert bytes(again.buf) == raw


def test_absent_fields_get_defaults_and_fresh_lists() -> None:
    codec = compile_struct(EVERYTHING, 1, False)
    out = Out()
    codec.write(out, {})
    first, _ = codec.read(memoryview(bytes(out.buf)), 0)
    second, _ = codec.read(memoryview(bytes(out.buf)), 0)
    assert first.only_v0 == 5
    assert first.i32 == -1
    assert first.flag is True
    assert first.id == uuid.UUID(int=0)
    assert first.tag_str is None
    assert first.tag_items == []
    assert first.tag_items is not second.tag_items


def test_compact_lengths_are_unsigned_varints_plus_one() -> None:
    codec = compile_struct(S(F("s", STRING), F("n", STRING, nullable="0+"), F("xs", A(INT8))), 0, True)
    out = Out()
    codec.write(out, {"s": "a" * 200, "n": None, "xs": [1, 2]})
    assert bytes(out.buf) == uvarint(201) + b"a" * 200 + b"\x00" + b"\x03\x01\x02" + b"\x00"
    assert uvarint(201) == b"\xc9\x01"


def test_tagged_fields_are_written_in_tag_order_only_when_not_default() -> None:
    codec = compile_struct(EVERYTHING, 0, True)
    out = Out()
    codec.write(out, {"tag_str": "z", "tag_int": 300, "tag_items": []})
    tail = bytes(out.buf)[-11:]
    # 2 tags: tag 1 (int32 300), tag 40 (compact "z"); tag_items is at its default ([]) so absent
    assert tail == b"\x02" + b"\x01\x04" + struct.pack(">i", 300) + b"\x28\x02\x02z"


def test_unknown_tags_in_nested_structs_are_skipped() -> None:
    codec = compile_struct(S(F("items", A(S(F("k", INT8)))), F("t", INT8, tag=3)), 0, True)
    raw = b"\x02" + b"\x05" + b"\x01\x09\x02ab" + b"\x01" + b"\x03\x01\x07"
    decoded, end = codec.read(memoryview(raw), 0)
    assert end == len(raw)
    assert decoded.to_dict() == {"items": [{"k": 5}], "t": 7}


def test_decode_failures_name_the_path() -> None:
    codec = compile_struct(EVERYTHING, 0, False)
    out = Out()
    codec.write(out, {"items": [{"key": "k", "values": [1]}, {"key": "q", "values": [2, 3]}]})
    raw = bytes(out.buf)
    with pytest.raises(DecodeFailure) as caught:
        codec.read(memoryview(raw[: raw.index(b"q") + 3]), 0)
    assert "items[1].values" in caught.value.describe()


def test_encode_failures_name_the_value() -> None:
    codec = compile_struct(EVERYTHING, 0, False)
    for value, pattern in [
        ({"u16": -1}, r"u16: -1 is not a valid uint16"),
        ({"id": "not-a-uuid"}, r"id: expected uuid.UUID, got str"),
        ({"ints": [1, "x"]}, r"ints\[1\]: 'x' is not a valid int32"),
        ({"names": "abc"}, r"names: expected a list, got str"),
        ({"blob": None}, r"blob: None for non-nullable bytes"),
        ({"items": [3]}, r"items\[0\]: expected a Struct or a mapping, got int"),
        ({"name": "x" * 40000}, r"name: string of 40000 bytes exceeds"),
    ]:
        with pytest.raises(EncodeFailure) as caught:
            codec.write(Out(), value)
        assert re.search(pattern, caught.value.describe()), caught.value.describe()


# ---------------------------------------------------------------------------------------------------------------------
# the generated fast path against the reference codec

CASES = api_versions()


def _outcome(read: Any, raw: bytes) -> Any:
    try:
        value, end = read(memoryview(raw), 0)
    except DecodeFailure as exc:
        return ("failure", exc.describe())
    return ("ok", value, end)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CASES), st.booleans(), st.data())
def test_generated_and_reference_codecs_agree(case: tuple[ApiSchema, int], request: bool, data: st.DataObject) -> None:
    api, version = case
    sdef = api.request if request else api.response
    flexible = api.is_flexible(version)
    fast = compile_struct(sdef, version, flexible)
    reference = Codec(reference_reader(sdef, version, flexible), reference_writer(sdef, version, flexible))

    value = data.draw(strategy(sdef, version, flexible))
    fast_out, reference_out = Out(), Out()
    fast.write(fast_out, value)
    reference.write(reference_out, value)
    raw = bytes(reference_out.buf)
    assert bytes(fast_out.buf) == raw

    # the same input, intact, cut short or corrupted: both readers give the same value or the same error
    cut = data.draw(st.integers(0, len(raw)))
    noise = data.draw(st.binary(max_size=8))
    for candidate in (raw, raw[:cut], raw[:cut] + noise + raw[cut + len(noise) :]):
        assert _outcome(fast.read, candidate) == _outcome(reference.read, candidate)


def test_generated_writer_reports_errors_like_the_reference() -> None:
    api = schema(ApiKey.FETCH)
    bad = {"responses": [{"topic": "t", "partitions": [{"partition_index": 1}, {"partition_index": "2"}]}]}
    messages = []
    for writer in (compile_struct(api.response, 11, False).write, reference_writer(api.response, 11, False)):
        with pytest.raises(EncodeFailure) as caught:
            writer(Out(), bad)
        messages.append(caught.value.describe())
    assert messages[0] == messages[1]
    assert "responses[0].partitions[1].partition_index: '2' is not a valid int32" in messages[0]
