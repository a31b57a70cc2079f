"""Copy one source partition into its MM2 remote partition on any Kafka target, with offset syncs.

Source topic ``T`` partition ``p`` goes to target topic ``<source alias>.T`` partition ``p``.
The target assigns its own offsets, so the copier keeps two positions: ``upstream_next``, the
next source offset to copy, and ``downstream_next``, where the remote partition should end.

The loop:

1. fetch from ``upstream_next`` with read_committed (only decided transactions, below the
   last stable offset);
2. drop control batches and the batches of aborted transactions, exactly as Kafka's consumer
   does with the answer's ``aborted_transactions``;
3. produce each remaining batch (acks=all, one batch per request) as raw bytes with its
   compression: only the header fields that must change are rewritten (baseOffset 0,
   producer id/epoch/base sequence -1, transactional bit cleared) and the CRC-32C recomputed.
   A batch the target could not take as it is (a compacted batch with holes between its
   offsets, a LogAppendTime or delete-horizon batch, or one that starts before
   ``upstream_next``) is rebuilt from its records with the same codec, keys, values, headers
   and timestamps;
4. after each produce, write the offset sync ``(last source record copied, its target offset)``
   to ``mm2-offset-syncs.<target>.internal`` on the source.

Resume (at every start, and after every error): the latest sync ``(u, d)`` of the partition
says everything up to source ``u`` is on the target up to ``d``, so the copy goes on at
``u + 1`` and the target should end at ``d + 1``. The target's end offset ``E`` is checked:

- ``E == d + 1``: carry on;
- ``E > d + 1``: the copier stopped between a produce and its sync; the ``E - d - 1``
  records already there are the first ones the copy would produce next, so they are skipped by
  re-fetching from ``u + 1`` and counting (filtering is deterministic): no gap, no duplicate;
- ``E < d + 1``: the target lost records (re-created or truncated): state ``diverged``,
  nothing copied, checked again every few seconds.

With no sync at all and an empty remote partition, the copy starts at the source's log start
after writing an anchor sync ``(log start - 1, E - 1)`` (translates any group to ``E``). With no
sync and a remote partition that holds records, the copier cannot know which source records
they are: state ``unknown-position``, nothing copied, an error in the log.

This is exact only while the copier is the sole writer of the remote partition, and a produce
whose outcome was unknown (a timeout) must be settled in the target's high watermark when the
end offset is read again; see docs/mm2.md.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass

import trio

from node.client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    ClientError,
    FetchedPartition,
    NodeConnection,
    ProduceRecord,
    SiteClient,
    aclose_quietly,
    complete_batches,
    ensure_topic,
    fetch_partition,
    list_offset,
    produce_batch,
    produce_records,
    run_reconnecting,
)
from node.protocol import ErrorCode
from storage.records import (
    CONTROL_ABORT,
    BatchBuilder,
    BatchHeader,
    Compression,
    LeaderEpoch,
    Offset,
    RecordBatch,
    crc_of,
    set_base_offset,
    set_partition_leader_epoch,
)

from ._copier import PartitionProgress
from ._mm2_formats import OffsetSync, encode_offset_sync
from ._mm2_io import INTERNAL_TOPIC_CONFIGS
from ._mm2_policy import offset_syncs_topic, remote_topic
from ._mm2_syncs import OffsetSyncStore, sync_for
from ._offsets import NO_SOURCE_OFFSET, NO_TARGET_OFFSET, SourceOffset, TargetOffset, source_offset, target_offset

log = logging.getLogger("strait.mirror.mm2")

# The header fields a forwarded batch must change (layout in storage/records/_batch.py).
_CRC = struct.Struct(">I")  # at byte 17, over bytes 21..end
_CRC_POS = 17
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_ATTRIBUTES_POS = 21
_PRODUCER = struct.Struct(
    ">q"  # producerId, at byte 43
    "h"  # producerEpoch
    "i"  # baseSequence
)
_PRODUCER_POS = 43
_ATTR_TRANSACTIONAL = 0x10
_ATTR_DELETE_HORIZON = 0x40

DATA, CONTROL, ABORTED, EMPTY = "data", "control", "aborted", "empty"


class TransactionFilter:
    """Kafka's read_committed rule over one fetch answer (its consumer's ``CompletedFetch``).

    ``aborted`` are the answer's (producer id, first offset) pairs. Batches must be shown in
    log order, all of them (also those before the fetch offset): an aborted transaction of a
    producer starts at its first offset and ends at that producer's ABORT marker.
    """

    def __init__(self, aborted: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._aborting: set[int] = set()

    def verdict(self, batch: memoryview, header: BatchHeader) -> str:
        """DATA (copy it), CONTROL (a transaction marker), ABORTED, or EMPTY (no records left)."""
        if header.producer_id >= 0:
            while self._pending and self._pending[0][1] <= header.last_offset:
                self._aborting.add(self._pending.pop(0)[0])
            if header.is_control:
                if _is_abort_marker(batch, header):
                    self._aborting.discard(header.producer_id)
                return CONTROL
            if header.is_transactional and header.producer_id in self._aborting:
                return ABORTED
        if header.is_control:
            return CONTROL
        if header.records_count == 0:
            return EMPTY
        return DATA


def _is_abort_marker(batch: memoryview, header: BatchHeader) -> bool:
    for record in RecordBatch(batch[: header.size], validate=False).records():
        key = record.key or b""
        return len(key) >= 4 and struct.unpack_from(">hh", key)[1] == CONTROL_ABORT
    return False


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A batch ready to produce: its bytes, record count, the last source offset it carries, timestamps."""

    payload: bytes
    records: int
    last_upstream: SourceOffset
    first_timestamp: int
    max_timestamp: int


