"""RecordBatch v2 (magic 2): the unit Kafka stores, replicates and serves.

Byte layout of one batch (all integers big-endian)::

    offset  size  field
         0     8  baseOffset              first offset in the batch (rewritten by the broker)
         8     4  batchLength             bytes after this field
        12     4  partitionLeaderEpoch    rewritten by the broker; not covered by the CRC
        16     1  magic                   2
        17     4  crc                     CRC-32C (Castagnoli) of bytes 21..end, unsigned
        21     2  attributes              bits 0-2 codec, 3 timestamp type, 4 transactional,
                                          5 control, 6 delete horizon
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId              -1 when not idempotent
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     .  records                 one block, compressed as a whole when a codec is set

Each record inside is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | { keyLength varint | key utf-8 | valueLength varint | value }*

Validation reads the 61-byte header and the CRC only; nothing here decompresses unless a
caller iterates records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import crc32c

from ._codecs import Compression, compress, decompress
from ._errors import CorruptBatchError, RecordFormatError
from ._offsets import LeaderEpoch, Offset
from ._varint import decode_varint

HEADER = struct.Struct(
    ">q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # recordsCount
)
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
PREFIX = struct.Struct(">qi")  # baseOffset, batchLength: enough to walk a log
BASE_OFFSET = struct.Struct(">q")  # at 0
LEADER_EPOCH = struct.Struct(">i")  # at 12
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
CRC_START = 21  # the CRC covers attributes .. end
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
CURRENT_MAGIC = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = LeaderEpoch(-1)


class BatchHeader(NamedTuple):
    base_offset: Offset
    batch_length: int
    partition_leader_epoch: LeaderEpoch
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> Offset:
        return Offset(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> Offset:
        return Offset(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


#: ``tuple.__new__``: builds a header from unpacked fields without namedtuple's ``_make``
#: (a Python-level call per batch, on the append path).
_new_header = tuple.__new__


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos`` (no CRC check). Raises CorruptBatchError if cut short."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"{len(buf) - pos} bytes left, a batch header needs {HEADER_SIZE}", position=pos)
    return _new_header(BatchHeader, HEADER.unpack_from(buf, pos))


def check_batch(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> BatchHeader:
    """Validate the batch at ``pos``: complete, magic 2, sane length and CRC-32C.

    Returns its header. Raises CorruptBatchError naming what is wrong and where. Reads
    the header and computes the CRC; never decompresses.
    """
    # Every append and fetched batch comes through here: one unpack and the checks on its
    # fields; any failure takes the slow path, which checks in order and names the problem.
    if end is None:
        end = len(buf)
    available = end - pos
    if available >= HEADER_SIZE:
        fields = HEADER.unpack_from(buf, pos)
        size = fields[1] + LOG_OVERHEAD
        if (
            fields[1] >= MIN_BATCH_LENGTH
            and size <= available
            and fields[3] == CURRENT_MAGIC
            and fields[6] >= 0
            and crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size]) == fields[4]
        ):
            return _new_header(BatchHeader, fields)
    return _check_batch_slowly(buf, pos, end)


def _check_batch_slowly(buf: bytes | bytearray | memoryview, pos: int, end: int) -> BatchHeader:
    available = end - pos
    if available < LOG_OVERHEAD:
        raise CorruptBatchError(f"only {available} bytes left, less than a batch prefix", position=pos)
    _base_offset, batch_length = PREFIX.unpack_from(buf, pos)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batchLength {batch_length} is below the minimum {MIN_BATCH_LENGTH}", position=pos)
    size = batch_length + LOG_OVERHEAD
    if size > available:
        raise CorruptBatchError(f"batch of {size} bytes is cut short: only {available} bytes left", position=pos)
    magic = buf[pos + MAGIC_POS]
    if magic != CURRENT_MAGIC:
        raise CorruptBatchError(f"magic {magic} is not supported (only magic 2)", position=pos)
    header = _new_header(BatchHeader, HEADER.unpack_from(buf, pos))
    actual = crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])
    if actual != header.crc:
        raise CorruptBatchError(f"CRC-32C mismatch: stored {header.crc:#010x}, computed {actual:#010x}", position=pos)
    if header.last_offset_delta < 0:
        raise CorruptBatchError(f"negative lastOffsetDelta {header.last_offset_delta}", position=pos)
    return header


def crc_of(buf: bytes | bytearray | memoryview, pos: int = 0, size: int | None = None) -> int:
    """The CRC-32C a batch at ``pos`` should carry."""
    view = memoryview(buf)
    if size is None:
        size = PREFIX.unpack_from(buf, pos)[1] + LOG_OVERHEAD
    return crc32c.crc32c(view[pos + CRC_START : pos + size])


_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_POS = 21
_BATCH_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")


def recompress(buf: bytes | bytearray | memoryview, codec: Compression) -> bytes:
    """The batch in ``buf`` with its records block compressed with ``codec`` instead.

    What a topic whose ``compression.type`` is a codec does to a batch produced with another:
    the records' bytes are unchanged (offset and timestamp deltas, keys, values, headers), only
    the block around them, the compression bits, batchLength and the CRC are new. Raises
    RecordFormatError (or CorruptBatchError) when the batch cannot be read.
    """
    header = check_batch(buf)
    view = memoryview(buf)[: header.size]
    block = view[HEADER_SIZE:]
    if header.compression != Compression.NONE:
        block = memoryview(decompress(header.compression, block))
    packed = compress(codec, block)
    out = bytearray(view[:HEADER_SIZE])
    out += packed
    _BATCH_LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    attributes = (header.attributes & ~ATTR_COMPRESSION_MASK) | int(codec)
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_POS, attributes)
    _CRC.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def set_base_offset(buf: bytearray | memoryview, base_offset: Offset, pos: int = 0) -> None:
    """Rewrite baseOffset in place; the CRC stays valid."""
    BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: LeaderEpoch, pos: int = 0) -> None:
    """Rewrite partitionLeaderEpoch in place; the CRC stays valid."""
    LEADER_EPOCH.pack_into(buf, pos + LEADER_EPOCH_POS, epoch)


def iter_batches(buf: bytes | bytearray | memoryview, *, validate: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf``; raises CorruptBatchError at the first bad one.

    With ``validate=False`` only the length prefix and header are read (no CRC).
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = check_batch(buf, pos, end) if validate else read_header(buf, pos)
        if not validate and header.size > end - pos:
            raise CorruptBatchError(f"batch of {header.size} bytes is cut short", position=pos)
        yield pos, header
        pos += header.size


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record. ``headers`` keep their order; a header value may be None."""

    offset: Offset
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordBatch:
    """A view over one batch's bytes with lazy access to its records."""

    __slots__ = ("_buf", "header")

    def __init__(self, buf: bytes | bytearray | memoryview, *, validate: bool = True) -> None:
        self._buf = memoryview(buf)
        self.header = check_batch(self._buf) if validate else read_header(self._buf)
        if not validate and self.header.size > len(self._buf):
            raise CorruptBatchError("batch is cut short", position=0)
        self._buf = self._buf[: self.header.size]

    def __len__(self) -> int:
        return self.header.size

    def __bytes__(self) -> bytes:
        return bytes(self._buf)

    @property
    def is_valid(self) -> bool:
        return crc_of(self._buf, 0, self.header.size) == self.header.crc

    def records(self) -> Iterator[Record]:
        """Yield the records in order, decompressing the block if needed (lazily, per record)."""
        h = self.header
        block: bytes | memoryview = self._buf[HEADER_SIZE:]
        if h.compression != Compression.NONE:
            block = decompress(h.compression, block)
        view = memoryview(block)
        pos = 0
        use_batch_time = h.is_log_append_time
        for _ in range(h.records_count):
            record, pos = _decode_record(view, pos, h, use_batch_time)
            yield record
        if pos != len(view):
            raise RecordFormatError(f"{len(view) - pos} bytes left over after {h.records_count} records")


