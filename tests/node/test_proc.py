"""node.proc, the process kit: tiny Python children show each guarantee (spawn, readiness, bounded
stop, die-with-parent), and the file idioms run without processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from node.proc import (
    Child,
    ChildExited,
    Deadline,
    NotReady,
    atomic_write,
    log_tail,
    read_ready_file,
    reserve_port,
    spawn,
    wait_http_ok,
    wait_port,
    wait_ready_file,
    wait_until,
)
from node.proc._ports import LOWEST, ephemeral_range

REPO = Path(__file__).resolve().parents[2]
PYTHON = [sys.executable, "-c"]

# A child that installs its handlers, says so in its log, and then idles until signalled.
IGNORES_SIGTERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
IDLES = "while True:\n    time.sleep(1)\n"


def gone(pid: int) -> bool:
    """No such process, or only a zombie nobody reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    try:
        return wait_until(lambda: gone(pid), Deadline(seconds, f"pid {pid} to end"))
    except NotReady:
        return False


def says(path: Path, text: str) -> bool:
    return text in log_tail(path, 1000)


def line_with(path: Path, text: str) -> str | None:
    """The first line of the log at ``path`` that holds ``text``, if any yet."""
    return next((line for line in log_tail(path, 1000).splitlines() if text in line), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stubborn(tmp_path: Path) -> Child:
    """A child that ignores SIGTERM, once its handler is in place."""
    log = tmp_path / "stubborn.log"
    child = spawn([*PYTHON, IGNORES_SIGTERM + IDLES], log, name="stubborn")
    wait_until(lambda: says(log, "ready"), Deadline(30, "the handler"), watch=[child])
    return child


# -- processes ------------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_ready_file_is_awaited_and_the_child_leads_its_own_session(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    script = (
        "import json, os, sys, time\n"
        "from pathlib import Path\n"
        "from node.proc import atomic_write\n"
        "time.sleep(0.2)\n"
        "print('writing', flush=True)\n"
        "atomic_write(Path(sys.argv[1]), json.dumps({'pid': os.getpid()}))\n" + IDLES
    )
    child = spawn([*PYTHON, script, str(ready)], tmp_path / "child.log", name="writer", cwd=REPO)
    try:
        info = wait_ready_file(child, ready, Deadline(30, "the ready file"))
        assert info == {"pid": child.pid}
        assert os.getsid(child.pid) == child.pid and os.getpgid(child.pid) == child.pid
        assert child.running and child.poll() is None
        assert child.log_tail() == "writing"  # unbuffered: the log is current
    finally:
        stopped = child.stop(10)
    assert (stopped.returncode, stopped.had_exited, stopped.killed) == (-signal.SIGTERM, False, False)
    assert child.stop(10).had_exited  # idempotent
    assert not child.running and child.kill() == -signal.SIGTERM


@pytest.mark.integration
def test_a_port_and_a_health_url_are_awaited(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "health").write_text("ok")
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path / "www")]
    child = spawn(argv, tmp_path / "http.log", name="http.server")
    try:
        wait_port(child, "127.0.0.1", port, Deadline(30, "the HTTP port"))
        wait_http_ok(child, f"http://127.0.0.1:{port}/health", Deadline(30, "/health"))
        with pytest.raises(NotReady, match=r"^/nothing: not within 0\.2 s; .*http\.log ends with:"):
            wait_http_ok(child, f"http://127.0.0.1:{port}/nothing", Deadline(0.2, "/nothing"))
    finally:
        child.stop(10)


@pytest.mark.integration
def test_a_child_that_exits_while_awaited_is_reported_at_once_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text("an earlier run's output\n")
    child = spawn([*PYTHON, "import sys; print('bad config: x', flush=True); sys.exit(3)"], log, name="crasher")
    started = time.monotonic()
    with pytest.raises(ChildExited) as caught:
        wait_ready_file(child, tmp_path / "never.json", Deadline(60, "its ready file"))
    assert time.monotonic() - started < 30  # not the deadline: the exit ended the wait
    assert caught.value.returncode == 3
    message = str(caught.value)
    assert message.startswith(f"crasher (pid {child.pid}) exited with code 3 while waiting for its ready file;")
    assert message.endswith("ends with:\nbad config: x")  # this run's output only
    assert child.stop(10) == child.stop(10)  # reaped; nothing to signal


@pytest.mark.integration
def test_stop_escalates_to_sigkill_for_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    child = stubborn(tmp_path)
    started = time.monotonic()
    stopped = child.stop(0.5)
    took = time.monotonic() - started
    assert (stopped.returncode, stopped.had_exited, stopped.killed) == (-signal.SIGKILL, False, True)
    assert 0.5 <= took < 10
    assert gone(child.pid)


