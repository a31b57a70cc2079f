"""The faults a chaos scenario schedules, each bound to a running :class:`~chaos.appliance.ChaosAppliance`.

A :class:`Fault` picks its target when it starts (the leader *now*, a follower *now*), so a
schedule derived from a seed replays the same choices on the same cluster state. ``start``
returns the target in words (it goes into the history); ``heal`` undoes everything ``start``
did, is idempotent, and is safe after a ``start`` that failed halfway. :data:`FAULTS` lists
every fault by name with its one-line description (``strait chaos list`` shows them).

Process faults act on the source site ``east`` (where the producers write): kill -9
(``kill-*``) restarts the node on its data when healed; SIGSTOP (``pause-*``) sends SIGCONT.
Network faults cut or poison fault-proxy links: a node's own proxy (everyone's way to it) and
its ZooKeeper proxy; the WAN faults poison the WAN-listener proxies the mirror reads the source
through (the source's own clients and replication use the LOCAL listener's and do not feel them).
"""

from __future__ import annotations

import abc
import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

import trio
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from chaos.appliance import ChaosAppliance, ChaosNode
from chaos.errors import ChaosError
from chaos.nemesis import DiskFull, FailingDir, NemesisContext, ReadOnlyDir, TornTail, XfsImage
from chaos.sites import NodeControl, SiteControl, Sites
from chaos.workloads import output_topic, transactional_id
from node.client import READ_UNCOMMITTED, ClientError, SiteClient, complete_batches, fetch_partition
from node.client import AdminClient as NodeAdmin
from node.config import FENCED
from node.protocol import ApiKey
from storage.records import Offset

__all__ = ["FAULTS", "Fault", "FaultSpec", "find_controller", "find_leader", "find_txn_coordinator"]

#: How long a ZooKeeper proxy stays cut for a session expiry: past the 6 s session timeout.
ZK_EXPIRY_HOLD_S = 9.0


def _metadata(site: SiteControl, topic: str | None) -> object:
    admin = AdminClient({"bootstrap.servers": site.bootstrap, "socket.timeout.ms": 5000})
    return admin.list_topics(topic=topic, timeout=10)


def find_leader(site: SiteControl, topic: str, rng: random.Random) -> tuple[NodeControl, int]:
    """The node leading a partition of ``topic`` (the partition drawn by ``rng``) and that partition."""
    meta = _metadata(site, topic)
    partitions = sorted(meta.topics[topic].partitions.values(), key=lambda p: p.id)  # type: ignore[attr-defined]
    led = [p for p in partitions if p.leader >= 0]
    if not led:
        raise ChaosError(f"no partition of {topic} on {site.name} has a leader now")
    chosen = rng.choice(led)
    return site.node(chosen.leader), chosen.id


def find_txn_coordinator(site: SiteControl, transactional: str) -> NodeControl:
    """The node coordinating ``transactional`` now: FindCoordinator with key type 1, as a producer asks.

    It is the leader of the id's ``__transaction_state`` partition. Raises ChaosError when no
    node answers or the answer is an error (no coordinator yet: the id never initialised).
    """

    async def ask() -> int:
        admin = await NodeAdmin.connect(site.bootstrap, timeout=5.0)
        try:
            response = await admin.route.on_admin(
                ApiKey.FIND_COORDINATOR, 2, lambda _v: {"key": transactional, "key_type": 1}
            )
        finally:
            await admin.aclose()
        if response.error_code:
            raise ChaosError(f"FindCoordinator for transactional id {transactional!r}: error {response.error_code}")
        return int(response.node_id)

    try:
        return site.node(trio.run(ask))
    except ClientError as exc:
        raise ChaosError(f"cannot find the coordinator of transactional id {transactional!r}: {exc}") from None


def find_controller(site: SiteControl) -> NodeControl:
    meta = _metadata(site, None)
    controller = meta.controller_id  # type: ignore[attr-defined]
    if controller < 0:
        raise ChaosError(f"site {site.name} has no controller now")
    return site.node(controller)


