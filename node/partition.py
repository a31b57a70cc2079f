"""A partition this node leads: its log, its idempotent producer state, and waiting fetchers.

``append_produced`` applies Kafka's produce rules to one batch from a client, in this order:
size (MESSAGE_TOO_LARGE), magic (UNSUPPORTED_FOR_MESSAGE_FORMAT), length and CRC-32C
(CORRUPT_MESSAGE), exactly one batch with baseOffset 0 and a record count that matches
lastOffsetDelta, no control or transactional batches (INVALID_RECORD), CreateTime within
``message.timestamp.before/after.max.ms`` (INVALID_TIMESTAMP), then the idempotence rules
(``node.producer_state``). Only then is the batch appended, as produced.

Fetchers register an event with ``add_waiter``; every append (and deletion) sets it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from node.errors import BrokerError, invalid_record
from node.producer_state import ProducerStateError, ProducerStateManager
from node.protocol import ErrorCode
from node.topic_config import TopicPolicy
from storage import CorruptBatchError, PartitionLog, RecordTooLargeError, TopicPartition
from storage.records import check_batch
from storage.records._batch import CURRENT_MAGIC, HEADER_SIZE, MAGIC_POS

LONG_MAX = 2**63 - 1
ZSTD = 4


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        log: PartitionLog,
        policy: TopicPolicy,
        *,
        leader_epoch: int = 0,
        producer_max_ids: int = 10_000,
        clock: Callable[[], int],
    ) -> None:
        self.tp = tp
        self.log = log
        self.policy = policy
        self.leader_epoch = leader_epoch
        self._clock = clock
        self.producers = ProducerStateManager(producer_max_ids)
        self.producers.rebuild(h for _seg, _pos, h in log.batch_headers(log.log_start_offset))
        self._waiters: set[trio.Event] = set()
        # A single-replica partition: everything appended is committed.
        log.high_watermark = log.log_end_offset

    def append_produced(self, records: memoryview | None, *, allow_zstd: bool = True) -> ProduceResult:
        """Validate and append one client batch; raises BrokerError with the Kafka code."""
        tp = self.tp
        if records is None or len(records) == 0:
            raise invalid_record(f"{tp}: produce request without records")
        size = len(records)
        limit = self.log.config.max_message_bytes
        if size > limit:
            raise BrokerError(
                ErrorCode.MESSAGE_TOO_LARGE, f"{tp}: batch of {size} bytes exceeds max.message.bytes={limit}"
            )
        if size > MAGIC_POS and records[MAGIC_POS] != CURRENT_MAGIC:
            raise BrokerError(
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                f"{tp}: record batch magic {records[MAGIC_POS]}; strait accepts only magic 2 (Kafka 0.11+)",
            )
        if size < HEADER_SIZE:
            raise BrokerError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: {size} bytes is less than a batch header")
        try:
            header = check_batch(records)
        except CorruptBatchError as exc:
            raise BrokerError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
        if header.size != size:
            raise invalid_record(
                f"{tp}: a produce request must carry exactly one record batch ({size} bytes sent, "
                f"the first batch has {header.size})"
            )
        if header.base_offset != 0:
            raise invalid_record(f"{tp}: batch baseOffset is {header.base_offset}, a producer must send 0")
        if header.last_offset_delta + 1 != header.records_count:
            raise invalid_record(
                f"{tp}: batch has {header.records_count} records but lastOffsetDelta {header.last_offset_delta}"
            )
        if header.is_control:
            raise invalid_record(f"{tp}: clients may not produce control batches")
        if header.is_transactional:
            raise invalid_record(f"{tp}: transactional batches are not supported by strait yet")
        if header.compression == ZSTD and not allow_zstd:
            raise BrokerError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"{tp}: zstd needs Produce v7 or later")
        now = self._clock()
        if not header.is_log_append_time and self.log.config.message_timestamp_type == "CreateTime":
            self._check_timestamps(header.base_timestamp, header.max_timestamp, now)
        try:
            duplicate = self.producers.check(header)
        except ProducerStateError as exc:
            raise BrokerError(ErrorCode(exc.error_code), f"{tp}: {exc}") from None
        if duplicate is not None:
            return ProduceResult(duplicate.first_offset, -1, self.log.log_start_offset, duplicate=True)
        try:
            info = self.log.append(records, leader_epoch=self.leader_epoch, validate=False)
        except RecordTooLargeError as exc:
            raise BrokerError(ErrorCode.MESSAGE_TOO_LARGE, f"{tp}: {exc}") from None
        self.producers.update(header, info.base_offset)
        self.log.high_watermark = self.log.log_end_offset
        self.wake()
        return ProduceResult(info.base_offset, info.log_append_time, info.log_start_offset)

    def append_internal(self, batch: bytes) -> int:
        """Append a batch the broker built itself (``__consumer_offsets``); returns its base offset."""
        info = self.log.append(batch, leader_epoch=self.leader_epoch)
        self.log.high_watermark = self.log.log_end_offset
        self.wake()
        return info.base_offset

    def _check_timestamps(self, first: int, last: int, now: int) -> None:
        before, after = self.policy.timestamp_before_max_ms, self.policy.timestamp_after_max_ms
        for ts in (first, last):
            if ts < 0:
                continue  # -1: no timestamp (old clients); Kafka lets it through
            if before < LONG_MAX and ts < now - before:
                raise BrokerError(
                    ErrorCode.INVALID_TIMESTAMP,
                    f"{self.tp}: timestamp {ts} is more than message.timestamp.before.max.ms={before} "
                    f"before now ({now})",
                )
            if after < LONG_MAX and ts > now + after:
                raise BrokerError(
                    ErrorCode.INVALID_TIMESTAMP,
                    f"{self.tp}: timestamp {ts} is more than message.timestamp.after.max.ms={after} after now ({now})",
                )

    def wake(self) -> None:
        """Wake every fetcher waiting on this partition."""
        if self._waiters:
            for event in self._waiters:
                event.set()
            self._waiters.clear()

    def add_waiter(self, event: trio.Event) -> None:
        """Have ``event`` set by the next append (or deletion); ``discard_waiter`` when done."""
        self._waiters.add(event)

    def discard_waiter(self, event: trio.Event) -> None:
        self._waiters.discard(event)
