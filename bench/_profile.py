"""Profiling for the benchmarks: py-spy and pyinstrument samples turned into shares per place, function and line.

Two ways of sampling, two summaries:

- **a loop in a child process** (storage_bench): :func:`py_spy_record` runs a command under
  ``py-spy record --format raw`` (pyinstrument in-process, :func:`pyinstrument_stacks`, is the
  fallback), and :func:`loop_shares` keeps the samples inside one function, with the self and
  inclusive share of every function below it and the self share of the hottest lines;
- **a running server** (replication_bench, mirror_bench): ``py-spy record --pid`` attached with
  :data:`PY_SPY_FLAGS` (``bench._procs.py_spy_attached``), and :func:`summarise_stacks` splits
  the main thread's samples into idle (waiting in epoll) and busy, and the busy ones by place
  (:func:`where`) and function.

A stack is a list of ``(function, file, line)`` frames, outermost first, with a sample count.
A C call's time is its Python caller's (py-spy sees only Python frames).
"""

from __future__ import annotations

import linecache
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._report import REPO_ROOT

Frame = tuple[str, str, int]  # (function, file, line)
Stack = tuple[list[Frame], int]  # frames outermost first, sample count

PY_SPY_FLAGS = ("--nonblocking", "--idle", "--threads", "--full-filenames")
MAIN_THREAD = "MainThread"
# Leaf functions in which a thread waits (py-spy --idle records them): trio's epoll_wait, and the
# idle loops of kazoo's and trio's helper threads.
IDLE_LEAVES = frozenset(
    {"EpollIOManager.get_events", "Condition.wait", "EpollSelector.select", "WorkerThread._work", "Lock.acquire"}
)
_VENV_LIB = Path(sys.prefix, "lib")


def py_spy_path() -> Path:
    """The py-spy installed beside this Python."""
    return Path(sys.executable).parent / "py-spy"


def py_spy_version() -> str:
    """What ``py-spy --version`` prints (empty when it prints nothing)."""
    found = subprocess.run([str(py_spy_path()), "--version"], capture_output=True, text=True, check=False)
    return found.stdout.strip()


def split_frame(frame: str) -> Frame:
    """``"append (storage/_segment.py:161)"`` -> ``("append", "storage/_segment.py", 161)`` (line 0 if none)."""
    function, _, where_ = frame.rpartition(" (")
    file, _, line = where_.rstrip(")").rpartition(":")
    return function, file, int(line) if line.isdigit() else 0


# -- a loop in a child process ---------------------------------------------------------------