@contextlib.contextmanager
def partitioned(app: ChaosAppliance, proxy: str) -> Iterator[None]:
    """While inside: nothing crosses ``proxy`` either way, as in a real partition.

    Bytes are *held*, not dropped (``packet_loss`` at 100 %: TCP retransmits until the route is
    back), so a connection that outlives the partition carries on where it was, and one that
    does not is ended by its peer's own timeout. (toxiproxy's ``timeout`` black hole drops the
    bytes instead, which leaves a Kafka connection desynchronised after the heal, something no
    real network does.)
    """
    added: list[str] = []
    try:
        for stream in ("upstream", "downstream"):
            name = f"partition_{stream}"
            app.proxy.add_toxic(proxy, "packet_loss", name=name, stream=stream, probability=100)
            added.append(name)
        yield
    finally:
        for name in added:
            with contextlib.suppress(ChaosError):
                app.proxy.remove_toxic(proxy, name)


def _local(app: Sites, fault: str) -> ChaosAppliance:
    if not isinstance(app, ChaosAppliance):
        raise ChaosError(f"{fault} needs the fault proxy in front of every node: only the local appliance has it")
    return app


class Fault(abc.ABC):
    """One fault on running sites: ``start(rng) -> target`` and ``heal()``."""

    name = "fault"
    description = ""

    def __init__(self, app: Sites, topic: str) -> None:
        self.app = app
        self.topic = topic

    @abc.abstractmethod
    def start(self, rng: random.Random) -> str:
        raise NotImplementedError

    @abc.abstractmethod
    def heal(self) -> None:
        raise NotImplementedError


class _NodeFault(Fault):
    """kill -9 or SIGSTOP of a set of east nodes chosen by ``pick``."""

    pick = "random"
    action = "kill"

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self.targets: list[NodeControl] = []

    def choose(self, rng: random.Random) -> tuple[list[NodeControl], str]:
        site = self.app.source
        up = [n for n in site.nodes if n.running]
        if self.pick == "site":
            return list(site.nodes), f"all of site {site.name}"
        if self.pick == "leader":
            node, partition = find_leader(site, self.topic, rng)
            return [node], f"{node.name}, leader of {self.topic}[{partition}]"
        if self.pick == "follower":
            leader, partition = find_leader(site, self.topic, rng)
            followers = [n for n in up if n is not leader]
            if not followers:
                raise ChaosError(f"{self.topic}[{partition}] has no running follower")
            node = rng.choice(followers)
            return [node], f"{node.name}, a follower of {self.topic}[{partition}] (leader {leader.name})"
        if self.pick == "controller":
            node = find_controller(site)
            return [node], f"{node.name}, the controller"
        if self.pick == "txn-coordinator":
            tid = transactional_id(self.topic)
            node = find_txn_coordinator(site, tid)
            return [node], f"{node.name}, the transaction coordinator of {tid!r}"
        if self.pick == "output-leader":
            output = output_topic(self.topic)
            node, partition = find_leader(site, output, rng)
            return [node], f"{node.name}, leader of {output}[{partition}] (the transactional output)"
        node = rng.choice(up)
        return [node], node.name

    def start(self, rng: random.Random) -> str:
        self.targets, target = self.choose(rng)
        for node in self.targets:
            if self.action == "kill":
                node.kill()
            else:
                node.pause()
        return target

    def heal(self) -> None:
        problems = []
        for node in self.targets:
            try:
                if self.action == "kill":
                    if not node.running:
                        node.spawn()
                else:
                    node.resume()
            except ChaosError as exc:
                problems.append(str(exc))
        if self.action == "kill":
            for node in self.targets:
                try:
                    node.wait_ready()
                except ChaosError as exc:
                    problems.append(str(exc))
        if problems:
            raise ChaosError("; ".join(problems))


