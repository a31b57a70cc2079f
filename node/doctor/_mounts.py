"""The mount table as the kernel states it in ``/proc/self/mountinfo``, and which mount holds a path.

One line per mount (``proc(5)``)::

    36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - xfs /dev/sdb1 rw,attr2,inode64
    |  |  |    |     |     |          |        | |   |         + super-block options
    |  |  |    |     |     |          |        | |   + source (device)
    |  |  |    |     |     |          |        | + filesystem type
    |  |  |    |     |     |          |        + separator
    |  |  |    |     |     |          + optional fields (zero or more)
    |  |  |    |     |     + per-mount options (rw/ro, noatime/relatime, nodev, ...)
    |  |  |    |     + mount point
    |  |  |    + root of the mount within its filesystem
    |  |  + st_dev major:minor
    |  + parent mount id
    + mount id

Paths escape space, tab, newline and backslash as octal (``\\040``). The atime policy
(``noatime``, ``relatime``, none of them: strict atime) is a per-mount option; read-only is in
both option lists.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mount", "mount_of", "parse_mountinfo", "read_mountinfo"]

MOUNTINFO = Path("/proc/self/mountinfo")
_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One mount: where, what filesystem, from which source, with which options."""

    mount_point: Path
    fs_type: str
    source: str
    options: frozenset[str]  # per-mount options: rw/ro, noatime, relatime, nosuid, ...
    super_options: frozenset[str]  # the filesystem's own: attr2, inode64, logbsize=..., ...

    @property
    def read_only(self) -> bool:
        return "ro" in self.options or "ro" in self.super_options

    @property
    def atime(self) -> str:
        """The atime policy: ``noatime``, ``relatime`` or ``strictatime`` (atime written on every read)."""
        for policy in ("noatime", "relatime"):
            if policy in self.options:
                return policy
        return "strictatime"


def read_mountinfo() -> str:
    """The text of ``/proc/self/mountinfo`` (raises OSError where there is none)."""
    return MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    """The mounts of a mountinfo ``text``, in its order (a later mount stacks on an earlier one at
    the same point). Lines that do not have mountinfo's shape are skipped: the kernel writes this
    file, and a doctor must not stop at a line it cannot read."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split()
        try:
            dash = fields.index("-", 6)
        except ValueError:
            continue
        if len(fields) < dash + 3:
            continue
        mounts.append(
            Mount(
                mount_point=Path(_unescape(fields[4])),
                fs_type=fields[dash + 1],
                source=_unescape(fields[dash + 2]),
                options=frozenset(fields[5].split(",")),
                super_options=frozenset(fields[dash + 3].split(",")) if len(fields) > dash + 3 else frozenset(),
            )
        )
    return tuple(mounts)


def mount_of(path: Path, mounts: Sequence[Mount]) -> Mount | None:
    """The mount holding ``path`` (symlinks resolved): the one at the longest mount point above it,
    the last listed where mounts stack. None when no mount point is above it (a fake table)."""
    resolved = Path(os.path.realpath(path))
    best: Mount | None = None
    for mount in mounts:
        above = resolved == mount.mount_point or mount.mount_point in resolved.parents
        if above and (best is None or len(mount.mount_point.parts) >= len(best.mount_point.parts)):
            best = mount
    return best


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m[1], 8)), field)
