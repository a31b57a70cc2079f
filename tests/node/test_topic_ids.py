"""Topic ids in Metadata v10+ (KIP-516, flexible from v9): each topic answers the id ZooKeeper
holds for it, a topic can be asked for by id, an unknown id answers UNKNOWN_TOPIC_ID; and a
producer can tell a topic re-created under the same name from the one deleted.

Without ids, librdkafka kept the deleted topic's higher leader epochs and ignored the new topic's
metadata: records for partitions the new topic lacks waited out ``message.timeout.ms``. With ids
it sees a new topic at once and fails them as unknown partitions, and delivers the others."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from node.coordination import uuid_of
from node.protocol import ApiKey, ErrorCode
from node.zkkit import kazoo_client, stop_quietly
from tests.node.harness import NodeProcess, wait_for
from tests.node.raw import connect, request

pytestmark = pytest.mark.integration


def _metadata(node: NodeProcess, version: int, topics: list[dict[str, Any]] | None) -> Any:
    body = {"topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    with connect(node.bootstrap) as sock:
        return request(sock, ApiKey.METADATA, version, body)


def _zk_topic_id(node: NodeProcess, topic: str) -> uuid.UUID:
    client = kazoo_client(node.zk_connect, 10.0)
    client.start(timeout=10)
    try:
        data, _ = client.get(f"/brokers/topics/{topic}")
    finally:
        stop_quietly(client)
    return uuid_of(json.loads(data)["topic_id"])


def test_metadata_answers_topic_ids_and_finds_a_topic_by_its_id(node: NodeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("ids", 2, 1)])["ids"].result(30)
    expected = _zk_topic_id(node, "ids")
    assert expected != uuid.UUID(int=0)
    for version in (10, 11, 12):
        (topic,) = _metadata(node, version, [{"topic_id": uuid.UUID(int=0), "name": "ids"}]).topics
        assert (topic.error_code, topic.name, topic.topic_id, len(topic.partitions)) == (0, "ids", expected, 2)
    (topic,) = _metadata(node, 12, [{"topic_id": expected, "name": None}]).topics
    assert (topic.error_code, topic.name, topic.topic_id) == (0, "ids", expected)
    stranger = uuid.uuid4()
    (topic,) = _metadata(node, 12, [{"topic_id": stranger, "name": None}]).topics
    assert (topic.error_code, topic.name, topic.topic_id, topic.partitions) == (
        ErrorCode.UNKNOWN_TOPIC_ID,
        None,
        stranger,
        [],
    )
    everything = _metadata(node, 9, None)  # flexible, before topic ids
    assert "ids" in {t.name for t in everything.topics}
    assert not hasattr(everything.topics[0], "topic_id") or everything.topics[0].topic_id == uuid.UUID(int=0)


def test_a_producer_tells_a_re_created_topic_from_the_deleted_one(node: NodeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("again", 10, 1)])["again"].result(30)
    timeout_ms = 20_000
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "allow.auto.create.topics": False,
            "topic.metadata.refresh.interval.ms": 1000,
            "message.timeout.ms": timeout_ms,
        }
    )
    errors: list[KafkaError] = []
    delivered: list[int] = []

    def report(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append(message.partition())

    def send(count: int) -> None:
        for i in range(count):
            producer.produce("again", str(i).encode(), key=str(i).encode(), on_delivery=report)

    send(100)
    assert producer.flush(30) == 0 and not errors
    for _ in range(2):  # each restart moves every leadership to a new epoch
        node.stop()
        node.start()
    send(100)
    assert producer.flush(30) == 0 and not errors
    old_id = _zk_topic_id(node, "again")

    admin.delete_topics(["again"])["again"].result(30)
    wait_for("the topic gone", lambda: "again" not in admin.list_topics(timeout=5).topics)
    admin.create_topics([NewTopic("again", 3, 1)])["again"].result(30)
    assert _zk_topic_id(node, "again") != old_id
    delivered.clear()
    send(100)
    assert producer.flush(timeout_ms / 1000 + 10) == 0
    # The records the producer placed on partitions 3-9 before it learnt of the new topic fail
    # with those partitions (_UNKNOWN_PARTITION, or _DESTROY for one already queued on a partition
    # librdkafka then removed); without topic ids they waited out message.timeout.ms
    # (_MSG_TIMED_OUT). Those on 0-2 land.
    codes = {e.code() for e in errors}
    assert errors and KafkaError._UNKNOWN_PARTITION in codes
    assert codes <= {KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY}, codes
    assert len(errors) + len(delivered) == 100 and set(delivered) <= {0, 1, 2} and delivered
