"""Readers and writers of the primitive wire types, classic and compact (flexible) forms.

A reader is ``read(buf, pos) -> (value, new_pos)`` over a ``memoryview`` of the whole frame; a
writer is ``write(out, value)`` appending to an ``Out``. Readers raise ``DecodeFailure`` for values
that are well-formed bytes but break the rules (negative lengths, lengths past the end of the frame,
varints longer than 5 bytes); a frame that ends inside a fixed-size value raises ``struct.error`` or
``IndexError``, which the struct reader around it turns into a ``DecodeFailure`` naming the field.

Wire forms (big-endian throughout):

| type | classic | compact (flexible versions) |
|---|---|---|
| string | int16 length, UTF-8 bytes; -1 = null | unsigned varint length+1; 0 = null |
| bytes, records | int32 length, bytes; -1 = null | unsigned varint length+1; 0 = null |
| array | int32 count, items; -1 = null | unsigned varint count+1; 0 = null |
| uuid | 16 bytes | 16 bytes |
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from ._errors import DecodeFailure, EncodeFailure

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[["Out", Any], None]

I16 = struct.Struct(">h")  # int16: string lengths
I32 = struct.Struct(">i")  # int32: bytes/records lengths, array counts
_NULL16 = I16.pack(-1)
_NULL32 = I32.pack(-1)

# records parts (bytes or memoryview) at least this large become frame parts of their own instead
# of being copied into the buffer
BIG_PART = 16 * 1024


class Out:
    """An encoding target: a growing buffer plus the finished parts before it.

    Region objects (byte ranges of files, sent with sendfile) and large ``bytes`` become parts of
    their own, so the encoder never copies or reads them.
    """

    __slots__ = ("buf", "parts")

    def __init__(self, prefix: bytes = b"") -> None:
        self.buf = bytearray(prefix)
        self.parts: list[Any] = []

    def add_part(self, part: Any) -> None:
        """Close the current buffer and append ``part`` (bytes or a Region) as its own part."""
        if self.buf:
            self.parts.append(self.buf)
            self.buf = bytearray()
        self.parts.append(part)

    def finish(self) -> list[Any]:
        """All parts in order; buffers are still bytearrays (the caller patches the size prefix)."""
        if self.buf or not self.parts:
            self.parts.append(self.buf)
            self.buf = bytearray()
        return self.parts


# ---------------------------------------------------------------------------------------------------------------------
# varints


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's limit for 32-bit values)."""
    start = pos
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 35:
            raise DecodeFailure("unsigned varint is longer than 5 bytes", start)


def uvarint(value: int) -> bytes:
    """Encode a non-negative int below 2**32 as an unsigned varint."""
    if not 0 <= value < 1 << 32:
        raise EncodeFailure(f"unsigned varint {value} out of range [0, 2**32)")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(out: Out, value: int) -> None:
    if 0 <= value < 0x80:
        out.buf.append(value)
    elif 0x80 <= value < 0x4000:  # two bytes: the length of most records and strings in flexible versions
        out.buf += bytes(((value & 0x7F) | 0x80, value >> 7))
    else:
        out.buf += uvarint(value)


