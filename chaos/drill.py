"""``strait failover drill``: the whole DR story on a local appliance of its own, with a verdict.

On a fresh ``strait up`` in ``DIR/appliance`` (sites east and west, the link east-to-west):

1. a workload: an idempotent acks=all producer writes to ``drill`` on east, every write in a
   ledger (``DIR/ledger.jsonl``); a consumer group reads some and commits;
2. **east is lost**: SIGKILL of its ZooKeeper and every node, the producer still pointed at it;
3. **promote west** (``--unplanned``); the RTO is the time from the command's start to the
   first produce accepted on *every* partition of west;
4. the group resumes on west where it committed on east; a producer writes to west;
5. **east comes back** on its data (``strait site revive``); the mirror fences it, while its
   old producer may still write there (those writes end up in the divergence);
6. **reverse** (export the divergence, truncate east, mirror west -> east) and **failback**.

The report holds the RTO; the RPO the promote reported and the one measured from the ledger
(acknowledged writes that west did not have); the divergence exported; and the checks that
must all hold for the drill to pass: every acknowledged write is on the final logs at its
offset or in the export, the export holds only records east had beyond the cut, the reported
RPO is a lower bound of the measured one, the group resumed without skipping, and both sites
end with identical records at identical offsets.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from failover.failback import failback
from failover.promote import promote
from failover.reverse import reverse
from failover.status import link_status
from failover.topology import Topology, load_topology
from node.client import AdminClient
from node.proc import Child, Deadline, spawn, wait_ready_file, wait_until

from .errors import ChaosError
from .ledger import CheckResult, Ledger, check
from .nemesis import kill_9_pid
from .workload import ProducerWorkload, read_back

LINK = "east-to-west"
TOPIC = "drill"
GROUP = "drill-readers"
PARTITIONS = 3
QUIET = {"log_level": 0}  # librdkafka's own lines about the lost site would drown the drill's report
Say = Callable[[str], None]


@dataclass
class DrillReport:
    directory: str
    rto_promote_s: float = -1.0
    promote_s: float = -1.0
    reverse_s: float = -1.0
    failback_s: float = -1.0
    lag_at_fault_records: int = -1
    rpo_reported_records: int = -1
    rpo_measured_records: int = -1
    divergence_records: int = -1
    divergence_dir: str = ""
    acknowledged: int = 0
    checks: dict[str, bool] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values()) and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}

    def render(self) -> str:
        lines = [
            f"DR drill in {self.directory}: {'PASSED' if self.passed else 'FAILED'}",
            f"  RTO (promote -> every partition of west takes writes)  {self.rto_promote_s:.2f} s",
            f"  promote {self.promote_s:.2f} s, reverse {self.reverse_s:.2f} s, failback {self.failback_s:.2f} s",
            f"  lag when east was lost                {self.lag_at_fault_records} records",
            f"  RPO reported by the promote           {self.rpo_reported_records} records",
            f"  RPO measured (acked, not on west)     {self.rpo_measured_records} records",
            f"  divergence exported                   {self.divergence_records} records in {self.divergence_dir}",
            f"  acknowledged writes                   {self.acknowledged}",
        ]
        for name, ok in self.checks.items():
            lines.append(f"  [{'ok' if ok else 'FAILED'}] {name}")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def run_drill(
    directory: Path, *, nodes: int = 3, writes: int = 1500, rate: float = 500.0, say: Say = print
) -> DrillReport:
    """Run the drill in ``directory`` (created; an appliance already there is reused) and
    return its report. Every process it starts is stopped before it returns.

    Raises:
        ChaosError: the appliance did not start (the log is named).
    """
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    report = DrillReport(str(directory))
    up = _start_appliance(directory, nodes, say)
    try:
        topology = load_topology(directory / "appliance" / "appliance.json")
        _drill(topology, directory, report, writes, rate, say)
    except (ChaosError, KafkaException, OSError, subprocess.SubprocessError) as exc:
        report.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        say("stopping the appliance ...")
        up.stop(120)
    return report


def _start_appliance(directory: Path, nodes: int, say: Say) -> Child:
    say(f"starting a local appliance in {directory / 'appliance'} ...")
    argv = [sys.executable, "-m", "strait.cli", "up", "--dir", str(directory / "appliance"), "--base-port", "0"]
    up = spawn([*argv, "--nodes", str(nodes)], directory / "up.log", name="strait up")
    try:
        wait_ready_file(up, directory / "appliance" / "appliance.json", Deadline(180, "strait up to be ready"))
    except BaseException:
        up.stop(30)
        raise ChaosError(f"the appliance did not start; see {directory / 'up.log'}") from None
    return up


def _drill(topology: Topology, directory: Path, report: DrillReport, writes: int, rate: float, say: Say) -> None:
    east, west = topology.site("east").bootstrap, topology.site("west").bootstrap
    trio.run(_create_topic, east)
    with Ledger(directory / "ledger.jsonl") as ledger:
        say(f"writing to {TOPIC} on east ({rate:g}/s) and reading it as group {GROUP} ...")
        on_east = ProducerWorkload(east, TOPIC, ledger, rate=rate, config=QUIET).start()
        try:
            on_east.wait_for_acks(writes, timeout=120)
            committed_east = _consume_and_commit(east, writes // 3)
            time.sleep(6)  # one group offset sync pass (every 5 s) carries the commit to west
            status = trio.run(lambda: link_status(topology, LINK))
            report.lag_at_fault_records = int(status["rpo"]["records"])

            say("losing east: SIGKILL of its ZooKeeper and every node ...")
            _kill_site(topology, directory, "east")

            say("promoting west (--unplanned) ...")
            started = time.monotonic()
            promoted = trio.run(lambda: promote(topology, LINK, planned=False, say=say))
            report.promote_s = time.monotonic() - started
            report.rpo_reported_records = int(promoted["rpo"]["records"])
            _first_write_everywhere(west)
            report.rto_promote_s = time.monotonic() - started
            say(f"west took writes on every partition {report.rto_promote_s:.2f} s after the promote started")

            resumed = _first_offsets(west)
            expected = {p: max(0, o) for p, o in committed_east.items()}  # never committed: from the start
            report.checks["the group resumed on west where it committed on east"] = resumed == expected
            with ProducerWorkload(west, TOPIC, ledger, rate=rate, config=QUIET) as on_west:
                on_west.wait_for_acks(ledger.acked + writes // 3, timeout=120)

            say("bringing east back (its producer still points at it) ...")
            _revive(directory, "east")
            wait_until(lambda: _fenced(topology), Deadline(120, "the mirror to fence east"))
        finally:
            on_east.stop(timeout=30)
        east_before = {(r.partition, r.offset): r.value for r in read_back(east, TOPIC, timeout=60)}

        say("reverse: exporting east's divergence and mirroring west back to it ...")
        started = time.monotonic()
        reversed_ = trio.run(lambda: reverse(topology, LINK, export_root=directory / "export", say=say))
        report.reverse_s = time.monotonic() - started
        report.divergence_records = int(reversed_["divergence"]["records"])
        report.divergence_dir = str(reversed_["divergence"]["dir"])
        exported = _exported(Path(report.divergence_dir))

        on_west_log = check(ledger, read_back(west, TOPIC, timeout=60))
        report.rpo_measured_records = len(on_west_log.lost)
        report.acknowledged = on_west_log.acknowledged
        report.checks.update(divergence_checks(on_west_log, exported, east_before, report.rpo_reported_records))

        committed_west = _consume_and_commit(west, writes // 3)
        wait_until(
            lambda: len(read_back(east, TOPIC, timeout=30)) == len(read_back(west, TOPIC, timeout=30)),
            Deadline(120, "east to mirror west"),
        )
        say("failing back to east ...")
        started = time.monotonic()
        trio.run(lambda: failback(topology, LINK, say=say))
        report.failback_s = time.monotonic() - started
        east_log = sorted((r.partition, r.offset, r.value) for r in read_back(east, TOPIC, timeout=60))
        west_log = sorted((r.partition, r.offset, r.value) for r in read_back(west, TOPIC, timeout=60))
        report.checks["east and west hold identical records at identical offsets"] = east_log == west_log
        report.checks["the group resumes on east where it was on west"] = _committed(east) == committed_west


async def _create_topic(bootstrap: str) -> None:
    async with await AdminClient.connect(bootstrap) as admin:
        await admin.create_topic(TOPIC, PARTITIONS)


def divergence_checks(
    on_west: CheckResult,
    exported: set[tuple[int, int, bytes]],
    east_before: Mapping[tuple[int, int], bytes],
    rpo_reported: int,
) -> dict[str, bool]:
    """The drill's verdicts on what the failover kept: ``on_west`` is the ledger checked against
    west's log after the promote, ``exported`` the divergence file's (partition, offset, value)s,
    ``east_before`` east's records (by partition and offset) just before the reverse."""
    return {
        "no acknowledged write moved, duplicated or overwritten on west": not (
            on_west.moved or on_west.duplicates or on_west.conflicts
        ),
        "every acknowledged write is on west or in the export": all(
            (a.position.partition, a.position.offset, a.value) in exported for a in on_west.lost
        ),
        "the export holds only records east had beyond the cut": all(
            east_before.get((p, o)) == v for p, o, v in exported
        ),
        "the RPO reported at the promote is a lower bound of the measured one": rpo_reported <= len(on_west.lost),
    }


