"""Copy one partition from a source site to its offset-preserving mirror on a target site.

The loop: ask the target leader where the mirror partition ends (MirrorAppend probe), fetch
from the source leader from exactly that offset (a consumer fetch: only committed records,
below the source's high watermark), drop the batches the target already holds, and append
the rest on the target leader with MirrorAppend at that end offset. The target accepts only
an append at its current end, so a duplicate or a gap is impossible by construction, and
the copier keeps no state of its own: after a restart it asks the target again.

**Pipelined over a WAN.** A fetch from a distant source costs a round trip, an append on the
target another wait (its followers must have the records); one after the other, a copier would
spend most of its time waiting. So two tasks share the work: the *fetcher* fetches from the end
the appends queued before it will make (the last fetched batch's last offset + 1) and queues the
whole batches it got; the *appender* appends them in order, each at the end the previous append
made, joining what is queued into one MirrorAppend (up to ``fetch_max_bytes``). So the next
fetch is in flight while an append is. At most ``pipeline_fetches`` fetched chunks wait for the
appender (the fetcher waits for room before it fetches again), which bounds a copier's memory at
about (``pipeline_fetches`` + 2) x ``fetch_max_bytes``. Each fetch asks for what
``mirror._fetch_size.FetchSizer`` sizes from the measured round trip and rate (the
bandwidth-delay product), up to ``fetch_max_bytes``.

Pipelining changes nothing of the invariant: the target still takes an append only at its end.
An append it refuses (OFFSET_OUT_OF_RANGE: its end is not the one expected) drops whatever is
queued and starts again from the end it answered. Anything unusual a fetch meets (an offset out
of range at the source, a batch across the end, a partition diverged) drains the queue and hands
over to the one-at-a-time step below (``_copy_once``), which holds the rules for them; the
pipeline resumes after that step went through normally. After any error (a ``ClientError`` or I/O
failure of either side) the queue is dropped, connections are closed, and the next step asks
the target where it ends before it copies again. The appends already queued when a *fetch*
fails are still made first: they continue the target's end.

Records the source deleted (retention) before they were copied are a gap: the copier tells
the target to restart the partition at the source's log start, and reports the gap loudly
(``PartitionProgress.gaps``); it is never hidden.

Every error ends in a reconnect with backoff; leadership moves on either side are followed
through fresh metadata.

A failover stops a copier with :meth:`PartitionCopier.request_stop` rather than by cancelling
it outright: a fetch in flight is interrupted (it changes nothing), an append in flight is let
finish, and no new one starts (what is queued is never appended). Once
:attr:`PartitionCopier.idle` is set, the target's end offset cannot move because of this copier
any more, so the end read afterwards is the cut. (Cancelling mid-append could let the target
take the append after the end was read.)

**Copies of a mirrored byte.** The bytes of a batch are copied once by the kernel into the
fetch answer's buffer (``node.client`` reads a large answer straight into a buffer of its size;
only its first read, at most 256 KiB, is copied once more out of the read buffer), are sliced,
never copied, into the MirrorAppend request (memoryview slices of that buffer, sent as parts of
their own with a gathering ``sendmsg`` beside the encoded request header), and copied once by
the kernel out of them. Over TLS the stream's encryption reads them once each way instead.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from node.client import (
    READ_UNCOMMITTED,
    RECONNECT_ON,
    ClientError,
    FetchedPartition,
    NodeConnection,
    SiteClient,
    aclose_quietly,
    fetch_partition,
    mirror_append,
    run_reconnecting,
)
from node.protocol import ErrorCode
from storage.records import HEADER_SIZE, read_header

from ._config import DEFAULT_FETCH_MAX_BYTES, DEFAULT_PIPELINE_FETCHES
from ._fetch_size import FetchSizer
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

Records = bytes | memoryview | Sequence[memoryview] | None  # what one MirrorAppend carries

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


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole source batches to append at ``start``: the end the appends before them make.

    ``end`` is the last batch's last offset + 1 (the target's end once they are appended); the
    timestamps are the first batch's base timestamp and the newest max timestamp.
    """

    start: SourceOffset
    first_base: int
    end: SourceOffset
    records: memoryview
    count: int
    first_ts: int
    max_ts: int


def whole_batches_from(view: memoryview, start: SourceOffset) -> Chunk | None:
    """The whole batches of a fetched record set that end at or after ``start`` (a batch cut short by
    the fetch size at the end is left for the next fetch); None when there are none."""
    first = stop = None
    first_base = -1
    first_ts = max_ts = -1
    end = start
    count = 0
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if header.size > len(view) - pos:
            break  # the last batch was cut short by the fetch limit; the next fetch gets it whole
        if header.last_offset >= start:
            if first is None:
                first, first_base, first_ts = pos, header.base_offset, header.base_timestamp
            stop = pos + header.size
            count += header.records_count
            max_ts = max(max_ts, header.max_timestamp)
            end = source_offset(header.last_offset + 1)
        pos += header.size
    if first is None or stop is None:
        return None
    return Chunk(start, first_base, end, view[first:stop], count, first_ts, max_ts)


