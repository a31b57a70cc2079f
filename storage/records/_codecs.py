"""Compression codecs of record batches (attribute bits 0-2).

Only producers, consumers and tools compress or decompress: the broker stores batches as
they came. Formats:

- gzip: an RFC 1952 gzip member.
- snappy: either raw snappy, or the xerial block framing the Java client writes. Framed data
  starts with a 16-byte header ``\\x82SNAPPY\\x00`` + int32 version + int32 min-compatible
  version (both big-endian), then blocks of ``int32 length`` + raw snappy bytes. We write the
  framing (every client reads it) and read both.
- lz4: the LZ4 frame format with independent blocks (the Java client rejects linked
  blocks) and the correct header checksum, as Kafka uses since magic 1.
- zstd: a zstd frame; the frame may omit the content size, so we decompress as a stream.
"""

from __future__ import annotations

import enum
import gzip
import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

from ._errors import RecordFormatError, UnsupportedCompressionError


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression {name!r}; choose one of {', '.join(c.name.lower() for c in cls)}"
            ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version (1), min compatible version (1)
_XERIAL_BLOCK_LEN = struct.Struct(">i")
_XERIAL_BLOCK_SIZE = 32 * 1024  # uncompressed bytes per block, as xerial's default


def compress(codec: Compression, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` with ``codec`` (NONE returns the bytes unchanged)."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
            out += _XERIAL_BLOCK_LEN.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        # Kafka's Java client refuses linked blocks ("Dependent block stream is unsupported").
        packed: bytes = lz4.frame.compress(data, block_linked=False)
        return packed
    if codec == Compression.ZSTD:
        return _zstd().compressor.compress(data)
    raise UnsupportedCompressionError(int(codec))


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress ``data``; raises RecordFormatError on damaged input."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return gzip.decompress(data)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            unpacked: bytes = lz4.frame.decompress(data)
            return unpacked
        if codec == Compression.ZSTD:
            return _zstd().decompressor.decompressobj().decompress(data)
    except (OSError, EOFError, RuntimeError, zlib.error, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise RecordFormatError(f"cannot decompress {Compression(codec).name.lower()} data: {exc}") from exc
    raise UnsupportedCompressionError(codec)


class _Zstd(threading.local):
    """A zstd compressor and decompressor per thread: making one costs more than a 16 KiB batch's
    compression, and one may not be used by two threads at once."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=3)
        self.decompressor = zstandard.ZstdDecompressor()


_ZSTD = _Zstd()


def _zstd() -> _Zstd:
    return _ZSTD


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos = _XERIAL_HEADER.size
    while pos < len(view):
        if pos + 4 > len(view):
            raise RecordFormatError("xerial snappy block length cut short")
        (length,) = _XERIAL_BLOCK_LEN.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise RecordFormatError(f"xerial snappy block of {length} bytes runs past the end")
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)
