"""Process nemeses: kill -9 and pause (SIGSTOP) a process group, as a crash or a frozen machine looks from outside.

They act on :class:`node.proc.Child` processes, which lead their own process groups, so a
signal reaches the process and everything it started in its group, and never anything else.
:class:`Kill` and :class:`Pause` take *targets*: the harness objects that own a child and can
start it again (a test's node or mirror process), so that healing a kill restarts the same
node, with its data and its port.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from chaos.errors import NemesisError
from node.proc import Child, Deadline, NotReady, wait_until

from ._base import NemesisContext

#: How long a signalled process may take to show the state the signal asked for.
SIGNAL_SETTLE_S = 10.0


class ProcessTarget(Protocol):
    """A process a nemesis can take down and bring back: a test's node or mirror process."""

    @property
    def name(self) -> str: ...

    @property
    def child(self) -> Child | None:
        """The process as last started (None: never started)."""

    def start(self) -> object:
        """Start the process again (same data, same ports) and return once it is ready."""


def kill_9(child: Child) -> int:
    """SIGKILL ``child``'s process group and return once the child has exited (reaped); its exit code.

    No cleanup code runs in the process: what it had not written is lost, its sockets are
    reset, its ZooKeeper session lives on until it expires. Idempotent.
    """
    return child.kill()


def kill_9_pid(pid: int, name: str) -> None:
    """SIGKILL the process group that process ``pid`` leads, when that process is another
    launcher's child (a ``strait up``'s node or ZooKeeper, whose pids its ``site.json`` names),
    and return once the process has died (a zombie its parent has not reaped yet counts).

    Its parent keeps the pid from being reused until it reaps it, which ``strait up`` does only
    when it stops or restarts that process. Idempotent.

    Raises:
        NemesisError: ``pid`` leads no process group, or it was still alive after ``SIGNAL_SETTLE_S``.
    """
    if _state(pid) in ("Z", "?"):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        raise NemesisError(f"cannot kill {name}: pid {pid} leads no process group") from None
    try:
        wait_until(lambda: _state(pid) in ("Z", "?"), Deadline(SIGNAL_SETTLE_S, f"{name} (pid {pid}) to die"))
    except NotReady as exc:
        raise NemesisError(str(exc)) from None


def pause(child: Child) -> None:
    """SIGSTOP ``child``'s process group; returns once the child is stopped.

    Raises:
        NemesisError: the child is not running, or it did not stop within ``SIGNAL_SETTLE_S``.
    """
    if not child.running or not child.signal(signal.SIGSTOP):
        raise NemesisError(f"cannot pause {child.name} (pid {child.pid}): it is not running")
    _settle(child, stopped=True)


def resume(child: Child) -> None:
    """SIGCONT ``child``'s process group; returns once the child runs again. A child that is not
    paused (or has exited) is left as it is.

    Raises:
        NemesisError: the child was still stopped after ``SIGNAL_SETTLE_S``.
    """
    if child.signal(signal.SIGCONT):
        _settle(child, stopped=False)


def _settle(child: Child, *, stopped: bool) -> None:
    def settled() -> bool:
        return child.poll() is not None or (_state(child.pid) == "T") == stopped

    what = f"{child.name} (pid {child.pid}) to {'stop' if stopped else 'run again'}"
    try:
        wait_until(settled, Deadline(SIGNAL_SETTLE_S, what), interval=0.01)
    except NotReady as exc:
        raise NemesisError(str(exc)) from None


def _state(pid: int) -> str:
    """The process state letter from /proc (``T``: stopped by a signal); ``?`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


class Kill(NemesisContext):
    """kill -9 of every target's process group; :meth:`heal` starts each killed target again.

    With ``restart=False`` healing leaves them down (the test starts them itself, or never).
    """

    def __init__(self, targets: Sequence[ProcessTarget], *, restart: bool = True) -> None:
        self.targets = list(targets)
        self.restart = restart
        self.killed: list[ProcessTarget] = []

    def start(self) -> None:
        """Kill every target that runs; returns once each has exited."""
        for target in self.targets:
            child = target.child
            if child is not None and child.running and target not in self.killed:
                kill_9(child)
                self.killed.append(target)

    def heal(self) -> None:
        """Start the killed targets again, one after the other, each ready before the next starts."""
        while self.killed:
            target = self.killed[0]
            if self.restart:
                target.start()
            self.killed.pop(0)

    def __repr__(self) -> str:
        return f"Kill({[t.name for t in self.targets]}, killed={[t.name for t in self.killed]})"


class Pause(NemesisContext):
    """SIGSTOP of every target's process group (a GC pause, a frozen VM); :meth:`heal` resumes them."""

    def __init__(self, targets: Sequence[ProcessTarget]) -> None:
        self.targets = list(targets)
        self.paused: list[Child] = []

    def start(self) -> None:
        """Pause every target; returns once each is stopped.

        Raises:
            NemesisError: a target is not running (those paused before it stay paused until heal).
        """
        for target in self.targets:
            child = target.child
            if child is None:
                raise NemesisError(f"cannot pause {target.name}: it was never started")
            if child not in self.paused:
                pause(child)
                self.paused.append(child)

    def heal(self) -> None:
        """Resume every paused target; returns once each runs again."""
        while self.paused:
            resume(self.paused[0])
            self.paused.pop(0)

    def __repr__(self) -> str:
        return f"Pause({[t.name for t in self.targets]}, paused={len(self.paused)})"
