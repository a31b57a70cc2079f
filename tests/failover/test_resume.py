"""``kill -9`` of ``strait failover`` half way through promote, reverse and failback: the same
command run again finishes the job from the journal, and no step is done twice."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Producer

from chaos.workload import read_back
from failover.state import open_store
from failover.topology import load_topology
from node.proc import Deadline, wait_until
from tests.failover.appliance import LINK, Appliance, create_topic, failover, start_appliance, wait_mirrored

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.chaos]


def kill_after(app: Appliance, step: str, *args: str, log: Path) -> None:
    """Run ``strait failover ARGS --stall-after STEP`` and SIGKILL it once that step is recorded."""
    argv = [sys.executable, "-m", "strait.cli", "failover", *args, "--topology", str(app.topology)]
    with log.open("w") as out:
        child = subprocess.Popen([*argv, "--stall-after", step], stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: f"stalled after step {step!r}" in log.read_text(), Deadline(120, f"{step} to be done"))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)


def journal(app: Appliance) -> list[dict[str, Any]]:
    topology = load_topology(app.topology)
    link = topology.link(LINK)

    async def read() -> list[dict[str, Any]]:
        async with open_store(topology.site(link.target).zookeeper, LINK, link.source, link.target) as store:
            return await store.journal(limit=1000)

    return trio.run(read)


def steps_of(entries: list[dict[str, Any]], operation: str) -> Counter[str]:
    return Counter(e["step"] for e in entries if e["operation"] == operation and e["step"] not in ("fence", "unfence"))


def test_each_command_killed_half_way_finishes_when_run_again(tmp_path: Path) -> None:
    app = start_appliance(tmp_path, nodes=1)
    try:
        east, west = app.bootstrap("east"), app.bootstrap("west")
        create_topic(east, "orders", 2)
        producer = Producer({"bootstrap.servers": east, "acks": "all"})
        for i in range(200):
            producer.produce("orders", value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        wait_mirrored(app, "orders", 200)

        kill_after(app, "drain", "promote", LINK, "--planned", log=tmp_path / "promote.log")
        code, answer, stderr = failover(app, "promote", LINK, "--planned")
        assert code == 0, stderr
        assert "resuming `promote`" in stderr and "copy everything: done before" in stderr
        assert [s["step"] for s in answer["steps"] if s["resumed"]] == ["plan", "fence-source", "drain"]

        kill_after(app, "export", "reverse", LINK, "--export", str(tmp_path / "export"), log=tmp_path / "reverse.log")
        code, answer, stderr = failover(app, "reverse", LINK, "--export", str(tmp_path / "export"))
        assert code == 0, stderr
        assert "export" in [s["step"] for s in answer["steps"] if s["resumed"]]

        kill_after(app, "stop-reverse", "failback", LINK, log=tmp_path / "failback.log")
        code, answer, stderr = failover(app, "failback", LINK)
        assert code == 0, stderr
        assert answer["state"] == "mirroring" and answer["primary"] == "east"

        entries = journal(app)
        for operation, steps in (
            (
                "promote",
                [
                    "plan",
                    "fence-source",
                    "drain",
                    "sync-groups",
                    "stop-link",
                    "cut",
                    "unmirror-target",
                    "abort-transactions",
                ],
            ),
            ("reverse", ["fence-old", "settle", "export", "truncate", "mirror-old", "start-reverse"]),
            (
                "failback",
                [
                    "plan",
                    "fence-new",
                    "drain",
                    "sync-groups",
                    "stop-reverse",
                    "mirror-new",
                    "restore-link",
                    "unmirror-old",
                ],
            ),
        ):
            assert steps_of(entries, operation) == Counter(["begin", *steps, "end"]), operation
        # The sites agree record for record after all of it.
        assert sorted(read_back(east, "orders")) == sorted(read_back(west, "orders"))
    finally:
        app.stop()
