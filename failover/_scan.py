"""Reading one partition's offsets ``[start, end)`` from a site: batches, exact sizes, records.

The RPO ("what the target does not have yet") and the divergence export ("what the old
source has beyond the cut") are both a range of one partition read from a site's leader with
consumer fetches (read_uncommitted: everything below the high watermark, aborted
transactions and control batches included, as the mirror copies them). Records are counted
the way a consumer sees them: control records (transaction markers) are not records, and a
compacted batch counts the records it holds, not its offset span.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from node.client import READ_UNCOMMITTED, ClientError, SiteClient, complete_batches, fetch_partition
from node.protocol import ErrorCode
from storage.records import BatchHeader, Offset, Record, RecordBatch

FETCH_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class RangeSummary:
    """Records and bytes of a range; ``exact`` is False when the scan stopped at ``limit_bytes``
    (the rest is extrapolated from what was read) or the site ended the range early."""

    records: int
    bytes: int
    exact: bool
    scanned_to: Offset


async def batches(
    site: SiteClient, topic: str, partition: int, start: Offset, end: Offset, *, timeout: float = 10.0
) -> AsyncIterator[tuple[BatchHeader, memoryview]]:
    """The whole batches that hold offsets of ``[start, end)``, in order (the first may begin
    before ``start``, the last may reach past ``end``). Stops early when the partition's high
    watermark is below ``end``.

    Raises:
        ClientError: the leader cannot be reached or answers an error.
    """
    offset = start
    conn = await site.open_leader(topic, partition)
    try:
        while offset < end:
            fetched = await fetch_partition(
                conn,
                topic,
                partition,
                offset,
                isolation_level=READ_UNCOMMITTED,
                max_wait_ms=0,
                max_bytes=FETCH_BYTES,
                timeout=timeout,
            )
            if fetched.error_code:
                raise ClientError.from_code(
                    fetched.error_code, f"reading {topic}-{partition} from offset {offset} on site {site.name}"
                )
            progressed = False
            for position, header in complete_batches(fetched.records):
                if header.next_offset <= offset:
                    continue
                if header.base_offset >= end:
                    return
                yield header, fetched.records[position : position + header.size]
                offset = header.next_offset
                progressed = True
            if not progressed:
                return  # nothing more below the high watermark
    finally:
        await conn.aclose()


def records_in(batch: memoryview, start: Offset, end: Offset) -> list[Record]:
    """The data records of one batch whose offsets are in ``[start, end)`` (none for a control batch)."""
    decoded = RecordBatch(batch)
    if decoded.header.is_control:
        return []
    return [r for r in decoded.records() if start <= r.offset < end]


async def summarize(
    site: SiteClient,
    topic: str,
    partition: int,
    start: Offset,
    end: Offset,
    *,
    limit_bytes: int = 64 * 1024 * 1024,
    timeout: float = 10.0,
) -> RangeSummary:
    """Count the data records and bytes of ``[start, end)``; exact unless more than
    ``limit_bytes`` would have to be read (then extrapolated from the part read).

    A batch that straddles ``start`` or ``end`` is decoded to count only its records inside;
    its bytes are counted whole (the target lacks the whole batch: the mirror copies batches).
    """
    if end <= start:
        return RangeSummary(0, 0, True, start)
    records = size = 0
    reached = start
    try:
        async for header, batch in batches(site, topic, partition, start, end, timeout=timeout):
            inside = header.base_offset >= start and header.next_offset <= end
            if header.is_control:
                pass
            elif inside:
                records += header.records_count
            else:
                records += len(records_in(batch, start, end))
            size += header.size
            reached = Offset(min(header.next_offset, end))
            if size >= limit_bytes and reached < end:
                scale = (end - start) / max(1, reached - start)
                return RangeSummary(round(records * scale), round(size * scale), False, reached)
    except ClientError as exc:
        if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return RangeSummary(records, size, False, reached)
        raise
    return RangeSummary(records, size, reached >= end, reached)
