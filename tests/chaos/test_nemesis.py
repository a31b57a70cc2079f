"""chaos.nemesis: each nemesis puts its fault in place before ``start`` returns and removes it in
``heal``; tiny Python children stand in for nodes, an echo server for a peer behind a proxy."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from chaos.errors import InvalidRequestError, NemesisError
from chaos.nemesis import Kill, Partition, Pause, kill_9, pause, resume
from chaos.proxy import ProxyHandle
from node.proc import Child, Deadline, spawn, wait_until
from tests.chaos.echo import echo_in_thread

IDLE = "import time\nprint('up', flush=True)\nwhile True:\n    time.sleep(1)\n"


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


class Sleeper:
    """A ProcessTarget: an idle Python child that reports itself up in its log."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.name = name
        self.log = tmp_path / f"{name}.log"
        self.child: Child | None = None
        self.starts = 0

    def start(self) -> Sleeper:
        child = self.child = spawn([sys.executable, "-c", IDLE], self.log, name=self.name)
        wait_until(lambda: "up" in child.log_tail(), Deadline(30, f"{self.name} up"), watch=[child])
        self.starts += 1
        return self

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(10)


@pytest.mark.integration
def test_kill_ends_every_target_and_heal_starts_them_again(tmp_path: Path) -> None:
    targets = [Sleeper(tmp_path, "a").start(), Sleeper(tmp_path, "b").start()]
    try:
        before = [t.child for t in targets]
        kill = Kill(targets)
        kill.start()
        assert all(c is not None and c.poll() == -9 for c in before)  # exited (and reaped) before start returned
        kill.start()  # idempotent: nothing more to kill
        assert kill.killed == targets
        kill.heal()
        assert [t.starts for t in targets] == [2, 2] and all(t.child is not None and t.child.running for t in targets)
        kill.heal()  # idempotent
        assert [t.starts for t in targets] == [2, 2]
        with Kill(targets[:1], restart=False):
            assert targets[0].child is not None and not targets[0].child.running
        assert targets[0].starts == 2  # left down
    finally:
        for target in targets:
            target.stop()


@pytest.mark.integration
def test_pause_stops_the_group_until_healed(tmp_path: Path) -> None:
    target = Sleeper(tmp_path, "paused").start()
    child = target.child
    assert child is not None
    try:
        with Pause([target]):
            assert state(child.pid) == "T"
        assert state(child.pid) != "T"
        pause(child)
        assert state(child.pid) == "T"
        resume(child)
        resume(child)  # not paused: left as it is
        assert state(child.pid) != "T"
        assert kill_9(child) == -9
        with pytest.raises(NemesisError, match=r"cannot pause paused \(pid \d+\): it is not running"):
            pause(child)
        with pytest.raises(NemesisError, match="never started"):
            Pause([Sleeper(tmp_path, "never")]).start()
    finally:
        target.stop()


def roundtrip(address: str) -> bytes | None:
    """Send a byte through ``address`` and read the echo; None when nothing came back within 0.5 s."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5) as sock:
            sock.sendall(b"x")
            return sock.recv(1) or None
    except OSError:
        return None


def test_a_partition_cuts_the_proxied_link_until_healed(chaos_proxy: ProxyHandle) -> None:
    with echo_in_thread() as echo:
        blackhole = chaos_proxy.add_proxy("b", echo).listen
        refuse = chaos_proxy.add_proxy("r", echo).listen
        assert roundtrip(blackhole) == roundtrip(refuse) == b"x"
        with Partition(chaos_proxy, ["b"]):
            assert {t.name for t in chaos_proxy.toxics("b")} == {"blackhole_upstream", "blackhole_downstream"}
            assert roundtrip(blackhole) is None
        with Partition(chaos_proxy, ["r"], mode="refuse"):
            assert not chaos_proxy.proxy("r").enabled and roundtrip(refuse) is None
        assert chaos_proxy.toxics("b") == [] and chaos_proxy.proxy("r").enabled
        assert roundtrip(blackhole) == roundtrip(refuse) == b"x"
        with pytest.raises(InvalidRequestError, match="partition mode"):
            Partition(chaos_proxy, ["b"], mode="sideways")  # type: ignore[arg-type]
