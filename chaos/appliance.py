"""The appliance a chaos run starts for itself: two sites and a mirror, every connection through the fault proxy.

Like ``strait up`` (sites ``east`` and ``west``, a ZooKeeper and N nodes each, a mirror east ->
west), but built so that every fault the suite injects is real and cannot be routed around:

- every node has two listeners on private ports, ``LOCAL`` (its site's clients and the other
  nodes: ``inter.broker.listener.name``) and ``WAN`` (the other site's: the mirror), and
  **advertises a proxy for each** (``<site>-node<id>`` and ``<site>-wan<id>``). Metadata answers
  with the proxies of the listener a client came in on, so clients, followers and the mirror
  all reach a node through a proxy and cannot route around a fault; cutting a node's LOCAL and
  WAN proxies isolates it from everyone;
- every node reaches its site's ZooKeeper through its **own proxy** (``<site>-zk<id>``): cutting
  it for longer than ``zookeeper.session.timeout.ms`` expires that node's session alone;
- the mirror reads the source site through the source nodes' WAN proxies, so the WAN nemeses
  put their toxics (latency with jitter, bandwidth, black hole, reset, slicer, packet loss) on
  those, and the source's own clients and replication do not feel them.

Processes are :class:`node.proc.Child` children of this process (their own process groups,
SIGKILLed by the kernel if this thread dies), so a nemesis can kill -9, SIGSTOP, restart on the
same data and ports, or take a whole site down. ``appliance.json`` has ``strait up``'s format,
so ``strait failover ... --topology DIR/appliance.json`` works on it.

Layout of DIR::

    DIR/<site>/zookeeper/         ZooKeeper's data and log
    DIR/<site>/node-<id>/         server.properties, node.log, ready.json, log dirs d1/ and d2/
                                  (with ``disks``, the source's d2/ is d2.img, an XFS image, mounted)
    DIR/mirror/                   links.toml, the mirror's state dir, mirror.log, admin.token
    DIR/appliance.json            the addresses (proxied bootstraps, ZooKeeper, admin URLs, the link)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError
from chaos.nemesis import XfsImage, kill_9, kill_9_pid, pause, resume
from node.coordination import EmbeddedZooKeeper
from node.proc import (
    Child,
    Deadline,
    NotReady,
    atomic_write,
    http_ok,
    log_tail,
    port_open,
    read_ready_file,
    reserve_port,
    spawn,
    spawn_ready,
    wait_until,
)

if TYPE_CHECKING:
    from chaos.proxy import ProxyHandle

__all__ = ["ChaosAppliance", "ChaosNode", "ChaosSite", "LINK_NAME", "SITES"]

STRAIT = [sys.executable, "-m", "strait.cli"]
SITES = ("east", "west")
LINK_NAME = "east-to-west"
NODE_READY_TIMEOUT_S = 90.0
NODE_STOP_TIMEOUT_S = 30.0
MIRROR_READY_TIMEOUT_S = 60.0
ZOOKEEPER_SESSION_MS = 6000

#: What every node gets (a production-like site scaled to three nodes, short sessions so that a
#: killed node's ephemeral znodes go within seconds). ``properties`` given to the appliance win.
NODE_DEFAULTS: Mapping[str, str] = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
    "num.partitions": "3",
    "zookeeper.session.timeout.ms": str(ZOOKEEPER_SESSION_MS),
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    # As few as __consumer_offsets: the transactional workload's first transaction waits for the topic.
    "transaction.state.log.num.partitions": "6",
    # A client asking for a topic's metadata must not create it: on the target site that would
    # make a plain topic where the mirror's must go.
    "auto.create.topics.enable": "false",
}


def free_port() -> int:
    """A port no one listens on now on 127.0.0.1, below the ephemeral range (the node binds it
    soon, and again after every restart: no other process's connection can take it meanwhile)."""
    return reserve_port("127.0.0.1")


@dataclass
class ChaosNode:
    """One broker process of a chaos site; what process and disk nemeses act on."""

    site: str
    broker_id: int
    directory: Path
    port: int  # the node's LOCAL listener (private: nothing but its proxy connects here)
    advertised_port: int  # its LOCAL proxy's: what Metadata gives out on LOCAL
    wan_port: int  # the node's WAN listener
    wan_advertised_port: int  # its WAN proxy's
    zookeeper_connect: str  # through its own ZooKeeper proxy, with the site's chroot
    properties: dict[str, str]
    proxy_name: str
    wan_proxy_name: str
    zookeeper_proxy_name: str
    child: Child | None = None
    admin_url: str = ""
    log_dirs: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.log_dirs:
            self.log_dirs = [self.directory / "d1", self.directory / "d2"]

    @property
    def name(self) -> str:
        return f"{self.site} node {self.broker_id}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.advertised_port}"

    @property
    def wan_address(self) -> str:
        return f"127.0.0.1:{self.wan_advertised_port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "node.log"

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.running

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None and self.child.running else None

    def server_properties(self) -> dict[str, str]:
        return {
            **NODE_DEFAULTS,
            **self.properties,
            "broker.id": str(self.broker_id),
            "listeners": f"LOCAL://127.0.0.1:{self.port},WAN://127.0.0.1:{self.wan_port}",
            "advertised.listeners": f"LOCAL://{self.address},WAN://{self.wan_address}",
            "listener.security.protocol.map": "LOCAL:PLAINTEXT,WAN:PLAINTEXT",
            "inter.broker.listener.name": "LOCAL",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "zookeeper.connect": self.zookeeper_connect,
            "strait.admin.listener": "127.0.0.1:0",
        }

    def spawn(self) -> None:
        """Start the process (the one before must have ended); :meth:`wait_ready` waits for it."""
        if self.running:
            raise ChaosError(f"{self.name} is already running (pid {self.pid})")
        if self.child is not None:
            self.child.kill()  # reap the one that exited
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        ready = self.directory / "ready.json"
        ready.unlink(missing_ok=True)
        argv = [*STRAIT, "node", "start", "--config", str(config), "--ready-file", str(ready)]
        self.child = spawn(argv, self.log_path, name=self.name)

    def wait_ready(self, timeout: float = NODE_READY_TIMEOUT_S) -> None:
        child = self.child
        if child is None:
            raise ChaosError(f"{self.name} was never started")
        ready = self.directory / "ready.json"

        def serving() -> bool:
            code = child.poll()
            if code is not None:
                raise ChaosError(f"{self.name} exited with code {code} while starting:\n{child.log_tail()}")
            info = read_ready_file(ready)
            if info is None:
                return False
            self.admin_url = str(info["admin_url"])
            return http_ok(f"{self.admin_url}/health")

        try:
            wait_until(serving, Deadline(timeout, f"{self.name} to serve"))
        except NotReady:
            raise ChaosError(f"{self.name} was not ready within {timeout:g} s:\n{child.log_tail()}") from None

    def start(self) -> None:
        """Start the node on its data and ports and return once it serves (NodeControl)."""
        self.spawn()
        self.wait_ready()

    def kill(self) -> None:
        """kill -9 the node's process group; returns once it is dead (NodeControl)."""
        if self.child is not None:
            kill_9(self.child)

    def pause(self) -> None:
        if self.child is None:
            raise ChaosError(f"{self.name} was never started")
        pause(self.child)

    def resume(self) -> None:
        if self.child is not None and self.child.running:
            resume(self.child)

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after NODE_STOP_TIMEOUT_S."""
        if self.child is not None:
            self.resume()
            self.child.stop(NODE_STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


@dataclass
class ChaosSite:
    name: str
    directory: Path
    zookeeper: EmbeddedZooKeeper
    nodes: list[ChaosNode]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def wan_bootstrap(self) -> str:
        """The WAN listeners' proxies: what the other site's mirror reads this site through."""
        return ",".join(node.wan_address for node in self.nodes)

    @property
    def zookeeper_connect(self) -> str:
        """Direct (not proxied): for the mirror's and the failover tools' ZooKeeper clients."""
        return f"{self.zookeeper.connect_string}/{self.name}"

    def node(self, broker_id: int) -> ChaosNode:
        for node in self.nodes:
            if node.broker_id == broker_id:
                return node
        raise ChaosError(f"site {self.name} has no node {broker_id}")

    def kill_zookeeper(self) -> None:
        """kill -9 the site's ZooKeeper (its sessions live on only in the nodes' memory)."""
        pid = self.zookeeper.pid
        if pid is not None and self.zookeeper.poll() is None:
            kill_9_pid(pid, f"{self.name} ZooKeeper")
            # The JVM's main thread is a zombie before its other threads have let go of the
            # listening socket: the fault is in place once nothing answers on the port.
            port = self.zookeeper.port
            try:
                wait_until(
                    lambda: not port_open("127.0.0.1", port, 0.2),
                    Deadline(10, f"{self.name} ZooKeeper's port to close"),
                )
            except NotReady as exc:
                raise ChaosError(str(exc)) from None

    def start_zookeeper(self) -> None:
        """Start the site's ZooKeeper again on its data and port (after :meth:`kill_zookeeper`)."""
        if self.zookeeper.poll() is None and self.zookeeper.pid is not None:
            return
        port = self.zookeeper.port
        self.zookeeper.stop(0)  # reaps the dead one
        self.zookeeper = EmbeddedZooKeeper(self.directory / "zookeeper", port)
        self.zookeeper.start()

    def describe(self) -> dict[str, Any]:
        return {
            "bootstrap": self.bootstrap,
            "zookeeper": self.zookeeper.connect_string,
            "zookeeper_chroot": f"/{self.name}",
            "admin": [node.admin_url for node in self.nodes if node.admin_url],
            "nodes": [
                {
                    "broker_id": n.broker_id,
                    "address": n.address,
                    "wan_address": n.wan_address,
                    "pid": n.pid,
                    "admin": n.admin_url,
                }
                for n in self.nodes
            ],
        }


