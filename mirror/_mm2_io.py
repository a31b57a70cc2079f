"""Small Kafka client pieces the mm2 mode needs: produce, fetch, list offsets, internal topics, heartbeats, checkpoints.

Each talks to a partition's leader, either on a connection the caller owns (the copier keeps
its own, so a long-polling fetch never holds up anyone else) or through a ``SiteClient``'s
shared connections (``*_to`` helpers: on an error they forget the connection and refresh the
metadata, so the next call follows a moved leader). Kafka errors are raised as ClientError
naming the topic-partition and the site.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import trio

from node.client import ClientError, NodeConnection
from node.protocol import ApiKey, ErrorCode
from storage.records import HEADER_SIZE, LOG_OVERHEAD, BatchBuilder, BatchHeader, Compression, read_header

from ._cluster import SiteClient
from ._mm2_formats import (
    Checkpoint,
    DownstreamOffset,
    UpstreamOffset,
    encode_checkpoint,
    encode_heartbeat_key,
    encode_heartbeat_value,
)
from ._mm2_policy import HEARTBEATS_TOPIC, checkpoints_topic

PRODUCE_VERSION = 8  # the highest non-flexible version
ZSTD_PRODUCE_VERSION = 7  # zstd batches need Produce v7 (KIP-110)
FETCH_VERSION = 11
READ_COMMITTED_FETCH_VERSION = 4  # isolation_level and aborted_transactions appear in Fetch v4
LIST_OFFSETS_VERSION = 5
ACKS_ALL = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST, LATEST = -2, -1
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact"}  # MM2's createSinglePartitionCompactedTopic
CHECKPOINT_CHUNK = 500  # records per produced batch of checkpoints: well under max.message.bytes

T = TypeVar("T")


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
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
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
) -> int:
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
    return int(p.base_offset)


async def fetch_partition(
    conn: NodeConnection,
    topic: str,
    partition: int,
    offset: int,
    *,
    isolation_level: int = READ_COMMITTED,
    max_wait_ms: int = 500,
    max_bytes: int = 4 * 1024 * 1024,
) -> FetchedPartition:
    """A consumer's fetch of one partition from ``offset``. Raises ClientError on I/O failure
    (partition errors come back in ``error_code``). read_committed needs Fetch v4."""
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
    response = await conn.request(ApiKey.FETCH, version, body, timeout=30 + max_wait_ms / 1000)
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


async def list_offset(conn: NodeConnection, topic: str, partition: int, timestamp: int) -> int:
    """ListOffsets for one partition: EARLIEST (-2), LATEST (-1, the high watermark) or a time. Raises ClientError."""
    version = conn.version(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION)
    if version < 1:
        raise ClientError(f"{conn.address} serves only ListOffsets v0")
    body = {
        "replica_id": -1,
        "isolation_level": READ_UNCOMMITTED,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}],
    }
    response = await conn.request(ApiKey.LIST_OFFSETS, version, body, timeout=30)
    found = [p for t in response.topics if t.name == topic for p in t.partitions if p.partition_index == partition]
    if len(found) != 1:
        raise ClientError(f"{conn.address} answered ListOffsets without exactly one entry for {topic}-{partition}")
    (p,) = found
    if p.error_code:
        raise ClientError.from_code(p.error_code, f"ListOffsets {topic}-{partition} on {conn.address}")
    return int(p.offset)


async def open_leader(site: SiteClient, topic: str, partition: int) -> NodeConnection:
    """A new connection (the caller's own) to the partition's leader, from fresh metadata. Raises ClientError."""
    await site.refresh([topic])
    leader = site.leader(topic, partition)
    address = site.brokers.get(leader)
    if leader < 0 or address is None:
        meta = site.topics.get(topic)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if meta is None else ErrorCode.LEADER_NOT_AVAILABLE
        raise ClientError.from_code(code, f"site {site.name}: {topic}-{partition} has no leader")
    return await site.open(address)


# -- requests through a SiteClient's shared connections ------------------------------------------


async def on_leader(
    site: SiteClient, topic: str, partition: int, call: Callable[[NodeConnection], Awaitable[T]], *, attempts: int = 5
) -> T:
    """Run ``call`` on the partition leader's shared connection; after an error forget the
    connection, refresh the metadata and try again (backing off 0.2 s, 0.4 s, ...: a topic just
    created may not be served by its leader yet), up to ``attempts`` times. Raises the last
    ClientError. Only for calls that may safely run twice."""
    last: ClientError | None = None
    for attempt in range(attempts):
        broker = -1
        if attempt:
            await trio.sleep(0.2 * attempt)
        try:
            if site.leader(topic, partition) < 0 or attempt > 0:
                await site.refresh([topic])
            broker, conn = await site.leader_connection(topic, partition)
            return await call(conn)
        except ClientError as exc:
            last = exc
            if broker >= 0:
                await site.forget(broker)
    assert last is not None
    raise last


async def ensure_topic(
    site: SiteClient, name: str, *, partitions: int = 1, configs: dict[str, str] | None = None, wait_s: float = 10.0
) -> bool:
    """Create ``name`` when the site lacks it (default replication factor), then wait until its
    partitions have leaders. Returns True when this call created it. Raises ClientError (also
    after ``wait_s`` seconds without leaders)."""
    meta = site.topics.get(name)
    if meta is not None and meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()):
        return False
    fresh = await site.refresh([name])
    created = False
    if name not in fresh:
        try:
            await site.create_topic(name, partitions, dict(INTERNAL_TOPIC_CONFIGS if configs is None else configs))
            created = True
        except ClientError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
    with trio.move_on_after(wait_s):
        while True:
            meta = (await site.refresh([name])).get(name)
            if meta is not None and meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()):
                return created
            await trio.sleep(0.1)
    raise ClientError(
        f"site {site.name}: topic {name!r} has no leader after {wait_s} s", ErrorCode.LEADER_NOT_AVAILABLE
    )


async def produce_records(
    site: SiteClient,
    topic: str,
    partition: int,
    records: Sequence[ProduceRecord],
    *,
    compression: Compression = Compression.NONE,
    timeout_ms: int = 30_000,
) -> int:
    """Build one batch of ``records`` and produce it (acks=all) to the partition leader; returns the base offset.

    Retried once after a leader move, so a record may be written twice: use it for records
    whose repetition is harmless (offset syncs, heartbeats, checkpoints). Raises ClientError.
    """
    batch = build_records(records, compression)
    return await on_leader(site, topic, partition, lambda conn: produce_batch(conn, topic, partition, batch))


async def emit_heartbeat(site: SiteClient, source_alias: str, target_alias: str, *, now_ms: int | None = None) -> int:
    """Produce one MM2 heartbeat (source alias, target alias, now) into ``heartbeats`` on ``site``
    (the target), creating that topic when missing (1 partition, compacted). Returns its offset.
    Raises ClientError."""
    await ensure_topic(site, HEARTBEATS_TOPIC, configs=INTERNAL_TOPIC_CONFIGS)
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    record = ProduceRecord(encode_heartbeat_key(source_alias, target_alias), encode_heartbeat_value(ts), (), ts)
    return await produce_records(site, HEARTBEATS_TOPIC, 0, [record])


CheckpointLike = Checkpoint | tuple[str, str, int, int, int, str | None]


async def write_checkpoints(
    site: SiteClient, source_alias: str, checkpoints: Sequence[CheckpointLike], *, now_ms: int | None = None
) -> int:
    """Produce MM2 checkpoints into ``<source alias>.checkpoints.internal`` on ``site`` (the target),
    creating it when missing (1 partition, compacted). Returns how many were written.

    Each entry is a ``Checkpoint`` or ``(group, topic, partition, upstream, downstream, metadata)``
    where ``topic`` is the **target-side** name (``checkpoint_topic_name`` gives it; MM2 keys
    checkpoints by the remote topic-partition) and a None metadata is written as "" (as Kafka's
    OffsetAndMetadata does). Raises ClientError, or MM2FormatError for a string over 32767 bytes.
    """
    entries = [c if isinstance(c, Checkpoint) else _as_checkpoint(c) for c in checkpoints]
    if not entries:
        return 0
    topic = checkpoints_topic(source_alias)
    await ensure_topic(site, topic, configs=INTERNAL_TOPIC_CONFIGS)
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    records = [ProduceRecord(*encode_checkpoint(c), (), ts) for c in entries]
    for start in range(0, len(records), CHECKPOINT_CHUNK):
        await produce_records(site, topic, 0, records[start : start + CHECKPOINT_CHUNK])
    return len(records)


def _as_checkpoint(entry: tuple[str, str, int, int, int, str | None]) -> Checkpoint:
    group, topic, partition, upstream, downstream, metadata = entry
    return Checkpoint(group, topic, partition, UpstreamOffset(upstream), DownstreamOffset(downstream), metadata or "")
