"""Real broker processes for tests: ``strait node start`` in its own session, always stopped.

Readiness is the ready file the node writes once it serves (never a sleep). A node binds
port 0 the first time; ``restart`` keeps the port it got so clients keep their bootstrap.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage import TopicPartition, list_batches, segment_files

STRAIT = [sys.executable, "-m", "strait.cli"]
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGKILL if the test process dies (no orphans when pytest is killed)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class NodeProcess:
    broker_id: int
    workdir: Path
    zk_connect: str
    extra: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    bootstrap: str = ""
    admin_url: str = ""
    port: int = 0

    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def ready_path(self) -> Path:
        return self.workdir / "ready.json"

    @property
    def log_path(self) -> Path:
        return self.workdir / "node.log"

    @property
    def log_dirs(self) -> list[Path]:
        return [self.workdir / "d1", self.workdir / "d2"]

    def write_config(self) -> None:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "zookeeper.connect": self.zk_connect,
            "strait.admin.listener": "127.0.0.1:0",
            "num.partitions": "1",
            # Short sessions: after a kill -9 the restarted node waits for the old one to expire.
            "zookeeper.session.timeout.ms": "6000",
            # One broker: __consumer_offsets with one replica, fewer partitions, no join delay.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.extra)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def start(self) -> NodeProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.ready_path.unlink(missing_ok=True)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [*STRAIT, "node", "start", "--config", str(self.config_path), "--ready-file", str(self.ready_path)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl(2), async-signal-safe
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready_path.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.broker_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"node {self.broker_id} not ready after {READY_TIMEOUT_S} s:\n{self.log_tail()}")
            time.sleep(0.05)
        info = json.loads(self.ready_path.read_text())
        self.bootstrap = info["bootstrap"]
        self.admin_url = info["admin_url"]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL the group after the timeout. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        self.resume()  # a paused node handles SIGTERM once it runs again
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """kill -9 the node's whole process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(STOP_TIMEOUT_S)

    def pause(self) -> None:
        """SIGSTOP the node's process group (a GC pause or a frozen VM, as seen from outside)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def restart(self, *, hard: bool = False) -> NodeProcess:
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy (an OSError, KeyError or ValueError counts as
    not yet); fail naming ``what`` and the last answer after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (KeyError, OSError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def stored_batches(node: NodeProcess, topic: str, partition: int = 0) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, leader epoch, CRC) of every batch of ``node``'s replica, read from its files."""
    tp = TopicPartition(topic, partition)
    for d in node.log_dirs:
        directory = d / tp.dir_name
        if directory.exists():
            return [
                (b.header.base_offset, b.header.last_offset, b.header.partition_leader_epoch, b.header.crc)
                for seg in segment_files(directory)
                for b in list_batches(seg)
            ]
    return []
