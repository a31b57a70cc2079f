"""The offset syncs of an mm2 link in memory, and MM2's offset translation.

An offset sync ``(upstream u, downstream d)`` says: source record ``u`` is target record ``d``.
Translation of a consumer group's committed source offset ``c`` (the next record it would
read) follows MM2's ``OffsetSyncStore.translateDownstream``: take the latest sync with
``u <= c``; the answer is ``d`` when ``u == c``, else ``d + 1``. It may re-read records (those
between the sync and ``c``) but never skips one: every source record at or after ``c`` is after
``u``, so its copy is after ``d``. No sync at or below ``c`` means no translation (None).

The store keeps, per source partition, the latest sync, the oldest, and a thinned history in
between (spaced roughly exponentially back from the latest, as MM2 does), so that groups
lagging behind the flow still translate to a nearby point. A sync whose offsets go backwards on either
side (the source or the target was truncated or re-created) discards the history.
"""

from __future__ import annotations

import bisect
import logging

import trio

from node.client import (
    LATEST,
    READ_UNCOMMITTED,
    ClientError,
    SiteClient,
    complete_batches,
    fetch_partition,
    list_offset,
)
from node.protocol import ErrorCode
from storage.records import Offset, RecordBatch

from ._mm2_formats import (
    MM2FormatError,
    OffsetSync,
    decode_offset_sync,
    decode_offset_sync_key,
)
from ._offsets import SourceOffset, TargetOffset, source_offset, target_offset

log = logging.getLogger("strait.mirror.mm2")

DEFAULT_HISTORY = 64


class OffsetSyncStore:
    """Offset syncs read from an offset-syncs topic (partition 0) on ``site``, or added by hand.

    ``await load()`` reads what was written since the last load; ``translate`` answers from
    what is in memory. Syncs that do not decode are skipped (logged once each). Several tasks
    may share one store: ``load`` is serialized.
    """

    def __init__(self, site: SiteClient | None, topic: str, *, history: int = DEFAULT_HISTORY) -> None:
        self.site = site
        self.topic = topic
        self.history_size = max(2, history)
        self.position = Offset(0)  # next offset of the offset-syncs topic to read
        self.loaded = False  # read to the end at least once
        self.malformed = 0
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}  # ascending by upstream offset
        self._lock = trio.Lock()

    # -- in memory -------------------------------------------------------------------------------

    def add(self, sync: OffsetSync) -> None:
        """Take a sync read from the topic (in the topic's order)."""
        key = (sync.topic, sync.partition)
        syncs = self._syncs.get(key)
        if not syncs:
            self._syncs[key] = [sync]
            return
        last = syncs[-1]
        if sync.upstream == last.upstream and sync.downstream == last.downstream:
            return
        if sync.upstream <= last.upstream or sync.downstream <= last.downstream:
            # Offsets went backwards: the older syncs describe another life of one of the partitions.
            self._syncs[key] = [sync]
            return
        syncs.append(sync)
        if len(syncs) > 2 * self.history_size:
            self._syncs[key] = _thin(syncs)

    def latest(self, topic: str, partition: int) -> OffsetSync | None:
        syncs = self._syncs.get((topic, partition))
        return syncs[-1] if syncs else None

    def history(self, topic: str, partition: int) -> list[OffsetSync]:
        """The syncs kept for a source partition, oldest first."""
        return list(self._syncs.get((topic, partition), ()))

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._syncs)

    def translate(self, topic: str, partition: int, upstream_offset: SourceOffset) -> TargetOffset | None:
        """Where a group that committed ``upstream_offset`` on the source resumes on the target.

        MM2's rule on the latest kept sync at or below the offset: its downstream offset when
        equal, plus one when the offset is past it. None when no kept sync is at or below it
        (no sync yet, or the offset is older than the history), or when the answer would be
        negative (the offset of an anchor sync, a record before the copy began).
        """
        syncs = self._syncs.get((topic, partition))
        if not syncs:
            return None
        i = bisect.bisect_right([s.upstream for s in syncs], upstream_offset) - 1
        if i < 0:
            return None
        sync = syncs[i]
        step = 0 if sync.upstream == upstream_offset else 1
        if sync.downstream + step < 0:
            return None  # an anchor sync's own offset: that source record was never copied
        return target_offset(sync.downstream + step)

    # -- reading the topic ------------------------------------------------------------------------

    async def load(self, *, max_bytes: int = 1024 * 1024) -> int:
        """Read the offset-syncs topic from where the last load stopped to its high watermark.

        Returns how many syncs were read. A topic that does not exist yet reads as empty.
        Raises ClientError when the site cannot be read. Cancellable (a later load re-reads
        from the last completed fetch).
        """
        if self.site is None:
            raise ClientError(f"offset sync store for {self.topic!r} has no site to read from")
        site = self.site
        async with self._lock:
            await site.refresh([self.topic])
            if self.topic not in site.topics:
                self.loaded = True
                return 0
            end = await site.on_leader(self.topic, 0, lambda c: list_offset(c, self.topic, 0, LATEST))
            read = 0
            while self.position < end:
                part = await site.on_leader(
                    self.topic,
                    0,
                    lambda c: fetch_partition(
                        c,
                        self.topic,
                        0,
                        self.position,
                        isolation_level=READ_UNCOMMITTED,
                        max_wait_ms=0,
                        max_bytes=max_bytes,
                    ),
                )
                if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and part.log_start_offset > self.position:
                    self.position = part.log_start_offset  # compaction or retention removed the head
                    continue
                if part.error_code:
                    raise ClientError.from_code(part.error_code, f"reading {self.topic}-0 on site {site.name}")
                moved = False
                for pos, header in complete_batches(part.records):
                    if header.next_offset <= self.position:
                        continue
                    moved = True
                    if not header.is_control:
                        batch = RecordBatch(part.records[pos : pos + header.size])
                        for record in batch.records():
                            if record.offset >= self.position:
                                read += self._take(record.offset, record.key, record.value)
                    self.position = header.next_offset
                if not moved:
                    break  # nothing readable below the high watermark yet
            self.loaded = True
            return read

    def _take(self, offset: int, key: bytes | None, value: bytes | None) -> int:
        try:
            if value is None:
                # A tombstone: an operator's reset of that partition's syncs (docs/mm2.md).
                self._syncs.pop(decode_offset_sync_key(key), None)
                return 0
            sync = decode_offset_sync(key, value)
        except MM2FormatError as exc:
            self.malformed += 1
            log.warning("%s offset %d: not an offset sync, skipped: %s", self.topic, offset, exc)
            return 0
        self.add(sync)
        return 1


def _thin(syncs: list[OffsetSync]) -> list[OffsetSync]:
    """Keep the oldest sync (every offset since it stays translatable), the latest, and per
    power-of-two distance back from the latest the newest sync in between."""
    latest = syncs[-1]
    kept: dict[int, OffsetSync] = {}
    for sync in syncs[1:-1]:
        bucket = (latest.upstream - sync.upstream).bit_length()
        kept[bucket] = sync  # ascending order: the last one seen is the newest in its bucket
    return [syncs[0], *sorted(kept.values(), key=lambda s: s.upstream), latest]


def sync_for(topic: str, partition: int, upstream: int, downstream: int) -> OffsetSync:
    """An OffsetSync from plain ints."""
    return OffsetSync(topic, partition, source_offset(upstream), target_offset(downstream))
