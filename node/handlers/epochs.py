"""OffsetForLeaderEpoch (API 23): where a leader epoch ends in the leader's log (KIP-101/KIP-279).

A follower that (re)starts following asks the leader for the end offset of the latest epoch
it has; the leader answers with the largest epoch it knows at or below that one and the
offset where it ended (its log end offset for the current epoch). The follower truncates to
the smaller of that and its own end of the same epoch: exactly its divergent tail. Consumers
use it too (KIP-320) to detect truncation after a leader change.

Authorisation (Kafka's): CLUSTER_ACTION on the cluster (followers) allows every topic; without it,
DESCRIBE on each topic (consumers), else its partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.errors import answer_errors
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, PartitionSource, SecurityServices, denied


@dataclass(frozen=True, slots=True)
class EpochServices:
    partitions: PartitionSource
    security: SecurityServices = NO_AUTHORIZER


async def handle_offset_for_leader_epoch(services: EpochServices, request: Request) -> dict[str, Any]:
    req = request.body
    security = services.security
    replica = security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, log_denied=False)
    topics = []
    for topic in req.topics:
        partitions = []
        allowed = replica or security.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        for p in topic.partitions:
            entry: dict[str, Any] = {"error_code": 0, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            with answer_errors(entry):
                if not allowed:
                    raise denied(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
                partition = services.partitions.partition(topic.topic, p.partition)
                partition.check_epoch(getattr(p, "current_leader_epoch", -1))
                epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                entry["leader_epoch"], entry["end_offset"] = epoch, end
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