@pytest.mark.integration
def test_a_child_that_misses_its_deadline_writes_its_stacks_to_its_log_before_it_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "hung.log"
    hangs = (
        "import faulthandler, signal, threading, time\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "def stuck_in_close():\n    time.sleep(3600)\n"
        "threading.Thread(target=stuck_in_close, name='closer', daemon=True).start()\n"
        "print('ready', flush=True)\n"
    )
    child = spawn([*PYTHON, hangs + IDLES], log, name="hung", dump_signal=signal.SIGUSR1)
    wait_until(lambda: says(log, "ready"), Deadline(30, "the handlers"), watch=[child])
    stopped = child.stop(0.5)
    assert (stopped.returncode, stopped.killed) == (-signal.SIGKILL, True)
    dump = log_tail(log, 1000)
    assert "stuck_in_close" in dump and "Current thread" in dump  # every thread, where it hung


@pytest.mark.integration
def test_strait_commands_answer_the_dump_signal_without_dying(tmp_path: Path) -> None:
    log = tmp_path / "cli.log"
    # `strait --help` exits at once; a command that idles is needed: run the CLI's entry in-process
    # with a callback that idles, as every `strait` command runs under it.
    idles = (
        "import sys, time, click\n"
        "from strait import cli\n"
        "@cli.main.command('idle')\n"
        "def idle():\n    print('ready', flush=True)\n    time.sleep(3600)\n"
        "sys.argv = ['strait', 'idle']\n"
        "cli.run()\n"
    )
    child = spawn([*PYTHON, idles], log, name="cli", cwd=REPO, dump_signal=signal.SIGUSR1)
    wait_until(lambda: says(log, "ready"), Deadline(60, "the command"), watch=[child])
    assert child.signal(signal.SIGUSR1)
    wait_until(lambda: says(log, "Current thread"), Deadline(30, "the stacks"), watch=[child])
    assert child.running  # the dump signal does not end it
    assert child.stop(30).returncode == -signal.SIGTERM


@pytest.mark.integration
def test_a_hurried_stop_kills_at_once(tmp_path: Path) -> None:
    child = stubborn(tmp_path)
    started = time.monotonic()
    assert child.stop(60, hurry=lambda: True).killed
    assert time.monotonic() - started < 10


@pytest.mark.integration
def test_stop_ends_a_paused_child_gracefully_and_leaves_nothing_of_its_group(tmp_path: Path) -> None:
    log = tmp_path / "parent.log"
    # The child starts a grandchild in its own group that ignores SIGTERM, then idles.
    script = (
        "import subprocess, sys, time\n"
        f"g = subprocess.Popen([sys.executable, '-c', {IGNORES_SIGTERM + IDLES!r}])\n"
        "print('grandchild', g.pid, flush=True)\n" + IDLES
    )
    child = spawn([*PYTHON, script], log, name="parent")
    wait_until(lambda: says(log, "ready"), Deadline(30, "the grandchild's handler"), watch=[child])
    line = wait_until(lambda: line_with(log, "grandchild "), Deadline(30, "the grandchild's pid"), watch=[child])
    grandchild = int(line.split()[1])
    assert os.getpgid(grandchild) == child.pid
    assert child.signal(signal.SIGSTOP)
    stopped = child.stop(20)  # SIGCONT follows the SIGTERM: the paused child handles it
    assert (stopped.returncode, stopped.killed) == (-signal.SIGTERM, False)
    assert gone(grandchild), f"the grandchild {grandchild} outlived the stop"
    assert not child.signal(signal.SIGTERM)  # reaped: its pid may be someone else's now


@pytest.mark.integration
def test_a_child_dies_with_the_thread_that_spawned_it(tmp_path: Path) -> None:
    parent_log, child_log = tmp_path / "parent.log", tmp_path / "child.log"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from node.proc import spawn\n"
        f"child = spawn([sys.executable, '-c', 'import time\\nwhile True: time.sleep(1)'], Path({str(child_log)!r}))\n"
        "print('child', child.pid, flush=True)\n" + IDLES
    )
    parent = spawn([*PYTHON, script], parent_log, name="launcher", cwd=REPO, env={"PYTHONPATH": str(REPO)})
    try:
        line = wait_until(lambda: line_with(parent_log, "child "), Deadline(30, "the child's pid"), watch=[parent])
        grandchild = int(line.split()[1])
        assert os.getsid(grandchild) == grandchild  # its own session: the parent's group kill cannot reach it
        assert parent.kill() == -signal.SIGKILL  # no cleanup code runs in the parent
        assert wait_gone(grandchild), f"the child {grandchild} outlived its parent"
    finally:
        parent.kill()