def _node_fault(action: str, pick: str, description: str) -> type[Fault]:
    return type(
        f"{action.title()}{pick.title().replace('-', '')}",
        (_NodeFault,),
        {"name": f"{action}-{pick}", "action": action, "pick": pick, "description": description},
    )


class _Partitioned(Fault):
    """Holds every byte through some proxies of a random running source node until healed."""

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self._cut: contextlib.ExitStack | None = None

    @abc.abstractmethod
    def proxies(self, node: ChaosNode) -> tuple[str, ...]:
        raise NotImplementedError

    @abc.abstractmethod
    def describe(self, node: ChaosNode) -> str:
        raise NotImplementedError

    def start(self, rng: random.Random) -> str:
        app = _local(self.app, self.name)
        node: ChaosNode = rng.choice([n for n in app.source.nodes if n.running])
        self._cut = contextlib.ExitStack()
        for proxy in self.proxies(node):
            self._cut.enter_context(partitioned(app, proxy))
        return self.describe(node)

    def heal(self) -> None:
        if self._cut is not None:
            self._cut.close()
            self._cut = None


class ZooKeeperExpiry(_Partitioned):
    name = "zk-expire"
    description = "cut a random source node's ZooKeeper link until its session expires, then heal"

    def proxies(self, node: ChaosNode) -> tuple[str, ...]:
        return (node.zookeeper_proxy_name,)

    def describe(self, node: ChaosNode) -> str:
        return f"{node.name}'s ZooKeeper link (held {ZK_EXPIRY_HOLD_S:g} s, past its session timeout)"


class ZooKeeperLoss(Fault):
    name = "zk-loss"
    description = "kill -9 east's ZooKeeper; heal starts it again on its data"

    def start(self, rng: random.Random) -> str:
        self.app.source.kill_zookeeper()
        return f"{self.app.source.name}'s ZooKeeper"

    def heal(self) -> None:
        self.app.source.start_zookeeper()


class IsolateNode(_Partitioned):
    name = "isolate-node"
    description = "partition a random source node away: nothing crosses its listeners' or ZooKeeper link's proxies"

    def proxies(self, node: ChaosNode) -> tuple[str, ...]:
        return (node.proxy_name, node.wan_proxy_name, node.zookeeper_proxy_name)

    def describe(self, node: ChaosNode) -> str:
        return f"{node.name} (the proxies of its two listeners and of its ZooKeeper link)"


@dataclass
class _Toxic:
    type: str
    attributes: Mapping[str, int] = field(default_factory=dict)
    streams: tuple[str, ...] = ("downstream", "upstream")


class WanFault(Fault):
    """Toxics on every WAN proxy of the source site: the mirror reads through them, the site's clients do not."""

    toxics: tuple[_Toxic, ...] = ()

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self._added: list[tuple[str, str]] = []

    def start(self, rng: random.Random) -> str:
        app = _local(self.app, self.name)
        for node in app.source.nodes:
            for toxic in self.toxics:
                for stream in toxic.streams:
                    name = f"wan_{toxic.type}_{stream}"
                    app.proxy.add_toxic(node.wan_proxy_name, toxic.type, name=name, stream=stream, **toxic.attributes)
                    self._added.append((node.wan_proxy_name, name))
        what = ", ".join(f"{t.type} {dict(t.attributes)}" for t in self.toxics)
        return f"the WAN {self.app.source.name} -> {self.app.target.name} ({what})"

    def heal(self) -> None:
        while self._added:
            proxy, name = self._added.pop()
            with contextlib.suppress(ChaosError):
                self.app.proxy.remove_toxic(proxy, name)


def _wan(name: str, description: str, *toxics: _Toxic) -> type[Fault]:
    return type(
        name.title().replace("-", ""), (WanFault,), {"name": name, "description": description, "toxics": toxics}
    )


