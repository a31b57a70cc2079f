"""Consumer-group administration over the Kafka protocol (``strait groups ...``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from node.protocol import ApiKey

from ._admin import AdminClient
from ._connection import ClientError, NodeConnection

LATEST = -1


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    # (topic, partition) -> (committed offset, log end offset)
    offsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    @property
    def lag(self) -> int:
        return sum(max(0, end - committed) for committed, end in self.offsets.values() if committed >= 0)


class GroupAdmin:
    """Group operations; talks to the group's coordinator, found with FindCoordinator."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin
        self._coordinators: dict[str, NodeConnection] = {}

    async def aclose(self) -> None:
        for conn in self._coordinators.values():
            await conn.aclose()

    async def _coordinator(self, group: str) -> NodeConnection:
        conn = self._coordinators.get(group)
        if conn is not None:
            return conn
        bootstrap = self.admin.conn
        v = bootstrap.version(ApiKey.FIND_COORDINATOR, 2)
        resp = await bootstrap.request(ApiKey.FIND_COORDINATOR, v, {"key": group, "key_type": 0})
        if resp.error_code:
            raise ClientError.from_code(
                resp.error_code, f"finding the coordinator of group {group!r}", resp.error_message
            )
        address = f"{resp.host}:{resp.port}"
        conn = (
            bootstrap if address == bootstrap.address else await NodeConnection.open(address, client_id="strait-admin")
        )
        self._coordinators[group] = conn
        return conn

    async def list_groups(self) -> list[tuple[str, str]]:
        conn = self.admin.conn
        resp = await conn.request(ApiKey.LIST_GROUPS, conn.version(ApiKey.LIST_GROUPS, 2), {})
        if resp.error_code:
            raise ClientError.from_code(resp.error_code, "listing groups")
        return sorted((g.group_id, g.protocol_type) for g in resp.groups)

    async def describe(self, group: str) -> GroupDescription:
        conn = await self._coordinator(group)
        v = conn.version(ApiKey.DESCRIBE_GROUPS, 4)
        resp = await conn.request(
            ApiKey.DESCRIBE_GROUPS, v, {"groups": [group], "include_authorized_operations": False}
        )
        g = resp.groups[0]
        if g.error_code:
            raise ClientError.from_code(g.error_code, f"describing group {group!r}")
        members = [GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host) for m in g.members]
        committed = await self.committed(group)
        ends: dict[tuple[str, int], int] = {}
        for topic in {t for t, _ in committed}:
            parts = [p for t, p in committed if t == topic]
            for p, end in (await self.admin.list_offsets(topic, parts, LATEST, strict=False)).items():
                ends[(topic, p)] = end
        offsets = {tp: (off, ends.get(tp, -1)) for tp, off in committed.items()}
        return GroupDescription(group, g.group_state, g.protocol_type, g.protocol_data, members, offsets)

    async def committed(self, group: str) -> dict[tuple[str, int], int]:
        conn = await self._coordinator(group)
        v = conn.version(ApiKey.OFFSET_FETCH, 5)
        if v < 2:
            raise ClientError("fetching all of a group's offsets needs OffsetFetch v2 or later")
        resp = await conn.request(ApiKey.OFFSET_FETCH, v, {"group_id": group, "topics": None})
        if resp.error_code:
            raise ClientError.from_code(resp.error_code, f"fetching offsets of group {group!r}")
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in resp.topics
            for p in t.partitions
            if p.error_code == 0 and p.committed_offset >= 0
        }

    async def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit as an administrator (no member, generation -1): the group must have no members."""
        conn = await self._coordinator(group)
        v = conn.version(ApiKey.OFFSET_COMMIT, 7)
        topics: dict[str, list[dict[str, object]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        resp = await conn.request(ApiKey.OFFSET_COMMIT, v, body)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise ClientError.from_code(p.error_code, f"committing {t.name}-{p.partition_index} for {group!r}")
