"""One measured path of the audit benchmark: a child process timed, its whole session's memory and CPU sampled.

:func:`measure` spawns ``argv`` in a session of its own (``node.proc.spawn``), samples every
process of that session from ``/proc`` every :data:`SAMPLE_S` seconds until the child exits,
and returns a :class:`Measured`: the wall time from the spawn to the exit, the exit code, and
the memory and CPU by role. A reconcile job's session holds the Python driver (the child
itself), the JVM that pyspark starts (in local mode the driver and the executors are that one
JVM) and the Python workers (pyspark's daemon and the workers it forks: it makes a process
group of its own, but stays in the session); the consumer loop's holds the one Python process.

Memory is the resident set (``/proc/PID/stat`` field ``rss``): the **peak of the sum** over
the session at one sample, and each role's own peak (the roles peak at different moments, so
these need not add up to the total). Forked Python workers share pages with their daemon, which
that sum counts once per process: it overstates what the tree holds. The peak of the summed
**proportional** set sizes (``Pss`` of ``/proc/PID/smaps_rollup``: a shared page split between
its sharers) is the figure that does not. CPU is user + system time per process, the last value
each process showed (a process that exits loses at most one sample interval of its time).

A child still running at the deadline is stopped (SIGTERM to its group, then SIGKILL) and
reported ``timed_out``. Whatever the end, anything left in its session is then SIGKILLed by pid
(pyspark's daemon leads a process group of its own).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.proc import spawn

SAMPLE_S = 0.5
STOP_TIMEOUT_S = 30.0
DRIVER, JVM, WORKERS, OTHER = "driver", "jvm", "workers", "other"
ROLE_LABELS = {
    DRIVER: "driver (Python)",
    JVM: "JVM (Spark driver + executors, local mode)",
    WORKERS: "Python workers",
    OTHER: "other (spark-submit's launcher scripts)",
}
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


@dataclass(frozen=True)
class ProcSample:
    """One process of the session at one sample."""

    pid: int
    role: str
    rss_bytes: int
    pss_bytes: int
    cpu_s: float


def _stat(pid: int) -> tuple[str, list[str]] | None:
    """(command name, the fields after it) from ``/proc/PID/stat``; None when it has gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    end = text.rfind(")")
    # fields: state ppid pgrp session ... utime(11) stime(12) ... rss(21, pages)
    return text[text.find("(") + 1 : end], text[end + 2 :].split()


def _pss(pid: int) -> int:
    """The process's proportional set size (``/proc/PID/smaps_rollup``), 0 when it has gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _role(pid: int, session: int, comm: str) -> str:
    """The session leader is the driver, ``java`` the JVM, another Python a worker. Read at every
    sample: spark-submit's shell scripts become the JVM by exec, keeping their pid."""
    if pid == session:
        return DRIVER
    if comm.startswith("java"):
        return JVM
    return WORKERS if comm.startswith("python") else OTHER


def session_samples(session: int) -> list[ProcSample]:
    """Every live process of ``session`` now."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        found = _stat(pid)
        if found is None:
            continue
        comm, fields = found
        if int(fields[3]) != session or fields[0] == "Z":
            continue
        cpu = (int(fields[11]) + int(fields[12])) / _TICKS
        out.append(ProcSample(pid, _role(pid, session, comm), int(fields[21]) * _PAGE, _pss(pid), cpu))
    return out


@dataclass
class Usage:
    """What the samples of one session add up to."""

    samples: int = 0
    peak_rss_bytes: int = 0
    peak_pss_bytes: int = 0
    peak_rss_by_role: dict[str, int] = field(default_factory=dict)
    _last: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid -> (role, CPU s) when last seen

    def add(self, procs: Sequence[ProcSample]) -> None:
        self.samples += 1
        self.peak_rss_bytes = max(self.peak_rss_bytes, sum(p.rss_bytes for p in procs))
        self.peak_pss_bytes = max(self.peak_pss_bytes, sum(p.pss_bytes for p in procs))
        by_role: dict[str, int] = {}
        for p in procs:
            by_role[p.role] = by_role.get(p.role, 0) + p.rss_bytes
            self._last[p.pid] = (p.role, p.cpu_s)
        for role, rss in by_role.items():
            self.peak_rss_by_role[role] = max(self.peak_rss_by_role.get(role, 0), rss)

    def cpu_by_role(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for role, cpu in self._last.values():
            out[role] = out.get(role, 0.0) + cpu
        return out

    def processes_by_role(self) -> dict[str, int]:
        """How many processes were seen, by the role each had last."""
        out: dict[str, int] = {}
        for role, _ in self._last.values():
            out[role] = out.get(role, 0) + 1
        return out


class Sampler:
    """A thread sampling ``session`` into a :class:`Usage` every ``interval`` seconds until stopped."""

    def __init__(self, session: int, interval: float = SAMPLE_S) -> None:
        self.session = session
        self.interval = interval
        self.usage = Usage()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"audit-sampler-{session}", daemon=True)

    def _run(self) -> None:
        while True:
            self.usage.add(session_samples(self.session))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def pids(self) -> list[int]:
        return [p.pid for p in session_samples(self.session)]


@dataclass(frozen=True)
class Measured:
    """One child's run: wall seconds from the spawn to its exit, its exit code, memory and CPU."""

    seconds: float
    returncode: int
    peak_rss_bytes: int
    peak_pss_bytes: int
    peak_rss_by_role: dict[str, int]
    cpu_by_role: dict[str, float]
    processes_by_role: dict[str, int]
    samples: int
    log: Path
    timed_out: bool = False

    @property
    def peak_rss_mib(self) -> float:
        return self.peak_rss_bytes / MIB

    @property
    def peak_pss_mib(self) -> float:
        return self.peak_pss_bytes / MIB

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu_by_role.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "peak_rss_mib": round(self.peak_rss_mib, 1),
            "peak_pss_mib": round(self.peak_pss_mib, 1),
            "peak_rss_mib_by_role": {r: round(b / MIB, 1) for r, b in sorted(self.peak_rss_by_role.items())},
            "cpu_s": round(self.cpu_s, 2),
            "cpu_s_by_role": {r: round(s, 2) for r, s in sorted(self.cpu_by_role.items())},
            "processes_by_role": dict(sorted(self.processes_by_role.items())),
            "samples": self.samples,
            "log": str(self.log),
        }


def _kill_leftovers(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _stopped_at_end(child_stop: Any, sampler: Sampler) -> Iterator[None]:
    try:
        yield
    finally:
        leftovers = [pid for pid in sampler.pids() if pid != sampler.session]
        child_stop(STOP_TIMEOUT_S)
        _kill_leftovers(leftovers)


def measure(
    argv: Sequence[str], log: Path, *, timeout: float, name: str, cwd: Path, env: dict[str, str] | None = None
) -> Measured:
    """Run ``argv`` (in ``cwd``, output appended to ``log``) to its end, sampled, or until ``timeout``
    seconds have passed (then it is stopped and ``timed_out``). Its exit code is the caller's to judge."""
    started = time.perf_counter()
    child = spawn(argv, log, name=name, cwd=cwd, env=env)
    with Sampler(child.pid) as sampler, _stopped_at_end(child.stop, sampler):
        code = child.wait(timeout)
        seconds = time.perf_counter() - started
    usage = sampler.usage
    return Measured(
        seconds,
        -1 if code is None else code,
        usage.peak_rss_bytes,
        usage.peak_pss_bytes,
        dict(usage.peak_rss_by_role),
        usage.cpu_by_role(),
        usage.processes_by_role(),
        usage.samples,
        log,
        timed_out=code is None,
    )
