"""``strait doctor``: is this host fit to run a broker node? The checks live in :mod:`node.doctor`.

Exit codes: 0 when nothing failed (warnings allowed), 1 when a check failed, 2 for bad usage
(a missing or invalid config file, a bad option value, an unknown ``--pid``), as click does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from node.doctor import Finding

# The defaults of node.doctor's Thresholds and DiskLimits, repeated so that `strait --help` need not
# import node.doctor (tests/strait/test_doctor_cli.py checks that they agree).
_MIN_FREE_SPACE_PCT = 10.0
_MIN_FREE_INODES_PCT = 5.0
_MIN_OPEN_FILES = 100_000
_MAX_CLOCK_ERROR_MS = 100.0
_TIMEOUT_S = 3.0
_STATUS_STYLE = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red")}


@click.command("doctor")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The node's server.properties: adds its log dirs, ZooKeeper and ports to the checks "
    "(without it, only the host-wide checks run: sysctls, open files, clock).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as a JSON list instead of a table.")
@click.option(
    "--filesystem",
    "filesystems",
    multiple=True,
    default=("xfs",),
    show_default=True,
    metavar="TYPE",
    help="A filesystem type accepted for log dirs (repeatable; e.g. --filesystem xfs --filesystem ext4).",
)
@click.option(
    "--min-free-space",
    type=click.FloatRange(0, 50),
    default=_MIN_FREE_SPACE_PCT,
    show_default=True,
    metavar="PCT",
    help="Fail a log dir with less free space than this percentage; warn below twice it.",
)
@click.option(
    "--min-free-inodes",
    type=click.FloatRange(0, 50),
    default=_MIN_FREE_INODES_PCT,
    show_default=True,
    metavar="PCT",
    help="Fail a log dir with fewer free inodes than this percentage; warn below twice it.",
)
@click.option(
    "--min-open-files",
    type=click.IntRange(min=0),
    default=_MIN_OPEN_FILES,
    metavar="N",
    show_default=True,
    help="Fail when the soft open-file limit (RLIMIT_NOFILE) is lower.",
)
@click.option(
    "--pid",
    type=click.IntRange(min=1),
    metavar="PID",
    help="Check this process's open-file limit (e.g. the running node's) instead of doctor's own.",
)
@click.option(
    "--max-clock-error",
    type=click.FloatRange(min=0),
    default=_MAX_CLOCK_ERROR_MS,
    show_default=True,
    metavar="MS",
    help="Warn when the kernel's bound on the clock's error is larger.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="For each network probe (a ZooKeeper server, the admin API).",
)
def doctor(
    config_path: Path | None,
    as_json: bool,
    filesystems: tuple[str, ...],
    min_free_space: float,
    min_free_inodes: float,
    min_open_files: int,
    pid: int | None,
    max_clock_error: float,
    timeout: float,
) -> None:
    """Check this host against what strait's Ansible roles set up (see docs/doctor.md).

    Log dirs on XFS mounted noatime with room left, the kernel settings, the open-file limit,
    clock sync, ZooKeeper reachable, the node's ports free. Exits 1 when a check fails;
    warnings alone exit 0.
    """
    from node.config import ConfigError, load_config
    from node.doctor import DiskLimits, Probes, Thresholds, diagnose, exit_code, open_files_limit

    config = None
    if config_path is not None:
        try:
            config = load_config(config_path)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="'--config'") from None
    probes = Probes()
    if pid is not None:
        try:
            open_files_limit(pid)
        except OSError as exc:
            raise click.BadParameter(f"cannot read the limits of process {pid}: {exc.strerror or exc}") from None
        probes = Probes(open_files=lambda: open_files_limit(pid), open_files_whose=f"pid {pid}")
    thresholds = Thresholds(
        disks=DiskLimits(tuple(filesystems), min_free_space, min_free_inodes),
        min_open_files=min_open_files,
        max_clock_error_ms=max_clock_error,
        timeout_s=timeout,
    )
    findings = diagnose(config, thresholds, probes)
    if as_json:
        click.echo(json.dumps([f.as_json() for f in findings], indent=2))
    else:
        _print_table(findings, str(config_path) if config_path is not None else None)
    code = exit_code(findings)
    if code:
        raise SystemExit(code)


def _print_table(findings: list[Finding], config: str | None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from node.doctor import Status, tally

    title = f"strait doctor: {config}" if config else "strait doctor: host-wide checks only (no --config)"
    table = Table(title=title, title_justify="left")
    for column in ("check", "subject", "status", "detail"):
        table.add_column(column, overflow="fold")
    for f in findings:
        label, style = _STATUS_STYLE[f.status.value]
        table.add_row(Text(f.check), Text(f.subject), Text(label, style=style), Text(f.detail))
    console = Console()
    console.print(table)
    counts = tally(findings)
    console.print(
        f"{counts[Status.FAIL]} failed, {counts[Status.WARN]} warned, {counts[Status.OK]} ok",
        markup=False,
        highlight=False,
    )