def forward(
    batch: memoryview, header: BatchHeader, upstream_next: SourceOffset, skip: int
) -> tuple[Outgoing | None, int]:
    """The part of a data batch to produce: its records at or after ``upstream_next``, less the first ``skip``.

    Returns (the batch to produce or None when nothing is left, how many records were skipped).
    Raw bytes with a rewritten header when the batch can go as it is; else rebuilt from its
    records (same codec, keys, values, headers and timestamps). Raises StorageError subclasses
    for a batch whose records do not decode.
    """
    whole = header.base_offset >= upstream_next and header.records_count == header.last_offset_delta + 1
    if whole and skip >= header.records_count:
        return None, header.records_count
    if whole and skip == 0 and not header.is_log_append_time and not header.attributes & _ATTR_DELETE_HORIZON:
        return Outgoing(
            rewrite_header(batch[: header.size]),
            header.records_count,
            source_offset(header.last_offset),
            header.base_timestamp,
            header.max_timestamp,
        ), 0
    records = [r for r in RecordBatch(batch[: header.size]).records() if r.offset >= upstream_next]
    skipped = min(skip, len(records))
    records = records[skipped:]
    if not records:
        return None, skipped
    builder = BatchBuilder(compression=Compression(header.compression))
    for r in records:
        builder.append(r.timestamp, r.key, r.value, r.headers)
    return Outgoing(
        builder.build(),
        len(records),
        source_offset(records[-1].offset),
        records[0].timestamp,
        max(r.timestamp for r in records),
    ), skipped


def rewrite_header(batch: memoryview | bytes) -> bytes:
    """A copy of a batch as a plain producer would send it: baseOffset 0, no leader epoch, no
    producer id, epoch or sequence, not transactional; the CRC-32C recomputed. Records untouched."""
    buf = bytearray(batch)
    set_base_offset(buf, Offset(0))
    set_partition_leader_epoch(buf, LeaderEpoch(-1))
    (attributes,) = _ATTRIBUTES.unpack_from(buf, _ATTRIBUTES_POS)
    _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_POS, attributes & ~_ATTR_TRANSACTIONAL)
    _PRODUCER.pack_into(buf, _PRODUCER_POS, -1, -1, -1)
    _CRC.pack_into(buf, _CRC_POS, crc_of(buf, 0, len(buf)))
    return bytes(buf)


