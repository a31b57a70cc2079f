"""Group offset sync between two real sites: committed offsets appear on the target, never past
what it holds, and never while the group is being consumed there."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirror import GroupSync, LinkRunner
from node.client import SiteClient
from tests.mirror.conftest import Site
from tests.mirror.test_link import RunningLink, create, link_config
from tests.node.harness import wait_for

pytestmark = pytest.mark.integration

# The group's coordinator on a site is still being chosen or loading its partition.
NOT_YET = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError._TIMED_OUT,
}

FAST = "sync_interval_s = 0.5\ngroup_sync_interval_s = 0.5\n"


def produce(site: Site, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def consume_and_commit(site: Site, topic: str, group: str, per_partition: dict[int, int]) -> None:
    """Commit, as ``group`` on ``site``, the offsets given (through a real consumer that then leaves)."""
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in per_partition.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(site: Site, topic: str, group: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets on ``site`` ({} while its coordinator is still moving or loading)."""
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    except KafkaException as exc:
        if exc.args[0].code() not in NOT_YET:
            raise
        return {}
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def end_offsets(site: Site, topic: str, partitions: int) -> dict[int, int] | None:
    """Each partition's high watermark, or None while the topic is not there yet (the mirror creates it)."""
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": "probe"})
    try:
        consumer.list_topics(topic, timeout=10)  # metadata first, else UNKNOWN_PARTITION under load
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    except KafkaException as e:
        if e.args[0].code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        raise
    finally:
        consumer.close()


def test_committed_offsets_reach_the_target_and_a_consumer_resumes_there(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    topic, group = "orders", f"billing-{uuid.uuid4().hex[:6]}"
    create(east, topic, 2)
    produce(east, topic, 40, 2)
    consume_and_commit(east, topic, group, {0: 7, 1: 13})
    with RunningLink(LinkRunner(link_config(east, west, tmp_path, FAST))) as link:
        wait_for("the group's offsets on west", lambda: committed(west, topic, group, 2) == {0: 7, 1: 13}, 30)
        status = link.status()["group_sync"]
        assert [g["group"] for g in status["groups"]] == [group]
        assert status["groups"][0]["state"] == "synced"
        # A later commit on east follows within a few passes.
        consume_and_commit(east, topic, group, {0: 15})
        wait_for("the new offset on west", lambda: committed(west, topic, group, 2) == {0: 15, 1: 13}, 30)

    # A consumer of the group on west starts exactly where the group was on east.
    consumer = Consumer(
        {
            "bootstrap.servers": west.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        message = None
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None:
                break
        assert message is not None and message.error() is None, message and message.error()
        assert message.offset() == 15
        assert message.value() == b"v30"  # partition 0 holds v0, v2, ...: offset 15 is v30
    finally:
        consumer.close()


def test_offsets_are_never_synced_past_the_mirror_end_nor_while_the_group_is_active_on_the_target(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    topic, group, active = "orders", "held-back", "active-on-west"
    create(east, topic, 1)
    produce(east, topic, 10, 1)
    config = link_config(east, west, tmp_path, FAST)
    with RunningLink(LinkRunner(config)):
        wait_for("the first 10 records on west", lambda: end_offsets(west, topic, 1) == {0: 10}, 30)
    # The link is stopped: east moves on, the mirror stays at 10.
    produce(east, topic, 10, 1)
    consume_and_commit(east, topic, group, {0: 18})
    consume_and_commit(east, topic, active, {0: 5})

    # A consumer of `active` is a member of its group on west while the sync runs.
    member = Consumer(
        {
            "bootstrap.servers": west.bootstrap,
            "group.id": active,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([topic])
    try:
        wait_for("the west member's assignment", lambda: member.poll(0.2) is not None or bool(member.assignment()), 30)

        async def one_pass() -> GroupSync:
            source = SiteClient("east", east.bootstrap, client_id="test")
            target = SiteClient("west", west.bootstrap, client_id="test")
            try:
                sync = GroupSync(config, source, target, lambda t: t == topic)
                await sync.sync_once()
                return sync
            finally:
                await source.aclose()
                await target.aclose()

        sync = trio.run(one_pass)
        states = {g.group: g for g in sync.groups.values()}
        assert states[group].state == "synced"
        assert states[group].clamped == 1
        assert committed(west, topic, group, 1) == {0: 10}  # the mirror's end, not 18
        assert states[active].state == "active-on-target"
        assert committed(west, topic, active, 1) == {}  # left to the group's own members
    finally:
        member.close()