def skip_tag_buffer(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field buffer whose tags are all unknown; returns the offset after it."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if size > len(buf) - pos:
            raise DecodeFailure(f"tagged field of {size} bytes overruns the frame ({len(buf) - pos} bytes left)", pos)
        pos += size
    return pos


# ---------------------------------------------------------------------------------------------------------------------
# length-prefixed values


def read_length(buf: memoryview, pos: int, compact: bool, width: struct.Struct) -> tuple[int, int]:
    """The length prefix of a string/bytes/array: -1 for null. Compact lengths are stored plus one."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    (n,) = width.unpack_from(buf, pos)
    return n, pos + width.size


def check_span(buf: memoryview, pos: int, n: int, what: str) -> int:
    end = pos + n
    if end > len(buf):
        raise DecodeFailure(f"{what} of {n} bytes overruns the frame ({len(buf) - pos} bytes left)", pos)
    return end


def string_reader(*, compact: bool, nullable: bool) -> Reader:
    def read_string(buf: memoryview, pos: int) -> tuple[str | None, int]:
        n, pos = read_length(buf, pos, compact, I16)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeFailure(
                f"string length {n} is invalid here ({'null not allowed' if n == -1 else 'negative'})", pos
            )
        end = check_span(buf, pos, n, "string")
        return str(buf[pos:end], "utf-8"), end

    return read_string


def bytes_reader(*, compact: bool, nullable: bool, zero_copy: bool) -> Reader:
    """Bytes fields copy out (they are small); records (``zero_copy``) stay a memoryview of the frame."""

    def read_bytes(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, compact, I32)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeFailure(
                f"bytes length {n} is invalid here ({'null not allowed' if n == -1 else 'negative'})", pos
            )
        end = check_span(buf, pos, n, "bytes")
        return (buf[pos:end] if zero_copy else bytes(buf[pos:end])), end

    return read_bytes


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = check_span(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def string_writer(*, compact: bool, nullable: bool) -> Writer:
    def write_string(out: Out, value: Any) -> None:
        if value is None:
            if not nullable:
                raise EncodeFailure("None for a non-nullable string")
            out.buf += b"\x00" if compact else _NULL16
            return
        if not isinstance(value, str):
            raise EncodeFailure(f"expected str, got {type(value).__name__} {value!r:.80}")
        data = value.encode()
        if compact:
            write_uvarint(out, len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise EncodeFailure(f"string of {len(data)} bytes exceeds the int16 length limit")
            out.buf += I16.pack(len(data))
        out.buf += data

    return write_string


def write_length32(out: Out, n: int, compact: bool) -> None:
    if compact:
        write_uvarint(out, n + 1)
    else:
        if n > 0x7FFFFFFF:
            raise EncodeFailure(f"{n} bytes exceed the int32 length limit")
        out.buf += I32.pack(n)


def bytes_writer(*, compact: bool, nullable: bool) -> Writer:
    def write_bytes(out: Out, value: Any) -> None:
        if value is None:
            if not nullable:
                raise EncodeFailure("None for non-nullable bytes")
            out.buf += b"\x00" if compact else _NULL32
            return
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise EncodeFailure(f"expected bytes, got {type(value).__name__} {value!r:.80}")
        write_length32(out, memoryview(value).nbytes, compact)
        out.buf += value

    return write_bytes


_BYTES_LIKE = (bytes, bytearray, memoryview)


def _part_size(part: Any) -> int:
    """The byte count of one records part: bytes-like, or a Region (anything with fd/position/length)."""
    kind = type(part)
    if kind is bytes or kind is bytearray:
        return len(part)
    if kind is memoryview:
        return int(part.nbytes)
    length = getattr(part, "length", None)
    if isinstance(length, int) and hasattr(part, "fd") and hasattr(part, "position"):
        if length < 0:
            raise EncodeFailure(f"region length {length} is negative")
        return length
    raise EncodeFailure(f"records part must be bytes or a Region, got {kind.__name__}")


def records_writer(*, compact: bool, nullable: bool) -> Writer:
    """Records: None, bytes-like, one Region, or a list/tuple of parts (bytes-like or Region).

    The total length is written first; Regions and large ``bytes`` or ``memoryview`` parts become
    frame parts of their own (never copied: a memoryview part must not change until the frame is
    written); a ``bytearray`` is always copied, since its owner may change it.
    """

    def write_records(out: Out, value: Any) -> None:
        kind = type(value)
        if kind is list or kind is tuple:
            parts = value
        elif value is None:
            if not nullable:
                raise EncodeFailure("None for non-nullable records")
            out.buf += b"\x00" if compact else _NULL32
            return
        else:
            parts = (value,)
        total = 0
        for part in parts:
            total += _part_size(part)
        write_length32(out, total, compact)
        for part in parts:
            kind = type(part)
            if kind is bytes or kind is memoryview:
                if (len(part) if kind is bytes else part.nbytes) >= BIG_PART and (kind is bytes or part.contiguous):
                    out.add_part(part if kind is bytes or part.format == "B" else part.cast("B"))
                else:
                    out.buf += part
            elif kind is bytearray:
                out.buf += part
            elif part.length:
                out.add_part(part)

    return write_records


def write_uuid(out: Out, value: Any) -> None:
    if not isinstance(value, uuid.UUID):
        raise EncodeFailure(f"expected uuid.UUID, got {type(value).__name__} {value!r:.80}")
    out.buf += value.bytes
