"""The log dir checks, every verdict, against a fake mount table and fake statvfs/writability probes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from node.doctor import DiskLimits, DiskUsage, Finding, Status
from node.doctor._disks import check_log_dirs, writable_by_me
from node.doctor._mounts import parse_mountinfo

GIB = 1024**3
ROOMY = DiskUsage(total_bytes=100 * GIB, free_bytes=60 * GIB, total_inodes=1000, free_inodes=900)


def table(*lines: tuple[Path | str, str, str]) -> str:
    """mountinfo text: the root (ext4) and then (mount point, fs type, per-mount options) per line."""
    out = ["1 0 254:0 / / rw,relatime - ext4 /dev/vda rw"]
    for i, (where, fs, options) in enumerate(lines, start=2):
        out.append(f"{i} 1 7:{i} / {where} {options} - {fs} /dev/loop{i} rw")
    return "\n".join(out) + "\n"


def check(
    dirs: list[Path],
    mountinfo: str,
    limits: DiskLimits | None = None,
    usage: Callable[[Path], DiskUsage] = lambda _: ROOMY,
    writable: Callable[[Path], str | None] = lambda _: None,
) -> dict[tuple[str, str], Finding]:
    findings = check_log_dirs(dirs, parse_mountinfo(mountinfo), limits or DiskLimits(), usage=usage, writable=writable)
    by_key = {(f.check, f.subject): f for f in findings}
    assert len(by_key) == len(findings) == 5 * len(dirs)
    return by_key


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    d = tmp_path.resolve() / "d1"
    d.mkdir()
    return d


def test_a_log_dir_on_xfs_mounted_noatime_with_room_passes_every_check(disk: Path) -> None:
    found = check([disk], table((disk, "xfs", "rw,noatime")))
    assert {f.status for f in found.values()} == {Status.OK}
    fs = found["filesystem", str(disk)]
    assert fs.measured == "xfs" and fs.expected == "xfs" and "/dev/loop2" in fs.detail
    assert found["mount-options", str(disk)].measured == "noatime,rw"
    assert found["free-space", str(disk)].measured == 60.0
    assert found["free-inodes", str(disk)].measured == 90.0


def test_ext4_fails_unless_accepted_and_relatime_warns(disk: Path) -> None:
    mountinfo = table((disk, "ext4", "rw,relatime"))
    found = check([disk], mountinfo)
    fs = found["filesystem", str(disk)]
    assert fs.status is Status.FAIL and fs.measured == "ext4" and "expected xfs" in fs.detail
    options = found["mount-options", str(disk)]
    assert options.status is Status.WARN and "relatime, not noatime" in options.detail
    accepted = check([disk], mountinfo, DiskLimits(filesystems=("xfs", "ext4")))
    assert accepted["filesystem", str(disk)].status is Status.OK
    assert accepted["filesystem", str(disk)].expected == "xfs or ext4"


@pytest.mark.parametrize(("fs", "why"), [("tmpfs", "gone after a reboot"), ("nfs4", "network"), ("btrfs", "xfs_disks")])
def test_other_filesystems_fail_saying_why(disk: Path, fs: str, why: str) -> None:
    finding = check([disk], table((disk, fs, "rw,noatime")))["filesystem", str(disk)]
    assert finding.status is Status.FAIL and why in finding.detail


def test_strict_atime_warns_and_read_only_fails(disk: Path) -> None:
    strict = check([disk], table((disk, "xfs", "rw,nosuid")))["mount-options", str(disk)]
    assert strict.status is Status.WARN and "strictatime" in strict.detail
    read_only = check([disk], table((disk, "xfs", "ro,noatime")))["mount-options", str(disk)]
    assert read_only.status is Status.FAIL and "read-only" in read_only.detail


def test_a_dir_on_the_root_filesystem_warns_when_accepted_and_fails_otherwise(disk: Path) -> None:
    root_xfs = "1 0 254:0 / / rw,noatime - xfs /dev/vda rw\n"
    warned = check([disk], root_xfs)["filesystem", str(disk)]
    assert warned.status is Status.WARN and "root filesystem" in warned.detail
    failed = check([disk], table())["filesystem", str(disk)]
    assert failed.status is Status.FAIL and "is the data disk mounted?" in failed.detail


def test_two_log_dirs_on_one_filesystem_both_warn(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    a, b = base / "disk" / "a", base / "disk" / "b"
    a.mkdir(parents=True)
    b.mkdir()
    found = check([a, b], table((base / "disk", "xfs", "rw,noatime")))
    for d in (a, b):
        assert found["filesystem", str(d)].status is Status.WARN
        assert "shared with another log dir" in found["filesystem", str(d)].detail


def test_a_missing_dir_fails_and_is_measured_at_its_nearest_parent(disk: Path) -> None:
    missing = disk / "not" / "there"
    found = check([missing], table((disk, "xfs", "rw,noatime")))
    existence = found["log-dir", str(missing)]
    assert existence.status is Status.FAIL and existence.measured == "missing" and str(disk) in existence.detail
    fs = found["filesystem", str(missing)]
    assert fs.status is Status.OK and "nearest existing parent" in fs.detail


def test_a_file_or_an_unwritable_dir_fails(disk: Path) -> None:
    plain = disk / "file"
    plain.write_text("x")
    assert check([plain], table((disk, "xfs", "rw,noatime")))["log-dir", str(plain)].measured == "not a directory"
    found = check([disk], table((disk, "xfs", "rw,noatime")), writable=lambda _: "Permission denied")
    unwritable = found["log-dir", str(disk)]
    assert unwritable.status is Status.FAIL and "Permission denied" in unwritable.detail


@pytest.mark.parametrize(
    ("free_pct", "status"), [(5, Status.FAIL), (10, Status.WARN), (19, Status.WARN), (20, Status.OK), (80, Status.OK)]
)
def test_free_space_fails_below_the_minimum_and_warns_below_twice_it(disk: Path, free_pct: int, status: Status) -> None:
    usage = DiskUsage(100 * GIB, free_pct * GIB, 1000, 900)
    found = check([disk], table((disk, "xfs", "rw,noatime")), usage=lambda _: usage)
    space = found["free-space", str(disk)]
    assert space.status is status and space.measured == free_pct and space.expected == ">= 10%"
    assert f"{free_pct}.0 GiB free of 100.0 GiB" in space.detail


def test_free_inodes_fail_below_their_minimum_and_may_not_be_reported(disk: Path) -> None:
    mountinfo = table((disk, "xfs", "rw,noatime"))
    low = DiskUsage(100 * GIB, 60 * GIB, 1000, 30)
    assert check([disk], mountinfo, usage=lambda _: low)["free-inodes", str(disk)].status is Status.FAIL
    custom = DiskLimits(min_free_inodes_pct=1)
    assert check([disk], mountinfo, custom, usage=lambda _: low)["free-inodes", str(disk)].status is Status.OK
    unreported = DiskUsage(100 * GIB, 60 * GIB, 0, 0)
    inodes = check([disk], mountinfo, usage=lambda _: unreported)["free-inodes", str(disk)]
    assert inodes.status is Status.OK and inodes.measured is None


def test_what_cannot_be_measured_fails(disk: Path) -> None:
    def broken(path: Path) -> DiskUsage:
        raise PermissionError(13, "Permission denied")

    found = check([disk], table((disk, "xfs", "rw,noatime")), usage=broken)
    assert found["free-space", str(disk)].status is Status.FAIL
    assert "Permission denied" in found["free-inodes", str(disk)].detail
    orphan = check([disk], "")["filesystem", str(disk)]  # an empty mount table
    assert orphan.status is Status.FAIL and "no mount in the mount table holds it" in orphan.detail


def test_the_real_probes_on_a_temporary_dir(tmp_path: Path) -> None:
    assert writable_by_me(tmp_path) is None
    assert list(tmp_path.iterdir()) == []  # the probe file is gone again
    assert writable_by_me(tmp_path / "missing") is not None
    usage = DiskUsage.of(tmp_path)
    assert 0 < usage.free_bytes <= usage.total_bytes
