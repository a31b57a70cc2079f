"""`strait up` survives a site loss: every process of east is killed with SIGKILL, `strait up`
says so and keeps west and the mirror running, and `strait site revive east` brings east back
on its data and on the same addresses, with the mirror copying from it again; a site lost by
its ZooKeeper alone gets only that back; Ctrl-C while a site is lost stops everything in
bounded time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos.errors import WorkloadError
from chaos.nemesis import kill_9_pid
from chaos.workload import read_back
from node.proc import Deadline, http_ok, spawn, wait_ready_file
from tests.node.harness import wait_for
from tests.strait.kafka_io import produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two sites and a mirror

# The revived node waits out its killed predecessor's ZooKeeper session: a short one keeps the
# test short (Kafka's own default was 6 s for years).
SESSION_TIMEOUT_MS = 6000


def records_on(bootstrap: str, topic: str) -> int:
    """How many records ``topic`` has on a site (0 while the site does not know it, or does not answer)."""
    try:
        return len(read_back(bootstrap, topic, timeout=5))
    except WorkloadError:
        return 0


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie): from /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def revive_east(directory: Path) -> subprocess.CompletedProcess[str]:
    """``strait site revive east``, as an operator runs it: a process of its own."""
    argv = [sys.executable, "-m", "strait.cli", "site", "revive", "east", "--dir", str(directory), "--timeout", "60"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)


def appliance(directory: Path) -> dict[str, Any]:
    described: dict[str, Any] = json.loads((directory / "appliance.json").read_text())
    return described


def test_strait_up_survives_the_loss_of_east_and_revives_it_on_its_data_and_ports(tmp_path: Path) -> None:
    directory = tmp_path / "appliance"
    log = tmp_path / "up.log"
    argv = [sys.executable, "-m", "strait.cli", "up", "--dir", str(directory), "--base-port", "0", "--nodes", "1"]
    argv += ["--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"]
    up = spawn(argv, log, name="strait up")
    try:
        info = wait_ready_file(up, directory / "appliance.json", Deadline(120, "strait up to write appliance.json"))
        east, west = info["sites"]["east"], info["sites"]["west"]
        assert east["state"] == west["state"] == "up"
        mirror_admin = info["links"][0]["admin"]
        before = [b"before-%d" % i for i in range(30)]
        produce(east["bootstrap"], "orders", before)
        on_east = sorted(read_back(east["bootstrap"], "orders"))
        wait_for("orders on west", lambda: records_on(west["bootstrap"], "orders") == 30, 40)

        # Site loss: SIGKILL of every east process (ZooKeeper and the node), not through strait up.
        site = json.loads((directory / "east" / "site.json").read_text())
        kill_9_pid(site["zookeeper_pid"], "east's ZooKeeper")
        for node in site["nodes"]:
            kill_9_pid(node["pid"], f"east's node {node['broker_id']}")

        wait_for("strait up to report the loss", lambda: "site east is lost" in log.read_text(), 15)
        output = log.read_text()
        assert "site east is lost: ZooKeeper and node 1 exited (killed by SIGKILL)" in output, output
        assert f"bring it back with: strait site revive east --dir {directory}" in output
        assert output.count("site east is lost") == 1
        assert up.poll() is None  # still running
        assert http_ok(f"{west['admin'][0]}/health")
        assert http_ok(f"{mirror_admin}/health")
        wait_for("appliance.json to say east is lost", lambda: appliance(directory)["sites"]["east"]["state"] == "lost")
        lost = appliance(directory)
        assert {k: v for k, v in lost["sites"]["east"].items() if k != "state"} == {
            k: v for k, v in east.items() if k != "state"
        }
        assert lost["sites"]["west"] == west

        revive = revive_east(directory)
        assert revive.returncode == 0, revive.stdout + revive.stderr
        assert revive.stdout.startswith(f"site east is back on its data: bootstrap {east['bootstrap']}")
        assert "bringing site east back on its data: ZooKeeper on 127.0.0.1:" in revive.stderr
        assert appliance(directory) == info  # the same addresses, and east is "up" again
        assert up.poll() is None

        # East serves the records acknowledged before the loss, on the same bootstrap ...
        assert sorted(read_back(east["bootstrap"], "orders")) == on_east
        # ... takes new ones, and the mirror copies them again.
        produce(east["bootstrap"], "orders", [b"after-%d" % i for i in range(10)])
        wait_for("the new records on west", lambda: records_on(west["bootstrap"], "orders") == 40, 40)

        # Lost again, by its ZooKeeper alone this time: revive restarts only ZooKeeper, and the
        # node that kept running carries on with it.
        site = json.loads((directory / "east" / "site.json").read_text())
        kill_9_pid(site["zookeeper_pid"], "east's ZooKeeper")
        wait_for("the second loss", lambda: log.read_text().count("site east is lost") == 2, 15)
        assert "site east is lost: ZooKeeper exited (killed by SIGKILL); node 1 still runs without ZooKeeper" in (
            log.read_text()
        )
        revive = revive_east(directory)
        assert revive.returncode == 0, revive.stdout + revive.stderr
        assert "node 1 on" not in revive.stderr  # it was left alone
        node_pid = site["nodes"][0]["pid"]
        assert json.loads((directory / "east" / "site.json").read_text())["nodes"][0]["pid"] == node_pid
        produce(east["bootstrap"], "orders", [b"later-%d" % i for i in range(5)])
        assert records_on(east["bootstrap"], "orders") == 45

        # And a third time: Ctrl-C while east is lost still stops everything, in bounded time (the
        # node left without ZooKeeper gets no controlled shutdown to wait for).
        kill_9_pid(json.loads((directory / "east" / "site.json").read_text())["zookeeper_pid"], "east's ZooKeeper")
        wait_for("the third loss", lambda: log.read_text().count("site east is lost") == 3, 15)
        up.signal(signal.SIGINT)
        assert up.wait(60) == 1, log.read_text()
        output = log.read_text()
        assert "error: site east was lost and not brought back: ZooKeeper exited (killed by SIGKILL)" in output
        assert output.rstrip().endswith("stopped, with the errors above")
        assert not (directory / "appliance.json").exists()
        assert not process_alive(node_pid)  # stopped and reaped by strait up
    finally:
        up.kill()
