"""``__consumer_offsets``: where the group coordinator keeps committed offsets and group metadata.

The topic is internal and made on first use (FindCoordinator), with
``offsets.topic.num.partitions`` partitions and ``offsets.topic.replication.factor``
replicas (refused, as in Kafka, while fewer brokers are live; the coordinator is then
unavailable). A group lives in partition ``hash(group) % partitions``; the broker that leads
that partition is the group's coordinator. When a node starts leading such a partition it
replays the partition's records into the coordinator (``load``); commits are appended to it
and acknowledged only once committed, below the high watermark (``OffsetsTopicStore.append``).
The topic is replicated like any other. Offsets of a transaction (TxnOffsetCommit) are a
transactional batch of its producer, counted at load once the producer's COMMIT marker follows.

The topic is compacted (``cleanup.policy=compact``, segments of ``offsets.topic.segment.bytes``):
the node's cleaner keeps the latest record per key and drops tombstones after
``delete.retention.ms``, so a load replays little more than the live offsets.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import trio

from node.errors import BrokerError
from node.groups import GroupCoordinator, LogEntry, OffsetStoreError, TxnEnd, TxnRecord
from storage import TopicPartition
from storage.records import CONTROL_COMMIT, BatchBuilder, BatchHeader, RecordBatch, build_batch, iter_batches

if TYPE_CHECKING:
    from node.cluster import ClusterState

log = logging.getLogger("strait.node.offsets")

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact"}
LOAD_CHUNK_BYTES = 4 * 1024 * 1024
COMMIT_WAIT_CAP_S = 60.0
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type (0 ABORT, 1 COMMIT)


class InternalAppendError(Exception):
    """An append to a node-internal topic (``__consumer_offsets``, ``__transaction_state``) failed: names it."""


async def append_committed(cluster: ClusterState, topic: str, partition: int, batch: bytes) -> None:
    """Append ``batch`` (built by this node) to the local leader of ``topic``-``partition``; return once committed.

    Acknowledged only once committed (acks=all), as Kafka's coordinators write. Raises
    InternalAppendError when the partition is not led here, the append fails, or the high watermark
    does not pass the batch within COMMIT_WAIT_CAP_S (the caller's own timeout is usually shorter).
    """
    local = cluster.partitions.get(TopicPartition(topic, partition))
    if local is None or local.log.is_offline or not local.is_leader:
        raise InternalAppendError(f"{topic}-{partition} is not led by this broker")
    try:
        last = local.append_internal(batch)
    except Exception as exc:
        raise InternalAppendError(f"appending to {topic}-{partition} failed: {exc}") from exc
    try:
        await local.wait_for_hw(last, trio.current_time() + COMMIT_WAIT_CAP_S)
    except BrokerError as exc:
        raise InternalAppendError(f"{topic}-{partition}: {exc.message}") from None


def local_batches(cluster: ClusterState, topic: str, partition: int) -> Iterator[tuple[BatchHeader, RecordBatch, int]]:
    """Every batch of the local replica of ``topic``-``partition`` up to its log end, in offset order, with the
    offset reading resumed at (records of the batch below it were read already)."""
    plog = cluster.partitions[TopicPartition(topic, partition)].log
    offset = plog.log_start_offset
    # A new leader's log is the partition's truth; its high watermark may still lag behind.
    end = plog.log_end_offset
    while offset < end:
        data = plog.read_bytes(offset, LOAD_CHUNK_BYTES, max_offset=end)
        if not data:
            break
        view = memoryview(data)
        for pos, header in iter_batches(view):
            yield header, RecordBatch(view[pos : pos + header.size], validate=False), offset
            offset = header.next_offset


class OffsetsTopicStore:
    """The coordinator's ``OffsetStore``: appends to the local ``__consumer_offsets`` partitions."""

    def __init__(self, cluster: Callable[[], ClusterState]) -> None:
        self._cluster = cluster

    async def append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer: tuple[int, int] | None = None
    ) -> None:
        now = int(time.time() * 1000)
        if producer is None:
            batch = build_batch([(now, key, value) for key, value in records])
        else:  # TxnOffsetCommit: a transactional batch of the producer, as Kafka's coordinator writes it
            builder = BatchBuilder(producer_id=producer[0], producer_epoch=producer[1], transactional=True)
            for key, value in records:
                builder.append(now, key, value)
            batch = builder.build()
        try:
            await append_committed(self._cluster(), OFFSETS_TOPIC, partition, batch)
        except InternalAppendError as exc:
            raise OffsetStoreError(str(exc)) from None


def read_records(cluster: ClusterState, partition: int) -> Iterator[LogEntry]:
    """Every record of a local ``__consumer_offsets`` partition, in offset order: (key, value), or
    ``TxnRecord`` in a transactional batch; and ``TxnEnd`` for each transaction marker."""
    for header, batch, start in local_batches(cluster, OFFSETS_TOPIC, partition):
        for record in batch.records():
            if header.is_control:
                if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
                    _version, kind = _CONTROL_KEY.unpack_from(record.key)
                    yield TxnEnd(header.producer_id, kind == CONTROL_COMMIT)
            elif record.offset < start:
                continue
            elif header.is_transactional:
                yield TxnRecord(header.producer_id, record.key, record.value)
            else:
                yield record.key, record.value


def sync_coordinator(cluster: ClusterState, coordinator: GroupCoordinator) -> None:
    """Load the ``__consumer_offsets`` partitions this node now leads; unload the ones it lost."""
    topic = cluster.topics.get(OFFSETS_TOPIC)
    local = set()
    if topic is not None:
        local = {
            p
            for p in topic.assignment
            if (lp := cluster.partitions.get(TopicPartition(OFFSETS_TOPIC, p))) is not None and lp.is_leader
        }
    for p in sorted(local):
        if not coordinator.is_loaded(p):
            started = time.monotonic()
            coordinator.load_partition(p, read_records(cluster, p))
            log.info("loaded %s-%d in %.3f s", OFFSETS_TOPIC, p, time.monotonic() - started)
    for p in range(max(len(topic.assignment) if topic else 0, coordinator.config.offsets_partitions)):
        if p not in local and coordinator.is_loaded(p):
            coordinator.unload_partition(p)
            log.info("unloaded %s-%d", OFFSETS_TOPIC, p)
