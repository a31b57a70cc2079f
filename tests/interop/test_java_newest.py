"""Kafka's Java Admin 4.3 on the newest versions of the group, topic, log-dir and ACL APIs (Issue 20).

``ClientNewest`` (java/ClientNewest.java) makes the calls whose requests the client sends at the
versions strait now serves: CreateTopics v7 (what was made, and its id), ListGroups v5 (states and
types filters), OffsetFetch v9 with two groups in one request (after FindCoordinator v6 batched),
DescribeGroups v6 (an unknown group), DescribeLogDirs v4 (disk space), DescribeAcls v3, DeleteTopics
v6 (by topic id); and a consumer asking for KIP-848's protocol, which is not served. The
consumer-group tests of ``test_java_client`` run JoinGroup v9, SyncGroup v5, Heartbeat v4,
LeaveGroup v5 and OffsetCommit v9 the same way.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition

from tests.interop.javasite import bootstrap, create_topic, lines
from tests.node.harness import NodeProcess

if TYPE_CHECKING:
    from tests.interop.conftest import KafkaJava

pytestmark = pytest.mark.integration

_names = itertools.count()


def name(prefix: str) -> str:
    return f"java-newest-{prefix}-{next(_names)}"


def commit_simple(nodes: list[NodeProcess], group: str, topic: str, offsets: dict[int, int]) -> None:
    """A "simple" commit (no member, no generation) with librdkafka: the group is Empty afterwards."""
    consumer = Consumer({"bootstrap.servers": bootstrap(nodes), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[KafkaPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def newest(java_site: list[NodeProcess], kafka_java: KafkaJava) -> dict[str, Any]:
    """Run the scenario once: {"group", "topic", "source", and each call by op (listGroups as a list)}."""
    source, topic, group = name("source"), name("topic"), name("group")
    create_topic(java_site, source, partitions=2)
    commit_simple(java_site, group, source, {0: 5, 1: 7})
    out = lines(kafka_java.run("ClientNewest", bootstrap(java_site), topic, group).stdout)
    assert out[-1] == {"done": "newest"}, out
    calls: dict[str, Any] = {"group": group, "topic": topic, "source": source, "listGroups": []}
    for call in out[:-1]:
        if call["op"] == "listGroups":
            calls["listGroups"].append(call)
        else:
            calls[call["op"]] = call
    return calls


def ok(call: dict[str, Any]) -> dict[str, Any]:
    if "error" in call:
        pytest.fail(f"Admin.{call['op']} failed: {call['error']}", pytrace=False)
    return call


def test_create_topics_answers_what_it_made_and_its_id(newest: dict[str, Any]) -> None:
    created = ok(newest["createTopics"])
    assert (created["partitions"], created["replication_factor"]) == (2, 3)
    assert (created["retention_ms"], created["retention_source"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert created["configs"] > 10  # every topic config, as DescribeConfigs would list them
    assert created["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert ok(newest["describeTopics"])["topic_id"] == created["topic_id"]


def test_list_groups_filters_by_state_and_names_state_and_type(newest: dict[str, Any]) -> None:
    empty, stable = (ok(c) for c in newest["listGroups"])
    assert empty["in_state"] == "Empty"
    mine = [g for g in empty["groups"] if g["group_id"] == newest["group"]]
    assert mine == [{"group_id": newest["group"], "state": "Empty", "type": "Classic", "protocol": ""}]
    assert all(g["state"] == "Empty" for g in empty["groups"])
    assert stable["in_state"] == "Stable"
    assert all(g["state"] == "Stable" for g in stable["groups"])
    assert newest["group"] not in [g["group_id"] for g in stable["groups"]]


def test_list_offsets_of_two_groups_in_one_request(newest: dict[str, Any]) -> None:
    source = newest["source"]
    assert ok(newest["listConsumerGroupOffsets"])["groups"] == {
        "group": {f"{source}-0": 5, f"{source}-1": 7},
        "other": {},
    }


def test_describe_an_unknown_group(newest: dict[str, Any]) -> None:
    """DescribeGroups v6 answers GROUP_ID_NOT_FOUND (KIP-1043), which the Admin raises (v5 said Dead, no error)."""
    call = newest["describeConsumerGroups"]
    assert "GroupIdNotFoundException: Group " in call["error"] and "-missing not found." in call["error"], call


def test_describe_log_dirs_gives_disk_space(newest: dict[str, Any]) -> None:
    dirs = ok(newest["describeLogDirs"])["dirs"]
    assert len(dirs) == 6  # two log dirs on each of three brokers
    for d in dirs:
        assert d["total"] is not None and d["usable"] is not None and d["total"] >= d["usable"] >= 0


def test_describe_acls_without_an_authorizer(newest: dict[str, Any]) -> None:
    """DescribeAcls v3 decodes: the site has no authorizer, so the answer is SECURITY_DISABLED, as Kafka's."""
    assert "SecurityDisabledException" in newest["describeAcls"]["error"]


def test_delete_a_topic_by_id(newest: dict[str, Any]) -> None:
    assert ok(newest["deleteTopics"])["deleted"] == ok(newest["createTopics"])["topic_id"]
    assert ok(newest["listTopics"])["has_topic"] is False


def test_a_kip_848_consumer_is_told_the_protocol_is_unsupported(newest: dict[str, Any]) -> None:
    """Only the classic group protocol is served: ConsumerGroupHeartbeat (68) is not advertised."""
    error = newest["consumerGroupProtocol"]["error"]
    assert "UnsupportedVersionException: The cluster does not support the new CONSUMER group protocol" in error
    assert "The node does not support CONSUMER_GROUP_HEARTBEAT" in error
