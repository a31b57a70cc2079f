"""Runs chaos scenarios: an appliance, the workloads, a fault schedule derived from the seed, then the checkers.

One scenario, in order (every phase bounded, every fault healed whatever happens):

1. start a :class:`~chaos.appliance.ChaosAppliance` (two sites behind the fault proxy, a mirror)
   in ``DIR/<scenario>/``, create the topic ``chaos-<scenario>`` on east and wait until the mirror
   made it on west;
2. start the workloads, each recording into ``DIR/<scenario>/history.jsonl``: a producer on
   east (idempotent ``acks=all``, or what the scenario says), a consumer group, a mirror
   reader sampling west's lag, and with ``transactions`` a consume-transform-produce loop
   from the topic to its output topic (made on east only), waited for until it has committed once;
3. after a warm-up, run the **schedule**: the scenario's faults in an order and with hold and
   quiet times drawn from the scenario's seed (so ``--seed`` replays the same schedule), each
   recorded as nemesis ``start``/``stop`` entries with its target;
4. heal everything, let the producer write on a healed cluster for a while, stop it, wait for
   the mirror to catch up, drain the group (and the transactional loop) to the end, and record
   final reads of east (role primary) and west (role mirror), and the ``txn-read`` of the output;
5. stop the appliance (a node that misses its controlled-shutdown window is a finding too) and
   run the checkers on the history.

A scenario's seed is the run's seed mixed with the scenario's name and repetition, so one
``--seed`` fixes every schedule of a matrix and each scenario can be replayed alone.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import platform
import random
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from chaos.appliance import STRAIT, ChaosAppliance
from chaos.checkers import check
from chaos.errors import ChaosError
from chaos.faults import FAULTS, Fault
from chaos.history import FAILOVER, History, Op, OpType, load
from chaos.proxy import run_in_thread
from chaos.report import render
from chaos.scenarios import Scenario, ScheduledFault, scenario_seed, schedule
from chaos.sites import Sites
from chaos.workloads import (
    GroupConsumer,
    MirrorReader,
    Producer,
    TransactionalLoop,
    Workload,
    final_read,
    final_txn_read,
    output_topic,
)
from failover.errors import TopologyError
from failover.topology import load_topology
from mirror import AdminApiError, MirrorAdminClient

__all__ = ["RunResult", "check_directory", "run", "run_scenario"]

WARMUP_S = 5.0
RECOVERY_S = 5.0  # writes on the healed cluster before the producer stops
PRODUCER_STOP_S = 30.0
MIRROR_CATCH_UP_S = 90.0
DIVERGED_FOR_S = 10.0  # the mirror holds partitions diverged this long: it will not catch up by itself
DRAIN_S = 90.0
FINAL_READ_S = 90.0
TOPIC_READY_S = 60.0
SITE_LOSS_LAG_S = 3.0  # the mirror is cut off this long before the site is lost: writes only east has
SITE_LOSS_HOLD_S = 10.0  # west serves the clients alone this long before east comes back
FAILOVER_TIMEOUT_S = 300.0
PARTITIONS = 3
WRITE_RATE = 200.0  # writes per second

Say = Callable[[str], None]


#: The planted defects of positive controls: what a defect of the system under test would look like
#: in the history, made on purpose in the recording (never in the product) so the checker must fire.
PLANTS = {
    "ack-offset-skew": "every acknowledged send is recorded one offset later than the broker answered",
    "export-drop": "the failover's export is recorded without its last record that an acknowledged send wrote",
}


class PlantedHistory(History):
    """A history that records one planted defect (see :data:`PLANTS`) as it is written."""

    def __init__(self, path: Path, plant: str) -> None:
        if plant not in PLANTS:
            raise ChaosError(f"unknown planted defect {plant!r}; known: {', '.join(PLANTS)}")
        super().__init__(path)
        self.plant = plant

    def append(self, type: OpType, process: str, f: str, **fields: Any) -> Op:
        if self.plant == "ack-offset-skew" and type == "ok" and f == "send" and isinstance(fields.get("offset"), int):
            fields["offset"] += 1
        if self.plant == "export-drop" and f == "export" and fields.get("records"):
            acked = {op["value"] for op in self.ops if op["type"] == "ok" and op["f"] == "send"}
            records = list(fields["records"])
            for i in range(len(records) - 1, -1, -1):
                if records[i]["value"] in acked:
                    del records[i]
                    break
            fields["records"] = records
        return super().append(type, process, f, **fields)


@dataclass
class RunResult:
    name: str
    description: str
    seed: int
    expect: str
    replay: str
    history: str
    verdict: str = "error"
    error: str | None = None
    duration_s: float = 0.0
    checkers: list[dict[str, Any]] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # faults these sites cannot take, and why

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "replay": self.replay,
            "expect": self.expect,
            "verdict": self.verdict,
            "error": self.error,
            "duration_s": round(self.duration_s, 1),
            "history": self.history,
            "checkers": self.checkers,
            "findings": self.findings,
            "skipped_faults": self.skipped,
        }


def _verdict(expect: str, checkers: list[dict[str, Any]]) -> str:
    names = {a["name"] for c in checkers for a in c["anomalies"]}
    if expect == "pass":
        return "fail" if names else "pass"
    return "pass" if expect in names else "fail"


def evaluate(history: History, expect: str) -> tuple[str, list[dict[str, Any]]]:
    """The checkers' results on ``history`` as JSON, and the scenario's verdict."""
    results = [r.to_json() for r in check(history)]
    return _verdict(expect, results), results


def run_scenario(
    scenario: Scenario,
    directory: Path,
    seed: int,
    *,
    duration: float | None = None,
    say: Say = lambda _: None,
    replay: str = "",
    sites: Sites | None = None,
) -> RunResult:
    """Run one scenario in ``directory`` (its own), check its history, and return the result."""
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    result = RunResult(
        scenario.name,
        scenario.description,
        seed,
        scenario.expect,
        replay or f"strait chaos run --scenario {scenario.name} --seed {seed}",
        f"{directory.name}/history.jsonl",
    )
    started = time.monotonic()
    path = directory / "history.jsonl"
    history = History(path) if scenario.plant is None else PlantedHistory(path, scenario.plant)
    try:
        _run(scenario, directory, seed, duration, history, result, say, sites)
        result.verdict, result.checkers = evaluate(history, scenario.expect)
        if result.findings and scenario.expect == "pass":
            result.verdict = "fail"
    except ChaosError as exc:
        result.error = str(exc)
        result.verdict = "error"
    except Exception as exc:  # a bug of ours: keep going with the other scenarios, say what it was
        result.error = f"{type(exc).__name__}: {exc}"
        result.verdict = "error"
    finally:
        history.close()
        result.duration_s = time.monotonic() - started
    return result


def _run(
    scenario: Scenario,
    directory: Path,
    seed: int,
    duration: float | None,
    history: History,
    result: RunResult,
    say: Say,
    sites: Sites | None,
) -> None:
    topic = f"chaos-{scenario.name.replace('@', '-')}"
    steps = []
    for step in schedule(scenario, seed, duration):
        why = sites.supports(step.fault) if sites is not None else None
        if why is None:
            steps.append(step)
        elif step.fault not in {s.split(":")[0] for s in result.skipped}:
            result.skipped.append(f"{step.fault}: {why}")
            say(f"{scenario.name}: skipping {step.fault}: {why}")
    if scenario.site_loss and sites is not None and (why := sites.supports("site-loss")) is not None:
        raise ChaosError(f"{scenario.name} cannot run on these sites: {why}")
    rng = random.Random(seed ^ 0x5EED)
    with contextlib.ExitStack() as stack:
        app: Sites
        if sites is None:
            proxy = stack.enter_context(run_in_thread(api="127.0.0.1:0", seed=seed))
            app = ChaosAppliance(
                directory / "appliance",
                proxy,
                nodes=scenario.nodes,
                properties=scenario.properties,
                disks=scenario.disks,
            )
            say(f"{scenario.name}: starting two sites of {scenario.nodes} nodes and a mirror")
        else:
            app = sites
            say(f"{scenario.name}: on the sites of {app.topology_file}, link {app.link_name}")
        app.start()

        def stop_appliance() -> None:
            result.findings.extend(app.stop())

        stack.callback(stop_appliance)
        _create_topic(app, topic)
        if scenario.transactions:
            _create_topic(app, output_topic(topic), mirrored=False)  # the mirror does not copy it
        producer = Producer(
            app.source.bootstrap,
            topic,
            history,
            idempotent=scenario.idempotent,
            acks=scenario.acks,
            rate=WRITE_RATE,
        )
        group = GroupConsumer(
            app.source.bootstrap,
            [topic],
            f"chaos-group-{scenario.name}",
            history,
            commit=scenario.group_commit,
            restart_every=scenario.group_restart_every,
        )
        mirror = MirrorReader(app.source.bootstrap, app.target.bootstrap, topic, history, site=app.target.name)
        workloads: list[Workload[Any]] = [producer, group, mirror]
        txn = TransactionalLoop(app.source.bootstrap, topic, history) if scenario.transactions else None
        if txn is not None:
            workloads.append(txn)
        for workload in workloads:
            workload.start()
            stack.callback(workload.stop, 10.0)
        if txn is not None:  # its id has a coordinator before any fault looks for it
            txn.wait_for_commits(1, TOPIC_READY_S)
        say(f"{scenario.name}: workloads running; warming up {WARMUP_S:g} s")
        time.sleep(WARMUP_S)
        _run_schedule(app, topic, steps, history, rng, say, scenario.name)
        primary, secondary = app.source, app.target
        if scenario.site_loss:
            mirror.stop(10.0)
            lost_group = group
            group = _site_loss(app, topic, history, producer, group, directory, say, scenario.name)
            stack.callback(group.stop, 10.0)
            # The member on the lost site cannot close (its coordinator is gone): being abandoned
            # is what a site loss does to it, not a finding.
            workloads[workloads.index(lost_group)] = group
            primary, secondary = app.target, app.source
        say(f"{scenario.name}: healed; {RECOVERY_S:g} s of writes on the healed cluster")
        time.sleep(RECOVERY_S)
        producer.stop(PRODUCER_STOP_S)
        # After a site loss the link under test is reversed: its mirror's divergence says nothing here.
        diverged = set if scenario.site_loss else _diverged_partitions(app, topic)
        ends, behind = _wait_mirror_caught_up(
            primary.bootstrap, secondary.bootstrap, topic, say, scenario.name, diverged=diverged
        )
        if behind:
            result.findings.append(behind)
        say(f"{scenario.name}: draining the group to the end")
        group.drain({(topic, p): end for p, end in ends.items()}, DRAIN_S)
        if txn is not None:
            txn.drain({(topic, p): end for p, end in ends.items()}, DRAIN_S)
            txn.stop(10.0)
        mirror.stop(10.0)
        group.stop(10.0)
        final_read(primary.bootstrap, [topic], history, site=primary.name, role="primary", timeout=FINAL_READ_S)
        final_read(secondary.bootstrap, [topic], history, site=secondary.name, role="mirror", timeout=FINAL_READ_S)
        if txn is not None:
            final_txn_read(
                primary.bootstrap,
                topic,
                txn.output,
                txn.group,
                history,
                site=primary.name,
                isolation=scenario.output_isolation,
                timeout=FINAL_READ_S,
            )
        for workload in workloads:
            result.findings.extend(f"{type(workload).__name__}: {error}" for error in workload.errors)


def _site_loss(
    app: Sites,
    topic: str,
    history: History,
    producer: Producer,
    group: GroupConsumer,
    directory: Path,
    say: Say,
    name: str,
) -> GroupConsumer:
    """Lose east whole, promote west unplanned, move the clients, bring east back and reverse.

    Returns the consumer group that now runs on west. The history gets the nemesis entries,
    the promote (with the RPO it reported) and the divergence the reverse exported.
    """
    east, west, link = app.source, app.target, app.link_name
    target = f"all of {east.name}: its ZooKeeper and every node"
    lag: Fault | None = None
    if isinstance(app, ChaosAppliance):  # let the mirror fall behind first, so the loss costs writes
        lag = FAULTS["wan-blackhole"].make(app, topic)
        history.nemesis("start", "wan-blackhole", lag.start(random.Random(0)))
        say(f"{name}: the WAN holds every byte for {SITE_LOSS_LAG_S:g} s: the mirror falls behind")
        time.sleep(SITE_LOSS_LAG_S)
    say(f"{name}: losing {target}")
    history.nemesis("start", "site-loss", target)
    for node in east.nodes:
        node.kill()
    east.kill_zookeeper()
    if lag is not None:
        lag.heal()
        history.nemesis("stop", "wan-blackhole", "the WAN (its source is gone)")
    promoted = _failover(app, ["promote", link, "--unplanned"], directory)
    rpo = promoted.get("rpo", {})
    history.append(
        "info",
        FAILOVER,
        "promote",
        value={
            "link": link,
            "planned": False,
            "rpo_records": rpo.get("records"),
            "source": east.name,
            "target": west.name,
        },
    )
    say(f"{name}: {west.name} promoted (RPO estimate {rpo.get('records')} records); clients move to {west.name}")
    producer.repoint(west.bootstrap)
    group.stop(10.0)
    moved = GroupConsumer(west.bootstrap, [topic], group.group, history, process="group-1")
    moved.start()
    time.sleep(SITE_LOSS_HOLD_S)
    say(f"{name}: bringing {east.name} back on its data")
    east.start_zookeeper()
    for node in east.nodes:
        node.spawn()
    for node in east.nodes:
        node.wait_ready()
    history.nemesis("stop", "site-loss", target)
    export = directory / "export"
    reversed_ = _failover(app, ["reverse", link, "--export", str(export)], directory)
    records = []
    data = Path(reversed_["divergence"]["dir"]) / "divergence.jsonl"
    for line in data.read_text().splitlines():
        entry = json.loads(line)
        raw = str(entry["value"])
        value = base64.b64decode(raw).decode() if entry["value_encoding"] == "base64" else raw
        records.append(
            {"topic": entry["topic"], "partition": entry["partition"], "offset": entry["offset"], "value": value}
        )
    history.append("info", FAILOVER, "export", records=records)
    say(f"{name}: reversed; {east.name} mirrors {west.name}; {len(records)} records exported as divergence")
    return moved


def _failover(app: Sites, args: list[str], directory: Path) -> dict[str, Any]:
    """Run ``strait failover ARGS --json`` on the appliance; its JSON answer."""
    argv = [*STRAIT, "failover", *args, "--topology", str(app.topology_file), "--json"]
    with (directory / "failover.log").open("a") as log:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=log, text=True, timeout=FAILOVER_TIMEOUT_S, check=False
        )
    if done.returncode != 0:
        raise ChaosError(
            f"strait failover {' '.join(args)} exited with {done.returncode}; see {directory / 'failover.log'}"
        )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _run_schedule(
    app: Sites,
    topic: str,
    steps: list[ScheduledFault],
    history: History,
    rng: random.Random,
    say: Say,
    name: str,
) -> None:
    origin = time.monotonic()
    for index, step in enumerate(steps, start=1):
        wait = origin + step.at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        fault: Fault = FAULTS[step.fault].make(app, topic)
        say(f"{name}: fault {index}/{len(steps)}: {step.fault} for {step.hold:g} s")
        try:
            target = fault.start(rng)
        except BaseException as exc:
            history.nemesis("start", step.fault, "(failed to start)", error=str(exc))
            with contextlib.suppress(Exception):
                fault.heal()
            history.nemesis("stop", step.fault, "(failed to start)")
            if isinstance(exc, ChaosError):
                say(f"{name}: {step.fault} could not start: {exc}")
                continue
            raise
        history.nemesis("start", step.fault, target)
        try:
            time.sleep(step.hold)
        finally:
            fault.heal()
            history.nemesis("stop", step.fault, target)


def _create_topic(app: Sites, topic: str, *, mirrored: bool = True) -> None:
    """``topic`` on the source; and, when ``mirrored``, once the mirror has made it on the target."""
    admin = AdminClient({"bootstrap.servers": app.source.bootstrap})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, replication_factor=min(3, app.node_count))])
    try:
        futures[topic].result(30)
    except Exception as exc:
        raise ChaosError(f"cannot create topic {topic} on {app.source.name}: {exc}") from None
    if not mirrored:
        return
    deadline = time.monotonic() + TOPIC_READY_S
    target = AdminClient({"bootstrap.servers": app.target.bootstrap})
    while time.monotonic() < deadline:
        meta = target.list_topics(timeout=5)  # all topics: asking for one could create it
        described = meta.topics.get(topic)
        partitions = described.partitions if described is not None and described.error is None else {}
        if len(partitions) == PARTITIONS and all(p.leader >= 0 for p in partitions.values()):
            return
        time.sleep(0.5)
    raise ChaosError(f"the mirror did not create {topic} on {app.target.name} within {TOPIC_READY_S:g} s")


def _wait_mirror_caught_up(
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    say: Say,
    name: str,
    *,
    diverged: Callable[[], set[int]] = set,
    watermarks: Callable[[str, str], dict[int, int]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[int, int], str | None]:
    """The source's high watermarks once the target's equal them (bounded); they are the ends to drain to.

    ``diverged()`` names the partitions the mirror refuses to copy because the target holds records
    the source lost (an unclean election): once the same ones have stayed so for
    :data:`DIVERGED_FOR_S`, the mirror will not catch up without an operator, and the wait ends
    with that as the finding. A new leader's high watermark can trail its predecessor's for a
    moment, which the mirror also sees as divergence: hence the time it must last.
    """
    read = watermarks or _watermarks
    deadline = clock() + MIRROR_CATCH_UP_S
    source: dict[int, int] = {}
    target: dict[int, int] = {}
    stuck: set[int] = set()
    stuck_since = 0.0
    while clock() < deadline:
        try:
            source, target = read(source_bootstrap, topic), read(target_bootstrap, topic)
        except Exception:  # a site still recovering: ask again
            sleep(1)
            continue
        if source == target:
            return source, None
        now = diverged()
        if not now or now != stuck:
            stuck, stuck_since = now, clock()
        elif clock() - stuck_since >= DIVERGED_FOR_S:
            behind = (
                f"the mirror stopped copying partitions {sorted(stuck)}: the target holds records the source "
                f"lost (diverged for {DIVERGED_FOR_S:g} s; source {source}, target {target})"
            )
            say(f"{name}: {behind}")
            return source, behind
        sleep(1)
    behind = (
        f"the mirror did not catch up within {MIRROR_CATCH_UP_S:g} s of the heal (source {source}, target {target})"
    )
    say(f"{name}: {behind}")
    return source, behind


def _watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-watermarks", "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _diverged_partitions(app: Sites, topic: str) -> Callable[[], set[int]]:
    """What the mirror of ``app``'s link says: the partitions of ``topic`` it holds as diverged."""
    try:
        admin = load_topology(app.topology_file).link(app.link_name).mirror_admin
    except TopologyError:
        return set
    client = MirrorAdminClient(admin, timeout=5.0)

    def diverged() -> set[int]:
        try:
            status = client.link(app.link_name)
        except (AdminApiError, OSError):
            return set()
        partitions = status.get("topics", {}).get(topic, {}).get("partitions", [])
        return {int(p["partition"]) for p in partitions if p.get("state") == "diverged"}

    return diverged


