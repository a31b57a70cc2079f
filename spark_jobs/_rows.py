"""Raw record batches to Arrow rows: the one decoder both data sources use.

A source hands :class:`Rows` each batch exactly as it is stored (a segment file's bytes, or a
fetch response's record set) and takes Arrow record batches of :data:`~spark_jobs.schema.ARROW_SCHEMA`
out of it. What cannot be read becomes a row with ``valid`` false and the reason in ``error``
(a CRC mismatch, a batch that does not decode, a torn tail the source reports), never an
exception: an audit must count damage, not stop at it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from storage.records import CRC_START, BatchHeader, Compression, RecordBatch, RecordFormatError, crc_of, read_header

from .schema import ARROW_BATCH_SCHEMA, ARROW_SCHEMA, CREATE_TIME, LOG_APPEND_TIME

#: Rows per Arrow batch, and bytes of keys and values per Arrow batch, at most (before a flush).
BATCH_ROWS = 8192
BATCH_BYTES = 8 * 1024 * 1024
#: ``digest``: this many bytes of the SHA-256 of what a batch's CRC covers.
DIGEST_BYTES = 16

_CODECS = {c.value: c.name.lower() for c in Compression}
_NEVER = 2**63 - 1
_SEQUENCES = 2**31  # a producer's sequence wraps from Integer.MAX_VALUE to 0 (Kafka's rule)
# 9999-12-31T23:59:59.999Z, the last instant Python's datetime (and Spark's documented range)
# holds: a timestamp past it (a damaged batch's) is null rather than a row nobody can collect.
_LAST_MS = 253_402_300_799_999


@dataclass(frozen=True, slots=True)
class Bounds:
    """Which records a read keeps: offsets in ``[start_offset, end_offset)`` and timestamps (ms)
    in ``[start_ms, end_ms)``. The defaults keep everything."""

    start_offset: int = 0
    end_offset: int = _NEVER
    start_ms: int = -(2**63)
    end_ms: int = _NEVER

    def batch_outside(self, h: BatchHeader) -> bool:
        """True when no record of the batch can be within the bounds (judged from its header)."""
        if h.last_offset < self.start_offset or h.base_offset >= self.end_offset:
            return True
        return h.max_timestamp < self.start_ms and h.max_timestamp >= 0

    def keeps(self, offset: int, timestamp: int) -> bool:
        return self.start_offset <= offset < self.end_offset and self.start_ms <= timestamp < self.end_ms


EVERYTHING = Bounds()


class _Columns:
    """What :class:`Rows` and :class:`BatchRows` share: columns filled row by row, handed out as
    Arrow batches of ``schema``, and invalid rows."""

    schema: pa.Schema

    def __init__(self, *, include_control: bool = False, bounds: Bounds = EVERYTHING) -> None:
        self.include_control = include_control
        self.bounds = bounds
        self.invalid = 0  # invalid rows emitted so far
        self._bytes = 0
        self._cols: dict[str, list[Any]] = {name: [] for name in self.schema.names}

    def __len__(self) -> int:
        return len(self._cols["valid"])

    @property
    def full(self) -> bool:
        return len(self) >= BATCH_ROWS or self._bytes >= BATCH_BYTES

    def _wanted(self, h: BatchHeader, topic: str, partition: int, segment: str | None) -> bool:
        """Whether the batch gives rows: within the bounds (and this reader's, see
        :meth:`_owns`), magic 2 (else one invalid row says so), and no control batch unless
        ``include_control``."""
        if self.bounds.batch_outside(h) or not self._owns(h):
            return False
        if h.magic != 2:
            self.add_invalid(topic, partition, h.base_offset, f"record batch magic {h.magic} is not supported", segment)
            return False
        return self.include_control or not h.is_control

    def _owns(self, h: BatchHeader) -> bool:
        return True

    def add_invalid(
        self,
        topic: str,
        partition: int,
        offset: int | None,
        error: str,
        segment: str | None,
        *,
        crc_valid: bool | None = None,
        header: BatchHeader | None = None,
    ) -> None:
        """One row standing for what could not be read at ``offset`` (None: unknown)."""
        if offset is not None and not (self.bounds.start_offset <= offset < self.bounds.end_offset):
            return
        c = self._cols
        for values in c.values():
            values.append(None)
        c["topic"][-1] = topic
        c["partition"][-1] = partition
        c["offset"][-1] = offset
        c["valid"][-1] = False
        c["error"][-1] = error
        c["segment"][-1] = segment
        c["crcValid"][-1] = crc_valid
        if header is not None:
            if "batchOffset" in c:
                c["batchOffset"][-1] = header.base_offset
            c["leaderEpoch"][-1] = header.partition_leader_epoch
            c["producerId"][-1] = header.producer_id
            c["producerEpoch"][-1] = header.producer_epoch
            c["codec"][-1] = _CODECS.get(header.compression, str(header.compression))
        self.invalid += 1

    def flush(self) -> pa.RecordBatch | None:
        """The rows so far as one Arrow batch (None when there are none); starts afresh."""
        if not len(self):
            return None
        cols, self._cols, self._bytes = self._cols, {name: [] for name in self.schema.names}, 0
        arrays = [pa.array(cols[f.name], type=f.type) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class Rows(_Columns):
    """Accumulates one input partition's rows; :meth:`flush` hands them out as an Arrow batch.

    ``include_control``: also emit control records (transaction markers, ``isControl`` true);
    by default they are skipped, as a Kafka consumer skips them.
    """

    schema = ARROW_SCHEMA

    def add_batch(self, buf: bytes | bytearray | memoryview, topic: str, partition: int, segment: str | None) -> int:
        """Decode one whole batch (``buf`` holds exactly it, length prefix included); returns
        the offset after it. Records outside :attr:`bounds` are dropped."""
        h = read_header(buf)
        if not self._wanted(h, topic, partition, segment):
            return h.next_offset
        crc_ok = crc_of(buf, 0, h.size) == h.crc
        try:
            records = list(RecordBatch(buf, validate=False).records())
            stray = next((r.offset for r in records if not h.base_offset <= r.offset <= h.last_offset), None)
            if stray is not None:
                raise RecordFormatError(
                    f"a record's offset {stray} is outside the batch's {h.base_offset}..{h.last_offset}"
                )
        except RecordFormatError as exc:
            damage = f"batch at offset {h.base_offset} does not decode: {exc}"
            if not crc_ok:
                damage += " (and its CRC does not match)"
            self.add_invalid(topic, partition, h.base_offset, damage, segment, crc_valid=crc_ok, header=h)
            return h.next_offset
        c = self._cols
        codec = _CODECS.get(h.compression, str(h.compression))
        ts_type = LOG_APPEND_TIME if h.is_log_append_time else CREATE_TIME
        error = None if crc_ok else f"CRC mismatch in the batch at offset {h.base_offset}"
        for r in records:
            if not self.bounds.keeps(r.offset, r.timestamp):
                continue
            c["key"].append(r.key)
            c["value"].append(r.value)
            c["topic"].append(topic)
            c["partition"].append(partition)
            c["offset"].append(r.offset)
            c["timestamp"].append(r.timestamp * 1000 if 0 <= r.timestamp <= _LAST_MS else None)
            c["timestampType"].append(ts_type)
            c["headers"].append([{"key": k, "value": v} for k, v in r.headers])
            c["producerId"].append(h.producer_id)
            c["producerEpoch"].append(h.producer_epoch)
            c["sequence"].append(
                (h.base_sequence + r.offset - h.base_offset) % _SEQUENCES if h.base_sequence >= 0 else -1
            )
            c["leaderEpoch"].append(h.partition_leader_epoch)
            c["isTransactional"].append(h.is_transactional)
            c["isControl"].append(h.is_control)
            c["codec"].append(codec)
            c["batchOffset"].append(h.base_offset)
            c["crcValid"].append(crc_ok)
            c["valid"].append(crc_ok)
            c["error"].append(error)
            c["segment"].append(segment)
            self._bytes += len(r.key or b"") + len(r.value or b"")
        if not crc_ok:
            self.invalid += len(records)
        return h.next_offset


class BatchRows(_Columns):
    """Like :class:`Rows`, one row per batch (:data:`~spark_jobs.schema.BATCH_SCHEMA`): its header,
    whether its CRC matches and a digest of its bytes; its records are not decoded.

    A batch is kept when its offsets overlap :attr:`bounds` and its max timestamp is not
    before the start time (its records are not looked at, so a kept batch may hold records
    outside the bounds). ``valid`` is false for a CRC mismatch or a format other than magic 2.
    """

    schema = ARROW_BATCH_SCHEMA

    def __init__(self, *, include_control: bool = False, bounds: Bounds = EVERYTHING, own_earlier: bool = True) -> None:
        super().__init__(include_control=include_control, bounds=bounds)
        #: False: a batch that starts before the bounds is another reader's row (the read that
        #: covers its base offset), so a range split in pieces has each batch once.
        self.own_earlier = own_earlier

    def _owns(self, h: BatchHeader) -> bool:
        return self.own_earlier or h.base_offset >= self.bounds.start_offset

    def add_batch(self, buf: bytes | bytearray | memoryview, topic: str, partition: int, segment: str | None) -> int:
        """One row for the whole batch in ``buf`` (length prefix included); returns the offset after it."""
        h = read_header(buf)
        if not self._wanted(h, topic, partition, segment):
            return h.next_offset
        covered = memoryview(buf)[CRC_START : h.size]
        crc_ok = crc_of(buf, 0, h.size) == h.crc
        c = self._cols
        c["topic"].append(topic)
        c["partition"].append(partition)
        c["offset"].append(h.base_offset)
        c["lastOffset"].append(h.last_offset)
        c["records"].append(h.records_count)
        c["maxTimestamp"].append(h.max_timestamp * 1000 if 0 <= h.max_timestamp <= _LAST_MS else None)
        c["timestampType"].append(LOG_APPEND_TIME if h.is_log_append_time else CREATE_TIME)
        c["producerId"].append(h.producer_id)
        c["producerEpoch"].append(h.producer_epoch)
        c["baseSequence"].append(h.base_sequence)
        c["leaderEpoch"].append(h.partition_leader_epoch)
        c["isTransactional"].append(h.is_transactional)
        c["isControl"].append(h.is_control)
        c["codec"].append(_CODECS.get(h.compression, str(h.compression)))
        c["bytes"].append(h.size)
        c["digest"].append(hashlib.sha256(covered).digest()[:DIGEST_BYTES])
        c["crcValid"].append(crc_ok)
        c["valid"].append(crc_ok)
        c["error"].append(None if crc_ok else f"CRC mismatch in the batch at offset {h.base_offset}")
        c["segment"].append(segment)
        if not crc_ok:
            self.invalid += 1
        return h.next_offset
