"""The two file idioms of process management: publish a file atomically, read the end of a log.

:func:`atomic_write` is how a process announces something another one polls for (a ready
file, ``site.json``) and how small state files are saved: a reader sees the old file or the
new one, never a partial one, and after a crash the same holds on disk.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

LOG_TAIL_LINES = 20
_TAIL_BYTES_PER_LINE = 4096  # read at most this much per wanted line from the end of a (large) log


def atomic_write(path: Path, data: str | bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) so that no reader and no crash
    ever sees a partial file.

    The data goes to a temp file in the same directory (created with ``mode``, so a private
    file is never readable by others, not even for a moment), is fsynced, renamed over
    ``path``, and the directory is fsynced so the rename itself survives a crash. Temp names
    are unique, so concurrent writers of one path never clobber each other's temp file: the
    last rename wins. On any failure the temp file is removed and ``path`` is left as it was.

    Raises:
        OSError: the directory does not exist or is not writable, the disk is full, ...
    """
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        try:
            os.fchmod(fd, mode)  # mkstemp creates 0600
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, *, offset: int = 0) -> str:
    """The last ``lines`` lines of the log at ``path`` from byte ``offset`` on, for error messages.

    ``offset`` skips what earlier runs appended to the same file; only the end of a large log
    is read (at most 4 KiB per wanted line). Never raises: an unreadable
    log is described in the result (``"(no log: ...)"``), an empty one as ``"(log is empty)"``.
    """
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            start = max(offset, size - lines * _TAIL_BYTES_PER_LINE)
            log.seek(start)
            text = log.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(no log: {exc})"
    found = text.splitlines()
    if start > offset and len(found) > lines:
        found = found[1:]  # the first line read is likely cut
    return "\n".join(found[-lines:]) or "(log is empty)"
