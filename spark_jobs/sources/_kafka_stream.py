"""The streaming reader: micro-batches of offset ranges, with offsets in Spark's Kafka JSON form.

An offset is ``{"orders": {"0": 23, "1": 7}}``: for each topic-partition the next offset to
read, exactly as Spark's own Kafka source writes it into a checkpoint's offset log, so
Structured Streaming restarts a query from its checkpoint (and an operator reads the log) as
they are used to. Each micro-batch reads ``[previous end, new end)`` of every partition.

- The first micro-batch starts where ``startingOffsets`` (or a starting timestamp) says,
  ``latest`` by default; a restarted query starts from its checkpoint instead.
- A partition that appears later (the topic grew, or a new topic matches ``subscribePattern``)
  is read from its earliest offset.
- ``maxOffsetsPerTrigger`` caps each micro-batch, shared among the partitions in proportion to
  their backlog (``getDefaultReadLimit``); ``Trigger.AvailableNow`` reads up to the offsets
  found when the query started, then stops.
- A partition that disappears, or whose end moves back below what was read, is data loss:
  an error, or with ``failOnDataLoss=false`` skipped (and reading goes on from where it is now).

Nothing is committed to the site: Spark's checkpoint is the only record of progress (as with
Spark's Kafka source, no consumer group offsets).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from node.client import SiteClient

from ._kafka_options import Offsets, ReadOptions
from ._kafka_plan import (
    Bounds,
    KafkaSourceError,
    OffsetRange,
    bounds,
    check_start,
    on_site,
    resolve,
    split,
    topic_partitions,
)
from ._kafka_read import RangeReader

#: A streaming offset as JSON: topic -> partition (as a string) -> next offset to read.
JsonOffsets = dict[str, dict[str, int]]


def to_json(offsets: Offsets) -> JsonOffsets:
    out: JsonOffsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: dict[str, dict[str, int]]) -> Offsets:
    """The offsets of a JSON offset (from Spark's offset log). Raises KafkaSourceError when it is
    not in Spark's Kafka form."""
    try:
        return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
    except (AttributeError, TypeError, ValueError):
        raise KafkaSourceError(
            f"the offset {offsets!r} is not in Spark's Kafka form {{topic: {{partition: offset}}}}"
        ) from None


def rate_limit(base: Offsets, latest: Offsets, limit: int) -> Offsets:
    """Ends that read at most ``limit`` offsets in all from ``base``, shared in proportion to each
    partition's backlog (whole offsets, the remainder to the largest fractions)."""
    sizes = {tp: max(0, latest[tp] - base[tp]) for tp in latest}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    take = {tp: limit * size // total for tp, size in sizes.items()}
    left = limit - sum(take.values())
    by_fraction = sorted(sizes, key=lambda tp: (-(limit * sizes[tp] % total), tp))
    for tp in by_fraction[:left]:
        take[tp] += 1
    return {tp: base[tp] + take[tp] if sizes[tp] else latest[tp] for tp in latest}


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches in the driver; ``read`` runs in executor tasks."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: Offsets | None = None  # Trigger.AvailableNow: the ends found at the start
        self._latest: Offsets | None = None

    def initialOffset(self) -> JsonOffsets:
        async def initial(site: SiteClient) -> Offsets:
            found = await bounds(site, self.opts, await topic_partitions(site, self.opts.subscription))
            starts = await resolve(site, self.opts, self.opts.starting, found, starting=True)
            for tp, start in starts.items():
                check_start(self.opts, tp, start, found[tp], found[tp][1])
            return starts

        return to_json(on_site(self.opts.bootstrap, self.opts.request_timeout_s, initial, self.opts.security))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: end for tp, (_, end) in self._bounds().items()}

    def _bounds(self) -> Bounds:
        async def current(site: SiteClient) -> Bounds:
            return await bounds(site, self.opts, await topic_partitions(site, self.opts.subscription))

        return on_site(self.opts.bootstrap, self.opts.request_timeout_s, current, self.opts.security)

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> JsonOffsets:
        begin = from_json(start)
        found = self._bounds()
        latest = {tp: end for tp, (_, end) in found.items()}
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
        gone = sorted(set(begin) - set(found))
        if gone and self.opts.fail_on_data_loss:
            raise KafkaSourceError(
                f"{self.opts.subscription.describe()}: partition(s) {', '.join(f'{t}-{p}' for t, p in gone)} "
                "no longer exist on the site (the topic was deleted?). Set failOnDataLoss=false to go on without them"
            )
        base = {tp: begin.get(tp, found[tp][0] if tp in found else end) for tp, end in latest.items()}
        behind = sorted(tp for tp, end in latest.items() if end < base[tp])
        if behind and self.opts.fail_on_data_loss:
            raise KafkaSourceError(
                "the log of "
                + ", ".join(
                    f"{t}-{p} now ends at {latest[t, p]}, below offset {base[t, p]} already read" for t, p in behind
                )
                + " (truncated). Set failOnDataLoss=false to go on from where it ends now"
            )
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(base, latest, limit.max_rows)
        self._latest = latest
        return to_json(latest)

    def reportLatestOffset(self) -> JsonOffsets | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        new = {tp for tp in stop if tp not in begin}
        if new:
            earliest = {tp: b[0] for tp, b in self._bounds().items()}
            begin |= {tp: earliest.get(tp, stop[tp]) for tp in new}
        ranges = [OffsetRange(t, p, begin[t, p], e) for (t, p), e in sorted(stop.items()) if begin[t, p] < e]
        return split(ranges, self.opts.max_records_per_partition, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):
            yield from RangeReader(self.opts, partition).batches()

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: the checkpoint is the record of progress."""
