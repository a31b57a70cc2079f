"""The local appliance the failover benchmark works on, and what it does to it.

- :func:`appliance`: ``strait up --base-port 0`` as a process of its own (its own session, always
  stopped), ready once it has written ``appliance.json``; yields an :class:`Appliance`;
- :func:`kill_site` (SIGKILL of a site's ZooKeeper and nodes, by the pids its ``site.json``
  names, with ``chaos.nemesis.kill_9_pid``) and :func:`revive_site` (``strait site revive``);
- :func:`read_lag`: the lag of a link from ``failover.status.link_status``, the numbers
  ``strait failover status`` shows; :func:`reverse_topology` names the reverse link that
  ``reverse`` starts, so that its lag can be read the same way;
- :func:`wait_link_active` and :func:`wait_fenced`: conditions observed with a deadline.

Everything here is synchronous; the failover functions (trio) run under ``trio.run``.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from chaos.nemesis import kill_9_pid
from failover.reverse import reverse_link_name
from failover.status import link_status
from failover.topology import Link, Topology, load_topology
from mirror import MirrorAdminClient, MirrorError
from node.proc import Child, Deadline, NotReady, spawn, wait_ready_file, wait_until

from ._procs import BenchError, child_error

LINK = "east-to-west"  # the link strait up runs
REVERSE_LINK = reverse_link_name(LINK)  # the link reverse starts (west -> east)
UP_STOP_TIMEOUT_S = 120.0  # strait up stops the mirror, then each site's nodes and ZooKeeper
POLL_S = 0.5  # link_status opens a ZooKeeper session and reads both sites: not more often


def _cli(*args: str) -> list[str]:
    """``python -m strait.cli ARGS`` with this interpreter: the same code the benchmark imports."""
    return [sys.executable, "-m", "strait.cli", *args]


@dataclass
class Appliance:
    """A running ``strait up``: its directory, its process and the topology it wrote."""

    directory: Path
    child: Child
    topology: Topology

    def bootstrap(self, site: str) -> str:
        return self.topology.site(site).bootstrap

    def site_state(self, site: str) -> str:
        """``up`` or ``lost``, as ``strait up`` last wrote it to appliance.json."""
        try:
            described = json.loads((self.directory / "appliance.json").read_text())
        except (OSError, json.JSONDecodeError):
            return "unknown"
        return str(described["sites"][site]["state"])


@contextmanager
def appliance(directory: Path, nodes: int, timeout: float) -> Iterator[Appliance]:
    """``strait up --dir DIRECTORY --base-port 0 --nodes NODES``; yields once it is ready, always stops it.

    Raises:
        node.proc.ChildExited / NotReady: it exited, or was not ready within ``timeout``.
    """
    log = directory.parent / "up.log"
    child = spawn(_cli("up", "--dir", str(directory), "--base-port", "0", "--nodes", str(nodes)), log, name="strait up")
    try:
        wait_ready_file(child, directory / "appliance.json", Deadline(timeout, "strait up to write appliance.json"))
        yield Appliance(directory, child, load_topology(directory / "appliance.json"))
    finally:
        child.stop(UP_STOP_TIMEOUT_S)


def strait_version() -> str:
    done = subprocess.run(_cli("--version"), capture_output=True, text=True, timeout=60, check=False)
    return (done.stdout.strip() or done.stderr.strip() or "unknown").splitlines()[0]


# -- losing and reviving a site ----------------------------------------------------------------


def kill_site(app: Appliance, site: str) -> None:
    """SIGKILL ``site``'s ZooKeeper and every one of its nodes (a lost datacenter); returns once all died."""
    described = json.loads((app.directory / site / "site.json").read_text())
    kill_9_pid(int(described["zookeeper_pid"]), f"{site} ZooKeeper")
    for node in described["nodes"]:
        kill_9_pid(int(node["pid"]), f"{site} node {node['broker_id']}")