class MM2PartitionCopier:
    """Copies ``topic``-``partition`` of the source into ``<source_alias>.<topic>`` on the target.

    ``progress`` is the shared PartitionProgress: ``mirrored_offset`` is the next *source*
    offset to copy (everything below is on the target or was dropped as aborted/control), so
    ``lag_records`` counts source records not yet copied. ``downstream_next`` is where the
    remote partition is expected to end. ``offset_syncs`` may be a store shared by the copiers
    of one link (it is loaded, not written, by the copier).
    """

    def __init__(
        self,
        source: SiteClient,
        target: SiteClient,
        source_alias: str,
        target_alias: str,
        topic: str,
        partition: int,
        *,
        offset_syncs: OffsetSyncStore | None = None,
        link: str | None = None,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 4 * 1024 * 1024,
        produce_timeout_ms: int = 30_000,
        backoff_s: float = 0.5,
    ) -> None:
        self.source = source
        self.target = target
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.link = link if link is not None else f"{source_alias}->{target_alias}"
        self.remote_topic = remote_topic(source_alias, topic)
        self.sync_topic = offset_syncs_topic(target_alias)
        self.progress = PartitionProgress(topic, partition)
        self.offset_syncs = offset_syncs
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.produce_timeout_ms = produce_timeout_ms
        self.backoff_s = backoff_s
        self.upstream_next = NO_SOURCE_OFFSET  # not known: derive it from the offset syncs
        self.downstream_next = NO_TARGET_OFFSET
        self.skip = 0  # records at upstream_next and after that the target already holds
        self.syncs_written = 0
        self._check_target = True  # compare the target's end with downstream_next before copying
        self._pending_sync: OffsetSync | None = None  # produced, sync not yet written
        self._src: NodeConnection | None = None
        self._tgt: NodeConnection | None = None

    @property
    def sync_pending(self) -> bool:
        """True from a produce until its offset sync is written."""
        return self._pending_sync is not None

    @property
    def _name(self) -> str:
        p = self.progress
        return f"{self.link} {p.topic}-{p.partition} -> {self.remote_topic}-{p.partition}"

    # -- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Copy until cancelled. Outages are retried with backoff (``progress.errors``,
        ``last_error``), never raised; the position is re-derived at each start."""
        p = self.progress
        self.upstream_next, self.downstream_next = NO_SOURCE_OFFSET, NO_TARGET_OFFSET
        self.skip = 0
        self._check_target = True
        # A sync left unwritten by an earlier run is dropped, not written late: another process
        # may have copied since. Resume counts what the target holds past the latest sync.
        self._pending_sync = None

        def on_error(exc: Exception) -> None:
            p.errors += 1
            p.last_error = str(exc)
            log.info("%s: %s; reconnecting", self._name, exc)
            self._check_target = True  # a produce may have landed: look at the target again

        await run_reconnecting(self._step, reset=self._close, on_error=on_error, backoff_s=self.backoff_s)

    async def _close(self) -> None:
        await aclose_quietly(self._src, self._tgt)
        self._src = self._tgt = None

    async def _step(self) -> None:
        if self._pending_sync is not None:
            await self._write_sync(self._pending_sync)
        if self.upstream_next < 0:
            if not await self._start():
                await trio.sleep(self.backoff_s * 4)
            return
        if self._check_target:
            if not self._reconcile(await self._target_offset(LATEST)):
                await trio.sleep(self.backoff_s * 4)
            return
        await self._copy_once()

    # -- where to resume -------------------------------------------------------------------------

    async def _start(self) -> bool:
        """Derive the position from the latest offset sync and the target; False when copying cannot start."""
        p = self.progress
        await ensure_topic(self.source, self.sync_topic, configs=INTERNAL_TOPIC_CONFIGS)
        store = self.offset_syncs if self.offset_syncs is not None else OffsetSyncStore(self.source, self.sync_topic)
        await store.load()
        sync = store.latest(p.topic, p.partition)
        start = await self._target_offset(EARLIEST)
        end = await self._target_offset(LATEST)
        if sync is None:
            if end > start:
                self._stop_state(
                    "unknown-position",
                    f"no offset sync for {p.topic}-{p.partition} in {self.sync_topic} on site {self.source.name}, "
                    f"but {self.remote_topic}-{p.partition} on site {self.target.name} already holds offsets "
                    f"[{start}, {end}): not copying, it cannot tell which source records those are (empty the remote "
                    "partition to copy from the source's log start, or write an offset sync to say where it ends)",
                )
                return False
            log_start = await self._source_offset(EARLIEST)
            anchor = sync_for(p.topic, p.partition, log_start - 1, end - 1)
            await self._write_sync(anchor)
            log.info("%s: no offset sync yet; copying from the source's log start %d", self._name, log_start)
            sync = anchor
        self.upstream_next = source_offset(sync.upstream + 1)
        self.downstream_next = target_offset(sync.downstream + 1)
        self.skip = 0
        p.mirrored_offset = self.upstream_next
        return self._reconcile(end)

    def _reconcile(self, end: TargetOffset) -> bool:
        """Line the position up with the target's end offset ``end``; False when they cannot agree."""
        p = self.progress
        if end > self.downstream_next:
            extra = end - self.downstream_next
            log.warning(
                "%s: the target ends at %d, %d records past the last offset sync (stopped between a produce and "
                "its sync); skipping the next %d source records, which are already there",
                self._name,
                end,
                extra,
                extra,
            )
            self.skip += extra
            self.downstream_next = end
        elif end < self.downstream_next:
            self._stop_state(
                "diverged",
                f"{self.remote_topic}-{p.partition} on site {self.target.name} ends at {end} but the offset syncs say "
                f"it holds records up to {self.downstream_next - 1}: the target lost records (topic re-created or "
                "truncated); not copying until resolved",
            )
            self.upstream_next, self.downstream_next = NO_SOURCE_OFFSET, NO_TARGET_OFFSET  # look again, from the syncs
            return False
        self._check_target = False
        if p.state != "copying":
            log.info("%s: copying from source offset %d, target offset %d", self._name, self.upstream_next, end)
        p.state = "copying"
        p.last_error = None
        return True

    def _stop_state(self, state: str, why: str) -> None:
        p = self.progress
        if p.state != state or p.last_error != why:
            log.error("%s: %s", self._name, why)
        p.state = state
        p.last_error = why

    # -- copying ---------------------------------------------------------------------------------

    async def _fetch(self, offset: SourceOffset) -> FetchedPartition:
        """One read_committed fetch from the source leader (a seam for tests)."""
        p = self.progress
        if self._src is None:
            self._src = await self.source.open_leader(p.topic, p.partition)
        return await fetch_partition(
            self._src,
            p.topic,
            p.partition,
            offset,
            isolation_level=READ_COMMITTED,
            max_wait_ms=self.fetch_max_wait_ms,
            max_bytes=self.fetch_max_bytes,
        )

    async def _copy_once(self) -> None:
        p = self.progress
        part = await self._fetch(self.upstream_next)
        log_start, high_watermark = source_offset(part.log_start_offset), source_offset(part.high_watermark)
        if log_start >= 0:
            p.source_log_start = log_start
        if high_watermark >= 0:
            p.source_high_watermark = high_watermark
        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(log_start, high_watermark)
            return
        if part.error_code:
            raise ClientError.from_code(part.error_code, f"fetch {p.topic}-{p.partition} from site {self.source.name}")
        txns = TransactionFilter(part.aborted)
        view = part.records
        for pos, header in complete_batches(view):
            batch = view[pos : pos + header.size]
            verdict = txns.verdict(batch, header)
            if header.next_offset <= self.upstream_next:
                continue
            if verdict != DATA:
                self._advance(source_offset(header.next_offset))
                continue
            if p.oldest_unmirrored_ms < 0:
                p.oldest_unmirrored_ms = header.base_timestamp
            out, skipped = forward(batch, header, self.upstream_next, self.skip)
            self.skip -= skipped
            if out is None:
                self._advance(source_offset(header.next_offset))
                continue
            await self._produce(out)
            self._advance(source_offset(header.next_offset))
            await self._write_sync(self._pending_sync)
        if p.lag_records <= 0:
            p.oldest_unmirrored_ms = -1

    def _advance(self, upstream_next: SourceOffset) -> None:
        self.upstream_next = upstream_next
        self.progress.mirrored_offset = upstream_next

    async def _produce(self, out: Outgoing) -> None:
        p = self.progress
        if self._tgt is None:
            self._tgt = await self.target.open_leader(self.remote_topic, p.partition)
        base = target_offset(
            await produce_batch(
                self._tgt, self.remote_topic, p.partition, out.payload, timeout_ms=self.produce_timeout_ms
            )
        )
        if base != self.downstream_next:
            log.warning(
                "%s: the target put the batch at %d, expected %d: another writer uses the remote partition, so "
                "resuming after a stop may duplicate or skip records",
                self._name,
                base,
                self.downstream_next,
            )
        last = target_offset(base + out.records - 1)
        self.downstream_next = target_offset(last + 1)
        self._pending_sync = sync_for(p.topic, p.partition, out.last_upstream, last)
        p.records_copied += out.records
        p.bytes_copied += len(out.payload)
        p.latency.observe((time.time() * 1000 - out.max_timestamp) / 1000, out.records)
        p.oldest_unmirrored_ms = out.max_timestamp

    async def _write_sync(self, sync: OffsetSync | None) -> None:
        """Write an offset sync to the source's offset-syncs topic; kept pending until it is written."""
        if sync is None:
            return
        self._pending_sync = sync
        key, value = encode_offset_sync(sync)
        await produce_records(self.source, self.sync_topic, 0, [ProduceRecord(key, value)])
        self._pending_sync = None
        self.syncs_written += 1

    async def _out_of_range(self, log_start: SourceOffset, high_watermark: SourceOffset) -> None:
        p = self.progress
        if log_start > self.upstream_next:
            gap = (self.upstream_next, log_start)
            p.gaps.append(gap)
            log.error(
                "%s: source records [%d, %d) were deleted on site %s before they were copied: %d records LOST to "
                "the target",
                self._name,
                gap[0],
                gap[1],
                self.source.name,
                gap[1] - gap[0],
            )
            if self.skip:
                self._stop_state(
                    "unknown-position",
                    f"the target holds {self.skip} records past the last offset sync, but the source records they "
                    f"copied from [{gap[0]}, ...) are partly deleted: cannot tell where to resume without a "
                    "duplicate or a gap",
                )
                self.upstream_next, self.downstream_next = NO_SOURCE_OFFSET, NO_TARGET_OFFSET
                await trio.sleep(self.backoff_s * 4)
                return
            self._advance(log_start)
            return
        if high_watermark >= 0 and self.upstream_next > high_watermark:
            self._stop_state(
                "diverged",
                f"the copy is at source offset {self.upstream_next}, past the source's high watermark "
                f"{high_watermark}: the source lost records (unclean election, topic re-created); not copying "
                "until resolved",
            )
            self.upstream_next, self.downstream_next = NO_SOURCE_OFFSET, NO_TARGET_OFFSET
            await trio.sleep(self.backoff_s * 4)
            return
        raise ClientError(f"fetch {p.topic}-{p.partition} at {self.upstream_next}: offset out of range")

    # -- offsets ---------------------------------------------------------------------------------

    async def _target_offset(self, which: int) -> TargetOffset:
        if self._tgt is None:
            self._tgt = await self.target.open_leader(self.remote_topic, self.progress.partition)
        return target_offset(await list_offset(self._tgt, self.remote_topic, self.progress.partition, which))

    async def _source_offset(self, which: int) -> SourceOffset:
        p = self.progress
        if self._src is None:
            self._src = await self.source.open_leader(p.topic, p.partition)
        return source_offset(await list_offset(self._src, p.topic, p.partition, which))
