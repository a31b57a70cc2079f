"""Run every check against one host: :func:`diagnose`, with its :class:`Thresholds` and :class:`Probes`.

:class:`Probes` is the seam between the checks and the machine: each field reads one thing
(the mount table's text, the sysctl tree's root, statvfs, the writability probe, the
open-file limit, the kernel clock, a ZooKeeper server's ``srvr``, a bind, an admin API's
``/health``). The defaults read the real host; tests replace any of them, so every verdict is
reachable without root, loop devices or a ZooKeeper.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from node.config import NodeConfig

from ._clock import MAX_CLOCK_ERROR_MS, ClockState, check_clock, read_kernel_clock
from ._disks import DiskLimits, DiskUsage, check_log_dirs, writable_by_me
from ._findings import Finding, Status
from ._mounts import MOUNTINFO, parse_mountinfo, read_mountinfo
from ._network import SrvrReply, ask_srvr, check_ports, check_zookeeper, node_health, try_bind
from ._tuning import MIN_OPEN_FILES, PROC_SYS, check_open_files, check_sysctls, open_files_limit

__all__ = ["DEFAULT_TIMEOUT_S", "Probes", "Thresholds", "diagnose"]

DEFAULT_TIMEOUT_S = 3.0  # for each network probe: a ZooKeeper server's srvr, the admin API's /health


@dataclass(frozen=True)
class Thresholds:
    """What the checks accept (the options of ``strait doctor``)."""

    disks: DiskLimits = field(default_factory=DiskLimits)
    min_open_files: int = MIN_OPEN_FILES
    max_clock_error_ms: float = MAX_CLOCK_ERROR_MS
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class Probes:
    """Where the checks read the host; every default reads the real one."""

    mountinfo: Callable[[], str] = read_mountinfo
    sysctl_root: Path = PROC_SYS
    disk_usage: Callable[[Path], DiskUsage] = DiskUsage.of
    writable: Callable[[Path], str | None] = writable_by_me
    open_files: Callable[[], tuple[int, int]] = open_files_limit
    open_files_whose: str = field(default_factory=lambda: f"this process (pid {os.getpid()})")
    clock: Callable[[], ClockState] = read_kernel_clock
    ask_zookeeper: Callable[[str, int, float], SrvrReply] = ask_srvr
    bind: Callable[[str, int], OSError | None] = try_bind
    health: Callable[[str, int, float], dict[str, object] | None] = node_health


def diagnose(
    config: NodeConfig | None, thresholds: Thresholds | None = None, probes: Probes | None = None
) -> list[Finding]:
    """Every finding for this host, in a stable order: per log dir (existence, filesystem, mount
    options, free space, free inodes), the sysctls, the open-file limit, the clock, each
    ZooKeeper server, each port (and the running node, if one answers).

    Without a ``config`` only the host-wide checks run (sysctls, open files, clock). Blocks for
    at most ``thresholds.timeout_s`` per network probe. Never raises for what it measures: a
    value that cannot be read is itself a finding.
    """
    thresholds = thresholds or Thresholds()
    probes = probes or Probes()
    timeout = thresholds.timeout_s
    findings: list[Finding] = []
    if config is not None:
        try:
            mounts = parse_mountinfo(probes.mountinfo())
        except OSError as exc:
            why = f"cannot read {MOUNTINFO}: {exc.strerror or exc}"
            findings.append(Finding("filesystem", "mount table", Status.FAIL, why, None, "readable"))
            mounts = ()
        findings += check_log_dirs(
            config.log_dirs, mounts, thresholds.disks, usage=probes.disk_usage, writable=probes.writable
        )
    findings += check_sysctls(probes.sysctl_root)
    findings.append(check_open_files(probes.open_files, thresholds.min_open_files, probes.open_files_whose))
    findings.append(check_clock(probes.clock, thresholds.max_clock_error_ms))
    if config is not None:
        findings += check_zookeeper(
            config.zookeeper_connect, lambda host, port: probes.ask_zookeeper(host, port, timeout)
        )
        findings += check_ports(
            config.listeners,
            config.admin_listener,
            config.broker_id,
            bind=probes.bind,
            health=lambda host, port: probes.health(host, port, timeout),
        )
    return findings
