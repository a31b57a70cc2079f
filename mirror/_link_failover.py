"""The failover half of a link runner: stop everything, the cut, the fencer, source contact.

``LinkRunner`` (``mirror._link``) inherits :class:`LinkFailover`; this module holds what a
failover changes in a running link, so that ``_link`` keeps to topic sync and copiers:

- ``fail_over`` stops the copiers *between appends* (``PartitionCopier.request_stop``), the topic
  sync pass and the group sync pass in flight, and keeps them stopped until ``restore``;
- ``measure_cut`` reads the cut afterwards (``mirror._failover``);
- while failed over with ``auto_fence``, a ``Fencer`` (``mirror._fencer``) keeps the source's
  selected topics fenced; ``restore`` stops it (fences stay set: lifting them is a deliberate act);
- ``sync_groups`` runs one group offset sync pass on demand;
- every answer or silence of the source is noted for ``source_reachable`` and
  ``last_source_contact_ms`` in the status.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from node.client import AdminClient, ClientError, SiteClient

from ._config import LinkConfig, MirrorError, SiteRef
from ._copier import MirrorTopic, PartitionCopier
from ._failover import CutPartition, CutUnavailable, FailoverRecord, PartitionToCut, measure_cut
from ._fencer import Fencer, off_status
from ._groups import GroupSync

log = logging.getLogger("strait.mirror.link")

LINK_KEY = "strait.mirror.link"
FAILED_OVER = "failed-over"  # the state of a failed-over link and of its partitions


class LinkFailover:
    """Failover, restore, group sync on demand and source contact for ``LinkRunner``.

    The runner calls ``_init_failover()`` in its constructor and provides the attributes and
    methods declared below (its topics, copiers, clients and nursery).
    """

    config: LinkConfig
    request_timeout_s: float
    state: str
    _paused: bool
    _topics: dict[str, MirrorTopic]
    _nursery: trio.Nursery | None
    _source: SiteClient | None
    _target: SiteClient | None
    _groups: GroupSync | None

    if TYPE_CHECKING:

        @property
        def mm2(self) -> bool: ...

        def _is_leader(self) -> bool: ...

        def _selects(self, topic: str) -> bool: ...

        def target_topic(self, topic: str) -> str: ...

        def _start_copies(self, topic: MirrorTopic) -> None: ...

        def _stop_copies(self, topic: MirrorTopic, state: str) -> None: ...

    def _init_failover(self) -> None:
        self._failover: FailoverRecord | None = None
        self._fencer: Fencer | None = None
        self._fencer_scope: trio.CancelScope | None = None
        self._sync_scope: trio.CancelScope | None = None  # the topic sync pass in flight
        self._group_scope: trio.CancelScope | None = None  # the periodic group sync pass in flight
        self._group_lock = trio.Lock()
        self._wake = trio.Event()  # set to start the next sync pass now
        self._contact_ok_ms: int | None = None  # the source's last answer (sync pass, probe, fencer)
        self._contact_failed_ms: int | None = None  # the last time it did not answer

    def _active_state(self) -> str:
        if self._failover is not None:
            return FAILED_OVER
        return "paused" if self._paused else "running"

    def _set_active_state(self) -> None:
        """Follow a pause, resume, failover or restore (not while starting or stopped)."""
        if self.state in ("running", "paused", FAILED_OVER):
            self.state = self._active_state()

    # -- failover ----------------------------------------------------------------------------------

    @property
    def failed_over(self) -> FailoverRecord | None:
        return self._failover

    def start_failed_over(self, record: FailoverRecord) -> None:
        """Before ``run``: start as failed over (a restart keeps a failover): nothing is copied
        or synced; the fencer runs when the record asks for it."""
        self._failover = record

    async def fail_over(self, record: FailoverRecord, *, stop_timeout_s: float) -> bool:
        """Stop copiers, topic sync and group sync until ``restore``; fence with a ``Fencer`` when
        ``record.auto_fence``. Idempotent (a second call only takes the new fence settings).

        Copiers are stopped between appends (``PartitionCopier.request_stop``), so the target's
        ends stay where they are from the return on. Returns True when every copier stopped
        within ``stop_timeout_s`` (else they were cancelled mid-way). Cancellable.
        """
        first = self._failover is None
        self._failover = record
        if first:
            log.warning("link %s: failed over: copying and syncing stop until a restore", self.config.name)
        for scope in (self._sync_scope, self._group_scope):
            if scope is not None:
                scope.cancel()
        self._set_active_state()
        copies = [copy for topic in self._topics.values() for copy in topic.copies.values()]
        with trio.move_on_after(stop_timeout_s) as bound:
            for copy in copies:
                if isinstance(copy.copier, PartitionCopier):
                    copy.copier.request_stop()
            for copy in copies:
                if isinstance(copy.copier, PartitionCopier):
                    await copy.copier.idle.wait()
            for topic in self._topics.values():
                self._stop_copies(topic, FAILED_OVER)
            for copy in copies:
                await copy.done.wait()
        if bound.cancelled_caught:
            for topic in self._topics.values():
                self._stop_copies(topic, FAILED_OVER)
            log.error(
                "link %s: failover: not every copier stopped between appends within %g s; cancelled them",
                self.config.name,
                stop_timeout_s,
            )
        self._update_fencer()
        return not bound.cancelled_caught

    def restore(self) -> None:
        """Undo ``fail_over``: the fencer stops (fences stay set), copiers run again (each from the
        target's end offset) unless paused, and a sync pass starts now."""
        if self._failover is None:
            return
        self._failover = None
        self._update_fencer()
        self._set_active_state()
        for topic in self._topics.values():
            self._start_copies(topic)
        self._wake.set()
        log.warning("link %s: restored after a failover: copying and syncing again", self.config.name)

    async def measure_cut(self, *, timeout: float) -> list[CutPartition]:
        """The cut of a failed-over link (``mirror._failover``): every partition the runner copied,
        plus the target's mirror topics of this link it has not seen (after a restart). Raises
        CutUnavailable when the target cannot say; cancellable."""
        temporary = self._target is None
        target = self._target or self._site_client(self.config.target)
        try:
            known = [
                PartitionToCut(topic.name, self.target_topic(topic.name), partition, progress)
                for topic in self._topics.values()
                for partition, progress in topic.progress.items()
            ]
            if not self.mm2:
                seen = {(p.topic, p.partition) for p in known}
                known += [p for p in await self._target_mirrors(target) if (p.topic, p.partition) not in seen]
            return await measure_cut(self.config.name, target, known, offset_preserving=not self.mm2, timeout=timeout)
        except ClientError as exc:
            raise CutUnavailable(f"cannot list the mirror topics of link {self.config.name!r}: {exc}") from None
        finally:
            if temporary:
                with trio.CancelScope(shield=True):
                    await target.aclose()

    async def _target_mirrors(self, target: SiteClient) -> list[PartitionToCut]:
        """The partitions of the target's topics marked as this link's mirrors (offset-preserving)."""
        topics = await target.refresh()
        names = sorted(name for name, meta in topics.items() if not meta.is_internal and self._selects(name))
        overrides = await AdminClient(target).topic_overrides(names)
        return [
            PartitionToCut(name, name, partition, None)
            for name in names
            if isinstance(found := overrides.get(name), dict) and found.get(LINK_KEY) == self.config.name
            for partition in sorted(topics[name].partitions)
        ]

    async def sync_groups(self) -> dict[str, Any]:
        """One group offset sync pass now (also when paused, failed over or not the leader);
        returns the group sync's status. Raises MirrorError when the link is not running."""
        if self._groups is None or self._nursery is None:
            raise MirrorError(f"link {self.config.name!r} is not running ({self.state}): no group offset sync to run")
        async with self._group_lock:
            await self._groups.sync_once()
        return self._groups.status()

    def _mirrors(self, topic: str) -> bool:
        """Whether group sync takes ``topic``'s offsets: a topic mirrored now, or in the cut."""
        if topic in self._topics:
            return True
        cut = self._failover.cut if self._failover is not None else None
        return cut is not None and any(c.topic == topic for c in cut)

    async def _group_sync_loop(self) -> None:
        """Group offset sync every ``group_sync_interval_s`` while leader, not paused, not failed over."""
        assert self._groups is not None
        while True:
            if self._is_leader() and not self._paused and self._failover is None:
                with trio.CancelScope() as self._group_scope:
                    async with self._group_lock:
                        await self._groups.sync_once()
                self._group_scope = None
            await trio.sleep(self.config.group_sync_interval_s)

    def _update_fencer(self) -> None:
        """Run a fencer exactly while failed over with auto_fence (and running)."""
        record = self._failover
        wanted = record is not None and record.auto_fence and self._nursery is not None
        if record is not None and wanted and self._fencer is not None:
            self._fencer.text = record.fence
        elif record is not None and wanted:
            assert self._source is not None and self._nursery is not None
            self._fencer = Fencer(
                self.config.name,
                AdminClient(self._source),
                lambda topic: not topic.startswith("__") and self._selects(topic),
                record.fence,
                interval_s=self.config.sync_interval_s,
                on_contact=self._note_contact,
            )
            self._fencer_scope = trio.CancelScope()
            self._nursery.start_soon(self._run_fencer, self._fencer, self._fencer_scope, name="fencer")
        elif not wanted and self._fencer is not None:
            assert self._fencer_scope is not None
            self._fencer_scope.cancel()
            self._fencer = self._fencer_scope = None

    @staticmethod
    async def _run_fencer(fencer: Fencer, scope: trio.CancelScope) -> None:
        with scope:
            await fencer.run()

    # -- source contact ------------------------------------------------------------------------

    def _note_contact(self, ok: bool) -> None:
        now = int(time.time() * 1000)
        if ok:
            self._contact_ok_ms = now
        else:
            self._contact_failed_ms = now

    async def _probe_source(self) -> None:
        assert self._source is not None
        try:
            await self._source.refresh()
        except (ClientError, OSError):
            self._note_contact(False)
        else:
            self._note_contact(True)

    def _site_client(self, site: SiteRef) -> SiteClient:
        return SiteClient(
            site.name,
            site.bootstrap,
            client_id=f"strait-mirror-{self.config.name}",
            timeout=self.request_timeout_s,
            ssl_context=site.tls.context() if site.tls is not None else None,
            sasl=site.sasl.credentials() if site.sasl is not None else None,
        )

    # -- status ------------------------------------------------------------------------------------

    def _failover_status(self, last_fetch_ms: int | None) -> dict[str, Any]:
        """The status fields of this half; ``last_fetch_ms`` is the copiers' latest successful fetch."""
        contacts = [t for t in (self._contact_ok_ms, last_fetch_ms) if t is not None]
        last_contact_ms = max(contacts) if contacts else None
        failed_ms = self._contact_failed_ms
        record = self._failover
        return {
            "source_reachable": last_contact_ms is not None and (failed_ms is None or last_contact_ms >= failed_ms),
            "last_source_contact_ms": last_contact_ms,
            "failed_over": None if record is None else {k: v for k, v in record.to_json().items() if k != "cut"},
            "fence": self._fencer.status() if self._fencer is not None else off_status(),
        }
