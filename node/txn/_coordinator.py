"""``TransactionCoordinator``: Kafka's transaction coordinator (KIP-98, with KIP-360's epoch bumps) for
the transactional ids whose ``__transaction_state`` partition this node leads.

A transactional id lives in partition ``partition_for(id)``; the node leading that partition is
its coordinator. The broker ``load_partition``s the partitions it comes to lead, with the
partition's leader epoch as the *coordinator epoch* every marker carries (a partition leader
refuses markers of an older coordinator), and ``unload_partition``s those it loses; requests for
ids of other partitions get NOT_COORDINATOR.

Every state change is a record written to the id's partition through a ``TxnLogStore`` and made
in memory only once the record is durable. While a write is under way the id has a ``pending``
state and other requests for it get CONCURRENT_TRANSACTIONS, so each id has at most one write in
flight and its records reach the log in the order they were decided. The life of a transaction::

    Empty/Complete* --AddPartitionsToTxn/AddOffsetsToTxn--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
    Ongoing --EndTxn(abort), a timeout, a new producer instance--> PrepareAbort --markers--> CompleteAbort

EndTxn is answered once the Prepare record is durable; the markers (``_markers``) are written
afterwards, and the Complete record after them. A coordinator that loads a partition finishes
the Prepare* transactions it finds there. InitProducerId with a transactional id bumps the epoch
(fencing the previous producer instance): an Ongoing transaction of the older epoch is aborted
first, with a bumped epoch, and the caller gets CONCURRENT_TRANSACTIONS until that abort completes.

``run`` aborts transactions open longer than their timeout (bumping the epoch: the producer that
let it time out is fenced) and forgets ids unused for ``transactional.id.expiration.ms``. Until
it runs every API answers COORDINATOR_NOT_AVAILABLE. Nothing here raises for bad input: errors are
Kafka error codes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from node.groups import partition_for as _partition_for
from node.protocol import ErrorCode

from ._config import TxnConfig
from ._errors import TxnStoreError, TxnStoreTimeout
from ._markers import CoordinatorFenced, MarkerWriter, TxnMarker, write_all_markers
from ._records import (
    TopicPartition,
    TxnLogValue,
    TxnRecordError,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

log = logging.getLogger("strait.node.txn")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 0x7FFF  # producer epochs are int16
_S = TxnState
_PREPARED = {_S.PREPARE_COMMIT: _S.COMPLETE_COMMIT, _S.PREPARE_ABORT: _S.COMPLETE_ABORT}
_COMPLETE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class TxnLogStore(Protocol):
    """Where the coordinator's records go: the local leader replicas of ``__transaction_state``."""

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Make these (key, value) records durable in partition ``partition`` before returning;
        raise TxnStoreError if that partition is not (or no longer) led here."""
        ...


class ProducerIds(Protocol):
    async def next_id(self) -> int: ...


@dataclass
class TxnMetadata:
    """What the coordinator knows of one transactional id. ``last_producer_*`` are memory only (KIP-360 retries)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None  # the state a write under way would bring

    @classmethod
    def from_value(cls, transactional_id: str, value: TxnLogValue) -> TxnMetadata:
        txn = cls(transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms, value.state)
        txn.apply(value)
        return txn

    def value(self, state: TxnState, now_ms: int, **changes: object) -> TxnLogValue:
        """The record of this id in ``state`` as of ``now_ms``, with some fields changed."""
        fields: dict[str, object] = {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": state,
            "partitions": frozenset(self.partitions),
            "last_update_ms": now_ms,
            "start_ms": self.start_ms,
        }
        fields.update(changes)
        return TxnLogValue(**fields)  # type: ignore[arg-type]

    def apply(self, value: TxnLogValue) -> None:
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.state = value.state
        self.partitions = set(value.partitions)
        self.last_update_ms = value.last_update_ms
        self.start_ms = value.start_ms

    @property
    def epoch_exhausted(self) -> bool:
        """Kafka keeps the last epoch for fencing: at MAX_EPOCH - 1 the next InitProducerId takes a new id."""
        return self.producer_epoch >= MAX_EPOCH - 1


