"""Fetch responses whose records are file regions: the encoder keeps each Region as its own frame part,
in order, never reading it, and the sizes add up; written out (regions replaced by their file bytes)
the frame is an ordinary Fetch response."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from node.protocol import (
    ApiKey,
    EncodeError,
    Region,
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
    request_header,
)
from node.protocol._types import BIG_PART
from storage import FileSlice


@dataclass(frozen=True)
class FakeRegion:
    fd: int
    position: int
    length: int


def materialise(parts: list[Any], files: dict[int, bytes]) -> bytes:
    """What sendfile would put on the wire: each region's bytes from its 'file'."""
    out = bytearray()
    for part in parts:
        if isinstance(part, bytes):
            out += part
        else:
            out += files[part.fd][part.position : part.position + part.length]
    return bytes(out)


def fetch_response(*record_values: Any) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": i, "error_code": 0, "high_watermark": 100 + i, "records": records}
                    for i, records in enumerate(record_values)
                ],
            }
        ],
    }


def test_regions_stay_separate_parts_in_order_and_sizes_add_up() -> None:
    files = {7: bytes(range(256)) * 4, 9: b"\xee" * 50}
    first, second, third = FakeRegion(7, 10, 100), FakeRegion(9, 0, 50), FakeRegion(7, 500, 3)
    value = fetch_response([b"head", first, b"mid", second], None, third, b"inline")
    frame = encode_response(RequestHeader(ApiKey.FETCH, 11, 5, "c", 1), value)

    regions = [p for p in frame.parts if not isinstance(p, bytes)]
    assert regions == [first, second, third]
    assert all(a is b for a, b in zip(regions, [first, second, third], strict=True))
    assert isinstance(frame.parts[0], bytes)
    assert int.from_bytes(frame.parts[0][:4], "big") == frame.size - 4
    assert frame.size == sum(len(p) if isinstance(p, bytes) else p.length for p in frame.parts)
    # a bytes part sits before, between and after regions, never two bytes parts in a row
    kinds = [isinstance(p, bytes) for p in frame.parts]
    assert kinds == [True, False, True, False, True, False, True]

    wire = materialise(frame.parts, files)
    assert len(wire) == frame.size
    _, body = decode_response(ApiKey.FETCH, 11, wire[4:])
    partitions = body.responses[0].partitions
    assert bytes(partitions[0].records) == b"head" + files[7][10:110] + b"mid" + files[9]
    assert partitions[1].records is None
    assert bytes(partitions[2].records) == files[7][500:503]
    assert bytes(partitions[3].records) == b"inline"
    assert [p.high_watermark for p in partitions] == [100, 101, 102, 103]


def test_empty_region_adds_no_part() -> None:
    frame = encode_response(RequestHeader(ApiKey.FETCH, 4, 1, None, 1), fetch_response(FakeRegion(3, 0, 0)))
    assert len(frame.parts) == 1
    assert frame.parts[0][-4:] == b"\x00\x00\x00\x00"  # type: ignore[index]  # records length 0


def test_large_bytes_records_are_not_copied() -> None:
    big = b"x" * BIG_PART
    frame = encode_response(RequestHeader(ApiKey.FETCH, 4, 1, None, 1), fetch_response([big]))
    assert any(p is big for p in frame.parts)
    assert frame.size == sum(len(p) if isinstance(p, bytes) else p.length for p in frame.parts)


def test_storage_file_slices_are_regions(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"0123456789" * 10)
    fd = os.open(path, os.O_RDONLY)
    try:
        piece = FileSlice(fd, path, 20, 30)
        region: Region = piece  # storage.FileSlice satisfies the Region protocol
        frame = encode_response(RequestHeader(ApiKey.FETCH, 11, 2, None, 1), fetch_response(region))
        assert frame.parts[1] is piece
        wire = b"".join(p if isinstance(p, bytes) else os.pread(p.fd, p.length, p.position) for p in frame.parts)
        _, body = decode_response(ApiKey.FETCH, 11, wire[4:])
        assert bytes(body.responses[0].partitions[0].records) == (b"0123456789" * 10)[20:50]
    finally:
        os.close(fd)


def test_requests_cannot_carry_regions() -> None:
    value = {
        "acks": 1,
        "timeout_ms": 1,
        "topic_data": [{"name": "t", "partition_data": [{"records": FakeRegion(1, 0, 5)}]}],
    }
    with pytest.raises(EncodeError, match="regions"):
        encode_request(request_header(ApiKey.PRODUCE, 3, 1, None), value)


def test_bad_records_parts_are_encode_errors() -> None:
    header = RequestHeader(ApiKey.FETCH, 4, 1, None, 1)
    with pytest.raises(EncodeError, match=r"partitions\[0\]\.records: records part must be bytes or a Region"):
        encode_response(header, fetch_response([b"ok", 42]))
    with pytest.raises(EncodeError, match="negative"):
        encode_response(header, fetch_response(FakeRegion(1, 0, -1)))
