"""Zig-zag varints as used inside Kafka records (protobuf's encoding).

A varint is little-endian base-128: seven payload bits per byte, the high bit set on
every byte but the last. Signed values are zig-zag mapped first so that small negative
numbers stay short: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ...
"""

from __future__ import annotations

from ._errors import RecordFormatError

_MAX_VARLONG_BYTES = 10


def encode_varint(value: int, out: bytearray) -> None:
    """Append the zig-zag varint of a signed 64-bit ``value`` to ``out``."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return ``(value, next_pos)``.

    Raises RecordFormatError when the buffer ends inside the varint or the varint is
    longer than ten bytes.
    """
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(_MAX_VARLONG_BYTES):
        if pos >= end:
            raise RecordFormatError(f"varint runs past the end of the buffer at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise RecordFormatError(f"varint longer than {_MAX_VARLONG_BYTES} bytes ending at byte {pos}")


def varint_size(value: int) -> int:
    """Number of bytes ``encode_varint(value)`` writes."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size
