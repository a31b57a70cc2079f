"""What every benchmark's command line shares: quick-mode defaults, progress lines, scratch dirs, exit codes.

A benchmark's ``main`` parses its flags (filling the ones not given from its ``FULL`` or, with
``--quick``, its ``QUICK`` defaults: :func:`fill_defaults`), runs inside :func:`guarded` (exit
code 1 with the message on ``BenchError`` or on a process that did not start
(``node.proc.ProcessError``), 130 on Ctrl-C or SIGTERM, after every process it started was
stopped), prints progress with a :func:`stepper` to stderr and keeps its files in a
:func:`scratch_dir` that is removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from node.proc import ProcessError

from ._procs import BenchError, strait_has_command


def fill_defaults(args: argparse.Namespace, defaults: Mapping[str, Any]) -> None:
    """Set every flag in ``defaults`` that was not given (is None): explicit flags win over --quick."""
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def stepper(t0: float) -> Callable[[str], None]:
    """A function printing a progress line to stderr, prefixed by the seconds since ``t0`` (perf_counter)."""

    def step(text: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f}s] {text}", file=sys.stderr, flush=True)

    return step


@contextmanager
def scratch_dir(base: Path, prefix: str) -> Iterator[Path]:
    """A new directory under ``base`` (created if need be), removed with everything in it at the end."""
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def require_strait(strait: Path, *, refusal: str = "strait cannot be benchmarked", advice: str = "") -> None:
    """Raise ``BenchError`` (``"<refusal>: <why><advice>"``) unless the ``strait`` CLI has the commands
    a benchmark runs: ``node start`` and ``zookeeper start``."""
    for words in (("node", "start"), ("zookeeper", "start")):
        ok, why = strait_has_command(strait, *words)
        if not ok:
            raise BenchError(f"{refusal}: {why}{advice}")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through every process's stop()


def guarded(body: Callable[[], int], *, started: str) -> int:
    """Run ``body`` with SIGTERM turned into KeyboardInterrupt; returns its exit code, 1 after
    printing a ``BenchError`` or a ``node.proc.ProcessError`` (a child that exited or was not
    ready in time), or 130 after an interrupt (saying that every ``started`` thing, such
    as "process", was stopped: the ``with`` blocks that own them have ended)."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return body()
    except (BenchError, ProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted; every {started} started was stopped", file=sys.stderr)
        return 130
