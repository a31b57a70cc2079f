"""DescribeProducers (61, KIP-664): the producer state of partitions this node leads.

For each partition asked: every producer id the partition's producer state holds (idempotent
and transactional), with its epoch, its last sequence, the coordinator epoch of its last marker
and, while it has a transaction open there, the offset of that transaction's first batch
(``current_txn_start_offset``; -1 when none is open). This is how Kafka's own tools find a
hanging transaction (``kafka-transactions.sh find-hanging``) and the values they abort it with
(WriteTxnMarkers); ``strait failover`` uses it the same way for the transactions a mirror
copied and a promote must end (see docs/transactions.md, "Across sites").

``last_timestamp`` is -1: the producer state keeps no timestamps (a reader wanting the age of
an open transaction fetches the batch at its start offset).

Errors, per partition, as Kafka's: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (only the
leader's state is authoritative). Authorisation (Kafka's): READ on the topic, else its
partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.errors import answer_errors
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, PartitionSource, SecurityServices, denied


@dataclass(frozen=True, slots=True)
class ProducersServices:
    partitions: PartitionSource
    security: SecurityServices = NO_AUTHORIZER


async def handle_describe_producers(services: ProducersServices, request: Request) -> dict[str, Any]:
    topics = []
    for topic in request.body.topics:
        may_read = services.security.allowed(request, AclOperation.READ, ResourceType.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "error_message": None,
                "active_producers": [],
            }
            with answer_errors(entry):
                if not may_read:
                    raise denied(request, AclOperation.READ, ResourceType.TOPIC, topic.name)
                partition = services.partitions.partition(topic.name, index)
                partition.check_leader()
                entry["active_producers"] = [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": state.epoch,
                        "last_sequence": state.last_seq,
                        "last_timestamp": -1,
                        "coordinator_epoch": state.coordinator_epoch,
                        "current_txn_start_offset": state.txn_first_offset,
                    }
                    for producer_id, state in partition.producers.items()
                ]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
