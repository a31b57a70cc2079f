"""Moving replicas between a broker's log dirs (KIP-113) through Apache Kafka's Java Admin client
4.3 on a real three-node site: ``alterReplicaLogDirs`` starts a move, ``describeReplicaLogDirs``
shows the future replica in its target dir while the copy runs and the current dir once it is
done, and the data is all there; each refusal is the exception Kafka's client raises for
Kafka's per-replica error (LogDirNotFoundException, ReplicaNotAvailableException).

The nodes throttle their moves (``replica.alter.log.dirs.io.max.bytes.per.second``) so that a
move of half a megabyte is still running when the test looks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.interop.javasite import bootstrap, lines, three_node_site
from tests.interop.test_java_reassign import create
from tests.node.harness import NodeProcess, wait_for
from tests.strait.kafka_io import read_all

if TYPE_CHECKING:
    from tests.interop.conftest import KafkaJava

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

THROTTLE = {"replica.alter.log.dirs.io.max.bytes.per.second": "100000"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[list[NodeProcess]]:
    """Three nodes whose log dir moves are throttled."""
    with three_node_site(tmp_path_factory.mktemp("java-log-dirs"), zookeeper, THROTTLE) as nodes:
        yield nodes


def run(kafka_java: KafkaJava, nodes: list[NodeProcess], action: str, *args: str) -> dict[str, dict[str, Any]]:
    """One ``ClientLogDirs`` action: its lines by replica (``topic-partition-broker``)."""
    out = lines(kafka_java.run("ClientLogDirs", action, bootstrap(nodes), *args).stdout)
    assert out[-1] == {"done": action}, out
    return {line["replica"]: line for line in out[:-1]}


def exception(line: dict[str, Any]) -> str | None:
    error = line["error"]
    return None if error is None else str(error).split(":", 1)[0].rsplit(".", 1)[-1]


def test_refusals_are_kafkas_per_replica_errors(site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    topic = f"java-log-dirs-refused-{time.time_ns()}"
    create(site, topic, 1)
    node1, node2 = site[0], site[1]
    answers = run(
        kafka_java,
        site,
        "alter",
        f"{topic}:0:1=/not/a/log/dir",
        f"{topic}:0:2={node2.log_dirs[0]}",  # broker 2 holds no replica of it
    )
    assert {r: exception(line) for r, line in answers.items()} == {
        f"{topic}-0-1": "LogDirNotFoundException",
        f"{topic}-0-2": "ReplicaNotAvailableException",
    }
    (line,) = run(kafka_java, site, "describe", f"{topic}:0:1").values()
    assert line["error"] is None and line["future"] is None
    assert line["current"] in {str(d) for d in node1.log_dirs}
    # The dir it is in: done at once.
    assert exception(run(kafka_java, site, "alter", f"{topic}:0:1={line['current']}")[f"{topic}-0-1"]) is None


def test_a_move_is_described_while_it_runs_and_the_data_follows(site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    topic = f"java-log-dirs-moved-{time.time_ns()}"
    values = create(site, topic, 5000)  # one partition on broker 1, ~0.5 MB: seconds at the throttle
    replica = f"{topic}:0:1"
    (before,) = run(kafka_java, site, "describe", replica).values()
    target = next(str(d) for d in site[0].log_dirs if str(d) != before["current"])
    assert exception(run(kafka_java, site, "alter", f"{replica}={target}")[f"{topic}-0-1"]) is None

    (running,) = run(kafka_java, site, "describe", replica).values()
    assert (running["current"], running["future"]) == (before["current"], target), running
    assert running["future_lag"] >= 0

    def moved() -> bool:
        (now,) = run(kafka_java, site, "describe", replica).values()
        return bool(now["current"] == target and now["future"] is None)

    wait_for(f"{topic}-0 on broker 1 moved to {target}", moved, timeout=60, interval=0.5)
    marks, got = read_all(bootstrap(site), topic)
    assert marks == {0: (0, len(values))}
    assert got == values
