"""The scenarios ``strait chaos run`` knows, and the matrices that group them.

A :class:`Scenario` is a topology (nodes per site, node properties), the workloads (the
producer's guarantees, how the group commits) and the faults its schedule draws from. Scenarios
whose ``expect`` names an anomaly are **positive controls**: configurations the docs warn
against (acks=1, unclean leader election, committing before processing), run to prove the
checkers fire. They pass only when that anomaly is found, and the ``short`` and ``full``
matrices (what must pass) leave them out; ``controls`` runs them.

- ``short``: every fault once, grouped into a few scenarios on one 3-node-per-site appliance
  each (CI runs it: about 10 minutes on 2 cores);
- ``full``: every fault on its own, on 3- and 4-node sites, each run with several seeds (on
  demand; ``--duration`` stretches each scenario into a soak).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = ["MATRICES", "SCENARIOS", "Scenario", "ScheduledFault", "matrix", "scenario_seed", "schedule"]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    faults: tuple[str, ...]
    expect: str = "pass"  # or the anomaly name a positive control must produce
    nodes: int = 3
    properties: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = True
    acks: str = "all"
    group_commit: Literal["after", "before"] = "after"  # "before": commit before processing (a positive control)
    group_restart_every: float | None = None
    duration: float = 40.0  # seconds of faults (after a warm-up), unless --duration says otherwise
    hold: tuple[float, float] = (3.0, 6.0)  # how long each fault stays, drawn from the seed
    quiet: tuple[float, float] = (3.0, 5.0)  # healthy time between faults
    site_loss: bool = False  # ends with the loss of east and an unplanned promote of west
    disks: bool = False  # each source node's second log dir on a loop-mounted XFS image (needs root, xfsprogs)
    plant: str | None = None  # a planted defect of a positive control (see chaos.runner.PLANTS)
    transactions: bool = False  # also a consume-transform-produce loop in transactions (workloads.TransactionalLoop)
    output_isolation: str = "read_committed"  # how the transactional output is read at the end

    @property
    def control(self) -> bool:
        return self.expect != "pass"

    def with_nodes(self, nodes: int) -> Scenario:
        return replace(self, name=f"{self.name}@{nodes}", nodes=nodes)


def _all(*scenarios: Scenario) -> dict[str, Scenario]:
    return {s.name: s for s in scenarios}


_PROCESS_KILLS = ("kill-leader", "kill-follower", "kill-controller", "kill-random", "kill-site")
_TXN_KILLS = ("kill-txn-coordinator", "kill-output-leader")
_PROCESS_PAUSES = ("pause-leader", "pause-follower", "pause-controller", "pause-random", "pause-site")
_ZOOKEEPER = ("zk-expire", "zk-loss")
_DISKS = ("disk-full", "disk-failing", "disk-readonly", "torn-tail")
_NETWORK = (
    "isolate-node",
    "wan-latency",
    "wan-bandwidth",
    "wan-blackhole",
    "wan-reset",
    "wan-packet-loss",
    "wan-slicer",
)

#: The short matrix's scenarios: every fault once.
SHORT = _all(
    Scenario(
        "kills", "kill -9 of the leader, a follower, the controller, a random node and the whole site", _PROCESS_KILLS
    ),
    Scenario(
        "pauses", "SIGSTOP of the leader, a follower, the controller, a random node and the whole site", _PROCESS_PAUSES
    ),
    Scenario("zookeeper", "a node's ZooKeeper session expires; the site's ZooKeeper dies and comes back", _ZOOKEEPER),
    Scenario("network", "one node partitioned away; WAN latency, bandwidth cap, black hole and resets", _NETWORK),
    Scenario(
        "disks",
        "a log dir fills up, fails with EIO, turns read-only (JBOD: the other dir serves); a segment's tail is torn",
        _DISKS,
        disks=True,
    ),
    Scenario(
        "site-loss",
        "east is lost whole (kill -9 of ZooKeeper and every node): unplanned promote of west, clients move, "
        "east comes back and is reversed into a mirror of west",
        (),
        site_loss=True,
        duration=10.0,
    ),
    Scenario(
        "transactions",
        "a consume-transform-produce loop in transactions, some aborted on purpose: kill -9 of its transaction "
        "coordinator and of an output partition's leader",
        _TXN_KILLS,
        transactions=True,
        duration=12.0,
    ),
)

#: Positive controls: each must make its checker fire.
CONTROLS = _all(
    Scenario(
        "control-acks1-unclean",
        "acks=1, unclean leader election, the leader killed while its followers lag: acknowledged writes are lost",
        ("lose-acked",),
        expect="lost",
        idempotent=False,
        acks="1",
        properties={
            "unclean.leader.election.enable": "true",
            "min.insync.replicas": "1",
            "replica.lag.time.max.ms": "2000",
        },
        duration=20.0,
        hold=(2.0, 2.0),
    ),
    Scenario(
        "control-commit-before-processing",
        "a consumer commits what it polled before processing it and crashes in between: records are skipped",
        (),
        expect="poll-skip",
        group_commit="before",
        group_restart_every=2.0,
        duration=15.0,
    ),
    Scenario(
        "control-retries-without-idempotence",
        "a producer without idempotence retries writes whose answers a reset connection lost: duplicates",
        ("reset-leader",),
        expect="duplicate",
        idempotent=False,
        duration=15.0,
        hold=(4.0, 6.0),
    ),
    Scenario(
        "control-truncation-under-a-group",
        "a topic's committed tail is truncated under its consumer group (what reverse does to an old primary)",
        ("truncate-tail",),
        expect="commit-regression",
        duration=8.0,
        hold=(1.0, 1.0),
        quiet=(6.0, 6.0),
    ),
    Scenario(
        "control-broker-misreports-offsets",
        "planted: every acknowledgement names the offset after the one written (a broker answering wrong offsets)",
        (),
        expect="moved",
        plant="ack-offset-skew",
        duration=5.0,
    ),
    Scenario(
        "control-failover-underreports",
        "planted: after a site loss the failover's export is recorded without its last acknowledged record",
        (),
        expect="unexported-loss",
        site_loss=True,
        plant="export-drop",
        duration=5.0,
    ),
    Scenario(
        "control-read-uncommitted",
        "the transactional output read with read_uncommitted, as the docs warn not to: aborted records are visible",
        (),
        expect="aborted-read",
        transactions=True,
        output_isolation="read_uncommitted",
        duration=5.0,
    ),
)

#: Every fault on its own (the full matrix adds topologies and seeds).
SINGLE = _all(
    *(
        Scenario(name, f"only {name}", (name,), duration=20.0, disks=name in _DISKS)
        for name in (*_PROCESS_KILLS, *_PROCESS_PAUSES, *_ZOOKEEPER, *_NETWORK, *_DISKS)
    )
)

SCENARIOS: dict[str, Scenario] = {**SHORT, **SINGLE, **CONTROLS}

MATRICES: dict[str, tuple[str, ...]] = {
    "short": tuple(SHORT),
    "full": (*SINGLE, "site-loss", "transactions"),
    "controls": tuple(CONTROLS),
}

#: The full matrix's topologies (nodes per site) and how many seeds each scenario runs with.
FULL_TOPOLOGIES = (3, 4)
FULL_SEEDS = 2


def lookup(name: str) -> Scenario:
    """A scenario by the name a run reports: ``kill-site``, or ``kill-site@4`` (the full matrix's
    variant on 4 nodes per site). KeyError naming it when there is no such scenario."""
    base, sep, nodes = name.partition("@")
    if base not in SCENARIOS or (sep and not (nodes.isdigit() and 3 <= int(nodes) <= 9)):
        raise KeyError(name)
    return SCENARIOS[base].with_nodes(int(nodes)) if sep else SCENARIOS[base]


def matrix(name: str) -> list[tuple[Scenario, int]]:
    """The (scenario, repetition) pairs of a matrix; the repetition is folded into each run's seed."""
    if name not in MATRICES:
        raise KeyError(f"unknown matrix {name!r}; matrices are {', '.join(MATRICES)}")
    scenarios = [SCENARIOS[n] for n in MATRICES[name]]
    if name != "full":
        return [(s, 0) for s in scenarios]
    return [
        (s.with_nodes(n) if n != 3 else s, r) for s in scenarios for n in FULL_TOPOLOGIES for r in range(FULL_SEEDS)
    ]


