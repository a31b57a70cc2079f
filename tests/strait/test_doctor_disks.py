"""``strait doctor`` on a real host (integration): log dirs on loop-mounted XFS (``noatime``) and
ext4 (mounted without it), a real ZooKeeper or none, the child's open-file limit set with
``prlimit``, and a running node holding its own ports.

Needs root, ``mkfs.xfs``, ``mkfs.ext4``, ``losetup``, ``prlimit`` and loop devices; skipped,
naming what is missing, otherwise. The ``disks`` fixture unmounts (lazily if busy) and detaches
every loop device it made, also when the test fails, each command with a deadline.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from node.proc import Deadline, NotReady, wait_until
from tests.node.harness import STRAIT, NodeProcess

COMMAND_TIMEOUT_S = 60.0  # any one mkfs, losetup, mount, umount or doctor run
IMAGE_MB = 320  # mkfs.xfs refuses less than 300 MiB; the images are sparse


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mkfs, loop devices, mount)"
    for tool in ("mkfs.xfs", "mkfs.ext4", "losetup", "mount", "umount", "prlimit"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/dev/loop-control").exists():
        return "no loop devices here (/dev/loop-control is missing)"
    return None


UNAVAILABLE = _unavailable()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=f"real disks unavailable: {UNAVAILABLE}"),
]


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} exited with {done.returncode}: {done.stderr.strip()}"
    return done.stdout


@dataclass
class LoopDisk:
    """A filesystem on a sparse image file, on a loop device, mounted at ``mountpoint``."""

    image: Path
    mountpoint: Path
    device: str | None = None
    mounted: bool = False

    def close(self) -> list[str]:
        """Unmount (lazily if busy) and detach; returns what could not be undone. Idempotent."""
        problems: list[str] = []
        if self.mounted:
            if attempt("umount", str(self.mountpoint)) is not None:
                problems += filter(None, [attempt("umount", "-l", str(self.mountpoint))])
            self.mounted = False
        if self.device is not None:
            device, self.device = self.device, None
            problems += filter(None, [attempt("losetup", "-d", device)])
            backing = Path(f"/sys/block/{Path(device).name}/loop/backing_file")
            try:
                wait_until(
                    lambda: not backing.exists(),
                    Deadline(10, f"{device} to detach (it stays attached while its filesystem is in use)"),
                )
            except NotReady as exc:
                problems.append(str(exc))
        return problems


def attempt(*argv: str) -> str | None:
    """Run a clean-up command: None when it worked, else what went wrong (never raises)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(argv)}: {exc}"
    return None if done.returncode == 0 else f"{' '.join(argv)}: {done.stderr.strip()}"


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """``{"xfs": log dir, "ext4": log dir}``: XFS mounted ``noatime``, ext4 with the default (relatime)."""
    made: list[LoopDisk] = []
    try:
        for fs, mkfs, options in (
            ("xfs", ("mkfs.xfs", "-q", "-f"), "noatime"),
            ("ext4", ("mkfs.ext4", "-q", "-F"), "defaults"),
        ):
            disk = LoopDisk(tmp_path / f"{fs}.img", tmp_path / fs)
            made.append(disk)
            with open(disk.image, "wb") as image:
                image.truncate(IMAGE_MB * 1024 * 1024)
            run(*mkfs, str(disk.image))
            disk.device = run("losetup", "--find", "--show", str(disk.image)).strip()
            disk.mountpoint.mkdir()
            run("mount", "-o", options, disk.device, str(disk.mountpoint))
            disk.mounted = True
            (disk.mountpoint / "logs").mkdir()
        yield {fs: tmp_path / fs / "logs" for fs in ("xfs", "ext4")}
    finally:
        problems = [problem for disk in reversed(made) for problem in disk.close()]
        assert problems == [], problems


