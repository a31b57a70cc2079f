"""Frames: request/response headers and the entry points that turn frames into Structs and back.

Every frame on the wire is an int32 size prefix and that many bytes. The functions here take a
frame *without* its size prefix when decoding and produce one *with* it when encoding.

| header | layout |
|---|---|
| request v1 | api_key int16, api_version int16, correlation_id int32, client_id int16-length string (-1 = null) |
| request v2 | v1, then a tagged-field buffer (client_id keeps its int16 length even though v2 is "flexible") |
| response v0 | correlation_id int32 |
| response v1 | correlation_id int32, then a tagged-field buffer |

A request uses header v2 exactly when its API version is flexible; a response uses v1 when
flexible, except ApiVersions, whose response header is always v0 (a client must be able to read
the answer to a version it guessed).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._catalog import find_schema, request_codec, response_codec, schema
from ._error_codes import ErrorCode
from ._errors import (
    DecodeFailure,
    EncodeError,
    EncodeFailure,
    MalformedRequest,
    MalformedResponse,
    UnknownApi,
    UnsupportedVersion,
)
from ._header import RequestHeader
from ._schema import ApiKey, ApiSchema
from ._struct import Region, Struct
from ._types import I16, Out, skip_tag_buffer, string_reader, string_writer

# size prefix int32, api_key int16, api_version int16, correlation_id int32
_REQUEST_START = struct.Struct(">ihhi")
# api_key int16, api_version int16, correlation_id int32 (a request frame without its size prefix)
_REQUEST_HEADER = struct.Struct(">hhi")
# size prefix int32, correlation_id int32
_RESPONSE_START = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_MAX_FRAME = 0x7FFFFFFF

_read_client_id = string_reader(compact=False, nullable=True)
_write_client_id = string_writer(compact=False, nullable=True)


@dataclass(slots=True)
class EncodedFrame:
    """A frame ready to write: ``parts`` in order (``parts[0]`` starts with the size prefix).

    Parts are ``bytes``, ``memoryview`` (a large records part given as one) or Region objects (file
    ranges for sendfile); ``size`` is the total number of bytes on the wire, prefix included.
    """

    parts: list[bytes | memoryview | Region]
    size: int


def request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> RequestHeader:
    """A header with the right ``header_version`` for the API version; raises UnknownApi."""
    api = schema(api_key)
    return RequestHeader(api_key, api_version, correlation_id, client_id, api.request_header_version(api_version))


def _view(frame: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def read_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header of one request frame (without its size prefix).

    Returns the header and the offset where the body starts. Raises MalformedRequest when the
    header does not parse (``.header`` holds what did), UnknownApi for an API key without a schema,
    UnsupportedVersion for a version outside the declared range (both carry the parsed header).
    Tagged fields of a v2 header are skipped.
    """
    buf = _view(frame)
    if len(buf) < _REQUEST_HEADER.size + 2:
        raise MalformedRequest(
            f"request header needs at least {_REQUEST_HEADER.size + 2} bytes "
            f"(api key, version, correlation id, client id length); the frame has {len(buf)}"
        )
    api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(buf, 0)
    try:
        client_id, pos = _read_client_id(buf, _REQUEST_HEADER.size)
    except (DecodeFailure, UnicodeDecodeError) as exc:
        raise MalformedRequest(
            f"request header (api key {api_key}, version {api_version}, correlation id {correlation_id}): "
            f"client_id at byte offset {_REQUEST_HEADER.size}: {exc}",
            header=RequestHeader(api_key, api_version, correlation_id, None, 1),
        ) from None
    api = find_schema(api_key)
    if api is None:
        header = RequestHeader(api_key, api_version, correlation_id, client_id, 1)
        raise UnknownApi(api_key, api_version, correlation_id, header=header)
    header = RequestHeader(api_key, api_version, correlation_id, client_id, api.request_header_version(api_version))
    if not api.min_version <= api_version <= api.max_version:
        raise UnsupportedVersion(api.name, api_version, api.max_version, header=header)
    if header.header_version == 2:
        try:
            pos = skip_tag_buffer(buf, pos)
        except DecodeFailure as exc:
            raise MalformedRequest(f"{api.name} request header: {exc.describe()}", header=header) from None
        except IndexError:
            raise MalformedRequest(
                f"{api.name} request header: the frame ends inside the tagged fields at byte offset {pos}",
                header=header,
            ) from None
    return header, pos


def _api_for(header: RequestHeader) -> ApiSchema:
    api = find_schema(header.api_key)
    if api is None:
        raise UnknownApi(header.api_key, header.api_version, header.correlation_id, header=header)
    return api


def decode_request(header: RequestHeader, frame: bytes | memoryview, offset: int) -> Struct:
    """Decode a request body starting at ``offset`` of ``frame`` (the frame without its size prefix).

    Every declared field is present on the result: fields absent from this version hold their
    declared default. ``records`` fields are memoryview slices of ``frame`` (zero copy) or None.
    Trailing bytes are ignored. Raises MalformedRequest naming the field path and byte offset,
    UnknownApi / UnsupportedVersion for a header without a declared schema.
    """
    api = _api_for(header)
    try:
        codec = request_codec(api, header.api_version)
    except UnsupportedVersion as exc:
        exc.header = header
        raise
    buf = _view(frame)
    if not 0 <= offset <= len(buf):
        raise ValueError(f"body offset {offset} is outside the {len(buf)}-byte frame")
    try:
        body, _ = codec.read(buf, offset)
    except DecodeFailure as exc:
        raise MalformedRequest(f"{api.name}Request v{header.api_version}: {exc.describe()}", header=header) from None
    result: Struct = body
    return result


