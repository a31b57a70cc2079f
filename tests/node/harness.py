"""Real broker processes for tests: ``strait node start`` as a :class:`node.proc.Child` (its own
session, killed with the test process), always stopped.

Readiness is the ready file the node writes once it serves (never a sleep). A node binds
port 0 the first time; ``restart`` keeps the port it got so clients keep their bootstrap.
Faults are chaos's nemeses (``chaos.nemesis.Kill``, ``Pause``), which act on ``NodeProcess.child``.

:func:`wait_for` is the tests' one way to wait for a state: transient Kafka answers
(``chaos.transient``) and the usual "not there yet" errors count as not yet.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.nemesis import kill_9
from chaos.transient import is_transient
from node.proc import Child, Deadline, NotReady, log_tail, spawn_ready, wait_until
from storage import TopicPartition, list_batches, segment_files
from strait._site import NodeFiles
from tests.client_usage import record_node

STRAIT = [sys.executable, "-m", "strait.cli"]
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


@dataclass
class NodeProcess(NodeFiles):
    broker_id: int
    workdir: Path
    zk_connect: str
    extra: dict[str, str] = field(default_factory=dict)
    child: Child | None = None
    bootstrap: str = ""
    admin_url: str = ""
    port: int = 0

    @property
    def name(self) -> str:
        return f"node {self.broker_id}"

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
        """Start the node (the one before must have ended) and return once its ready file is there.

        Raises node.proc.ChildExited (with the log tail) if it exits first, NotReady (after
        killing it) if it is not ready within READY_TIMEOUT_S.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        argv = [*STRAIT, "node", "start", "--config", str(self.config_path), "--ready-file", str(self.ready_path)]
        self.child, info = spawn_ready(argv, self.log_path, self.ready_path, READY_TIMEOUT_S, name=self.name)
        self.bootstrap = info["bootstrap"]
        self.admin_url = info["admin_url"]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def stop(self) -> int | None:
        """SIGTERM (a paused node is continued to handle it) and wait; SIGKILL the group after the
        timeout. Returns the exit code; None if it had to be killed or was never started."""
        if self.child is None:
            return None
        if self.child.running:
            record_node(self.admin_url)  # --client-usage: what the clients sent it (tests/client_usage.py)
        stopped = self.child.stop(STOP_TIMEOUT_S)
        return None if stopped.killed else stopped.returncode

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.running

    def restart(self, *, hard: bool = False) -> NodeProcess:
        """Stop the node (``hard``: kill -9, chaos's nemesis) and start it again on the same port."""
        if hard and self.child is not None:
            kill_9(self.child)
        else:
            self.stop()
        return self.start()


#: What a check may raise while the state it looks for is not there yet (a file not written,
#: a connection refused, a key missing from an answer, a half-written JSON).
NOT_YET = (KeyError, OSError, ValueError)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy, and return that; fail naming ``what`` and
    the last answer after ``timeout`` seconds.

    ``NOT_YET`` errors and transient Kafka states (``chaos.transient``: a just-created topic
    unknown to a broker, a leader or coordinator moving) count as not yet; any other exception
    fails the wait at once.
    """
    last: Any = None

    def attempt() -> Any:
        nonlocal last
        try:
            last = check()
        except NOT_YET as exc:
            last = exc
            return None
        except Exception as exc:
            if not is_transient(exc):
                raise
            last = exc
            return None
        return last

    try:
        return wait_until(attempt, Deadline(timeout, what), interval=interval)
    except NotReady:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}") from None


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
