"""The processes of a local site and of the appliance: ``strait ...`` children spawned with
node.proc, stopped within a bound, their exits in words, and the loopback ports they bind."""

from __future__ import annotations

import signal
import socket
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

from node.proc import Child, spawn


def spawn_cli(args: list[str], log_path: Path, *, name: str) -> Child:
    """``strait <args>`` as a :class:`~node.proc.Child`: its own session, output appended to
    ``log_path``, killed by the kernel if the launcher's thread dies; if it misses a stop
    deadline, its threads' stacks are in its log before it is killed.

    Raises:
        OSError: the log file cannot be opened or the interpreter cannot be started.
    """
    return spawn([sys.executable, "-m", "strait.cli", *args], log_path, name=name, dump_signal=signal.SIGUSR1)


def stop_child(child: Child, subject: str, timeout: float, hurry: Callable[[], bool]) -> str | None:
    """Stop a node or the mirror: SIGTERM, up to ``timeout`` s (none once ``hurry()``), then SIGKILL
    (see :meth:`~node.proc.Child.stop`). Returns what did not go cleanly, in words, or None."""
    stopped = child.stop(timeout, hurry=hurry)
    if stopped.had_exited:
        return f"{subject} had exited on its own with code {stopped.returncode}; see {child.log_path}"
    if stopped.killed:
        why = "on a second stop request" if hurry() else f"after {timeout:g} s"
        return f"{subject} was killed {why}, before it had stopped; see {child.log_path}"
    # -SIGTERM: the signal came before the child had installed its handler (it was still
    # importing, with nothing open): stopped as asked all the same.
    if stopped.returncode not in (0, -signal.SIGTERM):
        return f"{subject} stopped with exit code {stopped.returncode}; see {child.log_path}"
    return None


def port_of(address: str) -> int:
    """The port of ``host:port`` or of a URL ``http://host:port``."""
    port = urllib.parse.urlsplit(address if "://" in address else f"//{address}").port
    if port is None:
        raise ValueError(f"no port in {address!r}")
    return port


def port_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now (as ours do, with SO_REUSEADDR:
    connections of a killed predecessor left in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def exit_reason(code: int) -> str:
    """An exit code in words: ``killed by SIGKILL``, ``code 1``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"code {code}"


def join_subjects(subjects: Sequence[str]) -> str:
    """``["ZooKeeper", "node 1", "node 2"]`` -> ``"ZooKeeper and nodes 1,2"``."""
    nodes = [s.removeprefix("node ") for s in subjects if s.startswith("node ")]
    words = [s for s in subjects if not s.startswith("node ")]
    if nodes:
        words.append(f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {','.join(nodes)}")
    return " and ".join(words)
