"""Idempotent producer state of one partition: Kafka's sequence rules (KIP-98).

For each producer id the broker keeps the current epoch and the sequence ranges and offsets
of the last ``MAX_BATCHES`` batches it appended. Before an append, ``check`` decides:

- no producer id (``-1``): not idempotent, always appended;
- an unknown producer id: accepted, whatever its first sequence (the state may have been
  expired or removed by retention; Kafka does the same since KIP-360);
- an epoch below the known one: ``InvalidProducerEpoch`` (INVALID_PRODUCER_EPOCH, 47);
- a new, higher epoch: must start at sequence 0, else ``OutOfOrderSequence`` (45);
- the same epoch: a batch whose sequence range equals one of the cached batches is a
  *duplicate* and is answered with the offset it got the first time, without appending;
  otherwise its first sequence must follow the last one (wrapping at INT32_MAX), else
  ``OutOfOrderSequence``.

Transactions (KIP-98): a producer's first transactional batch opens its transaction at that
batch's offset, and a transaction marker (a COMMIT or ABORT control batch, written for the
coordinator by WriteTxnMarkers) ends it. Meanwhile a non-transactional batch from that producer
is ``InvalidTxnState`` (INVALID_TXN_STATE, 48). Before a marker is appended, ``check_marker``
fences an epoch below the producer's (INVALID_PRODUCER_EPOCH) and a coordinator epoch below the
last marker's (``TransactionCoordinatorFenced``, TRANSACTION_COORDINATOR_FENCED, 52); once
appended, the marker's epoch becomes the producer's, so a zombie of the older epoch is fenced
from then on. Each ended transaction is remembered as a ``CompletedTxn`` until the high
watermark passes its marker: the last stable offset (``first_unstable_offset``) waits for it.
A producer with an open transaction is never dropped to make room for others.

The state is rebuilt from the log's batch headers (and the markers' records) when a partition
is loaded (so it survives restarts and kill -9: only appended batches count) and after
truncation.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from storage.records import BatchHeader, ControlMarker

MAX_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 0x7FFFFFFF


class ProducerStateError(Exception):
    """A produce that breaks the idempotence rules; carries the Kafka error code."""

    error_code = -1


class InvalidProducerEpoch(ProducerStateError):
    error_code = 47

    def __init__(self, producer_id: int, epoch: int, current: int) -> None:
        super().__init__(f"producer {producer_id}: epoch {epoch} is older than the current epoch {current}")


class OutOfOrderSequence(ProducerStateError):
    error_code = 45

    def __init__(self, producer_id: int, epoch: int, first_seq: int, expected: int) -> None:
        super().__init__(
            f"producer {producer_id} epoch {epoch}: batch starts at sequence {first_seq}, expected {expected}"
        )


class InvalidProducerRecord(ProducerStateError):
    error_code = 87  # INVALID_RECORD

    def __init__(self, producer_id: int, base_sequence: int) -> None:
        super().__init__(f"producer {producer_id}: idempotent batch with base sequence {base_sequence} (must be >= 0)")


class InvalidTxnState(ProducerStateError):
    error_code = 48

    def __init__(self, producer_id: int, first_offset: int) -> None:
        super().__init__(
            f"producer {producer_id}: a non-transactional batch while its transaction from offset {first_offset} "
            "is open"
        )


class TransactionCoordinatorFenced(ProducerStateError):
    error_code = 52

    def __init__(self, producer_id: int, coordinator_epoch: int, current: int) -> None:
        super().__init__(
            f"producer {producer_id}: a marker from coordinator epoch {coordinator_epoch}, older than the last "
            f"one this partition saw ({current})"
        )


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its first offset and the marker's (``last_offset``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))
    coordinator_epoch: int = -1  # of the last marker, -1 before any
    txn_first_offset: int = -1  # first offset of the open transaction, -1 when none is open
    last_timestamp: int = -1  # max timestamp of its last batch (DescribeProducers), -1 before any

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class ProducerStateManager:
    """The producer ids seen by one partition, bounded to ``max_ids`` (least recently used go first)."""

    def __init__(self, max_ids: int = 10_000) -> None:
        if max_ids < 1:
            raise ValueError(f"max_ids={max_ids} must be at least 1")
        self.max_ids = max_ids
        self._entries: OrderedDict[int, ProducerEntry] = OrderedDict()
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._unreplicated: deque[CompletedTxn] = deque()  # ended, marker not yet below the HW

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """Every producer id this partition keeps state for, least recently written first."""
        return list(self._entries.items())

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    @property
    def ongoing(self) -> dict[int, int]:
        """Open transactions: producer id -> the offset of its first transactional batch (a copy)."""
        return dict(self._ongoing)

    def check(self, header: BatchHeader) -> BatchMeta | None:
        """Apply the rules to a batch about to be appended.

        Returns the cached ``BatchMeta`` when the batch is a duplicate (answer with its
        offsets, do not append), None when it may be appended. Raises a ProducerStateError
        subclass otherwise. Does not change the state.
        """
        pid = header.producer_id
        if pid < 0:
            return None
        first_seq = header.base_sequence
        if first_seq < 0:
            raise InvalidProducerRecord(pid, first_seq)
        entry = self._entries.get(pid)
        if entry is None:
            return None
        epoch = header.producer_epoch
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(pid, epoch, entry.epoch)
        if entry.txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnState(pid, entry.txn_first_offset)
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequence(pid, epoch, first_seq, 0)
            return None
        last_seq = header.last_sequence
        for meta in entry.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        expected = 0 if entry.last_seq == INT32_MAX else entry.last_seq + 1
        if first_seq != expected:
            raise OutOfOrderSequence(pid, epoch, first_seq, expected)
        return None

    def update(self, header: BatchHeader, first_offset: int) -> None:
        """Record an appended batch (after ``check`` passed, or from the log on load)."""
        pid = header.producer_id
        if pid < 0 or header.base_sequence < 0:
            return
        entry = self._entries.get(pid)
        if entry is None:
            entry = ProducerEntry(header.producer_epoch)
            self._entries[pid] = entry
        else:
            if header.producer_epoch != entry.epoch:
                entry.epoch = header.producer_epoch
                entry.batches.clear()
            self._entries.move_to_end(pid)
        entry.batches.append(
            BatchMeta(header.base_sequence, header.last_sequence, first_offset, first_offset + header.last_offset_delta)
        )
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self._ongoing[pid] = first_offset
        self._evict()

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """May a marker of this producer epoch and coordinator epoch be appended; raises
        InvalidProducerEpoch or TransactionCoordinatorFenced otherwise. Changes nothing."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(producer_id, producer_epoch, entry.epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFenced(producer_id, coordinator_epoch, entry.coordinator_epoch)

    def complete(
        self, producer_id: int, producer_epoch: int, marker: ControlMarker, offset: int
    ) -> CompletedTxn | None:
        """Record a marker appended at ``offset`` (after ``check_marker``, or from the log): the
        producer's transaction ends and its epoch becomes the marker's. Returns the transaction
        it ended, None when none was open (a marker for a partition the transaction never wrote
        to, or a retried one)."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_epoch)
            self._entries[producer_id] = entry
        else:
            self._entries.move_to_end(producer_id)
        if producer_epoch != entry.epoch:
            entry.epoch = producer_epoch
            entry.batches.clear()  # a new epoch starts its sequences at 0
        entry.coordinator_epoch = marker.coordinator_epoch
        completed = None
        if entry.txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.txn_first_offset, offset, not marker.commit)
            self._unreplicated.append(completed)
            entry.txn_first_offset = -1
            del self._ongoing[producer_id]
        self._evict()
        return completed

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """What an aborted-transaction index entry records as the LSO once ``completed`` ended:
        the first offset of the earliest transaction still open, else the offset past its marker
        (Kafka's ``ProducerStateManager.lastStableOffset``). Call right after ``complete``."""
        return min(self._ongoing.values(), default=completed.last_offset + 1)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The lowest first offset of an open transaction or of an ended one whose marker is not
        below ``high_watermark`` yet; None when there is none. Forgets the ended transactions the
        high watermark has passed."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()
        if not unreplicated and not self._ongoing:
            return None  # the usual case, asked by every fetch of every partition: no min() call
        first = min(self._ongoing.values(), default=None)
        for txn in unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def _evict(self) -> None:
        """Drop the least recently used producers beyond ``max_ids``, never one with an open transaction."""
        excess = len(self._entries) - self.max_ids
        if excess <= 0:
            return
        for pid in [pid for pid in self._entries if pid not in self._ongoing][:excess]:
            del self._entries[pid]

    def rebuild(self, batches: Iterable[tuple[BatchHeader, ControlMarker | None]], high_watermark: int = 0) -> None:
        """Forget everything and replay the batches of a log, in offset order: each header with the
        marker it carries (None for data batches and control batches that are no markers)."""
        self._entries.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for header, marker in batches:
            if header.is_control:
                if marker is not None and header.producer_id >= 0:
                    self.complete(header.producer_id, header.producer_epoch, marker, header.base_offset)
            else:
                self.update(header, header.base_offset)
        self.first_unstable_offset(high_watermark)
