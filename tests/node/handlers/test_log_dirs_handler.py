"""DescribeLogDirs (35) against fake log dirs: sizes and lags per replica, an offline dir, a filter, ACLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER
from node.handlers.log_dirs import LogDirServices, handle_describe_log_dirs
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation
from storage import DirUsage, ReplicaUsage, TopicPartition
from storage.records import Offset
from tests.node.handlers.fakes import ALICE, BOB, FakeLogDirs, acl, request, secured

pytestmark = pytest.mark.unit

DIRS = FakeLogDirs(
    [
        DirUsage(
            Path("/data/a"),
            None,
            [
                ReplicaUsage(TopicPartition("orders", 0), 4096, Offset(10), Offset(10)),
                ReplicaUsage(TopicPartition("orders", 1), 100, Offset(7), Offset(4)),  # behind the HW by 3
                ReplicaUsage(TopicPartition("users", 0), 0, Offset(0), Offset(0)),
            ],
        ),
        DirUsage(Path("/data/b"), OSError(5, "Input/output error"), []),
    ]
)


def describe(body: dict[str, Any], services: LogDirServices | None = None, principal: str | None = None) -> Any:
    services = services or LogDirServices(DIRS, NO_AUTHORIZER)
    extra = {} if principal is None else {"principal": principal}
    return trio.run(handle_describe_log_dirs, services, request(ApiKey.DESCRIBE_LOG_DIRS, 1, body, **extra))


def test_every_dir_and_replica_with_its_size_and_lag() -> None:
    answer = describe({"topics": None})
    online, offline = answer["results"]
    assert (online["log_dir"], online["error_code"]) == ("/data/a", ErrorCode.NONE)
    replicas = {
        (t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"], p["is_future_key"])
        for t in online["topics"]
        for p in t["partitions"]
    }
    assert replicas == {("orders", 0): (4096, 0, False), ("orders", 1): (100, 3, False), ("users", 0): (0, 0, False)}
    assert (offline["log_dir"], offline["error_code"], offline["topics"]) == (
        "/data/b",
        ErrorCode.KAFKA_STORAGE_ERROR,
        [],
    )


def test_named_partitions_only_and_unknown_ones_left_out() -> None:
    answer = describe({"topics": [{"topic": "orders", "partitions": [1, 9]}, {"topic": "nope", "partitions": [0]}]})
    online = answer["results"][0]
    assert online["topics"] == [
        {
            "name": "orders",
            "partitions": [{"partition_index": 1, "partition_size": 100, "offset_lag": 3, "is_future_key": False}],
        }
    ]


def test_describe_on_the_cluster_is_needed() -> None:
    security, _ = secured(acl(ALICE, AclOperation.DESCRIBE))
    services = LogDirServices(DIRS, security)
    assert describe({"topics": None}, services, principal=BOB)["results"] == []
    assert len(describe({"topics": None}, services, principal=ALICE)["results"]) == 2
