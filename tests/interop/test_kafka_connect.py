"""Kafka Connect through strait: a FileStream source copies a file into a topic, a FileStream sink
copies the topic into another file, in one standalone worker (``java/ConnectWorker.java``:
Kafka's own ``Worker`` and ``StandaloneHerder``, without the REST server, which registry
packages cannot assemble; docs/compatibility.md says why).

The sink file must equal the source file line for line, the topic must hold exactly those lines
in order, and the sink connector's consumer group must have committed the topic's end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from tests.interop.javasite import bootstrap, create_topic, lines
from tests.node.harness import NodeProcess, wait_for

if TYPE_CHECKING:
    from tests.interop.conftest import KafkaJava

pytestmark = pytest.mark.integration


def test_file_source_to_strait_to_file_sink(
    java_site: list[NodeProcess], kafka_java: KafkaJava, tmp_path: Path
) -> None:
    topic = "connect-file-lines"
    create_topic(java_site, topic, partitions=1)  # one partition: the sink writes in the source's order
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    text = [f"line {i}: {'ünïcødé ' if i % 3 == 0 else ''}{'x' * (i % 40)}" for i in range(300)]
    source.write_text("".join(f"{line}\n" for line in text), encoding="utf-8")

    out = lines(kafka_java.run("ConnectWorker", source, topic, sink, bootstrap(java_site), tmp_path).stdout)
    assert out == [
        {"connector": "file-source", "started": True},
        {"connector": "file-sink", "started": True},
        {"lines": 300},
    ]
    assert sink.read_text(encoding="utf-8").splitlines() == text

    read = lines(kafka_java.run("ClientConsume", "read", bootstrap(java_site), topic, "read_uncommitted").stdout)
    assert [r["value"] for r in read[:-1]] == text
    assert read[-1]["end_offsets"] == {"0": 300}

    admin = AdminClient({"bootstrap.servers": bootstrap(java_site)})

    def committed() -> list[tuple[str, int, int]]:
        group = ConsumerGroupTopicPartitions("connect-file-sink")
        result = admin.list_consumer_group_offsets([group])["connect-file-sink"].result(30)
        return [(tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions]

    assert wait_for("the sink's committed offset", committed) == [(topic, 0, 300)]