def encode_response(header: RequestHeader, body: Struct | Mapping[str, Any]) -> EncodedFrame:
    """Encode the response to ``header``'s request, size prefix and response header included.

    Nested structs may be Struct or dict; missing fields take their defaults; fields not in the
    version are skipped. ``records`` accept None, bytes-like, a Region, or a list of parts (bytes or
    Regions); Regions stay parts of their own, never read. Raises EncodeError naming the field path
    and the bad value, UnknownApi / UnsupportedVersion for a header without a declared schema.
    """
    api = _api_for(header)
    codec = response_codec(api, header.api_version)
    prefix = _RESPONSE_START.pack(0, header.correlation_id)
    if api.response_header_version(header.api_version) == 1:
        prefix += b"\x00"  # empty tagged-field buffer
    out = Out(prefix)
    try:
        codec.write(out, body)
    except EncodeFailure as exc:
        raise EncodeError(f"{api.name}Response v{header.api_version}: {exc.describe()}") from None
    return _finish(out, api)


def _finish(out: Out, api: ApiSchema) -> EncodedFrame:
    parts = out.finish()
    size = 0
    for part in parts:
        if isinstance(part, (bytes, bytearray)):
            size += len(part)
        else:
            size += part.nbytes if isinstance(part, memoryview) else part.length
    if size - 4 > _MAX_FRAME:
        raise EncodeError(f"{api.name} frame of {size} bytes exceeds the int32 size limit")
    _I32.pack_into(parts[0], 0, size - 4)
    return EncodedFrame([bytes(p) if isinstance(p, bytearray) else p for p in parts], size)


def encode_request(header: RequestHeader, body: Struct | Mapping[str, Any]) -> bytes:
    """Encode a request, size prefix and header included (header v1 or v2 by the version's flexibility).

    ``header.header_version`` is not consulted: the API version decides it. Raises EncodeError
    naming the field path and the bad value (requests cannot carry Regions), UnknownApi /
    UnsupportedVersion for an undeclared API or version.
    """
    return b"".join(encode_request_parts(header, body))


def encode_request_parts(
    header: RequestHeader, body: Struct | Mapping[str, Any]
) -> list[bytes | bytearray | memoryview]:
    """``encode_request``'s frame as the parts to write in order, never joined: each ``records``
    part of at least 16 KiB (bytes or memoryview) is a part of its own, the very object given, so
    records are written without being copied (a client writes the parts with one gathering send).
    The first part starts with the size prefix. Raises as ``encode_request`` does.
    """
    api = schema(header.api_key)
    codec = request_codec(api, header.api_version)
    out = Out(_REQUEST_START.pack(0, header.api_key, header.api_version, header.correlation_id))
    try:
        _write_client_id(out, header.client_id)
        if api.is_flexible(header.api_version):
            out.buf += b"\x00"  # empty tagged-field buffer of request header v2
        codec.write(out, body)
    except EncodeFailure as exc:
        raise EncodeError(f"{api.name}Request v{header.api_version}: {exc.describe()}") from None
    parts: list[bytes | bytearray | memoryview] = out.finish()
    if not all(isinstance(p, (bytes, bytearray, memoryview)) for p in parts):
        raise EncodeError(f"{api.name}Request v{header.api_version}: requests cannot carry file regions")
    size = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
    if size - 4 > _MAX_FRAME:
        raise EncodeError(f"{api.name} request of {size} bytes exceeds the int32 size limit")
    first = parts[0]
    assert isinstance(first, bytearray)  # Out's buffer, holding at least the header
    _I32.pack_into(first, 0, size - 4)
    return parts


def decode_response(api_key: int, api_version: int, frame: bytes | memoryview) -> tuple[int, Struct]:
    """Decode a response frame (without its size prefix) to ``(correlation_id, body)``.

    An ApiVersions response carrying error 35 (UNSUPPORTED_VERSION) is read as v0, whatever
    version was asked: that is how a broker answers a version it does not know. Raises
    MalformedResponse naming the field path and byte offset, UnknownApi / UnsupportedVersion.
    """
    api = schema(api_key)
    codec = response_codec(api, api_version)
    buf = _view(frame)
    if len(buf) < 4:
        raise MalformedResponse(f"{api.name} response needs a 4-byte correlation id; the frame has {len(buf)} bytes")
    (correlation_id,) = _I32.unpack_from(buf, 0)
    pos = 4
    where = f"{api.name}Response v{api_version} (correlation id {correlation_id})"
    try:
        if api.response_header_version(api_version) == 1:
            pos = skip_tag_buffer(buf, pos)
        if (
            api_key == ApiKey.API_VERSIONS
            and api_version > 0
            and len(buf) >= pos + 2
            and I16.unpack_from(buf, pos)[0] == ErrorCode.UNSUPPORTED_VERSION
        ):
            codec = response_codec(api, 0)
        body, _ = codec.read(buf, pos)
    except DecodeFailure as exc:
        raise MalformedResponse(f"{where}: {exc.describe()}") from None
    except IndexError:
        raise MalformedResponse(f"{where}: the frame ends inside the header's tagged fields") from None
    result: Struct = body
    return correlation_id, result


def api_versions_fallback(correlation_id: int, ranges: Mapping[int, tuple[int, int]]) -> EncodedFrame:
    """The ApiVersions v0 response with error 35 (UNSUPPORTED_VERSION) and ``ranges``.

    What Kafka answers to an ApiVersions version it does not know; the client retries with a
    version from the ranges. Keys are listed in ascending order.
    """
    header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None, 1)
    api_keys = [
        {"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(ranges.items())
    ]
    return encode_response(header, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_keys})
