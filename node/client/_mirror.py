"""MirrorAppend (strait's API 1000) from the mirror's side: one partition per call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from node.protocol import ApiKey
from storage.records import NO_OFFSET, Offset

from ._connection import ClientError, NodeConnection

MIRROR_APPEND_VERSION = 0
# Beyond the broker's own wait for the high watermark: time for the request and the answer to travel.
_IO_MARGIN_S = 10.0


@dataclass(frozen=True, slots=True)
class MirrorAppendResult:
    """The target partition's answer. ``error_code`` 0 means appended and committed (or a probe).

    The offsets are the partition's after the call, -1 when the node does not lead or host it;
    with OFFSET_OUT_OF_RANGE ``log_end_offset`` is where the mirror must resume.
    """

    error_code: int
    error_message: str | None
    log_end_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


async def mirror_append(
    conn: NodeConnection,
    link: str,
    topic: str,
    partition: int,
    expected_end: Offset,
    records: bytes | memoryview | Sequence[bytes | memoryview] | None,
    *,
    start_offset: Offset = NO_OFFSET,
    timeout: float = 30,
) -> MirrorAppendResult:
    """Append whole ``records`` batches to ``topic``-``partition`` at the offsets they carry.

    ``records`` may be a list of consecutive record sets (parts of fetch answers): they go on the
    wire one after the other, none copied into another (``node.protocol.encode_request_parts``).

    The target leader takes them only if its log ends at ``expected_end`` and the topic's
    ``strait.mirror.link`` is ``link``; ``start_offset`` past that end first restarts its log
    there (the source deleted records never mirrored). ``records`` None or empty with
    ``start_offset`` -1 is a probe that just answers the offsets. ``timeout`` (seconds) bounds
    the broker's wait for the high watermark; the call itself may take a little longer.

    Kafka errors come back in the result, never raised. Raises ClientError when the node does
    not serve MirrorAppend or the connection fails. Cancellable (the connection is then unusable).
    """
    version = conn.version(ApiKey.MIRROR_APPEND, MIRROR_APPEND_VERSION)
    body = {
        "link": link,
        "timeout_ms": max(0, int(timeout * 1000)),
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "index": partition,
                        "expected_end_offset": expected_end,
                        "start_offset": start_offset,
                        "records": records,
                    }
                ],
            }
        ],
    }
    response = await conn.request(ApiKey.MIRROR_APPEND, version, body, timeout=timeout + _IO_MARGIN_S)
    found = [p for t in response.topics if t.name == topic for p in t.partitions if p.index == partition]
    if len(found) != 1:
        raise ClientError(f"{conn.address} answered MirrorAppend without exactly one entry for {topic}-{partition}")
    (p,) = found
    return MirrorAppendResult(
        error_code=p.error_code,
        error_message=p.error_message,
        log_end_offset=p.log_end_offset,
        high_watermark=p.high_watermark,
        log_start_offset=p.log_start_offset,
    )
