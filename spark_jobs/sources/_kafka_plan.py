"""Planning a read in the driver: which topic-partitions, from which offset to which, in how many pieces.

Each step runs with ``trio.run`` on a fresh :class:`~node.client.SiteClient` (:func:`on_site`),
over TLS and SASL as the security options say: the driver's planner is a plain Python process
and keeps no connection between steps. Offsets
come from ListOffsets asked of each partition's leader, retried as ``fetchOffset.numRetries``
and ``fetchOffset.retryIntervalMs`` say while leaders move.

A range is ``[start, end)`` in offsets, not records: compaction and control batches leave gaps,
so a piece may hold fewer records than its length, never more.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import trio
from pyspark.sql.datasource import InputPartition

from node.client import EARLIEST, LATEST, ClientError, ClientSecurity, SiteClient, list_offsets

from ._kafka_options import Offsets, OffsetSpec, OptionError, ReadOptions, Subscription, TopicPartition

T = TypeVar("T")
CLIENT_ID = "strait-spark"

#: (log start offset, end offset) of each partition; the end is the high watermark
#: (read_committed: the last stable offset).
Bounds = dict[TopicPartition, tuple[int, int]]


class KafkaSourceError(Exception):
    """The site cannot be read or written as asked: unreachable, records lost, a write not
    acknowledged. The message names the bootstrap servers or the partition and offsets.
    (Options the site contradicts, such as an unknown topic or an offset past the end, are an
    OptionError, a ValueError, naming the option.)"""


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One input partition: the offsets ``[start, end)`` of ``topic``-``partition``. ``first``:
    the piece that starts the partition's read (false for the later pieces of a split range)."""

    topic: str
    partition: int
    start: int
    end: int
    first: bool = True

    def __len__(self) -> int:
        return self.end - self.start


# -- talking to the site from the driver -------------------------------------------------------------


def on_site(
    bootstrap: str, timeout_s: float, step: Callable[[SiteClient], Awaitable[T]], security: ClientSecurity
) -> T:
    """``trio.run`` one step on a fresh client of the site, connecting as ``security`` says; the
    first metadata answer must come within ``timeout_s``. Raises KafkaSourceError naming the
    bootstrap servers when no broker answers (the reason: a refused TLS handshake, a failed SASL
    authentication, ...), and what ``step`` raises."""
    secured = security.site_client_kwargs()

    async def run() -> T:
        site = SiteClient(bootstrap, bootstrap, client_id=CLIENT_ID, timeout=timeout_s, **secured)
        try:
            try:
                with trio.fail_after(timeout_s):
                    await site.refresh([])
            except (ClientError, trio.TooSlowError) as exc:
                detail = str(exc) or f"no answer within {timeout_s:g} s"
                raise KafkaSourceError(
                    f"kafka.bootstrap.servers={bootstrap}: no broker of the site answered ({detail})"
                ) from None
            return await step(site)
        finally:
            with trio.CancelScope(shield=True):
                await site.aclose()

    return trio.run(run)


async def topic_partitions(site: SiteClient, subscription: Subscription) -> dict[str, list[int]]:
    """The partitions the subscription covers, by topic, from fresh metadata. Raises
    OptionError for a named topic or partition the site does not have."""
    if subscription.kind == "subscribePattern":
        every = await site.refresh(None)
        return {
            name: sorted(meta.partitions)
            for name, meta in sorted(every.items())
            if not meta.is_internal and re.fullmatch(subscription.pattern, name) is not None
        }
    wanted = list(subscription.topics) if subscription.kind == "subscribe" else [t for t, _ in subscription.assigned]
    found = await site.refresh(wanted)
    missing = [t for t in wanted if t not in found or not found[t].partitions]
    if missing:
        raise OptionError(
            f"{subscription.describe()}: topic(s) {', '.join(missing)} do not exist on the site at "
            f"kafka.bootstrap.servers={site.name}"
        )
    if subscription.kind == "subscribe":
        return {t: sorted(found[t].partitions) for t in wanted}
    out = {}
    for topic, parts in subscription.assigned:
        unknown = [p for p in parts if p not in found[topic].partitions]
        if unknown:
            raise OptionError(
                f"{subscription.describe()}: {topic} has partitions 0..{max(found[topic].partitions)}, "
                f"not {', '.join(map(str, unknown))}"
            )
        out[topic] = list(parts)
    return out


