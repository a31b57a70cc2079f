"""Data verbs: produce, fetch and list offsets of one partition, and the record-set helpers they need.

Each talks to a partition's leader, either on a connection the caller owns (a copier keeps its
own, so a long-polling fetch never holds up anyone else) or through a ``Route`` (a
``SiteClient``'s shared connections: on an error they forget the connection and refresh the
metadata, so the next call follows a moved leader). Kafka errors are raised as ClientError
naming the topic-partition and where it was sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import trio

from node.protocol import ApiKey, ErrorCode
from storage.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_OFFSET,
    BatchBuilder,
    BatchHeader,
    Compression,
    Offset,
    read_header,
)

from ._connection import ClientError, NodeConnection
from ._site import NodeRoute, Route, SiteClient

PRODUCE_VERSION = 8  # the highest non-flexible version
ZSTD_PRODUCE_VERSION = 7  # zstd batches need Produce v7 (KIP-110)
FETCH_VERSION = 11
READ_COMMITTED_FETCH_VERSION = 4  # isolation_level and aborted_transactions appear in Fetch v4
LIST_OFFSETS_VERSION = 5
#: How long ListOffsets asks again a leader that answers OFFSET_NOT_AVAILABLE (just elected, its
#: high watermark behind the start of its epoch until its followers fetch), and how often.
_LAGGING_RETRY_S = 5.0
_LAGGING_RETRY_PAUSE_S = 0.05
ACKS_ALL = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST, LATEST = -2, -1  # ListOffsets targets: the log start, the high watermark


class ProduceRecord(NamedTuple):
    """One record to produce: key, value, headers (name, value) and CreateTime in ms (None: now)."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch answer. ``aborted`` holds (producer id, first offset) pairs (read_committed)."""

    error_code: int
    high_watermark: Offset
    last_stable_offset: Offset
    log_start_offset: Offset
    aborted: tuple[tuple[int, int], ...]
    records: memoryview


