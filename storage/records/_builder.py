"""Build record batches, as a producer does (layout in ``_batch``)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ._batch import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    CRC_POS,
    CURRENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    crc_of,
)
from ._codecs import Compression, compress
from ._control import CONTROL_ABORT, CONTROL_COMMIT, CONTROL_KEY, CONTROL_VALUE, CONTROL_VERSION
from ._varint import encode_varint

RecordHeaders = Sequence[tuple[str, bytes | None]]

_CRC = struct.Struct(">I")


class BatchBuilder:
    """Accumulate records, then ``build()`` one magic-2 batch.

    Offsets inside the batch are consecutive from ``base_offset``; timestamps are absolute
    milliseconds. The builder is single-use.
    """

    def __init__(
        self,
        *,
        compression: Compression = Compression.NONE,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        control: bool = False,
        log_append_time: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        self.compression = Compression(compression)
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.partition_leader_epoch = partition_leader_epoch
        self._attributes = int(self.compression)
        if transactional:
            self._attributes |= ATTR_TRANSACTIONAL
        if control:
            self._attributes |= ATTR_CONTROL
        if log_append_time:
            self._attributes |= ATTR_LOG_APPEND_TIME
        self._records = bytearray()
        self._count = 0
        self._base_timestamp: int | None = None
        self._max_timestamp = -1
        self._built = False

    def __len__(self) -> int:
        return self._count

    @property
    def uncompressed_size(self) -> int:
        return HEADER_SIZE + len(self._records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: RecordHeaders = (),
    ) -> int:
        """Add a record; returns its offset delta."""
        if self._built:
            raise RuntimeError("the batch was already built")
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        self._max_timestamp = max(self._max_timestamp, timestamp)
        body = bytearray(b"\x00")  # record attributes
        encode_varint(timestamp - self._base_timestamp, body)
        encode_varint(self._count, body)
        _put_bytes(body, key)
        _put_bytes(body, value)
        encode_varint(len(headers), body)
        for hkey, hvalue in headers:
            _put_bytes(body, hkey.encode("utf-8"))
            _put_bytes(body, hvalue)
        encode_varint(len(body), self._records)
        self._records += body
        self._count += 1
        return self._count - 1

    def build(self) -> bytes:
        """Return the finished batch. Raises ValueError for an empty batch."""
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        self._built = True
        payload = compress(self.compression, self._records)
        buf = bytearray(HEADER_SIZE + len(payload))
        base_ts = self._base_timestamp if self._base_timestamp is not None else -1
        HEADER.pack_into(
            buf,
            0,
            self.base_offset,
            len(buf) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            CURRENT_MAGIC,
            0,  # crc, filled below
            self._attributes,
            self._count - 1,
            base_ts,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        buf[HEADER_SIZE:] = payload
        _CRC.pack_into(buf, CRC_POS, crc_of(buf, 0, len(buf)))
        return bytes(buf)


def build_batch(
    records: Sequence[tuple[int, bytes | None, bytes | None] | tuple[int, bytes | None, bytes | None, RecordHeaders]],
    *,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One-call form of BatchBuilder: ``records`` are ``(timestamp, key, value[, headers])``."""
    builder = BatchBuilder(
        compression=compression,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for rec in records:
        builder.append(*rec)
    return builder.build()


def build_control_batch(
    *,
    commit: bool,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
) -> bytes:
    """A transaction marker (COMMIT or ABORT, layout in ``_control``): a transactional control
    batch of one record, base sequence -1."""
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )
    key = CONTROL_KEY.pack(CONTROL_VERSION, CONTROL_COMMIT if commit else CONTROL_ABORT)
    builder.append(timestamp, key, CONTROL_VALUE.pack(CONTROL_VERSION, coordinator_epoch))
    return builder.build()


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data