@dataclass
class _Loaded:
    """A loaded ``__transaction_state`` partition: the coordinator epoch it was loaded with and its ids."""

    coordinator_epoch: int
    txns: dict[str, TxnMetadata]


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """DescribeTransactions' view of one id."""

    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


class TransactionCoordinator:
    """The transaction coordinator of one node. All request methods are trio coroutines; none raises for bad input."""

    def __init__(
        self,
        config: TxnConfig,
        store: TxnLogStore,
        producer_ids: ProducerIds,
        markers: MarkerWriter,
        *,
        wall_clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self._store = store
        self._producer_ids = producer_ids
        self._markers = markers
        self._now_ms = wall_clock_ms
        self._loaded: dict[int, _Loaded] = {}
        self._nursery: trio.Nursery | None = None
        self._to_complete: list[tuple[int, TxnMetadata]] = []  # found at load before ``run`` started

    # -- life -------------------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Complete prepared transactions, abort timed-out ones, expire ids, until cancelled.

        ``started()`` once the APIs serve. Raises RuntimeError if it is already running.
        """
        if self._nursery is not None:
            raise RuntimeError("TransactionCoordinator.run is already running")
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                waiting, self._to_complete = self._to_complete, []
                for partition, txn in waiting:
                    self._complete_later(partition, txn)
                nursery.start_soon(self._every, self.config.abort_timed_out_interval_ms, self.abort_timed_out)
                nursery.start_soon(self._every, self.config.remove_expired_interval_ms, self.expire_ids)
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    @staticmethod
    async def _every(interval_ms: int, job: Callable[[], Awaitable[int]]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            await job()

    # -- partitions -------------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id`` (Kafka's formula)."""
        return _partition_for(transactional_id, self.config.state_partitions)

    def is_loaded(self, partition: int) -> bool:
        return partition in self._loaded

    def coordinator_epoch(self, partition: int) -> int | None:
        """The coordinator epoch ``partition`` was loaded with, or None when it is not loaded."""
        loaded = self._loaded.get(partition)
        return loaded.coordinator_epoch if loaded is not None else None

    def load_partition(
        self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]], coordinator_epoch: int
    ) -> None:
        """Serve the ids of ``partition`` from its records (in offset order); unreadable records are skipped.

        Prepared transactions found there are completed (markers, then the Complete record) once ``run`` runs.
        Raises ValueError for a partition outside the configured count.
        """
        if not 0 <= partition < self.config.state_partitions:
            raise ValueError(
                f"__transaction_state partition {partition} is outside 0..{self.config.state_partitions - 1}"
            )
        latest: dict[str, TxnLogValue | None] = {}
        for n, (key, value) in enumerate(records):
            if key is None:
                continue
            try:
                transactional_id = decode_key(key)
                if transactional_id is not None:
                    latest[transactional_id] = None if value is None else decode_value(value)
            except TxnRecordError as exc:
                log.warning(
                    "__transaction_state-%d: skipping record %d (key %s): %s", partition, n, bytes(key).hex(), exc
                )
        txns = {
            tid: TxnMetadata.from_value(tid, v) for tid, v in latest.items() if v is not None and v.state is not _S.DEAD
        }
        self._loaded[partition] = _Loaded(coordinator_epoch, txns)
        for txn in txns.values():
            if txn.state in _PREPARED:
                self._complete_later(partition, txn)

    def unload_partition(self, partition: int) -> None:
        """Stop serving ``partition``: its ids are forgotten; markers being sent for them stop."""
        self._loaded.pop(partition, None)
        self._to_complete = [(p, txn) for p, txn in self._to_complete if p != partition]

    def _check(self, transactional_id: str) -> ErrorCode | None:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if self._nursery is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.partition_for(transactional_id) not in self._loaded:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _txn(self, transactional_id: str) -> TxnMetadata | None:
        loaded = self._loaded.get(self.partition_for(transactional_id))
        return loaded.txns.get(transactional_id) if loaded is not None else None

    def _owns(self, partition: int, coordinator_epoch: int, txn: TxnMetadata) -> bool:
        """Whether ``txn`` is still this coordinator's, as loaded at ``coordinator_epoch``."""
        loaded = self._loaded.get(partition)
        return (
            loaded is not None
            and loaded.coordinator_epoch == coordinator_epoch
            and loaded.txns.get(txn.transactional_id) is txn
        )

    # -- writing ----------------------------------------------------------------------------------------------------

    async def _write(self, txn: TxnMetadata, value: TxnLogValue | None) -> ErrorCode:
        """Make ``value`` (None: a tombstone, the id is forgotten) durable, then the id's state in memory.

        The caller has checked ``txn.pending`` is None with no await since. NONE, NOT_COORDINATOR when
        the partition is not led here any more, COORDINATOR_NOT_AVAILABLE when the write timed out.
        """
        partition = self.partition_for(txn.transactional_id)
        txn.pending = value.state if value is not None else _S.DEAD
        record = (encode_key(txn.transactional_id), None if value is None else encode_value(value))
        timeout_ms = self.config.write_timeout_ms
        try:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(timeout_ms / 1000) as scope:
                    await self._store.append(partition, [record])
                if scope.cancelled_caught:
                    raise TxnStoreTimeout(partition, timeout_ms)
                if value is None:
                    loaded = self._loaded.get(partition)
                    if loaded is not None and loaded.txns.get(txn.transactional_id) is txn:
                        del loaded.txns[txn.transactional_id]
                else:
                    txn.apply(value)
        except TxnStoreTimeout as exc:
            log.warning("transaction %r: %s", txn.transactional_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        except TxnStoreError as exc:
            log.info("transaction %r: %s", txn.transactional_id, exc)
            return ErrorCode.NOT_COORDINATOR
        finally:
            txn.pending = None
        return ErrorCode.NONE

    # -- InitProducerId ---------------------------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        """A producer id and a new epoch for ``transactional_id`` (v3+: KIP-360's expected id and epoch).

        Errors: INVALID_REQUEST (empty id), INVALID_TRANSACTION_TIMEOUT (not in 1..transaction.max.timeout.ms),
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS (a transaction is completing,
        or was open and is now being aborted: retry), PRODUCER_FENCED (the expected id and epoch are
        not this id's current ones, nor a retry of the last bump).
        """
        error = self._check(transactional_id)
        if error is not None:
            return InitResult(error)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if self._txn(transactional_id) is None:
            producer_id = await self._producer_ids.next_id()
            error = self._check(transactional_id)  # the partition may have moved meanwhile
            if error is not None:
                return InitResult(error)
            if self._txn(transactional_id) is None:
                loaded = self._loaded[self.partition_for(transactional_id)]
                fresh = TxnMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, _S.EMPTY)
                loaded.txns[transactional_id] = fresh
        txn = self._txn(transactional_id)
        assert txn is not None
        expected = None
        if expected_producer_id != NO_PRODUCER_ID or expected_epoch != NO_PRODUCER_EPOCH:
            expected = (expected_producer_id, expected_epoch)
        if txn.pending is not None or txn.state in _PREPARED:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _may_resume(txn, *expected):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        if txn.state is _S.ONGOING:
            # Fence the producer of the open transaction: abort it with a bumped epoch; the caller retries.
            error = await self._prepare_end(txn, commit=False, epoch=min(txn.producer_epoch + 1, MAX_EPOCH))
            return InitResult(error if error is not ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)
        now = self._now_ms()
        if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            txn.pending = _S.EMPTY  # no other request for this id while a new producer id is claimed
            try:
                new_id = await self._producer_ids.next_id()
            finally:
                txn.pending = None
            if self._txn(transactional_id) is not txn:
                return InitResult(ErrorCode.NOT_COORDINATOR)
            last = (txn.producer_id, txn.producer_epoch if expected is not None else NO_PRODUCER_EPOCH)
            value = txn.value(_S.EMPTY, now, producer_id=new_id, producer_epoch=0, timeout_ms=timeout_ms,
                              partitions=frozenset(), start_ms=-1)  # fmt: skip
        else:
            bumped = txn.producer_epoch + 1
            if expected is None:
                epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
            elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
                epoch, last_epoch = bumped, txn.producer_epoch
            elif expected[1] == txn.last_producer_epoch:
                epoch, last_epoch = txn.producer_epoch, txn.last_producer_epoch  # a retry of the last bump
            else:
                return InitResult(ErrorCode.PRODUCER_FENCED)
            last = (txn.producer_id, last_epoch)
            value = txn.value(_S.EMPTY, now, producer_epoch=epoch, timeout_ms=timeout_ms, partitions=frozenset(),
                              start_ms=-1)  # fmt: skip
        error = await self._write(txn, value)
        if error is not ErrorCode.NONE:
            return InitResult(error)
        txn.last_producer_id, txn.last_producer_epoch = last
        return InitResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    # -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn -----------------------------------------------------------------

    def _current(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[ErrorCode, TxnMetadata | None]:
        """Kafka's checks before a transaction changes: this coordinator, producer and epoch, no write under way."""
        error = self._check(transactional_id)
        if error is not None:
            return error, None
        txn = self._txn(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if txn.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, txn

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        """Add partitions to the producer's transaction (starting it); one error for all of them.

        INVALID_PRODUCER_ID_MAPPING (unknown id or another producer id), PRODUCER_FENCED (another
        epoch), CONCURRENT_TRANSACTIONS (the previous transaction is still completing), and the
        coordinator errors of ``init_producer_id``.
        """
        error, txn = self._current(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state in _PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is _S.PREPARE_EPOCH_FENCE:  # never written by Kafka nor strait: a log strait cannot follow
            return ErrorCode.INVALID_TXN_STATE
        wanted = set(partitions)
        if txn.state is _S.ONGOING and wanted <= txn.partitions:
            return ErrorCode.NONE
        now = self._now_ms()
        start = txn.start_ms if txn.state is _S.ONGOING else now
        value = txn.value(_S.ONGOING, now, partitions=frozenset(txn.partitions | wanted), start_ms=start)
        return await self._write(txn, value)

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        """Commit or abort the producer's transaction; answered once the Prepare record is durable.

        A retry of a completed end is NONE; ending a transaction that is not open, or ending it the
        other way than it is ending, is INVALID_TXN_STATE; CONCURRENT_TRANSACTIONS while it completes.
        """
        error, txn = self._current(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        state = txn.state
        if state is _S.ONGOING:
            return await self._prepare_end(txn, commit=commit, epoch=txn.producer_epoch)
        if state is (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state is (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
            return ErrorCode.NONE
        return ErrorCode.INVALID_TXN_STATE

    async def _prepare_end(self, txn: TxnMetadata, *, commit: bool, epoch: int) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort at ``epoch``, then complete the transaction in the background."""
        state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        error = await self._write(txn, txn.value(state, self._now_ms(), producer_epoch=epoch))
        if error is ErrorCode.NONE:
            self._complete_later(self.partition_for(txn.transactional_id), txn)
        return error

    def _complete_later(self, partition: int, txn: TxnMetadata) -> None:
        if self._nursery is None:
            self._to_complete.append((partition, txn))
        else:
            self._nursery.start_soon(self._complete, partition, txn)

    async def _complete(self, partition: int, txn: TxnMetadata) -> None:
        """Write the markers of a prepared transaction, then its Complete record (see the module docstring)."""
        coordinator_epoch = self.coordinator_epoch(partition)
        if coordinator_epoch is None or txn.state not in _PREPARED:
            return
        commit = txn.state is _S.PREPARE_COMMIT
        partitions = tuple(sorted(txn.partitions))
        marker = TxnMarker(txn.producer_id, txn.producer_epoch, commit, coordinator_epoch, partitions)
        backoff = self.config.marker_retry_backoff_ms
        try:
            done = await write_all_markers(
                self._markers,
                txn.transactional_id,
                marker,
                backoff_ms=backoff,
                still_coordinator=lambda: self._owns(partition, coordinator_epoch, txn),
            )
        except CoordinatorFenced as exc:
            log.warning("%s; leaving it to the coordinator that fenced this one", exc)
            return
        while done and self._owns(partition, coordinator_epoch, txn):
            value = txn.value(_PREPARED[txn.state], self._now_ms(), partitions=frozenset())
            error = await self._write(txn, value)
            if error is ErrorCode.NONE:
                log.debug("transaction %r: %s", txn.transactional_id, txn.state.title)
                return
            if error is ErrorCode.NOT_COORDINATOR:
                return  # the partition's new leader completes it from its Prepare record
            await trio.sleep(backoff / 1000)

    # -- timeouts and expiration ------------------------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort, with a bumped epoch, each Ongoing transaction open past its timeout; how many began aborting."""
        now = self._now_ms()
        aborted = 0
        for loaded in list(self._loaded.values()):
            for txn in list(loaded.txns.values()):
                if txn.state is _S.ONGOING and txn.pending is None and txn.start_ms + txn.timeout_ms < now:
                    log.info(
                        "transaction %r (producer %d, epoch %d) timed out after %d ms: aborting it",
                        txn.transactional_id,
                        txn.producer_id,
                        txn.producer_epoch,
                        txn.timeout_ms,
                    )
                    epoch = min(txn.producer_epoch + 1, MAX_EPOCH)
                    if await self._prepare_end(txn, commit=False, epoch=epoch) is ErrorCode.NONE:
                        aborted += 1
        return aborted

    async def expire_ids(self) -> int:
        """Forget (tombstone) ids with no transaction open, unused for ``transactional.id.expiration.ms``; how many."""
        now = self._now_ms()
        expired = 0
        for loaded in list(self._loaded.values()):
            for txn in list(loaded.txns.values()):
                if (
                    txn.state in _COMPLETE
                    and txn.pending is None
                    and txn.last_update_ms + self.config.id_expiration_ms <= now
                    and await self._write(txn, None) is ErrorCode.NONE
                ):
                    expired += 1
        if expired:
            log.info("%d transactional id(s) expired", expired)
        return expired

    # -- describing -------------------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        """DescribeTransactions of one id: NONE and its description, or the error (TRANSACTIONAL_ID_NOT_FOUND)."""
        error = self._check(transactional_id)
        if error is not None:
            return error, None
        txn = self._txn(transactional_id)
        if txn is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, TxnDescription(
            transactional_id,
            txn.state.title,
            txn.timeout_ms,
            txn.start_ms,
            txn.producer_id,
            txn.producer_epoch,
            tuple(sorted(txn.partitions)),
        )

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> tuple[ErrorCode, list[str], list[tuple[str, int, str]]]:
        """ListTransactions: (error, the state filters that name no state, [(id, producer id, state)]).

        Empty filters match everything; ``duration_ms`` >= 0 keeps transactions begun at least that long ago.
        """
        wanted_states = list(states)
        known = {s for name in wanted_states if (s := TxnState.from_title(name)) is not None}
        unknown = [name for name in wanted_states if TxnState.from_title(name) is None]
        if self._nursery is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, unknown, []
        if wanted_states and not known:
            return ErrorCode.NONE, unknown, []
        pids = set(producer_ids)
        now = self._now_ms()
        found = [
            (txn.transactional_id, txn.producer_id, txn.state.title)
            for loaded in self._loaded.values()
            for txn in loaded.txns.values()
            if (not known or txn.state in known)
            and (not pids or txn.producer_id in pids)
            and (duration_ms < 0 or now - txn.start_ms >= duration_ms)
        ]
        return ErrorCode.NONE, unknown, sorted(found)


def _may_resume(txn: TxnMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: may a producer that last had ``producer_id``/``epoch`` get a new epoch of this id?

    Yes when the id has no epoch yet, when it names the id's current producer id (the epoch is
    checked when it is bumped), or when it names the previous producer id at its exhausted epoch
    (a retry of the call that rotated the id, whose answer was lost).
    """
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == txn.producer_id
        or (producer_id == txn.last_producer_id and epoch >= MAX_EPOCH - 1)
    )
