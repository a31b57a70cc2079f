"""The failover benchmark's measurements, goal, tables and report (``bench/results/failover-<date>.md``, ``.json``)."""

from __future__ import annotations

import datetime
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka

from ._failover_appliance import Lag
from ._failover_clients import PROBE_SETTINGS, RETRY_S, LoadPeriod, Probed
from ._report import (
    command_line,
    dist_version,
    git_commit,
    git_dirty,
    machine_info,
    markdown_table,
    print_table,
    report_head,
    report_sections,
    result_stem,
    run_fields,
    settings_json,
    site_machine_lines,
    verdict_style,
    verdict_word,
    wide_console,
    write_json,
    write_markdown,
)

PLANNED, UNPLANNED, FAILBACK = "planned promote", "unplanned promote", "failback"
GOAL_RTO_S = 5.0  # the goal: an unplanned promote, from the command to every partition taking writes
NO_PEER = (
    "no peer comparison: no broker that this benchmark can run here has a failover command to measure "
    "(tansu, the peer of the node and replication benchmarks, has no replication between sites), so the "
    f"figures stand against the issue's {GOAL_RTO_S:g} s goal only"
)


@dataclass(frozen=True)
class Settings:
    runs: int
    nodes: int
    partitions: int
    rate: float
    settle_s: float
    timeout_s: float
    out: Path | None
    base_dir: Path
    note: str | None
    quick: bool
    argv: tuple[str, ...]

    @property
    def replication(self) -> int:
        return min(3, self.nodes)

    @property
    def min_insync(self) -> int:
        return min(2, self.nodes)


@dataclass
class Trial:
    """One timed failover command: the lag when it started, and when every partition took writes again."""

    operation: str  # PLANNED, UNPLANNED or FAILBACK
    cycle: str  # the cycle it is part of: "planned" or "unplanned"
    run: int
    lag: Lag  # read just before the command (before the kill, for an unplanned promote)
    probed: Probed
    command_s: float  # the command's own duration (the function returning)
    steps: list[tuple[str, float]]  # the command's steps, in order, and their seconds
    rpo_reported_records: int | None = None  # a promote's RPO (planned: exact; unplanned: its estimate)
    lag_age_s: float = 0.0  # from the lag's reading to the command's start (the kill, for an unplanned promote)

    @property
    def label(self) -> str:
        return f"failback (after the {self.cycle} promote)" if self.operation == FAILBACK else self.operation

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "cycle": self.cycle,
            "run": self.run,
            "rto_s": self.probed.rto_s,
            "first_partition_s": self.probed.first_s,
            "command_s": self.command_s,
            "lag": self.lag.to_json(),
            "lag_age_s": round(self.lag_age_s, 3),
            "rpo_reported_records": self.rpo_reported_records,
            "probe": asdict(self.probed),
            "steps": [{"step": name, "seconds": s} for name, s in self.steps],
        }


@dataclass
class Cycle:
    """One cycle's other figures: reverse, and for an unplanned one, bringing east back."""

    kind: str  # "planned" or "unplanned"
    run: int
    seconds: float
    reverse_s: float
    divergence_records: int
    revive_s: float | None = None  # the kill -> `strait site revive` done
    fence_wait_s: float | None = None  # revived -> the mirror reports east fenced

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Results:
    trials: list[Trial] = field(default_factory=list)
    cycles: list[Cycle] = field(default_factory=list)
    load: list[LoadPeriod] = field(default_factory=list)
    failure: str | None = None  # what stopped the runs early
    loadavg_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    loadavg_end: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def groups(self) -> list[tuple[str, list[Trial]]]:
        """(label, trials) for each operation measured, in a fixed order."""
        order = [(PLANNED, "planned"), (UNPLANNED, "unplanned"), (FAILBACK, "planned"), (FAILBACK, "unplanned")]
        out = []
        for operation, cycle in order:
            trials = [t for t in self.trials if t.operation == operation and t.cycle == cycle]
            if trials:
                out.append((trials[0].label, trials))
        return out


