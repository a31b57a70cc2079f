"""Batch rewriting for compaction: the records of one batch that stay, as a new batch.

:func:`clean_batch` decides, batch by batch, what a cleaned segment holds in place of a batch
of the old one, given the run's :class:`Rules` (each key's latest offset, the clock, the
tombstone retention).

Rewritten batches keep their base offset, lastOffsetDelta, record offset deltas, producer
id/epoch/base sequence, partitionLeaderEpoch, codec (recompressed) and LogAppendTime; the
CRC-32C is recomputed. So offsets never change; gaps appear where records went. A batch
left with no records is dropped, unless it is the last batch of its producer id in the log:
then it stays as an empty batch (header only) so that idempotence state survives.

Decisions (where strait differs from Kafka, or Kafka leaves a choice):

- **Tombstones** follow KIP-534: the run that first keeps a tombstone stamps its batch with a
  delete horizon (attribute bit 6; baseTimestamp = now + ``delete.retention.ms``, record
  timestamp deltas adjusted so every record keeps its timestamp). A later run at or after
  the horizon removes it. The horizon lives in the batch, so it survives restarts and uses
  the log's clock, not file modification times.
- **Null keys**: Kafka refuses them at produce time in compacted topics and its cleaner drops
  them; strait keeps them (they cannot be superseded) so that no produced record is lost.
- **Control batches** (transaction markers) are kept as they are. **Transactional data
  batches** are kept as they are too and take no part in the map: strait has no record of
  aborted transactions, and an aborted record must never supersede a committed one. A
  tombstone is never removed while an earlier transactional batch holds its key.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ._errors import RecordFormatError
from .records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, Compression, compress, crc_of
from .records import decompress as decompress_block
from .records._batch import ATTR_COMPRESSION_MASK, ATTR_DELETE_HORIZON, CRC_POS, CURRENT_MAGIC, HEADER
from .records._varint import decode_varint, encode_varint

_CRC = struct.Struct(">I")


@dataclass
class CleanStats:
    """What the rewriting removed, summed over a run."""

    records_removed: int = 0
    tombstones_removed: int = 0


@dataclass
class Rules:
    """What decides whether a record stays (filled by the plan and map passes)."""

    latest: dict[bytes, int]  # key -> its latest offset in the dirty section
    now_ms: int
    delete_retention_ms: int
    is_producers_last: Callable[[BatchHeader], bool]
    transactional_keys: set[bytes] = field(default_factory=set)  # keys in transactional batches seen so far


@dataclass(frozen=True, slots=True)
class RawRecord:
    """A record as far as compaction reads it; the rest of it (``tail``) is copied unparsed."""

    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    is_tombstone: bool
    tail: memoryview  # keyLength .. the end of the headers: copied as it is


def raw_records(raw: memoryview, header: BatchHeader) -> Iterator[RawRecord]:
    """The records of a validated batch (decompressed when needed). Raises RecordFormatError."""
    block: bytes | memoryview = raw[HEADER_SIZE:]
    if header.compression != Compression.NONE:
        block = decompress_block(header.compression, block)
    view = memoryview(block)
    pos = 0
    for _ in range(header.records_count):
        length, pos = decode_varint(view, pos)
        end = pos + length
        if length < 3 or end > len(view):  # attributes, timestampDelta and offsetDelta take 3 bytes at least
            raise RecordFormatError(f"record of {length} bytes at offset {header.base_offset}+ runs past its batch")
        attributes = view[pos]
        ts_delta, p = decode_varint(view, pos + 1)
        offset_delta, p = decode_varint(view, p)
        tail_start = p
        key_length, p = decode_varint(view, p)
        key = bytes(view[p : p + key_length]) if key_length >= 0 else None
        value_length, _ = decode_varint(view, p + max(key_length, 0))
        yield RawRecord(attributes, ts_delta, offset_delta, key, value_length < 0, view[tail_start:end])
        pos = end
    if pos != len(view):
        raise RecordFormatError(f"batch at offset {header.base_offset}: {len(view) - pos} bytes after its records")


def clean_batch(raw: memoryview, header: BatchHeader, rules: Rules, stats: CleanStats) -> memoryview | bytes | None:
    """The batch to write in place of ``raw``: ``raw`` itself when nothing changes, a rebuilt
    batch, an empty batch (a producer's last), or None to drop it."""
    if header.is_control:
        return raw
    if header.is_transactional:
        rules.transactional_keys.update(r.key for r in raw_records(raw, header) if r.key is not None)
        return raw
    has_horizon = bool(header.attributes & ATTR_DELETE_HORIZON)
    horizon_passed = has_horizon and rules.now_ms >= header.base_timestamp
    records = list(raw_records(raw, header))
    kept: list[RawRecord] = []
    keeps_tombstone = False
    for record in records:
        if record.key is not None:
            latest = rules.latest.get(record.key)
            if latest is not None and header.base_offset + record.offset_delta < latest:
                stats.records_removed += 1
                continue
            if record.is_tombstone:
                if horizon_passed and record.key not in rules.transactional_keys:
                    stats.tombstones_removed += 1
                    continue
                keeps_tombstone = True
        kept.append(record)
    if not kept:
        if not rules.is_producers_last(header):
            return None
        return raw if not records else _empty_batch(header)
    if len(kept) == len(records) and keeps_tombstone == has_horizon:
        return raw
    horizon = None
    if keeps_tombstone:
        horizon = header.base_timestamp if has_horizon else rules.now_ms + rules.delete_retention_ms
    return _rebuild(header, kept, horizon)


def _rebuild(header: BatchHeader, kept: list[RawRecord], horizon: int | None) -> bytes:
    """A batch of ``kept`` with ``header``'s identity; timestamps are re-based, never changed."""
    timestamps = [header.base_timestamp + r.timestamp_delta for r in kept]
    base_ts = horizon if horizon is not None else timestamps[0]
    block = bytearray()
    for record, ts in zip(kept, timestamps, strict=True):
        body = bytearray((record.attributes,))
        encode_varint(ts - base_ts, body)
        encode_varint(record.offset_delta, body)
        body += record.tail
        encode_varint(len(body), block)
        block += body
    payload = compress(Compression(header.compression), block)
    attributes = header.attributes & ~ATTR_DELETE_HORIZON
    if horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    max_ts = header.max_timestamp if header.is_log_append_time else max(timestamps)
    buf = bytearray(HEADER_SIZE + len(payload))
    buf[HEADER_SIZE:] = payload
    fields = header._replace(
        batch_length=len(buf) - LOG_OVERHEAD,
        magic=CURRENT_MAGIC,
        crc=0,
        attributes=attributes,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        records_count=len(kept),
    )
    return _with_crc(buf, fields)


def _empty_batch(header: BatchHeader) -> bytes:
    """A header-only batch that keeps the offsets and producer state of ``header`` (as Kafka keeps)."""
    fields = header._replace(
        batch_length=HEADER_SIZE - LOG_OVERHEAD,
        crc=0,
        attributes=header.attributes & ~(ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON),
        base_timestamp=header.max_timestamp,
        records_count=0,
    )
    return _with_crc(bytearray(HEADER_SIZE), fields)


def _with_crc(buf: bytearray, header: BatchHeader) -> bytes:
    HEADER.pack_into(buf, 0, *header)
    _CRC.pack_into(buf, CRC_POS, crc_of(buf, 0, len(buf)))
    return bytes(buf)
