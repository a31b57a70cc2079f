"""One site as the mirror sees it: metadata (brokers, partition leaders) and a connection per broker.

The mirror talks to a site the way a Kafka client does: it bootstraps from any listed address,
learns brokers and leaders from Metadata, keeps one connection per broker, and forgets a
connection (and refreshes metadata) after any error, so it follows leader changes and
reconnects after outages. Every call is bounded by ``timeout``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

from node.client import ClientError, NodeConnection
from node.protocol import ApiKey, ErrorCode

log = logging.getLogger("strait.mirror.cluster")

METADATA_VERSION = 8


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
    """Metadata and per-broker connections for one site (``bootstrap`` is "h:p,h:p")."""

    def __init__(self, name: str, bootstrap: str, *, client_id: str, timeout: float = 10.0) -> None:
        self.name = name
        self.bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise ValueError(f"site {name!r}: no bootstrap address in {bootstrap!r}")
        self.client_id = client_id
        self.timeout = timeout
        self.brokers: dict[int, str] = {}
        self.topics: dict[str, TopicMeta] = {}
        self._conns: dict[int, NodeConnection] = {}
        self._locks: dict[int, trio.Lock] = {}
        self._metadata_lock = trio.Lock()

    async def aclose(self) -> None:
        for conn in list(self._conns.values()):
            await conn.aclose()
        self._conns.clear()

    # -- metadata ------------------------------------------------------------------------------

    async def refresh(self, topics: list[str] | None = None) -> dict[str, TopicMeta]:
        """Re-read metadata (all topics when ``topics`` is None) from any reachable broker."""
        async with self._metadata_lock:
            addresses = list(self.brokers.values()) + self.bootstrap
            last: Exception | None = None
            for address in dict.fromkeys(addresses):
                try:
                    async with await NodeConnection.open(
                        address, client_id=self.client_id, timeout=self.timeout
                    ) as conn:
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
            raise ClientError(f"site {self.name}: no broker reachable ({last})")

    def leader(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        p = meta.partitions.get(partition) if meta is not None else None
        return p.leader if p is not None else -1

    # -- connections -----------------------------------------------------------------------------

    async def connection(self, broker_id: int) -> NodeConnection:
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
                conn = await NodeConnection.open(address, client_id=self.client_id, timeout=self.timeout)
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

    async def forget(self, broker_id: int) -> None:
        """Drop a connection after an error; the next use reconnects."""
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()
