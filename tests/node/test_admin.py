"""Topic administration through real admin clients, the strait CLI and the admin HTTP API."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.node.harness import NodeProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[NodeProcess]:
    node = NodeProcess(1, tmp_path_factory.mktemp("admin") / "node1", f"{zookeeper}/t-admin-{time.time_ns()}")
    node.start()
    yield node
    node.stop()


@pytest.fixture
def admin(node: NodeProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def topic_names(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_create_describe_alter_delete_with_confluent_admin(admin: AdminClient) -> None:
    futures = admin.create_topics(
        [NewTopic("orders", 4, 1, config={"retention.ms": "3600000", "cleanup.policy": "delete"})]
    )
    futures["orders"].result(30)
    meta = admin.list_topics("orders", timeout=10).topics["orders"]
    assert sorted(meta.partitions) == [0, 1, 2, 3]
    assert all(p.leader == 1 and p.replicas == [1] for p in meta.partitions.values())

    again = admin.create_topics([NewTopic("orders", 1, 1)])
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        again["orders"].result(30)
    bad = admin.create_topics([NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"})])
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        bad["bad-config"].result(30)
    too_many = admin.create_topics([NewTopic("rf3", 1, 3)])
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR"):
        too_many["rf3"].result(30)

    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].source in (4, 5)  # from server.properties or Kafka's default
    assert not configs["segment.bytes"].is_default or configs["segment.bytes"].source == 5

    resource.set_config("retention.ms", "7200000")
    admin.alter_configs([resource])[resource].result(30)
    configs = admin.describe_configs([ConfigResource("topic", "orders")])[ConfigResource("topic", "orders")].result(30)
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].source == 5  # AlterConfigs replaces the whole override set

    admin.create_partitions([NewPartitions("orders", 6)])["orders"].result(30)
    assert len(admin.list_topics("orders", timeout=10).topics["orders"].partitions) == 6
    shrink = admin.create_partitions([NewPartitions("orders", 2)])
    with pytest.raises(Exception, match="INVALID_PARTITIONS"):
        shrink["orders"].result(30)

    admin.delete_topics(["orders"])["orders"].result(30)
    assert "orders" not in topic_names(admin)
    gone = admin.delete_topics(["orders"])
    with pytest.raises(Exception, match="UNKNOWN_TOPIC"):
        gone["orders"].result(30)


def test_incremental_alter_and_create_partitions_with_kafka_python(node: NodeProcess) -> None:
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([KNewTopic("kp-admin", 2, 1)])
        assert "kp-admin" in admin.list_topics()
        admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"retention.ms": "1000"})])
        described = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        text = repr(described)
        assert "retention.ms" in text and "1000" in text
        admin.create_partitions({"kp-admin": KNewPartitions(3)})
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()


def test_incremental_alter_configs_with_confluent(admin: AdminClient) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    admin.create_topics([NewTopic("inc", 1, 1, config={"retention.ms": "5000"})])["inc"].result(30)
    resource = ConfigResource(
        "topic",
        "inc",
        incremental_configs=[
            ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    configs = admin.describe_configs([ConfigResource("topic", "inc")])[ConfigResource("topic", "inc")].result(30)
    assert configs["retention.bytes"].value == "1048576" and configs["retention.bytes"].source == 1
    assert configs["retention.ms"].source != 1


def test_delete_records_moves_the_log_start(node: NodeProcess, admin: AdminClient) -> None:
    admin.create_topics([NewTopic("trim", 1, 1)])["trim"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(100):
        producer.produce("trim", b"%d" % i, partition=0)
        if i % 10 == 9:
            producer.flush(10)
    producer.flush(10)
    result = admin.delete_records([TopicPartition("trim", 0, 40)])
    deleted = result[TopicPartition("trim", 0, 40)].result(30)
    assert deleted.low_watermark == 40
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "trim"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=10) == (40, 100)
    finally:
        consumer.close()


def run_cli(node: NodeProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strait.cli", "topics", *args, "--bootstrap-server", node.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_strait_topics_cli(node: NodeProcess) -> None:
    created = run_cli(node, "create", "cli-topic", "--partitions", "3", "--config", "retention.ms=60000")
    assert created.returncode == 0, created.stderr
    assert "cli-topic" in run_cli(node, "list").stdout.split()
    described = run_cli(node, "describe", "cli-topic")
    assert described.returncode == 0, described.stderr
    assert "retention.ms" in described.stdout and "60000" in described.stdout
    duplicate = run_cli(node, "create", "cli-topic")
    assert duplicate.returncode == 1 and "TOPIC_ALREADY_EXISTS" in duplicate.stderr
    bad = run_cli(node, "create", "bad-cfg", "--config", "no.such.key=1")
    assert bad.returncode == 1 and "no.such.key" in bad.stderr
    assert run_cli(node, "delete", "cli-topic").returncode == 0
    assert "cli-topic" not in run_cli(node, "list").stdout.split()
    missing = run_cli(node, "delete", "cli-topic")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_admin_http_reflects_the_node(node: NodeProcess, admin: AdminClient) -> None:
    admin.create_topics([NewTopic("http-topic", 2, 1)])["http-topic"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce("http-topic", b"v%d" % i, partition=i % 2)
    producer.flush(10)

    status, body = http_get(node.admin_url + "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, body = http_get(node.admin_url + "/v1/topics/http-topic")
    topic = json.loads(body)
    assert status == 200
    assert [(p["partition"], p["high_watermark"]) for p in topic["partitions"]] == [(0, 5), (1, 5)]
    status, body = http_get(node.admin_url + "/metrics")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    produce_requests = [s.value for s in families["strait_requests"].samples if s.labels.get("api") == "Produce"]
    assert produce_requests and produce_requests[0] >= 1
    hw = {
        s.labels["partition"]: s.value
        for s in families["strait_high_watermark"].samples
        if s.labels.get("topic") == "http-topic"
    }
    assert hw == {"0": 5.0, "1": 5.0}
    assert http_get(node.admin_url + "/v1/topics/nope")[0] == 404
    assert http_get(node.admin_url + "/openapi.json")[0] == 200


def test_aiokafka_admin(node: NodeProcess) -> None:
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as ANewPartitions
    from aiokafka.admin import NewTopic as ANewTopic
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType

    async def go() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic("aio-admin", 2, 1, topic_configs={"retention.ms": "123456"})])
            assert "aio-admin" in await admin.list_topics()
            described = await admin.describe_configs([AConfigResource(ConfigResourceType.TOPIC, "aio-admin")])
            assert "123456" in repr(described)
            await admin.create_partitions({"aio-admin": ANewPartitions(4)})
            await admin.delete_topics(["aio-admin"])
            assert "aio-admin" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(go())


def test_describe_configs_v3_types_and_documentation(node: NodeProcess, admin: AdminClient) -> None:
    from node.protocol import ApiKey
    from tests.node.raw import connect, request

    admin.create_topics([NewTopic("typed", 1, 1)])["typed"].result(30)
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "typed", "configuration_keys": ["retention.ms", "cleanup.policy"]}
        ],
        "include_synonyms": True,
        "include_documentation": True,
    }
    with connect(node.bootstrap) as sock:
        result = request(sock, ApiKey.DESCRIBE_CONFIGS, 3, body).results[0]
    configs = {c.name: c for c in result.configs}
    assert set(configs) == {"retention.ms", "cleanup.policy"}
    assert configs["retention.ms"].config_type == 5  # LONG
    assert configs["cleanup.policy"].config_type == 7  # LIST
    assert configs["retention.ms"].documentation
    # Kafka's synonyms for a topic key without override: the broker key it defaults from.
    assert [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms] == [
        ("log.retention.hours", "168", 5)
    ]


def test_describe_log_dirs_with_kafka_python(node: NodeProcess, admin: AdminClient) -> None:
    from kafka.admin import KafkaAdminClient

    admin.create_topics([NewTopic("dirs", 2, 1)])["dirs"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(20):
        producer.produce("dirs", value=b"x" * 100, partition=i % 2)
    assert producer.flush(30) == 0

    kp = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        everything = kp.describe_log_dirs()
        named = kp.describe_log_dirs({"dirs": [1]})
    finally:
        kp.close()
    [(broker, dirs)] = [(r["broker"], r["log_dirs"]) for r in everything]
    assert broker == 1
    assert sorted(d["log_dir"] for d in dirs) == sorted(str(p.absolute()) for p in node.log_dirs)
    assert all(d["error_code"] == 0 for d in dirs)
    sizes = {
        (t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"])
        for d in dirs
        for t in d["topics"]
        for p in t["partitions"]
    }
    assert {k: v for k, v in sizes.items() if k[0] == "dirs"} == {
        ("dirs", 0): (sizes["dirs", 0][0], 0),
        ("dirs", 1): (sizes["dirs", 1][0], 0),
    }
    assert sizes["dirs", 0][0] > 1000 and sizes["dirs", 1][0] > 1000  # ten 100-byte records each, and more
    [(_, only)] = [(r["broker"], r["log_dirs"]) for r in named]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for d in only for t in d["topics"]] == [
        ("dirs", [1])
    ]
