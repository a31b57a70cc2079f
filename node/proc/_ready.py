"""Readiness: wait for an observable sign that a child serves, with a deadline, never by sleeping.

A wait polls a condition (a ready file holds JSON, a TCP port accepts, an HTTP URL answers
200) every ``interval`` seconds until it holds; it fails fast when a watched child exits first
(:class:`ChildExited`) and when the deadline passes (:class:`NotReady`). Both messages name
what was awaited and end with the child's log tail. The pause between two polls ends early
when the child exits, so a crash at startup is reported at once.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ._child import Child, spawn

POLL_S = 0.05  # between two readiness probes

_T = TypeVar("_T")


class ProcessError(Exception):
    """A child did not become ready: the message names it and what was awaited."""


class ChildExited(ProcessError):
    """A watched child exited while something was still awaited."""

    def __init__(self, child: Child, what: str) -> None:
        self.child = child
        self.returncode = child.poll()
        self.what = what
        super().__init__(
            f"{child.name} (pid {child.pid}) exited with code {self.returncode} while waiting for {what}; "
            f"{child.log_path} ends with:\n{child.log_tail()}"
        )


class NotReady(ProcessError):
    """The deadline passed before the condition held."""

    def __init__(self, deadline: Deadline, child: Child | None = None) -> None:
        self.deadline = deadline
        self.child = child
        where = f"; {child.log_path} ends with:\n{child.log_tail()}" if child is not None else ""
        super().__init__(f"{deadline.what}: not within {deadline.seconds:g} s{where}")


class Deadline:
    """A named point in time, ``seconds`` from now on the monotonic clock."""

    def __init__(self, seconds: float, what: str) -> None:
        """Raises ValueError for a negative ``seconds`` (zero: check once)."""
        if seconds < 0:
            raise ValueError(f"the deadline for {what} must not be negative, got {seconds}")
        self.seconds = seconds
        self.what = what
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self._end

    def __repr__(self) -> str:
        return f"Deadline({self.what!r}, {self.remaining():.1f} of {self.seconds:g} s left)"


def wait_until(
    check: Callable[[], _T | None],
    deadline: Deadline,
    *,
    watch: Sequence[Child] = (),
    interval: float = POLL_S,
) -> _T:
    """Call ``check`` until it returns something truthy, and return that.

    Before every call each child in ``watch`` is polled. ``check`` is called at least once;
    whatever it raises propagates (so a caller can stop the wait, or decide which errors mean
    "not yet" by catching them inside ``check``).

    Raises:
        ChildExited: a watched child exited first.
        NotReady: ``deadline`` passed (the log tail is the child's when exactly one is watched).
    """
    while True:
        for child in watch:
            if child.poll() is not None:
                raise ChildExited(child, deadline.what)
        result = check()
        if result:
            return result
        if deadline.expired():
            raise NotReady(deadline, watch[0] if len(watch) == 1 else None)
        pause = min(interval, deadline.remaining())
        if watch:
            watch[0].wait(pause)
        else:
            time.sleep(pause)


# -- probes: one look, never raising -------------------------------------------------------


def read_ready_file(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None while there is none (missing, partial, not an object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether ``host:port`` accepts a TCP connection now (which is closed at once)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Whether a GET of ``url`` answers 200 now (an admin API's ``/health``)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


# -- waits on one child ------------------------------------------------------------------------


def wait_ready_file(child: Child, path: Path, deadline: Deadline) -> dict[str, Any]:
    """Wait until ``path`` holds a JSON object (the ready file ``child`` writes atomically); returns it.

    Raises ChildExited or NotReady (see :func:`wait_until`).
    """
    return wait_until(lambda: read_ready_file(path), deadline, watch=[child])


def spawn_ready(
    argv: Sequence[str],
    log_path: Path,
    ready_path: Path,
    timeout: float,
    *,
    name: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Child, dict[str, Any]]:
    """Spawn ``argv`` (see :func:`~node.proc.spawn`) and wait up to ``timeout`` seconds for the ready
    file it writes at ``ready_path`` (a stale one is removed first); returns the child and the file's
    JSON object. If the child is not ready, it is killed before the error propagates.

    Raises:
        OSError: from spawn.
        ChildExited, NotReady: see :func:`wait_until`.
    """
    ready_path.unlink(missing_ok=True)
    child = spawn(argv, log_path, name=name, cwd=cwd, env=env)
    try:
        return child, wait_ready_file(child, ready_path, Deadline(timeout, f"{name}'s ready file {ready_path}"))
    except BaseException:
        child.kill()
        raise


def wait_port(child: Child, host: str, port: int, deadline: Deadline) -> None:
    """Wait until ``host:port`` accepts TCP connections. Raises ChildExited or NotReady."""
    wait_until(lambda: port_open(host, port, timeout=max(0.1, min(1.0, deadline.remaining()))), deadline, watch=[child])


def wait_http_ok(child: Child, url: str, deadline: Deadline) -> None:
    """Wait until a GET of ``url`` answers 200 (e.g. ``<admin>/health``). Raises ChildExited or NotReady."""
    wait_until(lambda: http_ok(url, timeout=max(0.1, min(2.0, deadline.remaining()))), deadline, watch=[child])
