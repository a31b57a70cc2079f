"""What every benchmark's report is made of: the machine, percentiles, tables, goal verdicts, result files.

A benchmark prints its tables with rich (:func:`print_table`, :func:`print_goal_lines`) and,
with ``--out``, writes ``<out>/<name>-<YYYY-MM-DD>.json`` (every figure) and ``.md`` (the same
for a reader). Both files start the same way for every benchmark: :func:`run_fields` in the JSON;
:func:`report_head`, then a ``## Machine`` section from :func:`machine_lines` /
:func:`site_machine_lines` (:func:`report_sections` for the benchmarks that start a site), in the
Markdown. MB/s figures count 1 MB = 10^6 bytes.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

MB = 1_000_000
REPO_ROOT = Path(__file__).resolve().parent.parent
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in (0, 1]); raises ValueError on an empty list."""
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0 < q <= 1:
        raise ValueError(f"percentile rank must be in (0, 1], got {q}")
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def median_of_runs(runs: int) -> str:
    """``"median of 3 runs"`` (or ``"median of 1 run"``), for table titles."""
    return f"median of {runs} run{'s' if runs > 1 else ''}"


# -- the machine and the software ------------------------------------------------------------


def _first_field(path: str, key: str) -> str:
    try:
        for text in Path(path).read_text().splitlines():
            name, sep, value = text.partition(":")
            if sep and name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return "unknown"


def _mount_of(path: Path) -> dict[str, str]:
    best: dict[str, str] = {}
    try:
        for text in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype, options, *_ = text.split()
            if (path == Path(mount) or Path(mount) in path.parents) and len(mount) >= len(best.get("mount", "")):
                best = {"device": device, "mount": mount, "fstype": fstype, "options": options}
    except OSError:
        pass
    return best


def machine_info(target: Path) -> dict[str, Any]:
    """CPU, cores, RAM, kernel, OS, the filesystem of ``target`` (the benchmark's data dir) and Python."""
    stat_f = subprocess.run(["stat", "-f", "-c", "%T", str(target)], capture_output=True, text=True, check=False)
    os_release = "unknown"
    with_release = Path("/etc/os-release")
    if with_release.exists():
        for text in with_release.read_text().splitlines():
            if text.startswith("PRETTY_NAME="):
                os_release = text.split("=", 1)[1].strip('"')
    mem_kib = _first_field("/proc/meminfo", "MemTotal").split()[0]
    mount = _mount_of(target.resolve())
    return {
        "cpu_model": _first_field("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "ram_gib": round(int(mem_kib) / (1024 * 1024), 1) if mem_kib.isdigit() else None,
        "kernel": platform.release(),
        "os": os_release,
        "target_dir": str(target),
        "fs_type_stat": stat_f.stdout.strip() or "unknown",
        "fs_type_mounts": mount.get("fstype", "unknown"),
        "mount": mount,
        "python": sys.version.split()[0],
        "python_build": platform.python_implementation() + " " + " ".join(platform.python_build()),
    }


def dist_version(name: str) -> str:
    """The installed version of distribution ``name``, or ``"not installed"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def git_commit() -> str:
    """The short hash of the checkout's HEAD (the current directory's), or ``"unknown"``."""
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return git.stdout.strip() or "unknown"


def git_dirty() -> bool:
    """Whether the checkout has uncommitted changes."""
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, check=False)
    return bool(status.stdout.strip())


# -- result files ----------------------------------------------------------------------------


def command_line(module: str, argv: Sequence[str]) -> str:
    """The command that ran ``python -m <module> <argv>``, with the interpreter relative to the cwd."""
    exe = Path(sys.executable)
    shown = os.path.relpath(exe, Path.cwd()) if exe.is_relative_to(Path.cwd()) else str(exe)
    return shlex.join([shown, "-m", module, *argv])


def result_stem(out: Path, name: str, started: datetime.datetime) -> Path:
    """``<out>/<name>-<date>`` (``out`` is created): add ``.md`` or ``.json``."""
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{name}-{started.date().isoformat()}"


def run_fields(started: datetime.datetime, elapsed: float, command: str) -> dict[str, Any]:
    """The fields every result JSON opens with: when, how long, what command, from where."""
    return {
        "started": started.isoformat(timespec="seconds"),
        "duration_s": elapsed,
        "command": command,
        "cwd": str(Path.cwd()),
    }


def settings_json(settings: Any) -> dict[str, Any]:
    """A settings dataclass as JSON values (paths as strings)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()}


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_markdown(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines))