def complete_batches(view: memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in a fetched record set; a batch cut short by the
    fetch size limit at the end is left out (the next fetch returns it whole). Raises ClientError
    for a batch whose length field cannot be right (no CRC check here)."""
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise ClientError(f"a fetched batch at byte {pos} has an impossible batchLength {header.batch_length}")
        if header.size > len(view) - pos:
            return
        yield pos, header
        pos += header.size


def build_records(records: Sequence[ProduceRecord], compression: Compression = Compression.NONE) -> bytes:
    """One magic-2 batch (no producer id) of ``records``; a missing timestamp is now. Raises ValueError when empty."""
    builder = BatchBuilder(compression=compression)
    now = int(time.time() * 1000)
    for r in records:
        builder.append(now if r.timestamp_ms is None else r.timestamp_ms, r.key, r.value, tuple(r.headers))
    return builder.build()


# -- requests on a connection the caller owns ----------------------------------------------------


async def produce_batch(
    conn: NodeConnection, topic: str, partition: int, batch: bytes | memoryview, *, timeout_ms: int = 30_000
) -> Offset:
    """Produce one whole batch with acks=all; returns the base offset the leader gave it.

    Picks the highest Produce version both sides speak (zstd needs v7). Raises ClientError with
    the partition's error code, or when the connection fails (the batch may then have been
    written: the caller must find out). Cancellable.
    """
    version = conn.version(ApiKey.PRODUCE, PRODUCE_VERSION)
    if read_header(batch).compression == Compression.ZSTD and version < ZSTD_PRODUCE_VERSION:
        raise ClientError(f"{conn.address} serves Produce up to v{version}; zstd batches need v7")
    body = {
        "transactional_id": None,
        "acks": ACKS_ALL,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    response = await conn.request(ApiKey.PRODUCE, version, body, timeout=timeout_ms / 1000 + 10)
    found = [p for t in response.responses if t.name == topic for p in t.partition_responses if p.index == partition]
    if len(found) != 1:
        raise ClientError(f"{conn.address} answered Produce without exactly one entry for {topic}-{partition}")
    (p,) = found
    if p.error_code:
        raise ClientError.from_code(
            p.error_code, f"producing to {topic}-{partition} on {conn.address}", getattr(p, "error_message", None)
        )
    return Offset(int(p.base_offset))


async def fetch_partition(
    conn: NodeConnection,
    topic: str,
    partition: int,
    offset: Offset,
    *,
    isolation_level: int = READ_COMMITTED,
    max_wait_ms: int = 500,
    max_bytes: int = 4 * 1024 * 1024,
    timeout: float = 30.0,
) -> FetchedPartition:
    """A consumer's fetch of one partition from ``offset``; the request may take ``timeout``
    seconds beyond ``max_wait_ms``. Raises ClientError on I/O failure (partition errors come back
    in ``error_code``). read_committed needs Fetch v4."""
    version = conn.version(ApiKey.FETCH, FETCH_VERSION)
    if isolation_level == READ_COMMITTED and version < READ_COMMITTED_FETCH_VERSION:
        raise ClientError(f"{conn.address} serves Fetch up to v{version}; read_committed needs v4")
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    response = await conn.request(ApiKey.FETCH, version, body, timeout=timeout + max_wait_ms / 1000)
    found = [p for t in response.responses if t.topic == topic for p in t.partitions if p.partition_index == partition]
    if len(found) != 1:
        raise ClientError(f"{conn.address} answered Fetch without exactly one entry for {topic}-{partition}")
    (p,) = found
    aborted = tuple((int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ()))
    return FetchedPartition(
        error_code=p.error_code,
        high_watermark=p.high_watermark,
        last_stable_offset=p.last_stable_offset,
        log_start_offset=p.log_start_offset,
        aborted=aborted,
        records=memoryview(p.records if p.records is not None else b""),
    )


async def list_offset(conn: NodeConnection, topic: str, partition: int, timestamp: int) -> Offset:
    """ListOffsets for one partition: EARLIEST (-2), LATEST (-1, the high watermark) or a time. Raises ClientError."""
    route = NodeRoute(conn, where=f" on {conn.address}")
    return (await list_offsets(route, topic, [partition], timestamp))[partition]


# -- requests through a route ----------------------------------------------------------------------


async def list_offsets(
    route: Route,
    topic: str,
    partitions: list[int],
    timestamp: int,
    *,
    strict: bool = True,
    isolation_level: int = READ_UNCOMMITTED,
) -> dict[int, Offset]:
    """Each partition's offset at a ListOffsets target: EARLIEST (-2), LATEST (-1) or a time in ms,
    asked of the partitions' leaders (read_committed: LATEST is the last stable offset).

    A partition error, or a partition the answer leaves out, raises ClientError, or gives -1 when
    ``strict`` is False; OFFSET_NOT_AVAILABLE is asked again for up to 5 s first. Raises
    ClientError when a leader cannot be reached.
    """

    def body(version: int, parts: list[int]) -> dict[str, Any]:
        if version < 1:
            raise ClientError(f"a node{route.where} serves only ListOffsets v0")
        return {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [{"name": topic, "partitions": [{"partition_index": p, "timestamp": timestamp} for p in parts]}],
        }

    out = dict.fromkeys(partitions, NO_OFFSET)
    answered: set[int] = set()
    asked, deadline = list(partitions), trio.current_time() + _LAGGING_RETRY_S
    while asked:
        responses = await route.on_leaders(topic, asked, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        lagging: list[int] = []
        for response in responses:
            for t in response.topics:
                if t.name != topic:
                    continue
                for p in t.partitions:
                    index = p.partition_index
                    answered.add(index)
                    if p.error_code == 0:
                        out[index] = Offset(int(p.offset))
                    elif p.error_code == ErrorCode.OFFSET_NOT_AVAILABLE and trio.current_time() < deadline:
                        lagging.append(index)  # a leader just elected: it knows its end in a moment
                    elif strict:
                        raise ClientError.from_code(p.error_code, f"ListOffsets {topic}-{index}{route.where}")
        asked = lagging
        if asked:
            await trio.sleep(_LAGGING_RETRY_PAUSE_S)
    missing = [p for p in partitions if p not in answered]
    if strict and missing:
        raise ClientError(f"ListOffsets{route.where} answered nothing for {topic} partitions {missing}")
    return out


async def produce_records(
    site: SiteClient,
    topic: str,
    partition: int,
    records: Sequence[ProduceRecord],
    *,
    compression: Compression = Compression.NONE,
    timeout_ms: int = 30_000,
) -> Offset:
    """Build one batch of ``records`` and produce it (acks=all) to the partition leader; returns the base offset.

    Retried once after a leader move, so a record may be written twice: use it for records
    whose repetition is harmless (offset syncs, heartbeats, checkpoints). Raises ClientError.
    """
    batch = build_records(records, compression)
    return await site.on_leader(
        topic, partition, lambda conn: produce_batch(conn, topic, partition, batch, timeout_ms=timeout_ms)
    )
