"""`strait up` (what `make run` starts): a local site that real clients use, stopped by Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.integration


def test_up_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "strait.cli", "up", "--data-dir", str(tmp_path), "--base-port", "0", "--nodes", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        ready = [tmp_path / "east" / f"node{i}" / "ready.json" for i in (1, 2)]
        deadline = time.monotonic() + 90
        while not all(p.exists() for p in ready):
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "strait up did not start its nodes"
            time.sleep(0.1)
        bootstrap = json.loads(ready[0].read_text())["bootstrap"]
        brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).brokers
        assert sorted(brokers) == [1, 2]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        output = proc.stdout.read().decode() if proc.stdout else ""
        assert "stopped" in output
        for node in (1, 2):
            assert "stopped cleanly" in (tmp_path / "east" / f"node{node}" / "node.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
