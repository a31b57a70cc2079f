"""Where a job's results go, so that a directory holding a ``summary.json`` is always a whole result.

A job writes into ``OUT/.incomplete-<job>-<pid>/`` and :meth:`JobOutput.finish` moves each
piece into ``OUT``; ``summary.json`` comes last (written to a temporary name, fsynced,
renamed), so a job that dies half way leaves no result that looks complete. Like Spark's
default save mode, an ``OUT`` that already holds a result is refused unless ``overwrite``;
overwriting removes the old ``summary.json`` before anything else is written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

SUMMARY = "summary.json"
DISCREPANCIES = "discrepancies"
REPORT = "report.html"
SUMMARY_FORMAT = 1
SAMPLES = 100


class OutputError(Exception):
    """The output directory cannot be used (it holds a result, or is not a directory)."""


class JobOutput:
    def __init__(self, out: Path, job: str, *, overwrite: bool = False) -> None:
        self.out = out
        self.job = job
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out}: exists and is not a directory")
        if (out / SUMMARY).exists() or (out / DISCREPANCIES).exists():
            if not overwrite:
                raise OutputError(
                    f"--out {out}: holds an earlier result (summary.json); pass --overwrite to replace it"
                )
            (out / SUMMARY).unlink(missing_ok=True)  # from here on, OUT holds no complete result
            _fsync_dir(out)
        out.mkdir(parents=True, exist_ok=True)
        self.staging = out / f".incomplete-{job}-{os.getpid()}"
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir()

    def path(self, name: str) -> str:
        """Where the job writes the piece ``name`` (e.g. ``discrepancies`` as Parquet)."""
        return str(self.staging / name)

    def finish(self, summary: dict[str, Any], render: Callable[[Path], object] | None = None) -> Path:
        """Move every piece into OUT, write summary.json (last, atomically), then the report
        (``render(OUT)``: it reads summary.json). Returns the summary's path."""
        for piece in sorted(self.staging.iterdir()):
            target = self.out / piece.name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            piece.rename(target)
        self.staging.rmdir()
        summary = {"format": SUMMARY_FORMAT, **summary}
        path = self.out / SUMMARY
        tmp = self.out / f".{SUMMARY}.tmp"
        with tmp.open("w") as f:
            json.dump(summary, f, indent=1, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.rename(path)
        _fsync_dir(self.out)
        if render is not None:
            render(self.out)
        return path

    def abandon(self) -> None:
        """The job failed: remove what it staged (OUT keeps no result)."""
        shutil.rmtree(self.staging, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
