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

The state is rebuilt from the log's batch headers when a partition is loaded (so it survives
restarts and kill -9: only appended batches count) and after truncation.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from storage.records import BatchHeader

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

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

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
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerEntry(header.producer_epoch)
            self._entries[pid] = entry
        else:
            self._entries.move_to_end(pid)
        entry.batches.append(
            BatchMeta(header.base_sequence, header.last_sequence, first_offset, first_offset + header.last_offset_delta)
        )
        while len(self._entries) > self.max_ids:
            self._entries.popitem(last=False)

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Forget everything and replay the headers of the batches in a log, in offset order."""
        self._entries.clear()
        for header in headers:
            if not header.is_control:
                self.update(header, header.base_offset)
