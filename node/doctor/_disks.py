"""The log dir checks: each dir exists and takes writes, on XFS, mounted ``noatime``, with room left.

Per log dir, five findings (``check``: what fails it, what only warns):

- ``log-dir``: missing, not a directory, or no file can be created in it by the current user:
  **fail** (the node could not use it; the broker role creates every log dir on its own disk, so
  a missing one usually means the disk is not mounted).
- ``filesystem``: a type outside ``DiskLimits.filesystems`` (XFS by default): **fail**. The
  ``xfs_disks`` role formats every data disk XFS, so another type means the dir is not on the
  disk the role prepared (most often: the disk is not mounted and the dir sits on the root
  filesystem), or on a filesystem that loses data (tmpfs) or misbehaves under a log (NFS).
  An operator who chose ext4 on purpose says so with ``--filesystem ext4``. An accepted type
  still **warns** when the dir is on the root filesystem, or shares its filesystem with another
  log dir (JBOD then gains neither capacity nor isolation).
- ``mount-options``: mounted read-only: **fail**; without ``noatime``: **warn**. With the
  default ``relatime`` the kernel still writes an access time once a day per file read, a write
  per segment a consumer touches; that costs I/O but loses nothing.
- ``free-space`` and ``free-inodes``: below the minimum percentage: **fail**; below twice the
  minimum: **warn**. Space is what an unprivileged writer may use (``f_bavail``).

A dir that does not exist is measured where it would be created: at its nearest existing parent.
Every function here is pure but for the default probes (:meth:`DiskUsage.of`,
:func:`writable_by_me`), which tests replace.
"""

from __future__ import annotations

import os
import pwd
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._findings import Finding, Status
from ._mounts import Mount, mount_of

__all__ = ["DiskLimits", "DiskUsage", "check_log_dirs", "writable_by_me"]

_EXPECTED_OPTIONS = "noatime, rw"
_NETWORK_FS = "a network filesystem: a log dir needs a local disk (locks, deletes of open files and fsync differ)"
# Why a filesystem type is wrong for a log dir, beyond "not what the role made".
_WHY_NOT = {
    "ext4": "Kafka's docs measured XFS better for this workload, and the xfs_disks role formats XFS",
    "tmpfs": "memory: the log is gone after a reboot",
    "ramfs": "memory: the log is gone after a reboot",
    "overlay": "a container's overlay layer, not a data disk",
    "nfs": _NETWORK_FS,
    "nfs4": _NETWORK_FS,
    "cifs": _NETWORK_FS,
}


@dataclass(frozen=True)
class DiskLimits:
    """What the log dir checks accept. Percentages are of the filesystem's size."""

    filesystems: tuple[str, ...] = ("xfs",)
    min_free_space_pct: float = 10.0
    min_free_inodes_pct: float = 5.0


@dataclass(frozen=True)
class DiskUsage:
    """Space and inodes of one filesystem, as ``statvfs`` reports them."""

    total_bytes: int
    free_bytes: int  # what an unprivileged writer may still use (f_bavail)
    total_inodes: int  # 0 where the filesystem does not report inodes
    free_inodes: int

    @classmethod
    def of(cls, path: Path) -> DiskUsage:
        """``statvfs(path)``; raises OSError as it does."""
        st = os.statvfs(path)
        return cls(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, st.f_files, st.f_favail)


def writable_by_me(path: Path) -> str | None:
    """None when the current user can create (and remove) a file in ``path``, else why not.

    Creates ``.strait-doctor-*`` there and removes it at once; a log dir ignores such names.
    """
    try:
        fd, name = tempfile.mkstemp(prefix=".strait-doctor-", dir=path)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(name)
    return None


def check_log_dirs(
    dirs: Sequence[Path],
    mounts: Sequence[Mount],
    limits: DiskLimits,
    *,
    usage: Callable[[Path], DiskUsage] = DiskUsage.of,
    writable: Callable[[Path], str | None] = writable_by_me,
) -> list[Finding]:
    """The five findings of each of ``dirs`` (see the module docstring), dir by dir.

    ``mounts`` is the parsed mount table; ``usage`` and ``writable`` measure a directory.
    Never raises: what cannot be measured is a finding.
    """
    where = {d: _nearest_existing(d) for d in dirs}
    mounted = {d: mount_of(where[d], mounts) for d in dirs}
    sharing = Counter(m.mount_point for m in mounted.values() if m is not None)
    findings: list[Finding] = []
    for d in dirs:
        mount = mounted[d]
        note = "" if where[d] == d else f" (measured at {where[d]}, its nearest existing parent)"
        findings.append(_existence(d, where[d], writable))
        if mount is None:
            orphan = f"no mount in the mount table holds it{note}"
            findings.append(Finding("filesystem", str(d), Status.FAIL, orphan, None, " or ".join(limits.filesystems)))
            findings.append(Finding("mount-options", str(d), Status.FAIL, orphan, None, _EXPECTED_OPTIONS))
        else:
            findings.append(_filesystem(d, mount, sharing[mount.mount_point] > 1, limits, note))
            findings.append(_options(d, mount, note))
        findings.extend(_room(d, where[d], usage, limits, note))
    return findings


