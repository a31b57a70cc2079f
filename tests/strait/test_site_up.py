"""``strait site up``: a three-node site that real clients use, stopped by SIGTERM, restarted with its data."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from node.proc import Deadline, spawn, wait_ready_file, wait_until
from tests.strait.kafka_io import produce, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

START_DEADLINE_S = 90.0
STOP_DEADLINE_S = 120.0


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
        if int(text.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _processes_of(directory: Path) -> list[str]:
    """Command lines of live processes that name ``directory`` (the nodes' configs, zoo.cfg)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(str(directory) in arg for arg in args) and _alive(int(cmdline.parent.name)):
            found.append(" ".join(args))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


class SiteUp:
    """``strait site up`` as a :class:`node.proc.Child` (its own session); always stopped."""

    def __init__(self, directory: Path, *args: str) -> None:
        self.directory = directory
        self.output = directory.parent / f"{directory.name}-launcher.log"
        argv = [sys.executable, "-m", "strait.cli", "site", "up", "--dir", str(directory), *args]
        self.child = spawn(argv, self.output, name="strait site up")

    def wait_ready(self) -> dict[str, Any]:
        return wait_ready_file(self.child, self.directory / "site.json", Deadline(START_DEADLINE_S, "site.json"))

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit code (-SIGKILL if it outlived the deadline)."""
        return self.child.stop(STOP_DEADLINE_S).returncode

    def kill(self) -> None:
        self.child.kill()  # its children die with it (parent-death signal)

    def log(self) -> str:
        return self.output.read_text(errors="replace")


def _health(admin_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{admin_url}/health", timeout=10) as response:
        assert response.status == 200
        body: dict[str, Any] = json.loads(response.read())
        return body


def test_site_up_serves_stops_cleanly_and_restarts_with_its_data(tmp_path: Path) -> None:
    directory = tmp_path / "east"
    values = [f"record-{i}".encode() for i in range(600)]

    site = SiteUp(directory, "--nodes", "3")
    try:
        info = site.wait_ready()
        assert info["name"] == "east"
        assert [n["broker_id"] for n in info["nodes"]] == [1, 2, 3]
        assert info["bootstrap"] == ",".join(n["bootstrap"] for n in info["nodes"])
        assert info["admin"] == [n["admin"] for n in info["nodes"]]
        assert info["zookeeper"].startswith("127.0.0.1:")
        printed = site.log()
        assert info["bootstrap"] in printed
        assert all(url in printed for url in info["admin"])
        for node in info["nodes"]:
            assert _health(node["admin"])["broker_id"] == node["broker_id"]
            assert (directory / f"node-{node['broker_id']}" / "d1").is_dir()
            assert (directory / f"node-{node['broker_id']}" / "d2").is_dir()
        children = _children(site.child.pid)
        assert {n["pid"] for n in info["nodes"]} <= children
        assert len(children) == 4, children  # three nodes and ZooKeeper's JVM

        admin = AdminClient({"bootstrap.servers": info["bootstrap"]})
        admin.create_topics([NewTopic("orders", num_partitions=3)])["orders"].result(30)
        metadata = admin.list_topics("orders", timeout=30).topics["orders"]
        # default.replication.factor = min(3, nodes)
        assert all(len(p.replicas) == 3 for p in metadata.partitions.values())
        produce(info["bootstrap"], "orders", values, partitions=3)
        marks, got = read_all(info["bootstrap"], "orders", partitions=3)
        assert sorted(got) == sorted(values)
        assert sum(high for _, high in marks.values()) == len(values)
        del admin  # librdkafka would log the nodes going away

        assert site.stop() == 0, site.log()
        assert "stopped" in site.log()
        assert not any(_alive(pid) for pid in children), [pid for pid in children if _alive(pid)]
        assert _processes_of(directory) == []
        assert not (directory / "site.json").exists()
        for broker_id in (1, 2, 3):
            assert "stopped cleanly" in (directory / f"node-{broker_id}" / "node.log").read_text()
    finally:
        site.kill()

    again = SiteUp(directory, "--nodes", "3")
    try:
        info = again.wait_ready()
        marks, got = read_all(info["bootstrap"], "orders", partitions=3)
        assert sorted(got) == sorted(values)
        assert again.stop() == 0, again.log()
    finally:
        again.kill()


def test_a_second_launcher_on_the_same_dir_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "east"
    site = SiteUp(directory, "--nodes", "1")
    try:
        site.wait_ready()
        second = subprocess.run(
            [sys.executable, "-m", "strait.cli", "site", "up", "--dir", str(directory), "--nodes", "1"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 1
        assert f"site directory {directory} is in use by pid {site.child.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        assert (directory / "site.json").exists(), "the refused launcher must leave the running site alone"
        assert site.stop() == 0, site.log()
    finally:
        site.kill()


def test_a_stop_while_starting_leaves_nothing_running(tmp_path: Path) -> None:
    directory = tmp_path / "east"
    site = SiteUp(directory, "--nodes", "3")
    try:
        # Signal as soon as ZooKeeper has its dir, well before three nodes can be ready.
        zookeeper_dir = Deadline(START_DEADLINE_S, "ZooKeeper's dir")
        wait_until((directory / "zookeeper").exists, zookeeper_dir, watch=[site.child], interval=0.02)
        assert site.stop() == 0, site.log()
        assert "stopped" in site.log()
        assert _processes_of(directory) == []
        assert not (directory / "site.json").exists()
    finally:
        site.kill()


def test_set_gives_every_node_a_property(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    directory = tmp_path / "east"
    site = SiteUp(directory, "--nodes", "1", "--set", "num.partitions=4", "--set", "log.retention.hours=2")
    try:
        info = site.wait_ready()
        properties = (directory / "node-1" / "server.properties").read_text().splitlines()
        assert "num.partitions=4" in properties and "log.retention.hours=2" in properties
        producer = Producer({"bootstrap.servers": info["bootstrap"]})
        producer.produce("auto-created", b"v")
        assert producer.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": info["bootstrap"]})
        assert len(admin.list_topics("auto-created", timeout=30).topics["auto-created"].partitions) == 4
        del admin, producer
        assert site.stop() == 0, site.log()
    finally:
        site.kill()
