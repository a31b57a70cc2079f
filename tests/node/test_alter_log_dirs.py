"""AlterReplicaLogDirs (34) on real nodes: replicas move between a node's two log dirs while
they serve, on the leader and on a follower of a three-node site under an acks=all idempotent
producer, and across a transaction; a node stopped, or killed -9, in the middle of a move
finishes it after its restart. Every acknowledged record is read back at its offset exactly once
(``chaos.ledger.check``). The moves are throttled
(``replica.alter.log.dirs.io.max.bytes.per.second``) so that they are seen in progress:
DescribeLogDirs lists the future replica in the target dir while the copy runs. Bad input on the
wire gets Kafka's per-partition codes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos.ledger import Ledger, check
from chaos.workload import ProducerWorkload, read_back
from node.protocol import ApiKey, ErrorCode
from tests.node import raw
from tests.node.harness import NodeProcess, wait_for
from tests.node.test_replication import bootstrap, consume_all, create_topic, leader_of, produce
from tests.node.test_transactions_e2e import read_all, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

Site = Callable[..., list[NodeProcess]]
THROTTLED = {"replica_alter_log_dirs_io_max_bytes_per_second": "200000", "log_segment_bytes": "131072"}


def alter(node: NodeProcess, moves: dict[str, list[tuple[str, int]]], version: int = 2) -> dict[tuple[str, int], int]:
    """Send AlterReplicaLogDirs: per target path, the (topic, partition)s to move there."""
    dirs = [{"path": path, "topics": [{"name": t, "partitions": [p]} for t, p in tps]} for path, tps in moves.items()]
    with raw.connect(node.bootstrap) as sock:
        answer = raw.request(sock, ApiKey.ALTER_REPLICA_LOG_DIRS, version, {"dirs": dirs})
    return {(t.topic_name, p.partition_index): p.error_code for t in answer.results for p in t.partitions}


def placement(node: NodeProcess, topic: str, partition: int = 0) -> dict[str, bool]:
    """The log dirs holding the replica on ``node`` (DescribeLogDirs v4), each with is_future."""
    body = {"topics": [{"topic": topic, "partitions": [partition]}]}
    with raw.connect(node.bootstrap) as sock:
        answer = raw.request(sock, ApiKey.DESCRIBE_LOG_DIRS, 4, body)
    return {
        r.log_dir: p.is_future_key
        for r in answer.results
        for t in r.topics
        for p in t.partitions
        if t.name == topic and p.partition_index == partition
    }


def other_dir(node: NodeProcess, topic: str, partition: int = 0) -> str:
    (current,) = placement(node, topic, partition)
    return next(str(d) for d in node.log_dirs if str(d) != current)


def move_and_watch(node: NodeProcess, topic: str, target: str, partition: int = 0) -> None:
    """Move the replica to ``target``; returns once DescribeLogDirs showed the future replica there."""
    assert alter(node, {target: [(topic, partition)]}) == {(topic, partition): ErrorCode.NONE}
    wait_for(
        f"{node.name}: the future replica of {topic}-{partition} in {target}",
        lambda: placement(node, topic, partition).get(target) is True,
        timeout=20,
        interval=0.02,
    )


def wait_moved(node: NodeProcess, topic: str, target: str, partition: int = 0) -> None:
    wait_for(
        f"{node.name}: {topic}-{partition} moved to {target}",
        lambda: placement(node, topic, partition) == {target: False},
        timeout=90,
        interval=0.1,
    )


def test_moves_on_the_leader_and_a_follower_under_an_idempotent_producer(site: Site, tmp_path: Path) -> None:
    topic = "moving"
    nodes = site(3, **THROTTLED)
    create_topic(nodes, topic, rf=3, **{"min.insync.replicas": "2"})
    leader = leader_of(nodes, topic)
    follower = next(n for n in nodes if n is not leader)
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        config = {"linger.ms": 5, "batch.size": 16384}
        with ProducerWorkload(bootstrap(nodes), topic, ledger, rate=1500, config=config) as workload:
            workload.wait_for_acks(3000, timeout=60)
            targets = {n.broker_id: other_dir(n, topic) for n in (leader, follower)}
            for n in (leader, follower):
                move_and_watch(n, topic, targets[n.broker_id])
            workload.wait_for_acks(workload.acked + 1000, timeout=60)
            for n in (leader, follower):
                wait_moved(n, topic, targets[n.broker_id])
            workload.wait_for_acks(workload.acked + 500, timeout=60)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(bootstrap(nodes), topic, timeout=60))
    assert result.ok, result.summary()
    assert leader_of(nodes, topic) is leader  # the move never cost the leader its leadership

    # A transaction open across a move of the leader's replica and the follower's.
    servers = bootstrap(nodes)
    before = read_all(servers, topic, 1, "read_committed")
    txn = txn_producer(servers, "mover")
    txn.begin_transaction()
    committed = [f"c{i}".encode() for i in range(300)]
    for value in committed[:150]:
        txn.produce(topic, value)
    txn.flush(30)
    targets = {n.broker_id: other_dir(n, topic) for n in (leader, follower)}
    for n in (leader, follower):
        move_and_watch(n, topic, targets[n.broker_id])
    for value in committed[150:]:
        txn.produce(topic, value)
    txn.flush(30)
    for n in (leader, follower):
        wait_moved(n, topic, targets[n.broker_id])
    txn.commit_transaction(30)
    txn.begin_transaction()
    for i in range(50):
        txn.produce(topic, f"aborted{i}".encode())
    txn.flush(30)
    txn.abort_transaction(30)
    assert read_all(servers, topic, 1, "read_committed") == before + committed


def test_a_move_survives_a_restart_and_a_kill_9(node_factory: Callable[..., NodeProcess]) -> None:
    topic = "moved-across-restarts"
    node = node_factory(1, replica_alter_log_dirs_io_max_bytes_per_second="100000", log_segment_bytes="131072")
    create_topic([node], topic, rf=1)
    acked = produce(node.bootstrap, topic, [f"v{i:05d}".encode() * 8 for i in range(6000)])
    for restarts, hard in enumerate((False, True), start=1):
        target = other_dir(node, topic)
        move_and_watch(node, topic, target)
        node.restart(hard=hard)
        wait_moved(node, topic, target)  # the unfinished copy is removed at load and the move starts again
        assert node.log_path.read_text().count("interrupted by the stop, starts again") == restarts
        assert sorted(consume_all(node.bootstrap, topic)) == sorted(acked)
        acked += produce(node.bootstrap, topic, [f"after-{hard}-{i}".encode() for i in range(100)])
    assert sorted(consume_all(node.bootstrap, topic)) == sorted(acked)
    assert not [p for d in node.log_dirs for p in Path(d).glob(f"{topic}-0.*-future")]


def test_bad_input_gets_kafkas_codes(node_factory: Callable[..., NodeProcess]) -> None:
    node = node_factory(1)
    create_topic([node], "here", rf=1)
    current = next(iter(placement(node, "here")))
    other = other_dir(node, "here")
    answers: dict[tuple[str, int], Any] = {}
    for version in (1, 2):
        answers = alter(
            node,
            {
                "/not/a/log/dir": [("here", 0)],
                "relative": [("here", 1)],
                other: [("absent", 0)],
                current: [("here", 2)],
            },
            version,
        )
        assert answers == {
            ("here", 0): ErrorCode.LOG_DIR_NOT_FOUND,
            ("here", 1): ErrorCode.LOG_DIR_NOT_FOUND,
            ("absent", 0): ErrorCode.REPLICA_NOT_AVAILABLE,
            ("here", 2): ErrorCode.REPLICA_NOT_AVAILABLE,
        }
        # The dir the replica is in: done at once.
        assert alter(node, {current: [("here", 0)]}, version) == {("here", 0): ErrorCode.NONE}
        assert placement(node, "here") == {current: False}