def _nearest_existing(path: Path) -> Path:
    while not os.path.exists(path) and path != path.parent:
        path = path.parent
    return path


def _current_user() -> str:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _existence(d: Path, existing: Path, writable: Callable[[Path], str | None]) -> Finding:
    def finding(status: Status, detail: str, measured: str) -> Finding:
        return Finding("log-dir", str(d), status, detail, measured, "a writable directory")

    if existing != d:
        return finding(Status.FAIL, f"does not exist (nearest existing parent: {existing})", "missing")
    if not d.is_dir():
        return finding(Status.FAIL, "exists but is not a directory", "not a directory")
    user = _current_user()
    why = writable(d)
    if why is not None:
        return finding(Status.FAIL, f"{user} cannot create a file in it: {why}", "not writable")
    return finding(Status.OK, f"a directory {user} can write to", "writable")


def _filesystem(d: Path, mount: Mount, shared: bool, limits: DiskLimits, note: str) -> Finding:
    expected = " or ".join(limits.filesystems)
    on = f"{mount.fs_type} on {mount.source} at {mount.mount_point}{note}"
    on_root = mount.mount_point == Path("/")
    if mount.fs_type not in limits.filesystems:
        why = _WHY_NOT.get(mount.fs_type, "not the filesystem the xfs_disks role makes")
        where = " (the root filesystem: is the data disk mounted?)" if on_root else ""
        detail = f"{on}{where}: {why}; expected {expected}"
        return Finding("filesystem", str(d), Status.FAIL, detail, mount.fs_type, expected)
    if on_root:
        detail = f"{on}: the root filesystem, not a data disk of its own (is the disk mounted?)"
        return Finding("filesystem", str(d), Status.WARN, detail, mount.fs_type, expected)
    if shared:
        detail = f"{on}, shared with another log dir: one disk's failure takes both"
        return Finding("filesystem", str(d), Status.WARN, detail, mount.fs_type, expected)
    return Finding("filesystem", str(d), Status.OK, f"{on}; expected {expected}", mount.fs_type, expected)


def _options(d: Path, mount: Mount, note: str) -> Finding:
    options = ",".join(sorted(mount.options))
    atime = mount.atime
    if mount.read_only:
        status, detail = Status.FAIL, f"mounted read-only ({options}){note}: the node cannot write"
    elif atime != "noatime":
        status, detail = Status.WARN, f"{atime}, not noatime ({options}){note}: reads also write access times"
    else:
        status, detail = Status.OK, f"noatime ({options}){note}"
    return Finding("mount-options", str(d), status, detail, options, _EXPECTED_OPTIONS)


def _room(d: Path, existing: Path, usage: Callable[[Path], DiskUsage], limits: DiskLimits, note: str) -> list[Finding]:
    try:
        measured = usage(existing)
    except OSError as exc:
        why = f"cannot statvfs {existing}: {exc.strerror or exc}"
        return [
            Finding("free-space", str(d), Status.FAIL, why, None, f">= {limits.min_free_space_pct:g}%"),
            Finding("free-inodes", str(d), Status.FAIL, why, None, f">= {limits.min_free_inodes_pct:g}%"),
        ]
    space = _share(
        "free-space",
        d,
        measured.free_bytes,
        measured.total_bytes,
        limits.min_free_space_pct,
        f"{_bytes(measured.free_bytes)} free of {_bytes(measured.total_bytes)}",
        note,
    )
    if measured.total_inodes == 0:
        detail = f"the filesystem reports no inode count{note}"
        inodes = Finding("free-inodes", str(d), Status.OK, detail, None, f">= {limits.min_free_inodes_pct:g}%")
    else:
        inodes = _share(
            "free-inodes",
            d,
            measured.free_inodes,
            measured.total_inodes,
            limits.min_free_inodes_pct,
            f"{measured.free_inodes} inodes free of {measured.total_inodes}",
            note,
        )
    return [space, inodes]


def _share(check: str, d: Path, free: int, total: int, minimum: float, amounts: str, note: str) -> Finding:
    """fail below ``minimum`` percent free, warn below twice that."""
    expected = f">= {minimum:g}%"
    pct = 100.0 * free / total if total > 0 else 0.0
    status = Status.FAIL if pct < minimum else Status.WARN if pct < 2 * minimum else Status.OK
    detail = f"{amounts} ({pct:.1f}%){note}; expected {expected}, warned below {2 * minimum:g}%"
    return Finding(check, str(d), status, detail, round(pct, 1), expected)


def _bytes(n: int) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    size, unit = float(n), 0
    while size >= 1024 and unit < len(units) - 1:
        size, unit = size / 1024, unit + 1
    return f"{n} B" if unit == 0 else f"{size:.1f} {units[unit]}"
