"""Failover benchmark: the RTO of a planned promote, an unplanned promote and a failback.

Run from the repository root::

    .venv/bin/python -m bench.failover_bench --out bench/results     # ~12 min on a 2-core VM
    .venv/bin/python -m bench.failover_bench --quick                 # smoke test, ~2 min

On one local appliance (``strait up --base-port 0 --nodes N``: sites east and west, a mirror
east -> west), with a topic written on the primary by an idempotent acks=all producer at
``--rate`` writes/s the whole time, each run does

1. a **planned cycle**: ``promote --planned`` (RTO: west takes writes), ``reverse``, ``failback``
   (RTO: east takes writes again);
2. an **unplanned cycle**: SIGKILL of all of east (ZooKeeper and nodes), ``promote --unplanned``
   (RTO), ``strait site revive east``, the mirror fences east, ``reverse``, ``failback`` (RTO).

The **RTO** is from the start of the command (the function ``strait failover`` calls, called
in-process) to the first produce accepted (acks=all) on *every* partition of the new primary,
probed with one small record per partition, sent again 20 ms after each refusal
(``bench._failover_clients``). Before each command the link's lag is read with
``failover.status.link_status`` (records and seconds; for an unplanned promote, just before the
kill). Each figure is the median (with min and max) of ``--runs`` runs.

Goal (the DR issue): an unplanned promote's RTO under 5 s. There is no peer broker with a
failover to compare with; the report says so and gives the ratio to the goal.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import KafkaException

from chaos.errors import ChaosError
from failover.errors import FailoverError
from failover.failback import failback
from failover.promote import promote
from failover.reverse import reverse
from failover.topology import Topology
from node.proc import ProcessError

from ._cli import fill_defaults, guarded, scratch_dir, stepper
from ._failover_appliance import (
    LINK,
    REVERSE_LINK,
    Appliance,
    appliance,
    kill_site,
    read_lag,
    reverse_topology,
    revive_site,
    strait_version,
    wait_fenced,
    wait_link_active,
)
from ._failover_clients import CLIENT_ID, Load, RtoProbe
from ._failover_report import (
    FAILBACK,
    PLANNED,
    UNPLANNED,
    Cycle,
    Results,
    Settings,
    Trial,
    machine,
    print_tables,
    write_report,
)
from ._procs import BenchError
from ._site import Case, create_topic

TOPIC = "failover"
FULL = {"runs": 5, "nodes": 3, "settle": 5.0}
QUICK = {"runs": 1, "nodes": 1, "settle": 2.0}
Step = Callable[[str], None]


class Bench:
    """The appliance, the load on it and the results of every command timed on it."""

    def __init__(self, settings: Settings, app: Appliance, load: Load, workdir: Path, step: Step) -> None:
        self.settings = settings
        self.app = app
        self.load = load
        self.workdir = workdir
        self.step = step
        self.topology: Topology = app.topology
        self.reversed = reverse_topology(app.topology)
        self.results = Results()

    # -- one command, timed ------------------------------------------------------------------------

    def timed(
        self,
        operation: str,
        cycle: str,
        run: int,
        new_primary: str,
        command: Callable[[], dict[str, Any]],
        *,
        fault: Callable[[], None] | None = None,
    ) -> None:
        """Read the lag, inject ``fault`` if any, then time ``command`` until every partition of
        ``new_primary`` takes writes; the trial goes to the results, the load to the new primary."""
        s = self.settings
        lag_topology, lag_link = (self.reversed, REVERSE_LINK) if operation == FAILBACK else (self.topology, LINK)
        probe = RtoProbe(self.app.bootstrap(new_primary), TOPIC, s.partitions, s.timeout_s)
        try:
            lag = read_lag(lag_topology, lag_link)
            if fault is not None:
                fault()
            started = time.monotonic()
            probe.start(started)
            answer = command()
            command_s = time.monotonic() - started
            probed = probe.wait(s.timeout_s)
        finally:
            probe.cancel()
        self.load.move_to(new_primary, self.app.bootstrap(new_primary))
        rpo = answer.get("rpo")
        trial = Trial(
            operation,
            cycle,
            run,
            lag,
            probed,
            command_s,
            [(str(e["step"]), float(e["result"].get("seconds", 0.0))) for e in answer.get("steps", [])],
            rpo_reported_records=None if rpo is None else int(rpo["records"]),
            lag_age_s=started - lag.read_at,
        )
        self.results.trials.append(trial)
        records = "?" if lag.records is None else f"{lag.records:,}"
        seconds = "?" if lag.seconds is None else f"{lag.seconds:.3f}"
        self.step(
            f"  {trial.label}: RTO {probed.rto_s:.2f} s (command {command_s:.2f} s); lag at the fault {records} "
            f"records, {seconds} s"
        )

    def settled(self, topology: Topology, link: str) -> None:
        """The link copies every partition, and the load has run ``--settle`` seconds on the primary."""
        wait_link_active(topology, link, self.settings.partitions, self.settings.timeout_s)
        time.sleep(self.settings.settle_s)

    # -- the commands --------------------------------------------------------------------------

    def promote(self, planned: bool) -> dict[str, Any]:
        return trio.run(
            functools.partial(promote, self.topology, LINK, planned=planned, timeout_s=self.settings.timeout_s)
        )

    def reverse(self) -> tuple[float, int]:
        """``reverse`` (the divergence exported under the scratch dir); its seconds and the records exported."""
        started = time.monotonic()
        answer = trio.run(functools.partial(reverse, self.topology, LINK, export_root=self.workdir / "export"))
        return time.monotonic() - started, int(answer["divergence"]["records"])

    def failback(self) -> dict[str, Any]:
        return trio.run(functools.partial(failback, self.topology, LINK, timeout_s=self.settings.timeout_s))

    # -- the cycles ----------------------------------------------------------------------------

    def planned_cycle(self, run: int) -> None:
        began = time.monotonic()
        self.step(f"run {run + 1}/{self.settings.runs}: planned promote -> reverse -> failback")
        self.settled(self.topology, LINK)
        self.timed(PLANNED, "planned", run, "west", lambda: self.promote(planned=True))
        reverse_s, divergence = self.reverse()
        self.settled(self.reversed, REVERSE_LINK)
        self.timed(FAILBACK, "planned", run, "east", self.failback)
        self.results.cycles.append(Cycle("planned", run, time.monotonic() - began, reverse_s, divergence))

    def unplanned_cycle(self, run: int) -> None:
        began = time.monotonic()
        self.step(f"run {run + 1}/{self.settings.runs}: lose east -> promote --unplanned -> revive, reverse, failback")
        self.settled(self.topology, LINK)
        killed = 0.0

        def lose_east() -> None:
            nonlocal killed
            killed = time.monotonic()
            kill_site(self.app, "east")

        self.timed(UNPLANNED, "unplanned", run, "west", lambda: self.promote(planned=False), fault=lose_east)
        revive_site(self.app, "east", self.settings.timeout_s)
        revived = time.monotonic()
        wait_fenced(self.topology, LINK, self.settings.timeout_s)
        fenced = time.monotonic()
        reverse_s, divergence = self.reverse()
        self.settled(self.reversed, REVERSE_LINK)
        self.timed(FAILBACK, "unplanned", run, "east", self.failback)
        self.results.cycles.append(
            Cycle(
                "unplanned",
                run,
                time.monotonic() - began,
                reverse_s,
                divergence,
                revive_s=revived - killed,
                fence_wait_s=fenced - revived,
            )
        )


def run(settings: Settings, step: Step) -> tuple[Results, dict[str, Any], float]:
    """Every run on one appliance; returns the results, the machine and the seconds taken. A command
    that fails ends the runs (``results.failure`` says which and why); what was measured is kept."""
    t0 = time.perf_counter()
    loadavg_start = os.getloadavg()
    with ExitStack() as stack:
        workdir = stack.enter_context(scratch_dir(settings.base_dir, "strait-failover-bench-"))
        step(f"starting a local appliance (strait up, {settings.nodes} node(s) per site)")
        app = stack.enter_context(appliance(workdir / "appliance", settings.nodes, settings.timeout_s))
        info = machine(workdir, strait_version())
        topic = Case(
            TOPIC,
            TOPIC,
            settings.replication,
            "all",
            idempotent=True,
            goal=False,
            topic_config=(("min.insync.replicas", str(settings.min_insync)),),
        )
        create_topic(app.bootstrap("east"), TOPIC, settings.partitions, topic, settings.timeout_s, client_id=CLIENT_ID)
        load = Load(TOPIC, settings.rate)
        stack.callback(load.stop)
        load.move_to("east", app.bootstrap("east"))
        bench = Bench(settings, app, load, workdir, step)
        try:
            for r in range(settings.runs):
                bench.planned_cycle(r)
                bench.unplanned_cycle(r)
        except (BenchError, FailoverError, ChaosError, ProcessError, KafkaException) as exc:
            bench.results.failure = f"{type(exc).__name__}: {exc}"
            step(f"stopped: {bench.results.failure}")
        load.stop()
        bench.results.load = load.periods
        step("stopping the appliance")
    bench.results.loadavg_start, bench.results.loadavg_end = loadavg_start, os.getloadavg()
    return bench.results, info, time.perf_counter() - t0


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.failover_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, help="runs of each cycle, median reported (default 5; --quick 1)")
    p.add_argument("--nodes", type=int, help="strait nodes per site (default 3; --quick 1)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    p.add_argument("--rate", type=float, default=1000.0, help="writes/s of the load on the primary (default 1000)")
    p.add_argument(
        "--settle", type=float, help="seconds of load on the primary before each command (default 5; --quick 2)"
    )
    p.add_argument("--timeout", type=float, default=120.0, help="deadline in s of each start, command, wait (120)")
    p.add_argument("--out", type=Path, help="write failover-<date>.md and .json here (e.g. bench/results)")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="the appliance goes under this")
    p.add_argument("--note", help="a line for the report, e.g. what else was running on the machine")
    p.add_argument("--quick", action="store_true", help="1 run of each cycle, 1 node per site: a smoke test")
    args = p.parse_args(argv)
    fill_defaults(args, QUICK if args.quick else FULL)
    if min(args.runs, args.partitions) < 1 or not 1 <= args.nodes <= 9:
        p.error("--runs and --partitions must be positive, --nodes from 1 to 9")
    if min(args.rate, args.timeout) <= 0 or args.settle < 0:
        p.error("--rate and --timeout must be positive, --settle not negative")
    return Settings(
        runs=args.runs,
        nodes=args.nodes,
        partitions=args.partitions,
        rate=args.rate,
        settle_s=args.settle,
        timeout_s=args.timeout,
        out=args.out,
        base_dir=args.dir,
        note=args.note,
        quick=args.quick,
        argv=tuple(sys.argv[1:] if argv is None else argv),
    )


def measure_and_report(settings: Settings, step: Step) -> int:
    """Every run (:func:`run`), then the tables and, with ``--out``, the report; 1 if the runs stopped early."""
    started = datetime.datetime.now().astimezone()
    results, info, elapsed = run(settings, step)
    print_tables(results)
    if settings.out is not None:
        md_path, json_path = write_report(settings, results, info, started, elapsed, TOPIC)
        print(f"\nwrote {md_path} and {json_path}")
    return 1 if results.failure else 0


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    step = stepper(time.perf_counter())
    return guarded(lambda: measure_and_report(settings, step), started="process")


if __name__ == "__main__":
    sys.exit(main())
