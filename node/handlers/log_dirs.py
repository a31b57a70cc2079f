"""DescribeLogDirs (35): this node's log dirs, each with its replicas' sizes and offset lags.

Answered as Kafka's broker does, from its own disks only (an admin client asks every broker):
per dir its absolute path and KAFKA_STORAGE_ERROR (56) for one that is offline, with no
replicas; per replica its bytes on disk and its ``offset_lag``, how far its log end offset is
below the high watermark (0 once it has everything committed). strait never moves a replica
between dirs, so no replica is a "future" one. ``topics`` null asks for every replica; named
partitions this node does not hold are left out, as in Kafka. From v4 each online dir also
carries the total and usable bytes of its file system (``statvfs``: all blocks, and the blocks
available to an unprivileged writer, as Java's ``getTotalSpace``/``getUsableSpace``); -1 when they
cannot be read and for an offline dir.

Authorisation (Kafka's): DESCRIBE on the cluster, else an empty list of results, from v3 with
CLUSTER_AUTHORIZATION_FAILED at the top (before v3 the response has no field to say why).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, LogDirSource, SecurityServices

log = logging.getLogger("strait.node.log_dirs")


def disk_space(path: Path) -> tuple[int, int] | None:
    """(total, usable) bytes of the file system holding ``path``, or None when it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        log.warning("cannot read the disk space of log dir %s: %s", path, exc)
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


@dataclass(frozen=True, slots=True)
class LogDirServices:
    dirs: LogDirSource
    security: SecurityServices = NO_AUTHORIZER
    space: Callable[[Path], tuple[int, int] | None] = disk_space


async def handle_describe_log_dirs(services: LogDirServices, request: Request) -> dict[str, Any]:
    req = request.body
    if not services.security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    results = []
    for usage in services.dirs.describe_dirs():
        if usage.error is not None:
            results.append({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": str(usage.path), "topics": []})
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
                    "is_future_key": False,
                }
            )
        space = services.space(usage.path) if request.api_version >= 4 else None
        results.append(
            {
                "error_code": ErrorCode.NONE,
                "log_dir": str(usage.path),
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "total_bytes": space[0] if space is not None else -1,
                "usable_bytes": space[1] if space is not None else -1,
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}
