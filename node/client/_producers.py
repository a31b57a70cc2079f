"""A partition's producers and their open transactions, from the outside: DescribeProducers (61,
KIP-664) and aborting one of them with WriteTxnMarkers (27), as Kafka's ``Admin.describeProducers``
and ``Admin.abortTransaction`` (what ``kafka-transactions.sh find-hanging`` and ``abort`` use).

Both go to each partition's leader through a ``Route``. An abort is for a transaction whose
coordinator cannot end it: it was lost (a hanging transaction), or it lives on another site (a
mirror's transactions after a failover). It writes an ABORT marker with the producer's own id and
epoch and the coordinator epoch of its last marker, so the partition takes it as the coordinator's;
the node needs CLUSTER_ACTION on the cluster from the caller, as Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from node.protocol import ApiKey, ErrorCode

from ._connection import ClientError
from ._site import Route

DESCRIBE_PRODUCERS_VERSION = 0
WRITE_TXN_MARKERS_VERSION = 1


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One producer id as a partition's leader holds it (DescribeProducers' ``active_producers``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int  # the max timestamp of the producer's last batch; -1: unknown
    coordinator_epoch: int  # of the producer's last marker in the partition, -1 before any
    txn_start_offset: int  # the first offset of its open transaction there, -1 when none is open

    @property
    def in_transaction(self) -> bool:
        return self.txn_start_offset >= 0


@dataclass(frozen=True, slots=True)
class TxnAbort:
    """An ABORT marker to write in one partition for a producer's open transaction."""

    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    @classmethod
    def of(cls, partition: int, state: ProducerState) -> TxnAbort:
        """The abort of ``state``'s open transaction: its epoch, and its last marker's coordinator
        epoch (0 before any), which the partition's fencing rules accept."""
        return cls(partition, state.producer_id, state.producer_epoch, max(0, state.coordinator_epoch))


async def describe_producers(
    route: Route, topic: str, partitions: Sequence[int]
) -> dict[int, list[ProducerState] | ClientError]:
    """Every producer each partition's leader holds, or that partition's error (NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, or missing from the answers).

    Raises ClientError when a leader cannot be reached or does not serve DescribeProducers.
    """

    def body(version: int, parts: list[int]) -> dict[str, Any]:
        return {"topics": [{"name": topic, "partition_indexes": parts}]}

    out: dict[int, list[ProducerState] | ClientError] = {
        p: ClientError(f"DescribeProducers {topic}-{p}{route.where}: no leader answered for it") for p in partitions
    }
    responses = await route.on_leaders(
        topic, list(partitions), ApiKey.DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_VERSION, body
    )
    for response in responses:
        for t in response.topics:
            if t.name != topic:
                continue
            for p in t.partitions:
                index = int(p.partition_index)
                if p.error_code:
                    out[index] = ClientError.from_code(
                        p.error_code, f"DescribeProducers {topic}-{index}{route.where}", p.error_message
                    )
                    continue
                out[index] = [
                    ProducerState(
                        int(s.producer_id),
                        int(s.producer_epoch),
                        int(s.last_sequence),
                        int(s.last_timestamp),
                        int(s.coordinator_epoch),
                        int(s.current_txn_start_offset),
                    )
                    for s in p.active_producers
                ]
    return out


async def abort_transactions(route: Route, topic: str, aborts: Iterable[TxnAbort]) -> dict[tuple[int, int], int]:
    """Write each ABORT marker on its partition's leader; the error code (0: written and committed)
    of each (partition, producer id). A partition without a known leader, or left out of an
    answer, gets LEADER_NOT_AVAILABLE.

    Raises ClientError when a leader cannot be reached (markers already written stay written:
    describe the producers again before retrying).
    """
    wanted = list(aborts)
    by_partition: dict[int, list[TxnAbort]] = {}
    for abort in wanted:
        by_partition.setdefault(abort.partition, []).append(abort)

    def body(version: int, parts: list[int]) -> dict[str, Any]:
        return {
            "markers": [
                {
                    "producer_id": a.producer_id,
                    "producer_epoch": a.producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [a.partition]}],
                    "coordinator_epoch": a.coordinator_epoch,
                }
                for p in parts
                for a in by_partition.get(p, [])
            ]
        }

    codes = {(a.partition, a.producer_id): int(ErrorCode.LEADER_NOT_AVAILABLE) for a in wanted}  # until answered
    if not wanted:
        return codes
    responses = await route.on_leaders(
        topic, sorted(by_partition), ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body
    )
    for response in responses:
        for marker in response.markers:
            for t in marker.topics:
                if t.name != topic:
                    continue
                for p in t.partitions:
                    codes[int(p.partition_index), int(marker.producer_id)] = int(p.error_code)
    return codes