class _DiskFault(Fault):
    """A disk nemesis of :mod:`chaos.nemesis` on a random source node's XFS log dir (``disks`` appliances)."""

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self.nemesis: NemesisContext | None = None

    @abc.abstractmethod
    def make(self, image: XfsImage, node: ChaosNode, rng: random.Random) -> NemesisContext:
        raise NotImplementedError

    def start(self, rng: random.Random) -> str:
        app = _local(self.app, self.name)
        nodes = [n for n in app.source.nodes if n.running and n.name in app.images]
        if not nodes:
            raise ChaosError(f"{self.name} needs a running source node with an XFS log dir (scenario with disks)")
        node = rng.choice(nodes)
        self.nemesis = self.make(app.images[node.name], node, rng)
        self.nemesis.start()
        target = str(getattr(self.nemesis, "target", ""))
        return target if node.name in target else f"{node.name}: {target}"

    def heal(self) -> None:
        if self.nemesis is not None:
            self.nemesis.heal()
            self.nemesis = None


class DiskFullFault(_DiskFault):
    name = "disk-full"
    description = "fill a source node's XFS log dir to the last few KB (ENOSPC); heal frees it and restarts the node"

    def make(self, image: XfsImage, node: ChaosNode, rng: random.Random) -> NemesisContext:
        self.node = node
        return DiskFull(image)

    def heal(self) -> None:
        had = self.nemesis is not None
        super().heal()
        if had:  # the node took the dir offline; only a restart brings it back (as in Kafka)
            self.node.stop()
            self.node.start()


class FailingDirFault(_DiskFault):
    name = "disk-failing"
    description = "a source node's XFS log dir starts failing with EIO (xfs shutdown); heal remounts and restarts it"

    def make(self, image: XfsImage, node: ChaosNode, rng: random.Random) -> NemesisContext:
        return FailingDir(image, node)


class ReadOnlyDirFault(_DiskFault):
    name = "disk-readonly"
    description = (
        "a source node's XFS log dir turns read-only (EROFS for new files); heal restores it, restarts the node"
    )

    def make(self, image: XfsImage, node: ChaosNode, rng: random.Random) -> NemesisContext:
        return ReadOnlyDir(image, node)


class TornTailFault(Fault):
    name = "torn-tail"
    description = "kill -9 a source node, cut or garble the last 64 bytes of an active segment, restart it"

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self.nemesis: TornTail | None = None

    def start(self, rng: random.Random) -> str:
        app = _local(self.app, self.name)
        node = rng.choice([n for n in app.source.nodes if n.running])
        mode: Literal["cut", "garble"] = "cut" if rng.random() < 0.5 else "garble"
        self.nemesis = TornTail(node, mode, 64, rng=rng, topics={self.topic})
        self.nemesis.start()
        return "; ".join(str(torn) for torn in self.nemesis.torn) or self.nemesis.target

    def heal(self) -> None:
        if self.nemesis is not None:
            self.nemesis.heal()
            self.nemesis = None


@dataclass(frozen=True)
class FaultSpec:
    name: str
    description: str
    make: Callable[[Sites, str], Fault]


def _spec(cls: type[Fault]) -> FaultSpec:
    return FaultSpec(cls.name, cls.description, cls)


