"""Helpers of the ansible tier: the wheelhouse, loop-device disk images, ansible-playbook runs, teardown.

Everything a test starts is found again by its own handles, never by name: loop devices by the
path ``losetup --find --show`` printed, mounts by their mount point under the run's tmp root,
supervisord daemons by the pid file under each host's prefix.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "ansible"
PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
VENV_BIN = Path(sys.executable).parent
#: Wall times of the plays the tests want reported (conftest prints them at the end of the run).
PLAY_TIMES: dict[str, float] = {}
#: XFS refuses filesystems below 300 MB; sparse images cost no disk until written.
IMAGE_MB = 320
#: Seconds any single setup command (losetup, mkfs, mount) may take.
COMMAND_TIMEOUT_S = 60
#: What the checkout's wheel is built from (the rest is tests, docs and caches).
_WHEEL_SOURCES = (
    *("pyproject.toml", "README.md"),
    *("strait", "storage", "node", "mirror", "failover", "chaos", "spark_jobs"),  # [tool.setuptools.packages.find]
)


def run(argv: list[str], *, timeout: float = COMMAND_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a short command; raises CalledProcessError (with its output) when ``check`` and it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    return done


# -- the wheelhouse ----------------------------------------------------------------------------------


def runtime_dependencies(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The ``[project] dependencies`` of pyproject.toml (none of the extras)."""
    with pyproject.open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def build_wheelhouse(
    dest: Path, scratch: Path, *, version: str | None = None, dependencies: Path | None = None
) -> Path:
    """The strait wheel of this checkout plus the wheels of its runtime dependencies, in ``dest``.

    The checkout's sources are copied to ``scratch`` first, so that building leaves no build/
    or egg-info behind in the checkout. ``version`` replaces pyproject.toml's (in the copy): an
    upgrade's new wheel. Dependencies are copied from the wheelhouse ``dependencies`` or come
    from pip's cache (or its index).
    """
    source = scratch / "source"
    for name in _WHEEL_SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    if version is not None:
        pyproject = source / "pyproject.toml"
        text, count = re.subn(r'(?m)^version = "[^"]*"$', f'version = "{version}"', pyproject.read_text(), count=1)
        if count != 1:
            raise ValueError(f"no version line in {pyproject}")
        pyproject.write_text(text)
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(dest)]
    run([*pip, "--no-deps", str(source)], timeout=300)
    if dependencies is None:
        run([*pip, *runtime_dependencies()], timeout=300)
    else:
        for wheel in dependencies.glob("*.whl"):
            if not wheel.name.startswith("strait-"):
                shutil.copy2(wheel, dest / wheel.name)
    return dest


# -- disks ----------------------------------------------------------------------------------------------