def write_config(path: Path, log_dirs: list[Path], zookeeper: str, broker_id: int = 1, **extra: str) -> Path:
    props = {
        "broker.id": str(broker_id),
        "log.dirs": ",".join(map(str, log_dirs)),
        "zookeeper.connect": zookeeper,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "strait.admin.listener": "127.0.0.1:0",
    } | extra
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def doctor(config: Path, *options: str, open_files: int | None = None) -> tuple[int, dict[tuple[str, str], Finding]]:
    """Run ``strait doctor --config CONFIG --json OPTIONS`` in a child, under ``prlimit`` when
    ``open_files`` is given (its soft and hard open-file limit); its exit code and findings."""
    argv = [*STRAIT, "doctor", "--config", str(config), "--json", *options]
    if open_files is not None:
        argv = ["prlimit", f"--nofile={open_files}:{open_files}", "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    assert done.returncode in (0, 1) and done.stdout, f"{argv} exited with {done.returncode}: {done.stderr}"
    findings = json.loads(done.stdout)
    return done.returncode, {(f["check"], f["subject"]): f for f in findings}


Finding = dict[str, Any]  # one object of doctor's JSON list


def statuses(found: dict[tuple[str, str], Finding], check: str) -> dict[str, object]:
    return {subject: f["status"] for (kind, subject), f in found.items() if kind == check}


def test_doctor_flags_ext4_a_missing_noatime_and_a_low_open_file_limit(
    disks: dict[str, Path], zk_connect: str, tmp_path: Path
) -> None:
    xfs, ext4 = str(disks["xfs"]), str(disks["ext4"])
    config = write_config(tmp_path / "server.properties", [disks["xfs"], disks["ext4"]], zk_connect)
    code, found = doctor(config, open_files=1024)
    assert code == 1
    assert found["filesystem", ext4]["status"] == "fail" and found["filesystem", ext4]["measured"] == "ext4"
    assert found["mount-options", ext4]["status"] == "warn" and "noatime" not in str(
        found["mount-options", ext4]["measured"]
    )
    for check in ("log-dir", "filesystem", "mount-options", "free-space", "free-inodes"):
        assert found[check, xfs]["status"] == "ok", found[check, xfs]
    assert found["filesystem", xfs]["measured"] == "xfs" and "noatime" in str(found["mount-options", xfs]["measured"])
    (limit,) = [f for (kind, _), f in found.items() if kind == "open-files"]
    assert limit["status"] == "fail" and limit["measured"] == 1024
    assert set(statuses(found, "zookeeper").values()) == {"ok"}
    assert set(statuses(found, "port").values()) == {"ok"}


def test_a_host_set_up_as_the_roles_do_exits_0_with_warnings_at_most(
    disks: dict[str, Path], zk_connect: str, tmp_path: Path
) -> None:
    # A container may not raise its hard limit, even as root: the healthy limit is the hard one here.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = 1_048_576 if hard == resource.RLIM_INFINITY else hard
    config = write_config(tmp_path / "server.properties", [disks["xfs"]], zk_connect)
    code, found = doctor(config, "--min-open-files", str(limit), open_files=limit)
    assert code == 0, [f for f in found.values() if f["status"] == "fail"]
    (open_files,) = [f for (kind, _), f in found.items() if kind == "open-files"]
    assert open_files["status"] == "ok" and open_files["measured"] == limit


def test_an_unreachable_zookeeper_fails(disks: dict[str, Path], tmp_path: Path) -> None:
    with socket.socket() as bound:  # bound, never listening: every connection is refused
        bound.bind(("127.0.0.1", 0))
        connect = f"127.0.0.1:{bound.getsockname()[1]}/strait"
        code, found = doctor(
            write_config(tmp_path / "server.properties", [disks["xfs"]], connect), "--min-open-files", "1"
        )
    assert code == 1
    assert {kind for (kind, _), f in found.items() if f["status"] == "fail"} == {"zookeeper"}
    assert statuses(found, "zookeeper") == {connect.partition("/")[0]: "fail"}
    assert "unreachable" in str(found["zookeeper", connect.partition("/")[0]]["detail"])


def test_the_ports_of_a_running_node_are_in_use_by_it(
    node_factory: Callable[..., NodeProcess], zk_connect: str, tmp_path: Path
) -> None:
    node = node_factory(1)
    admin = node.admin_url.removeprefix("http://")
    fixed = {"listeners": f"PLAINTEXT://127.0.0.1:{node.port}", "strait.admin.listener": admin}
    same = write_config(tmp_path / "same.properties", list(node.log_dirs), zk_connect, 1, **fixed)
    _, found = doctor(same)
    assert statuses(found, "port") == {
        f"listener PLAINTEXT 127.0.0.1:{node.port}": "ok",
        f"admin listener {admin}": "ok",
    }
    assert "in use by the running node (broker 1)" in str(
        found["port", f"listener PLAINTEXT 127.0.0.1:{node.port}"]["detail"]
    )
    assert statuses(found, "node") == {f"broker 1 at {admin}": "ok"}
    other = write_config(tmp_path / "other.properties", list(node.log_dirs), zk_connect, 2, **fixed)
    code, found = doctor(other)
    assert code == 1 and set(statuses(found, "port").values()) == {"fail"}
    assert "answers for broker 1, not 2" in str(found["port", f"admin listener {admin}"]["detail"])
