"""``strait failover status|promote|fence|unfence|reverse|failback``: DR operations on the links
of a topology (``--topology``, default ``.strait/appliance.json``; see docs/failover.md).

Every command prints human text (progress on stderr) or, with ``--json``, one JSON object on
stdout and the human text on stderr. Exit codes: 0 done, 1 a step failed (run the same command
again: it resumes from the journal), 2 bad input, 3 wrong state (the message says what to run
instead), 4 another failover command holds the link, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import trio

if TYPE_CHECKING:
    from failover.topology import Topology

topology_option = click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path(".strait") / "appliance.json",
    show_default=True,
    envvar="STRAIT_TOPOLOGY",
    help="strait up's appliance.json, or a TOML topology of real sites (env STRAIT_TOPOLOGY).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout; text goes to stderr.")
# A fault point for the tests that kill -9 a command half way: stop for good after this step.
stall_option = click.option("--stall-after", hidden=True, default=None, metavar="STEP")


@click.group("failover", help="DR: status and RPO, promote, fence, reverse and failback of mirror links.")
def failover_group() -> None:
    pass


def _err(message: str) -> None:
    click.echo(message, err=True)


def _load(path: Path) -> Topology:
    from failover.errors import TopologyError
    from failover.topology import load_topology

    try:
        return load_topology(path)
    except TopologyError as exc:
        _err(f"error: {exc}")
        sys.exit(exc.exit_code)


def _run(fn: Callable[[], Awaitable[dict[str, Any]]], as_json: bool, text: Callable[[dict[str, Any]], str]) -> None:
    """Run ``fn`` in trio; print its result; exit with the failover error's code on failure."""
    from failover.errors import FailoverError

    try:
        result = trio.run(fn)
    except FailoverError as exc:
        _err(f"error: {exc}")
        if as_json:
            click.echo(json.dumps({"ok": False, "error": str(exc), "exit_code": exc.exit_code}))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _err("interrupted: run the same command again to continue where it stopped")
        sys.exit(130)
    if as_json:
        _err(text(result))
        click.echo(json.dumps({"ok": True, **result}, indent=2, sort_keys=True))
    else:
        click.echo(text(result))


class _Progress:
    """The drain's progress: a rich bar on a terminal, a line every few seconds otherwise."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None
        self._last = 0.0

    def __call__(self, left: int, total: int) -> None:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            if self._bar is None:
                self._bar = Progress(
                    TextColumn("draining"),
                    BarColumn(),
                    TextColumn("{task.completed}/{task.total} records"),
                    TimeElapsedColumn(),
                    console=Console(stderr=True),
                    transient=True,
                )
                self._bar.start()
                self._task = self._bar.add_task("drain", total=max(total, 1))
            self._bar.update(self._task, total=max(total, 1), completed=total - left)
            if left == 0:
                self.close()
        elif time.monotonic() - self._last >= 2.0 or left == 0:
            self._last = time.monotonic()
            _err(f"    {left} records still to copy")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _steps_text(result: dict[str, Any]) -> list[str]:
    lines = []
    for step in result.get("steps", []):
        seconds = step["result"].get("seconds")
        when = "done before" if step["resumed"] else f"{seconds:.2f} s" if seconds is not None else ""
        lines.append(f"  {step['step']:<16} {when}")
    return lines


@failover_group.command("status")
@click.argument("link", required=False)
@topology_option
@json_option
@click.option("--timeout", type=click.FloatRange(0.5, 120), default=5.0, show_default=True, help="Seconds per site.")
def status(link: str | None, topology_path: Path, as_json: bool, timeout: float) -> None:
    """Per link: DR state, link state, per-partition ends and lag, and the RPO if you fail over now."""
    from failover.status import link_status, render

    topology = _load(topology_path)
    names = [link] if link else sorted(topology.links)

    async def main() -> dict[str, Any]:
        return {"links": [await link_status(topology, name, timeout_s=timeout) for name in names]}

    _run(main, as_json, lambda r: "\n\n".join(render(s) for s in r["links"]))


@failover_group.command("promote")
@stall_option
@click.argument("link")
@click.option("--planned", "mode", flag_value="planned", help="Switchover: fence, drain to RPO 0, then promote.")
@click.option("--unplanned", "mode", flag_value="unplanned", help="The source is lost: promote now, report the RPO.")
@click.option("--timeout", type=click.FloatRange(1, 86400), default=300.0, show_default=True, help="Drain limit (s).")
@click.option("--no-auto-fence", is_flag=True, help="Do not let the mirror fence the old source when it answers again.")
@topology_option
@json_option
def promote(
    link: str,
    mode: str | None,
    timeout: float,
    no_auto_fence: bool,
    topology_path: Path,
    as_json: bool,
    stall_after: str | None,
) -> None:
    """Make LINK's target the primary (its mirror topics take writes)."""
    from failover.promote import promote as run_promote

    if mode is None:
        raise click.UsageError("say --planned (a switchover, the source answers) or --unplanned (the source is lost)")
    topology = _load(topology_path)
    progress = _Progress()

    async def main() -> dict[str, Any]:
        try:
            return await run_promote(
                topology,
                link,
                planned=mode == "planned",
                timeout_s=timeout,
                auto_fence=not no_auto_fence,
                say=_err,
                progress=progress,
                stall_after=stall_after,
            )
        finally:
            progress.close()

    def text(r: dict[str, Any]) -> str:
        rpo = r["rpo"]
        how = "exact" if rpo["exact"] else "estimate: what the mirror saw last; `reverse` measures it exactly"
        return "\n".join(
            [
                f"promoted: {r['primary']} is the primary of {r['link']} (epoch {r['epoch']}), in {r['seconds']:.2f} s",
                f"RPO: {rpo['records']} records"
                + ("" if rpo.get("bytes") is None else f", about {rpo['bytes']} bytes")
                + f" in {rpo['partitions_behind']} partitions ({how})",
                *_steps_text(r),
            ]
        )

    _run(main, as_json, text)


