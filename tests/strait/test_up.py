"""`strait up` (the README's run command): two local sites and a mirror east -> west that real
clients use, described in appliance.json, stopped by Ctrl-C."""

from __future__ import annotations

import json
import signal
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from chaos.errors import WorkloadError
from chaos.workload import read_back
from node.proc import Deadline, spawn, wait_ready_file
from tests.node.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two sites and a mirror


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    except KafkaException as exc:  # the group's coordinator on west still being chosen: not yet
        if exc.args[0].code() not in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
            raise
        return -1
    finally:
        consumer.close()


def records_on(bootstrap: str, topic: str) -> int:
    """How many records ``topic`` has on a site (0 while the site does not know it yet)."""
    try:
        return len(read_back(bootstrap, topic, timeout=5))
    except WorkloadError:
        return 0


def test_up_runs_two_sites_and_a_mirror_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    directory = tmp_path / "appliance"
    log = tmp_path / "up.log"
    argv = [sys.executable, "-m", "strait.cli", "up", "--dir", str(directory), "--base-port", "0"]
    up = spawn(argv, log, name="strait up")
    try:
        described = directory / "appliance.json"
        info = wait_ready_file(up, described, Deadline(180, "strait up to write appliance.json"))
        east, west = info["sites"]["east"], info["sites"]["west"]
        assert len(east["bootstrap"].split(",")) == len(west["bootstrap"].split(",")) == 3
        assert east["zookeeper"].count(":") == 1 and len(east["admin"]) == 3
        (link,) = info["links"]
        assert (link["name"], link["source"], link["target"]) == ("east-to-west", "east", "west")
        with urllib.request.urlopen(f"{link['admin']}/v1/links", timeout=10) as response:
            links = json.loads(response.read())["links"]
        assert [entry["link"]["name"] for entry in links] == ["east-to-west"]
        west_admin = AdminClient({"bootstrap.servers": west["bootstrap"]})
        assert sorted(west_admin.list_topics(timeout=20).brokers) == [1, 2, 3]

        # A topic produced on east appears on west (within the 10 s topic sync) at the same offsets.
        producer = Producer({"bootstrap.servers": east["bootstrap"], "acks": "all"})
        for i in range(50):
            producer.produce("demo", key=b"k%d" % (i % 3), value=b"v%d" % i, headers=[("i", b"%d" % i)])
        assert producer.flush(30) == 0
        on_east = sorted(read_back(east["bootstrap"], "demo"))
        assert len(on_east) == 50
        wait_for("demo on west", lambda: records_on(west["bootstrap"], "demo") == 50, 40)
        assert sorted(read_back(west["bootstrap"], "demo")) == on_east
        # A group's committed offset follows.
        consumer = Consumer({"bootstrap.servers": east["bootstrap"], "group.id": "demo-readers"})
        consumer.commit(offsets=[TopicPartition("demo", 0, 42)], asynchronous=False)
        consumer.close()
        wait_for("the group's offset on west", lambda: committed(west["bootstrap"], "demo-readers", "demo") == 42, 30)

        up.signal(signal.SIGINT)  # Ctrl-C reaches the terminal's foreground process group
        assert up.wait(120) == 0
        output = log.read_text()
        assert "strait is up: two sites and a mirror" in output
        assert "stopped" in output and "error" not in output, output
        assert not described.exists()
        for site in ("east", "west"):
            for node in (1, 2, 3):
                assert "stopped cleanly" in (directory / site / f"node-{node}" / "node.log").read_text()
    finally:
        up.kill()