@dataclass
class LoopDisk:
    """A sparse image file attached to a loop device (``device`` is what losetup printed)."""

    image: Path
    device: str

    @classmethod
    def create(cls, image: Path, size_mb: int = IMAGE_MB) -> LoopDisk:
        image.parent.mkdir(parents=True, exist_ok=True)
        run(["truncate", "-s", f"{size_mb}M", str(image)])
        device = run(["losetup", "--find", "--show", str(image)]).stdout.strip()
        return cls(image, device)

    def detach(self) -> None:
        """Detach the loop device and remove the image; quiet when already done."""
        run(["losetup", "-d", self.device], check=False)
        with contextlib.suppress(FileNotFoundError):
            self.image.unlink()


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (deepest first), from /proc/self/mountinfo."""
    prefix = str(root.resolve())
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            target = line.split()[4].replace("\\040", " ")
            if target == prefix or target.startswith(prefix + "/"):
                found.append(target)
    return sorted(found, key=len, reverse=True)


def unmount_all(root: Path, *, wait_s: float = 10.0) -> None:
    """Unmount everything mounted under ``root``: umount, retried for ``wait_s``, then umount -l."""
    deadline = time.monotonic() + wait_s
    while True:
        targets = mounts_under(root)
        if not targets:
            return
        for target in targets:
            run(["umount", target], check=False)
        if time.monotonic() > deadline:
            for target in mounts_under(root):
                run(["umount", "-l", target], check=False)
            return
        if mounts_under(root):
            time.sleep(0.5)


# -- supervisord ----------------------------------------------------------------------------------------


def stop_supervisords(prefixes: Iterable[Path], *, wait_s: float = 60.0) -> None:
    """Stop the supervisord the roles started under each prefix, and its programs, by its pid file.

    Each is asked to shut down first (``supervisorctl shutdown``: it stops its programs cleanly,
    each within its stop timeout, then exits), all at once; then they are waited for together, and
    after ``wait_s`` the process group of any still alive is killed.
    """
    pids: list[int] = []
    for prefix in prefixes:
        try:
            pid = int((prefix / "run/strait/supervisord.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            continue
        if _alive(pid):
            conf = prefix / "etc/strait/supervisord.conf"
            run(["supervisorctl", "-c", str(conf), "shutdown"], check=False, timeout=wait_s)
            pids.append(pid)
    deadline = time.monotonic() + wait_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # supervisord leads its own session and group


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- ports ------------------------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 a moment ago (Ansible needs fixed ports)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# -- inventories ------------------------------------------------------------------------------------------


def write_inventory(path: Path, inventory: Mapping[str, Any]) -> Path:
    """Write an inventory as JSON (Ansible's YAML inventory plugin reads .json files)."""
    path.write_text(json.dumps(inventory, indent=1) + "\n")
    return path


def traversable_tmpdir(prefix: str) -> Path:
    """A new dir under /tmp that other users may traverse (pytest's own tmp dirs are 0700: the
    strait and zookeeper users could not reach a host's prefix inside one). The caller removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


# -- ansible-playbook --------------------------------------------------------------------------------------


@dataclass
class PlaybookRun:
    returncode: int
    output: str
    seconds: float

    def recap(self) -> dict[str, dict[str, int]]:
        """The PLAY RECAP: host -> {ok, changed, unreachable, failed, skipped, rescued, ignored}."""
        return parse_recap(self.output)


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    """Parse the PLAY RECAP lines of ansible-playbook's output."""
    _, _, tail = output.rpartition("PLAY RECAP")
    recap: dict[str, dict[str, int]] = {}
    for line in tail.splitlines():
        match = re.match(r"^(\S+)\s*:\s*((?:\w+=\d+\s*)+)$", line.strip())
        if match:
            recap[match[1]] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match[2])}
    return recap


def playbook_env(home: Path) -> dict[str, str]:
    """The environment of an ansible-playbook run: this venv first on PATH, this checkout's
    ansible.cfg, no colours, and nothing that would make the services import this checkout."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("ANSIBLE_")}
    env.update(
        PATH=f"{VENV_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ANSIBLE_DIR / "roles"),  # for the tests' own playbooks too
        ANSIBLE_HOME=str(home),
        ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_TASK_TIMEOUT="300",  # no single task may hang the run
        PYTHONDONTWRITEBYTECODE="1",
    )
    # A developer's aid: STRAIT_ANSIBLE_PROFILE=1 times every task; =DIR also keeps each run's output there.
    if os.environ.get("STRAIT_ANSIBLE_PROFILE"):
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
    return env


def run_playbook(
    playbook: str | Path,
    inventory: Path,
    *,
    home: Path,
    timeout: float,
    extra_vars: Mapping[str, Any] | None = None,
    args: Iterable[str] = (),
) -> PlaybookRun:
    """Run ``ansible-playbook`` against ``inventory`` in its own process group; killed after ``timeout``.

    The managed hosts' Python is this venv's (``ansible_python_interpreter``). Returns the exit
    code, stdout and stderr together, and the wall time.
    """
    home.mkdir(parents=True, exist_ok=True)
    argv = [
        str(VENV_BIN / "ansible-playbook"),
        "--inventory",
        str(inventory),
        "--timeout",
        "30",
        "--extra-vars",
        json.dumps({"ansible_python_interpreter": sys.executable, **(extra_vars or {})}),
        *args,
        str(ANSIBLE_DIR / playbook),
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=ANSIBLE_DIR,
        env=playbook_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n[harness] ansible-playbook killed after {timeout:.0f} s\n"
    keep = os.environ.get("STRAIT_ANSIBLE_PROFILE")
    if keep and Path(keep).is_dir():  # keep every run's output (with its task times) there
        name = f"{time.strftime('%H%M%S')}-{Path(playbook).stem}.out"
        (Path(keep) / name).write_text(output)
    return PlaybookRun(process.returncode, output, time.monotonic() - started)