def scenario_seed(seed: int, scenario: str, repetition: int = 0) -> int:
    """The seed of one scenario's schedule: stable across Python runs (no ``hash()``)."""
    return (seed * 1_000_003 + zlib.crc32(f"{scenario}#{repetition}".encode())) % (2**31)


@dataclass(frozen=True)
class ScheduledFault:
    fault: str
    at: float  # seconds after the warm-up
    hold: float  # how long it stays before it is healed


def schedule(scenario: Scenario, seed: int, duration: float | None = None) -> list[ScheduledFault]:
    """The faults of a run of ``scenario`` with ``seed``: each of its faults at least once, in a
    seeded order, then more drawn at random while ``duration`` lasts."""
    rng = random.Random(seed)
    total = scenario.duration if duration is None else duration
    if not scenario.faults:
        return []
    order = list(scenario.faults)
    rng.shuffle(order)
    steps: list[ScheduledFault] = []
    at = 0.0
    while order or at < total:
        name = order.pop(0) if order else rng.choice(scenario.faults)
        hold = round(rng.uniform(*scenario.hold), 2)
        if name == "zk-expire":
            hold = max(hold, 9.0)
        steps.append(ScheduledFault(name, round(at, 2), hold))
        at += hold + round(rng.uniform(*scenario.quiet), 2)
    return steps