async def bounds(site: SiteClient, opts: ReadOptions, parts: dict[str, list[int]]) -> Bounds:
    """Each partition's log start offset and end offset."""
    out: Bounds = {}
    for topic, partitions in parts.items():
        starts = await offsets_at(site, opts, topic, partitions, EARLIEST)
        ends = await offsets_at(site, opts, topic, partitions, LATEST)
        for p in partitions:
            out[topic, p] = (starts[p], ends[p])
    return out


async def offsets_at(
    site: SiteClient, opts: ReadOptions, topic: str, partitions: list[int], target: int
) -> dict[int, int]:
    """ListOffsets of ``partitions`` at ``target`` (EARLIEST, LATEST or a time; -1 where no record
    is that late), tried again after a ClientError (a leader moving) up to ``fetchOffset.numRetries``
    times, ``fetchOffset.retryIntervalMs`` apart. Raises KafkaSourceError naming the topic."""
    what = {EARLIEST: "earliest", LATEST: "latest"}.get(target, f"time {target}")
    for attempt in range(opts.offset_retries + 1):
        try:
            found = await list_offsets(site, topic, partitions, target, isolation_level=opts.isolation_level)
            return {p: int(o) for p, o in found.items()}
        except ClientError as exc:
            if attempt == opts.offset_retries:
                raise KafkaSourceError(
                    f"ListOffsets({what}) of {topic} on kafka.bootstrap.servers={opts.bootstrap} failed after "
                    f"{attempt + 1} tries: {exc}"
                ) from None
        await trio.sleep(opts.offset_retry_interval_s)
        with contextlib.suppress(ClientError):
            await site.refresh([topic])  # a leader moved: ask the new one next time
    raise AssertionError("unreachable")


async def resolve(site: SiteClient, opts: ReadOptions, spec: OffsetSpec, found: Bounds, *, starting: bool) -> Offsets:
    """The offset ``spec`` names for every partition in ``found``. Timestamps are looked up
    (ListOffsets by time); a time after the last record is the end offset when ending, and per
    ``startingOffsetsByTimestampStrategy`` when starting. Raises OptionError (no record that
    late, offsets not naming every partition), KafkaSourceError (ListOffsets failing)."""
    if spec.kind == "earliest":
        return {tp: b[0] for tp, b in found.items()}
    if spec.kind == "latest":
        return {tp: b[1] for tp, b in found.items()}
    times = dict.fromkeys(found, spec.timestamp) if spec.kind == "timestamp" else _every_partition(spec, found)
    if spec.kind == "offsets":
        return {tp: found[tp][0] if o == EARLIEST else found[tp][1] if o == LATEST else o for tp, o in times.items()}
    by_time: dict[tuple[str, int], list[int]] = {}
    for (topic, p), ts in times.items():
        by_time.setdefault((topic, ts), []).append(p)
    out: Offsets = {}
    for (topic, ts), partitions in sorted(by_time.items()):
        got = await offsets_at(site, opts, topic, partitions, ts)
        for p in partitions:
            offset = got[p]
            if offset < 0:
                if starting and opts.starting_by_timestamp_strategy == "error":
                    raise OptionError(
                        f"{spec.option}: no record of {topic}-{p} has a timestamp at or after {ts} "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
                    )
                offset = found[topic, p][1]
            out[topic, p] = offset
    return out


