"""Kernel tuning the ``common`` role sets (:data:`SYSCTLS`), and the open-file limit.

:data:`SYSCTLS` is the one table of kernel settings: the Ansible ``common`` role mirrors it
(same keys, same values), and ``strait doctor`` compares the host with it. Every sysctl finding
is at worst a **warning**: these tune throughput and latency, and a node runs correctly without
them (strait reads its index files with ``read``, not ``mmap``, so even ``vm.max_map_count``
cannot stop it). A value that cannot be read (a container without that sysctl) also warns.

The open-file limit is different: a node holds a descriptor per segment file it has open and
per connection, and running out fails appends, segment rolls and accepts. A soft
``RLIMIT_NOFILE`` below the minimum (100000, the starting point Kafka's docs recommend) is a
**failure**. The soft limit is what counts: a process may raise it up to the hard limit, but
strait does not, so the service manager must (``LimitNOFILE=`` in a systemd unit: systemd
ignores limits.conf).
"""

from __future__ import annotations

import operator
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._findings import Finding, Status

__all__ = ["MIN_OPEN_FILES", "SYSCTLS", "PROC_SYS", "Sysctl", "check_open_files", "check_sysctls", "open_files_limit"]

PROC_SYS = Path("/proc/sys")
#: Kafka's docs: "at least 100000 allowed file descriptors for the broker processes as a starting point".
MIN_OPEN_FILES = 100_000

_COMPARE: dict[str, Callable[[int, int], bool]] = {"==": operator.eq, ">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Sysctl:
    """One kernel setting: the ``value`` the common role writes, and how a host's value is judged
    against it (``accept``: exactly, at least, or at most that value)."""

    key: str  # as sysctl(8) and /etc/sysctl.d name it
    value: int
    accept: Literal["==", ">=", "<="]
    reason: str

    @property
    def expected(self) -> str:
        return f"{self.accept} {self.value}"

    def accepts(self, measured: int) -> bool:
        return _COMPARE[self.accept](measured, self.value)


# fmt: off
SYSCTLS: tuple[Sysctl, ...] = (
    Sysctl("vm.swappiness", 1, "==",
           "drop page cache before swapping the node out; 1, not 0, keeps swap as a last resort"),
    Sysctl("vm.dirty_background_ratio", 5, "<=",
           "start background writeback early, so dirty log pages drain steadily instead of in bursts"),
    Sysctl("vm.dirty_ratio", 60, ">=",
           "let appends stay in the page cache longer before writers are throttled to disk speed"),
    Sysctl("vm.max_map_count", 262144, ">=",
           "Kafka maps two index files per segment; JVMs and Kafka tools on the host need the headroom"),
    Sysctl("net.core.rmem_max", 16777216, ">=",
           "receive buffers as large as a WAN link's bandwidth-delay product (mirror and replica fetches)"),
    Sysctl("net.core.wmem_max", 16777216, ">=",
           "send buffers as large as a WAN link's bandwidth-delay product"),
)
# fmt: on


def check_sysctls(root: Path = PROC_SYS, table: Sequence[Sysctl] = SYSCTLS) -> list[Finding]:
    """One finding per sysctl of ``table``, read under ``root`` (``vm.swappiness`` is
    ``root/vm/swappiness``): ok when accepted, else a warning. Never raises."""
    findings: list[Finding] = []
    for sysctl in table:
        path = root.joinpath(*sysctl.key.split("."))
        try:
            text = path.read_text(encoding="ascii").strip()
            measured = int(text)
        except OSError as exc:
            why = f"cannot read {path}: {exc.strerror or exc}"
            findings.append(Finding("sysctl", sysctl.key, Status.WARN, why, None, sysctl.expected))
            continue
        except ValueError:
            why = f"{path} holds {text!r}, not a number"
            findings.append(Finding("sysctl", sysctl.key, Status.WARN, why, text, sysctl.expected))
            continue
        detail = f"{measured}; expected {sysctl.expected}"
        if sysctl.accepts(measured):
            findings.append(Finding("sysctl", sysctl.key, Status.OK, detail, measured, sysctl.expected))
        else:
            detail = f"{detail}: {sysctl.reason}"
            findings.append(Finding("sysctl", sysctl.key, Status.WARN, detail, measured, sysctl.expected))
    return findings


def open_files_limit(pid: int | None = None) -> tuple[int, int]:
    """(soft, hard) ``RLIMIT_NOFILE`` of this process, or of process ``pid``; -1 means unlimited.

    Another process's limits are read from ``/proc/PID/limits``, which anyone may read (``prlimit``
    would need the same user or CAP_SYS_RESOURCE). Raises OSError (FileNotFoundError: no such
    process) when they cannot be read.
    """
    if pid is None:
        return resource.getrlimit(resource.RLIMIT_NOFILE)
    path = Path(f"/proc/{pid}/limits")
    for line in path.read_text(encoding="ascii").splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.removeprefix("Max open files").split()[:2]
            return _limit(soft), _limit(hard)
    raise OSError(f"{path} has no 'Max open files' line")


def _limit(text: str) -> int:
    return resource.RLIM_INFINITY if text == "unlimited" else int(text)


def check_open_files(
    limit: Callable[[], tuple[int, int]] = open_files_limit, minimum: int = MIN_OPEN_FILES, whose: str = "this process"
) -> Finding:
    """Fail when the soft open-file limit ``limit()`` returns is below ``minimum`` (-1: unlimited)."""
    expected = f">= {minimum}"
    try:
        soft, hard = limit()
    except OSError as exc:
        why = f"cannot read the open-file limit: {exc.strerror or exc}"
        return Finding("open-files", whose, Status.FAIL, why, None, expected)
    shown = {n: "unlimited" if n == resource.RLIM_INFINITY else str(n) for n in (soft, hard)}
    detail = f"soft limit {shown[soft]} (hard {shown[hard]}); expected {expected}"
    if soft == resource.RLIM_INFINITY or soft >= minimum:
        return Finding("open-files", whose, Status.OK, detail, soft, expected)
    how = "LimitNOFILE= in the service's unit, or prlimit/ulimit -n before starting it"
    return Finding("open-files", whose, Status.FAIL, f"{detail}: raise it with {how}", soft, expected)
