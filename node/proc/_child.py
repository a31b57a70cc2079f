"""A child process in its own session: spawned with its log file, dying with its parent, stopped within a bound.

What :func:`spawn` guarantees about the child:

- it leads a new session and process group (``start_new_session``): a terminal's Ctrl-C
  reaches only us, and the child and anything it starts in its group are signalled together;
- its stdin is ``/dev/null``; stdout and stderr are appended to its log file, and
  :attr:`Child.log_offset` marks where this run's output starts in that file;
- with ``die_with_parent`` (the default, Linux only) the kernel SIGKILLs it when the *thread*
  that spawned it exits (``PR_SET_PDEATHSIG``), so no child outlives a ``kill -9`` of its
  launcher. Spawn from a long-lived thread (the main thread), never from a short-lived worker
  thread such as ``trio.to_thread.run_sync``'s: that thread's exit would take the child along.

A :class:`Child` never reaps its process before it has signalled what is left of its group:
:meth:`Child.poll` and :meth:`Child.wait` observe the exit without reaping (``waitid`` with
``WNOWAIT``), so while the child is a zombie its pid, and with it the group id, cannot be
reused, and signalling the group can never hit an unrelated process. Only :meth:`Child.stop`
and :meth:`Child.kill` reap; call one of them for every child (a fixture's teardown, a
``finally``). A Child is not thread-safe: use it from one thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._files import LOG_TAIL_LINES, log_tail

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WAIT_STEP_S = 0.05  # the longest single sleep while waiting for an exit
_DUMP_WAIT_S = 1.0  # how long a child that missed its deadline gets to write its stacks
_SWEEP_TIMEOUT_S = 10.0  # for the rest of a group to die after SIGKILL (only a process stuck in the kernel is slow)


@dataclass(frozen=True)
class Stopped:
    """How :meth:`Child.stop` went: the exit code and whether the stop had to do anything.

    ``returncode`` follows subprocess: negative for a signal (``-signal.SIGTERM`` for a child
    that had not installed its handler yet, ``-signal.SIGKILL`` after ``killed``).
    """

    returncode: int
    had_exited: bool  # it had exited before the stop (on its own, or killed by someone else)
    killed: bool  # it had not exited within the bound (or the stop was hurried): SIGKILLed


class Child:
    """One spawned process, the leader of its own process group (its pid is the group id)."""

    def __init__(
        self,
        name: str,
        popen: subprocess.Popen[bytes],
        log_path: Path,
        log_offset: int,
        dump_signal: int | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self.log_offset = log_offset
        self.dump_signal = dump_signal
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def running(self) -> bool:
        return self.poll() is None

    def poll(self) -> int | None:
        """The exit code once the child has exited, else None. Never blocks, never reaps."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped behind our back (SIGCHLD ignored): what subprocess knows
            return self._popen.poll()
        if info is None or info.si_pid == 0:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the child to exit; its exit code, or None if it still
        runs. Returns as soon as it exits; never reaps."""
        deadline = time.monotonic() + timeout
        step = 0.001
        while (code := self.poll()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(step, remaining))
            step = min(step * 2, _WAIT_STEP_S)
        return code

    def signal(self, signum: int) -> bool:
        """Send ``signum`` to the child's whole process group; False when there is nothing left to
        signal (the group is empty, or the child was reaped and its pid may be someone else's)."""
        if self._popen.returncode is not None:
            return False
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def stop(
        self, timeout: float, *, hurry: Callable[[], bool] = lambda: False, term_pid: int | None = None
    ) -> Stopped:
        """Stop the child within a bound: SIGTERM, wait up to ``timeout`` seconds, then SIGKILL.

        SIGTERM goes to the whole group, or only to ``term_pid`` when given (a program under a
        profiler that must outlive it to write its output); SIGCONT follows to the group, so a
        paused (SIGSTOPped) child handles the SIGTERM. ``hurry`` is polled while waiting: once it
        returns True the child is killed at once (a second Ctrl-C). After the child has exited,
        anything left in its group is SIGKILLed and awaited (up to 10 s), and the child is reaped:
        on return no process of the group is alive. Idempotent: a second call reports
        ``had_exited``. May block up to ``timeout`` plus the time the kernel takes to tear the
        processes down; not cancellable (call it from a worker thread in async code).
        """
        if self.poll() is not None:
            return Stopped(self._reap(), had_exited=True, killed=False)
        if term_pid is None:
            self.signal(signal.SIGTERM)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(term_pid, signal.SIGTERM)
        self.signal(signal.SIGCONT)
        deadline = time.monotonic() + timeout
        while self.poll() is None and not hurry() and (remaining := deadline - time.monotonic()) > 0:
            self.wait(min(_WAIT_STEP_S, remaining))
        if self.poll() is None:
            self._dump_stacks(hurried=hurry())
            return Stopped(self.kill(), had_exited=False, killed=True)
        return Stopped(self._reap(), had_exited=False, killed=False)

    def _dump_stacks(self, *, hurried: bool) -> None:
        """Before killing a child that missed its deadline: ask it (``dump_signal``) to write its
        threads' stacks to its log, and give it a moment to, so the log shows where it hung."""
        if self.dump_signal is None or hurried:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, self.dump_signal)
            self.wait(_DUMP_WAIT_S)

    def kill(self) -> int:
        """SIGKILL the child's whole group, wait until it has died and reap the child; returns its
        exit code (``-signal.SIGKILL`` unless it had exited already). Idempotent. Blocks only as
        long as the kernel takes to end the processes (SIGKILL cannot be caught or ignored)."""
        self.signal(signal.SIGKILL)
        if self._popen.returncode is None:
            with contextlib.suppress(ChildProcessError):
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        return self._reap()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The end of this run's output (see :func:`node.proc.log_tail`)."""
        return log_tail(self.log_path, lines, offset=self.log_offset)

    def _reap(self) -> int:
        """The child has exited: SIGKILL what is left of its group while the child's zombie still
        holds the group id, wait (bounded) until none of it is alive, then reap the child."""
        if self._popen.returncode is None:
            if self.signal(signal.SIGKILL):
                deadline = time.monotonic() + _SWEEP_TIMEOUT_S
                step = 0.001
                while _live_members(self.pid) and time.monotonic() < deadline:
                    time.sleep(step)
                    step = min(step * 2, _WAIT_STEP_S)
            self._popen.wait()
        return self._popen.returncode

    def __repr__(self) -> str:
        return f"Child({self.name!r}, pid={self.pid}, log={str(self.log_path)!r})"