# -- files ------------------------------------------------------------------------------------------


def test_atomic_write_replaces_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "ready.json"
    atomic_write(path, '{"a": 1}\n')
    assert read_ready_file(path) == {"a": 1}
    assert path.stat().st_mode & 0o777 == 0o644
    atomic_write(path, b"\x00\x01", mode=0o600)
    assert path.read_bytes() == b"\x00\x01" and path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready.json"]


def test_a_failed_atomic_write_leaves_the_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    atomic_write(path, "old\n")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, "new, and much longer than the old content\n")
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "no-such-dir" / "x", "x")


def test_a_private_file_is_never_readable_by_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real_replace = os.replace

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append(os.stat(src).st_mode & 0o777)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    atomic_write(tmp_path / "admin.token", "s3cret\n", mode=0o600)
    assert seen == [0o600]


def test_log_tail_reads_this_runs_end_and_never_raises(tmp_path: Path) -> None:
    log = tmp_path / "node.log"
    assert log_tail(log).startswith("(no log: ")
    log.write_text("")
    assert log_tail(log) == "(log is empty)"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)))
    assert log_tail(log, 3) == "line 99997\nline 99998\nline 99999"
    offset = log.stat().st_size
    with log.open("a") as out:
        out.write("second run\n")
    assert log_tail(log, 20, offset=offset) == "second run"


def test_deadlines_and_waits_without_a_child() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        Deadline(-1, "x")
    calls = iter([None, 0, "", "found"])
    assert wait_until(lambda: next(calls), Deadline(10, "x"), interval=0.001) == "found"
    with pytest.raises(NotReady, match=r"^nothing: not within 0 s$"):
        wait_until(lambda: None, Deadline(0, "nothing"))
    assert read_ready_file(Path("/nonexistent/ready.json")) is None


# -- ports ----------------------------------------------------------------------------------------


def test_a_reserved_port_is_free_and_below_the_ephemeral_range() -> None:
    low, _ = ephemeral_range()
    ports = {reserve_port() for _ in range(20)}
    assert all(LOWEST <= port < low for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: nothing else took it


def test_a_port_someone_listens_on_is_never_reserved(monkeypatch: pytest.MonkeyPatch) -> None:
    import node.proc._ports as ports

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        held.listen()
        # The range below the "ephemeral" one is `taken` and the port after it: tried many
        # times, `taken` never comes back (the other one, or the kernel's choice, does).
        monkeypatch.setattr(ports, "LOWEST", taken)
        monkeypatch.setattr(ports, "ephemeral_range", lambda: (taken + 2, 60999))
        assert taken not in {reserve_port() for _ in range(20)}


def test_a_port_is_never_handed_out_twice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import node.proc._ports as ports

    class Repeats:
        """Proposes the same port again and again, then others: what a random draw can do."""

        def __init__(self) -> None:
            self.draws = iter([25_000, 25_000, 25_000, 25_001, 25_002])

        def randint(self, low: int, high: int) -> int:
            return next(self.draws, low)

    monkeypatch.setattr(ports.random, "SystemRandom", Repeats)
    monkeypatch.setattr(ports, "_handed_out", ports.collections.OrderedDict())
    monkeypatch.setattr(ports, "REGISTRY", tmp_path / "ports")
    monkeypatch.setattr(ports, "_bindable", lambda *_: True)  # whatever this machine listens on
    first, second = reserve_port(), reserve_port()
    assert first == 25_000 and second == 25_001  # a LOCAL and a WAN port, never the same


def test_a_port_another_live_process_claimed_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import node.proc._ports as ports

    registry = tmp_path / "ports"
    registry.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (registry / "25000").write_text(str(other.pid))  # claimed by a live process
        (registry / "25001").write_text("999999999")  # by one long gone: lapsed
        draws = iter([25_000, 25_001])
        monkeypatch.setattr(ports.random, "SystemRandom", type("R", (), {"randint": lambda *_: next(draws)}))
        monkeypatch.setattr(ports, "_handed_out", ports.collections.OrderedDict())
        monkeypatch.setattr(ports, "REGISTRY", registry)
        monkeypatch.setattr(ports, "_bindable", lambda *_: True)
        assert reserve_port() == 25_001
        assert (registry / "25001").read_text() == str(os.getpid())  # now this process's claim
    finally:
        other.kill()
        other.wait()
