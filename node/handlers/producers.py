"""DescribeProducers (61, KIP-664): the producers a partition leader keeps state for.

For each partition asked for, its leader answers every producer id in the partition's producer
state (``node.producer_state``): epoch, last sequence, the last batch's max timestamp, the epoch of
the coordinator that wrote its last marker and the first offset of its open transaction (-1 when
none). Operators use it (``kafka-transactions.sh describe-producers``) to find a hanging
transaction that holds the last stable offset back. A partition this node does not lead answers
NOT_LEADER_OR_FOLLOWER, one that does not exist UNKNOWN_TOPIC_OR_PARTITION.

Authorisation (Kafka's): READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
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
        readable = services.security.allowed(request, AclOperation.READ, ResourceType.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "error_message": None,
                "active_producers": [],
            }
            with answer_errors(entry):
                if not readable:
                    raise denied(request, AclOperation.READ, ResourceType.TOPIC, topic.name)
                partition = services.partitions.partition(topic.name, index)
                entry["active_producers"] = [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": state.epoch,
                        "last_sequence": state.last_seq,
                        "last_timestamp": state.last_timestamp,
                        "coordinator_epoch": state.coordinator_epoch,
                        "current_txn_start_offset": state.txn_first_offset,
                    }
                    for producer_id, state in partition.producers.entries()
                ]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