class ChaosMirror:
    """The ``strait mirror start`` process of the link east -> west."""

    def __init__(self, directory: Path, source: ChaosSite, target: ChaosSite) -> None:
        self.directory = directory
        self.source = source
        self.target = target
        self.child: Child | None = None
        self.admin_url = ""

    @property
    def name(self) -> str:
        return "mirror"

    @property
    def token_path(self) -> Path:
        return self.directory / "admin.token"

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.running

    def links_toml(self) -> str:
        return (
            "[[link]]\n"
            f'name = "{LINK_NAME}"\n'
            'mode = "offset-preserving"\n'
            f'source = {{ name = "{self.source.name}", bootstrap = "{self.source.wan_bootstrap}" }}\n'
            f'target = {{ name = "{self.target.name}", bootstrap = "{self.target.bootstrap}", '
            f'zookeeper = "{self.target.zookeeper_connect}" }}\n'
            'topics = { include = ["^chaos-.*"] }\n'
            'groups = { include = [".*"] }\n'
        )

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        links = self.directory / "links.toml"
        atomic_write(links, self.links_toml())
        ready = self.directory / "ready.json"
        argv = [*STRAIT, "mirror", "start", "--config", str(links), "--admin", "127.0.0.1:0"]
        argv += ["--state-dir", str(self.directory), "--ready-file", str(ready)]
        self.child, info = spawn_ready(
            argv, self.directory / "mirror.log", ready, MIRROR_READY_TIMEOUT_S, name="mirror"
        )
        self.admin_url = str(info["admin"])

    def kill(self) -> None:
        if self.child is not None:
            kill_9(self.child)

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(30)


