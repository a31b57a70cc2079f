"""Routing: where a request goes. One site as a Kafka client sees it, or one node on its own.

``SiteClient`` talks to a site (a cluster) the way a Kafka client does: it bootstraps from any
listed address, learns brokers and leaders from Metadata, keeps one connection per broker, and
forgets a connection (and refreshes metadata) after any error, so it follows leader changes and
reconnects after outages. Every call is bounded by ``timeout``.

``NodeRoute`` sends everything to one node's connection (the ``strait topics`` / ``strait
groups`` commands). Both are a ``Route``: the admin and group verbs (``_admin``, ``_groups``)
are written once against that protocol.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import trio

from node.protocol import ApiKey, ErrorCode, Struct

from ._connection import ClientError, NodeConnection, SaslCredentials

METADATA_VERSION = 8

T = TypeVar("T")

#: Builds a request body for the version both sides speak.
MakeBody = Callable[[int], dict[str, Any]]
#: Builds a per-partition request body from the version and the partitions one leader gets.
PartitionsBody = Callable[[int, list[int]], dict[str, Any]]


class Route(Protocol):
    """Where the verbs of ``AdminClient`` and ``GroupAdmin`` send their requests."""

    #: Appended to error messages to say where a request went: "" or " on site <name>".
    where: str
    #: Seconds each request may take.
    timeout: float

    def known_brokers(self) -> int:
        """How many brokers the route knows of (0: it cannot tell)."""
        ...

    async def on_admin(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> Struct:
        """Send an admin request (to the controller where there is a choice). Raises ClientError
        when no node answers; Kafka error codes come back in the response."""
        ...

    async def on_each_broker(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> list[tuple[int, Struct]]:
        """Send the same request to every broker; (broker id, response) each. Raises ClientError."""
        ...

    async def on_leaders(
        self, topic: str, partitions: list[int], api_key: ApiKey, highest: int, make_body: PartitionsBody
    ) -> list[Struct]:
        """Send a per-partition request to the leaders of ``partitions`` (partitions without a
        known leader are left out). Raises ClientError."""
        ...

    async def coordinator(self, node_id: int, address: str) -> NodeConnection:
        """A connection to node ``node_id`` at ``address`` (a group coordinator), owned by the route."""
        ...

    async def drop(self, node_id: int, address: str) -> None:
        """Forget the connection ``coordinator`` gave for that node after it failed; the next call reconnects."""
        ...


class NodeRoute:
    """Every request on one node's connection (broker id -1 in answers); a coordinator elsewhere
    gets a connection of its own, opened with ``conn``'s TLS context and SASL credentials.

    ``aclose`` closes the connections it opened to coordinators (not ``conn``).
    """

    def __init__(self, conn: NodeConnection, *, timeout: float = 30.0, where: str = "") -> None:
        self.conn = conn
        self.timeout = timeout
        self.where = where
        self._others: dict[str, NodeConnection] = {}

    def known_brokers(self) -> int:
        return 0

    async def aclose(self) -> None:
        for conn in self._others.values():
            await conn.aclose()
        self._others.clear()

    async def _send(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> Struct:
        version = self.conn.version(api_key, highest)
        return await self.conn.request(api_key, version, make_body(version), timeout=self.timeout)

    async def on_admin(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> Struct:
        return await self._send(api_key, highest, make_body)

    async def on_each_broker(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> list[tuple[int, Struct]]:
        return [(-1, await self._send(api_key, highest, make_body))]

    async def on_leaders(
        self, topic: str, partitions: list[int], api_key: ApiKey, highest: int, make_body: PartitionsBody
    ) -> list[Struct]:
        return [await self._send(api_key, highest, lambda v: make_body(v, partitions))]

    async def coordinator(self, node_id: int, address: str) -> NodeConnection:
        if address == self.conn.address:
            return self.conn
        conn = self._others.get(address)
        if conn is None:
            conn = await NodeConnection.open(
                address, client_id=self.conn.client_id, ssl_context=self.conn.ssl_context, sasl=self.conn.sasl
            )
            self._others[address] = conn
        return conn

    async def drop(self, node_id: int, address: str) -> None:
        conn = self._others.pop(address, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()


@dataclass(frozen=True)
class PartitionMeta:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    error_code: int


@dataclass
class TopicMeta:
    name: str
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    is_internal: bool = False


class SiteClient:
    """Metadata and per-broker connections for one site (``bootstrap`` is "h:p,h:p"); every
    connection uses TLS with ``ssl_context`` and authenticates with ``sasl`` when they are given."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        *,
        client_id: str,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.name = name
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise ValueError(f"site {name!r}: no bootstrap address in {bootstrap!r}")
        self.client_id = client_id
        self.timeout = timeout
        self.where = f" on site {name}"
        self.brokers: dict[int, str] = {}
        self.controller_id = -1
        self.topics: dict[str, TopicMeta] = {}
        self._conns: dict[int, NodeConnection] = {}
        self._locks: dict[int, trio.Lock] = {}
        self._metadata_lock = trio.Lock()

    async def aclose(self) -> None:
        for conn in list(self._conns.values()):
            await conn.aclose()
        self._conns.clear()

    async def open(self, address: str) -> NodeConnection:
        """A new connection to one of the site's brokers (TLS and SASL when the site is configured so)."""
        return await NodeConnection.open(
            address, client_id=self.client_id, timeout=self.timeout, ssl_context=self.ssl_context, sasl=self.sasl
        )

    # -- metadata ------------------------------------------------------------------------------

    async def refresh(self, topics: list[str] | None = None) -> dict[str, TopicMeta]:
        """Re-read metadata (all topics when ``topics`` is None) from any reachable broker.

        Raises ClientError with the last broker's error (and its code) when none answers."""
        async with self._metadata_lock:
            addresses = list(self.brokers.values()) + self.bootstrap
            last: ClientError | None = None
            for address in dict.fromkeys(addresses):
                try:
                    async with await self.open(address) as conn:
                        body = await conn.request(
                            ApiKey.METADATA,
                            conn.version(ApiKey.METADATA, METADATA_VERSION),
                            {
                                "topics": None if topics is None else [{"name": t} for t in topics],
                                "allow_auto_topic_creation": False,
                            },
                            timeout=self.timeout,
                        )
                except ClientError as exc:
                    last = exc
                    continue
                self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in body.brokers}
                self.controller_id = body.controller_id
                fresh: dict[str, TopicMeta] = {}
                for t in body.topics:
                    if t.error_code not in (0, ErrorCode.LEADER_NOT_AVAILABLE):
                        continue
                    meta = TopicMeta(t.name, is_internal=bool(getattr(t, "is_internal", False)))
                    for p in t.partitions:
                        meta.partitions[p.partition_index] = PartitionMeta(
                            t.name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1), p.error_code
                        )
                    fresh[t.name] = meta
                if topics is None:
                    self.topics = fresh
                else:
                    self.topics.update(fresh)
                return fresh
            # The last failure's code: a refused SASL authentication stays recognisable as one.
            code = last.code if last is not None else ErrorCode.UNKNOWN_SERVER_ERROR
            raise ClientError(f"site {self.name}: no broker reachable ({last})", code)

    def known_brokers(self) -> int:
        return len(self.brokers)

    def leader(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        p = meta.partitions.get(partition) if meta is not None else None
        return p.leader if p is not None else -1

    # -- connections -----------------------------------------------------------------------------

    async def connection(self, broker_id: int) -> NodeConnection:
        """The shared connection to ``broker_id`` (opened on first use). Raises ClientError."""
        conn = self._conns.get(broker_id)
        if conn is not None:
            return conn
        address = self.brokers.get(broker_id)
        if address is None:
            raise ClientError(f"site {self.name}: broker {broker_id} is not in the metadata")
        lock = self._locks.setdefault(broker_id, trio.Lock())
        async with lock:
            conn = self._conns.get(broker_id)
            if conn is None:
                conn = await self.open(address)
                self._conns[broker_id] = conn
        return conn

    async def leader_connection(self, topic: str, partition: int) -> tuple[int, NodeConnection]:
        leader = self.leader(topic, partition)
        if leader < 0:
            await self.refresh([topic])
            leader = self.leader(topic, partition)
            if leader < 0:
                raise ClientError(
                    f"site {self.name}: {topic}-{partition} has no leader", ErrorCode.LEADER_NOT_AVAILABLE
                )
        return leader, await self.connection(leader)

    async def open_leader(self, topic: str, partition: int) -> NodeConnection:
        """A new connection (the caller's own) to the partition's leader, from fresh metadata.

        Raises ClientError: UNKNOWN_TOPIC_OR_PARTITION when the site lacks the topic,
        LEADER_NOT_AVAILABLE when the partition has no leader, or the connection's error.
        """
        await self.refresh([topic])
        leader = self.leader(topic, partition)
        address = self.brokers.get(leader)
        if leader < 0 or address is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic not in self.topics else ErrorCode.LEADER_NOT_AVAILABLE
            raise ClientError.from_code(code, f"site {self.name}: {topic}-{partition} has no leader")
        return await self.open(address)

    async def forget(self, broker_id: int) -> None:
        """Drop a connection after an error; the next use reconnects."""
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()

    # -- routing -----------------------------------------------------------------------------------

    async def on_leader(
        self, topic: str, partition: int, call: Callable[[NodeConnection], Awaitable[T]], *, attempts: int = 5
    ) -> T:
        """Run ``call`` on the partition leader's shared connection; after an error forget the
        connection, refresh the metadata and try again (backing off 0.2 s, 0.4 s, ...: a topic just
        created may not be served by its leader yet), up to ``attempts`` times. Raises the last
        ClientError. Only for calls that may safely run twice."""
        last: ClientError | None = None
        for attempt in range(attempts):
            broker = -1
            if attempt:
                await trio.sleep(0.2 * attempt)
            try:
                if self.leader(topic, partition) < 0 or attempt > 0:
                    await self.refresh([topic])
                broker, conn = await self.leader_connection(topic, partition)
                return await call(conn)
            except ClientError as exc:
                last = exc
                if broker >= 0:
                    await self.forget(broker)
        assert last is not None
        raise last

    async def on_admin(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> Struct:
        """Send an admin request to the controller, or to the other brokers in turn when it fails.

        ``make_body`` gets the version both sides speak. Raises ClientError when no broker answers.
        """
        if not self.brokers:
            await self.refresh()
        order = [self.controller_id] if self.controller_id in self.brokers else []
        order += [b for b in self.brokers if b != self.controller_id]
        last: ClientError | None = None
        for broker_id in order:
            try:
                conn = await self.connection(broker_id)
                version = conn.version(api_key, highest)
                return await conn.request(api_key, version, make_body(version), timeout=2 * self.timeout)
            except ClientError as exc:
                last = exc
                await self.forget(broker_id)
        raise ClientError(f"site {self.name}: no broker answered {api_key.name} ({last})")

    async def on_each_broker(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> list[tuple[int, Struct]]:
        """Send the request to every broker of the site in turn; the first failure forgets that
        broker's connection and is raised."""
        if not self.brokers:
            await self.refresh()
        out: list[tuple[int, Struct]] = []
        for broker_id in list(self.brokers):
            try:
                conn = await self.connection(broker_id)
                version = conn.version(api_key, highest)
                out.append((broker_id, await conn.request(api_key, version, make_body(version), timeout=self.timeout)))
            except ClientError:
                await self.forget(broker_id)
                raise
        return out

    async def on_leaders(
        self, topic: str, partitions: list[int], api_key: ApiKey, highest: int, make_body: PartitionsBody
    ) -> list[Struct]:
        """One request per leader of ``partitions`` (metadata refreshed first when one has no known
        leader; partitions still without one are left out). A failure forgets that leader's
        connection and is raised."""
        by_leader = self._by_leader(topic, partitions)
        if -1 in by_leader:
            await self.refresh([topic])
            by_leader = self._by_leader(topic, partitions)
        out: list[Struct] = []
        for leader, parts in by_leader.items():
            if leader < 0:
                continue
            try:
                conn = await self.connection(leader)
                version = conn.version(api_key, highest)
                out.append(await conn.request(api_key, version, make_body(version, parts), timeout=self.timeout))
            except ClientError:
                await self.forget(leader)
                raise
        return out

    def _by_leader(self, topic: str, partitions: list[int]) -> dict[int, list[int]]:
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            by_leader.setdefault(self.leader(topic, p), []).append(p)
        return by_leader

    async def coordinator(self, node_id: int, address: str) -> NodeConnection:
        """The shared connection to broker ``node_id`` (metadata refreshed when it is new)."""
        if node_id not in self.brokers:
            await self.refresh()
        return await self.connection(node_id)

    async def drop(self, node_id: int, address: str) -> None:
        await self.forget(node_id)
