"""The controller's push of written partition states (PartitionStates, strait's API 1002).

On a real node: a pushed state newer than the node's takes effect at once (Metadata answers it),
and no later re-read of ZooKeeper takes it back to an older znode version; a push from an older
controller epoch is refused, one for a topic the node knows under another topic id is ignored.
In process: the controller's own view takes the states of a failover pass before any re-read,
and a broker that cannot be reached only costs a log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic

from node.controller import push_body
from node.coordination import PartitionState
from node.ids import NodeId
from node.protocol import ApiKey, ErrorCode
from node.zkkit import kazoo_client, stop_quietly
from storage import LeaderEpoch, TopicPartition
from tests.node.harness import NodeProcess, wait_for
from tests.node.raw import connect, request
from tests.node.test_controller import _without, bulk_site

pytestmark = pytest.mark.integration


def _metadata_epoch(node: NodeProcess, topic: str) -> int:
    with connect(node.bootstrap) as sock:
        meta = request(sock, ApiKey.METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    (part,) = meta.topics[0].partitions
    return int(part.leader_epoch)


def _zk_state(node: NodeProcess, topic: str) -> tuple[str, int, int, int]:
    """(topic id, leader epoch, state znode version, controller epoch) as ZooKeeper holds them."""
    client = kazoo_client(node.zk_connect, 10.0)
    client.start(timeout=10)
    try:
        assignment, _ = client.get(f"/brokers/topics/{topic}")
        state, stat = client.get(f"/brokers/topics/{topic}/partitions/0/state")
        controller_epoch, _ = client.get("/controller_epoch")
    finally:
        stop_quietly(client)
    return (
        json.loads(assignment)["topic_id"],
        json.loads(state)["leader_epoch"],
        stat.version,
        int(controller_epoch),
    )


def _push(node: NodeProcess, topic: str, topic_id: str, state: PartitionState, epoch: int) -> tuple[int, int]:
    body = push_body(NodeId(9), epoch, {topic: (topic_id, {0: state})})
    with connect(node.bootstrap) as sock:
        answer = request(sock, ApiKey.PARTITION_STATES, 0, body)
    return answer.error_code, answer.applied


def test_a_pushed_state_takes_effect_at_once_and_never_goes_back(node: NodeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("pushed", 1, 1)])["pushed"].result(30)
    wait_for("the topic led", lambda: _metadata_epoch(node, "pushed") >= 0)
    topic_id, epoch, version, controller_epoch = _zk_state(node, "pushed")
    newer = PartitionState(NodeId(1), LeaderEpoch(epoch + 5), (NodeId(1),), controller_epoch, version=version + 10)

    assert _push(node, "pushed", "another-topic-id", newer, controller_epoch) == (0, 0)
    assert _metadata_epoch(node, "pushed") == epoch
    assert _push(node, "pushed", topic_id, newer, controller_epoch - 1) == (ErrorCode.STALE_CONTROLLER_EPOCH, 0)
    assert _metadata_epoch(node, "pushed") == epoch

    assert _push(node, "pushed", topic_id, newer, controller_epoch) == (0, 1)
    assert _metadata_epoch(node, "pushed") == epoch + 5  # no watch, no re-read: the push itself
    assert _push(node, "pushed", topic_id, newer, controller_epoch) == (0, 0)  # not newer any more
    # A re-read of ZooKeeper (a new topic makes one) finds the older version: it is kept out.
    admin.create_topics([NewTopic("other", 1, 1)])["other"].result(30)
    wait_for("the other topic led", lambda: _metadata_epoch(node, "other") >= 0)
    assert _metadata_epoch(node, "pushed") == epoch + 5


def test_a_failover_pass_takes_effect_in_the_controllers_view_before_any_re_read(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Broker 3 is gone: the controller (broker 1) decides and writes its 180 partitions, and its
    own view holds every new state, with broker 1 leading where it was elected, although its
    re-reads of ZooKeeper are switched off. Broker 2 is registered at an address where nothing
    listens: its push fails, with a log line and nothing else."""

    async def main() -> None:
        async with bulk_site(zk_connect, tmp_path) as bulk:
            re_reads = 0

            async def no_refresh() -> None:
                nonlocal re_reads
                re_reads += 1

            monkeypatch.setattr(bulk.cluster, "refresh", no_refresh)
            async with trio.open_nursery() as nursery:
                bulk.controller._pushes = nursery
                await bulk.controller._reconcile(bulk.cluster, bulk.epoch)
            assert re_reads == 1  # the pass's own re-read, switched off here
            for name, p in bulk.before:
                expected = _without(bulk, NodeId(3), (name, p))
                assert bulk.cluster.topics[name].states[p] == expected, (name, p)
                partition = bulk.cluster.partitions[TopicPartition(name, p)]
                assert partition.is_leader == (expected.leader == 1)
                assert partition.leader_epoch == expected.leader_epoch

    with caplog.at_level(logging.INFO, logger="strait.node.controller"):
        trio.run(main)
    assert any("pushing partition states to broker 2 at 127.0.0.1:2 failed" in r.getMessage() for r in caplog.records)
