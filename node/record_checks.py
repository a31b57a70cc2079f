"""What a topic's settings require of a produced batch beyond its framing: keys, and the codec.

The produce path stores a batch as its producer built it and never decompresses it, except
where the topic asks for more, as Kafka's ``LogValidator`` does:

- **A compacted topic** (``cleanup.policy`` includes ``compact``) needs a key on every record:
  compaction keeps the latest record per key, and a record without one could never be
  superseded or deleted. A batch with a keyless record is refused whole with INVALID_RECORD,
  and each such record is named in the answer's ``record_errors`` (KIP-467, Produce v8+), so
  the producer can tell which ones failed; none of the batch's records is stored.
- **A topic with a codec as ``compression.type``** (not ``producer``) stores every batch with
  that codec: a batch produced with another is recompressed (``storage.records.recompress``:
  the records' bytes stay, the block around them and the CRC are new). Batches already in the
  topic's codec take the fast path untouched.

Both are slow paths that decode a batch; topics that ask for neither never pay for them.
"""

from __future__ import annotations

from node.errors import BrokerError
from node.protocol import ErrorCode
from storage.records import BatchHeader, Compression, RecordBatch, RecordFormatError, read_header, recompress

__all__ = ["conform_batch", "target_codec"]

#: Kafka shows at most this many record errors in the error message (all are in record_errors).
SHOWN_RECORD_ERRORS = 3


def target_codec(compression_type: str) -> Compression | None:
    """The codec a topic's ``compression.type`` stores batches with; None for ``producer``."""
    if compression_type == "producer":
        return None
    if compression_type == "uncompressed":
        return Compression.NONE
    return Compression.from_name(compression_type)


def conform_batch(
    tp: object,
    batch: memoryview,
    header: BatchHeader,
    *,
    compacted: bool,
    compression_type: str,
) -> tuple[memoryview | bytes, BatchHeader]:
    """The batch to store for a produced ``batch`` (already framed and CRC-checked), and its header.

    Raises BrokerError: INVALID_RECORD (with ``record_errors``) for keyless records in a compacted
    topic, CORRUPT_MESSAGE for a block that cannot be decompressed or decoded.
    """
    if compacted:
        _check_keys(tp, batch)
    codec = target_codec(compression_type)
    if codec is None or header.compression == codec:
        return batch, header
    try:
        stored = recompress(batch, codec)
    except RecordFormatError as exc:
        raise BrokerError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: cannot recompress the batch: {exc}") from None
    return stored, read_header(stored)


def _check_keys(tp: object, batch: memoryview) -> None:
    why = f"Compacted topic cannot accept message without key in topic partition {tp}."
    try:
        keyless = [i for i, record in enumerate(RecordBatch(batch, validate=False).records()) if record.key is None]
    except RecordFormatError as exc:
        raise BrokerError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: cannot read the batch's records: {exc}") from None
    if not keyless:
        return
    shown = ", ".join(f"record {i}" for i in keyless[:SHOWN_RECORD_ERRORS])
    more = f" and {len(keyless) - SHOWN_RECORD_ERRORS} more" if len(keyless) > SHOWN_RECORD_ERRORS else ""
    raise BrokerError(
        ErrorCode.INVALID_RECORD,
        f"{tp}: one or more records have been rejected ({len(keyless)} in all: {shown}{more}): {why}",
        record_errors=[(i, why) for i in keyless],
    )
