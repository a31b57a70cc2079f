"""WriteTxnMarkers (Kafka's API 27) from the transaction coordinator's side: markers to one node.

The coordinator groups the partitions of each transaction it ends by their leader and sends
each leader one request; the leader answers once every marker is committed (Kafka writes them
with acks=all). Errors come back per (producer id, topic, partition), never raised: a
NOT_LEADER_OR_FOLLOWER means the coordinator must find the new leader and send again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from node.protocol import ApiKey

from ._connection import ClientError, NodeConnection

WRITE_TXN_MARKERS_VERSION = 1
# Beyond the broker's own wait for the high watermark: time for the request and the answer to travel.
_IO_MARGIN_S = 10.0


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's marker for some partitions: COMMIT (``commit``) or ABORT, with the
    producer's id and epoch and the coordinator's epoch."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: Sequence[tuple[str, int]]  # (topic, partition)


async def write_txn_markers(
    conn: NodeConnection, markers: Sequence[TxnMarker], *, timeout: float = 30.0
) -> dict[tuple[int, str, int], int]:
    """Send ``markers`` to the node on ``conn``, which must lead their partitions; returns the
    error code (0: written and committed) of each (producer id, topic, partition).

    ``timeout`` (seconds) is how long the call waits for the answer, which the node sends once
    the markers are replicated. Raises ClientError when the node does not serve WriteTxnMarkers,
    the connection fails, or the answer leaves out a partition that was sent. Cancellable (the
    connection is then unusable).
    """
    version = conn.version(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION)
    body = {
        "markers": [
            {
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "transaction_result": m.commit,
                "topics": [
                    {"name": topic, "partition_indexes": [p for t, p in m.partitions if t == topic]}
                    for topic in dict.fromkeys(t for t, _ in m.partitions)
                ],
                "coordinator_epoch": m.coordinator_epoch,
            }
            for m in markers
        ]
    }
    response = await conn.request(ApiKey.WRITE_TXN_MARKERS, version, body, timeout=timeout + _IO_MARGIN_S)
    codes: dict[tuple[int, str, int], int] = {}
    for marker in response.markers:
        for topic in marker.topics:
            for partition in topic.partitions:
                codes[int(marker.producer_id), topic.name, int(partition.partition_index)] = int(partition.error_code)
    sent = {(m.producer_id, t, p) for m in markers for t, p in m.partitions}
    missing = sent - codes.keys()
    if missing:
        raise ClientError(f"{conn.address} answered WriteTxnMarkers without {sorted(missing)}")
    return codes
