"""A topic's compression.type with real clients: a codec recompresses what producers send, the
keys Kafka accepts for compatibility are accepted, and a compacted topic refuses keyless records
naming each one (KIP-467)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from node.protocol import ApiKey
from storage import TopicPartition as StoredPartition
from storage import list_batches, segment_files
from storage.records import Compression, build_batch
from tests.node.harness import NodeProcess
from tests.node.raw import connect, fetch_body, produce_raw, request

pytestmark = pytest.mark.integration

COMPAT = {
    "message.format.version": "2.8",
    "message.downconversion.enable": "false",
    "preallocate": "true",
    "leader.replication.throttled.replicas": "*",
    "local.retention.ms": "-2",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[NodeProcess]:
    node = NodeProcess(1, tmp_path_factory.mktemp("codec") / "node1", f"{zookeeper}/t-codec-{time.time_ns()}")
    node.start()
    yield node
    node.stop()


def create(node: NodeProcess, name: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


def stored_codecs(node: NodeProcess, topic: str) -> list[int]:
    tp = StoredPartition(topic, 0)
    for d in node.log_dirs:
        if (d / tp.dir_name).exists():
            return [b.header.compression for seg in segment_files(d / tp.dir_name) for b in list_batches(seg)]
    return []


def read_back(node: NodeProcess, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"r-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def test_a_codec_topic_recompresses_every_batch_and_clients_read_it(node: NodeProcess) -> None:
    create(node, "lz4-topic", {"compression.type": "lz4", **COMPAT})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "lz4-topic")])
    configs = next(iter(described.values())).result(30)
    assert configs["compression.type"].value == "lz4"
    assert {k: configs[k].value for k in COMPAT} == COMPAT  # accepted, stored and described

    plain = Producer({"bootstrap.servers": node.bootstrap, "compression.type": "none", "linger.ms": 5})
    for i in range(50):
        plain.produce("lz4-topic", key=f"k{i}".encode(), value=b"plain %d " % i * 20)
    assert plain.flush(30) == 0
    gzipped = KafkaProducer(bootstrap_servers=node.bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(50):
        gzipped.send("lz4-topic", key=f"g{i}".encode(), value=b"gzip %d " % i * 20)
    gzipped.flush(30)
    gzipped.close()

    codecs = stored_codecs(node, "lz4-topic")
    assert codecs and set(codecs) == {Compression.LZ4}  # none and gzip batches were recompressed
    expected = [(f"k{i}".encode(), b"plain %d " % i * 20) for i in range(50)]
    expected += [(f"g{i}".encode(), b"gzip %d " % i * 20) for i in range(50)]
    assert read_back(node, "lz4-topic", 100) == expected
    kafka_python = KafkaConsumer(
        bootstrap_servers=node.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    kafka_python.assign([KafkaTopicPartition("lz4-topic", 0)])
    assert [(m.key, m.value) for m in kafka_python][:100] == expected
    kafka_python.close()


def test_producer_keeps_each_batch_as_it_was_sent(node: NodeProcess) -> None:
    create(node, "as-sent", {})
    for codec in ("gzip", "none", "zstd"):
        p = Producer({"bootstrap.servers": node.bootstrap, "compression.type": codec})
        p.produce("as-sent", value=b"v" * 200)
        assert p.flush(30) == 0
    assert stored_codecs(node, "as-sent") == [Compression.GZIP, Compression.NONE, Compression.ZSTD]


def test_alter_configs_accepts_the_compatibility_keys(node: NodeProcess) -> None:
    create(node, "altered", {})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})

    def alter(key: str, value: str) -> None:
        entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "altered", incremental_configs=[entry])
        next(iter(admin.incremental_alter_configs([resource]).values())).result(30)

    alter("message.format.version", "3.0-IV1")
    alter("segment.jitter.ms", "100")
    with pytest.raises(KafkaException, match="tiered storage is not supported"):
        alter("remote.storage.enable", "true")
    configs = next(iter(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "altered")]).values()))
    described = configs.result(30)
    assert (described["message.format.version"].value, described["segment.jitter.ms"].value) == ("3.0-IV1", "100")


def test_keyless_records_in_a_compacted_topic_are_refused_and_named(node: NodeProcess) -> None:
    create(node, "compacted", {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    batch = build_batch([(now, b"a", b"1"), (now, None, b"2"), (now, b"c", b"3"), (now, None, b"4")])
    refused = produce_raw(node.bootstrap, "compacted", 0, [], batch=batch)
    assert refused.error_code == 87  # INVALID_RECORD, the whole batch
    assert [e.batch_index for e in refused.record_errors] == [1, 3]
    assert "Compacted topic cannot accept message without key" in refused.record_errors[0].batch_index_error_message
    assert "2 in all: record 1, record 3" in refused.error_message
    keyed = build_batch([(now, b"a", b"1")])
    assert produce_raw(node.bootstrap, "compacted", 0, [], batch=keyed).error_code == 0

    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": node.bootstrap, "retries": 0})
    p.produce("compacted", value=b"no key", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]
    assert read_back(node, "compacted", 1) == [(b"a", b"1")]


def fetch_raw(node: NodeProcess, topic: str, version: int) -> Any:
    with connect(node.bootstrap) as sock:
        return request(sock, ApiKey.FETCH, version, fetch_body(topic, 0, min_bytes=0)).responses[0].partitions[0]


def test_a_zstd_topic_is_refused_to_fetches_before_v10(node: NodeProcess) -> None:
    create(node, "zstd-topic", {"compression.type": "zstd"})
    assert produce_raw(node.bootstrap, "zstd-topic", 0, [b"a" * 100]).error_code == 0  # sent uncompressed
    assert stored_codecs(node, "zstd-topic") == [Compression.ZSTD]
    assert fetch_raw(node, "zstd-topic", 9).error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE
    served = fetch_raw(node, "zstd-topic", 10)
    assert (served.error_code, served.high_watermark) == (0, 1)
    create(node, "lz4-old-fetch", {"compression.type": "lz4"})
    assert fetch_raw(node, "lz4-old-fetch", 4).error_code == 0
