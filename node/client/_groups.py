"""Group verbs: consumer groups over the Kafka protocol (``strait groups ...``, the mirror's group offset sync).

``GroupAdmin`` sends them through an ``AdminClient``'s route; each group's requests go to the
group's coordinator, found with FindCoordinator every time (coordinators move).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from node.protocol import ApiKey, ErrorCode, Struct
from storage.records import NO_OFFSET, Offset

from ._admin import AdminClient
from ._connection import ClientError, NodeConnection
from ._data import LATEST
from ._site import NodeRoute

#: The admin's commit: no member, no generation (the group must have no members).
_ADMIN_GENERATION = -1


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
    offsets: dict[tuple[str, int], tuple[Offset, Offset]] = field(default_factory=dict)

    @property
    def lag(self) -> int:
        return sum(max(0, end - committed) for committed, end in self.offsets.values() if committed >= 0)


class GroupAdmin:
    """Group operations through ``admin``'s route (one node, or a whole site)."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin
        self.route = admin.route

    async def aclose(self) -> None:
        """Close the connections opened to coordinators other than the admin's node (a site keeps its own)."""
        if isinstance(self.route, NodeRoute):
            await self.route.aclose()

    async def _coordinator(self, group: str) -> NodeConnection:
        response = await self.route.on_admin(ApiKey.FIND_COORDINATOR, 2, lambda _v: {"key": group, "key_type": 0})
        if response.error_code:
            raise ClientError.from_code(
                response.error_code,
                f"finding the coordinator of group {group!r}{self.route.where}",
                getattr(response, "error_message", None),
            )
        return await self.route.coordinator(response.node_id, f"{response.host}:{response.port}")

    async def _request(self, group: str, api_key: ApiKey, highest: int, body: dict[str, Any]) -> Struct:
        conn = await self._coordinator(group)
        return await conn.request(api_key, conn.version(api_key, highest), body, timeout=self.route.timeout)

    async def list_groups(self) -> list[tuple[str, str]]:
        """(group id, protocol type) of every group, ListGroups asked of every broker (each lists its own)."""
        groups: set[tuple[str, str]] = set()
        for broker_id, response in await self.route.on_each_broker(ApiKey.LIST_GROUPS, 2, lambda _v: {}):
            if response.error_code:
                on_broker = f" on broker {broker_id}" if broker_id >= 0 else ""
                raise ClientError.from_code(response.error_code, f"listing groups{on_broker}{self.route.where}")
            groups.update((g.group_id, g.protocol_type) for g in response.groups)
        return sorted(groups)

    async def _describe(self, group: str) -> Any:
        response = await self._request(
            group, ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False}
        )
        return response.groups[0]

    async def describe(self, group: str) -> GroupDescription:
        """Members, and per partition the committed offset and the log end. Raises ClientError."""
        g = await self._describe(group)
        if g.error_code:
            raise ClientError.from_code(g.error_code, f"describing group {group!r}{self.route.where}")
        members = [GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host) for m in g.members]
        committed = await self.committed(group)
        ends: dict[tuple[str, int], Offset] = {}
        for topic in {t for t, _ in committed}:
            parts = [p for t, p in committed if t == topic]
            for p, end in (await self.admin.list_offsets(topic, parts, LATEST, strict=False)).items():
                ends[(topic, p)] = end
        offsets = {tp: (off, ends.get(tp, NO_OFFSET)) for tp, off in committed.items()}
        return GroupDescription(group, g.group_state, g.protocol_type, g.protocol_data, members, offsets)

    async def group_members(self, group: str) -> tuple[str, int]:
        """(state, number of members) of a group; ("Dead", 0) for a group the cluster does not know."""
        g = await self._describe(group)
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return "Dead", 0
        if g.error_code:
            raise ClientError.from_code(g.error_code, f"describing group {group!r}{self.route.where}")
        return g.group_state, len(g.members)

    async def committed(self, group: str) -> dict[tuple[str, int], Offset]:
        """The group's committed offsets (OffsetFetch v2+ with topics null: all of them)."""
        conn = await self._coordinator(group)
        v = conn.version(ApiKey.OFFSET_FETCH, 5)
        if v < 2:
            raise ClientError("fetching all of a group's offsets needs OffsetFetch v2 or later")
        response = await conn.request(
            ApiKey.OFFSET_FETCH, v, {"group_id": group, "topics": None}, timeout=self.route.timeout
        )
        if response.error_code:
            raise ClientError.from_code(response.error_code, f"fetching offsets of group {group!r}{self.route.where}")
        return {
            (t.name, p.partition_index): Offset(p.committed_offset)
            for t in response.topics
            for p in t.partitions
            if p.error_code == 0 and p.committed_offset >= 0
        }

    async def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], Offset]) -> dict[tuple[str, int], int]:
        """Commit as an administrator (generation -1, no member): refused unless the group is empty.

        Returns the partitions the coordinator refused, with their error codes.
        """
        topics: dict[str, list[dict[str, object]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": _ADMIN_GENERATION,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        response = await self._request(group, ApiKey.OFFSET_COMMIT, 7, body)
        return {
            (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions if p.error_code
        }

    async def commit(self, group: str, offsets: Mapping[tuple[str, int], Offset]) -> None:
        """``commit_offsets``, raising ClientError for the first partition refused."""
        refused = await self.commit_offsets(group, offsets)
        if refused:
            (topic, partition), code = next(iter(refused.items()))
            raise ClientError.from_code(code, f"committing {topic}-{partition} for {group!r}{self.route.where}")
