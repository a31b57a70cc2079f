"""One site as the mirror sees it: metadata (brokers, partition leaders) and a connection per broker.

The mirror talks to a site the way a Kafka client does: it bootstraps from any listed address,
learns brokers and leaders from Metadata, keeps one connection per broker, and forgets a
connection (and refreshes metadata) after any error, so it follows leader changes and
reconnects after outages. Every call is bounded by ``timeout``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from node.client import ClientError, NodeConnection
from node.protocol import ApiKey, ErrorCode, Struct

log = logging.getLogger("strait.mirror.cluster")

METADATA_VERSION = 8
TOPIC_RESOURCE = 2  # DescribeConfigs / IncrementalAlterConfigs resource type of a topic
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a topic's own override
CONFIG_SET, CONFIG_DELETE = 0, 1  # IncrementalAlterConfigs operations
DEFAULT_REPLICATION_FROM = 4  # CreateTopics takes replication_factor -1 (the broker's default) from v4 (KIP-464)


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

    def __init__(
        self,
        name: str,
        bootstrap: str,
        *,
        client_id: str,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self.ssl_context = ssl_context
        self.bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise ValueError(f"site {name!r}: no bootstrap address in {bootstrap!r}")
        self.client_id = client_id
        self.timeout = timeout
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
        """A new connection to one of the site's brokers (TLS when the site is configured so)."""
        return await NodeConnection.open(
            address, client_id=self.client_id, timeout=self.timeout, ssl_context=self.ssl_context
        )

    # -- metadata ------------------------------------------------------------------------------

    async def refresh(self, topics: list[str] | None = None) -> dict[str, TopicMeta]:
        """Re-read metadata (all topics when ``topics`` is None) from any reachable broker."""
        async with self._metadata_lock:
            addresses = list(self.brokers.values()) + self.bootstrap
            last: Exception | None = None
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

    async def forget(self, broker_id: int) -> None:
        """Drop a connection after an error; the next use reconnects."""
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()

    # -- topic administration (what a link runner needs) ------------------------------------------

    async def _admin(self, api_key: ApiKey, highest: int, make_body: Callable[[int], dict[str, Any]]) -> Struct:
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

    async def topic_overrides(self, topics: list[str]) -> dict[str, dict[str, str] | ClientError]:
        """Each topic's own config overrides (DescribeConfigs source 1), or the error for that topic."""
        if not topics:
            return {}
        body = await self._admin(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            lambda _v: {
                "resources": [
                    {"resource_type": TOPIC_RESOURCE, "resource_name": t, "configuration_keys": None} for t in topics
                ],
                "include_synonyms": False,
            },
        )
        out: dict[str, dict[str, str] | ClientError] = {}
        for result in body.results:
            if result.error_code:
                out[result.resource_name] = ClientError.from_code(
                    result.error_code,
                    f"DescribeConfigs {result.resource_name!r} on site {self.name}",
                    result.error_message,
                )
            else:
                out[result.resource_name] = {
                    c.name: c.value
                    for c in result.configs
                    if c.config_source == DYNAMIC_TOPIC_CONFIG and c.value is not None
                }
        return out

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> int:
        """Create ``name`` with the site's default replication factor; returns the factor asked for.

        -1 (the broker's ``default.replication.factor``) where CreateTopics v4 is served, else
        min(3, live brokers). Raises ClientError (its ``code`` TOPIC_ALREADY_EXISTS when it does).
        """
        replication = -1

        def body(version: int) -> dict[str, Any]:
            nonlocal replication
            replication = -1 if version >= DEFAULT_REPLICATION_FROM else min(3, len(self.brokers))
            return {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in sorted(configs.items())],
                    }
                ],
                "timeout_ms": int(self.timeout * 1000),
                "validate_only": False,
            }

        response = await self._admin(ApiKey.CREATE_TOPICS, 4, body)
        result = response.topics[0]
        if result.error_code:
            raise ClientError.from_code(
                result.error_code, f"creating topic {name!r} on site {self.name}", result.error_message
            )
        return replication

    async def create_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions (placed by the site). Raises ClientError."""
        response = await self._admin(
            ApiKey.CREATE_PARTITIONS,
            1,
            lambda _v: {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout_ms": int(self.timeout * 1000),
                "validate_only": False,
            },
        )
        result = response.results[0]
        if result.error_code:
            raise ClientError.from_code(
                result.error_code,
                f"growing topic {name!r} to {count} partitions on site {self.name}",
                result.error_message,
            )

    async def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None:
        """IncrementalAlterConfigs: set ``set_`` and remove ``delete`` from the topic's overrides."""
        ops = [{"name": k, "config_operation": CONFIG_SET, "value": v} for k, v in sorted(set_.items())]
        ops += [{"name": k, "config_operation": CONFIG_DELETE, "value": None} for k in sorted(delete)]
        response = await self._admin(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            0,
            lambda _v: {
                "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": ops}],
                "validate_only": False,
            },
        )
        result = response.responses[0]
        if result.error_code:
            raise ClientError.from_code(
                result.error_code, f"altering the configs of {name!r} on site {self.name}", result.error_message
            )

    # -- consumer groups (what group offset sync needs) ----------------------------------------------

    async def list_groups(self) -> list[str]:
        """Every consumer group of the site: ListGroups asked of every broker (each lists its own)."""
        if not self.brokers:
            await self.refresh()
        groups: set[str] = set()
        for broker_id in list(self.brokers):
            try:
                conn = await self.connection(broker_id)
                body = await conn.request(
                    ApiKey.LIST_GROUPS, conn.version(ApiKey.LIST_GROUPS, 2), {}, timeout=self.timeout
                )
            except ClientError:
                await self.forget(broker_id)
                raise
            if body.error_code:
                raise ClientError.from_code(body.error_code, f"ListGroups on broker {broker_id} of site {self.name}")
            groups.update(g.group_id for g in body.groups if g.protocol_type in ("consumer", ""))
        return sorted(groups)

    async def _coordinator(self, group: str) -> NodeConnection:
        if not self.brokers:
            await self.refresh()
        last: ClientError | None = None
        for broker_id in list(self.brokers):
            try:
                conn = await self.connection(broker_id)
                body = await conn.request(
                    ApiKey.FIND_COORDINATOR,
                    conn.version(ApiKey.FIND_COORDINATOR, 2),
                    {"key": group, "key_type": 0},
                    timeout=self.timeout,
                )
            except ClientError as exc:
                last = exc
                await self.forget(broker_id)
                continue
            if body.error_code:
                raise ClientError.from_code(
                    body.error_code, f"finding the coordinator of group {group!r} on site {self.name}"
                )
            if body.node_id not in self.brokers:
                await self.refresh()
            return await self.connection(body.node_id)
        raise ClientError(f"site {self.name}: no broker answered FindCoordinator ({last})")

    async def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (OffsetFetch v2+ with topics null: all of them)."""
        conn = await self._coordinator(group)
        body = await conn.request(
            ApiKey.OFFSET_FETCH,
            conn.version(ApiKey.OFFSET_FETCH, 5),
            {"group_id": group, "topics": None},
            timeout=self.timeout,
        )
        if body.error_code:
            raise ClientError.from_code(body.error_code, f"OffsetFetch of group {group!r} on site {self.name}")
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in body.topics
            for p in t.partitions
            if p.error_code == 0 and p.committed_offset >= 0
        }

    async def group_members(self, group: str) -> tuple[str, int]:
        """(state, number of members) of a group; ("Dead", 0) for a group the site does not know."""
        conn = await self._coordinator(group)
        body = await conn.request(
            ApiKey.DESCRIBE_GROUPS,
            conn.version(ApiKey.DESCRIBE_GROUPS, 4),
            {"groups": [group], "include_authorized_operations": False},
            timeout=self.timeout,
        )
        g = body.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return "Dead", 0
        if g.error_code:
            raise ClientError.from_code(g.error_code, f"DescribeGroups {group!r} on site {self.name}")
        return g.group_state, len(g.members)

    async def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Commit as an administrator (generation -1, no member): refused unless the group is empty.

        Returns the partitions the coordinator refused, with their error codes.
        """
        conn = await self._coordinator(group)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
            )
        body = await conn.request(
            ApiKey.OFFSET_COMMIT,
            conn.version(ApiKey.OFFSET_COMMIT, 7),
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
            timeout=self.timeout,
        )
        return {(t.name, p.partition_index): p.error_code for t in body.topics for p in t.partitions if p.error_code}

    async def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """Each partition's log end offset (ListOffsets LATEST at its leader); -1 where unknown."""
        out = dict.fromkeys(partitions, -1)
        by_leader: dict[int, list[int]] = {}
        for p in partitions:
            by_leader.setdefault(self.leader(topic, p), []).append(p)
        if -1 in by_leader:
            await self.refresh([topic])
            by_leader = {}
            for p in partitions:
                by_leader.setdefault(self.leader(topic, p), []).append(p)
        for leader, parts in by_leader.items():
            if leader < 0:
                continue
            try:
                conn = await self.connection(leader)
                body = await conn.request(
                    ApiKey.LIST_OFFSETS,
                    conn.version(ApiKey.LIST_OFFSETS, 1),
                    {
                        "replica_id": -1,
                        "topics": [
                            {"name": topic, "partitions": [{"partition_index": p, "timestamp": -1} for p in parts]}
                        ],
                    },
                    timeout=self.timeout,
                )
            except ClientError:
                await self.forget(leader)
                raise
            for t in body.topics:
                for part in t.partitions:
                    if part.error_code == 0:
                        out[part.partition_index] = part.offset
        return out
