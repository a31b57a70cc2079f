"""``strait zookeeper start`` as a user runs it: a real process, real signals, a real JVM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from node.coordination import server_status
from node.proc import Child, Deadline, spawn, wait_ready_file
from tests.node.coordination.test_embedded import process_gone

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
# The group as a module, so these tests do not depend on which commands strait/cli.py registers.
ZOOKEEPER_CLI = [sys.executable, "-m", "strait._zookeeper_commands"]


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.fixture
def run_cli(tmp_path: Path) -> Iterator[Callable[..., Child]]:
    started: list[Child] = []

    def run(*args: str | Path) -> Child:
        log = tmp_path / f"cli-{len(started)}.err"
        started.append(spawn([*ZOOKEEPER_CLI, *map(str, args)], log, name="strait zookeeper start", cwd=REPO))
        return started[-1]

    yield run
    for cli in started:
        cli.kill()  # a failed test: kill the CLI; its JVM follows (parent-death signal)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_signalled_then_exits_0(
    tmp_path: Path, run_cli: Callable[..., Child], stop_signal: signal.Signals
) -> None:
    ready = tmp_path / "run" / "ready.json"
    cli = run_cli("start", "--data-dir", tmp_path / "zk", "--port", "0", "--ready-file", ready)
    info = wait_ready_file(cli, ready, Deadline(60, "the CLI's ready file"))
    assert info["pid"] == cli.pid
    connect = str(info["connect"])
    host, port = connect.rsplit(":", 1)
    assert host == "127.0.0.1"
    assert server_status(host, int(port)) is not None
    (jvm,) = children_of(cli.pid)

    cli.signal(stop_signal)
    assert cli.wait(timeout=30) == 0, (tmp_path / "cli-0.err").read_text()
    assert process_gone(jvm, timeout=0), "the JVM outlived the CLI"
    assert server_status(host, int(port)) is None
    assert not ready.exists()
    assert "stopped" in (tmp_path / "cli-0.err").read_text()


def run_to_completion(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ZOOKEEPER_CLI, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_data_dir_that_is_a_file_is_rejected(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a dir")
    result = run_to_completion("start", "--data-dir", a_file, "--port", "0")
    assert result.returncode == 2
    assert "--data-dir" in result.stderr and str(a_file) in result.stderr


def test_missing_jars_are_named(tmp_path: Path) -> None:
    result = run_to_completion("start", "--data-dir", tmp_path / "zk", "--port", "0", "--jars", tmp_path)
    assert result.returncode == 2
    assert "--jars" in result.stderr and f"{tmp_path} holds no zookeeper" in result.stderr


def test_missing_java_is_named(tmp_path: Path) -> None:
    result = run_to_completion("start", "--data-dir", tmp_path / "zk", "--java", "/opt/none/bin/java")
    assert result.returncode == 2
    assert "'/opt/none/bin/java' not found" in result.stderr
    assert not (tmp_path / "zk").exists()  # nothing was started or written


def test_help_describes_the_options() -> None:
    result = run_to_completion("start", "--help")
    assert result.returncode == 0
    for option in ("--data-dir", "--port", "--host", "--jars", "STRAIT_ZOOKEEPER_JARS", "--ready-file"):
        assert option in result.stdout
