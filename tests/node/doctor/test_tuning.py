"""The sysctl table against a fake /proc/sys, and the open-file limit, every verdict."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from node.doctor import MIN_OPEN_FILES, SYSCTLS, Status, Sysctl, open_files_limit
from node.doctor._tuning import check_open_files, check_sysctls


def fake_proc_sys(root: Path, values: dict[str, str]) -> Path:
    for key, value in values.items():
        path = root.joinpath(*key.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
    return root


def test_the_table_names_each_setting_once_with_a_reason() -> None:
    keys = [s.key for s in SYSCTLS]
    assert len(keys) == len(set(keys))
    assert {
        "vm.swappiness",
        "vm.dirty_background_ratio",
        "vm.dirty_ratio",
        "vm.max_map_count",
        "net.core.rmem_max",
        "net.core.wmem_max",
    } <= set(keys)
    assert all(s.reason and s.accepts(s.value) for s in SYSCTLS)  # the role's own value passes
    assert next(s for s in SYSCTLS if s.key == "vm.max_map_count").value >= 262144


def test_the_values_the_role_sets_pass(tmp_path: Path) -> None:
    root = fake_proc_sys(tmp_path, {s.key: str(s.value) for s in SYSCTLS})
    findings = check_sysctls(root)
    assert [f.subject for f in findings] == [s.key for s in SYSCTLS]
    assert {f.status for f in findings} == {Status.OK}
    assert all(f.check == "sysctl" and f.measured == s.value for f, s in zip(findings, SYSCTLS, strict=True))


def test_each_comparison_and_the_distro_defaults_warn_with_the_reason(tmp_path: Path) -> None:
    table = (
        Sysctl("vm.swappiness", 1, "==", "swap"),
        Sysctl("vm.dirty_background_ratio", 5, "<=", "early"),
        Sysctl("vm.max_map_count", 262144, ">=", "maps"),
    )
    defaults = fake_proc_sys(
        tmp_path / "a", {"vm.swappiness": "60", "vm.dirty_background_ratio": "10", "vm.max_map_count": "65530"}
    )
    warned = check_sysctls(defaults, table)
    assert [f.status for f in warned] == [Status.WARN] * 3
    assert warned[0].detail == "60; expected == 1: swap" and warned[0].expected == "== 1"
    assert warned[2].measured == 65530 and warned[2].expected == ">= 262144"
    tighter = fake_proc_sys(
        tmp_path / "b", {"vm.swappiness": "1", "vm.dirty_background_ratio": "3", "vm.max_map_count": "1048576"}
    )
    assert [f.status for f in check_sysctls(tighter, table)] == [Status.OK] * 3
    zero = fake_proc_sys(
        tmp_path / "c", {"vm.swappiness": "0", "vm.dirty_background_ratio": "0", "vm.max_map_count": "262144"}
    )
    assert [f.status for f in check_sysctls(zero, table)] == [Status.WARN, Status.OK, Status.OK]


def test_a_missing_or_garbled_sysctl_warns(tmp_path: Path) -> None:
    root = fake_proc_sys(tmp_path, {"vm.swappiness": "lots"})
    missing, garbled = check_sysctls(
        root, (Sysctl("net.core.rmem_max", 1, ">=", "r"), Sysctl("vm.swappiness", 1, "==", "s"))
    )
    assert missing.status is Status.WARN and "cannot read" in missing.detail and missing.measured is None
    assert garbled.status is Status.WARN and "'lots'" in garbled.detail and garbled.measured == "lots"


@pytest.mark.parametrize(
    ("limits", "status"),
    [
        ((1024, 1024), Status.FAIL),
        ((1024, 1_048_576), Status.FAIL),  # only the soft limit counts: strait does not raise it
        ((MIN_OPEN_FILES - 1, MIN_OPEN_FILES), Status.FAIL),
        ((MIN_OPEN_FILES, MIN_OPEN_FILES), Status.OK),
        ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), Status.OK),
    ],
)
def test_a_soft_open_file_limit_below_the_minimum_fails(limits: tuple[int, int], status: Status) -> None:
    finding = check_open_files(lambda: limits, whose="pid 7")
    assert (finding.check, finding.subject, finding.status) == ("open-files", "pid 7", status)
    assert finding.measured == limits[0] and finding.expected == ">= 100000"
    if status is Status.FAIL:
        assert "LimitNOFILE=" in finding.detail and f"soft limit {limits[0]}" in finding.detail


def test_the_minimum_is_an_option_and_an_unreadable_limit_fails() -> None:
    assert check_open_files(lambda: (1024, 1024), minimum=1000).status is Status.OK

    def gone() -> tuple[int, int]:
        raise ProcessLookupError(3, "No such process")

    finding = check_open_files(gone)
    assert finding.status is Status.FAIL and "No such process" in finding.detail


def test_the_real_limit_of_this_process_and_of_a_pid() -> None:
    assert open_files_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)
    assert open_files_limit(os.getpid()) == resource.getrlimit(resource.RLIMIT_NOFILE)  # from /proc/PID/limits
    with pytest.raises(FileNotFoundError):
        open_files_limit(2**22 + 1)  # above Linux's pid_max ceiling: never a process