# -- figures ---------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary(trials: list[Trial]) -> dict[str, Any]:
    """Medians (and min, max) of one operation's trials, for the JSON and the tables."""
    rto = [t.probed.rto_s for t in trials]
    lags = [t.lag.records for t in trials if t.lag.records is not None]
    lag_s = [t.lag.seconds for t in trials if t.lag.seconds is not None]
    return {
        "runs": len(trials),
        "rto_s": {"median": _median(rto), "min": min(rto), "max": max(rto)},
        "command_s": _median([t.command_s for t in trials]),
        "first_partition_s": _median([t.probed.first_s for t in trials]),
        "lag_records": {"median": _median(lags), "min": min(lags), "max": max(lags)} if lags else None,
        "lag_seconds": {"median": _median(lag_s), "max": max(lag_s)} if lag_s else None,
    }


@dataclass(frozen=True)
class Verdict:
    what: str
    figures: str
    met: bool | None

    def line(self) -> str:
        return f"{self.what} {verdict_word(self.met)}: {self.figures}"


def verdict(results: Results) -> Verdict:
    """The issue's goal: an unplanned promote's RTO (median of the runs) under ``GOAL_RTO_S``."""
    trials = [t for t in results.trials if t.operation == UNPLANNED]
    what = f"unplanned promote RTO < {GOAL_RTO_S:g} s (median of runs)"
    if not trials:
        return Verdict(what, "no unplanned promote was measured", None)
    s = summary(trials)["rto_s"]
    per_run = ", ".join(f"{t.probed.rto_s:.2f}" for t in trials)
    return Verdict(
        what,
        f"{s['median']:.2f} s, {s['median'] / GOAL_RTO_S:.2f} of the goal (min {s['min']:.2f}, max {s['max']:.2f}; "
        f"per run {per_run} s)",
        s["median"] < GOAL_RTO_S,
    )


def _lag_text(lag: dict[str, Any] | None) -> str:
    return "-" if lag is None else f"{lag['median']:,.0f} ({lag['min']:,}-{lag['max']:,})"


def summary_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = [
        "operation",
        "runs",
        "RTO median s",
        "RTO min s",
        "RTO max s",
        f"RTO / {GOAL_RTO_S:g} s",
        "command median s",
        "first partition writable median s",
        "lag at the fault: records, median (min-max)",
        "lag s, median (max)",
    ]
    rows = []
    for label, trials in results.groups():
        s = summary(trials)
        lag_s = s["lag_seconds"]
        rows.append(
            [
                label,
                str(s["runs"]),
                f"{s['rto_s']['median']:.2f}",
                f"{s['rto_s']['min']:.2f}",
                f"{s['rto_s']['max']:.2f}",
                f"{s['rto_s']['median'] / GOAL_RTO_S:.2f}",
                f"{s['command_s']:.2f}",
                f"{s['first_partition_s']:.2f}",
                _lag_text(s["lag_records"]),
                "-" if lag_s is None else f"{lag_s['median']:.2f} ({lag_s['max']:.2f})",
            ]
        )
    return headers, rows


def trials_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = [
        "run",
        "operation",
        "lag records",
        "lag s",
        "RPO if failed over then",
        "RPO the promote reported",
        "RTO s",
        "first partition s",
        "command s",
        "probes sent",
        "refusals before",
    ]
    rows = []
    for t in sorted(results.trials, key=lambda t: (t.run, t.cycle != "planned")):
        rows.append(
            [
                str(t.run + 1),
                t.label,
                "-" if t.lag.records is None else f"{t.lag.records:,}",
                _s(t.lag.seconds),
                f"{t.lag.rpo_records:,}" + ("" if t.lag.rpo_exact else "~"),
                "-" if t.rpo_reported_records is None else f"{t.rpo_reported_records:,}",
                f"{t.probed.rto_s:.2f}",
                f"{t.probed.first_s:.2f}",
                f"{t.command_s:.2f}",
                str(t.probed.sent),
                ", ".join(f"{name} {n}" for name, n in sorted(t.probed.refusals.items())) or "-",
            ]
        )
    return headers, rows


