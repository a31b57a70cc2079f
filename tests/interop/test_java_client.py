"""Apache Kafka's own Java client (kafka-clients 4.3.0) drives a real three-node strait site.

The Java programs in ``java/`` (``ClientProduce``, ``ClientConsume``, ``ClientAdmin``,
``ClientTransactions``) print one JSON object per line; the tests here assert on those lines and
read back what Java wrote with the node's own files or another client. A Java exception fails
the test with its message: the producer and consumer programs end with it (``KafkaJava.run``
fails on a non-zero exit, showing stderr); the Admin program prints each call's failure as
``{"op", "error"}``, and :func:`admin_calls` fails on the first one.

One site (conftest's ``java_site``) serves the whole module; every test uses its own topics and groups.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka.admin import AdminClient

from storage import TopicPartition, list_batches, segment_files
from storage.records import Compression
from tests.interop.javasite import bootstrap, create_topic, lines
from tests.node.harness import NodeProcess, wait_for

if TYPE_CHECKING:
    from tests.interop.conftest import KafkaJava

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
_names = itertools.count()


def name(prefix: str) -> str:
    return f"java-{prefix}-{next(_names)}"


def admin_scenario(kafka_java: KafkaJava, *args: str) -> list[dict[str, Any]]:
    """Run one ``ClientAdmin`` scenario to its end: every call's line, failed ones included."""
    out = lines(kafka_java.run("ClientAdmin", *args).stdout)
    assert out[-1] == {"done": args[0]}, out
    return out[:-1]


def ok(call: dict[str, Any]) -> dict[str, Any]:
    """``call`` if it succeeded; else fail with the Java client's error."""
    if "error" in call:
        pytest.fail(f"Admin.{call['op']} failed: {call['error']}", pytrace=False)
    return call


def admin_calls(kafka_java: KafkaJava, *args: str) -> list[dict[str, Any]]:
    """Run one ``ClientAdmin`` scenario; fail on the first call that failed, with the client's error."""
    return [ok(c) for c in admin_scenario(kafka_java, *args)]


def partition_counts(produced: list[dict[str, Any]], partitions: int) -> dict[str, int]:
    """Records per partition in ``ClientProduce``'s lines, keyed as the Java programs print partitions."""
    return {str(p): sum(1 for r in produced if r.get("partition") == p) for p in range(partitions)}


def stored_codecs(nodes: list[NodeProcess], topic: str, partitions: int) -> list[set[int]] | None:
    """The compression codecs of the batches each node stored of ``topic``; None until every node has some."""
    out = []
    for n in nodes:
        codecs: set[int] = set()
        for p in range(partitions):
            for d in n.log_dirs:
                directory = d / TopicPartition(topic, p).dir_name
                if directory.exists():
                    codecs |= {b.header.compression for s in segment_files(directory) for b in list_batches(s)}
        if not codecs:
            return None
        out.append(codecs)
    return out


# -- produce ----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_producer_with_each_codec(java_site: list[NodeProcess], kafka_java: KafkaJava, codec: str) -> None:
    """acks=all, enable.idempotence: every record lands once, in order per partition, readable by
    the Java consumer; every replica stores the batches compressed with the producer's codec."""
    topic = name(f"produce-{codec}")
    create_topic(java_site, topic)
    sent = lines(kafka_java.run("ClientProduce", bootstrap(java_site), topic, 300, codec).stdout)
    assert sent[-1] == {"sent": 300}
    records = sent[:-1]
    assert [r["key"] for r in records] == [f"key-{i}" for i in range(300)]
    by_partition: dict[int, list[int]] = {}
    for r in records:
        by_partition.setdefault(r["partition"], []).append(r["offset"])
    for p, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets {offsets[:10]}..."
    assert len(by_partition) > 1, "the keys should spread over the partitions"

    read = lines(kafka_java.run("ClientConsume", "read", bootstrap(java_site), topic, "read_uncommitted").stdout)
    assert read[-1]["end_offsets"] == {str(p): len(o) for p, o in sorted(by_partition.items())}
    got = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in read[:-1]}
    assert got == {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in records}

    want = int(Compression.from_name(codec))
    codecs = wait_for(f"{topic}'s batches on every replica", lambda: stored_codecs(java_site, topic, 3))
    assert codecs == [{want}] * 3, f"codecs stored by nodes 1, 2, 3: {codecs}"


# -- consume ----------------------------------------------------------------------------------