def report_head(
    title: str,
    fields: dict[str, Any],
    json_path: Path,
    *,
    figures: str = "Every run's figures",
    measures: str = "What is measured",
    readme: str = "../README.md",
) -> list[str]:
    """The Markdown report's title, command line, start, duration and links to the JSON and the README."""
    return [
        title,
        "",
        f"Command (from `{fields['cwd']}`): `{fields['command']}`  ",
        f"Started {fields['started']}, took {fields['duration_s']:.0f} s. {figures}: [{json_path.name}]"
        f"({json_path.name}). {measures}: [bench/README.md]({readme}).",
    ]


def machine_lines(m: dict[str, Any]) -> list[str]:
    """The ``## Machine`` lines every report has: CPU and cores, RAM, kernel."""
    return [
        f"- CPU: {m['cpu_model']}, {m['cores']} cores ({m['usable_cores']} usable)",
        f"- RAM: {m['ram_gib']} GiB",
        f"- Kernel: {m['kernel']} ({m['os']})",
    ]


def site_machine_lines(m: dict[str, Any], *, more_software: str = "") -> list[str]:
    """:func:`machine_lines`, the data dir's filesystem, Python and the Kafka client's versions
    (``m["software"]`` holds ``confluent_kafka`` and ``librdkafka``); ``more_software`` ends that line."""
    sw = m["software"]
    return [
        *machine_lines(m),
        f"- Data dir: `{m['target_dir']}`, filesystem `{m['fs_type_mounts']}` "
        f"(`{m['mount'].get('device', '?')}` on `{m['mount'].get('mount', '?')}`)",
        f"- Python: {m['python']}; confluent-kafka {sw['confluent_kafka']}, librdkafka {sw['librdkafka']}"
        + more_software,
    ]


def report_sections(machine: list[str], settings: list[str], goals: list[str]) -> list[str]:
    """A site benchmark's ``## Machine`` and ``## Settings`` sections, then ``## Results`` opening with
    the goal lines as a list (the caller adds the tables)."""
    return [
        "",
        "## Machine",
        "",
        *machine,
        "",
        "## Settings",
        "",
        *settings,
        "",
        "## Results",
        "",
        *[f"- {line}" for line in goals],
        "",
    ]


def markdown_table(headers: list[str], table: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table]
    return "\n".join(lines)


# -- goals and the terminal ------------------------------------------------------------------


def verdict_word(met: bool | None) -> str:
    """How a goal's verdict reads: ``met``, ``NOT met``, or ``NOT TESTED`` (None)."""
    return {True: "met", False: "NOT met", None: "NOT TESTED"}[met]


def verdict_style(met: bool | None) -> str:
    """The rich style a verdict line is printed in."""
    return {True: "green", False: "red", None: "yellow"}[met]


def wide_console(width: int) -> Console:
    """A console for tables; writing to a pipe or file, it is at least ``width`` columns wide
    (rich would squeeze the columns into 80)."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, width)
    return console


def print_table(
    console: Console, title: str, headers: list[str], rows: list[list[str]], left: Callable[[int, str], bool]
) -> None:
    """Print one table; column ``i`` with header ``h`` is left-aligned when ``left(i, h)``, else right."""
    table = Table(title=title)
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if left(i, h) else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def print_goal_lines(console: Console, lines: list[str]) -> None:
    """Goal lines in green, or red when one says ``NOT met``."""
    for line in lines:
        console.print(line, style=verdict_style("NOT met" not in line))