def run(
    scenarios: Iterable[tuple[Scenario, int]],
    directory: Path,
    seed: int,
    *,
    command: str,
    duration: float | None = None,
    say: Say = lambda _: None,
    sites: Sites | None = None,
    on_result: Callable[[dict[str, Any]], None] = lambda _: None,
) -> dict[str, Any]:
    """Run ``scenarios`` (with their repetition numbers) in ``directory``; write results.json and report.html."""
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "format": 1,
        "command": command,
        "seed": seed,
        "started": time.time(),
        "finished": None,
        "verdict": "pass",
        "machine": _machine(),
        "duration": duration,
        "scenarios": [],
    }
    for scenario, repetition in scenarios:
        run_seed = scenario_seed(seed, scenario.name, repetition)
        folder = scenario.name.replace("@", "-") + (f"-{repetition}" if repetition else "")
        replay = f"strait chaos run --scenario {scenario.name} --seed {seed}"
        if repetition:
            replay += f" --repetition {repetition}"
        if duration is not None:
            replay += f" --duration {duration:g}"
        say(f"{scenario.name}: seed {run_seed}; schedule: " + _describe(schedule(scenario, run_seed, duration)))
        result = run_scenario(
            scenario, directory / folder, run_seed, duration=duration, say=say, replay=replay, sites=sites
        )
        results["scenarios"].append(result.to_json())
        on_result(result.to_json())
        say(f"{scenario.name}: {result.verdict}" + (f" ({result.error})" if result.error else ""))
        _finish(results, directory)
    _finish(results, directory)
    return results


def _finish(results: dict[str, Any], directory: Path) -> None:
    results["finished"] = time.time()
    results["verdict"] = "pass" if all(s["verdict"] == "pass" for s in results["scenarios"]) else "fail"
    (directory / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    render(directory)


def check_directory(directory: Path) -> dict[str, Any]:
    """Run the checkers again on every history of a run's ``directory``; rewrite results.json and the report."""
    path = directory / "results.json"
    try:
        results: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ChaosError(f"cannot read {path}: {exc}") from None
    for scenario in results.get("scenarios", []):
        history_path = directory / scenario["history"]
        if not history_path.exists():
            continue
        scenario["verdict"], scenario["checkers"] = evaluate(load(history_path), scenario.get("expect", "pass"))
        if scenario.get("error"):
            scenario["verdict"] = "error"
        elif scenario.get("findings") and scenario.get("expect", "pass") == "pass":
            scenario["verdict"] = "fail"
    _finish(results, directory)
    return results


def _describe(steps: list[ScheduledFault]) -> str:
    return ", ".join(f"{s.fault}@{s.at:g}s+{s.hold:g}s" for s in steps) or "no faults"


def _machine() -> str:
    return f"{platform.node()}: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
