"""DescribeLogDirs (35): this node's log dirs, each with its replicas' sizes and offset lags.

Answered as Kafka's broker does, from its own disks only (an admin client asks every broker):
per dir its absolute path and KAFKA_STORAGE_ERROR (56) for one that is offline, with no
replicas; per replica its bytes on disk and its ``offset_lag``, how far its log end offset is
below the high watermark (0 once it has everything committed); from v4 the total and usable
bytes of the dir's volume (-1 for an offline dir). A replica being moved to another dir
(AlterReplicaLogDirs, ``alter_log_dirs``) is listed twice, as Kafka lists it: in its current dir,
and in the target dir with ``is_future_key`` true, its size what the copy holds so far and its
``offset_lag`` how far the copy is behind the current log's end. ``topics`` null asks for
every replica; named partitions this node does not hold are left out, as in Kafka.

Versions 0-4 (v2 flexible, v3 a top-level error code, v4 the volume sizes).

Authorisation (Kafka's): DESCRIBE on the cluster, else an empty list of results and, from v3,
CLUSTER_AUTHORIZATION_FAILED at the top (before v3 the response has no field to say why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, LogDirSource, SecurityServices


@dataclass(frozen=True, slots=True)
class LogDirServices:
    dirs: LogDirSource
    security: SecurityServices = NO_AUTHORIZER


async def handle_describe_log_dirs(services: LogDirServices, request: Request) -> dict[str, Any]:
    req = request.body
    if not services.security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    results = []
    for usage in services.dirs.describe_dirs():
        if usage.error is not None:
            results.append(
                {
                    "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                    "log_dir": str(usage.path),
                    "topics": [],
                    "total_bytes": -1,
                    "usable_bytes": -1,
                }
            )
            continue
        topics: dict[str, list[dict[str, Any]]] = {}
        for replica in usage.replicas:
            tp = replica.tp
            if wanted is not None and (tp.topic, tp.partition) not in wanted:
                continue
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "partition_size": replica.size_bytes,
                    "offset_lag": max(0, replica.high_watermark - replica.log_end_offset),
                    "is_future_key": replica.is_future,
                }
            )
        results.append(
            {
                "error_code": ErrorCode.NONE,
                "log_dir": str(usage.path),
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "total_bytes": usage.total_bytes,
                "usable_bytes": usage.usable_bytes,
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}
