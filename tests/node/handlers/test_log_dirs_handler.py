"""DescribeLogDirs (35) against fake log dirs: sizes and lags per replica, an offline dir, a filter, ACLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER
from node.handlers.log_dirs import LogDirServices, handle_describe_log_dirs
from node.protocol import ApiKey, ErrorCode, Struct, decode_response, encode_response, request_header
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
            total_bytes=8_000_000_000,
            usable_bytes=3_000_000_000,
        ),
        DirUsage(Path("/data/b"), OSError(5, "Input/output error"), []),
    ]
)


def describe(
    body: dict[str, Any], services: LogDirServices | None = None, principal: str | None = None, version: int = 1
) -> Any:
    services = services or LogDirServices(DIRS, NO_AUTHORIZER)
    extra = {} if principal is None else {"principal": principal}
    return trio.run(handle_describe_log_dirs, services, request(ApiKey.DESCRIBE_LOG_DIRS, version, body, **extra))


def on_the_wire(version: int, body: dict[str, Any]) -> Struct:
    """``body`` as a client of ``version`` reads it (encoded and decoded by the real codec)."""
    header = request_header(ApiKey.DESCRIBE_LOG_DIRS, version, 7, "unit-test")
    frame = b"".join(bytes(p) for p in encode_response(header, body).parts)[4:]
    return decode_response(ApiKey.DESCRIBE_LOG_DIRS, version, frame)[1]


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


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_version_kafka_4_3_declares_up_to_4(version: int) -> None:
    wire = on_the_wire(version, describe({"topics": None}, version=version))
    online, offline = wire.results
    assert [p.partition_index for t in online.topics for p in t.partitions] == [0, 1, 0]
    if version >= 3:
        assert wire.error_code == ErrorCode.NONE
    if version >= 4:  # the volume each dir is on; unknown (-1) for an offline dir
        assert (online.total_bytes, online.usable_bytes) == (8_000_000_000, 3_000_000_000)
        assert (offline.total_bytes, offline.usable_bytes) == (-1, -1)


def test_from_v3_a_refusal_says_why_at_the_top() -> None:
    security, _ = secured(acl(ALICE, AclOperation.DESCRIBE))
    services = LogDirServices(DIRS, security)
    refused = on_the_wire(3, describe({"topics": None}, services, principal=BOB, version=3))
    assert (refused.error_code, list(refused.results)) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    allowed = on_the_wire(4, describe({"topics": None}, services, principal=ALICE, version=4))
    assert allowed.error_code == ErrorCode.NONE and len(allowed.results) == 2