def steps_table(trials: list[Trial]) -> tuple[list[str], list[list[str]]]:
    """Median seconds of each step of one operation (the steps in the order the command runs them)."""
    names: list[str] = []
    for t in trials:
        names += [name for name, _ in t.steps if name not in names]
    rows = []
    for name in names:
        seconds = [s for t in trials for n, s in t.steps if n == name]
        rows.append([name, f"{_median(seconds):.2f}", f"{min(seconds):.2f}", f"{max(seconds):.2f}"])
    return ["step", "median s", "min s", "max s"], rows


def cycles_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = ["run", "cycle", "cycle s", "reverse s", "divergence exported (records)", "revive s", "fenced after s"]
    rows = [
        [
            str(c.run + 1),
            c.kind,
            f"{c.seconds:.1f}",
            f"{c.reverse_s:.2f}",
            f"{c.divergence_records:,}",
            _s(c.revive_s),
            _s(c.fence_wait_s),
        ]
        for c in results.cycles
    ]
    return headers, rows


def load_line(settings: Settings, results: Results) -> str:
    seconds = sum(p.seconds for p in results.load)
    acked = sum(p.acked for p in results.load)
    failed = sum(p.failed for p in results.load)
    rate = acked / seconds if seconds else 0.0
    errors = sorted({e for p in results.load for e in p.errors})
    return (
        f"Load: {acked:,} writes acknowledged in {seconds:.0f} s ({rate:,.0f}/s of the {settings.rate:g}/s asked, "
        f"over {len(results.load)} periods on a primary); {failed:,} failed (refused by a fenced old primary or "
        "timed out on a lost one, before the load moved, or purged when it moved)"
        + (f"; workload errors: {'; '.join(errors[:3])}" if errors else "")
    )


# -- output ----------------------------------------------------------------------------------------


def print_tables(results: Results) -> None:
    console = wide_console(200)

    def left(i: int, h: str) -> bool:
        return i == 0 or h in ("operation", "step", "refusals before", "cycle")

    print_table(console, "RTO: the command's start -> every partition takes writes", *summary_table(results), left)
    print_table(console, "Every timed command", *trials_table(results), left)
    for label, trials in results.groups():
        print_table(console, f"{label}: where the time goes", *steps_table(trials), left)
    print_table(console, "Cycles", *cycles_table(results), left)
    found = verdict(results)
    console.print(found.line(), style=verdict_style(found.met))
    console.print(NO_PEER)
    if results.failure:
        console.print(f"the runs stopped early: {results.failure}", style="red")


def machine(workdir: Path, strait: str) -> dict[str, Any]:
    return machine_info(workdir) | {
        "software": {
            "confluent_kafka": dist_version("confluent-kafka"),
            "librdkafka": confluent_kafka.libversion()[0],
            "strait_version": strait,
            "git_commit": git_commit(),
            "git_dirty": git_dirty(),
        }
    }


def settings_lines(settings: Settings, topic: str) -> list[str]:
    n = settings.nodes
    return [
        f"- Appliance: `strait up --base-port 0 --nodes {n}` (`python -m strait.cli`, the benchmark's "
        f"interpreter and code): sites `east` and `west` of {n} strait node{'s' if n > 1 else ''} each, each site "
        "with its own ZooKeeper, and a mirror process running the link `east-to-west` (offset-preserving, every "
        "topic and group), all on 127.0.0.1, in a scratch directory; one appliance for the whole run",
        f"- Topic `{topic}`: {settings.partitions} partitions, replication factor {settings.replication}, "
        f"`min.insync.replicas={settings.min_insync}`, made on east with CreateTopics and mirrored to west by the link",
        f"- Load: `chaos.workload.ProducerWorkload` (confluent-kafka, idempotent, acks=all) at {settings.rate:g} "
        "writes/s to the primary, in the benchmark process; moved to the new primary as soon as every partition "
        f"took a probe there (the old one stopped, its in-flight writes given 1 s)",
        f"- Before each command the link copies every partition (`link_status`: `active`) and the load has run "
        f"{settings.settle_s:g} s on the primary; then the **lag at the fault** is read with "
        "`failover.status.link_status` (what `strait failover status` shows): records = the sum over partitions "
        "of the source's high watermark minus the mirrored end; seconds = the mirror's lag, its largest partition; "
        "*RPO if failed over then* = its exact count of those records (`~`: not exact). For a failback it is the "
        "lag of the reverse link (`east-to-west-reverse`, west -> east)",
        f"- Each run: a **planned cycle** (`promote --planned` -> `reverse` -> `failback`), then an **unplanned "
        "cycle** (SIGKILL of east's ZooKeeper and nodes by the pids in its `site.json` -> `promote --unplanned` -> "
        "`strait site revive east` -> wait until the mirror fenced east -> `reverse` -> `failback`); "
        f"{settings.runs} run(s). The commands are the functions `strait failover` calls "
        "(`failover.promote.promote`, `failover.reverse.reverse`, `failover.failback.failback`), called in the "
        "benchmark process with the appliance's `appliance.json` as the topology",
        "- **RTO**: from the call of the command's function to the moment the *last* partition of the new primary "
        "accepted its first probe record (acks=all). The probe producer is connected before the command starts and "
        f"keeps one record in flight per partition, sent again {RETRY_S * 1e3:.0f} ms after each refusal, from the "
        f"command's start on: `{json.dumps(PROBE_SETTINGS)}`. *first partition*: the same for the first partition "
        "to take writes; *command*: the function's own duration",
        f"- Goal (the DR issue): an unplanned promote's RTO under {GOAL_RTO_S:g} s. Planned promote and failback "
        "have no goal: they wait for the mirror to drain (RPO 0), so their time grows with the lag",
    ]


