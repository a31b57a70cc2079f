"""Reading one offset range in an executor task: Fetch from the partition's leader, rows out as Arrow.

:class:`RangeReader` fetches ``[start, end)`` of one partition and hands each fetched batch to
:class:`~spark_jobs._rows.Rows` (which checks its CRC, decodes it and keeps only the records in
the range). Its guarantees:

- **Bounded memory**: one Fetch answer (``kafka.fetch.max.bytes``, 4 MiB by default; a single
  batch larger than that is fetched whole, as Kafka does) plus the Arrow batch being filled,
  which is handed out as soon as it is full (``Rows.full``), even in the middle of an answer
  (compressed batches can hold far more rows than their bytes suggest).
- **Gaps are not records**: compaction and control batches leave holes in the offsets, so the
  read ends when the next offset to fetch reaches the range's end, never by counting records.
- **Leaders move**: a connection failure or a leadership error (NOT_LEADER_OR_FOLLOWER, a
  fenced epoch, ...) forgets the connection, refreshes the metadata and tries again, backing off
  up to 2 s; a read that makes no progress for ``kafkaConsumer.pollTimeoutMs`` fails naming the
  partition, the offset and the last problem.
- **Data loss**: offsets below the log start (deleted before they were read), or a range that
  never reaches its end (the log was truncated), fail the task naming the partition and
  offsets; with ``failOnDataLoss=false`` each lost range is one row with ``valid`` false instead.
- **read_committed** (``kafka.isolation.level``) drops the batches of aborted transactions, as a
  Kafka consumer does (the fetch answer lists them).

Each stretch of fetching runs in its own ``trio.run`` (a generator cannot yield from inside one):
a fresh connection per Arrow batch, the metadata carried over as plain data.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Iterator

import pyarrow as pa
import trio

from node.client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    ClientError,
    FetchedPartition,
    SiteClient,
    TopicMeta,
    complete_batches,
    fetch_partition,
    list_offsets,
)
from node.protocol import ErrorCode, error_info
from storage.records import HEADER_SIZE, BatchHeader, Offset, read_header

from .._rows import BatchRows, Bounds, Rows
from ._kafka_options import ReadOptions
from ._kafka_plan import CLIENT_ID, KafkaSourceError, OffsetRange, data_loss

MAX_WAIT_MS = 500  # how long the leader holds a Fetch that finds nothing new
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.1, 2.0


class RangeReader:
    """Reads one :class:`OffsetRange`; :meth:`batches` yields its rows as Arrow batches.

    ``lost`` counts the offsets skipped as lost (only with ``failOnDataLoss=false``).
    """

    def __init__(self, opts: ReadOptions, piece: OffsetRange) -> None:
        self.opts = opts
        self.piece = piece
        self.offset = piece.start
        self.lost = 0
        bounds = Bounds(piece.start, piece.end)
        if opts.rows == "batches":  # a batch across two pieces' boundary is the earlier piece's row
            self.rows: Rows | BatchRows = BatchRows(
                include_control=opts.include_control, bounds=bounds, own_earlier=piece.first
            )
        else:
            self.rows = Rows(include_control=opts.include_control, bounds=bounds)
        self._max_bytes = opts.fetch_max_bytes
        self._secured = opts.security.site_client_kwargs()  # one TLS context for the task's connections
        self._brokers: dict[int, str] = {}
        self._topics: dict[str, TopicMeta] = {}
        self._progress_at = time.monotonic()
        self._backoff = FIRST_BACKOFF_S
        self._problem = "no answer yet"
        self._high_watermark = -1
        self._unknown = False  # the leader last said it does not know the topic (deleted?)
        self._pending: Iterator[None] | None = None  # batches of the last Fetch answer not yet decoded

    @property
    def where(self) -> str:
        return f"{self.piece.topic}-{self.piece.partition}"

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Arrow batches of ARROW_SCHEMA (ARROW_BATCH_SCHEMA with ``rows=batches``) until the range is
        read. Raises KafkaSourceError."""
        while self.offset < self.piece.end:
            trio.run(self._fill)
            batch = self.rows.flush()
            if batch is not None:
                yield batch

    # -- one stretch of fetching ------------------------------------------------------------------

    async def _fill(self) -> None:
        """Fetch until the Arrow batch is full or the range is read, on a client of its own."""
        opts = self.opts
        site = SiteClient(
            opts.bootstrap, opts.bootstrap, client_id=CLIENT_ID, timeout=opts.request_timeout_s, **self._secured
        )
        site.brokers, site.topics = self._brokers, self._topics
        self._progress_at = time.monotonic()  # the time Spark spent between two batches is not ours
        try:
            while self.offset < self.piece.end and not self.rows.full:
                if self._pending is not None:  # what the last Fetch answered beyond a full batch
                    self._drain()
                    continue
                try:
                    progressed = await self._fetch_once(site)
                except ClientError as exc:  # the leader unreachable, no leader, no broker at all
                    self._problem = str(exc)
                    progressed = False
                if progressed:
                    self._progress_at = time.monotonic()
                    self._backoff = FIRST_BACKOFF_S
                    continue
                if time.monotonic() - self._progress_at > opts.poll_timeout_s:
                    self._stalled()
                    return
                await trio.sleep(self._backoff)
                self._backoff = min(2 * self._backoff, MAX_BACKOFF_S)
        finally:
            self._brokers, self._topics = site.brokers, site.topics
            with trio.CancelScope(shield=True):
                await site.aclose()

    async def _fetch_once(self, site: SiteClient) -> bool:
        """One Fetch; True when the read moved on. Raises ClientError for what a retry may cure."""
        topic, partition = self.piece.topic, self.piece.partition
        try:
            broker, conn = await site.leader_connection(topic, partition)
        except ClientError:
            with contextlib.suppress(ClientError):  # the leader is gone: learn the new one
                await site.refresh([topic])
            raise
        try:
            fetched = await fetch_partition(
                conn,
                topic,
                partition,
                Offset(self.offset),
                isolation_level=self.opts.isolation_level,
                max_wait_ms=MAX_WAIT_MS,
                max_bytes=self._max_bytes,
                timeout=self.opts.request_timeout_s,
            )
        except ClientError:
            await site.forget(broker)
            await site.refresh([topic])
            raise
        code = fetched.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            return await self._out_of_range(site)
        if code:
            info = error_info(code)
            if not info.retriable and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise KafkaSourceError(
                    f"fetching {self.where} at offset {self.offset} from {conn.address}: "
                    f"{info.name} ({info.description})"
                )
            self._problem = f"{conn.address} answered {info.name} for {self.where}"
            self._unknown = code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            await site.forget(broker)
            await site.refresh([topic])  # a leader moved: follow it
            return False
        self._high_watermark = fetched.high_watermark
        self._unknown = False
        return self._take(fetched)

    def _take(self, fetched: FetchedPartition) -> bool:
        """Decode the whole batches of a Fetch answer, until the Arrow batch is full (the rest
        waits in ``_pending``); True when the read moved on."""
        self._pending = self._decode(fetched)
        if self._drain():
            return True
        view = fetched.records
        if len(view) >= HEADER_SIZE and read_header(view).size > self._max_bytes:
            # One batch larger than kafka.fetch.max.bytes came cut short: ask for all of it.
            self._max_bytes = read_header(view).size
            return True
        self._problem = (
            f"{self.where} has no records at offset {self.offset} yet "
            f"(high watermark {fetched.high_watermark}, last stable offset {fetched.last_stable_offset})"
        )
        return False

    def _drain(self) -> bool:
        """Decode pending batches until the Arrow batch is full or none are left; True when one was."""
        moved = False
        for _ in self._pending or ():
            moved = True
            if self.rows.full:
                return True  # the rest of the answer is decoded into the next Arrow batch
        self._pending = None
        return moved

    def _decode(self, fetched: FetchedPartition) -> Iterator[None]:
        """Add each whole batch of the answer to the rows, one per step (read_committed: not those
        of aborted transactions); the offset moves past each."""
        view = fetched.records
        aborted = _AbortedTransactions(fetched) if self.opts.isolation_level == READ_COMMITTED else None
        try:
            for pos, header in complete_batches(view):
                if header.next_offset <= self.offset:
                    continue  # the answer starts with the batch holding the offset asked for
                if aborted is None or not aborted.drops(header):
                    self.rows.add_batch(view[pos : pos + header.size], self.piece.topic, self.piece.partition, None)
                self.offset = header.next_offset
                yield
        except ClientError as exc:
            # A length field that cannot be right: nothing after it can be found. Count it, stop.
            self.rows.add_invalid(
                self.piece.topic,
                self.piece.partition,
                self.offset,
                f"the fetched records of {self.where} at offset {self.offset} are corrupt ({exc}); "
                f"offsets [{self.offset}, {self.piece.end}) could not be read",
                None,
            )
            self.offset = self.piece.end
            yield

    async def _out_of_range(self, site: SiteClient) -> bool:
        """OFFSET_OUT_OF_RANGE: below the log start the records are gone; above its end the log
        was truncated, or a new leader is catching up (not progress: the deadline decides)."""
        topic, partition = self.piece.topic, self.piece.partition
        log_start = (await list_offsets(site, topic, [partition], EARLIEST))[partition]
        if self.offset >= log_start:
            end = (await list_offsets(site, topic, [partition], LATEST))[partition]
            self._high_watermark = end
            self._problem = f"{self.where}: the log ends at {end}, before offset {self.offset}"
            return False
        self._lose(min(log_start, self.piece.end), log_start)
        return True

    def _stalled(self) -> None:
        """No progress for kafkaConsumer.pollTimeoutMs: the records are gone (the partition ends
        before them, or its topic was deleted) or the leader cannot be reached."""
        if 0 <= self._high_watermark <= self.offset or self._unknown:
            if self.opts.fail_on_data_loss:
                raise KafkaSourceError(
                    f"{self.where}: offsets [{self.offset}, {self.piece.end}) did not become readable within "
                    f"kafkaConsumer.pollTimeoutMs={self.opts.poll_timeout_s * 1000:.0f} ({self._problem}); the log "
                    "was truncated or the topic deleted. Set failOnDataLoss=false to skip them"
                )
            self._lose(self.piece.end, -1)
            return
        raise KafkaSourceError(
            f"{self.where}: no progress at offset {self.offset} within "
            f"kafkaConsumer.pollTimeoutMs={self.opts.poll_timeout_s * 1000:.0f} "
            f"(kafka.bootstrap.servers={self.opts.bootstrap}): {self._problem}"
        )

    def _lose(self, end: int, log_start: int) -> None:
        """Offsets [offset, end) are gone: fail, or (failOnDataLoss=false) one invalid row."""
        first = self.offset
        message = data_loss(self.piece.topic, self.piece.partition, first, end, log_start)
        if self.opts.fail_on_data_loss:
            raise KafkaSourceError(message)
        self.rows.add_invalid(
            self.piece.topic,
            self.piece.partition,
            first,
            f"data loss: offsets [{first}, {end}) of {self.where} were gone when read (failOnDataLoss=false)",
            None,
        )
        self.lost += end - first
        self.offset = end
        # The batch holding the new offset may begin below it: what it holds below is not the read's.
        self.rows.bounds = Bounds(end, self.piece.end)


class _AbortedTransactions:
    """The Kafka consumer's rule for one Fetch answer: a transactional batch of a producer whose
    aborted transaction began at or before it is dropped, until that producer's next control
    batch (the abort marker)."""

    def __init__(self, fetched: FetchedPartition) -> None:
        self._pending = [(first, pid) for pid, first in fetched.aborted]
        heapq.heapify(self._pending)
        self._aborting: set[int] = set()

    def drops(self, header: BatchHeader) -> bool:
        while self._pending and self._pending[0][0] <= header.last_offset:
            self._aborting.add(heapq.heappop(self._pending)[1])
        if header.is_control:
            self._aborting.discard(header.producer_id)
            return False
        return header.is_transactional and header.producer_id in self._aborting