class ChaosAppliance:
    """Two sites and a mirror behind ``proxy``; ``start()`` and ``stop()`` (or ``with``).

    ``xfs_dirs``: a callable giving, for a node, a directory to use as its first log dir (the
    disk nemeses' loop-mounted XFS image), or None for plain directories.
    """

    def __init__(
        self,
        directory: Path,
        proxy: ProxyHandle,
        *,
        nodes: int = 3,
        properties: Mapping[str, str] | None = None,
        mirror: bool = True,
        disks: bool = False,
    ) -> None:
        if not 1 <= nodes <= 9:
            raise ChaosError(f"nodes per site must be 1..9, got {nodes}")
        self.directory = directory.absolute()
        self.proxy = proxy
        self.node_count = nodes
        self.properties = dict(properties or {})
        self.with_mirror = mirror
        self.with_disks = disks
        #: With ``disks``: each source node's second log dir is a loop-mounted XFS image (by node name).
        self.images: dict[str, XfsImage] = {}
        self.sites: dict[str, ChaosSite] = {}
        self.mirror: ChaosMirror | None = None

    @property
    def appliance_file(self) -> Path:
        return self.directory / "appliance.json"

    @property
    def source(self) -> ChaosSite:
        """The site the producers write to and the mirror reads (east)."""
        return self.sites["east"]

    @property
    def target(self) -> ChaosSite:
        """The mirror's target, the DR site (west)."""
        return self.sites["west"]

    @property
    def link_name(self) -> str:
        return LINK_NAME

    @property
    def topology_file(self) -> Path:
        """What ``strait failover --topology`` reads for this appliance."""
        return self.appliance_file

    @property
    def east(self) -> ChaosSite:
        return self.sites["east"]

    @property
    def west(self) -> ChaosSite:
        return self.sites["west"]

    def nodes(self) -> Iterator[ChaosNode]:
        for site in self.sites.values():
            yield from site.nodes

    def start(self) -> None:
        """Start ZooKeepers, proxies and nodes of both sites, then the mirror; write appliance.json.

        On failure everything started is stopped again before the error propagates.
        """
        try:
            for name in SITES:
                directory = self.directory / name
                zookeeper = EmbeddedZooKeeper(directory / "zookeeper", 0)
                zookeeper.start()
                site = ChaosSite(name, directory, zookeeper, [])
                self.sites[name] = site
                for broker_id in range(1, self.node_count + 1):
                    site.nodes.append(self._node(site, broker_id))
                if self.with_disks and name == SITES[0]:
                    for node in site.nodes:
                        node.directory.mkdir(parents=True, exist_ok=True)
                        self.images[node.name] = XfsImage(node.directory / "d2.img", node.log_dirs[1])
                for node in site.nodes:
                    node.spawn()
                for node in site.nodes:
                    node.wait_ready()
            if self.with_mirror:
                self.mirror = ChaosMirror(self.directory / "mirror", self.east, self.west)
                self.mirror.start()
            self.write()
        except BaseException:
            self.stop()
            raise

    def _node(self, site: ChaosSite, broker_id: int) -> ChaosNode:
        port, wan_port = free_port(), free_port()
        node_proxy = f"{site.name}-node{broker_id}"
        wan_proxy = f"{site.name}-wan{broker_id}"
        zk_proxy = f"{site.name}-zk{broker_id}"
        advertised = self.proxy.add_proxy(node_proxy, f"127.0.0.1:{port}")
        wan = self.proxy.add_proxy(wan_proxy, f"127.0.0.1:{wan_port}")
        zk = self.proxy.add_proxy(zk_proxy, site.zookeeper.connect_string)
        return ChaosNode(
            site=site.name,
            broker_id=broker_id,
            directory=site.directory / f"node-{broker_id}",
            port=port,
            advertised_port=advertised.port,
            wan_port=wan_port,
            wan_advertised_port=wan.port,
            zookeeper_connect=f"127.0.0.1:{zk.port}/{site.name}",
            properties=dict(self.properties),
            proxy_name=node_proxy,
            wan_proxy_name=wan_proxy,
            zookeeper_proxy_name=zk_proxy,
        )

    def describe(self) -> dict[str, Any]:
        links = []
        if self.mirror is not None:
            links.append(
                {
                    "name": LINK_NAME,
                    "source": "east",
                    "target": "west",
                    "admin": self.mirror.admin_url,
                    "token_file": str(self.mirror.token_path),
                }
            )
        return {
            "sites": {name: site.describe() for name, site in self.sites.items()},
            "links": links,
            "proxy": self.proxy.api_url if self._proxy_has_api() else None,
        }

    def _proxy_has_api(self) -> bool:
        try:
            return bool(self.proxy.api_url)
        except ChaosError:
            return False

    def supports(self, fault: str) -> str | None:
        """Every fault runs on the local appliance."""
        return None

    def write(self) -> None:
        atomic_write(self.appliance_file, json.dumps(self.describe(), indent=2) + "\n")

    def stop(self) -> list[str]:
        """Stop the mirror, then each site's nodes (controlled shutdown, bounded) and ZooKeeper.

        Returns a line per process that did not stop cleanly (killed after its bound); never raises.
        """
        problems: list[str] = []
        if self.mirror is not None:
            self.mirror.stop()
        for site in self.sites.values():
            for node in site.nodes:
                if node.child is None:
                    continue
                node.resume()
                stopped = node.child.stop(NODE_STOP_TIMEOUT_S)
                if stopped.killed and not stopped.had_exited:
                    problems.append(f"{node.name} missed its {NODE_STOP_TIMEOUT_S:g} s shutdown and was killed")
            site.zookeeper.stop()
        for image in self.images.values():
            try:
                image.close()
            except ChaosError as exc:
                problems.append(f"cannot unmount {image.mountpoint}: {exc}")
        self.appliance_file.unlink(missing_ok=True)
        return problems

    def __enter__(self) -> ChaosAppliance:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def running(nodes: Sequence[ChaosNode]) -> list[ChaosNode]:
    return [node for node in nodes if node.running]