@failover_group.command("fence")
@click.argument("site")
@topology_option
@json_option
def fence(site: str, topology_path: Path, as_json: bool) -> None:
    """Refuse produce on SITE's topics of its links (reads go on)."""
    from failover.fence import fence as run_fence

    topology = _load(topology_path)
    _run(lambda: run_fence(topology, site, say=_err), as_json, _fence_text)


@failover_group.command("unfence")
@click.argument("site")
@topology_option
@json_option
def unfence(site: str, topology_path: Path, as_json: bool) -> None:
    """Take the fence off SITE's topics (backing out of an unfinished switchover)."""
    from failover.fence import unfence as run_unfence

    topology = _load(topology_path)
    _run(lambda: run_unfence(topology, site, say=_err), as_json, _fence_text)


def _fence_text(r: dict[str, Any]) -> str:
    lines = [f"{r['command']}d site {r['site']}:"]
    for entry in r["links"]:
        lines.append(f"  link {entry['link']}: {len(entry['changed'])} of {entry['topics']} topics changed")
    return "\n".join(lines)


@failover_group.command("reverse")
@stall_option
@click.argument("link")
@click.option(
    "--export",
    "export_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the divergence (records only the old primary has) is written before it is truncated.",
)
@topology_option
@json_option
def reverse(link: str, export_dir: Path, topology_path: Path, as_json: bool, stall_after: str | None) -> None:
    """After a promote: export the old primary's divergence, truncate it to the cut, mirror back to it."""
    from failover.reverse import reverse as run_reverse

    topology = _load(topology_path)

    def text(r: dict[str, Any]) -> str:
        d = r["divergence"]
        return "\n".join(
            [
                f"reversed: {r['reverse_link']} now mirrors the primary back (epoch {r['epoch']})",
                f"divergence: {d['records']} records ({d['bytes']} bytes) in {d['partitions']} partitions",
                f"  exported to {d['dir']}",
                *_steps_text(r),
            ]
        )

    _run(
        lambda: run_reverse(topology, link, export_root=export_dir.absolute(), say=_err, stall_after=stall_after),
        as_json,
        text,
    )


@failover_group.command("failback")
@stall_option
@click.argument("link")
@click.option("--timeout", type=click.FloatRange(1, 86400), default=300.0, show_default=True, help="Drain limit (s).")
@topology_option
@json_option
def failback(link: str, timeout: float, topology_path: Path, as_json: bool, stall_after: str | None) -> None:
    """Once reversed and caught up: switch back to LINK's original source and restore the link."""
    from failover.failback import failback as run_failback

    topology = _load(topology_path)
    progress = _Progress()

    async def main() -> dict[str, Any]:
        try:
            return await run_failback(
                topology, link, timeout_s=timeout, say=_err, progress=progress, stall_after=stall_after
            )
        finally:
            progress.close()

    def text(r: dict[str, Any]) -> str:
        return "\n".join(
            [f"failed back: {r['primary']} is the primary of {r['link']} again (epoch {r['epoch']})", *_steps_text(r)]
        )

    _run(main, as_json, text)


@failover_group.command("drill")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".strait-drill"),
    show_default=True,
    help="Where the drill's own appliance, ledger and export live (kept afterwards for inspection).",
)
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True, help="Broker nodes per site.")
@json_option
def drill(directory: Path, nodes: int, as_json: bool) -> None:
    """Lose east on a local appliance of its own, promote west, bring east back, reverse, fail back, report."""
    from chaos.drill import run_drill

    report = run_drill(directory, nodes=nodes, say=_err)
    if as_json:
        _err(report.render())
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        click.echo(report.render())
    sys.exit(0 if report.passed else 1)
