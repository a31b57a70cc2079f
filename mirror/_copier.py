"""Copy one partition from a source site to its offset-preserving mirror on a target site.

The loop: ask the target leader where the mirror partition ends (MirrorAppend probe), fetch
from the source leader from exactly that offset (a consumer fetch: only committed records,
below the source's high watermark), drop the batches the target already holds, and append
the rest on the target leader with MirrorAppend at that end offset. The target accepts only
an append at its current end, so a duplicate or a gap is impossible by construction, and
the copier keeps no state of its own: after a restart it asks the target again.

Records the source deleted (retention) before they were copied are a gap: the copier tells
the target to restart the partition at the source's log start, and reports the gap loudly
(``PartitionProgress.gaps``); it is never hidden.

Every error ends in a reconnect with backoff; leadership moves on either side are followed
through fresh metadata.

A failover stops a copier with :meth:`PartitionCopier.request_stop` rather than by cancelling
it outright: a fetch in flight is interrupted (it changes nothing), an append in flight is let
finish, and no new one starts. Once :attr:`PartitionCopier.idle` is set, the target's end
offset cannot move because of this copier any more, so the end read afterwards is the cut.
(Cancelling mid-append could let the target take the append after the end was read.)
"""

from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from node.client import (
    READ_UNCOMMITTED,
    ClientError,
    NodeConnection,
    SiteClient,
    aclose_quietly,
    fetch_partition,
    mirror_append,
    run_reconnecting,
)
from node.protocol import ErrorCode
from storage.records import HEADER_SIZE, read_header

from ._offsets import (
    NO_SOURCE_OFFSET,
    NO_TARGET_OFFSET,
    SourceOffset,
    TargetOffset,
    source_of,
    source_offset,
    target_of,
    target_offset,
)

log = logging.getLogger("strait.mirror.copier")