def spawn(
    argv: Sequence[str],
    log_path: Path,
    *,
    name: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    die_with_parent: bool = True,
    dump_signal: int | None = None,
) -> Child:
    """Start ``argv`` as a :class:`Child` (see the module docstring for what it guarantees).

    ``log_path`` is appended to (its directory is created); ``env`` adds to (and overrides) this
    process's environment, to which ``PYTHONUNBUFFERED=1`` is added so that a Python child's log
    is current whenever it is read. ``name`` (default: the program's file name) is how errors
    and :func:`~node.proc.wait_until` name the child. ``dump_signal``: a signal the child answers
    by writing its threads' stacks to its log (``strait`` commands: SIGUSR1, faulthandler), sent
    by :meth:`Child.stop` before it kills a child that missed its deadline. Returns at once: readiness is the caller's
    to observe (:func:`~node.proc.wait_ready_file`, :func:`~node.proc.wait_port`, ...).

    Raises:
        OSError: the log file cannot be opened, or ``argv[0]`` cannot be executed.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    preexec = _die_with(os.getpid()) if die_with_parent else None
    with log_path.open("ab") as log:
        offset = log.tell()
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
            preexec_fn=preexec,  # noqa: PLW1509 - only prctl(2) and getppid(2) run between fork and exec
        )
    return Child(name or Path(argv[0]).name, popen, log_path, offset, dump_signal)


def _live_members(group: int) -> list[int]:
    """Pids of the live (not zombie) processes in process group ``group``, from /proc (none off Linux)."""
    members = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return []
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue  # exited meanwhile
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[2]) == group and fields[0] != "Z":
                members.append(int(entry.name))
    return members


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl(2), looked up once in the parent (never between fork and exec); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return prctl


def _die_with(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn that has the kernel SIGKILL the child when the spawning thread exits."""
    prctl = _prctl()
    if prctl is None:
        return None
    sigkill = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
