"""AlterReplicaLogDirs (34), KIP-113: move replicas of this node to other log dirs, online.

Kafka's Admin ``alterReplicaLogDirs`` (and ``kafka-reassign-partitions.sh`` with log dirs) sends
each broker the replicas to move on its own disks: per target dir (an absolute path) the topics
and partitions to put there. The move itself is the log manager's (``storage._log_move``): a
future log is copied in the target dir while the replica keeps serving, then swapped in; the
answer comes as soon as the move has started, and DescribeLogDirs shows the future replica
(``is_future_key``) until it is done.

Per partition, as Kafka's broker answers: NONE once the move started, or when the replica is in
that dir already (a move of it elsewhere in progress is cancelled); LOG_DIR_NOT_FOUND (57) for a
path that is not one of this node's log dirs; KAFKA_STORAGE_ERROR (56) when the target dir or
the replica's dir is offline; REPLICA_NOT_AVAILABLE (9) for a partition this node holds no
replica of (the dir is remembered, and the replica is created there if it comes, as Kafka does).

Versions 1-2 (v2 flexible), the ones Kafka 4.3 keeps.

Authorisation (Kafka's): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition named, and nothing moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import trio

from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from storage import LogDirNotFoundError, LogDirOfflineError, ReplicaNotHereError, TopicPartition

from ._services import NO_AUTHORIZER, LogDirSource, SecurityServices


@dataclass(frozen=True, slots=True)
class AlterLogDirServices:
    dirs: LogDirSource
    security: SecurityServices = NO_AUTHORIZER


async def handle_alter_replica_log_dirs(services: AlterLogDirServices, request: Request) -> dict[str, Any]:
    moves: dict[TopicPartition, str] = {}
    for target in request.body.dirs:
        for topic in target.topics:
            for p in topic.partitions:
                moves[TopicPartition(topic.name, p)] = target.path
    if not services.security.allowed(request, AclOperation.ALTER, ResourceType.CLUSTER):
        codes = dict.fromkeys(moves, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    else:
        # The log manager may wait for a move's swap, and makes the future log's dir: off the loop.
        codes = await trio.to_thread.run_sync(_move_all, services.dirs, moves)
    results: dict[str, list[dict[str, int]]] = {}
    for tp, code in codes.items():
        results.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
    return {
        "throttle_time_ms": 0,
        "results": [{"topic_name": name, "partitions": parts} for name, parts in results.items()],
    }


def _move_all(dirs: LogDirSource, moves: dict[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
    codes = {}
    for tp, path in moves.items():
        try:
            dirs.alter_replica_dir(tp, path)
            codes[tp] = ErrorCode.NONE
        except LogDirNotFoundError:
            codes[tp] = ErrorCode.LOG_DIR_NOT_FOUND
        except LogDirOfflineError:
            codes[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        except ReplicaNotHereError:
            codes[tp] = ErrorCode.REPLICA_NOT_AVAILABLE
    return codes