def write_report(
    settings: Settings,
    results: Results,
    info: dict[str, Any],
    started: datetime.datetime,
    elapsed: float,
    topic: str,
) -> tuple[Path, Path]:
    """Write ``failover-<date>.md`` and ``.json`` to ``settings.out``; returns their paths."""
    assert settings.out is not None
    stem = result_stem(settings.out, "failover", started)
    found = verdict(results)
    data = run_fields(started, elapsed, command_line("bench.failover_bench", settings.argv)) | {
        "note": settings.note,
        "settings": settings_json(settings),
        "machine": info,
        "loadavg_start": results.loadavg_start,
        "loadavg_end": results.loadavg_end,
        "goal": {"unplanned_rto_s": GOAL_RTO_S, "verdict": asdict(found), "peer": NO_PEER},
        "failure": results.failure,
        "summary": {label: summary(trials) for label, trials in results.groups()},
        "trials": [t.to_json() for t in results.trials],
        "cycles": [c.to_json() for c in results.cycles],
        "load": [p.to_json() for p in results.load],
    }
    json_path = stem.with_suffix(".json")
    write_json(json_path, data)
    sw = info["software"]
    dirty = " (with uncommitted changes)" if sw["git_dirty"] else ""
    md = [
        *report_head(
            f"# Failover benchmark (RTO of promote and failback on a local appliance), {started.date().isoformat()}",
            data,
            json_path,
            measures="Settings, the goal and how to read the figures: [bench/FAILOVER.md](../FAILOVER.md); the "
            "other benchmarks",
        ),
        "",
        *([f"**Note:** {settings.note}", ""] if settings.note else []),
        f"Load average {results.loadavg_start[0]:.2f} when it started and {results.loadavg_end[0]:.2f} when it ended.",
        *report_sections(
            [*site_machine_lines(info), f"- strait: `{sw['strait_version']}`, commit `{sw['git_commit']}`{dirty}"],
            settings_lines(settings, topic),
            [found.line(), NO_PEER, *([f"**the runs stopped early**: {results.failure}"] if results.failure else [])],
        ),
        "### RTO",
        "",
        markdown_table(*summary_table(results)),
        "",
        load_line(settings, results),
        "",
        "### Every timed command",
        "",
        markdown_table(*trials_table(results)),
        "",
        "### Where the time goes",
        "",
        "The steps each command recorded in its journal, and their seconds (median over the runs). The RTO ends "
        "within the last step that changes the new primary's topics (`unmirror-target`, `unmirror-old`).",
        "",
    ]
    for label, trials in results.groups():
        md += [f"**{label}**", "", markdown_table(*steps_table(trials)), ""]
    md += ["### Cycles", "", markdown_table(*cycles_table(results)), ""]
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path