def _every_partition(spec: OffsetSpec, found: Bounds) -> Offsets:
    """Spark's rule: per-partition offsets or times must name every partition the read covers, and only those."""
    given = spec.mapping
    missing = sorted(set(found) - set(given))
    extra = sorted(set(given) - set(found))
    if missing:
        raise OptionError(
            f"{spec.option} must give every partition the query reads (-2 earliest, -1 latest); "
            f"missing: {', '.join(f'{t}-{p}' for t, p in missing)}"
        )
    if extra:
        raise OptionError(
            f"{spec.option} names partition(s) the site does not have: {', '.join(f'{t}-{p}' for t, p in extra)}"
        )
    return given


# -- the batch plan -------------------------------------------------------------------------------


async def plan_batch(site: SiteClient, opts: ReadOptions) -> list[OffsetRange]:
    """The ranges a batch read covers, checked against the site, before splitting."""
    parts = await topic_partitions(site, opts.subscription)
    found = await bounds(site, opts, parts)
    starts = await resolve(site, opts, opts.starting, found, starting=True)
    ends = await resolve(site, opts, opts.ending, found, starting=False)
    ranges = []
    for tp, (log_start, log_end) in sorted(found.items()):
        start, end = starts[tp], ends[tp]
        name = f"{tp[0]}-{tp[1]}"
        if end > log_end:
            raise OptionError(f"{opts.ending.option}: {name} ends at {end}, beyond the partition's end {log_end}")
        check_start(opts, tp, start, (log_start, log_end), end)
        if start > end:
            raise OptionError(f"{name}: {opts.starting.option} {start} is after {opts.ending.option} {end}")
        if start < end:
            ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return ranges


def check_start(opts: ReadOptions, tp: TopicPartition, start: int, bounds: tuple[int, int], end: int) -> None:
    """A read may start at ``start``: not past the partition's end (OptionError), not below its
    log start unless ``failOnDataLoss=false`` (KafkaSourceError; the reader then counts the loss)."""
    log_start, log_end = bounds
    if start > log_end:
        raise OptionError(
            f"{opts.starting.option}: {tp[0]}-{tp[1]} starts at {start}, beyond the partition's end {log_end}"
        )
    if start < log_start and opts.fail_on_data_loss:
        raise KafkaSourceError(data_loss(tp[0], tp[1], start, min(log_start, end), log_start))


def data_loss(topic: str, partition: int, first: int, end: int, log_start: int) -> str:
    return (
        f"{topic}-{partition}: offsets [{first}, {end}) are no longer on the site (its log starts at {log_start}): "
        "the records were deleted (retention or DeleteRecords) before they were read. "
        "Set failOnDataLoss=false to skip them; each skipped range becomes one row with valid=false"
    )


def split(ranges: list[OffsetRange], max_records: int, min_partitions: int | None) -> list[OffsetRange]:
    """Cut ranges into pieces of at most ``max_records`` offsets, then cut the largest pieces in
    two until there are ``min_partitions`` (or no piece has two offsets). Ordered by topic,
    partition, start."""
    pieces: list[OffsetRange] = []
    for r in ranges:
        count = -(-len(r) // max_records)
        pieces.extend(_cut(r, count))
    if min_partitions is not None and len(pieces) < min_partitions:
        heap = [(-len(p), i, p) for i, p in enumerate(pieces)]
        heapq.heapify(heap)
        serial = len(heap)
        while heap and len(heap) < min_partitions and -heap[0][0] >= 2:
            _, _, biggest = heapq.heappop(heap)
            for half in _cut(biggest, 2):
                heapq.heappush(heap, (-len(half), serial, half))
                serial += 1
        pieces = [p for _, _, p in heap]
    return sorted(pieces, key=lambda p: (p.topic, p.partition, p.start))


def _cut(r: OffsetRange, count: int) -> list[OffsetRange]:
    n = len(r)
    edges = [r.start + n * i // count for i in range(count + 1)]
    return [
        OffsetRange(r.topic, r.partition, a, b, r.first and a == r.start) for a, b in itertools.pairwise(edges) if a < b
    ]