def _kill_site(topology: Topology, directory: Path, site: str) -> None:
    described = json.loads((directory / "appliance" / site / "site.json").read_text())
    kill_9_pid(int(described["zookeeper_pid"]), f"{site} ZooKeeper")
    for node in described["nodes"]:
        kill_9_pid(int(node["pid"]), f"{site} node {node['broker_id']}")


def _revive(directory: Path, site: str) -> None:
    argv = [sys.executable, "-m", "strait.cli", "site", "revive", site, "--dir", str(directory / "appliance")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0:
        raise ChaosError(f"strait site revive {site} failed ({done.returncode}): {done.stderr.strip()}")


def _fenced(topology: Topology) -> bool:
    status = trio.run(lambda: link_status(topology, LINK))
    return (status["mirror"].get("fence") or {}).get("state") == "fenced"


def _first_write_everywhere(bootstrap: str, timeout: float = 60.0) -> None:
    """Produce one record to each partition until every one is accepted (acks=all)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 2000, "retries": 0, **QUIET}
    )
    pending = set(range(PARTITIONS))
    accepted: set[int] = set()

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            accepted.add(msg.partition())

    deadline = time.monotonic() + timeout
    while pending:
        if time.monotonic() > deadline:
            raise ChaosError(f"partitions {sorted(pending)} of {TOPIC} took no write within {timeout:g} s")
        for p in sorted(pending):
            # Unique values: the ledger check reads a value found at two offsets as a duplicate.
            probe = f"rto-probe-{p}-{time.monotonic_ns()}".encode()
            producer.produce(TOPIC, value=probe, partition=p, on_delivery=delivered)
        producer.flush(5)
        pending -= accepted
        if pending:
            time.sleep(0.05)


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def _consume_and_commit(bootstrap: str, count: int) -> dict[int, int]:
    consumer = _consumer(bootstrap)
    try:
        consumer.subscribe([TOPIC])
        seen = 0
        deadline = time.monotonic() + 120
        while seen < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def _committed(bootstrap: str) -> dict[int, int]:
    consumer = _consumer(bootstrap)
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def _first_offsets(bootstrap: str) -> dict[int, int]:
    """Where the group starts reading on this site: the offset of its first record per partition."""
    consumer = _consumer(bootstrap)
    try:
        consumer.subscribe([TOPIC])
        first: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                partition, offset = message.partition(), message.offset()
                if partition is not None and offset is not None:
                    first.setdefault(partition, offset)
        return first
    finally:
        consumer.close()


def _exported(directory: Path) -> set[tuple[int, int, bytes]]:
    out = set()
    data = directory / "divergence.jsonl"
    for line in data.read_text().splitlines():
        entry = json.loads(line)
        raw = str(entry["value"])
        value = base64.b64decode(raw) if entry["value_encoding"] == "base64" else raw.encode()
        out.add((int(entry["partition"]), int(entry["offset"]), value))
    return out
