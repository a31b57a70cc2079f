"""A local site on loopback: one embedded ZooKeeper and N ``strait node start`` processes.

:class:`LocalSite` is what ``strait up`` and ``strait site up`` run, and what a two-site
appliance runs twice. Layout of a site directory (reused as it is on the next start, so the
site comes back with its data)::

    DIR/zookeeper/            ZooKeeper's data, zoo.cfg and zookeeper.log
    DIR/node-<id>/            one per broker: server.properties (rewritten at every start),
                              node.log, ready.json, and the log dirs d1/ and d2/
    DIR/site.json             the addresses, written once every node is ready, removed on stop
                              (kept while the site is lost: they are the ones it comes back on)
    DIR/site.lock             held (flock) while the site runs: one launcher per directory

Every node uses the chroot ``/<name>`` of the site's ZooKeeper. The children run in their
own sessions (a terminal's Ctrl-C reaches only the launcher, which stops them in order) and
get SIGKILL from the kernel if the launcher's main thread dies (no orphans after ``kill -9``).

A site that survives losses (``loss_advice`` given, as in ``strait up``) is *lost* once its
ZooKeeper or every one of its nodes has exited; :meth:`LocalSite.poll` reports that once, and
:meth:`LocalSite.revive` starts the exited processes again on their data and on the ports
the first start bound (kept in memory and in ``site.json``), so clients and the mirror find
the site where it was.

One class over ~600 lines: a site's life (start in order, poll, lose, revive, stop in order)
is one state machine over the same processes and ports, read best in one place; the parts that
stand alone live beside it (``_launcher``, ``_processes``, ``_control``).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from node.proc import Child, Deadline, NotReady, atomic_write, log_tail, read_ready_file, wait_until

from ._processes import exit_reason, join_subjects, port_free, port_of, spawn_cli, stop_child

if TYPE_CHECKING:
    import ssl

    from ._appliance_security import SiteSecurity

READY_TIMEOUT_S = 60.0  # from spawning the nodes until every one serves and reports /health ok
LEADERS_TIMEOUT_S = 30.0  # then the site is announced anyway, naming the partitions without one
NODE_STOP_TIMEOUT_S = 30.0  # per node: controlled shutdown and a clean close, then SIGKILL
LOST_NODE_STOP_TIMEOUT_S = 5.0  # per node of a site whose ZooKeeper is gone: no controlled shutdown to wait for
ZOOKEEPER_STOP_TIMEOUT_S = 10.0
EXIT_SETTLE_S = 1.0  # exits this close together are reported together (a site lost at once is one report)
_HEALTH_TIMEOUT_S = 2.0

SITE_FILE = "site.json"
LOCK_FILE = "site.lock"


# Properties every node of a local site gets from the site (its id, addresses, dirs, ZooKeeper).
SITE_MANAGED_PROPERTIES = frozenset(
    {
        "broker.id",
        "listeners",
        "advertised.listeners",
        "log.dirs",
        "log.dir",
        "zookeeper.connect",
        "strait.admin.listener",
    }
)


def parse_settings(settings: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--set``) as a dict, a later key overriding an earlier one.

    Raises:
        ValueError: naming a setting without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for setting in settings:
        key, eq, value = setting.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"--set {setting!r}: expected KEY=VALUE, for example --set num.partitions=6")
        out[key] = value.strip()
    return out


class SiteError(Exception):
    """A local site could not start or run; the message names the process and its log."""


class SiteInterrupted(SiteError):
    """A stop was requested (Ctrl-C, SIGTERM) while the site was still starting."""


class NothingToRevive(SiteError):
    """:meth:`LocalSite.revive` of a site whose processes all run (or that never started)."""


class NodeFiles:
    """Where a local node keeps its files: everything under its working directory ``workdir``.

    Shared by the site launcher's nodes and the test harness's, so both lay a node out alike.
    """

    workdir: Path

    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def ready_path(self) -> Path:
        return self.workdir / "ready.json"

    @property
    def log_path(self) -> Path:
        return self.workdir / "node.log"

    @property
    def log_dirs(self) -> tuple[Path, Path]:
        return (self.workdir / "d1", self.workdir / "d2")


@dataclass
class LocalNode(NodeFiles):
    """One broker process of a :class:`LocalSite`; the addresses are known once it is ready."""

    broker_id: int
    workdir: Path
    port: int
    admin_port: int = 0
    child: Child | None = None
    bootstrap: str = ""
    admin_url: str = ""
    exit_code: int | None = None  # noted by LocalSite.poll once the process has exited on its own
    exit_reported: bool = False

    @property
    def pid(self) -> int | None:
        return None if self.child is None else self.child.pid

    def log_tail(self) -> str:
        """The end of this run's output (of the whole log before the node was started)."""
        return self.child.log_tail() if self.child is not None else log_tail(self.log_path)

    def to_json(self) -> dict[str, object]:
        return {"broker_id": self.broker_id, "bootstrap": self.bootstrap, "admin": self.admin_url, "pid": self.pid}


class LocalSite:
    """A site on loopback under ``directory``: :meth:`start`, then :meth:`poll` while it runs,
    then :meth:`stop`. Blocking; call it from the main thread (see the module docstring).

    ``base_port`` 0 lets every node bind a free port (its ready file tells which); otherwise
    node ``i`` listens on ``base_port + i - 1``. ``properties`` are added to (and override) every
    node's ``server.properties``.
    """

    def __init__(
        self,
        directory: Path,
        *,
        name: str = "east",
        nodes: int = 3,
        base_port: int = 0,
        zookeeper_port: int = 0,
        properties: Mapping[str, str] | None = None,
        node_dir: str = "node-{id}",
        loss_advice: str | None = None,
        security: SiteSecurity | None = None,
    ) -> None:
        """Check the arguments; nothing starts yet.

        ``node_dir`` names each node's directory (``{id}`` is the broker id); ``strait up``
        keeps its historical ``node{id}`` so existing data stays where it was.

        ``loss_advice`` makes the site survive its loss: :meth:`poll` then reports a lost site
        once, ending the report with this text (what keeps running, how to bring it back),
        instead of raising when ZooKeeper exits.

        ``security`` secures the site (``strait up --secure``): the nodes listen with its
        protocol and get its properties, and its users and ACLs are written into ZooKeeper
        before the nodes start.

        Raises:
            ValueError: naming the bad value (name, node count, ports).
        """
        if not name or not all(c.isalnum() or c in "._-" for c in name) or name in {".", ".."}:
            raise ValueError(f"site name {name!r}: use letters, digits, '.', '_' or '-' (it is the ZooKeeper chroot)")
        if not 1 <= nodes <= 9:
            raise ValueError(f"a local site has 1 to 9 nodes, not {nodes}")
        if base_port and not 1 <= base_port <= 65536 - nodes:
            raise ValueError(f"base port {base_port} leaves no room for {nodes} node ports below 65536")
        if not 0 <= zookeeper_port <= 65535:
            raise ValueError(f"ZooKeeper port {zookeeper_port} is out of range 0..65535")
        self.directory = directory.absolute()
        self.name = name
        self.zookeeper_port = zookeeper_port
        self.properties = dict(properties or {})
        self.nodes = [
            LocalNode(i, self.directory / node_dir.format(id=i), base_port + i - 1 if base_port else 0)
            for i in range(1, nodes + 1)
        ]
        self.loss_advice = loss_advice
        self.security = security
        self._admin_context: ssl.SSLContext | None = None if security is None else security.admin_context()
        self._zookeeper: Any = None  # node.coordination.EmbeddedZooKeeper once started
        self._zookeeper_exit: int | None = None  # noted by poll once ZooKeeper exited on its own
        self._zookeeper_exit_reported = False
        self._last_exit = 0.0  # monotonic time poll last noted an exit
        self._loss_reported = False
        self._started = False  # the first start succeeded: the ports are pinned for revive
        self._lock: IO[bytes] | None = None
        self._check_properties()

    def _check_properties(self) -> None:
        """Refuse a property the site sets itself, and any that a node would refuse, before anything starts.

        Raises:
            ValueError: naming the key (and the value, for a value the node's config refuses).
        """
        from node.config import ConfigError, NodeConfig

        secured = frozenset() if self.security is None else self.security.managed_keys
        for key in self.properties:
            if key in SITE_MANAGED_PROPERTIES:
                raise ValueError(f"--set {key}: the local site sets {key} itself for each node")
            if key in secured:
                raise ValueError(f"--set {key}: the secured appliance sets {key} itself for each node")
        first = self.nodes[0]
        props = self.node_properties(first) | {"zookeeper.connect": f"127.0.0.1:2181/{self.name}"}
        try:
            NodeConfig.from_properties(props, source="--set")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    # -- what the site looks like -------------------------------------------------------------

    @property
    def site_file(self) -> Path:
        return self.directory / SITE_FILE

    @property
    def zookeeper(self) -> str:
        """The ZooKeeper server's ``host:port`` (empty until started)."""
        return "" if self._zookeeper is None else str(self._zookeeper.connect_string)

    @property
    def zookeeper_connect(self) -> str:
        """``host:port/<name>``: the nodes' ``zookeeper.connect`` (and ``strait topics reassign``'s)."""
        return f"{self.zookeeper}/{self.name}"

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes if node.bootstrap)

    def node_properties(self, node: LocalNode) -> dict[str, str]:
        """The ``server.properties`` of ``node``: replicated like a production site, scaled to its size."""
        count = len(self.nodes)
        protocol = "PLAINTEXT" if self.security is None else self.security.protocol
        props = {
            "broker.id": str(node.broker_id),
            "listeners": f"{protocol}://127.0.0.1:{node.port}",
            "log.dirs": ",".join(str(d) for d in node.log_dirs),
            "zookeeper.connect": self.zookeeper_connect,
            "strait.admin.listener": f"127.0.0.1:{node.admin_port}",
            "default.replication.factor": str(min(3, count)),
            "offsets.topic.replication.factor": str(min(3, count)),
            "min.insync.replicas": str(min(2, count)),
        }
        if self.security is not None:
            props |= self.security.node_properties(node.broker_id)
        return props | self.properties

    def announce(self) -> str:
        return announcement(self)

    def describe(self) -> dict[str, object]:
        """What ``site.json`` holds."""
        return {
            "name": self.name,
            "bootstrap": self.bootstrap,
            "zookeeper": self.zookeeper,
            "zookeeper_connect": self.zookeeper_connect,
            "zookeeper_pid": None if self._zookeeper is None else self._zookeeper.pid,
            "admin": [node.admin_url for node in self.nodes],
            "nodes": [node.to_json() for node in self.nodes],
        }

    @property
    def lost(self) -> bool:
        """ZooKeeper or every node has exited on its own (as :meth:`poll` last saw it)."""
        return self._zookeeper_exit is not None or all(node.exit_code is not None for node in self.nodes)

    @property
    def state(self) -> str:
        """``"lost"`` or ``"up"`` (the ``state`` of the site in ``appliance.json``)."""
        return "lost" if self._started and self.lost else "up"

    def exits(self) -> str:
        """The processes that exited on their own, and how, in words ("ZooKeeper and nodes 1,2
        exited (killed by SIGKILL)"); empty when none did."""
        subjects: dict[str, list[str]] = {}
        if self._zookeeper_exit is not None:
            subjects.setdefault(exit_reason(self._zookeeper_exit), []).append("ZooKeeper")
        for node in self.nodes:
            if node.exit_code is not None:
                subjects.setdefault(exit_reason(node.exit_code), []).append(f"node {node.broker_id}")
        return ", ".join(f"{join_subjects(names)} exited ({reason})" for reason, names in subjects.items())

    # -- life -------------------------------------------------------------------------------------

    def start(self, stop_requested: Callable[[], bool] = lambda: False) -> list[str]:
        """Start ZooKeeper, then every node; return once each serves and answers ``/health`` with
        200 and every partition has a leader in every node's view (so clients can use the site
        at once), after writing ``site.json``. On failure everything started is stopped again.

        Partitions still without a leader after ``LEADERS_TIMEOUT_S`` (their in-sync replicas
        are on nodes this site no longer has) do not fail the start: the returned warnings
        name them.

        ``stop_requested`` is polled while waiting, so Ctrl-C during startup is honoured.

        Raises:
            SiteError: another launcher holds the directory; java or ZooKeeper's jars are
                missing; ZooKeeper or a node did not start (the message has its log tail); a
                secured site's users and ACLs could not be written into ZooKeeper.
            SiteInterrupted: ``stop_requested()`` became true.
        """
        from node.coordination import EmbeddedZooKeeper, ZooKeeperError

        from ._appliance_security import SecurityError

        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._take_lock()
        except OSError as exc:
            raise SiteError(f"site {self.name}: cannot use {self.directory}: {exc}") from None
        self._zookeeper_exit, self._zookeeper_exit_reported, self._loss_reported = None, False, False
        try:
            self.site_file.unlink(missing_ok=True)
            try:
                self._zookeeper = EmbeddedZooKeeper(self.directory / "zookeeper", self.zookeeper_port)
                self._zookeeper.start()
            except ZooKeeperError as exc:
                self._zookeeper = None
                raise SiteError(f"site {self.name}: {exc}") from None
            if self.security is not None:
                try:
                    self.security.prepare_zookeeper(self.zookeeper_connect)
                except SecurityError as exc:
                    raise SiteError(str(exc)) from None
            for node in self.nodes:
                self._spawn(node)
            self._wait_ready(stop_requested)
            warnings = self._wait_for_leaders(stop_requested)
            atomic_write(self.site_file, json.dumps(self.describe(), indent=2) + "\n")
        except OSError as exc:
            self.stop()
            raise SiteError(f"site {self.name}: {exc}") from None
        except BaseException:
            self.stop()
            raise
        self._pin_ports()
        return warnings

    def poll(self) -> list[str]:
        """Report (once each) the processes that exited on their own since the last call; exits
        less than ``EXIT_SETTLE_S`` apart are reported together, one poll after the last of them.

        A dead node is reported and the others keep serving (that is what a site is for). A
        site that survives losses (``loss_advice``) reports its loss (ZooKeeper or every node
        exited) in one line and keeps going; otherwise a dead ZooKeeper is fatal.

        Raises:
            SiteError: ZooKeeper exited, and the site does not survive losses.
        """
        self._note_exits()
        if self._zookeeper_exit is not None and self.loss_advice is None:
            raise SiteError(
                f"site {self.name}: ZooKeeper exited on its own with code {self._zookeeper_exit}; "
                f"see {self._zookeeper.log_path}"
            )
        unreported = [node for node in self.nodes if node.exit_code is not None and not node.exit_reported]
        zookeeper_unreported = self._zookeeper_exit is not None and not self._zookeeper_exit_reported
        if not (unreported or zookeeper_unreported) or time.monotonic() - self._last_exit < EXIT_SETTLE_S:
            return []
        for node in unreported:
            node.exit_reported = True
        self._zookeeper_exit_reported = self._zookeeper_exit is not None
        if self.lost and not self._loss_reported:
            self._loss_reported = True
            running = [f"node {node.broker_id}" for node in self.nodes if node.exit_code is None]
            verb = "runs" if len(running) == 1 else "run"
            still = f"; {join_subjects(running)} still {verb} without ZooKeeper" if running else ""
            if self._zookeeper_exit is None:
                still = "; its ZooKeeper still runs"
            return [f"site {self.name} is lost: {self.exits()}{still}; {self.loss_advice}"]
        return [
            f"site {self.name}: node {node.broker_id} exited on its own with code {node.exit_code}; see {node.log_path}"
            for node in unreported
        ]

    def revive(
        self, stop_requested: Callable[[], bool] = lambda: False, begin: Callable[[str], None] = lambda _: None
    ) -> list[str]:
        """Start again the processes of this site that exited on their own (ZooKeeper, nodes, or
        all), each on its own data and on the ports the first :meth:`start` bound (node and
        admin listeners, ZooKeeper's client port), so every address in ``site.json``, the
        mirror's link file and ``appliance.json`` stays valid. Returns like :meth:`start` once
        the restarted nodes serve and every partition has a leader; ``site.json`` is rewritten
        (with the new pids). Processes that still run are left alone.

        The restarted nodes wait out the ZooKeeper sessions of their dead predecessors (up to
        1.5 ``zookeeper.session.timeout.ms``, see ``node.broker``), so this takes about one
        session timeout after a SIGKILL of the whole site. On failure what it started is
        killed again: the site stays as lost as it was. Call it from the thread that started
        the site (the children die with that thread). ``begin`` is told, in words, what is
        about to start, once the checks passed.

        Raises:
            NothingToRevive: every process runs, or the site never started.
            SiteError: a port is taken by another process (the message names it); ZooKeeper or
                a node did not start (with its log tail).
            SiteInterrupted: ``stop_requested()`` became true (what started is left to :meth:`stop`).
        """
        from node.coordination import EmbeddedZooKeeper, ZooKeeperError

        if not self._started or self._lock is None:
            raise NothingToRevive(f"site {self.name} is not running under this launcher; start it instead")
        self._note_exits()
        zookeeper_dead = self._zookeeper_exit is not None
        dead = [node for node in self.nodes if node.exit_code is not None]
        if not zookeeper_dead and not dead:
            raise NothingToRevive(
                f"site {self.name} is not lost: its ZooKeeper and "
                f"{join_subjects([f'node {n.broker_id}' for n in self.nodes])} run; there is nothing to bring back"
            )
        wanted = [(self._zookeeper.port, "ZooKeeper")] if zookeeper_dead else []
        for node in dead:
            wanted += [(node.port, f"node {node.broker_id}"), (node.admin_port, f"node {node.broker_id}'s admin API")]
        for port, subject in wanted:
            if not port_free(port):
                raise SiteError(
                    f"site {self.name}: cannot bring {subject} back on port {port}: another process uses "
                    f"127.0.0.1:{port}; free it and ask again"
                )
        begin(
            f"bringing site {self.name} back on its data: "
            + ", ".join(f"{subject} on 127.0.0.1:{port}" for port, subject in wanted)
            + " (the processes that still run are left alone)"
        )
        restarted: list[LocalNode] = []
        zookeeper_exit = self._zookeeper_exit
        addresses = {node.broker_id: (node.bootstrap, node.admin_url) for node in dead}
        try:
            if zookeeper_dead:
                port = self._zookeeper.port
                self._zookeeper.stop(0)  # it has exited: this reaps it
                self._zookeeper = EmbeddedZooKeeper(self.directory / "zookeeper", port)
                self._zookeeper.start()
                self._zookeeper_exit = None
            for node in dead:
                if node.child is not None:
                    node.child.kill()  # it has exited: this reaps it
                self._spawn(node)
                restarted.append(node)
            self._wait_ready(stop_requested, restarted)
            warnings = self._wait_for_leaders(stop_requested)
            atomic_write(self.site_file, json.dumps(self.describe(), indent=2) + "\n")
        except SiteInterrupted:
            raise
        except (SiteError, ZooKeeperError, OSError) as exc:
            self._undo_revive(restarted, addresses, zookeeper_exit)
            raise SiteError(str(exc) if isinstance(exc, SiteError) else f"site {self.name}: {exc}") from None
        self._zookeeper_exit_reported = False
        self._loss_reported = False
        return warnings

    def stop(self, hurry: Callable[[], bool] = lambda: False) -> list[str]:
        """Stop the nodes one at a time, highest broker id first (SIGTERM: a controlled shutdown
        moves each one's leaderships to the others), then ZooKeeper; remove ``site.json`` and
        release the directory. Every wait is bounded: a node gets ``NODE_STOP_TIMEOUT_S``
        (``LOST_NODE_STOP_TIMEOUT_S`` once ZooKeeper is gone), or none once ``hurry()`` is true
        (a second Ctrl-C), then SIGKILL. Idempotent.

        Returns what did not go cleanly (a node that exited on its own, was killed or exited
        non-zero; a lost site in one line); empty when every process stopped as asked.
        """
        if self._lock is None:
            return []  # never started (or refused the directory): nothing of ours to stop or remove
        problems = []
        self._note_exits()
        surviving_loss = self.loss_advice is not None and self._started and self.lost
        if surviving_loss:
            problems.append(f"site {self.name} was lost and not brought back: {self.exits()}")
        node_timeout = LOST_NODE_STOP_TIMEOUT_S if self._zookeeper_exit is not None else NODE_STOP_TIMEOUT_S
        for node in reversed(self.nodes):
            child, node.child = node.child, None
            problem = None if child is None else stop_child(child, f"node {node.broker_id}", node_timeout, hurry)
            if problem is not None and not (surviving_loss and node.exit_code is not None):
                problems.append(f"site {self.name}: {problem}")
        if self._zookeeper is not None:
            self._zookeeper.stop(ZOOKEEPER_STOP_TIMEOUT_S)
            self._zookeeper = None
        self.site_file.unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None
        return problems

    # -- internals --------------------------------------------------------------------------

    def _take_lock(self) -> None:
        lock = (self.directory / LOCK_FILE).open("a+b")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().decode(errors="replace").strip() or "another process"
            lock.close()
            raise SiteError(f"site directory {self.directory} is in use by {holder}; stop that site first") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}\n".encode())
        lock.flush()
        self._lock = lock

    def _pin_ports(self) -> None:
        """After the first start: every later (re)start of a process binds the port it has now."""
        for node in self.nodes:
            node.port = port_of(node.bootstrap)
            node.admin_port = port_of(node.admin_url)
        self._started = True

    def _note_exits(self) -> None:
        """Note the exit code of every process that has exited since the last look (no reporting)."""
        for node in self.nodes:
            if node.child is not None and node.exit_code is None:
                node.exit_code = node.child.poll()
                if node.exit_code is not None:
                    self._last_exit = time.monotonic()
        if self._zookeeper is not None and self._zookeeper_exit is None:
            self._zookeeper_exit = self._zookeeper.poll()
            if self._zookeeper_exit is not None:
                self._last_exit = time.monotonic()

    def _undo_revive(
        self, restarted: list[LocalNode], addresses: Mapping[int, tuple[str, str]], zookeeper_exit: int | None
    ) -> None:
        """A revive failed: kill what it started, so the site is as it was before (reported, not again)."""
        for node in restarted:
            if node.child is not None:
                node.exit_code = node.child.kill()
            node.exit_reported = True
            node.bootstrap, node.admin_url = addresses[node.broker_id]
        if zookeeper_exit is not None and self._zookeeper is not None:
            self._zookeeper.stop(ZOOKEEPER_STOP_TIMEOUT_S)
            self._zookeeper_exit = zookeeper_exit
            self._zookeeper_exit_reported = True

    def _spawn(self, node: LocalNode) -> None:
        node.workdir.mkdir(parents=True, exist_ok=True)
        # 0600: a secured node's file holds its SCRAM password (sasl.jaas.config).
        atomic_write(node.config_path, "".join(f"{k}={v}\n" for k, v in self.node_properties(node).items()), mode=0o600)
        node.ready_path.unlink(missing_ok=True)
        node.bootstrap = node.admin_url = ""
        node.exit_code = None
        node.exit_reported = False
        node.child = spawn_cli(
            ["node", "start", "--config", str(node.config_path), "--ready-file", str(node.ready_path)],
            node.log_path,
            name=f"node {node.broker_id}",
        )

    def _check_stop(self, stop_requested: Callable[[], bool]) -> None:
        if stop_requested():
            raise SiteInterrupted(f"site {self.name}: stop requested while starting")

    def _wait_ready(self, stop_requested: Callable[[], bool], nodes: Sequence[LocalNode] | None = None) -> None:
        """Every node (of ``nodes``, default all) has written its ready file and answers /health
        (the nodes start in parallel)."""
        waiting = list(self.nodes if nodes is None else nodes)

        def all_ready() -> bool:
            self._check_stop(stop_requested)
            for node in list(waiting):
                assert node.child is not None
                code = node.child.poll()
                if code is not None:
                    raise SiteError(
                        f"site {self.name}: node {node.broker_id} exited with code {code} "
                        f"while starting; {node.log_path} ends with:\n{node.log_tail()}"
                    )
                info = None if node.bootstrap else read_ready_file(node.ready_path)
                if info is not None:
                    node.bootstrap, node.admin_url = info["bootstrap"], info["admin_url"]
                if node.bootstrap and _get_json(f"{node.admin_url}/health", self._admin_context) is not None:
                    waiting.remove(node)
            return not waiting

        try:
            wait_until(all_ready, Deadline(READY_TIMEOUT_S, f"site {self.name}'s nodes to be ready"))
        except NotReady:
            names = ", ".join(str(node.broker_id) for node in waiting)
            raise SiteError(
                f"site {self.name}: node(s) {names} not ready within {READY_TIMEOUT_S:g} s; "
                f"{waiting[0].log_path} ends with:\n{waiting[0].log_tail()}"
            ) from None

    def _wait_for_leaders(self, stop_requested: Callable[[], bool]) -> list[str]:
        leaderless: set[str] = set()

        def every_partition_led() -> bool:
            nonlocal leaderless
            self._check_stop(stop_requested)
            leaderless = self._leaderless()
            return not leaderless

        try:
            wait_until(every_partition_led, Deadline(LEADERS_TIMEOUT_S, f"a leader for site {self.name}'s partitions"))
        except NotReady:
            shown = ", ".join(sorted(leaderless)[:10]) + (" ..." if len(leaderless) > 10 else "")
            return [
                f"site {self.name}: {len(leaderless)} partition(s) have no leader after "
                f"{LEADERS_TIMEOUT_S:g} s ({shown}); they stay offline until an in-sync replica returns"
            ]
        return []

    def _leaderless(self) -> set[str]:
        """Partitions without a leader in some node's view (a node that does not answer counts)."""
        leaderless = set()
        for node in self.nodes:
            topics = _get_json(f"{node.admin_url}/v1/topics", self._admin_context)
            if not isinstance(topics, list):
                leaderless.add(f"(node {node.broker_id}'s admin API did not answer)")
                continue
            for topic in topics:
                for partition in topic.get("partitions", []):
                    if partition.get("leader", -1) < 0:
                        leaderless.add(f"{topic.get('name')}-{partition.get('partition')}")
        return leaderless


def _get_json(url: str, context: ssl.SSLContext | None = None) -> Any:
    """The JSON a GET of ``url`` answers with 200 (an HTTPS URL checked with ``context``), or None."""
    try:
        with urllib.request.urlopen(url, timeout=_HEALTH_TIMEOUT_S, context=context) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def announcement(site: LocalSite) -> str:
    """What an operator needs once the site is up: where to point clients, admin URLs, logs."""
    lines = [
        f"site {site.name}: {len(site.nodes)} node(s), ZooKeeper {site.zookeeper_connect}",
        f"  bootstrap servers  {site.bootstrap}",
    ]
    for node in site.nodes:
        lines.append(f"  node {node.broker_id}  {node.bootstrap}  admin {node.admin_url}  log {node.log_path}")
    lines.append(f"  written to {site.site_file}")
    return "\n".join(lines)
