"""``__transaction_state``: where the transaction coordinator keeps its records, and how it reaches partition leaders.

The topic is internal and made on first use (FindCoordinator with key type 1), with
``transaction.state.log.num.partitions`` partitions, ``transaction.state.log.replication.factor``
replicas and ``min.insync.replicas`` = ``transaction.state.log.min.isr``, compacted as Kafka makes
it. A transactional id lives in partition ``hash(id) % partitions``; the broker that leads that
partition is its coordinator. When a node starts leading such a partition it replays the
partition's records into the coordinator (``sync_coordinator``), with the partition's leader
epoch as the coordinator epoch; records are appended to it and acknowledged only once committed
(acks=all, as Kafka's coordinator writes them).

``ClusterMarkerWriter`` is the coordinator's way to the partition leaders: it sends WriteTxnMarkers
(API 27) with ``node.client`` over the inter-broker listener.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from node.client import ClientError, NodeConnection, write_txn_markers
from node.client import TxnMarker as ClientTxnMarker
from node.ids import NodeId
from node.offsets_topic import InternalAppendError, append_committed, local_batches
from node.protocol import ProtocolError
from node.tls import inter_broker_context, inter_broker_sasl
from node.txn import NO_LEADER, MarkerWriteError, TransactionCoordinator, TxnMarker, TxnStoreError
from storage import TopicPartition
from storage.records import build_batch

if TYPE_CHECKING:
    from node.cluster import ClusterState
    from node.config import NodeConfig

log = logging.getLogger("strait.node.txn")

TRANSACTION_TOPIC = "__transaction_state"
MARKERS_TIMEOUT_S = 30.0  # how long a WriteTxnMarkers call waits for its markers to be replicated


def transaction_topic_config(config: NodeConfig) -> dict[str, str]:
    """The topic configs ``__transaction_state`` is made with (Kafka's, from the broker's transaction keys)."""
    return {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(config.transaction_state_log_min_isr),
        "segment.bytes": str(config.transaction_state_log_segment_bytes),
    }


class TxnTopicStore:
    """The coordinator's ``TxnLogStore``: appends to the local ``__transaction_state`` partitions (acks=all)."""

    def __init__(self, cluster: Callable[[], ClusterState]) -> None:
        self._cluster = cluster

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        now = int(time.time() * 1000)
        batch = build_batch([(now, key, value) for key, value in records])
        try:
            await append_committed(self._cluster(), TRANSACTION_TOPIC, partition, batch)
        except InternalAppendError as exc:
            raise TxnStoreError(str(exc)) from None


def read_records(cluster: ClusterState, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of a local ``__transaction_state`` partition, in offset order."""
    for header, batch, start in local_batches(cluster, TRANSACTION_TOPIC, partition):
        if not header.is_control:
            yield from ((r.key, r.value) for r in batch.records() if r.offset >= start)


def sync_coordinator(cluster: ClusterState, coordinator: TransactionCoordinator) -> None:
    """Load the ``__transaction_state`` partitions this node now leads (again when their leader epoch
    changed: a new coordinator epoch); unload the ones it lost."""
    topic = cluster.topics.get(TRANSACTION_TOPIC)
    led: dict[int, int] = {}  # partition -> leader epoch
    if topic is not None:
        for p in topic.assignment:
            local = cluster.partitions.get(TopicPartition(TRANSACTION_TOPIC, p))
            if local is not None and local.is_leader:
                led[p] = local.leader_epoch
    for p, epoch in sorted(led.items()):
        if coordinator.coordinator_epoch(p) != epoch:
            started = time.monotonic()
            coordinator.load_partition(p, read_records(cluster, p), epoch)
            log.info(
                "loaded %s-%d (coordinator epoch %d) in %.3f s", TRANSACTION_TOPIC, p, epoch, time.monotonic() - started
            )
    for p in range(max(len(topic.assignment) if topic else 0, coordinator.config.state_partitions)):
        if p not in led and coordinator.is_loaded(p):
            coordinator.unload_partition(p)
            log.info("unloaded %s-%d", TRANSACTION_TOPIC, p)


class ClusterMarkerWriter:
    """The coordinator's ``MarkerWriter``: WriteTxnMarkers to partition leaders over the inter-broker listener.

    One connection per broker, opened on first use and dropped when it fails (the next call opens
    a new one).
    """

    def __init__(self, config: NodeConfig, cluster: Callable[[], ClusterState]) -> None:
        self._config = config
        self._cluster = cluster
        self._connections: dict[int, NodeConnection] = {}
        self._opening: dict[int, trio.Lock] = {}

    def leader_of(self, topic: str, partition: int) -> int | None:
        cluster = self._cluster()
        state = cluster.topics.get(topic)
        if state is None or partition not in state.assignment:
            return None
        leader = cluster.leader_of(state, partition)
        return int(leader) if leader >= 0 and leader in cluster.brokers else NO_LEADER

    async def write_markers(self, node_id: int, markers: Sequence[TxnMarker]) -> Mapping[tuple[str, int], int]:
        sent = [
            ClientTxnMarker(
                m.producer_id,
                m.producer_epoch,
                m.commit,
                m.coordinator_epoch,
                list(m.partitions),
            )
            for m in markers
        ]
        try:
            conn = await self._connection(node_id)
            answers = await write_txn_markers(conn, sent, timeout=MARKERS_TIMEOUT_S)
        except (ClientError, ProtocolError) as exc:
            await self.drop(node_id)
            raise MarkerWriteError(f"WriteTxnMarkers to node {node_id}: {exc}") from None
        return {(topic, partition): code for (_, topic, partition), code in answers.items()}

    async def _connection(self, node_id: int) -> NodeConnection:
        lock = self._opening.setdefault(node_id, trio.Lock())
        async with lock:
            conn = self._connections.get(node_id)
            if conn is None:
                registration = self._cluster().brokers.get(NodeId(node_id))
                if registration is None:
                    raise ClientError(f"broker {node_id} is not live")
                config = self._config
                conn = await NodeConnection.open(
                    f"{registration.host}:{registration.port}",
                    client_id=f"strait-txn-coordinator-{config.broker_id}",
                    ssl_context=inter_broker_context(config),
                    sasl=inter_broker_sasl(config),
                )
                self._connections[node_id] = conn
            return conn

    async def drop(self, node_id: int) -> None:
        conn = self._connections.pop(node_id, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async def aclose(self) -> None:
        for node_id in list(self._connections):
            await self.drop(node_id)