FAULTS: dict[str, FaultSpec] = {
    spec.name: spec
    for spec in [
        _spec(_node_fault("kill", "leader", "kill -9 the leader of a partition; heal restarts it on its data")),
        _spec(_node_fault("kill", "follower", "kill -9 a follower of a partition; heal restarts it")),
        _spec(_node_fault("kill", "controller", "kill -9 the controller; heal restarts it")),
        _spec(_node_fault("kill", "random", "kill -9 a random node; heal restarts it")),
        _spec(_node_fault("kill", "site", "kill -9 every node of east at once; heal restarts them all")),
        _spec(
            _node_fault(
                "kill",
                "txn-coordinator",
                "kill -9 the transaction coordinator of the transactional workload's id; heal restarts it",
            )
        ),
        _spec(
            _node_fault(
                "kill",
                "output-leader",
                "kill -9 the leader of a partition of the transactional workload's output; heal restarts it",
            )
        ),
        _spec(_node_fault("pause", "leader", "SIGSTOP the leader of a partition; heal sends SIGCONT")),
        _spec(_node_fault("pause", "follower", "SIGSTOP a follower of a partition; heal sends SIGCONT")),
        _spec(_node_fault("pause", "controller", "SIGSTOP the controller; heal sends SIGCONT")),
        _spec(_node_fault("pause", "random", "SIGSTOP a random node; heal sends SIGCONT")),
        _spec(_node_fault("pause", "site", "SIGSTOP every node of east at once; heal sends SIGCONT")),
        _spec(ZooKeeperExpiry),
        _spec(ZooKeeperLoss),
        _spec(IsolateNode),
        _spec(
            _wan(
                "wan-latency",
                "200 ms latency with 100 ms jitter on the WAN, both ways",
                _Toxic("latency", {"latency": 200, "jitter": 100}),
            )
        ),
        _spec(_wan("wan-bandwidth", "the WAN capped at 64 KB/s each way", _Toxic("bandwidth", {"rate": 64}))),
        _spec(
            _wan(
                "wan-blackhole",
                "no byte crosses the WAN; connections stay open and TCP keeps retrying (held, not dropped)",
                _Toxic("packet_loss", {"probability": 100}),
            )
        ),
        _spec(
            _wan(
                "wan-packet-loss",
                "10 % of the WAN's segments lost and retransmitted 200 ms later (doubling when lost again)",
                _Toxic("packet_loss", {"probability": 10, "rto_ms": 200}),
            )
        ),
        _spec(
            _wan(
                "wan-slicer",
                "the WAN cuts every write into 32-96 byte slices, 500 us apart",
                _Toxic("slicer", {"average_size": 64, "size_variation": 32, "delay": 500}),
            )
        ),
        _spec(
            _wan(
                "wan-reset",
                "every WAN connection is reset after 500 ms",
                _Toxic("reset_peer", {"timeout": 500}, ("downstream",)),
            )
        ),
    ]
}


class ResetLeader(Fault):
    """The duplicate control's fault: answers from a partition's leader never arrive (the connection is reset).

    Requests get through and are written; their answers are lost with the connection, so a
    producer without idempotence retries a write that is already in the log.
    """

    name = "reset-leader"
    description = "reset every connection to a partition's leader 200 ms after it opens (answers lost, writes kept)"

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self._added: list[tuple[str, str]] = []

    def start(self, rng: random.Random) -> str:
        app = _local(self.app, self.name)
        leader, partition = find_leader(app.source, self.topic, rng)
        node = app.source.node(leader.broker_id)
        app.proxy.add_toxic(node.proxy_name, "reset_peer", name="reset_leader", stream="downstream", timeout=200)
        self._added.append((node.proxy_name, "reset_leader"))
        return f"{node.name}, leader of {self.topic}[{partition}]: its connections reset after 200 ms"

    def heal(self) -> None:
        while self._added:
            proxy, name = self._added.pop()
            with contextlib.suppress(ChaosError):
                _local(self.app, self.name).proxy.remove_toxic(proxy, name)