#: Upper bounds (seconds) of the replication latency histogram's buckets; the last is +Inf.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class LatencyHistogram:
    """Replication latency: from a batch's max timestamp on the source to its append on the target.

    ``counts[i]`` counts observations in bucket i (not cumulative); the last bucket is +Inf.
    Batch timestamps are the producer's CreateTime (or the source's LogAppendTime), so clock
    skew between the producers and the mirror shifts the values; negatives count as 0.
    """

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    sum_s: float = 0.0

    def observe(self, seconds: float, n: int = 1) -> None:
        seconds = max(0.0, seconds)
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += n
        self.sum_s += seconds * n

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merge(self, other: LatencyHistogram) -> None:
        for i, c in enumerate(other.counts):
            self.counts[i] += c
        self.sum_s += other.sum_s

    def to_dict(self) -> dict[str, object]:
        """Prometheus-shaped: cumulative ``[upper bound, count]`` pairs ("+Inf" last), sum and count."""
        cumulative = []
        total = 0
        for bound, c in zip([*LATENCY_BUCKETS, float("inf")], self.counts, strict=True):
            total += c
            cumulative.append(["+Inf" if bound == float("inf") else bound, total])
        return {"buckets": cumulative, "sum": self.sum_s, "count": total}

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile ``q`` (None without observations)."""
        total = self.count
        if total == 0:
            return None
        rank = q * total
        seen = 0
        for bound, c in zip([*LATENCY_BUCKETS, float("inf")], self.counts, strict=True):
            seen += c
            if seen >= rank:
                return bound
        return float("inf")


@dataclass
class PartitionProgress:
    """What the copier knows of one partition: the copy's end and the source's offsets.

    ``mirrored_offset`` is a source offset: everything below it is copied (offset-preserving:
    the target's log end offset, the same number; MM2: the next source offset to copy).
    """

    topic: str
    partition: int
    mirrored_offset: SourceOffset = NO_SOURCE_OFFSET
    source_high_watermark: SourceOffset = NO_SOURCE_OFFSET
    source_log_start: SourceOffset = NO_SOURCE_OFFSET
    bytes_copied: int = 0
    records_copied: int = 0
    gaps: list[tuple[SourceOffset, SourceOffset]] = field(default_factory=list)  # [from, to) lost to source retention
    errors: int = 0
    last_error: str | None = None  # what stops the copy now; None once records are copied again
    state: str = "starting"  # unassigned, starting, copying, diverged (the target is past the source), ...
    # Timestamp (ms) of the oldest record known not to be mirrored: the first batch of the last
    # fetch that returned data past the mirror's end; -1 when none is known.
    oldest_unmirrored_ms: int = -1
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    # Wall-clock time (ms) of the last fetch the source answered without an error; None before any.
    last_fetch_ms: int | None = None

    @property
    def lag_records(self) -> int:
        if self.mirrored_offset < 0 or self.source_high_watermark < 0:
            return -1
        return max(0, self.source_high_watermark - self.mirrored_offset)

    @property
    def lag_bytes(self) -> int:
        """An estimate: records behind times the mean size of the records copied so far (-1 unknown)."""
        lag = self.lag_records
        if lag <= 0:
            return lag
        if self.records_copied == 0:
            return -1
        return round(lag * self.bytes_copied / self.records_copied)

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        """The partition's entry in a link's status (docs/mirror.md)."""
        return {
            "partition": self.partition,
            "state": self.state,
            "mirrored_offset": self.mirrored_offset,
            "source_high_watermark": self.source_high_watermark,
            "source_log_start": self.source_log_start,
            "lag_records": self.lag_records,
            "lag_bytes": self.lag_bytes,
            "lag_seconds": self.lag_seconds(now_ms),
            "records_copied": self.records_copied,
            "bytes_copied": self.bytes_copied,
            "gaps": [[start, end] for start, end in self.gaps],
            "gap_records": sum(end - start for start, end in self.gaps),
            "errors": self.errors,
            "last_error": self.last_error,
            "last_fetch_ms": self.last_fetch_ms,
        }

    def lag_seconds(self, now_ms: int | None = None) -> float:
        """Age of the oldest record not yet mirrored: 0 when caught up, -1 when unknown."""
        lag = self.lag_records
        if lag <= 0:
            return float(lag)
        if self.oldest_unmirrored_ms < 0:
            return -1.0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(0.0, (now - self.oldest_unmirrored_ms) / 1000)


class Copier(Protocol):
    """A partition copier as a link runner runs it (``PartitionCopier``, ``MM2PartitionCopier``)."""

    progress: PartitionProgress

    async def run(self) -> None: ...


@dataclass
class RunningCopy:
    """One running copier and the cancel scope that stops it."""

    copier: Copier
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    finished: bool = False  # run() returned: cancelled, or failed on a bug (restarted next pass)
    done: trio.Event = field(default_factory=trio.Event)  # set when finished


@dataclass
class MirrorTopic:
    """A link runner's view of one mirrored topic: partition counts, its copiers and their progress."""

    name: str
    source_partitions: int = 0
    target_partitions: int = 0
    problem: str | None = None  # the last sync error for this topic, cleared by a good pass
    copies: dict[int, RunningCopy] = field(default_factory=dict)
    progress: dict[int, PartitionProgress] = field(default_factory=dict)  # kept across pause/resume


class PartitionCopier:
    def __init__(
        self,
        link: str,
        source: SiteClient,
        target: SiteClient,
        topic: str,
        partition: int,
        *,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 4 * 1024 * 1024,
        append_timeout_ms: int = 30_000,
        backoff_s: float = 0.5,
    ) -> None:
        self.link = link
        self.source = source
        self.target = target
        self.progress = PartitionProgress(topic, partition)
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.append_timeout_ms = append_timeout_ms
        self.backoff_s = backoff_s
        self._src: NodeConnection | None = None
        self._tgt: NodeConnection | None = None
        self._stop_requested = False
        self._appending = False
        self._fetching: trio.CancelScope | None = None
        #: Set once ``request_stop`` was called and no append is in flight: none will start again.
        self.idle = trio.Event()

    def request_stop(self) -> None:
        """Stop without interrupting an append: a fetch in flight is cancelled, an append in flight
        finishes, no new append starts; ``idle`` is set from then on. The caller cancels ``run``
        afterwards. Does not block; idempotent."""
        self._stop_requested = True
        if self._fetching is not None:
            self._fetching.cancel()
        if not self._appending:
            self.idle.set()

    async def _park_if_stopping(self) -> None:
        """Wait here for the caller's cancellation once a stop was requested."""
        if self._stop_requested:
            self.idle.set()
            await trio.sleep_forever()

    async def run(self) -> None:
        p = self.progress

        def on_error(exc: Exception) -> None:
            p.errors += 1
            p.last_error = str(exc)
            log.info("%s %s-%d: %s; reconnecting", self.link, p.topic, p.partition, exc)

        await run_reconnecting(self._step, reset=self._reset, on_error=on_error, backoff_s=self.backoff_s)

    async def _reset(self) -> None:
        await aclose_quietly(self._src, self._tgt)
        self._src = self._tgt = None

    async def _append(
        self, records: bytes | memoryview | None, *, start_offset: TargetOffset = NO_TARGET_OFFSET
    ) -> bool:
        """MirrorAppend at the known end; True when the target took it (progress updated)."""
        p = self.progress
        await self._park_if_stopping()
        if self._tgt is None:
            self._tgt = await self.target.open_leader(p.topic, p.partition)
        await self._park_if_stopping()
        self._appending = True
        try:
            result = await mirror_append(
                self._tgt,
                self.link,
                p.topic,
                p.partition,
                target_of(p.mirrored_offset),
                records,
                start_offset=start_offset,
                timeout=self.append_timeout_ms / 1000,
            )
        finally:
            self._appending = False
            if self._stop_requested:
                self.idle.set()
        end = target_offset(result.log_end_offset)
        if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and end >= 0:
            p.mirrored_offset = source_of(end)  # resume from what the target holds
            return False
        if result.error_code:
            raise ClientError.from_code(
                result.error_code,
                f"MirrorAppend {p.topic}-{p.partition} on site {self.target.name}",
                result.error_message,
            )
        p.mirrored_offset = source_of(end)
        if records is not None:
            p.last_error = None  # copying again: ``errors`` keeps the count of what went wrong before
        return True

    async def _step(self) -> None:
        p = self.progress
        if p.mirrored_offset < 0:
            await self._append(None)  # a probe: where does the mirror end?
            if p.state != "diverged":  # that lasts until a fetch from the mirror's end succeeds
                p.state = "copying"
        await self._park_if_stopping()
        with trio.CancelScope() as self._fetching:  # a stop request cancels it: a fetch changes nothing
            if self._src is None:
                self._src = await self.source.open_leader(p.topic, p.partition)
            part = await fetch_partition(
                self._src,
                p.topic,
                p.partition,
                p.mirrored_offset,
                isolation_level=READ_UNCOMMITTED,
                max_wait_ms=self.fetch_max_wait_ms,
                max_bytes=self.fetch_max_bytes,
                timeout=self.source.timeout,
            )
        self._fetching = None
        if self._stop_requested:
            await self._reset()  # the cancelled fetch may have left its connection mid-answer
            await self._park_if_stopping()
        log_start, high_watermark = source_offset(part.log_start_offset), source_offset(part.high_watermark)
        if log_start >= 0:
            p.source_log_start = log_start
        if high_watermark >= 0:
            p.source_high_watermark = high_watermark
        code = part.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(log_start, high_watermark)
            return
        if code:
            raise ClientError.from_code(code, f"fetch {p.topic}-{p.partition} from site {self.source.name}")
        p.last_fetch_ms = int(time.time() * 1000)
        if not part.records:
            self._agrees()
            return
        kept = self._from_end(part.records)
        if kept is None:
            return
        first_base, count, data, first_ts, max_ts = kept  # a first batch past our end: a compacted hole
        if first_base < p.mirrored_offset and not (p.gaps and p.gaps[-1][1] == p.mirrored_offset):
            # The mirror copies whole batches, so it ends where a source batch ended: a source batch
            # across that end was written after the source lost what the mirror holds there.
            await self._diverged(
                f"the source's batch at offset {first_base} runs across the mirror's end {p.mirrored_offset}"
            )
            return
        self._agrees()
        p.oldest_unmirrored_ms = first_ts
        if await self._append(data):
            p.bytes_copied += len(data)
            p.records_copied += count
            now_ms = int(time.time() * 1000)
            p.latency.observe((now_ms - max_ts) / 1000)
            # Whatever the source holds past this fetch is newer than the newest record copied.
            p.oldest_unmirrored_ms = max_ts if p.lag_records > 0 else -1

    def _from_end(self, view: memoryview) -> tuple[int, int, memoryview, int, int] | None:
        """The whole batches at or after the mirror's end.

        Returns (first base offset, records, bytes, first batch's base timestamp, newest max timestamp).
        """
        end = self.progress.mirrored_offset
        start = stop = None
        first_base = -1
        first_ts = max_ts = -1
        count = 0
        pos = 0
        while len(view) - pos >= HEADER_SIZE:
            header = read_header(view, pos)
            if header.size > len(view) - pos:
                break  # the last batch was cut short by the fetch limit; the next fetch gets it whole
            if header.last_offset >= end:
                if start is None:
                    start, first_base, first_ts = pos, header.base_offset, header.base_timestamp
                stop = pos + header.size
                count += header.records_count
                max_ts = max(max_ts, header.max_timestamp)
            pos += header.size
        if start is None or stop is None:
            return None
        return first_base, count, view[start:stop], first_ts, max_ts

    async def _out_of_range(self, log_start: SourceOffset, high_watermark: SourceOffset) -> None:
        p = self.progress
        if log_start > p.mirrored_offset:
            self._gap(p.mirrored_offset, log_start)
            await self._append(None, start_offset=target_of(log_start))
            return
        if high_watermark >= 0 and p.mirrored_offset > high_watermark:
            await self._diverged(
                f"the mirror ends at {p.mirrored_offset}, past the source's high watermark {high_watermark}"
            )
            return
        raise ClientError(f"fetch {p.topic}-{p.partition} at {p.mirrored_offset}: offset out of range")

    async def _diverged(self, what: str) -> None:
        """The target holds records the source no longer has: say so once, hold the partition
        ``diverged`` (not copying) and look again later (an operator may truncate the target)."""
        p = self.progress
        if p.state != "diverged":
            log.error(
                "%s %s-%d: %s: the source lost records the mirror holds (unclean election or failover); "
                "not copying until resolved",
                self.link,
                p.topic,
                p.partition,
                what,
            )
        p.state = "diverged"
        p.last_error = what
        await trio.sleep(self.backoff_s * 4)
        p.mirrored_offset = NO_SOURCE_OFFSET  # ask the target again: an operator may have truncated it

    def _agrees(self) -> None:
        """A fetch from the mirror's end found the source continuing it: a diverged partition copies again."""
        p = self.progress
        if p.state == "diverged":
            log.warning("%s %s-%d: the source continues the mirror at %d again: copying", self.link, p.topic,
                        p.partition, p.mirrored_offset)  # fmt: skip
            p.state = "copying"
            p.last_error = None

    def _gap(self, start: SourceOffset, end: SourceOffset) -> None:
        p = self.progress
        p.gaps.append((start, end))
        log.error(
            "%s %s-%d: records [%d, %d) were deleted on site %s before they were mirrored: %d records LOST to "
            "the mirror",
            self.link,
            p.topic,
            p.partition,
            start,
            end,
            self.source.name,
            end - start,
        )