class PartitionCopier:
    """Copies one partition (see the module docstring). ``run`` until cancelled; ``request_stop``
    and ``idle`` for a failover's cut."""

    def __init__(
        self,
        link: str,
        source: SiteClient,
        target: SiteClient,
        topic: str,
        partition: int,
        *,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        pipeline_fetches: int = DEFAULT_PIPELINE_FETCHES,
        append_timeout_ms: int = 30_000,
        backoff_s: float = 0.5,
    ) -> None:
        if pipeline_fetches < 1:
            raise ValueError(f"pipeline_fetches must be at least 1, not {pipeline_fetches}")
        self.link = link
        self.source = source
        self.target = target
        self.progress = PartitionProgress(topic, partition)
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.pipeline_fetches = pipeline_fetches
        self.append_timeout_ms = append_timeout_ms
        self.backoff_s = backoff_s
        self.sizer = FetchSizer(fetch_max_bytes)
        self._src: NodeConnection | None = None
        self._tgt: NodeConnection | None = None
        self._stop_requested = False
        self._appending = False
        self._fetching: trio.CancelScope | None = None
        self._probe = True  # ask the target where it ends before the next copy (start, and after errors)
        self._careful = False  # copy one step at a time (``_copy_once``) until a step goes through normally
        self._queued_ts: deque[int] = deque()  # first timestamps of the chunks fetched, not yet appended
        #: Set once ``request_stop`` was called and no append is in flight: none will start again.
        self.idle = trio.Event()

    def request_stop(self) -> None:
        """Stop without interrupting an append: a fetch in flight is cancelled, an append in flight
        finishes, no new append starts (what is queued is dropped); ``idle`` is set from then on.
        The caller cancels ``run`` afterwards. Does not block; idempotent."""
        self._stop_requested = True
        if self._fetching is not None:
            self._fetching.cancel()
        if not self._appending:
            self.idle.set()

    async def _park_if_stopping(self) -> None:
        """Wait here for the caller's cancellation once a stop was requested (``idle`` is set here
        unless the other task's append is in flight: that append sets it when it ends)."""
        if self._stop_requested:
            if not self._appending:
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
        self._probe = True

    async def _step(self) -> None:
        p = self.progress
        if self._probe or p.mirrored_offset < 0:
            await self._append(None)  # a probe: where does the mirror end?
            self._probe = False
            if p.state != "diverged":  # that lasts until a fetch from the mirror's end succeeds
                p.state = "copying"
        if self._careful or p.state == "diverged":
            self._careful = not await self._copy_once()
        else:
            await self._pipeline()

    # -- the pipeline ----------------------------------------------------------------------------

    async def _pipeline(self) -> None:
        """Fetch ahead while appending, from the target's known end, until something needs the
        one-at-a-time step (``_careful`` set), the target refuses an append, or an error (raised
        once the appends queued before it are made, for a fetch error)."""
        failure: list[Exception] = []
        send, receive = trio.open_memory_channel[Chunk](self.pipeline_fetches - 1)
        self._queued_ts.clear()
        try:
            async with trio.open_nursery() as nursery, receive:
                nursery.start_soon(self._fetch_ahead, send, failure)
                await self._append_queued(receive, failure)
                nursery.cancel_scope.cancel()  # the appender stopped early: the queue is void
        finally:
            self._queued_ts.clear()
            if self._fetching is not None:  # a fetch was interrupted: its connection may be mid-answer
                self._fetching = None
                with trio.CancelScope(shield=True):
                    await aclose_quietly(self._src)
                self._src = None
        if failure:
            raise failure[0]

    async def _fetch_ahead(self, send: trio.MemorySendChannel[Chunk], failure: list[Exception]) -> None:
        """The fetcher: fetch from where the queued chunks end and queue what continues them.
        Returns (closing the queue) on an error, noted in ``failure``, or on anything unusual
        (``_careful``); parks once a stop was requested."""
        p = self.progress
        async with send:
            at = p.mirrored_offset
            while True:
                try:
                    part = await self._fetch(at)
                except RECONNECT_ON as exc:
                    failure.append(exc)
                    return
                if part.error_code:
                    if part.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                        what = f"fetch {p.topic}-{p.partition} from site {self.source.name}"
                        failure.append(ClientError.from_code(part.error_code, what))
                    self._careful = True  # out of range: ``_copy_once`` tells a gap from a divergence
                    return
                if not part.records:
                    continue
                chunk = whole_batches_from(part.records, at)
                if chunk is None:
                    continue
                if chunk.first_base < at:
                    self._careful = True  # a batch across the end: ``_copy_once`` decides
                    return
                if not self._queued_ts and p.oldest_unmirrored_ms < 0:
                    p.oldest_unmirrored_ms = chunk.first_ts
                self._queued_ts.append(chunk.first_ts)
                try:
                    await send.send(chunk)  # waits while pipeline_fetches chunks wait for the appender
                except trio.BrokenResourceError:
                    return  # the appender stopped: the queue is void
                at = chunk.end

    async def _append_queued(self, receive: trio.MemoryReceiveChannel[Chunk], failure: list[Exception]) -> None:
        """The appender: append the queued chunks in order, joining those already waiting (up to
        ``fetch_max_bytes``). Returns when the fetcher closed the queue and it is empty, when the
        target refused an append (its end is not the one expected), or on an error (noted in
        ``failure``)."""
        carry: Chunk | None = None
        while True:
            if carry is not None:
                chunks, carry = [carry], None
            else:
                try:
                    chunks = [await receive.receive()]
                except trio.EndOfChannel:
                    return
            size = len(chunks[0].records)
            while size < self.fetch_max_bytes:
                try:
                    more = receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                if size + len(more.records) > self.fetch_max_bytes:
                    carry = more
                    break
                chunks.append(more)
                size += len(more.records)
            try:
                if not await self._append_chunks(chunks):
                    return
            except RECONNECT_ON as exc:
                failure.append(exc)
                return

    async def _append_chunks(self, chunks: list[Chunk]) -> bool:
        """One MirrorAppend of consecutive chunks at the first one's start; True when the target took
        it (progress updated), False when its end was elsewhere (``mirrored_offset`` now that end)."""
        p = self.progress
        if chunks[0].start != p.mirrored_offset:  # a chunk the last append did not end at: never sent
            raise ClientError(
                f"{p.topic}-{p.partition}: a fetched chunk starts at {chunks[0].start}, the mirror ends at "
                f"{p.mirrored_offset}"
            )
        records = chunks[0].records if len(chunks) == 1 else [c.records for c in chunks]
        if not await self._append(records):
            return False
        now_ms = int(time.time() * 1000)
        for c in chunks:
            p.bytes_copied += len(c.records)
            p.records_copied += c.count
            p.latency.observe((now_ms - c.max_ts) / 1000)
            if self._queued_ts:
                self._queued_ts.popleft()
        # The oldest record not mirrored: the next queued chunk's first, else (the source holds more
        # than this fetch) one newer than the newest record copied.
        if self._queued_ts:
            p.oldest_unmirrored_ms = self._queued_ts[0]
        else:
            p.oldest_unmirrored_ms = chunks[-1].max_ts if p.lag_records > 0 else -1
        return True

    # -- requests --------------------------------------------------------------------------------

    async def _fetch(self, offset: SourceOffset) -> FetchedPartition:
        """One fetch from ``offset`` of at most the sizer's bytes; records the source's offsets and
        feeds the sizer. A stop request interrupts it (a fetch changes nothing) and parks here."""
        p = self.progress
        await self._park_if_stopping()
        part: FetchedPartition | None = None
        with trio.CancelScope() as self._fetching:  # a stop request cancels it
            if self._src is None:
                self._src = await self.source.open_leader(p.topic, p.partition)
            sent_at = trio.current_time()
            part = await fetch_partition(
                self._src,
                p.topic,
                p.partition,
                offset,
                isolation_level=READ_UNCOMMITTED,
                max_wait_ms=self.fetch_max_wait_ms,
                max_bytes=self.sizer.size,
                timeout=self.source.timeout,
            )
        self._fetching = None
        if part is None:  # cancelled by request_stop: the connection may be left mid-answer
            await aclose_quietly(self._src)
            self._src = None
            await self._park_if_stopping()
            raise AssertionError("a fetch was cancelled without a stop request")  # pragma: no cover
        log_start, high_watermark = source_offset(part.log_start_offset), source_offset(part.high_watermark)
        if log_start >= 0:
            p.source_log_start = log_start
        if high_watermark >= 0:
            p.source_high_watermark = high_watermark
        if not part.error_code:
            p.last_fetch_ms = int(time.time() * 1000)
            self.sizer.observe(len(part.records), sent_at, trio.current_time())
        return part

    async def _append(self, records: Records, *, start_offset: TargetOffset = NO_TARGET_OFFSET) -> bool:
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

    # -- one step at a time ----------------------------------------------------------------------

    async def _copy_once(self) -> bool:
        """Fetch from the mirror's end and append what continues it, nothing in flight besides:
        where a gap, a divergence or its end is decided. True when it went through normally (the
        pipeline may take over again)."""
        p = self.progress
        part = await self._fetch(p.mirrored_offset)
        code = part.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(source_offset(part.log_start_offset), source_offset(part.high_watermark))
            return False
        if code:
            raise ClientError.from_code(code, f"fetch {p.topic}-{p.partition} from site {self.source.name}")
        if not part.records:
            self._agrees()
            return True
        chunk = whole_batches_from(part.records, p.mirrored_offset)
        if chunk is None:
            return False
        # a first batch past our end: a compacted hole
        if chunk.first_base < p.mirrored_offset and not (p.gaps and p.gaps[-1][1] == p.mirrored_offset):
            # The mirror copies whole batches, so it ends where a source batch ended: a source batch
            # across that end was written after the source lost what the mirror holds there.
            await self._diverged(
                f"the source's batch at offset {chunk.first_base} runs across the mirror's end {p.mirrored_offset}"
            )
            return False
        self._agrees()
        p.oldest_unmirrored_ms = chunk.first_ts
        self._queued_ts.clear()
        return await self._append_chunks([chunk])

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
