"""The broker's side of the transaction coordinator: where markers go and what they carry, and the
coordinator loaded and unloaded with the leadership of ``__transaction_state`` partitions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from node.txn import NO_LEADER, MarkerWriteError, TransactionCoordinator, TxnConfig, TxnMarker
from node.txn_topic import TRANSACTION_TOPIC, ClusterMarkerWriter, sync_coordinator
from storage import TopicPartition
from tests.node.handlers.fakes import FakeCluster, node_config, topic_state

pytestmark = pytest.mark.unit


def test_markers_go_to_live_leaders_and_a_deleted_partition_has_none() -> None:
    cluster = FakeCluster(topics={"t": topic_state("t", 2), "dead": topic_state("dead", 1, leader=9)})
    writer = ClusterMarkerWriter(node_config(), lambda: cluster)  # type: ignore[arg-type,return-value]
    assert writer.leader_of("t", 1) == 1
    assert writer.leader_of("t", 5) is None
    assert writer.leader_of("gone", 0) is None
    assert writer.leader_of("dead", 0) == NO_LEADER  # broker 9 is not live: wait for a leader

    async def unreachable() -> None:
        with pytest.raises(MarkerWriteError, match="broker 9 is not live"):
            await writer.write_markers(9, [TxnMarker(7, 3, True, 11, (("dead", 0),))])

    trio.run(unreachable)


def test_sync_loads_led_partitions_reloads_on_a_new_leader_epoch_and_unloads_lost_ones() -> None:
    topic = topic_state(TRANSACTION_TOPIC, 3)
    empty_log = SimpleNamespace(log_start_offset=0, log_end_offset=0)
    partitions: dict[TopicPartition, Any] = {
        TopicPartition(TRANSACTION_TOPIC, p): SimpleNamespace(is_leader=p != 2, leader_epoch=4, log=empty_log)
        for p in range(3)
    }
    cluster = SimpleNamespace(topics={TRANSACTION_TOPIC: topic}, partitions=partitions)
    coordinator = TransactionCoordinator(TxnConfig(state_partitions=3), None, None, None, wall_clock_ms=lambda: 0)  # type: ignore[arg-type]
    sync_coordinator(cluster, coordinator)  # type: ignore[arg-type]
    assert [coordinator.coordinator_epoch(p) for p in range(3)] == [4, 4, None]
    partitions[TopicPartition(TRANSACTION_TOPIC, 0)].leader_epoch = 5
    partitions[TopicPartition(TRANSACTION_TOPIC, 1)].is_leader = False
    sync_coordinator(cluster, coordinator)  # type: ignore[arg-type]
    assert [coordinator.coordinator_epoch(p) for p in range(3)] == [5, None, None]
