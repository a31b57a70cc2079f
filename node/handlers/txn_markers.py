"""WriteTxnMarkers (27): a transaction coordinator ends a transaction on the partitions it wrote.

For each marker (producer id and epoch, COMMIT or ABORT, the coordinator's epoch) and each of its
partitions, this node, which must lead the partition, appends a control batch with
``Partition.append_marker``: the producer's transaction there ends, an ABORT is added to the
log's aborted-transaction index, and the last stable offset moves once the marker is committed.
Kafka writes markers with acks=all, and so does this handler: a partition whose ISR is below
min.insync.replicas answers NOT_ENOUGH_REPLICAS with nothing written, and the answer waits until
every marker written is below its partition's high watermark (REQUEST_TIMED_OUT after
``timeout_s``, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER if leadership moved).

Errors, per partition, as Kafka's: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
INVALID_PRODUCER_EPOCH (an epoch below the producer's), TRANSACTION_COORDINATOR_FENCED (a
coordinator epoch below the last marker's for that producer). A read-only mirror topic answers
POLICY_VIOLATION: its markers are the source's, copied at their offsets. A fenced topic takes
markers: a transaction begun before the fence must still end.

Once the marker of a ``__consumer_offsets`` partition is committed, ``on_offsets_marker`` is
called with (partition index, producer id, commit) so the group coordinator can make that
producer's transactional offsets visible, or drop them.

Authorisation (Kafka's): CLUSTER_ACTION on the cluster (only brokers send it), else every
partition answers CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from node.errors import BrokerError, answer_errors
from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import Struct
from node.request import Deferred, Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, PartitionSource, RequestMetrics, SecurityServices, denied

if TYPE_CHECKING:
    from node.partition import Partition

log = logging.getLogger("strait.node.txn_markers")

DEFAULT_TIMEOUT_S = 30.0  # Kafka waits request.timeout.ms (30 s) for a marker's replication


def ignore_offsets_marker(partition_index: int, producer_id: int, commit: bool) -> None:
    """The default ``on_offsets_marker``: no group coordinator listens."""


@dataclass(frozen=True, slots=True)
class TxnMarkerServices:
    partitions: PartitionSource
    metrics: RequestMetrics
    security: SecurityServices = NO_AUTHORIZER
    #: (``__consumer_offsets`` partition index, producer id, commit) once such a marker is committed.
    on_offsets_marker: Callable[[int, int, bool], None] = ignore_offsets_marker
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class _Written:
    """A marker appended and waiting for its high watermark."""

    entry: dict[str, Any]
    partition: Partition
    offset: int
    topic: str
    producer_id: int
    commit: bool


async def handle_write_txn_markers(services: TxnMarkerServices, request: Request) -> dict[str, Any] | Deferred:
    allowed = services.security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    written: list[_Written] = []
    markers = []
    for marker in request.body.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                entry: dict[str, Any] = {"partition_index": index, "error_code": 0}
                with answer_errors(entry) as answer:
                    if not allowed:
                        raise denied(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
                    written.append(_write(services, marker, topic.name, index, entry))
                if answer.error is not None:
                    _failed(services, answer.error, topic.name, index, marker)
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    body = {"markers": markers}
    if not written:
        return body
    deadline = trio.current_time() + services.timeout_s
    return Deferred(functools.partial(_replicated, services, written, deadline, body))


def _write(services: TxnMarkerServices, marker: Struct, topic: str, index: int, entry: dict[str, Any]) -> _Written:
    partition = services.partitions.partition(topic, index)
    partition.check_writable()
    partition.check_min_isr()
    commit = bool(marker.transaction_result)
    offset = partition.append_marker(marker.producer_id, marker.producer_epoch, commit, marker.coordinator_epoch)
    return _Written(entry, partition, offset, topic, marker.producer_id, commit)


async def _replicated(
    services: TxnMarkerServices, written: list[_Written], deadline: float, body: dict[str, Any]
) -> dict[str, Any]:
    """The answer once each marker is committed, or its error (it was written all the same)."""
    for w in written:
        with answer_errors(w.entry) as answer:
            await w.partition.wait_for_hw(w.offset, deadline)
        if answer.error is not None:
            services.metrics.record_error("WriteTxnMarkers", answer.error.code.name)
            log.info(
                "marker at %s-%d offset %d not committed: %s",
                w.topic,
                w.entry["partition_index"],
                w.offset,
                answer.error.message,
            )
        elif w.topic == OFFSETS_TOPIC:
            services.on_offsets_marker(w.entry["partition_index"], w.producer_id, w.commit)
    return body


def _failed(services: TxnMarkerServices, error: BrokerError, topic: str, index: int, marker: Struct) -> None:
    services.metrics.record_error("WriteTxnMarkers", error.code.name)
    log.info(
        "%s marker of producer %d (epoch %d) refused at %s-%d: %s",
        "COMMIT" if marker.transaction_result else "ABORT",
        marker.producer_id,
        marker.producer_epoch,
        topic,
        index,
        error.message,
    )
