"""Disk nemeses: a log dir on a small loop-mounted XFS image that fills up, turns read-only or fails,
and a torn tail at the end of a partition's active segment.

The first three need a log dir that is a filesystem of its own, so that the fault hits that dir
and nothing else: :class:`XfsImage` makes one (a sparse image file, ``mkfs.xfs``, a loop device,
mounted where the node's log dir will be) and removes it again. They need root, ``mkfs.xfs`` and
``xfs_io`` (Debian's ``xfsprogs``); :func:`disk_faults_unavailable` says why they cannot run here.

- :class:`DiskFull` fills the filesystem with one preallocated file until (near) 0 bytes are
  free: every write there fails with ENOSPC. ``heal`` deletes the file.
- :class:`ReadOnlyDir` stacks a read-only bind mount of the log dir on top of it: every path
  lookup in the dir now lands on the read-only mount, so creating, opening for writing, renaming
  or deleting a file there fails with EROFS. Linux refuses to remount a filesystem read-only
  while a file on it is open for writing (EBUSY), and a running node always holds its active
  segments open, so descriptors the node opened before the fault keep writing until it next
  opens a file in the dir (a segment roll, a checkpoint every few seconds). ``heal`` unmounts
  the read-only mount and restarts the node (``kill`` then ``start``), always: a node that saw
  the error has taken the dir offline, and only a restart brings it back (as in Kafka).
- :class:`FailingDir` shuts the XFS filesystem down as XFS does itself on a metadata I/O
  error (``xfs_io -x -c shutdown``, without flushing its log first: a dying disk): from then on
  every operation in the dir, reads too, fails with EIO. What was fsynced survives; what was
  only in the page cache is lost. ``heal`` kills the node (it holds files open there), unmounts
  and mounts the filesystem again (XFS replays its log) and starts the node.
- :class:`TornTail` kills the node and cuts (``mode="cut"``: truncates) or garbles
  (``mode="garble"``: XORs every byte with a random non-zero byte) the last ``nbytes`` bytes of
  the active segment (the newest ``NNNNNNNNNNNNNNNNNNNN.log``) of one or more partitions in its
  log dirs, as a crash in the middle of a write leaves it. ``heal`` starts the node, whose
  recovery must truncate the torn batch.

Each is a :class:`~chaos.nemesis.NemesisContext`: ``start`` and ``heal`` are idempotent,
``heal`` is safe after a ``start`` that failed halfway, and ``name``, ``description`` (one line)
and ``target`` (in words, set by ``start``) describe it for the history. One disk nemesis acts
on one image at a time. Failures raise :class:`chaos.errors.NemesisError` with the command and
its output.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import re
import shutil
import subprocess
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, Self

from chaos.errors import NemesisError
from storage import parse_partition_dir, segment_files

from ._base import NemesisContext

__all__ = [
    "DiskFull",
    "FailingDir",
    "ReadOnlyDir",
    "TornFile",
    "TornTail",
    "XfsImage",
    "disk_faults_unavailable",
]

_log = logging.getLogger(__name__)

#: Seconds any one command (mkfs, mount, losetup, xfs_io) may take.
COMMAND_TIMEOUT_S = 60.0
#: The smallest XFS filesystem recent mkfs.xfs makes, in MiB. The image is sparse: it costs
#: only the blocks written.
XFS_MIN_MB = 300
#: The file DiskFull fills the filesystem with, in the root of the image (a log dir ignores files there).
FILLER_NAME = ".chaos-disk-full"
#: The smallest piece DiskFull tries to preallocate before it calls the disk full.
_FILL_GRANULE = 4096
#: Mounts stacked at one mount point that close() takes down before it gives up.
_MAX_STACKED_MOUNTS = 8

TornMode = Literal["cut", "garble"]


class NodeControl(Protocol):
    """The node a disk nemesis acts on, as chaos-spec.md's NodeControl (duck-typed).

    ``kill`` SIGKILLs the node's process group and returns once it is dead; ``start`` starts it
    again on the same data and ports and returns once it is ready.
    """

    @property
    def name(self) -> str: ...

    @property
    def log_dirs(self) -> Sequence[Path]: ...

    @property
    def running(self) -> bool: ...

    def kill(self) -> None: ...

    def start(self) -> object: ...


def disk_faults_unavailable() -> str | None:
    """Why the XFS disk nemeses cannot run on this machine (not root, a tool missing), or None if they can."""
    if os.geteuid() != 0:
        return "the XFS disk nemeses need root (mkfs, loop devices, mount)"
    for tool in ("mkfs.xfs", "xfs_io", "losetup", "mount", "umount"):
        if shutil.which(tool) is None:
            package = "xfsprogs" if tool.startswith(("mkfs.xfs", "xfs_io")) else "util-linux"
            return f"{tool} is not installed (Debian package {package})"
    if not Path("/dev/loop-control").exists():
        return "no loop devices here (/dev/loop-control is missing)"
    return None


def _run(argv: Sequence[str], what: str) -> str:
    """Run ``argv``; its stdout. Raises NemesisError naming ``what``, the command and its output."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NemesisError(f"cannot {what}: {' '.join(argv)}: {exc}") from exc
    if done.returncode != 0:
        output = (done.stderr.strip() or done.stdout.strip()).replace("\n", " | ")
        raise NemesisError(f"cannot {what}: {' '.join(argv)} exited with {done.returncode}: {output}")
    return done.stdout


