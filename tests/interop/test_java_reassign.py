"""Partition reassignment (KIP-455) through Apache Kafka's Java Admin client 4.3 on a real
three-node site: alterPartitionReassignments moves a partition and the data follows it; a move
added while another runs is merged into it (strait's one znode) and listed with its adding and
removing replicas; cancelling a move puts the partition back on its original replicas; and each
refusal is the exception Kafka's client raises for Kafka's per-partition error.

The moves that must still be running when the test looks are held back by a throttle that
``strait topics reassign --throttle`` puts on the reassignment (the Kafka API carries none): the
Java client's moves merged into it share it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.javasite import bootstrap, lines
from tests.node.harness import NodeProcess, wait_for
from tests.strait.kafka_io import produce, read_all

if TYPE_CHECKING:
    from tests.interop.conftest import KafkaJava

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MOVE_DEADLINE_S = 60.0


def reassign(kafka_java: KafkaJava, nodes: list[NodeProcess], action: str, *args: str) -> list[dict[str, Any]]:
    """Run one ``ClientReassign`` action: its lines, without the final ``done``."""
    out = lines(kafka_java.run("ClientReassign", action, bootstrap(nodes), *args).stdout)
    assert out[-1] == {"done": action}, out
    return out[:-1]


def errors(kafka_java: KafkaJava, nodes: list[NodeProcess], *specs: str) -> dict[str, str | None]:
    """alterPartitionReassignments of ``specs``: each partition's exception class, None if it succeeded."""
    return {
        line["partition"]: None if line["error"] is None else line["error"].split(":", 1)[0].rsplit(".", 1)[-1]
        for line in reassign(kafka_java, nodes, "alter", *specs)
    }


def listed(kafka_java: KafkaJava, nodes: list[NodeProcess]) -> dict[str, dict[str, list[int]]]:
    (line,) = reassign(kafka_java, nodes, "list")
    result: dict[str, dict[str, list[int]]] = line["reassignments"]
    return result


def replicas(kafka_java: KafkaJava, nodes: list[NodeProcess], topic: str) -> list[int]:
    (line,) = reassign(kafka_java, nodes, "describe", topic)
    result: list[int] = line["replicas"]["0"]
    return result


def create(nodes: list[NodeProcess], topic: str, records: int) -> list[bytes]:
    """``topic`` with one partition on broker 1 alone, holding ``records`` values of ~100 bytes."""
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1]])])[topic].result(30)
    values = [f"{topic}-{i:06d}-".encode().ljust(100, b"x") for i in range(records)]
    produce(bootstrap(nodes), topic, values)
    return values


def wait_until(what: str, check: Any, nodes: list[NodeProcess]) -> None:
    try:
        wait_for(what, check, MOVE_DEADLINE_S, interval=0.5)
    except AssertionError as exc:
        logs = "\n".join(f"--- node {n.broker_id}\n{n.log_tail(20)}" for n in nodes)
        pytest.fail(f"{exc}\n{logs}")


def test_refusals_are_kafkas_per_partition_errors(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    topic = f"java-reassign-refused-{time.time_ns()}"
    create(java_site, topic, 1)
    assert errors(
        kafka_java,
        java_site,
        "java-nowhere:0=1",
        f"{topic}:5=1",
        f"{topic}:0=1,1",
    ) == {
        "java-nowhere-0": "UnknownTopicOrPartitionException",
        f"{topic}-5": "UnknownTopicOrPartitionException",
        f"{topic}-0": "InvalidReplicaAssignmentException",
    }
    assert errors(kafka_java, java_site, f"{topic}:0=1,9") == {  # broker 9 is not registered
        f"{topic}-0": "InvalidReplicaAssignmentException"
    }
    assert errors(kafka_java, java_site, f"{topic}:0=cancel") == {f"{topic}-0": "NoReassignmentInProgressException"}
    assert errors(kafka_java, java_site, "--no-rf-change", f"{topic}:0=2,3") == {
        f"{topic}-0": "InvalidReplicationFactorException"
    }
    assert errors(kafka_java, java_site, "--no-rf-change", f"{topic}:0=1,9") == {
        f"{topic}-0": "InvalidReplicaAssignmentException"
    }
    assert listed(kafka_java, java_site) == {}
    assert replicas(kafka_java, java_site, topic) == [1]


def test_a_move_completes_and_the_data_follows(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    topic = f"java-reassign-moved-{time.time_ns()}"
    values = create(java_site, topic, 500)
    assert errors(kafka_java, java_site, f"{topic}:0=2,3") == {f"{topic}-0": None}
    wait_until(
        f"{topic}-0 on [2, 3]",
        lambda: replicas(kafka_java, java_site, topic) == [2, 3] and f"{topic}-0" not in listed(kafka_java, java_site),
        java_site,
    )
    # Broker 1 no longer holds it: read it back from brokers 2 and 3 only.
    marks, got = read_all(f"{java_site[1].bootstrap},{java_site[2].bootstrap}", topic)
    assert marks == {0: (0, len(values))}
    assert got == values


def test_merge_list_and_cancel(java_site: list[NodeProcess], kafka_java: KafkaJava, tmp_path: Path) -> None:
    stamp = time.time_ns()
    slow, cancelled = f"java-reassign-slow-{stamp}", f"java-reassign-cancelled-{stamp}"
    # ~2 MB each: a follower's first fetch takes at most replica.fetch.max.bytes (1 MiB), after
    # which the throttle below holds its next one back for over half an hour.
    slow_values = create(java_site, slow, 20_000)
    cancelled_values = create(java_site, cancelled, 20_000)

    # An operator's throttled move, started the strait way; the Java client's move merges into it.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": slow, "partition": 0, "replicas": [1, 2]}]}))
    command = ["topics", "reassign", "--zookeeper", java_site[0].zk_connect, "--plan", str(plan), "--throttle", "500"]
    started = subprocess.run(
        [sys.executable, "-m", "strait.cli", *command], capture_output=True, text=True, timeout=60, check=False
    )
    assert started.returncode == 0, started.stderr
    assert errors(kafka_java, java_site, f"{cancelled}:0=3") == {f"{cancelled}-0": None}
    assert listed(kafka_java, java_site) == {
        f"{slow}-0": {"replicas": [1, 2], "adding": [2], "removing": []},
        f"{cancelled}-0": {"replicas": [3, 1], "adding": [3], "removing": [1]},
    }

    # Cancelled: back on broker 1 alone, the other move still running.
    assert errors(kafka_java, java_site, f"{cancelled}:0=cancel") == {f"{cancelled}-0": None}
    wait_until(
        f"{cancelled}-0 back on [1]",
        lambda: (
            replicas(kafka_java, java_site, cancelled) == [1] and list(listed(kafka_java, java_site)) == [f"{slow}-0"]
        ),
        java_site,
    )
    assert errors(kafka_java, java_site, f"{cancelled}:0=cancel") == {
        f"{cancelled}-0": "NoReassignmentInProgressException"
    }
    assert errors(kafka_java, java_site, f"{slow}:0=cancel") == {f"{slow}-0": None}
    wait_until(
        "every move ended",
        lambda: replicas(kafka_java, java_site, slow) == [1] and listed(kafka_java, java_site) == {},
        java_site,
    )
    for topic, values in ((slow, slow_values), (cancelled, cancelled_values)):
        marks, got = read_all(bootstrap(java_site), topic)
        assert marks == {0: (0, len(values))}
        assert got == values
