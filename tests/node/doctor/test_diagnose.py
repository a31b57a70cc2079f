"""diagnose(): which checks run, in which order, through the probes; the JSON shape and exit codes."""

from __future__ import annotations

import errno
import json
from dataclasses import replace
from pathlib import Path

from node.config import NodeConfig
from node.doctor import (
    SYSCTLS,
    ClockState,
    DiskUsage,
    Finding,
    Probes,
    SrvrReply,
    Status,
    Thresholds,
    diagnose,
    exit_code,
    tally,
)

GIB = 1024**3
JSON_KEYS = ["check", "subject", "status", "detail", "measured", "expected"]


def healthy_probes(tmp_path: Path, disks: list[Path]) -> Probes:
    """Probes of a host the roles set up well: XFS noatime disks, tuned sysctls, 1M open files, a synced clock."""
    mountinfo = "1 0 254:0 / / rw,relatime - ext4 /dev/vda rw\n" + "".join(
        f"{i} 1 7:{i} / {d} rw,noatime - xfs /dev/loop{i} rw,attr2\n" for i, d in enumerate(disks, start=2)
    )
    proc_sys = tmp_path / "proc-sys"
    for sysctl in SYSCTLS:
        path = proc_sys.joinpath(*sysctl.key.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{sysctl.value}\n")
    return Probes(
        mountinfo=lambda: mountinfo,
        sysctl_root=proc_sys,
        disk_usage=lambda path: DiskUsage(100 * GIB, 80 * GIB, 1000, 990),
        writable=lambda path: None,
        open_files=lambda: (1_048_576, 1_048_576),
        open_files_whose="pid 42",
        clock=lambda: ClockState(True, 5_000, 100),
        ask_zookeeper=lambda host, port, timeout: SrvrReply(None, "Zookeeper version: 3.9.3\nMode: standalone\n"),
        bind=lambda host, port: None,
        health=lambda host, port, timeout: None,
    )


def node_config(disks: list[Path], **extra: str) -> NodeConfig:
    props = {
        "broker.id": "1",
        "log.dirs": ",".join(map(str, disks)),
        "zookeeper.connect": "127.0.0.1:2181/site",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "strait.admin.listener": "127.0.0.1:9700",
    }
    return NodeConfig.from_properties(props | extra)


def make_disks(tmp_path: Path) -> list[Path]:
    disks = [tmp_path.resolve() / "d1", tmp_path.resolve() / "d2"]
    for d in disks:
        d.mkdir()
    return disks


def test_a_healthy_host_passes_every_check_in_a_stable_order(tmp_path: Path) -> None:
    disks = make_disks(tmp_path)
    findings = diagnose(node_config(disks), probes=healthy_probes(tmp_path, disks))
    per_dir = ["log-dir", "filesystem", "mount-options", "free-space", "free-inodes"]
    assert [f.check for f in findings] == [
        *per_dir,
        *per_dir,
        *["sysctl"] * len(SYSCTLS),
        "open-files",
        "clock",
        "zookeeper",
        "port",
        "port",
    ]
    assert [f.subject for f in findings[:10]] == [str(disks[0])] * 5 + [str(disks[1])] * 5
    assert {f.status for f in findings} == {Status.OK}, [f for f in findings if f.status is not Status.OK]
    assert exit_code(findings) == 0
    assert findings[-2].subject == "listener PLAINTEXT 127.0.0.1:9092"
    assert findings[-1].subject == "admin listener 127.0.0.1:9700"


def test_without_a_config_only_the_host_wide_checks_run(tmp_path: Path) -> None:
    findings = diagnose(None, probes=healthy_probes(tmp_path, []))
    assert [f.check for f in findings] == [*["sysctl"] * len(SYSCTLS), "open-files", "clock"]
    assert findings[-2].subject == "pid 42"


def test_thresholds_and_timeouts_reach_the_checks(tmp_path: Path) -> None:
    disks = make_disks(tmp_path)
    timeouts: list[float] = []
    base = healthy_probes(tmp_path, disks)

    def ask(host: str, port: int, timeout: float) -> SrvrReply:
        timeouts.append(timeout)
        return base.ask_zookeeper(host, port, timeout)

    def health(host: str, port: int, timeout: float) -> dict[str, object] | None:
        timeouts.append(timeout)
        return None

    probes = replace(base, ask_zookeeper=ask, health=health)
    strict = Thresholds(min_open_files=2_000_000, timeout_s=0.5)
    findings = diagnose(node_config(disks), strict, probes)
    assert timeouts == [0.5, 0.5]
    assert [f.check for f in findings if f.status is Status.FAIL] == ["open-files"]
    assert exit_code(findings) == 1


def test_warnings_alone_exit_0_and_a_failure_exits_1(tmp_path: Path) -> None:
    disks = make_disks(tmp_path)
    base = healthy_probes(tmp_path, disks)
    unsynced = replace(base, clock=lambda: ClockState(False, 16_000_000, 16_000_000))
    findings = diagnose(node_config(disks), probes=unsynced)
    assert tally(findings)[Status.WARN] == 1 and exit_code(findings) == 0
    taken = replace(base, bind=lambda host, port: OSError(errno.EADDRINUSE, "in use"))
    findings = diagnose(node_config(disks), probes=taken)
    assert tally(findings) == {Status.OK: len(findings) - 2, Status.WARN: 0, Status.FAIL: 2}
    assert exit_code(findings) == 1


def test_an_unreadable_mount_table_fails_once_and_for_every_dir(tmp_path: Path) -> None:
    disks = make_disks(tmp_path)

    def no_proc() -> str:
        raise FileNotFoundError(2, "No such file or directory")

    probes = replace(healthy_probes(tmp_path, disks), mountinfo=no_proc)
    failed = [f for f in diagnose(node_config(disks), probes=probes) if f.status is Status.FAIL]
    assert (failed[0].check, failed[0].subject) == ("filesystem", "mount table")
    assert len(failed) == 1 + 2 * len(disks)  # filesystem and mount options of each dir


def test_the_json_shape_is_stable() -> None:
    finding = Finding("open-files", "pid 7", Status.FAIL, "soft limit 1024", 1024, ">= 100000")
    assert list(finding.as_json()) == JSON_KEYS
    assert json.loads(json.dumps(finding.as_json())) == {
        "check": "open-files",
        "subject": "pid 7",
        "status": "fail",
        "detail": "soft limit 1024",
        "measured": 1024,
        "expected": ">= 100000",
    }
    assert exit_code([]) == 0 and tally([]) == {Status.OK: 0, Status.WARN: 0, Status.FAIL: 0}
