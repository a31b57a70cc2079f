"""Requests to a running ``strait up``: files in its directory, answered by its poll loop.

A command such as ``strait site revive`` cannot reach into the ``strait up`` process, and
must not start processes itself: they would not be ``strait up``'s children, so its Ctrl-C
would not stop them. So it leaves a request in the appliance directory and ``strait up``
carries it out from its main loop. Layout::

    DIR/control/launcher.lock        flock held by the running ``strait up`` (its pid inside):
                                     no holder, no launcher to ask
    DIR/control/<id>.request         {"id": "<id>", "action": "revive", "site": "east", "pid": <asker>}
    DIR/control/<id>.answer          {"id": "<id>", "state": "working" | "done" | "failed" | "refused",
                                      "message": "<what happened, in words>",
                                      "progress": ["<each working message so far>", ...]}

Every file is written atomically (node.proc.atomic_write), so neither side ever reads half of
one. The launcher takes a request (deletes it) before it acts, answers ``working`` at once,
then ``done``, ``failed`` or ``refused`` (bad usage: an unknown site, a site that is not lost);
every answer repeats the ``working`` messages so far, so the asker shows each even when it
looks only once. The asker deletes the final answer once read. Files left over from an earlier launcher are
removed when the next one opens the directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from node.proc import Deadline, atomic_write

CONTROL_DIR = "control"
LOCK_FILE = "launcher.lock"
REQUEST_SUFFIX = ".request"
ANSWER_SUFFIX = ".answer"
POLL_S = 0.1  # how often the asker looks for its answer

FINAL_STATES = ("done", "failed", "refused")


class ControlError(Exception):
    """A request could not be delivered or was not answered; the message says why."""


class NoLauncher(ControlError):
    """No ``strait up`` runs in the directory."""


class LauncherStopped(ControlError):
    """The ``strait up`` that was asked stopped before it answered."""


class NoAnswer(ControlError):
    """The launcher did not answer within the asker's timeout."""


@dataclass(frozen=True)
class Request:
    id: str
    action: str
    site: str


@dataclass(frozen=True)
class Answer:
    state: str  # "working", or one of FINAL_STATES
    message: str
    progress: tuple[str, ...] = ()  # the working messages so far


def control_dir(directory: Path) -> Path:
    return directory.absolute() / CONTROL_DIR


def launcher_running(directory: Path) -> bool:
    """Whether a launcher holds ``DIR/control/launcher.lock`` now."""
    try:
        lock = (control_dir(directory) / LOCK_FILE).open("rb")
    except OSError:
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


class Inbox:
    """The launcher's side: :meth:`open` once ready, :meth:`take` from the main loop, :meth:`answer`
    each request, :meth:`close` when stopping. Not thread-safe."""

    def __init__(self, directory: Path) -> None:
        self.directory = control_dir(directory)
        self._lock: IO[bytes] | None = None
        self._progress: dict[str, list[str]] = {}

    def open(self) -> None:
        """Hold the lock and remove what an earlier launcher left.

        Raises:
            OSError: the directory cannot be written, or another launcher holds the lock.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        lock = (self.directory / LOCK_FILE).open("a+b")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            lock.close()
            raise
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}\n".encode())
        lock.flush()
        self._lock = lock
        for stale in [*self.directory.glob(f"*{REQUEST_SUFFIX}"), *self.directory.glob(f"*{ANSWER_SUFFIX}")]:
            stale.unlink(missing_ok=True)

    def take(self) -> list[Request]:
        """The requests waiting, oldest first, each removed from the directory. A file that is
        not a request is answered ``refused`` (if it has a usable id) and removed."""
        if self._lock is None:
            return []
        paths = sorted(self.directory.glob(f"*{REQUEST_SUFFIX}"), key=_mtime)
        taken = []
        for path in paths:
            request_id = path.name.removesuffix(REQUEST_SUFFIX)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                request = Request(request_id, str(data["action"]), str(data["site"]))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError) as exc:
                path.unlink(missing_ok=True)
                if _usable_id(request_id):
                    self.answer(request_id, "refused", f"not a request ({path.name}: {exc!r})")
                continue
            path.unlink(missing_ok=True)
            taken.append(request)
        return taken

    def answer(self, request_id: str, state: str, message: str) -> None:
        """Write (replace) the answer to ``request_id``: ``working`` (again and again, each message
        kept as progress) or a final state. Raises OSError as atomic_write does."""
        progress = self._progress.setdefault(request_id, [])
        if state == "working":
            progress.append(message)
        else:
            del self._progress[request_id]
        body = {"id": request_id, "state": state, "message": message, "progress": progress}
        atomic_write(self.directory / f"{request_id}{ANSWER_SUFFIX}", json.dumps(body) + "\n")

    def close(self) -> None:
        """Release the lock; a request nobody took is removed (its asker sees the launcher gone)."""
        if self._lock is None:
            return
        for path in self.directory.glob(f"*{REQUEST_SUFFIX}"):
            path.unlink(missing_ok=True)
        self._lock.close()
        self._lock = None


def ask(
    directory: Path, action: str, site: str, timeout: float, progress: Callable[[str], None] = lambda _: None
) -> Answer:
    """Leave a request for the ``strait up`` running in ``directory`` and wait up to ``timeout``
    seconds for its final answer, which is returned (``done``, ``failed`` or ``refused``).
    ``progress`` gets each ``working`` message, in order, before the final answer is returned.

    Raises:
        NoLauncher: no launcher runs in ``directory``.
        LauncherStopped: it stopped before it answered.
        NoAnswer: no final answer within ``timeout`` (a request still untaken is withdrawn).
        OSError: the request cannot be written.
    """
    where = control_dir(directory)
    if not launcher_running(directory):
        raise NoLauncher(f"no `strait up` is running with --dir {directory} (or it has not finished starting)")
    request_id = uuid.uuid4().hex
    request_path = where / f"{request_id}{REQUEST_SUFFIX}"
    answer_path = where / f"{request_id}{ANSWER_SUFFIX}"
    body = {"id": request_id, "action": action, "site": site, "pid": os.getpid()}
    atomic_write(request_path, json.dumps(body) + "\n")
    deadline = Deadline(timeout, f"an answer to {action} {site}")
    said = 0  # progress messages shown

    def final() -> Answer | None:
        nonlocal said
        answer = _read_answer(answer_path)
        for message in () if answer is None else answer.progress[said:]:
            progress(message)
            said += 1
        if answer is None or answer.state not in FINAL_STATES:
            return None
        answer_path.unlink(missing_ok=True)
        return answer

    try:
        while True:
            if (answer := final()) is not None:
                return answer
            if not launcher_running(directory):
                if (answer := final()) is not None:  # it may have answered just before stopping
                    return answer
                raise LauncherStopped(f"`strait up` in {directory} stopped before it answered")
            if deadline.expired():
                taken = not request_path.exists()
                request_path.unlink(missing_ok=True)
                raise NoAnswer(
                    f"no answer within {timeout:g} s; "
                    + (
                        "`strait up` is still working on it (see its output)"
                        if taken
                        else "`strait up` did not take the request (withdrawn)"
                    )
                )
            time.sleep(min(POLL_S, deadline.remaining()))
    except BaseException:
        request_path.unlink(missing_ok=True)  # withdrawn if not yet taken (Ctrl-C of the asker)
        raise


def _read_answer(path: Path) -> Answer | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Answer(str(data["state"]), str(data["message"]), tuple(str(m) for m in data.get("progress", [])))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _usable_id(request_id: str) -> bool:
    return bool(request_id) and all(c.isalnum() or c in "-_" for c in request_id)
