"""A link runner: keeps a target site's mirror topics in step with the source site's topics.

Every ``sync_interval_s`` the runner makes one pass:

1. reads the source's topics (Metadata) and selects those the link mirrors;
2. reads the source topics' own config overrides (DescribeConfigs, ``config_source`` 1), and
   the target's for the topics it already has;
3. for each selected topic:

   - missing on the target: creates it with the source's partition count, the source's
     overrides and ``strait.mirror.link=<link>``, at the target's default replication factor;
   - present but not a mirror of this link (``strait.mirror.link`` unset or another link's):
     never touched; reported as a conflict, and any copier of it stopped (a failover removes
     the key to make a mirror writable: the link must not fight that);
   - a mirror of this link: partitions the source gained are added (CreatePartitions), and
     the overrides are made equal to the source's (IncrementalAlterConfigs; the link key is
     always kept);

4. runs one ``PartitionCopier`` per mirrored partition, starting new ones as partitions and
   topics appear, stopping those of topics the source deleted or the link no longer selects.
   Target data is never deleted.

A pass that fails (a site unreachable) is logged and shown in ``status()``; the next pass
tries again. Copiers handle their own outages (reconnect with backoff).

``fail_over`` stops all of it (copiers, topic sync, group sync) until ``restore``; the cut
is then measured with ``measure_cut`` (``mirror._failover``) and, when the failover asks for
it, a ``Fencer`` (``mirror._fencer``) fences the source's selected topics. Every answer the
source gives (a sync pass, a copier's fetch, the fencer) is noted: ``status()`` shows
``source_reachable`` and ``last_source_contact_ms``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import trio

from node.client import LATEST, AdminClient, ClientError, SiteClient, TopicMeta
from node.protocol import ErrorCode

from ._config import MM2, OFFSET_PRESERVING, LinkConfig, MirrorError
from ._copier import LatencyHistogram, MirrorTopic, PartitionCopier, RunningCopy
from ._fencer import FENCE_KEY
from ._groups import GroupSync
from ._link_failover import FAILED_OVER, LINK_KEY, LinkFailover
from ._mm2 import (
    MM2PartitionCopier,
    OffsetSyncStore,
    checkpoint_topic_name,
    emit_heartbeat,
    mm2_selects,
    offset_syncs_topic,
    remote_topic,
    write_checkpoints,
)
from ._offsets import NO_SOURCE_OFFSET, SourceOffset, TargetOffset
from ._security_sync import Ledger, SecuritySync

log = logging.getLogger("strait.mirror.link")

HEARTBEAT_INTERVAL_S = 1.0  # MirrorMaker 2's emit.heartbeats.interval.seconds default
# Overrides that name the source site's brokers: meaningless (or harmful) on the target.
SITE_SPECIFIC_CONFIGS = frozenset({"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})
# Overrides that belong to one site's topic and are neither copied to the target nor removed
# there: a fence (``strait.fenced``) is set and lifted by the failover tooling on each site.
SITE_LOCAL_CONFIGS = frozenset({FENCE_KEY})

__all__ = ["FAILED_OVER", "LINK_KEY", "LinkRunner", "Membership", "SoleMember"]


class Membership(Protocol):
    """How several mirror processes share a link's partitions (see ``mirror._members``).

    ``claim(topic, partition)`` is entered by the task that copies the partition: it waits
    until this process owns the partition, and cancels the body when ownership moves to
    another process (the task then waits again). ``leader`` is True on the one process that
    runs group offset sync.
    """

    @property
    def leader(self) -> bool: ...

    def claim(self, topic: str, partition: int) -> AbstractAsyncContextManager[None]: ...


class SoleMember:
    """The membership of a mirror process that runs a link alone: it owns every partition."""

    leader = True

    @asynccontextmanager
    async def claim(self, topic: str, partition: int) -> AsyncIterator[None]:
        yield


class LinkRunner(LinkFailover):
    """Runs one link: topic discovery, topic/partition/config sync and the partition copiers.

    ``run`` serves until cancelled; ``pause``, ``resume``, ``fail_over``, ``restore``,
    ``sync_groups`` and ``status`` are called from the same trio run (the sync ones do not block).
    """

    def __init__(
        self,
        config: LinkConfig,
        *,
        fetch_max_wait_ms: int = 500,
        request_timeout_s: float = 10.0,
        membership: Membership | None = None,
        security_ledger: Ledger | None = None,
    ) -> None:
        self.config = config
        self.membership: Membership = membership if membership is not None else SoleMember()
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.request_timeout_s = request_timeout_s
        self.state = "stopped"  # stopped, starting, running, paused, failed-over
        self._paused = False
        self._init_failover()
        self._topics: dict[str, MirrorTopic] = {}
        self._conflicts: dict[str, str] = {}  # topic -> why the link leaves it alone
        self._source: SiteClient | None = None
        self._target: SiteClient | None = None
        self._nursery: trio.Nursery | None = None
        self._syncs = 0
        self._last_sync_ms: int | None = None
        self._last_sync_error: str | None = None
        self._groups: GroupSync | None = None
        self._offset_syncs: OffsetSyncStore | None = None
        self._heartbeats_sent = 0
        self._last_heartbeat_error: str | None = None
        self._security = SecuritySync(config, mm2=self.mm2, target_topic=self.target_topic, ledger=security_ledger)

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Mirror until cancelled. ``task_status.started()`` follows the first sync pass.

        Raises MirrorError before doing anything when the link's mode is not built yet or the
        runner is already running. Site outages are never raised: they are retried and shown in
        ``status()``. Cancellation stops every copier and closes the connections.
        """
        cfg = self.config
        if cfg.mode not in (OFFSET_PRESERVING, MM2):
            raise MirrorError(f"link {cfg.name!r}: unknown mode {cfg.mode!r}")
        if self._nursery is not None:
            raise MirrorError(f"link {cfg.name!r} is already running")
        source, target = self._site_client(cfg.source), self._site_client(cfg.target)
        self._source, self._target = source, target
        if self.mm2:
            self._offset_syncs = OffsetSyncStore(source, offset_syncs_topic(cfg.target.name))
            self._groups = GroupSync(
                cfg,
                source,
                target,
                self._mirrors,
                translate=self._mm2_translate,
                prepare=self._offset_syncs.load,
                checkpoint=self._mm2_checkpoint,
            )
        else:
            self._groups = GroupSync(cfg, source, target, self._mirrors)
        self.state = "starting"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._security.run)
                log.info("link %s: mirroring %s -> %s", cfg.name, cfg.source.name, cfg.target.name)
                next_pass = trio.current_time()
                if self._failover is None:
                    await self._sync_pass()
                self.state = self._active_state()
                nursery.start_soon(self._group_sync_loop)
                if self.mm2:
                    nursery.start_soon(self._heartbeats)
                self._update_fencer()
                task_status.started()
                while True:
                    next_pass += cfg.sync_interval_s
                    with trio.move_on_at(max(next_pass, trio.current_time())):
                        await self._wake.wait()
                    self._wake = trio.Event()
                    next_pass = trio.current_time()
                    if self._failover is None:
                        await self._sync_pass()
                    elif self._fencer is None:
                        await self._probe_source()  # keeps source_reachable current
        finally:
            self._nursery = None
            self._fencer = self._fencer_scope = None
            self.state = "stopped"
            for topic in self._topics.values():
                self._stop_copies(topic, "stopped")
            with trio.CancelScope(shield=True):
                await source.aclose()
                await target.aclose()

    def pause(self) -> None:
        """Stop every copier (mirrored offsets stay where they are); topic sync goes on."""
        if self._paused:
            return
        self._paused = True
        self._set_active_state()
        if self._failover is None:
            for topic in self._topics.values():
                self._stop_copies(topic, "paused")
        log.info("link %s: paused", self.config.name)

    def resume(self) -> None:
        """Restart the copiers (not while failed over); each resumes from the target's end offset."""
        if not self._paused:
            return
        self._paused = False
        self._set_active_state()
        for topic in self._topics.values():
            self._start_copies(topic)
        log.info("link %s: resumed", self.config.name)

    @property
    def paused(self) -> bool:
        return self._paused

    def _is_leader(self) -> bool:
        return self.membership.leader

    # -- modes -----------------------------------------------------------------------------------

    @property
    def mm2(self) -> bool:
        return self.config.mode == MM2

    def _selects(self, topic: str) -> bool:
        """Whether the link copies source ``topic`` (MM2 mode: also heartbeats; never a cycle)."""
        cfg = self.config
        if self.mm2:
            return mm2_selects(cfg.topics, cfg.source.name, cfg.target.name, topic)
        return cfg.mirrors_topic(topic)

    def target_topic(self, topic: str) -> str:
        """The name of source ``topic``'s copy on the target: the same, or ``<source>.<topic>`` in MM2 mode."""
        return remote_topic(self.config.source.name, topic) if self.mm2 else topic

    async def _mm2_translate(self, topic: str, partition: int, offset: SourceOffset) -> tuple[str, TargetOffset] | None:
        assert self._offset_syncs is not None
        downstream = self._offset_syncs.translate(topic, partition, offset)
        return None if downstream is None else (self.target_topic(topic), downstream)

    async def _mm2_checkpoint(self, group: str, entries: list[tuple[str, int, SourceOffset, TargetOffset]]) -> None:
        """Write MM2 checkpoints (source topic, partition, upstream, downstream) of ``group`` on the target."""
        assert self._target is not None
        cfg = self.config
        await write_checkpoints(
            self._target,
            cfg.source.name,
            [
                (group, checkpoint_topic_name(cfg.source.name, cfg.target.name, t), p, up, down, "")
                for t, p, up, down in entries
            ],
        )

    async def _heartbeats(self) -> None:
        """MM2 mode: a heartbeat into the target's ``heartbeats`` topic every second (leader only)."""
        assert self._target is not None
        while True:
            if self.membership.leader and not self._paused and self._failover is None:
                try:
                    await emit_heartbeat(self._target, self.config.source.name, self.config.target.name)
                    self._heartbeats_sent += 1
                    self._last_heartbeat_error = None
                except ClientError as exc:
                    if self._last_heartbeat_error is None:
                        log.warning(
                            "link %s: heartbeat to site %s failed: %s", self.config.name, self._target.name, exc
                        )
                    self._last_heartbeat_error = str(exc)
            await trio.sleep(HEARTBEAT_INTERVAL_S)

    # -- one sync pass -------------------------------------------------------------------------

    async def _sync_pass(self) -> None:
        try:
            with trio.CancelScope() as self._sync_scope:
                await self._sync()
            self._sync_scope = None
            if self._failover is not None:
                return  # a failover cancelled this pass: it stops syncing
        except (ClientError, OSError) as exc:
            self._last_sync_error = str(exc)
            log.warning(
                "link %s: topic sync failed: %s; retrying in %g s", self.config.name, exc, self.config.sync_interval_s
            )
        except Exception as exc:
            # Not an outage (those are ClientError): a bug or a malformed answer. Keep the
            # copiers going and show it; the next pass tries again.
            self._last_sync_error = f"{type(exc).__name__}: {exc}"
            log.exception("link %s: topic sync failed unexpectedly", self.config.name)
        else:
            self._last_sync_error = None
        self._syncs += 1
        self._last_sync_ms = int(time.time() * 1000)
        if self._failover is None and self.membership.leader:
            assert self._source is not None and self._target is not None
            with trio.CancelScope() as self._sync_scope:
                await self._security.sync(self._source, self._target)
            self._sync_scope = None

    async def _sync(self) -> None:
        assert self._source is not None and self._target is not None
        cfg = self.config
        try:
            source_topics = await self._source.refresh()
        except (ClientError, OSError):
            self._note_contact(False)
            raise
        self._note_contact(True)
        selected = {
            name: meta
            for name, meta in source_topics.items()
            if not meta.is_internal and self._selects(name) and meta.partitions
        }
        for name in list(self._topics):
            if name not in selected:
                why = "was deleted on the source" if name not in source_topics else "is no longer selected by the link"
                log.info("link %s: %s %s: its copiers stop; the target keeps its data", cfg.name, name, why)
                self._stop_copies(self._topics.pop(name), "stopped")
        for name in list(self._conflicts):
            if name not in selected:
                del self._conflicts[name]
        if not selected:
            return
        target_topics = await self._target.refresh()
        source_configs = await AdminClient(self._source).topic_overrides(sorted(selected))
        target_names = {name: self.target_topic(name) for name in selected}
        target_configs = await AdminClient(self._target).topic_overrides(
            sorted(t for t in target_names.values() if t in target_topics)
        )
        for name in sorted(selected):
            target_name = target_names[name]
            try:
                await self._sync_topic(
                    name,
                    selected[name],
                    source_configs.get(name),
                    target_topics.get(target_name),
                    target_configs.get(target_name),
                )
            except ClientError as exc:
                self._set_problem(self._topics.setdefault(name, MirrorTopic(name)), str(exc))
        if self._paused:
            await self._refresh_source_ends()

    async def _refresh_source_ends(self) -> None:
        """While paused no copier fetches: read each mirrored partition's source high watermark
        here, so the lag (and a failover's RPO, should the source then be lost) stays true."""
        assert self._source is not None
        admin = AdminClient(self._source)
        now = int(time.time() * 1000)
        for name, topic in sorted(self._topics.items()):
            if not topic.progress:
                continue
            ends = await admin.list_offsets(name, sorted(topic.progress), LATEST, strict=False)
            for p, end in ends.items():
                if end >= 0:
                    topic.progress[p].source_high_watermark = SourceOffset(end)
                    topic.progress[p].last_fetch_ms = now

    async def _sync_topic(
        self,
        name: str,
        source_meta: TopicMeta,
        source_configs: dict[str, str] | ClientError | None,
        target_meta: TopicMeta | None,
        target_configs: dict[str, str] | ClientError | None,
    ) -> None:
        assert self._target is not None
        link = self.config.name
        if isinstance(source_configs, ClientError):
            raise source_configs
        if source_configs is None:
            raise ClientError(f"site {self.config.source.name} did not describe the configs of {name!r}")
        wanted = {
            k: v
            for k, v in source_configs.items()
            if k not in SITE_SPECIFIC_CONFIGS and k not in SITE_LOCAL_CONFIGS and k != LINK_KEY
        }
        if not self.mm2:
            wanted[LINK_KEY] = link  # read-only, and marked as this link's
        partitions = len(source_meta.partitions)
        target_name = self.target_topic(name)

        if target_meta is None:
            try:
                replication = await AdminClient(self._target).create_topic(target_name, partitions, configs=wanted)
            except ClientError as exc:
                if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    return  # created meanwhile (by us or someone else): the next pass looks at it
                raise
            log.info(
                "link %s: created mirror topic %s on site %s: %d partitions, replication factor %s, configs %s",
                link,
                target_name,
                self._target.name,
                partitions,
                "the site's default" if replication == -1 else replication,
                wanted,
            )
            topic = self._topics.setdefault(name, MirrorTopic(name))
            topic.source_partitions = topic.target_partitions = partitions
            self._set_problem(topic, None)
            self._start_copies(topic)
            return

        if isinstance(target_configs, ClientError):
            raise target_configs
        if target_configs is None:
            raise ClientError(f"site {self._target.name} did not describe the configs of {name!r}")
        owner = target_configs.get(LINK_KEY)
        if owner != (None if self.mm2 else link):
            self._conflict(name, owner)
            return
        self._conflicts.pop(name, None)
        topic = self._topics.setdefault(name, MirrorTopic(name))
        problem = None
        target_partitions = len(target_meta.partitions)
        if partitions > target_partitions:
            await AdminClient(self._target).create_partitions(target_name, partitions)
            log.info(
                "link %s: %s grew on site %s: %d -> %d partitions on site %s",
                link,
                name,
                self.config.source.name,
                target_partitions,
                partitions,
                self._target.name,
            )
            target_partitions = partitions
        elif partitions < target_partitions:
            problem = (
                f"the source has {partitions} partitions but the mirror has {target_partitions} (was the source "
                f"topic deleted and created again?): copying partitions 0-{partitions - 1} only"
            )
        topic.source_partitions = partitions
        topic.target_partitions = target_partitions

        to_set = {k: v for k, v in wanted.items() if target_configs.get(k) != v}
        to_delete = [k for k in target_configs if k not in wanted and k not in SITE_LOCAL_CONFIGS]
        if to_set or to_delete:
            await AdminClient(self._target).alter_topic_configs(target_name, to_set, to_delete)
            log.info(
                "link %s: %s configs on site %s: set %s, removed %s",
                link,
                target_name,
                self._target.name,
                to_set,
                to_delete,
            )
        self._set_problem(topic, problem)
        self._start_copies(topic)

    def _set_problem(self, topic: MirrorTopic, problem: str | None) -> None:
        """Record a topic's sync problem (None: all well), logging only changes."""
        if problem != topic.problem:
            if problem is not None:
                log.warning("link %s: %s: %s", self.config.name, topic.name, problem)
            else:
                log.info("link %s: %s: in sync again", self.config.name, topic.name)
        topic.problem = problem

    def _conflict(self, name: str, owner: str | None) -> None:
        assert self._target is not None
        if self.mm2:
            whose = f"it is an offset-preserving mirror of link {owner!r}"
        else:
            whose = "it is not a mirror topic" if owner is None else f"it is a mirror of link {owner!r}"
        target_name = self.target_topic(name)
        reason = f"topic {target_name!r} exists on site {self._target.name} and {whose}: the link leaves it alone"
        if self._conflicts.get(name) != reason:
            log.warning("link %s: %s", self.config.name, reason)
        self._conflicts[name] = reason
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._stop_copies(topic, "stopped")

    # -- copiers -------------------------------------------------------------------------------

    def _start_copies(self, topic: MirrorTopic) -> None:
        """Start a copier for each partition both sides have that has none running (not when paused
        or failed over)."""
        if self._paused or self._failover is not None or self._nursery is None:
            return
        assert self._source is not None and self._target is not None
        for partition in range(min(topic.source_partitions, topic.target_partitions)):
            running = topic.copies.get(partition)
            if running is not None and not running.finished:
                continue
            copier: PartitionCopier | MM2PartitionCopier
            if self.mm2:
                copier = MM2PartitionCopier(
                    self._source,
                    self._target,
                    self.config.source.name,
                    self.config.target.name,
                    topic.name,
                    partition,
                    offset_syncs=self._offset_syncs,
                    link=self.config.name,
                    fetch_max_wait_ms=self.fetch_max_wait_ms,
                )
            else:
                copier = PartitionCopier(
                    self.config.name,
                    self._source,
                    self._target,
                    topic.name,
                    partition,
                    fetch_max_wait_ms=self.fetch_max_wait_ms,
                    fetch_max_bytes=self.config.fetch_max_bytes,
                    pipeline_fetches=self.config.pipeline_fetches,
                )
            progress = topic.progress.get(partition)
            if progress is None:
                topic.progress[partition] = copier.progress
            else:
                # Keep the counters and gaps; the mirrored offset is asked from the target again.
                progress.mirrored_offset = NO_SOURCE_OFFSET
                progress.state = "starting"
                copier.progress = progress
            copy = RunningCopy(copier)
            topic.copies[partition] = copy
            self._nursery.start_soon(self._run_copy, copy, name=f"mirror {topic.name}-{partition}")

    async def _run_copy(self, copy: RunningCopy) -> None:
        progress = copy.copier.progress
        with copy.scope:
            try:
                while True:  # a claim's body is cancelled when the partition moves to another process
                    progress.state = "unassigned"
                    async with self.membership.claim(progress.topic, progress.partition):
                        progress.mirrored_offset = NO_SOURCE_OFFSET  # ask the target: another process may have copied
                        progress.state = "starting"
                        await copy.copier.run()
                    await trio.lowlevel.checkpoint()
            except Exception as exc:
                # Outages are the copier's own business (it retries them); anything reaching here
                # is a bug: show it, keep the other partitions going, retry on the next pass.
                log.exception("link %s: copier of %s-%d failed", self.config.name, progress.topic, progress.partition)
                progress.state = "failed"
                progress.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                copy.finished = True
                copy.done.set()

    def _stop_copies(self, topic: MirrorTopic, state: str) -> None:
        for partition, copy in list(topic.copies.items()):
            copy.scope.cancel()
            copy.copier.progress.state = state
            del topic.copies[partition]

    # -- status --------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The link's state as plain JSON-able values: config, sync, per-partition progress, conflicts."""
        topics = {}
        totals: dict[str, Any] = {
            "lag_records": 0,
            "lag_bytes": 0,
            "lag_seconds": 0.0,
            "records_copied": 0,
            "bytes_copied": 0,
            "gap_records": 0,
            "partitions": 0,
        }
        latency = LatencyHistogram()
        now_ms = int(time.time() * 1000)
        last_fetch_ms: int | None = None
        for name in sorted(self._topics):
            topic = self._topics[name]
            parts = []
            for partition in sorted(topic.progress):
                progress = topic.progress[partition]
                entry = progress.to_dict(now_ms)
                parts.append(entry)
                latency.merge(progress.latency)
                totals["partitions"] += 1
                totals["lag_records"] += max(0, entry["lag_records"])
                totals["lag_bytes"] += max(0, entry["lag_bytes"])
                totals["lag_seconds"] = max(totals["lag_seconds"], entry["lag_seconds"])
                totals["records_copied"] += entry["records_copied"]
                totals["bytes_copied"] += entry["bytes_copied"]
                totals["gap_records"] += entry["gap_records"]
                if progress.last_fetch_ms is not None:
                    last_fetch_ms = max(last_fetch_ms or 0, progress.last_fetch_ms)
            topics[name] = {
                "target_topic": self.target_topic(name),
                "source_partitions": topic.source_partitions,
                "target_partitions": topic.target_partitions,
                "problem": topic.problem,
                "partitions": parts,
            }
        return {
            "link": self.config.to_dict(),
            "state": self.state,
            **self._failover_status(last_fetch_ms),
            "syncs": self._syncs,
            "last_sync_ms": self._last_sync_ms,
            "last_sync_error": self._last_sync_error,
            "security_sync": self._security.status(),
            "topics": topics,
            "conflicts": [{"topic": t, "reason": r} for t, r in sorted(self._conflicts.items())],
            "totals": totals,
            "latency": latency.to_dict(),
            "group_sync": self._groups.status() if self._groups is not None else None,
            "heartbeats": {"sent": self._heartbeats_sent, "last_error": self._last_heartbeat_error}
            if self.mm2
            else None,
        }