def _decode_record(view: memoryview, pos: int, h: BatchHeader, use_batch_time: bool) -> tuple[Record, int]:
    length, pos = decode_varint(view, pos)
    end = pos + length
    if length < 0 or end > len(view):
        raise RecordFormatError(f"record length {length} runs past the end of the batch")
    pos += 1  # attributes: unused in magic 2
    ts_delta, pos = decode_varint(view, pos)
    offset_delta, pos = decode_varint(view, pos)
    key, pos = _read_bytes(view, pos, end)
    value, pos = _read_bytes(view, pos, end)
    count, pos = decode_varint(view, pos)
    if count < 0:
        raise RecordFormatError(f"negative header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        hkey, pos = _read_bytes(view, pos, end)
        if hkey is None:
            raise RecordFormatError("record header with a null key")
        hval, pos = _read_bytes(view, pos, end)
        try:
            headers.append((hkey.decode("utf-8"), hval))
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"record header key is not UTF-8: {exc}") from exc
    if pos != end:
        raise RecordFormatError(f"record declares {length} bytes but its fields use {length - (end - pos)}")
    timestamp = h.max_timestamp if use_batch_time else h.base_timestamp + ts_delta
    return Record(Offset(h.base_offset + offset_delta), timestamp, key, value, tuple(headers)), pos


def _read_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(view, pos)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise RecordFormatError(f"field of {n} bytes runs past the end of its record")
    return bytes(view[pos : pos + n]), pos + n