def revive_site(app: Appliance, site: str, timeout: float) -> None:
    """Wait until ``strait up`` reports ``site`` lost, then ``strait site revive SITE``; returns once it serves.

    Raises:
        BenchError: not reported lost, or not back, within ``timeout`` (with strait up's log tail).
    """
    try:
        wait_until(lambda: app.site_state(site) == "lost", Deadline(timeout, f"strait up to report {site} lost"))
    except NotReady as exc:
        raise child_error(app.child, str(exc)) from None
    argv = _cli("site", "revive", site, "--dir", str(app.directory), "--timeout", str(timeout))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, check=False)
    if done.returncode != 0:
        raise child_error(app.child, f"did not revive {site} (exit {done.returncode}: {done.stderr.strip()})")


# -- the link, as strait failover status sees it -------------------------------------------------


def reverse_topology(topology: Topology, name: str = LINK) -> Topology:
    """``topology`` plus the reverse link of ``name`` (target -> source, run by the same mirror)."""
    link = topology.link(name)
    back = Link(reverse_link_name(name), link.target, link.source, link.mirror_admin, link.token_file)
    return Topology(topology.sites, {**topology.links, back.name: back}, topology.origin)


@dataclass(frozen=True)
class Lag:
    """A link's lag when it was read (``link_status``): what a failover at that moment would start from."""

    records: int | None  # sum over partitions of source end - mirrored end (None: a partition unknown)
    seconds: float | None  # the mirror's lag in seconds, the largest over the partitions
    rpo_records: int  # "RPO if you fail over now": records on the source not on the target
    rpo_bytes: int
    rpo_exact: bool
    link_state: str
    read_s: float  # how long link_status took
    read_at: float  # time.monotonic() when it answered

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "seconds": self.seconds,
            "rpo_records": self.rpo_records,
            "rpo_bytes": self.rpo_bytes,
            "rpo_exact": self.rpo_exact,
            "link_state": self.link_state,
            "read_s": round(self.read_s, 3),
        }


def _status(topology: Topology, name: str) -> dict[str, Any]:
    return trio.run(functools.partial(link_status, topology, name))


def read_lag(topology: Topology, name: str) -> Lag:
    """The lag of link ``name`` now, from ``failover.status.link_status``."""
    started = time.monotonic()
    status = _status(topology, name)
    answered = time.monotonic()
    rows = status["partitions"]
    lags = [row["lag_records"] for row in rows]
    seconds = [row["lag_seconds"] for row in rows if row["lag_seconds"] is not None]
    rpo = status["rpo"]
    return Lag(
        None if None in lags or not rows else sum(lags),
        max(seconds) if seconds else None,
        int(rpo["records"]),
        int(rpo["bytes"]),
        bool(rpo["exact"]),
        str(status["link_state"]),
        answered - started,
        answered,
    )


def wait_link_active(topology: Topology, name: str, partitions: int, timeout: float) -> None:
    """Wait until link ``name`` is ``active`` and copies each of the ``partitions`` partitions.

    Raises:
        BenchError: not so within ``timeout`` (naming the link state and partition states seen last).
    """
    seen: dict[str, Any] = {}

    def active() -> bool:
        status = _status(topology, name)
        states = [row["state"] for row in status["partitions"]]
        seen.update(link=status["link_state"], partitions=states)
        return status["link_state"] == "active" and len(states) >= partitions and set(states) == {"active"}

    try:
        wait_until(active, Deadline(timeout, f"link {name} to copy every partition"), interval=POLL_S)
    except NotReady:
        raise BenchError(
            f"link {name} not copying every partition within {timeout:g} s: link state {seen.get('link')}, "
            f"partition states {seen.get('partitions')}"
        ) from None


def wait_fenced(topology: Topology, name: str, timeout: float) -> None:
    """Wait until the mirror reports the old source of link ``name`` fenced (its auto-fence after an
    unplanned promote). Raises ``BenchError`` at the deadline, with the fence state seen last."""
    mirror = MirrorAdminClient(topology.link(name).mirror_admin, timeout=10.0)
    seen: dict[str, Any] = {}

    def fenced() -> bool:
        try:
            status = mirror.link(name)
        except MirrorError as exc:
            seen["error"] = str(exc)
            return False
        seen.update(status.get("fence") or {})
        return seen.get("state") == "fenced"

    try:
        wait_until(fenced, Deadline(timeout, f"the mirror to fence the source of {name}"), interval=POLL_S)
    except NotReady:
        raise BenchError(f"the mirror did not fence the old source of {name} within {timeout:g} s: {seen}") from None
