"""Group offset sync: copy the committed offsets of a link's groups to the target site.

Every ``group_sync_interval_s`` (5 s by default) one pass:

1. lists the source's consumer groups (ListGroups on every broker) and keeps those the link
   selects;
2. for each, reads its committed offsets on the source (OffsetFetch) and keeps the partitions
   of topics the link mirrors;
3. maps each offset to the target: in offset-preserving mode the offset itself (the mirror
   holds the same records at the same offsets); in MM2 mode the translation the link supplies
   (``translate``), which never skips a record;
4. clamps it to what the target holds (the mirror topic's log end offset): a consumer that
   starts on the target never waits past the end for records that are not there yet, and
   never skips a record once they arrive;
5. commits the result on the target (OffsetCommit as an administrator) only while the group
   has **no active members on the target**; a group with members there is left alone (it is
   being consumed on the target: its own commits win) and reported as such.

Only changed offsets are written. Errors are per group: one group's failure does not stop
the others, and every outcome shows in ``status()``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from node.client import LATEST, AdminClient, ClientError, GroupAdmin, SiteClient
from storage.records import NO_OFFSET

from ._config import LinkConfig
from ._offsets import SourceOffset, TargetOffset, source_offset, target_of, target_offset

log = logging.getLogger("strait.mirror.groups")

#: ListGroups protocol types of consumer groups ("" for groups that only commit offsets).
CONSUMER_PROTOCOL_TYPES = ("consumer", "")

#: (source topic, partition, source committed offset) -> (target topic, target offset), or None
#: when the offset cannot be mapped yet (MM2 mode without an offset sync for it).
Translate = Callable[[str, int, SourceOffset], Awaitable[tuple[str, TargetOffset] | None]]


#: Called with a group and its translated offsets as (source topic, partition, source offset,
#: target offset), before the target's members are looked at (MM2 mode: checkpoints).
Checkpointer = Callable[[str, list[tuple[str, int, SourceOffset, TargetOffset]]], Awaitable[None]]


async def same_offsets(topic: str, partition: int, offset: SourceOffset) -> tuple[str, TargetOffset] | None:
    """Offset-preserving mode: the mirror topic has the source topic's name and offsets."""
    return topic, target_of(offset)


@dataclass
class GroupState:
    """What the last pass did with one group."""

    group: str
    state: str = "new"  # synced, active-on-target, failed, nothing-to-sync
    synced_offsets: dict[tuple[str, int], TargetOffset] = field(default_factory=dict)  # as committed on the target
    clamped: int = 0  # partitions whose offset was held back to the target's end in the last pass
    last_sync_ms: int | None = None
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "state": self.state,
            "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(self.synced_offsets.items())],
            "clamped_partitions": self.clamped,
            "last_sync_ms": self.last_sync_ms,
            "last_error": self.last_error,
        }


class GroupSync:
    """Copies committed group offsets from ``source`` to ``target`` for one link.

    ``mirrored`` tells which source topics the link currently mirrors (the runner's view after
    its last topic sync); ``translate`` maps a source offset to the target (offset-preserving:
    ``same_offsets``).
    """

    def __init__(
        self,
        config: LinkConfig,
        source: SiteClient,
        target: SiteClient,
        mirrored: Callable[[str], bool],
        *,
        translate: Translate = same_offsets,
        prepare: Callable[[], Awaitable[object]] | None = None,
        checkpoint: Checkpointer | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.target = target
        self._source_groups = GroupAdmin(AdminClient(source))
        self._target_admin = AdminClient(target)
        self._target_groups = GroupAdmin(self._target_admin)
        self.mirrored = mirrored
        self.translate = translate
        self.prepare = prepare
        self.checkpoint = checkpoint
        self.groups: dict[str, GroupState] = {}
        self.passes = 0
        self.last_error: str | None = None

    async def run(self, is_leader: Callable[[], bool]) -> None:
        """Sync every ``group_sync_interval_s`` while ``is_leader()``; until cancelled."""
        interval = self.config.group_sync_interval_s
        while True:
            if is_leader():
                await self.sync_once()
            await trio.sleep(interval)

    async def sync_once(self) -> None:
        try:
            if self.prepare is not None:
                await self.prepare()  # MM2 mode: read the offset syncs written since the last pass
            groups = [
                g
                for g, protocol_type in await self._source_groups.list_groups()
                if protocol_type in CONSUMER_PROTOCOL_TYPES and self.config.mirrors_group(g)
            ]
        except ClientError as exc:
            self.last_error = f"listing the groups of site {self.source.name}: {exc}"
            log.warning("link %s: %s", self.config.name, self.last_error)
            return
        self.last_error = None
        for name in list(self.groups):
            if name not in groups:
                del self.groups[name]
        for group in groups:
            state = self.groups.setdefault(group, GroupState(group))
            try:
                await self._sync_group(state)
            except ClientError as exc:
                state.state = "failed"
                state.last_error = str(exc)
                log.warning("link %s: group %s: offset sync failed: %s", self.config.name, group, exc)
        self.passes += 1

    async def _sync_group(self, state: GroupState) -> None:
        group = state.group
        committed = await self._source_groups.committed(group)
        wanted: dict[tuple[str, int], TargetOffset] = {}
        translated: list[tuple[str, int, SourceOffset, TargetOffset]] = []
        for (topic, partition), committed_offset in committed.items():
            if not self.mirrored(topic):
                continue
            offset = source_offset(committed_offset)
            mapped = await self.translate(topic, partition, offset)
            if mapped is not None:
                target_topic, mapped_offset = mapped
                wanted[(target_topic, partition)] = mapped_offset
                translated.append((topic, partition, offset, mapped_offset))
        if not wanted:
            state.state = "nothing-to-sync"
            state.last_error = None
            return
        if self.checkpoint is not None:
            await self.checkpoint(group, translated)
        group_state, members = await self._target_groups.group_members(group)
        if members:
            if state.state != "active-on-target":
                log.info(
                    "link %s: group %s has %d active members on site %s (%s): not syncing its offsets while it does",
                    self.config.name,
                    group,
                    members,
                    self.target.name,
                    group_state,
                )
            state.state = "active-on-target"
            state.last_error = None
            return
        # Never past what the target holds.
        state.clamped = 0
        for topic in {t for t, _ in wanted}:
            parts = sorted(p for t, p in wanted if t == topic)
            ends = await self._target_admin.list_offsets(topic, parts, LATEST, strict=False)
            for p in parts:
                end = target_offset(ends.get(p, NO_OFFSET))
                if end < 0:
                    del wanted[(topic, p)]  # the target cannot say: leave it for the next pass
                elif wanted[(topic, p)] > end:
                    wanted[(topic, p)] = end
                    state.clamped += 1
        current = await self._target_groups.committed(group)
        changed = {tp: o for tp, o in wanted.items() if current.get(tp) != o}
        if changed:
            refused = await self._target_groups.commit_offsets(group, changed)
            if refused:
                raise ClientError(
                    f"site {self.target.name} refused offsets of group {group!r}: "
                    + ", ".join(f"{t}-{p}: error {code}" for (t, p), code in sorted(refused.items()))
                )
            log.debug("link %s: group %s: committed %s on site %s", self.config.name, group, changed, self.target.name)
        state.synced_offsets = wanted
        state.state = "synced"
        state.last_error = None
        state.last_sync_ms = int(time.time() * 1000)

    def status(self) -> dict[str, Any]:
        return {
            "passes": self.passes,
            "last_error": self.last_error,
            "groups": [self.groups[g].to_dict() for g in sorted(self.groups)],
        }
