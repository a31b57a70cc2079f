"""The scale benchmark's site: three strait nodes whose single nodes can be stopped, killed and started again.

:class:`~bench._procs.StraitSite` starts and stops a site as a whole, in a fresh ZooKeeper chroot
each time. The scale benchmark must also stop one node (SIGTERM or SIGKILL) and start it again on
the same data dirs and chroot, so :func:`scale_site` keeps each node's ``Child`` and properties;
it starts nodes with the same pieces as StraitSite (``server.properties`` from
:func:`~bench._procs.server_properties`, ``strait node start`` with a ready file, readiness as a
ready file plus a Metadata answer) and stops every node it started when its block ends, also on
errors and Ctrl-C.

Also here, everything that reads a node or the site's state for the benchmark: each node's
resident set from ``/proc`` (:func:`session_rss_bytes`), its admin API's ``/health`` and
``/v1/cluster`` (:func:`cluster_view`), the partitions' leaders from a Metadata request
(:func:`metadata_leaders`), batched topic creation (:func:`create_topics`) and the waits on
them, each with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed

from node.proc import Child, Deadline

from ._procs import (
    POLL_S,
    BenchError,
    RunningBroker,
    RunningSite,
    _await_node,
    _new_chroot,
    _spawn_node,
    _terminate_all,
    server_properties,
    stop,
    wait_for_brokers,
)

HTTP_TIMEOUT_S = 5.0
_PAGE = os.sysconf("SC_PAGE_SIZE")
T = TypeVar("T")


# -- memory --------------------------------------------------------------------------------


def session_rss_bytes(session: int) -> int:
    """The summed resident set (``/proc/<pid>/statm``, pages in RAM) of every live process of ``session``."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if int(stat[stat.rfind(")") + 2 :].split()[3]) != session:
                continue
            total += int(Path(entry.path, "statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
    return total


# -- the nodes' admin API ------------------------------------------------------------------


def admin_get(admin_url: str, route: str, timeout: float = HTTP_TIMEOUT_S) -> dict[str, Any]:
    """GET ``route`` of a node's admin API as JSON (also a 503 body, which /health sends while degraded).

    Raises ``OSError`` when the node cannot be asked."""
    try:
        with urllib.request.urlopen(f"{admin_url}{route}", timeout=timeout) as response:
            body: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            body = json.loads(exc.read() or b"{}")
    return body


def cluster_view(node: RunningBroker) -> dict[str, Any]:
    """The node's ``/v1/cluster`` (partitions, offline, under_replicated, leaders, controller)."""
    return admin_get(node.admin_url or "", "/v1/cluster")


def controller_id(nodes: Sequence[RunningBroker]) -> int | None:
    """The controller's broker id as the first node that answers ``/health`` names it; None if none does."""
    for node in nodes:
        try:
            found = admin_get(node.admin_url or "", "/health").get("controller_id")
        except OSError:
            continue
        if isinstance(found, int) and found >= 0:
            return found
    return None


def wait_for(check: Callable[[], T | None], deadline: Deadline, state: Callable[[], object]) -> T:
    """Poll ``check`` every ``POLL_S`` until it returns a value (an ``OSError`` counts as not yet);
    raises ``BenchError`` with ``state()`` once ``deadline`` passes."""
    while True:
        try:
            found = check()
        except OSError:
            found = None
        if found is not None:
            return found
        if deadline.expired():
            raise BenchError(f"{deadline.what}: not within the deadline; last state: {state()}")
        time.sleep(POLL_S)


def metadata_leaders(bootstrap: str, timeout: float) -> dict[tuple[str, int], int]:
    """(topic, partition) -> leader broker id (-1 for none) of every topic in one Metadata request.

    Raises ``KafkaException`` when no broker answers."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "strait-scale-bench-metadata"})
    metadata = admin.list_topics(timeout=timeout)
    return {(t.topic, p.id): p.leader for t in metadata.topics.values() for p in t.partitions.values()}


# -- topics --------------------------------------------------------------------------------


def create_topics(
    bootstrap: str,
    names: Sequence[str],
    partitions: int,
    replication: int,
    *,
    batch: int,
    timeout: float,
    config: Mapping[str, str] | None = None,
) -> None:
    """CreateTopics for ``names`` (each ``partitions`` x ``replication``), ``batch`` topics per request,
    one request after the other. Raises ``BenchError`` naming the first topic that failed."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "strait-scale-bench-create"})
    for start in range(0, len(names), batch):
        news = [
            NewTopic(n, num_partitions=partitions, replication_factor=replication, config=dict(config or {}))
            for n in names[start : start + batch]
        ]
        futures = admin.create_topics(news, operation_timeout=timeout, request_timeout=timeout)
        for name, future in futures.items():
            try:
                future.result(timeout=timeout)
            except KafkaException as exc:
                raise BenchError(
                    f"CreateTopics {name!r} ({partitions} partitions, RF {replication}) failed: {exc}"
                ) from exc


def settled(views: Sequence[dict[str, Any]], partitions: int) -> bool:
    """Whether every node's ``/v1/cluster`` sees exactly ``partitions`` partitions, none offline or
    under-replicated, and the nodes together lead each of them once."""
    return (
        all(v["partitions"] == partitions and v["offline"] == 0 and v["under_replicated"] == 0 for v in views)
        and sum(v["leaders"] for v in views) == partitions
    )


# -- the site ------------------------------------------------------------------------------


@dataclass
class _Node:
    broker_id: int
    workdir: Path
    properties: str
    child: Child
    ready: Path
    running: RunningBroker | None = None


@dataclass
class ScaleSite:
    """A running site whose nodes can be stopped and started again; made by :func:`scale_site`."""

    name: str
    _nodes: dict[int, _Node]
    _executable: Path
    _stack: ExitStack
    timeout_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def running(self) -> RunningSite:
        """The nodes serving now, in broker id order."""
        return RunningSite(self.name, tuple(n.running for n in self._nodes.values() if n.running is not None))

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._nodes)

    def node(self, broker_id: int) -> RunningBroker:
        found = self._nodes[broker_id].running
        if found is None:
            raise BenchError(f"node {broker_id} is not running")
        return found

    def node_rss(self) -> dict[int, int]:
        """Resident bytes of each running node (every process of its session)."""
        return {i: session_rss_bytes(n.child.pid) for i, n in self._nodes.items() if n.running is not None}

    def terminate(self, broker_id: int) -> float:
        """SIGTERM the node and wait for it to exit; returns the seconds that took. Raises
        ``BenchError`` if it outlives the deadline (it is then killed)."""
        node = self._nodes[broker_id]
        node.running = None
        start = time.perf_counter()
        node.child.signal(signal.SIGTERM)
        code = node.child.wait(self.timeout_s)
        elapsed = time.perf_counter() - start
        if code is None:
            stop(node.child)
            raise BenchError(f"node {broker_id} did not exit within {self.timeout_s} s of SIGTERM")
        return elapsed

    def kill(self, broker_id: int) -> None:
        """SIGKILL the node's whole process group and reap it."""
        node = self._nodes[broker_id]
        node.running = None
        node.child.signal(signal.SIGKILL)
        if node.child.wait(self.timeout_s) is None:
            raise BenchError(f"node {broker_id} (pid {node.child.pid}) outlived SIGKILL for {self.timeout_s} s")

    def start(self, broker_id: int) -> RunningBroker:
        """Start a stopped node again on its data dirs and chroot; returns once it serves (its ready
        file is written and a Metadata request there succeeds). It is stopped when the site's block ends."""
        node = self._nodes[broker_id]
        if node.running is not None:
            raise BenchError(f"node {broker_id} is already running")
        node.child, node.ready = _spawn_node(self._executable, node.workdir, node.properties)
        self._stack.callback(stop, node.child)
        deadline = Deadline(self.timeout_s, f"node {broker_id} to serve again")
        node.running = _await_node(node.child, node.ready, deadline, broker_id)
        return node.running


@contextmanager
def scale_site(
    executable: Path,
    zookeeper_connect: str,
    workdir: Path,
    *,
    nodes: int,
    properties: Mapping[str, str],
    timeout_s: float,
) -> Iterator[ScaleSite]:
    """Start ``nodes`` strait nodes (broker ids 1..n, two log dirs each, one fresh chroot) at once;
    yields once each is ready and a Metadata request lists all of them; stops every node it ever
    started (SIGTERM to all together, SIGKILL after a deadline) when the block ends, also on errors.

    Raises ``ChildExited`` or ``NotReady`` if a node exits or is not ready by ``timeout_s``, and
    ``BenchError`` if the nodes do not all appear in Metadata by then.
    """
    connect = zookeeper_connect + _new_chroot()
    with ExitStack() as stack:
        started: dict[int, _Node] = {}
        for broker_id in range(1, nodes + 1):
            node_dir = workdir / f"node{broker_id}"
            text = server_properties(
                broker_id=broker_id,
                log_dirs=[node_dir / "d1", node_dir / "d2"],
                zookeeper_connect=connect,
                partitions=1,
                extra=properties,
            )
            child, ready = _spawn_node(executable, node_dir, text)
            stack.callback(stop, child)
            started[broker_id] = _Node(broker_id, node_dir, text, child, ready)
        # Runs first: SIGTERM every node still running at once, so that they shut down together.
        stack.callback(lambda: _terminate_all([n.child for n in started.values() if n.child.poll() is None]))
        deadline = Deadline(timeout_s, f"the {nodes}-node strait site to serve")
        for node in started.values():
            node.running = _await_node(node.child, node.ready, deadline, node.broker_id)
        site = ScaleSite("strait", started, executable, stack, timeout_s)
        wait_for_brokers(site.running.bootstrap, set(started), deadline)
        yield site