def py_spy_record(
    py_spy: str, command: list[str], *, rate: int, flags: list[str], output: Path
) -> tuple[list[Stack], float]:
    """Run ``command`` (from the repository root) under ``py-spy record --rate <rate> <flags>
    --format raw``; returns its stacks and the seconds it took. Raises RuntimeError when py-spy
    fails and OSError when it cannot be started."""
    cmd = [py_spy, "record", "--rate", str(rate), *flags, "--format", "raw", "--output", str(output), "--", *command]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0 or not output.exists():
        raise RuntimeError(f"py-spy failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    stacks = []
    for text in output.read_text().splitlines():
        frames, _, count = text.rpartition(" ")
        stacks.append(([split_frame(f) for f in frames.split(";")], int(count)))
    output.unlink()
    return stacks, elapsed


def pyinstrument_stacks(work: Callable[[], None], interval: float) -> tuple[list[Stack], float]:
    """Run ``work`` under pyinstrument (a sample every ``interval`` s); returns its stacks and the
    seconds it took. pyinstrument records a function's first line, not the sampled line."""
    from pyinstrument import Profiler  # noqa: PLC0415  (only when py-spy cannot run)
    from pyinstrument.frame import Frame as PyinstrumentFrame  # noqa: PLC0415

    profiler = Profiler(interval=interval)
    start = time.perf_counter()
    with profiler:
        work()
    elapsed = time.perf_counter() - start
    session = profiler.last_session
    assert session is not None
    stacks: list[Stack] = []

    def walk(frame: PyinstrumentFrame, path: list[Frame]) -> None:
        if frame.is_synthetic_leaf:  # pyinstrument's "[self]": the parent's own time
            stacks.append((path, round(frame.time / interval)))
            return
        name = f"{frame.class_name}.{frame.function}" if frame.class_name else frame.function
        here = [*path, (name, frame.file_path_short or "", frame.line_no or 0)]
        own = frame.time - sum(c.time for c in frame.children)
        if own > 0:
            stacks.append((here, round(own / interval)))
        for child in frame.children:
            walk(child, here)

    root = session.root_frame()
    if root is not None:
        walk(root, [])
    return stacks, elapsed


def loop_shares(stacks: list[Stack], loop: str, top: int) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """The samples inside function ``loop``: (how many, self and inclusive share per function, self
    share of the ``top`` hottest lines). Shares are % of those samples, largest first."""
    self_fn: Counter[tuple[str, str]] = Counter()
    total_fn: Counter[tuple[str, str]] = Counter()
    self_line: Counter[Frame] = Counter()
    samples = 0
    for frames, count in stacks:
        names = [f[0] for f in frames]
        if loop not in names:
            continue
        sub = frames[names.index(loop) :]
        samples += count
        leaf = sub[-1]
        self_fn[leaf[:2]] += count
        self_line[leaf] += count
        for key in {f[:2] for f in sub}:
            total_fn[key] += count
    if samples == 0:
        return 0, [], []
    functions = [
        {"function": fn, "file": file, "self_pct": 100 * n / samples, "total_pct": 100 * total_fn[fn, file] / samples}
        for (fn, file), n in self_fn.most_common()
    ]
    lines = [
        {
            "function": fn,
            "file": file,
            "line": line,
            "code": linecache.getline(str(REPO_ROOT / file), line).strip() or linecache.getline(file, line).strip(),
            "self_pct": 100 * n / samples,
        }
        for (fn, file, line), n in self_line.most_common(top)
    ]
    return samples, functions, lines


# -- a running server ------------------------------------------------------------------------


def where(file: str) -> tuple[str, str]:
    """(place, short file name) of a full file name: the repository's own modules by their path,
    installed packages and the standard library by package."""
    path = Path(file)
    if not path.is_absolute():
        return file, file  # generated code, such as "<strait.protocol read_struct>"
    if "site-packages" in path.parts:
        inside = path.parts[path.parts.index("site-packages") + 1 :]
        return inside[0].removesuffix(".py"), "/".join(inside)
    if path.is_relative_to(REPO_ROOT) and not path.is_relative_to(_VENV_LIB):
        short = str(path.relative_to(REPO_ROOT))
        return short, short
    stdlib = next((i for i, part in enumerate(path.parts) if part.startswith("python3")), None)
    if stdlib is not None and stdlib + 1 < len(path.parts):
        inside = path.parts[stdlib + 1 :]
        return f"stdlib {Path(inside[0]).stem}", "/".join(inside)
    return file, file


def summarise_stacks(raw: str) -> dict[str, Any]:
    """From py-spy's raw output (``record --idle --threads --full-filenames``): the main thread's
    samples, its idle share, the other threads' busy samples (in % of the main thread's), and
    self share per place and self and inclusive share per function of the main thread's busy
    samples, largest first. A C call's time is its Python caller's."""
    places: Counter[str] = Counter()
    self_fn: Counter[tuple[str, str]] = Counter()
    total_fn: Counter[tuple[str, str]] = Counter()
    main = idle = other_busy = 0
    for text in raw.splitlines():
        stack, _, count_text = text.rpartition(" ")
        thread, _, frames_text = stack.partition(";")
        if not frames_text or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [split_frame(f)[:2] for f in frames_text.split(";")]
        leaf_idle = frames[-1][0] in IDLE_LEAVES
        if not thread.endswith(f": {MAIN_THREAD}"):
            other_busy += 0 if leaf_idle else count
            continue
        main += count
        if leaf_idle:
            idle += count
            continue
        named = [(function, where(file)) for function, file in frames]
        places[named[-1][1][0]] += count
        self_fn[named[-1][0], named[-1][1][1]] += count
        for function, (_, short) in set(named):
            total_fn[function, short] += count
    busy = main - idle
    return {
        "samples": main,
        "idle_pct": 100 * idle / main if main else 0.0,
        "other_busy_pct": 100 * other_busy / main if main else 0.0,
        "places": [{"where": w, "self_pct": 100 * n / busy} for w, n in places.most_common()],
        "functions": [
            {"function": fn, "file": f, "self_pct": 100 * n / busy, "total_pct": 100 * total_fn[fn, f] / busy}
            for (fn, f), n in self_fn.most_common()
        ],
    }


def functions_table(functions: list[dict[str, Any]], top: int) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the ``top`` functions of :func:`summarise_stacks`, by self share."""
    headers = ["function", "file", "self %", "total %"]
    rows = [[f["function"], f["file"], f"{f['self_pct']:.1f}", f"{f['total_pct']:.1f}"] for f in functions[:top]]
    return headers, rows


def main_thread_text(samples: int, idle_pct: float, places: list[dict[str, Any]]) -> str:
    """One sentence on a profiled process's main thread: samples, idle share, busy samples by place."""
    return (
        f"{samples} samples of the main thread, {idle_pct:.0f} % idle. Busy samples by place: "
        + ", ".join(f"{x['where']} {x['self_pct']:.1f} %" for x in places)
        + "."
    )
