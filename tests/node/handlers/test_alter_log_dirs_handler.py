"""AlterReplicaLogDirs (34) against a real log manager: a move, each per-partition error, ACLs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER
from node.handlers.alter_log_dirs import AlterLogDirServices, handle_alter_replica_log_dirs
from node.handlers.log_dirs import LogDirServices, handle_describe_log_dirs
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation
from storage import FaultPoints, LogManager, TopicPartition
from tests.node.handlers.fakes import ALICE, BOB, acl, request, secured
from tests.storage.helpers import batch

pytestmark = pytest.mark.unit


@pytest.fixture
def logs(tmp_path: Path) -> Any:
    m = LogManager([tmp_path / "a", tmp_path / "b", tmp_path / "c"], broker_id=1, faults=FaultPoints())
    m.startup()
    for p in range(2):
        m._preferred[TopicPartition("orders", p)] = tmp_path / "a"
        m.create_log(TopicPartition("orders", p)).append(batch(3))
    yield m
    m.shutdown()


def alter(logs: LogManager, dirs: list[dict[str, Any]], *, version: int = 2, principal: str | None = None) -> Any:
    services = AlterLogDirServices(logs, NO_AUTHORIZER)
    if principal is not None:
        services = AlterLogDirServices(logs, secured(acl(ALICE, AclOperation.ALTER))[0])
    extra = {} if principal is None else {"principal": principal}
    req = request(ApiKey.ALTER_REPLICA_LOG_DIRS, version, {"dirs": dirs}, **extra)
    answer = trio.run(handle_alter_replica_log_dirs, services, req)
    results = answer["results"]
    return {(t["topic_name"], p["partition_index"]): p["error_code"] for t in results for p in t["partitions"]}


def wait_moved(logs: LogManager) -> None:
    deadline = time.monotonic() + 20
    while logs.moves():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.parametrize("version", [1, 2])
def test_a_move_starts_and_finishes(logs: LogManager, tmp_path: Path, version: int) -> None:
    target = str(tmp_path / "b")
    codes = alter(logs, [{"path": target, "topics": [{"name": "orders", "partitions": [0]}]}], version=version)
    assert codes == {("orders", 0): ErrorCode.NONE}
    wait_moved(logs)
    plog = logs.get_log(TopicPartition("orders", 0))
    assert plog is not None and str(plog.dir.parent) == target


def test_each_error_is_kafkas(logs: LogManager, tmp_path: Path) -> None:
    logs.fail_dir(tmp_path / "c", OSError(5, "Input/output error"))
    codes = alter(
        logs,
        [
            {"path": str(tmp_path / "nowhere"), "topics": [{"name": "orders", "partitions": [0]}]},
            {"path": "relative/a", "topics": [{"name": "orders", "partitions": [1]}]},
            {"path": str(tmp_path / "c"), "topics": [{"name": "orders", "partitions": [1]}]},
            {"path": str(tmp_path / "a"), "topics": [{"name": "orders", "partitions": [2]}]},
        ],
    )
    # orders-1 was named twice: the last dir wins, as in Kafka's map of partitions to dirs
    assert codes == {
        ("orders", 0): ErrorCode.LOG_DIR_NOT_FOUND,
        ("orders", 1): ErrorCode.KAFKA_STORAGE_ERROR,
        ("orders", 2): ErrorCode.REPLICA_NOT_AVAILABLE,
    }
    assert alter(logs, [{"path": "relative/a", "topics": [{"name": "orders", "partitions": [1]}]}]) == {
        ("orders", 1): ErrorCode.LOG_DIR_NOT_FOUND
    }
    # already there: done at once, no move
    assert alter(logs, [{"path": str(tmp_path / "a"), "topics": [{"name": "orders", "partitions": [0]}]}]) == {
        ("orders", 0): ErrorCode.NONE
    }
    assert not logs.moves()


def test_alter_needs_alter_on_the_cluster(logs: LogManager, tmp_path: Path) -> None:
    dirs = [{"path": str(tmp_path / "b"), "topics": [{"name": "orders", "partitions": [0, 1]}]}]
    assert alter(logs, dirs, principal=BOB) == {
        ("orders", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ("orders", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }
    assert not logs.moves()
    assert alter(logs, dirs, principal=ALICE) == {("orders", 0): ErrorCode.NONE, ("orders", 1): ErrorCode.NONE}
    wait_moved(logs)


def test_describe_log_dirs_shows_the_future_replica(logs: LogManager, tmp_path: Path) -> None:
    logs.faults.arm("move_copy", stall_s=30, raises=False)
    try:
        alter(logs, [{"path": str(tmp_path / "b"), "topics": [{"name": "orders", "partitions": [1]}]}])
        answer = trio.run(
            handle_describe_log_dirs,
            LogDirServices(logs, NO_AUTHORIZER),
            request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}),
        )
    finally:
        logs.faults.disarm()
    found = {
        (Path(r["log_dir"]).name, t["name"], p["partition_index"]): (p["is_future_key"], p["offset_lag"])
        for r in answer["results"]
        for t in r["topics"]
        for p in t["partitions"]
    }
    assert found[("a", "orders", 1)] == (False, 0)
    assert found[("b", "orders", 1)] == (True, 3)  # nothing copied yet: three records behind
    wait_moved(logs)
