"""EmbeddedZooKeeper against a real JVM: start, readiness, stop, failures, parent death."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from chaos.nemesis import kill_9
from node.coordination import EmbeddedZooKeeper, ZooKeeperError, server_status
from node.proc import Deadline, NotReady, log_tail, spawn, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def process_gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` no longer exists (or is a zombie nobody reaped yet) within ``timeout`` s (0: now)."""

    def gone() -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] == "Z"

    try:
        return wait_until(gone, Deadline(timeout, f"pid {pid} to end"))
    except NotReady:
        return False


def test_start_serves_on_a_free_port_and_stop_ends_it(tmp_path: Path) -> None:
    server = EmbeddedZooKeeper(tmp_path / "zk", port=0)
    try:
        server.start()
        assert server.port != 0
        assert server.connect_string == f"127.0.0.1:{server.port}"
        status = server_status("127.0.0.1", server.port)
        assert status is not None and "Mode: standalone" in status
        pid = server.pid
        assert pid is not None and server.poll() is None
        config = (tmp_path / "zk" / "zoo.cfg").read_text()
        assert f"clientPort={server.port}\n" in config and "clientPortAddress=127.0.0.1\n" in config
        assert "admin.enableServer=false\n" in config and "4lw.commands.whitelist=srvr,ruok\n" in config
        # The JVM runs in its own session, so a terminal's Ctrl-C does not reach it.
        assert os.getsid(pid) == pid
    finally:
        code = server.stop()
    assert code == 143  # the JVM's exit code after SIGTERM: it shut down, it was not killed
    assert process_gone(pid)
    assert server_status("127.0.0.1", server.port) is None
    assert server.stop() == 143  # idempotent
    assert server.pid is None


def test_context_manager_and_a_busy_port(tmp_path: Path, zookeeper: str) -> None:
    session_port = int(zookeeper.rsplit(":", 1)[1])
    with pytest.raises(ZooKeeperError, match=f"already serves on 127.0.0.1:{session_port}"):
        EmbeddedZooKeeper(tmp_path / "busy", port=session_port).start()
    with EmbeddedZooKeeper(tmp_path / "zk", port=0) as server:
        assert server.port != session_port
        assert server_status("127.0.0.1", server.port) is not None
        pid = server.pid
        assert pid is not None
    assert process_gone(pid)


def test_startup_failure_reports_the_log_tail(tmp_path: Path) -> None:
    with socket.socket() as squatter:  # a port that is taken, but not by a ZooKeeper
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        server = EmbeddedZooKeeper(tmp_path / "zk", port=port)
        with pytest.raises(ZooKeeperError, match=r"exited with code 1 during startup(.|\n)*BindException"):
            server.start()
    assert server.pid is None


def test_startup_deadline_kills_the_jvm(tmp_path: Path) -> None:
    server = EmbeddedZooKeeper(tmp_path / "zk", port=0)
    with pytest.raises(ZooKeeperError, match="not serving before the startup deadline; killed it"):
        server.start(timeout=0.01)
    assert server.pid is None and server.poll() is not None


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ZooKeeperError, match=f"data dir {a_file} exists and is not a directory"):
        EmbeddedZooKeeper(a_file)
    with pytest.raises(ZooKeeperError, match=f"jars dir {tmp_path} holds no zookeeper"):
        EmbeddedZooKeeper(tmp_path / "zk", jars=tmp_path)
    with pytest.raises(ZooKeeperError, match="java executable '/no/such/java' not found"):
        EmbeddedZooKeeper(tmp_path / "zk", java="/no/such/java")
    with pytest.raises(ZooKeeperError, match="port 65536 is out of range"):
        EmbeddedZooKeeper(tmp_path / "zk", port=65536)


def test_the_jvm_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from node.coordination import EmbeddedZooKeeper\n"
        "server = EmbeddedZooKeeper(Path(sys.argv[1]), port=0)\n"
        "server.start()\n"
        "print(server.pid, server.port, flush=True)\n"
        "time.sleep(120)  # until the test kills us\n"
    )
    log = tmp_path / "parent.log"
    parent = spawn([sys.executable, "-c", script, str(tmp_path / "zk")], log, name="ZooKeeper's parent", cwd=REPO)

    def reported() -> list[str] | None:  # the line "<pid> <port>"
        words = log_tail(log, 1).split()
        return words if len(words) == 2 and all(w.isdigit() for w in words) else None

    jvm_pid = None
    try:
        words = wait_until(reported, Deadline(60, "the parent to report a started ZooKeeper"), watch=[parent])
        jvm_pid, port = map(int, words)
        assert server_status("127.0.0.1", port) is not None
        kill_9(parent)  # no cleanup code runs in the parent
        assert process_gone(jvm_pid), f"ZooKeeper (pid {jvm_pid}) outlived its parent"
    finally:
        parent.kill()
        if jvm_pid is not None and not process_gone(jvm_pid, timeout=0):
            os.killpg(jvm_pid, signal.SIGKILL)  # it leads its own group; not our child, so no Child to kill
