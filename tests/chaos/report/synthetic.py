"""A realistic chaos run made up for the report's tests: histories and a results.json, no processes.

:func:`write_run` writes two scenarios into a directory the way the runner would:

- ``kill-leader``: two producers at ``rate`` sends/s each for ``duration_s``; the leader is
  killed (sends stall until a new leader is elected, a few fail, a few time out) and later a
  follower is partitioned off; the mirror's lag is sampled every second. The lost-write checker
  found one record (its value is hostile markup, :data:`PLANTED_VALUE`) and the duplicate
  checker ``duplicates`` anomalies (more than the report shows, so it must cut visibly);
- ``site-loss``: the source site is lost and west promoted (unplanned); every checker passes
  (rpo-accuracy with it), one is skipped.

Everything is seeded, so the files are the same on every run.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NS = 1_000_000_000
START_WALL = 1_760_000_000.0
TOPIC = "orders"
PARTITIONS = 3
PLANTED_VALUE = "<script>alert('lost')</script>-producer-0-1234"
CHECKERS = (
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "moved",
    "nonmonotonic-send",
    "unseen",
    "mirror-divergence",
    "rpo-accuracy",
)


@dataclass
class Fault:
    nemesis: str
    target: str
    start_s: float
    stop_s: float | None  # None: never healed
    stall: bool = True  # sends wait for the fault to end (a leader gone), or only slow down
    resumes_s: float | None = None  # when sends succeed again, if before the stop (clients moved to another site)


@dataclass
class Run:
    """What :func:`history` generated, for the results and the assertions."""

    ops: list[dict[str, Any]] = field(default_factory=list)
    acked: list[dict[str, Any]] = field(default_factory=list)  # the ok send entries


def history(
    *,
    seed: int,
    duration_s: float,
    rate: float,
    producers: int,
    faults: list[Fault],
    promote_at: float | None = None,
    lag_site: str | None = "west",
) -> Run:
    """A history of ``producers`` sending ``rate`` records/s each through ``faults``; entries in time order."""
    rng = random.Random(seed)
    events: list[tuple[float, int, dict[str, Any]]] = []  # (seconds, tie-break, entry without index/time/mono)
    order = 0

    def add(at: float, entry: dict[str, Any]) -> None:
        nonlocal order
        events.append((at, order, entry))
        order += 1

    offsets = [0] * PARTITIONS
    for process in (f"producer-{n}" for n in range(producers)):
        at, seq = rng.uniform(0, 0.01), 0
        while at < duration_s:
            value = f"run7-{process}-{seq}"
            add(at, {"type": "invoke", "process": process, "f": "send", "topic": TOPIC, "value": value})
            latency = rng.lognormvariate(math.log(0.004), 0.45)
            kind, fields = "ok", {}
            for fault in faults:
                end = fault.resumes_s or (fault.stop_s if fault.stop_s is not None else duration_s)
                if fault.start_s <= at < end:
                    if fault.stall:
                        latency = end - at + rng.uniform(0.05, 0.4)
                        if at - fault.start_s < 0.05:
                            kind, latency = "fail", rng.uniform(0.001, 0.01)
                            fields = {"error": "NOT_LEADER_OR_FOLLOWER"}
                        elif latency > 5.0:
                            kind, latency = "info", 5.0
                            fields = {"error": "timed out after 5 s"}
                    else:
                        latency *= rng.uniform(8, 30)
            done = at + latency
            if kind == "ok":
                partition = rng.randrange(PARTITIONS)
                fields = {"partition": partition, "offset": offsets[partition]}
                offsets[partition] += 1
            add(done, {"type": kind, "process": process, "f": "send", "topic": TOPIC, "value": value, **fields})
            at += rng.expovariate(rate)
            seq += 1
    for fault in faults:
        add(
            fault.start_s,
            {"type": "info", "process": "nemesis", "f": "start", "nemesis": fault.nemesis, "target": fault.target},
        )
        if fault.stop_s is not None:
            add(
                fault.stop_s,
                {"type": "info", "process": "nemesis", "f": "stop", "nemesis": fault.nemesis, "target": fault.target},
            )
    if promote_at is not None:
        value = {"link": "east-west", "planned": False, "rpo_records": 12, "source": "east", "target": "west"}
        add(promote_at, {"type": "info", "process": "failover", "f": "promote", "value": value})
    if lag_site is not None:
        lag = 40.0
        for second in range(int(duration_s) + 1):
            faulted = any(f.start_s <= second < (f.stop_s or duration_s) for f in faults)
            lag = lag + rate * producers * 0.6 if faulted else max(5.0, lag * 0.3 + rng.uniform(10, 60))
            partitions = {f"{TOPIC}/{p}": int(lag) // PARTITIONS for p in range(PARTITIONS)}
            add(
                second + 0.5,
                {
                    "type": "info",
                    "process": "mirror-lag",
                    "f": "lag",
                    "site": lag_site,
                    "value": {"records": int(lag), "partitions": partitions},
                },
            )
    run = Run()
    for index, (at, _, entry) in enumerate(sorted(events, key=lambda e: (e[0], e[1]))):
        op = {
            "index": index,
            "type": entry.pop("type"),
            "process": entry.pop("process"),
            "f": entry.pop("f"),
            "time": START_WALL + at,
            "mono": 5 * NS + round(at * NS),
            **entry,
        }
        run.ops.append(op)
        if op["f"] == "send" and op["type"] == "ok":
            run.acked.append(op)
    return run


def write_history(path: Path, run: Run) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(op, separators=(",", ":")) + "\n" for op in run.ops), encoding="utf-8")


def write_run(directory: Path, *, rate: float = 150.0, duplicates: int = 40) -> dict[str, Any]:
    """Write both scenarios' histories and results.json into ``directory``; the results written."""
    kill = [
        Fault("kill-leader", "east node 2 (leader of orders/0, orders/1)", 18.0, 26.5),
        Fault("partition-node", "east node 3 | east nodes 1, 2", 38.0, 45.0, stall=False),
    ]
    first = history(seed=7, duration_s=60.0, rate=rate, producers=2, faults=kill)
    lost = next(op for op in first.acked if op["mono"] >= 5 * NS + 17 * NS)  # acknowledged just before the kill
    for op in first.ops:  # its invoke and its ok carry the value
        if op["f"] == "send" and op["process"] == lost["process"] and op["value"] == lost["value"]:
            op["value"] = PLANTED_VALUE
    write_history(directory / "kill-leader" / "history.jsonl", first)
    nemesis = [op for op in first.ops if op["process"] == "nemesis"]
    record = {k: lost[k] for k in ("topic", "partition", "offset", "value", "process", "index")}
    anomalies = {
        "lost-write": [
            {
                "checker": "lost-write",
                "name": "lost",
                "description": f"acknowledged at offset {lost['offset']} of {TOPIC}/{lost['partition']}"
                " and never read back by the final read",
                "records": [record],
                "near": nemesis[:2],
            }
        ],
        "duplicate": [
            {
                "checker": "duplicate",
                "name": "duplicate",
                "description": f"one value at two offsets of {TOPIC}/{op['partition']}",
                "records": [
                    {k: op[k] for k in ("topic", "partition", "offset", "value", "index")},
                    {**{k: op[k] for k in ("topic", "partition", "value")}, "offset": op["offset"] + 1},
                ],
                "near": [],  # no fault within 5 s of these
            }
            for op in first.acked[3000 : 3000 + duplicates]
        ],
    }
    second = history(
        seed=11,
        duration_s=45.0,
        rate=rate,
        producers=1,
        faults=[Fault("site-loss", "east: all 3 nodes and ZooKeeper", 15.0, 33.0, resumes_s=20.5)],
        promote_at=19.5,
    )
    write_history(directory / "site-loss" / "history.jsonl", second)
    results = {
        "format": 1,
        "command": "strait chaos run --scenario kill-leader --scenario site-loss --seed 42",
        "seed": 42,
        "started": START_WALL,
        "finished": START_WALL + 118.4,
        "verdict": "fail",
        "machine": "2 cores, Debian 12, test",
        "scenarios": [
            scenario(
                "kill-leader",
                "SIGKILL the leader of the busiest partition, restart it after 8 s; then isolate a follower",
                1234,
                61.2,
                "fail",
                {name: anomalies.get(name, []) for name in CHECKERS},
                skipped=("rpo-accuracy",),
            ),
            scenario(
                "site-loss",
                "lose the whole east site, then `strait failover promote --unplanned` to west",
                99,
                47.0,
                "pass",
                {name: [] for name in CHECKERS},
                skipped=("unseen",),
            ),
        ],
    }
    (directory / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


def scenario(
    name: str,
    description: str,
    seed: int,
    duration_s: float,
    verdict: str,
    anomalies: dict[str, list[dict[str, Any]]],
    *,
    skipped: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One scenario's entry of results.json, its checkers' verdicts following from ``anomalies``."""
    return {
        "name": name,
        "description": description,
        "seed": seed,
        "replay": f"strait chaos run --scenario {name} --seed {seed}",
        "expect": "pass",
        "verdict": verdict,
        "error": None,
        "duration_s": duration_s,
        "history": f"{name}/history.jsonl",
        "checkers": [
            {
                "name": checker,
                "description": f"the {checker} checker",
                "verdict": "skipped" if checker in skipped else ("fail" if found else "pass"),
                "checked": 0 if checker in skipped else 9000,
                "anomalies": found,
            }
            for checker, found in anomalies.items()
        ],
    }
