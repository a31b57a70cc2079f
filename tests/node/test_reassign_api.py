"""AlterPartitionReassignments, ListPartitionReassignments and DescribeLogDirs v4 on the wire,
against a real three-node site: the exact error codes a raw client gets (NOT_CONTROLLER from
any node but the controller; per-partition UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR, NO_REASSIGNMENT_IN_PROGRESS from the
controller), a move carried out and listed, and each log dir's volume sizes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from node.protocol import ApiKey, ErrorCode
from tests.node import raw
from tests.node.harness import NodeProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "wire-moves"


def alter(node: NodeProcess, version: int, *moves: tuple[str, int, list[int] | None], allow_rf: bool = True) -> Any:
    body = {
        "timeout_ms": 30000,
        "allow_replication_factor_change": allow_rf,
        "topics": [{"name": t, "partitions": [{"partition_index": p, "replicas": r}]} for t, p, r in moves],
    }
    with raw.connect(node.bootstrap) as sock:
        return raw.request(sock, ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, body)


def listed(node: NodeProcess) -> Any:
    with raw.connect(node.bootstrap) as sock:
        return raw.request(sock, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 30000, "topics": None})


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions}


def controller_of(nodes: list[NodeProcess]) -> NodeProcess:
    with raw.connect(nodes[0].bootstrap) as sock:
        metadata = raw.request(sock, ApiKey.METADATA, 1, {"topics": []})
    return next(n for n in nodes if n.broker_id == metadata.controller_id)


def test_errors_on_the_wire_and_a_move(site: Callable[..., list[NodeProcess]]) -> None:
    nodes = site(3)
    admin = AdminClient({"bootstrap.servers": ",".join(n.bootstrap for n in nodes)})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1], [1]])])[TOPIC].result(30)
    controller = controller_of(nodes)
    for other in (n for n in nodes if n is not controller):
        refused = alter(other, 0, (TOPIC, 0, [2]))
        assert (refused.error_code, list(refused.responses)) == (ErrorCode.NOT_CONTROLLER, [])
        assert listed(other).error_code == ErrorCode.NOT_CONTROLLER

    answer = alter(controller, 1, (TOPIC, 0, [1, 1]), (TOPIC, 1, [1, 9]), (TOPIC, 5, [1]), ("nowhere", 0, [1]))
    assert answer.error_code == ErrorCode.NONE
    assert codes(answer) == {
        (TOPIC, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        (TOPIC, 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        (TOPIC, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert codes(alter(controller, 0, (TOPIC, 0, None))) == {(TOPIC, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert codes(alter(controller, 1, (TOPIC, 0, [2, 3]), allow_rf=False)) == {
        (TOPIC, 0): ErrorCode.INVALID_REPLICATION_FACTOR
    }
    assert list(listed(controller).topics) == []

    assert codes(alter(controller, 0, (TOPIC, 1, [2, 3]))) == {(TOPIC, 1): ErrorCode.NONE}

    def moved() -> bool:
        md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[1]
        return sorted(md.replicas) == [2, 3] and list(listed(controller).topics) == []

    wait_for(f"{TOPIC}-1 on [2, 3]", moved, timeout=60, interval=0.25)


def test_describe_log_dirs_v4_reports_each_volume(site: Callable[..., list[NodeProcess]]) -> None:
    (node,) = site(1)
    with raw.connect(node.bootstrap) as sock:
        answer = raw.request(sock, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert answer.error_code == ErrorCode.NONE
    assert sorted(r.log_dir for r in answer.results) == sorted(str(d) for d in node.log_dirs)
    for result in answer.results:
        assert result.error_code == ErrorCode.NONE
        assert 0 < result.usable_bytes <= result.total_bytes
