"""``strait chaos run|check|list``: the chaos suite (see docs/chaos.md).

Exit status of ``run`` and ``check``: 0 every scenario passed (a positive control passes when
its anomaly was found), 1 an anomaly or a scenario error, 2 bad input.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click


@click.group("chaos", help="The chaos suite: faults, workloads and offline checkers (docs/chaos.md).")
def chaos_group() -> None:
    pass


@chaos_group.command("list")
def list_command() -> None:
    """Show the scenarios, the matrices and the faults, each with a one-line description."""
    from chaos.faults import FAULTS
    from chaos.scenarios import MATRICES, SCENARIOS

    click.echo("scenarios:")
    width = max(len(name) for name in SCENARIOS)
    for name, scenario in SCENARIOS.items():
        expect = "" if scenario.expect == "pass" else f" [positive control: expects {scenario.expect}]"
        click.echo(f"  {name:<{width}}  {scenario.description}{expect}")
    click.echo("\nmatrices:")
    for name, members in MATRICES.items():
        click.echo(f"  {name:<8}  {', '.join(members)}")
    click.echo("\nfaults:")
    width = max(len(name) for name in FAULTS)
    for name, spec in FAULTS.items():
        click.echo(f"  {name:<{width}}  {spec.description}")


@chaos_group.command("run")
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME", help="A scenario to run (repeatable).")
@click.option("--matrix", type=click.Choice(["short", "full", "controls"]), default=None, help="A whole matrix.")
@click.option(
    "--seed", type=click.IntRange(0, 2**31 - 1), default=None, help="Fixes every schedule (default: random, printed)."
)
@click.option(
    "--repetition",
    type=click.IntRange(0, 1000),
    default=0,
    help="With --scenario: the repetition of a full-matrix run to replay.",
)
@click.option(
    "--duration",
    type=str,
    default=None,
    metavar="TIME",
    help="Seconds of faults per scenario (e.g. 90, 10m, 1h for a soak); default: each scenario's own.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where histories, logs, results.json and report.html go (default: chaos-runs/<time>).",
)
@click.option(
    "--topology",
    "topology",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Run against sites you run yourself, driven by this chaos file (docs/chaos.md); default: a local appliance.",
)
def run_command(
    scenarios: tuple[str, ...],
    matrix: str | None,
    seed: int | None,
    repetition: int,
    duration: str | None,
    directory: Path | None,
    topology: Path | None,
) -> None:
    """Run scenarios on a local appliance this command starts (or on --topology's sites), check, report."""
    # `strait` restores SIGPIPE's default for pipelines into `head`; the fault proxy in this
    # process writes to sockets whose peers a fault has just killed: EPIPE, not death.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    import random

    from chaos.runner import run
    from chaos.scenarios import lookup
    from chaos.scenarios import matrix as matrix_of

    if bool(scenarios) == bool(matrix):
        raise click.UsageError("give --scenario NAME (repeatable) or --matrix short|full|controls, not both")
    unknown = [s for s in scenarios if not _known(s)]
    if unknown:
        raise click.BadParameter(
            f"unknown scenario {unknown[0]!r}; `strait chaos list` shows them", param_hint="--scenario"
        )
    seconds = parse_duration(duration) if duration is not None else None
    sites = None
    if topology is not None:
        from chaos.errors import ChaosError
        from chaos.existing import load_existing

        try:
            sites = load_existing(topology)
        except ChaosError as exc:
            raise click.BadParameter(str(exc), param_hint="--topology") from None
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    chosen = matrix_of(matrix) if matrix else [(lookup(s), repetition) for s in scenarios]
    if directory is None:
        directory = Path("chaos-runs") / time.strftime("%Y%m%d-%H%M%S")
    command = "strait chaos run " + " ".join(
        [*(f"--scenario {shlex.quote(s)}" for s in scenarios), *([f"--matrix {matrix}"] if matrix else [])]
        + [f"--seed {seed}"]
        + ([f"--duration {duration}"] if duration else [])
        + ([f"--topology {shlex.quote(str(topology))}"] if topology else [])
    )
    click.echo(f"seed {seed}: replay with `{command}`", err=True)
    with _progress(len(chosen)) as (say, done):
        results = run(chosen, directory, seed, command=command, duration=seconds, say=say, sites=sites, on_result=done)
    _print_summary(results, directory)
    if results["verdict"] != "pass":
        sys.exit(1)


@chaos_group.command("check")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
def check_command(directory: Path) -> None:
    """Run the checkers again, offline, on the histories a run saved in DIRECTORY."""
    from chaos.errors import ChaosError
    from chaos.runner import check_directory

    try:
        results = check_directory(directory)
    except ChaosError as exc:
        raise click.ClickException(str(exc)) from None
    _print_summary(results, directory)
    if results["verdict"] != "pass":
        sys.exit(1)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h`` -> seconds; a clear error for anything else."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a duration (e.g. 90, 90s, 10m, 1h)", param_hint="--duration"
        ) from None
    if not 5 <= value <= 7 * 24 * 3600:
        raise click.BadParameter(f"{text!r} is out of range (5 s to 7 days)", param_hint="--duration")
    return value


@contextlib.contextmanager
def _progress(total: int) -> Iterator[tuple[Callable[[str], None], Callable[[dict[str, Any]], None]]]:
    """A rich progress bar over the scenarios (on a terminal), with every line of the run above it."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    started = time.monotonic()
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("chaos", total=total)
        failed = 0

        def say(line: str) -> None:
            progress.console.print(f"[dim]{time.monotonic() - started:7.1f}s[/dim] {escape(line)}", highlight=False)
            progress.update(task, description=escape(line.split(":", 1)[0]))

        def done(scenario: dict[str, Any]) -> None:
            nonlocal failed
            failed += scenario["verdict"] != "pass"
            progress.update(task, advance=1, description=f"{failed} failed so far" if failed else "all passed so far")

        yield say, done


def _print_summary(results: dict[str, object], directory: Path) -> None:
    scenarios = results.get("scenarios", [])
    assert isinstance(scenarios, list)
    for scenario in scenarios:
        anomalies = sum(len(c["anomalies"]) for c in scenario["checkers"])
        fired = sorted({a["name"] for c in scenario["checkers"] for a in c["anomalies"]})
        detail = f"{anomalies} anomalies ({', '.join(fired)})" if anomalies else "no anomaly"
        if scenario.get("error"):
            detail = f"error: {scenario['error']}"
        if scenario.get("findings"):
            detail += "; " + "; ".join(scenario["findings"])
        expect = "" if scenario.get("expect", "pass") == "pass" else f" (expects {scenario['expect']})"
        click.echo(f"{scenario['verdict'].upper():5}  {scenario['name']}{expect}: {detail}")
    click.echo(f"verdict: {str(results.get('verdict')).upper()}; report: {directory / 'report.html'}")


def _known(name: str) -> bool:
    from chaos.scenarios import lookup

    try:
        lookup(name)
    except KeyError:
        return False
    return True