def test_consumer_group_two_members_rebalance_commit_seek(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    """Two read_committed members of one group: A alone reads all and commits; B joins and the group
    rebalances until they split the partitions; each reads the new records of its own partitions
    and commits; committed() returns what they committed; seek() rereads; B leaves, A takes all."""
    topic, group = name("group"), name("group-id")
    create_topic(java_site, topic, partitions=4)
    produced = lines(kafka_java.run("ClientProduce", bootstrap(java_site), topic, 40, "lz4").stdout)[:-1]
    first = {str(p): sum(1 for r in produced if r["partition"] == p) for p in range(4)}
    out = lines(kafka_java.run("ClientConsume", "group", bootstrap(java_site), topic, group).stdout)
    events = [e for e in out if e["event"] != "record"]
    records = [e for e in out if e["event"] == "record"]

    split = next(e for e in events if e["event"] == "split")
    assert sorted(split["A"] + split["B"]) == [0, 1, 2, 3] and split["A"] and split["B"]
    assigned = [e for e in events if e["event"] == "assigned"]
    assert assigned[0] == {"event": "assigned", "member": "A", "partitions": [0, 1, 2, 3]}
    assert any(e["member"] == "B" and e["partitions"] == split["B"] for e in assigned)
    assert any(e["event"] == "revoked" and e["member"] == "A" and e["partitions"] == [0, 1, 2, 3] for e in events)

    # Every record once (A alone, then each member on its own partitions; the seek's are apart).
    seen = [(r["partition"], r["offset"]) for r in records]
    assert len(seen) == len(set(seen)) == 80, sorted(seen)
    for r in records:
        if r["value"].startswith("after-rebalance-"):
            assert r["partition"] in split[r["member"]], r

    commits = [e for e in events if e["event"] == "committed"]
    assert commits[0] == {"event": "committed", "member": "A", "offsets": first}
    final = {p: o for e in commits[1:] for p, o in e["offsets"].items()}
    assert final == {p: n + 10 for p, n in first.items()}  # the program produced 10 more to each
    committed = next(e for e in events if e["event"] == "committed_read")["offsets"]
    assert {p: c["offset"] for p, c in committed.items()} == final
    assert {committed[str(p)]["metadata"] for p in range(4)} == {"by-A", "by-B"}

    seek = next(e for e in events if e["event"] == "seek")
    assert seek["offsets"] == list(range(3, final[str(seek["partition"])]))
    assert next(e for e in events if e["event"] == "alone") == {"event": "alone", "A": [0, 1, 2, 3]}


# -- admin ------------------------------------------------------------------------------------


def test_admin_topics(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    """createTopics, listTopics, describeTopics, describeCluster, createPartitions, deleteTopics."""
    topic = name("admin-topics")
    calls = admin_calls(kafka_java, "topics", bootstrap(java_site), topic)
    ops = [c["op"] for c in calls]
    assert ops == [
        "createTopics",
        "listTopics",
        "describeTopics",
        "describeCluster",
        "createPartitions",
        "describeTopics",
        "deleteTopics",
        "listTopics",
    ]
    assert topic in calls[1]["names"]
    described = calls[2]
    assert described["name"] == topic and described["internal"] is False
    assert described["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"  # a real topic id (Metadata v10+)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for p in described["partitions"]:
        assert sorted(p["replicas"]) == [1, 2, 3] and p["leader"] in p["replicas"]
    cluster = calls[3]
    assert cluster["nodes"] == [1, 2, 3] and cluster["controller"] in (1, 2, 3) and cluster["cluster_id"]
    assert [p["partition"] for p in calls[5]["partitions"]] == [0, 1, 2, 3, 4]
    assert topic not in calls[7]["names"]


def test_admin_configs(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    """describeConfigs of a topic and a broker; incrementalAlterConfigs SET and DELETE."""
    topic = name("admin-configs")
    create_topic(java_site, topic)
    calls = admin_calls(kafka_java, "configs", bootstrap(java_site), topic)
    topic_before, broker, _, topic_set, _, topic_deleted = calls
    assert topic_before["entries"]["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert broker["entries"]["num.partitions"] == {"value": "3", "source": "STATIC_BROKER_CONFIG"}
    assert topic_set["entries"]["retention.ms"] == {"value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert topic_set["entries"]["max.message.bytes"] == {"value": "200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert topic_deleted["entries"]["retention.ms"] == {"value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert topic_deleted["entries"]["max.message.bytes"]["source"] != "DYNAMIC_TOPIC_CONFIG"


@pytest.fixture(scope="module")
def groups_run(java_site: list[NodeProcess], kafka_java: KafkaJava) -> tuple[str, list[dict[str, Any]], dict[str, int]]:
    """The ``groups`` scenario on a group the Java consumer committed for and left (OffsetDelete
    needs no member subscribed): (group, the calls, the offsets the group committed)."""
    topic, group = name("admin-groups"), name("admin-group-id")
    create_topic(java_site, topic, partitions=2)
    produced = lines(kafka_java.run("ClientProduce", bootstrap(java_site), topic, 20, "none").stdout)
    kafka_java.run("ClientConsume", "group", bootstrap(java_site), topic, group)  # adds 10 to each partition
    committed = {p: n + 10 for p, n in partition_counts(produced, 2).items()}
    return group, admin_scenario(kafka_java, "groups", bootstrap(java_site), group, topic), committed


def test_admin_groups(groups_run: tuple[str, list[dict[str, Any]], dict[str, int]]) -> None:
    """listConsumerGroups, describeConsumerGroups, listConsumerGroupOffsets, deleteConsumerGroupOffsets."""
    group, calls, committed = groups_run
    listed, described, offsets, _, after = (ok(c) for c in calls)
    assert [{k: g[k] for k in ("group_id", "simple")} for g in listed["groups"] if g["group_id"] == group] == [
        {"group_id": group, "simple": False}
    ]
    assert described["group_id"] == group and described["state"] == "Empty" and described["members"] == []
    assert described["type"] == "Classic" and described["coordinator"] in (1, 2, 3)
    assert offsets["offsets"] == committed
    assert after["offsets"] == {"1": committed["1"]}


def test_admin_list_consumer_groups_state(groups_run: tuple[str, list[dict[str, Any]], dict[str, int]]) -> None:
    group, calls, _ = groups_run
    listed = ok(calls[0])
    assert {"group_id": group, "simple": False, "state": "Empty"} in listed["groups"]


@pytest.fixture(scope="module")
def records_run(java_site: list[NodeProcess], kafka_java: KafkaJava) -> dict[str, dict[str, Any]]:
    """The ``records`` scenario on 10 records of one partition, deleting those before offset 4:
    the calls by name (``listOffsets`` by its spec, the last earliest as ``earliest_after``)."""
    topic = name("admin-records")
    create_topic(java_site, topic, partitions=1)
    kafka_java.run("ClientProduce", bootstrap(java_site), topic, 10, "none")
    calls = admin_scenario(kafka_java, "records", bootstrap(java_site), topic, "4")
    specs = ["earliest", "latest", "max_timestamp", "for_timestamp_0", "deleteRecords", "earliest_after"]
    assert [c["op"] for c in calls] == ["listOffsets"] * 4 + ["deleteRecords", "listOffsets"]
    return dict(zip(specs, calls, strict=True))


def test_admin_list_offsets_and_delete_records(records_run: dict[str, dict[str, Any]]) -> None:
    """listOffsets (earliest, latest, by timestamp), deleteRecords, then earliest again."""
    assert ok(records_run["earliest"])["result"]["offset"] == 0
    assert ok(records_run["latest"])["result"]["offset"] == 10
    assert ok(records_run["for_timestamp_0"])["result"]["offset"] == 0
    assert ok(records_run["deleteRecords"])["low_watermark"] == 4
    assert ok(records_run["earliest_after"])["result"]["offset"] == 4


def test_admin_list_offsets_max_timestamp(records_run: dict[str, dict[str, Any]]) -> None:
    result = ok(records_run["max_timestamp"])["result"]
    assert 0 <= result["offset"] < 10 and result["timestamp"] > 0


def test_admin_describe_log_dirs(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    """describeLogDirs of every broker: each holds a replica of every partition, in one of its log dirs."""
    topic = name("admin-logdirs")
    create_topic(java_site, topic, partitions=2)
    kafka_java.run("ClientProduce", bootstrap(java_site), topic, 20, "none")
    (call,) = admin_calls(kafka_java, "logdirs", bootstrap(java_site), topic)
    assert sorted(call["brokers"]) == ["1", "2", "3"]
    for broker, dirs in call["brokers"].items():
        node = java_site[int(broker) - 1]
        assert sorted(d["path"] for d in dirs) == sorted(str(p) for p in node.log_dirs)
        assert all(d["error"] is None for d in dirs)
        replicas = {p: size for d in dirs for p, size in d["replicas"].items()}
        assert sorted(replicas) == ["0", "1"], f"broker {broker}: {dirs}"


# -- transactions -----------------------------------------------------------------------------


def test_transactions_commit_abort_send_offsets(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    """A transactional producer commits, aborts and commits again (sendOffsetsToTransaction in the
    committed ones); read_committed sees exactly the committed records, read_uncommitted every
    data record; the group's offsets are those the transactions committed; a second producer
    with the same transactional.id fences the first."""
    source, sink, group = name("txn-in"), name("txn-out"), name("txn-group")
    create_topic(java_site, source, partitions=1)
    create_topic(java_site, sink, partitions=1)
    kafka_java.run("ClientProduce", bootstrap(java_site), source, 10, "none")
    steps = lines(
        kafka_java.run("ClientTransactions", bootstrap(java_site), source, sink, group, name("txn-id")).stdout
    )
    assert steps[-1] == {"done": True}
    fenced = next(s for s in steps if s.get("step") == "fenced")
    assert fenced["fenced"] is True, fenced

    committed = lines(kafka_java.run("ClientConsume", "read", bootstrap(java_site), sink, "read_committed").stdout)
    values = [r["value"] for r in committed[:-1]]
    assert values == [f"committed-1-{i}" for i in range(5)] + [f"committed-2-{i}" for i in range(5)]
    everything = lines(kafka_java.run("ClientConsume", "read", bootstrap(java_site), sink, "read_uncommitted").stdout)
    assert sorted(r["value"] for r in everything[:-1]) == sorted([*values, *(f"aborted-{i}" for i in range(5))])

    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap(java_site)})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert [(tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions] == [(source, 0, 10)]
