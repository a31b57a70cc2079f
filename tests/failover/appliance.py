"""A real two-site appliance for the failover tests: ``strait up`` as a process, and the
``strait failover`` CLI as a process, as an operator runs them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.errors import WorkloadError
from chaos.nemesis import kill_9_pid
from chaos.workload import read_back
from node.proc import Child, Deadline, spawn, wait_ready_file
from tests.node.harness import wait_for

LINK = "east-to-west"


@dataclass
class Appliance:
    directory: Path
    child: Child
    info: dict[str, Any]

    @property
    def topology(self) -> Path:
        return self.directory / "appliance.json"

    def bootstrap(self, site: str) -> str:
        return str(self.info["sites"][site]["bootstrap"])

    @property
    def mirror_admin(self) -> str:
        return str(self.info["links"][0]["admin"])

    def stop(self) -> None:
        if self.child.poll() is None:
            self.child.signal(signal.SIGINT)
            self.child.wait(120)


def start_appliance(tmp_path: Path, nodes: int = 3) -> Appliance:
    directory = tmp_path / "appliance"
    argv = [sys.executable, "-m", "strait.cli", "up", "--dir", str(directory), "--base-port", "0"]
    argv += ["--nodes", str(nodes)]
    child = spawn(argv, tmp_path / "up.log", name="strait up")
    try:
        info = wait_ready_file(child, directory / "appliance.json", Deadline(180, "strait up to write appliance.json"))
    except BaseException:
        child.kill()
        raise
    return Appliance(directory, child, info)


def failover(appliance: Appliance, *args: str, timeout: float = 180) -> tuple[int, dict[str, Any], str]:
    """Run ``strait failover ARGS --json --topology ...``: (exit code, the JSON answer, stderr)."""
    argv = [sys.executable, "-m", "strait.cli", "failover", *args, "--json", "--topology", str(appliance.topology)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        answer = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        answer = {"unparsed": done.stdout}
    return done.returncode, answer, done.stderr


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics([NewTopic(topic, partitions)]).values()
    future.result(30)


def records(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` on a site (empty while the site does not know it yet)."""
    try:
        return read_back(bootstrap, topic, timeout=10)
    except WorkloadError:
        return []


def wait_mirrored(appliance: Appliance, topic: str, count: int, timeout: float = 60) -> None:
    wait_for(
        f"{count} records of {topic} on west",
        lambda: len(records(appliance.bootstrap("west"), topic)) >= count,
        timeout,
        interval=0.5,
    )


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    except KafkaException as exc:
        if exc.args[0].code() not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
            raise
        return {}
    finally:
        consumer.close()


def kill_site(appliance: Appliance, site: str) -> None:
    """SIGKILL every process of ``site`` (ZooKeeper and nodes), as a lost datacenter."""
    described = json.loads((appliance.directory / site / "site.json").read_text())
    pids = [(int(described["zookeeper_pid"]), f"{site} ZooKeeper")]
    pids += [(int(node["pid"]), f"{site} node {node['broker_id']}") for node in described["nodes"]]
    for pid, name in pids:
        kill_9_pid(pid, name)


def revive_site(appliance: Appliance, site: str, timeout: float = 120) -> None:
    """``strait site revive SITE``: the running ``strait up`` brings the site back on its data."""
    argv = [sys.executable, "-m", "strait.cli", "site", "revive", site, "--dir", str(appliance.directory)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr
