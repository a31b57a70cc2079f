"""Sites you run yourself, as a chaos run's target: ``strait chaos run --topology chaos.toml``.

The suite cannot reach into another machine's processes on its own, so the file says how, as
Jepsen's control commands do: one shell command per action per node (ssh, systemctl, a cloud
CLI...). A fault whose action has no command is skipped with a line saying so; the network
faults need the local appliance's fault proxy and are skipped too::

    topology = "sites.toml"        # the sites and the link (docs/failover.md#topology), relative to this file
    link = "east-to-west"          # the link to test: its source takes the writes, its target is the DR site

    [[node]]
    site = "east"
    broker_id = 1
    kill = "ssh east-1 sudo systemctl kill --signal=KILL strait-node"
    start = "ssh east-1 sudo systemctl start strait-node"     # returns once started; the suite waits for it to serve
    pause = "ssh east-1 sudo systemctl kill --signal=STOP strait-node"
    resume = "ssh east-1 sudo systemctl kill --signal=CONT strait-node"

    [zookeeper.east]                 # optional: for zk-loss and site-loss
    kill = "ssh zk-east sudo systemctl kill --signal=KILL zookeeper"
    start = "ssh zk-east sudo systemctl start zookeeper"

Commands run with ``sh -c`` and a time limit (:data:`COMMAND_TIMEOUT_S`); a non-zero exit is a
:class:`~chaos.errors.ChaosError` naming the command and its output. Nothing is started or
stopped by the run itself: the sites and their mirror must be up before it and stay up after.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from chaos.errors import ChaosError
from failover.errors import TopologyError
from failover.topology import load_topology
from node.proc import Deadline, NotReady, wait_until

__all__ = ["COMMAND_TIMEOUT_S", "ExistingNode", "ExistingSite", "ExistingSites", "load_existing"]

COMMAND_TIMEOUT_S = 120.0
NODE_READY_TIMEOUT_S = 120.0
_ACTIONS = ("kill", "start", "pause", "resume")


def _run(command: str, what: str) -> None:
    try:
        done = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise ChaosError(f"{what}: `{command}` did not finish within {COMMAND_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-800:]
        raise ChaosError(f"{what}: `{command}` exited with {done.returncode}: {output}")


@dataclass
class ExistingNode:
    """A node of a site the operator runs, driven by the commands of the chaos file (NodeControl)."""

    site: str
    broker_id: int
    bootstrap: str  # the site's, to see when the node serves again
    commands: Mapping[str, str]
    log_dirs: list[Path] = field(default_factory=list)
    _down: bool = False

    @property
    def name(self) -> str:
        return f"{self.site} node {self.broker_id}"

    @property
    def running(self) -> bool:
        """As far as this run knows: up unless this run killed it and has not started it again."""
        return not self._down

    def can(self, action: str) -> bool:
        return action in self.commands

    def _do(self, action: str) -> None:
        command = self.commands.get(action)
        if command is None:
            raise ChaosError(f"{self.name}: the chaos file gives no {action!r} command")
        _run(command, f"{action} {self.name}")

    def kill(self) -> None:
        self._do("kill")
        self._down = True

    def spawn(self) -> None:
        self._do("start")

    def wait_ready(self, timeout: float = NODE_READY_TIMEOUT_S) -> None:
        """Until the site's metadata lists this broker again."""

        def listed() -> bool:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 5000})
            return self.broker_id in admin.list_topics(timeout=5).brokers

        try:
            wait_until(listed, Deadline(timeout, f"{self.name} to be back in its site's metadata"))
        except NotReady as exc:
            raise ChaosError(str(exc)) from None
        self._down = False

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def pause(self) -> None:
        self._do("pause")

    def resume(self) -> None:
        if self.can("resume"):
            self._do("resume")


@dataclass
class ExistingSite:
    name: str
    bootstrap: str
    nodes: list[ExistingNode]
    zookeeper_commands: Mapping[str, str]

    def node(self, broker_id: int) -> ExistingNode:
        for node in self.nodes:
            if node.broker_id == broker_id:
                return node
        raise ChaosError(f"site {self.name}: broker {broker_id} has no [[node]] entry in the chaos file")

    def kill_zookeeper(self) -> None:
        if "kill" not in self.zookeeper_commands:
            raise ChaosError(f"site {self.name}: the chaos file gives no [zookeeper.{self.name}] kill command")
        _run(self.zookeeper_commands["kill"], f"kill {self.name}'s ZooKeeper")

    def start_zookeeper(self) -> None:
        if "start" not in self.zookeeper_commands:
            raise ChaosError(f"site {self.name}: the chaos file gives no [zookeeper.{self.name}] start command")
        _run(self.zookeeper_commands["start"], f"start {self.name}'s ZooKeeper")


class ExistingSites:
    """The appliance interface of the runner over sites that already run (see the module docstring)."""

    def __init__(self, topology_file: Path, link: str, source: ExistingSite, target: ExistingSite) -> None:
        self.topology_file = topology_file
        self.link_name = link
        self.source = source
        self.target = target
        self.node_count = len(source.nodes)

    @property
    def proxy(self) -> Any:
        raise ChaosError("this fault needs the fault proxy, which only the local appliance has")

    def start(self) -> None:
        """Nothing to start: check that both sites answer."""
        for site in (self.source, self.target):
            admin = AdminClient({"bootstrap.servers": site.bootstrap, "socket.timeout.ms": 5000})
            try:
                admin.list_topics(timeout=10)
            except Exception as exc:
                raise ChaosError(f"site {site.name} ({site.bootstrap}) does not answer: {exc}") from None

    def stop(self) -> list[str]:
        """Nothing to stop; a node this run killed and could not start again is a finding."""
        return [f"{node.name} is still down after the run" for node in self.source.nodes if not node.running]

    def supports(self, fault: str) -> str | None:
        """None when ``fault`` can run here, else why not."""
        if fault == "site-loss":
            nodes_ok = all(n.can("kill") and n.can("start") for n in self.source.nodes)
            if not nodes_ok or not {"kill", "start"} <= set(self.source.zookeeper_commands):
                return f"it needs kill and start commands for every {self.source.name} node and its ZooKeeper"
            return None
        if fault.startswith(("wan-", "isolate-", "zk-expire")):
            return "it needs the fault proxy in front of every node (only the local appliance has it)"
        needs = "pause" if fault.startswith("pause-") else "kill"
        missing = [n.name for n in self.source.nodes if not n.can(needs) or (needs == "kill" and not n.can("start"))]
        if fault.startswith(("kill-", "pause-", "lose-")) and missing:
            return f"the chaos file gives no {needs!r} (and 'start') command for {', '.join(missing)}"
        if fault == "zk-loss" and not {"kill", "start"} <= set(self.source.zookeeper_commands):
            return f"the chaos file gives no [zookeeper.{self.source.name}] kill and start commands"
        return None


def load_existing(path: Path) -> ExistingSites:
    """Read a chaos file (see the module docstring). ChaosError names the file and the key."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ChaosError(f"cannot read chaos file {path}: {exc}") from None
    unknown = set(data) - {"topology", "link", "node", "zookeeper"}
    if unknown:
        raise ChaosError(f"{path}: unknown key {sorted(unknown)[0]!r} (known: topology, link, node, zookeeper)")
    if not isinstance(data.get("topology"), str) or not isinstance(data.get("link"), str):
        raise ChaosError(f"{path}: 'topology' (the sites file) and 'link' (the link to test) are required strings")
    topology_file = (path.parent / data["topology"]).absolute()
    try:
        topology = load_topology(topology_file)
        link = topology.link(data["link"])
    except TopologyError as exc:
        raise ChaosError(f"{path}: {exc}") from None
    sites = {name: topology.site(name) for name in (link.source, link.target)}
    nodes: dict[str, list[ExistingNode]] = {name: [] for name in sites}
    raw_nodes = data.get("node", [])
    if not isinstance(raw_nodes, list):
        raise ChaosError(f"{path}: 'node' must be an array of tables ([[node]])")
    for index, entry in enumerate(raw_nodes, start=1):
        where = f"{path}: node #{index}"
        site, broker_id = entry.get("site"), entry.get("broker_id")
        if site not in sites:
            raise ChaosError(f"{where}: site {site!r} is not {link.source!r} or {link.target!r}")
        if not isinstance(broker_id, int) or broker_id < 0:
            raise ChaosError(f"{where}: broker_id must be a non-negative integer, got {broker_id!r}")
        bad = set(entry) - {"site", "broker_id", *_ACTIONS}
        if bad:
            raise ChaosError(f"{where}: unknown key {sorted(bad)[0]!r} (known: site, broker_id, {', '.join(_ACTIONS)})")
        commands = {action: entry[action] for action in _ACTIONS if action in entry}
        if not all(isinstance(c, str) and c.strip() for c in commands.values()):
            raise ChaosError(f"{where}: commands must be non-empty strings")
        nodes[site].append(ExistingNode(site, broker_id, sites[site].bootstrap, commands))
    zookeepers = data.get("zookeeper", {})
    if not isinstance(zookeepers, dict) or not set(zookeepers) <= set(sites):
        raise ChaosError(f"{path}: [zookeeper.<site>] tables may name only {link.source!r} and {link.target!r}")

    def existing_site(name: str) -> ExistingSite:
        commands = zookeepers.get(name, {})
        if not isinstance(commands, dict) or not set(commands) <= {"kill", "start"}:
            raise ChaosError(f"{path}: [zookeeper.{name}] takes 'kill' and 'start' commands only")
        return ExistingSite(name, sites[name].bootstrap, nodes[name], commands)

    return ExistingSites(topology_file, link.name, existing_site(link.source), existing_site(link.target))
