"""OffsetForLeaderEpoch (API 23): where a leader epoch ends in the leader's log (KIP-101/KIP-279).

A follower that (re)starts following asks the leader for the end offset of the latest epoch
it has; the leader answers with the largest epoch it knows at or below that one and the
offset where it ended (its log end offset for the current epoch). The follower truncates to
the smaller of that and its own end of the same epoch: exactly its divergent tail. Consumers
use it too (KIP-320) to detect truncation after a leader change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.errors import BrokerError
from node.protocol import ErrorCode, RequestHeader, Struct
from storage import LogDirOfflineError

if TYPE_CHECKING:
    from node.broker import Broker


async def handle_offset_for_leader_epoch(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any]:
    topics = []
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            entry: dict[str, Any] = {"error_code": 0, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            try:
                partition = broker.cluster.partition(topic.topic, p.partition)
                partition.check_epoch(getattr(p, "current_leader_epoch", -1))
                epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                entry["leader_epoch"], entry["end_offset"] = epoch, end
            except BrokerError as exc:
                entry["error_code"] = exc.code
            except LogDirOfflineError:
                entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
