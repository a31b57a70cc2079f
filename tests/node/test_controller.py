"""The controller (``node.controller``) against the session's real ZooKeeper: completing a
partition reassignment."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from node.controller import Controller
from node.coordination import PartitionState, StaleState
from tests.node.coordination.zk_helpers import raw_session
from tests.node.inprocess import registered_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = "moving"


def test_completing_a_reassignment_writes_assignment_and_state_in_one_transaction(
    zk_connect: str, tmp_path: Path
) -> None:
    """[1, 2, 3] -> [2, 3] with leader 2 staying: ISR ∩ target and leader epoch + 1 land in the
    same transaction as the new replica list, so a leader's ISR write decided before fails."""

    async def main() -> None:
        async with registered_broker(3, zk_connect, tmp_path) as (zk, cluster, config), raw_session(zk_connect) as raw:
            epoch = await zk.elect_controller(3)
            assert epoch is not None
            await zk.create_topic(TOPIC, {0: (2, 3, 1)}, {}, {0: PartitionState(2, 7, (1, 2, 3), epoch)})
            await zk.start_reassignment({(TOPIC, 0): (2, 3)})
            before = await zk.partition_state(TOPIC, 0)
            assert before is not None

            await cluster.refresh()
            await Controller(config, cluster, zk)._reassign(cluster, epoch)

            topic = await zk.topic(TOPIC)
            after = await zk.partition_state(TOPIC, 0)
            assert topic is not None and topic.partitions == {0: (2, 3)}
            assert after == PartitionState(2, 8, (2, 3), epoch, version=before.version + 1)
            assert await zk.reassignment() is None
            _, topic_stat = await trio.to_thread.run_sync(raw.client.get, f"/brokers/topics/{TOPIC}")
            _, state_stat = await trio.to_thread.run_sync(raw.client.get, f"/brokers/topics/{TOPIC}/partitions/0/state")
            assert topic_stat.mzxid == state_stat.mzxid  # one transaction

            # The leader's ISR write decided on the state before: lost.
            with pytest.raises(StaleState):
                await zk.set_partition_state(TOPIC, 0, PartitionState(2, 7, (1, 2, 3), epoch, before.version))

    trio.run(main)