class TruncateTail(Fault):
    """The truncation control's fault: the topic's committed tail removed under its consumers.

    What ``strait failover reverse`` does to an old primary, done to a live topic: fence it,
    truncate every partition at the start of the batch that holds the offset :data:`RECORDS`
    records below its end (a log is cut by whole batches; acknowledged writes and offsets the
    group already committed go), unfence it. Consumers then find their position out of range
    and start again from the beginning, and the group commits lower offsets.
    """

    name = "truncate-tail"
    description = "fence the topic, truncate each partition 200 records below its end under its consumers, unfence"
    RECORDS = 200

    def start(self, rng: random.Random) -> str:
        consumer = Consumer({"bootstrap.servers": self.app.source.bootstrap, "group.id": "chaos-truncate"})
        try:
            meta = consumer.list_topics(self.topic, timeout=10).topics[self.topic]
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1] for p in meta.partitions
            }
        finally:
            consumer.close()
        cuts = {(self.topic, p): max(0, end - self.RECORDS) for p, end in ends.items()}
        trio.run(self._truncate, cuts)  # moves each cut to its batch's start
        return f"{self.topic}: partitions cut to {dict(sorted((p, c) for (_, p), c in cuts.items()))} (ends {ends})"

    async def _truncate(self, cuts: dict[tuple[str, int], int]) -> None:
        admin = await NodeAdmin.connect(self.app.source.bootstrap)
        try:
            await admin.alter_topic_configs(self.topic, {FENCED: "chaos: truncate-tail"}, [])
            try:
                site = SiteClient("source", self.app.source.bootstrap, client_id="chaos-truncate-tail")
                try:
                    for (topic, partition), offset in cuts.items():
                        cuts[topic, partition] = await _batch_start(site, topic, partition, offset)
                finally:
                    await site.aclose()
                results = await admin.truncate_partitions(cuts, timeout=60)
            finally:
                await admin.alter_topic_configs(self.topic, {}, [FENCED])
        finally:
            await admin.aclose()
        failed = [f"{r.topic}[{r.partition}]: {r.error_message}" for r in results.values() if r.error_code != 0]
        if failed:
            raise ChaosError(f"truncate-tail: {'; '.join(failed)}")

    def heal(self) -> None:
        pass  # the cut is the fault; the topic was unfenced at once


async def _batch_start(site: SiteClient, topic: str, partition: int, offset: int) -> int:
    """The base offset of the batch that holds ``offset`` (``offset`` itself at the log's end)."""
    conn = await site.open_leader(topic, partition)
    try:
        fetched = await fetch_partition(
            conn, topic, partition, Offset(offset), isolation_level=READ_UNCOMMITTED, max_wait_ms=0
        )
    finally:
        await conn.aclose()
    if fetched.error_code:
        raise ChaosError(f"truncate-tail: reading {topic}[{partition}] at {offset}: error {fetched.error_code}")
    for _position, header in complete_batches(fetched.records):
        if header.next_offset > offset:
            return int(header.base_offset)
    return offset


class LoseAcked(Fault):
    """The positive control's fault: writes acknowledged by a leader alone, then that leader lost.

    Pauses both followers of a partition, lets acks=1 writes land on the leader only for
    :data:`LAG_S`, kills the leader and resumes the followers: with unclean leader election a
    follower that never had those writes becomes the leader. Heal restarts the old leader (it
    truncates to the new leader's log).
    """

    name = "lose-acked"
    description = "pause a partition's followers, kill its leader, resume them (with unclean election: lost writes)"
    LAG_S = 3.0

    def __init__(self, app: Sites, topic: str) -> None:
        super().__init__(app, topic)
        self.leader: NodeControl | None = None

    def start(self, rng: random.Random) -> str:
        leader, partition = find_leader(self.app.source, self.topic, rng)
        followers = [n for n in self.app.source.nodes if n is not leader and n.running]
        for node in followers:
            node.pause()
        try:
            time.sleep(self.LAG_S)
            self.leader = leader
            leader.kill()
        finally:
            for node in followers:
                node.resume()
        return f"{leader.name} (leader of {self.topic}[{partition}]), after pausing {len(followers)} followers"

    def heal(self) -> None:
        if self.leader is not None and not self.leader.running:
            self.leader.start()
        self.leader = None


FAULTS[LoseAcked.name] = _spec(LoseAcked)
FAULTS[ResetLeader.name] = _spec(ResetLeader)
FAULTS[TruncateTail.name] = _spec(TruncateTail)
for _disk in (DiskFullFault, FailingDirFault, ReadOnlyDirFault, TornTailFault):
    FAULTS[_disk.name] = _spec(_disk)