def _mount_options(mountpoint: Path) -> list[tuple[str, str]]:
    """(source, per-mount options) of every mount at ``mountpoint`` (a resolved path), bottom first, from
    /proc/self/mountinfo."""
    target = str(mountpoint)
    found: list[tuple[str, str]] = []
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            # ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS
            where = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])
            if where == target:
                found.append((fields[fields.index("-") + 2], fields[5]))
    return found


class XfsImage:
    """A fresh XFS filesystem on a sparse image file at ``path``, loop-mounted at ``mountpoint``.

    The constructor creates the image (any file at ``path`` is replaced), formats it, attaches a
    loop device and mounts it; ``mountpoint`` is created if needed and must be empty (a mount
    would hide its files). On failure it undoes what it did and raises NemesisError. Use it as
    a context manager or call :meth:`close`; the image file stays for a post-mortem.

    Stop whatever holds files open under ``mountpoint`` before closing: close() then unmounts
    cleanly; otherwise it unmounts lazily (the filesystem lives on until those files close).
    """

    def __init__(self, path: Path, mountpoint: Path, size_mb: int = XFS_MIN_MB) -> None:
        self.path = Path(path).absolute()
        # As /proc/self/mountinfo spells it (no symlinks): how `mounted` finds the mount.
        self.mountpoint = Path(os.path.realpath(mountpoint))
        self.size_mb = size_mb
        #: The loop device ("/dev/loopN") while attached, else None.
        self.device: str | None = None
        reason = disk_faults_unavailable()
        if reason is not None:
            raise NemesisError(f"cannot make an XFS image at {self.path}: {reason}")
        if size_mb < XFS_MIN_MB:
            raise NemesisError(f"an XFS image needs at least {XFS_MIN_MB} MiB (mkfs.xfs refuses less), got {size_mb}")
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        if any(self.mountpoint.iterdir()):
            raise NemesisError(
                f"cannot mount an XFS image at {self.mountpoint}: it is not empty (a mount would hide it)"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb") as image:
                image.truncate(size_mb * 1024 * 1024)  # sparse: no block is written
            _run(["mkfs.xfs", "-q", "-f", str(self.path)], f"format {self.path}")
            self.device = _run(["losetup", "--find", "--show", str(self.path)], f"attach {self.path}").strip()
            self.mount()
        except BaseException:
            with contextlib.suppress(NemesisError):
                self.close()
            raise

    @property
    def mounted(self) -> bool:
        """Whether the image's filesystem is mounted at ``mountpoint`` (read-only bind mounts count)."""
        return self.device is not None and any(src == self.device for src, _ in _mount_options(self.mountpoint))

    def mount(self) -> None:
        """Mount the filesystem at ``mountpoint`` (XFS replays its log if it was not unmounted cleanly)."""
        if self.device is None:
            raise NemesisError(f"cannot mount {self.path}: the image is closed")
        if not self.mounted:
            _run(["mount", "-t", "xfs", self.device, str(self.mountpoint)], f"mount {self.device} at {self.mountpoint}")

    def unmount(self) -> None:
        """Unmount every mount of the image stacked at ``mountpoint``. Raises NemesisError if one is busy."""
        for _ in range(_MAX_STACKED_MOUNTS):
            if not self.mounted:
                return
            _run(["umount", str(self.mountpoint)], f"unmount {self.mountpoint}")
        raise NemesisError(f"{self.mountpoint} is still mounted after {_MAX_STACKED_MOUNTS} unmounts")

    def free_bytes(self) -> int:
        """Bytes still free for new data on the filesystem (statvfs ``f_bavail``)."""
        stat = os.statvfs(self.mountpoint)
        return stat.f_bavail * stat.f_frsize

    def close(self) -> None:
        """Unmount (lazily if busy) and detach the loop device. Idempotent; raises NemesisError if either fails."""
        failures: list[str] = []
        try:
            self.unmount()
        except NemesisError as busy:
            _log.warning("%s; unmounting it lazily", busy)
            try:
                _run(["umount", "-l", str(self.mountpoint)], f"unmount {self.mountpoint} lazily")
                self.unmount()  # a stacked mount below the lazily unmounted one
            except NemesisError as exc:
                failures.append(str(exc))
        if self.device is not None:
            try:
                _run(["losetup", "-d", self.device], f"detach {self.device}")
                self.device = None
            except NemesisError as exc:
                failures.append(str(exc))
        if failures:
            raise NemesisError("; ".join(failures))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"XfsImage({str(self.path)!r} at {str(self.mountpoint)!r}, device={self.device!r})"


class DiskFull(NemesisContext):
    """Fills ``image``'s filesystem to (near) 0 free bytes; :meth:`heal` frees it again."""

    name = "disk-full"
    description = "fills a log dir's filesystem to (near) 0 free bytes: every write there fails with ENOSPC"

    def __init__(self, image: XfsImage) -> None:
        self.image = image
        self.filler = image.mountpoint / FILLER_NAME
        self.target = f"{image.mountpoint} (XFS image {image.path})"
        #: Bytes the filler file holds once start returned.
        self.filled = 0

    def start(self) -> None:
        """Preallocate the filler file in ever smaller pieces until nothing more fits; returns once full.

        Raises NemesisError if the filesystem cannot be written at all (not ENOSPC).
        """
        if self.filled:
            return
        try:
            fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError as exc:
            raise NemesisError(f"cannot fill {self.image.mountpoint}: cannot create {self.filler}: {exc}") from exc
        try:
            size = os.fstat(fd).st_size
            step = max(self.image.free_bytes(), _FILL_GRANULE)
            while step >= _FILL_GRANULE:
                try:
                    os.posix_fallocate(fd, size, step)
                    size += step
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise NemesisError(f"cannot fill {self.image.mountpoint}: {self.filler}: {exc}") from exc
                    step //= 2
            os.fsync(fd)
        finally:
            os.close(fd)
        self.filled = size
        self.target = (
            f"{self.image.mountpoint} (XFS image {self.image.path}): {size} bytes preallocated in {self.filler}, "
            f"{self.image.free_bytes()} bytes left"
        )

    def heal(self) -> None:
        """Delete the filler file (also one a failed start left). Raises NemesisError if it cannot."""
        try:
            self.filler.unlink(missing_ok=True)
        except OSError as exc:
            raise NemesisError(f"cannot free {self.image.mountpoint}: cannot delete {self.filler}: {exc}") from exc
        self.filled = 0

    def __repr__(self) -> str:
        return f"DiskFull({self.image.mountpoint}, filled={self.filled})"


class _RestartsNode(NemesisContext):
    """A disk nemesis whose heal restarts ``node`` if it was running when the fault began."""

    def __init__(self, image: XfsImage, node: NodeControl) -> None:
        self.image = image
        self.node = node
        self.target = f"{node.name}'s log dir {image.mountpoint} (XFS image {image.path})"
        self._restart = False  # the node ran when start began: heal must bring it back

    def _note_running(self) -> None:
        self._restart = self._restart or self.node.running

    def _restart_node(self) -> None:
        """Restart the node (kill, start) if it ran when the fault began; a node that was down stays down."""
        if self._restart:
            if self.node.running:
                self.node.kill()
            self.node.start()
            self._restart = False


class ReadOnlyDir(_RestartsNode):
    """Makes the log dir on ``image`` read-only under ``node``; :meth:`heal` makes it writable and restarts the node.

    The dir becomes read-only for every new path lookup (a read-only bind mount on top of it):
    see the module docstring for why files the node already holds open stay writable.
    """

    name = "read-only-dir"
    description = "makes one log dir read-only (EROFS) under a running node; heal makes it writable and restarts"

    def start(self) -> None:
        """Stack the read-only mount; returns once it is in place. Raises NemesisError if the image is not mounted."""
        if self._read_only():
            return
        if not self.image.mounted:
            raise NemesisError(f"cannot make {self.image.mountpoint} read-only: {self.image.path} is not mounted")
        self._note_running()
        where = str(self.image.mountpoint)
        _run(["mount", "--bind", "-o", "ro", where, where], f"make {where} read-only")
        if not self._read_only():  # an older mount(8) ignores ro on a new bind mount: remount it
            _run(["mount", "-o", "remount,bind,ro", where], f"make {where} read-only")
        self.target = f"{self.node.name}'s log dir {where} (XFS image {self.image.path}): read-only"

    def heal(self) -> None:
        """Unmount the read-only mount (if there), then restart the node if it was running. Idempotent."""
        while self._read_only():
            _run(["umount", str(self.image.mountpoint)], f"make {self.image.mountpoint} writable again")
        self._restart_node()

    def _read_only(self) -> bool:
        mounts = [opts for src, opts in _mount_options(self.image.mountpoint) if src == self.image.device]
        return len(mounts) > 1 and "ro" in mounts[-1].split(",")

    def __repr__(self) -> str:
        return f"ReadOnlyDir({self.node.name}, {self.image.mountpoint})"


class FailingDir(_RestartsNode):
    """Shuts down the XFS filesystem under ``node``'s log dir (EIO from then on); :meth:`heal` mounts it again."""

    name = "failing-dir"
    description = "one log dir's disk fails: every operation there returns EIO; heal remounts it (log recovery)"

    def __init__(self, image: XfsImage, node: NodeControl) -> None:
        super().__init__(image, node)
        self._shut_down = False

    def start(self) -> None:
        """Shut the filesystem down (its log not flushed first); returns once it answers EIO."""
        if self._shut_down:
            return
        if not self.image.mounted:
            raise NemesisError(f"cannot fail {self.image.mountpoint}: {self.image.path} is not mounted")
        self._note_running()
        self._shut_down = True  # from here heal must remount, even if the command below fails halfway
        _run(["xfs_io", "-x", "-c", "shutdown", str(self.image.mountpoint)], f"shut down {self.image.mountpoint}")
        self.target = f"{self.node.name}'s log dir {self.image.mountpoint} (XFS image {self.image.path}): EIO"

    def heal(self) -> None:
        """Kill the node, unmount and mount the filesystem again, start the node if it was running. Idempotent."""
        if self._shut_down:
            if self.node.running:  # it holds files open on the dead filesystem: unmount would be busy
                self._restart = True
                self.node.kill()
            self.image.unmount()
            self.image.mount()
            self._shut_down = False
        self._restart_node()

    def __repr__(self) -> str:
        return f"FailingDir({self.node.name}, {self.image.mountpoint})"


@dataclass(frozen=True)
class TornFile:
    """One segment TornTail tore: bytes ``start``..``end`` (end exclusive) of ``path``, ``size`` bytes before."""

    path: Path
    size: int
    start: int
    end: int
    mode: TornMode

    def __str__(self) -> str:
        verb = "cut" if self.mode == "cut" else "garbled"
        return f"{verb} bytes {self.start}..{self.end} (the last {self.end - self.start} of {self.size}) of {self.path}"


class TornTail(NemesisContext):
    """Kills ``node`` and tears the tail of the active segment of ``partitions`` partitions in its
    log dirs; :meth:`heal` starts it again.

    ``mode="cut"`` truncates the segment by ``nbytes`` (the whole file if it is smaller);
    ``"garble"`` XORs each of its last ``nbytes`` bytes with a random non-zero byte, so every one
    of them changes and the length stays. The partitions are drawn with ``rng`` among those
    (of ``topics``, if given) whose active segment is not empty. :attr:`torn` lists exactly what
    was changed.
    """

    name = "torn-tail"
    description = "kills a node and cuts or garbles the last bytes of partitions' active segments before it restarts"

    def __init__(
        self,
        node: NodeControl,
        mode: TornMode = "cut",
        nbytes: int = 64,
        *,
        rng: random.Random,
        partitions: int = 1,
        topics: Collection[str] | None = None,
    ) -> None:
        if mode not in ("cut", "garble"):
            raise NemesisError(f"invalid torn tail mode: {mode!r}; it must be 'cut' or 'garble'")
        if nbytes < 1 or partitions < 1:
            raise NemesisError(f"a torn tail needs nbytes >= 1 and partitions >= 1, got {nbytes} and {partitions}")
        self.node = node
        self.mode: TornMode = mode
        self.nbytes = nbytes
        self.rng = rng
        self.partitions = partitions
        self.topics = None if topics is None else set(topics)
        self.target = f"{node.name}: the last {nbytes} bytes of {partitions} active segment(s)"
        #: What start changed, one entry per segment.
        self.torn: list[TornFile] = []
        self._restart = False
        self._done = False

    def active_segments(self) -> list[Path]:
        """The newest ``.log`` file of every partition (of ``topics``) in the node's log dirs that is not empty."""
        found: list[Path] = []
        for log_dir in self.node.log_dirs:
            if not log_dir.is_dir():
                continue
            for child in sorted(log_dir.iterdir()):
                partition = parse_partition_dir(child.name)
                if not child.is_dir() or partition is None:
                    continue
                if self.topics is not None and partition.topic not in self.topics:
                    continue
                segments = segment_files(child)
                if segments and segments[-1].stat().st_size > 0:
                    found.append(segments[-1])
        return found

    def start(self) -> None:
        """Kill the node (if running), then tear the segments; returns once the files are changed and synced.

        Raises NemesisError if no partition has a non-empty active segment (the node stays down
        until heal).
        """
        if self._done:
            return
        self.torn = []
        if self.node.running:
            self._restart = True
            self.node.kill()
        try:
            candidates = self.active_segments()
        except OSError as exc:  # a log dir on a failed disk
            raise NemesisError(f"cannot find {self.node.name}'s active segments: {exc}") from exc
        if not candidates:
            which = "" if self.topics is None else f" of {sorted(self.topics)}"
            raise NemesisError(f"no partition{which} of {self.node.name} has a non-empty active segment to tear")
        for path in self.rng.sample(candidates, min(self.partitions, len(candidates))):
            self.torn.append(self._tear(path))
        self._done = True
        self.target = f"{self.node.name}: " + "; ".join(str(t) for t in self.torn)

    def _tear(self, path: Path) -> TornFile:
        size = path.stat().st_size
        start = max(0, size - self.nbytes)
        try:
            with open(path, "r+b") as segment:
                if self.mode == "cut":
                    segment.truncate(start)
                else:
                    segment.seek(start)
                    original = segment.read(size - start)
                    segment.seek(start)
                    segment.write(bytes(b ^ self.rng.randrange(1, 256) for b in original))
                segment.flush()
                os.fsync(segment.fileno())
        except OSError as exc:
            raise NemesisError(f"cannot tear {path}: {exc}") from exc
        return TornFile(path, size, start, size, self.mode)

    def heal(self) -> None:
        """Start the node again if start killed it (its recovery meets the torn tail). Idempotent;
        a later start tears again."""
        if self._restart and not self.node.running:
            self.node.start()
        self._restart = False
        self._done = False

    def __repr__(self) -> str:
        return f"TornTail({self.node.name}, {self.mode}, {self.nbytes} bytes, torn={len(self.torn)})"
