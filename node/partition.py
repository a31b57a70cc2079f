"""A partition replica on this node: its role, its log, its producer state, and waiting fetchers.

``append_produced`` applies Kafka's produce rules to one batch from a client, in this order:
size (MESSAGE_TOO_LARGE), magic (UNSUPPORTED_FOR_MESSAGE_FORMAT), length and CRC-32C
(CORRUPT_MESSAGE), exactly one batch with baseOffset 0 and a record count that matches
lastOffsetDelta, no control batches and no transactional batch without a producer id
(INVALID_RECORD), CreateTime within ``message.timestamp.before/after.max.ms``
(INVALID_TIMESTAMP), then the idempotence and transaction rules (``node.producer_state``).
Only then is the batch appended, as produced.

Transactions (KIP-98): a producer's transactional batches open its transaction, and a marker
ends it: ``append_marker`` writes one for the transaction coordinator (WriteTxnMarkers); a
follower (``append_replica``) and a mirror target (``append_mirrored``) replay the ones they
copy. Every replica keeps the same producer state and, for each ABORT marker, the same entry in
its log's aborted-transaction index, so a follower that becomes leader knows both. The last
stable offset (``last_stable_offset``) is where read_committed consumers stop: the earliest
first offset of an open transaction or of an ended one whose marker is not yet below the high
watermark, else the high watermark.

Fetchers and acks=all producers register an event with ``add_waiter``; every append, high
watermark move, role change and deletion sets it.

A truncation to a cut (``TruncatePartitions``, see ``node.truncation``) reaches every replica
in its partition state: a replica that learns of the truncation's epoch, or a later one, while
its log holds nothing of that epoch or later truncates its log to the cut before it takes its
role (``apply_state``). That is the one way a leader's log ever loses records below its high
watermark.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import trio

from node.config import TopicPolicy
from node.coordination import PartitionState, Truncation
from node.errors import BrokerError, invalid_record
from node.ids import NO_NODE, NodeId
from node.producer_state import ProducerStateError, ProducerStateManager
from node.protocol import ErrorCode
from node.record_checks import conform_batch
from storage import (
    AbortedTxn,
    CorruptBatchError,
    LeaderEpoch,
    Offset,
    PartitionLog,
    RecordFormatError,
    RecordTooLargeError,
    TopicPartition,
)
from storage.records import (
    NO_OFFSET,
    BatchHeader,
    ControlMarker,
    build_control_batch,
    check_batch,
    iter_batches,
    read_control_marker,
    read_header,
)
from storage.records._batch import CURRENT_MAGIC, HEADER_SIZE, MAGIC_POS

log = logging.getLogger("strait.node.partition")

LONG_MAX = 2**63 - 1
FIRST_EPOCH = LeaderEpoch(0)
ZSTD = 4


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False
    last_offset: int = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower: its log end offset and when it was last caught up."""

    leo: Offset = NO_OFFSET
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    leader_leo_at_last_fetch: Offset = NO_OFFSET


LEADER = "leader"
FOLLOWER = "follower"
NONE = "none"  # no leader known (offline partition) or not yet told


class Partition:
    """One local replica of a partition: leader or follower, with its log and producer state.

    The role and the leader/ISR come from the partition state in ZooKeeper (``apply_state``).
    As leader: appends from producers, tracks each follower's log end offset from its fetches
    (``record_follower_fetch``), and keeps the high watermark at the lowest log end offset of
    the ISR. As follower: the replica fetcher appends the leader's batches (``append_replica``)
    and truncates a divergent tail (``truncate_to``).
    """

    def __init__(
        self,
        tp: TopicPartition,
        log: PartitionLog,
        policy: TopicPolicy,
        *,
        broker_id: NodeId,
        leader_epoch: LeaderEpoch = FIRST_EPOCH,
        producer_max_ids: int = 10_000,
        clock: Callable[[], int],
    ) -> None:
        self.tp = tp
        self.log = log
        self.policy = policy
        self.broker_id = broker_id
        self.role = NONE
        self.leader_id = NO_NODE
        self.leader_epoch = leader_epoch
        self.isr: tuple[NodeId, ...] = ()
        #: Leader: followers an ISR expansion being written adds. They count for the high
        #: watermark from the decision on (Kafka's "maximal ISR"): the write completes later, and
        #: a HW that moved past such a follower's log end meanwhile would make it an ISR member
        #: without every committed record, electable after a leader loss (a lost write).
        self.joining_isr: frozenset[NodeId] = frozenset()
        self.replicas: tuple[NodeId, ...] = ()
        self.state_version = -1
        self.controller_epoch = 0
        self.truncation: Truncation | None = None  # the last truncation to a cut, from the state
        self.followers: dict[NodeId, FollowerState] = {}  # leader: one per replica but itself
        self.leadership = 0  # counts this broker's uninterrupted leaderships (across epoch bumps)
        #: Leader: the log end offset when it took the current epoch (Kafka's leader epoch start
        #: offset). A new leader's high watermark is what it knew as a follower and may lag behind
        #: records committed under the old leader until its followers fetch; below this offset,
        #: ListOffsets for clients answers OFFSET_NOT_AVAILABLE rather than an end that went back.
        self.epoch_start_offset: Offset = NO_OFFSET
        self.needs_truncation = False  # a follower that must ask the leader where its log diverges
        # Mirror topics: [from, to) ranges the log jumped over because the source deleted them unmirrored.
        self.mirror_gaps: list[tuple[int, int]] = []
        self._clock = clock
        self._producer_max_ids = producer_max_ids
        self.producers = ProducerStateManager(producer_max_ids)
        self.rebuild_producer_state()
        self._waiters: set[trio.Event] = set()
        self.woken_at = 0.0  # time.perf_counter() when wake() last set a waiter's event

    def rebuild_producer_state(self) -> None:
        """Replay the log's batches (and its markers) from the log start into a new producer state."""
        self.producers = ProducerStateManager(self._producer_max_ids)
        self.producers.rebuild(self._logged_batches(), self.log.high_watermark)

    def _logged_batches(self) -> Iterator[tuple[BatchHeader, ControlMarker | None]]:
        """Every batch header of the log with the marker a control batch carries: only control
        batches, rare and small, are read beyond their header."""
        for segment, pos, header in self.log.batch_headers(self.log.log_start_offset):
            marker = None
            if header.is_control:
                try:
                    marker = read_control_marker(bytes(segment.read_batch(pos, header)))
                except (CorruptBatchError, RecordFormatError) as exc:
                    log.warning("%s: control batch at offset %d unreadable: %s", self.tp, header.base_offset, exc)
            yield header, marker

    # -- roles --------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def apply_state(self, state: PartitionState, replicas: tuple[NodeId, ...]) -> str | None:
        """Take the leader/ISR ZooKeeper holds; returns the new role when it changed (or the epoch did)."""
        me = self.broker_id
        self.replicas = replicas
        if self.is_leader:
            self._sync_followers()  # the replica list may change without the state (or the state read be stale)
        if state.leader_epoch < self.leader_epoch:
            return None  # an older state than the one we act on: a stale read
        same_epoch = state.leader_epoch == self.leader_epoch and state.leader == self.leader_id
        if same_epoch and (self.role != NONE or state.leader < 0):
            if state.version > self.state_version:
                self.isr, self.state_version = state.isr, state.version
                self.controller_epoch = state.controller_epoch
                self.truncation = state.truncation
                self.maybe_advance_hw()  # only a leader's
            return None
        continuing = self.is_leader and state.leader == me  # a new epoch, same leader (a reassignment completed)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr, self.state_version, self.controller_epoch = state.isr, state.version, state.controller_epoch
        self.truncation = state.truncation
        if self._carry_out_truncation():
            continuing = False  # the log changed under the followers: what we knew of them is void
        if state.leader == me:
            self._become_leader(continuing=continuing)
        elif state.leader < 0:
            self.role = NONE
            self.followers = {}
        else:
            self.role = FOLLOWER
            self.followers = {}
            self.needs_truncation = True
        self.wake()
        return self.role

    def _carry_out_truncation(self) -> bool:
        """Truncate to the recorded cut if this replica's log predates the truncation; returns
        whether the log changed.

        The log predates it when it has no batch of the truncation's epoch or later (its latest
        epoch is older): whatever it holds beyond the cut was written before the truncation
        and is not in the partition's history any more. Called when the leader epoch changes,
        before the new role is taken, so a leader never serves the epoch with its old tail.
        """
        cut = self.truncation
        if cut is None or self.leader_epoch < cut.leader_epoch or self.log.latest_epoch >= cut.leader_epoch:
            return False
        plog = self.log
        end, hw = plog.log_end_offset, plog.high_watermark
        if end <= cut.offset:
            if end < cut.offset and self.leader_id == self.broker_id:
                log.error(
                    "%s: truncation to %d (leader epoch %d) asked, but the log ends at %d already",
                    self.tp,
                    cut.offset,
                    cut.leader_epoch,
                    end,
                )
            return False
        removed = self.truncate_to(cut.offset)
        log.warning(
            "%s: truncated to the cut %d for leader epoch %d: offsets %d..%d removed (%d bytes, high watermark "
            "was %d); log end now %d",
            self.tp,
            cut.offset,
            cut.leader_epoch,
            cut.offset,
            end - 1,
            removed,
            hw,
            plog.log_end_offset,
        )
        return True

    def _become_leader(self, *, continuing: bool) -> None:
        """Lead in the current epoch. A leader that goes on leading under a new epoch keeps what it
        knows of its followers, as Kafka does: its log did not change, so neither did their offsets."""
        self.role = LEADER
        self.needs_truncation = False
        self.log.assign_epoch(self.leader_epoch)
        self.epoch_start_offset = self.log.log_end_offset
        if not continuing:
            self.leadership += 1
            self.followers = {}
        self._sync_followers()
        self.maybe_advance_hw()

    def _sync_followers(self) -> None:
        now = self._clock()
        for r in self.replicas:
            if r != self.broker_id and r not in self.followers:
                # An ISR member gets a full lag period to show up before it can be dropped.
                self.followers[r] = FollowerState(last_caught_up_ms=now if r in self.isr else 0)
        for r in list(self.followers):
            if r not in self.replicas:
                del self.followers[r]

    def check_leader(self) -> None:
        if not self.is_leader:
            raise BrokerError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.broker_id} is not the leader of {self.tp} (leader {self.leader_id}, "
                f"epoch {self.leader_epoch})",
            )

    @property
    def last_stable_offset(self) -> Offset:
        """Where read_committed consumers stop (see the module docstring); never above the high
        watermark nor below the log start offset."""
        plog = self.log
        hw = plog.high_watermark
        first = self.producers.first_unstable_offset(hw)
        if first is None or first >= hw:
            return hw
        return Offset(max(first, plog.log_start_offset))

    @property
    def high_watermark_lagging(self) -> bool:
        """Leader: its high watermark is still behind the start of its epoch (just elected, its
        followers have not fetched yet): committed records may lie above it."""
        return self.is_leader and self.log.high_watermark < self.epoch_start_offset

    def check_epoch(self, current_leader_epoch: int) -> None:
        """Fetch/ListOffsets/OffsetForLeaderEpoch fencing (KIP-320): -1 skips the check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise BrokerError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"{self.tp}: leader epoch {current_leader_epoch} is older than the current {self.leader_epoch}",
            )
        raise BrokerError(
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            f"{self.tp}: leader epoch {current_leader_epoch} is newer than this broker knows ({self.leader_epoch})",
        )

    # -- leader: followers, ISR and the high watermark -------------------------------------------

    def record_follower_fetch(self, replica_id: NodeId, fetch_offset: Offset) -> bool:
        """A follower fetched from ``fetch_offset`` (its log end). Returns True when it may join the ISR.

        Only a broker in the replica list is a follower: a fetch from any other broker (one a
        reassignment just removed, still fetching on an older view) is refused with
        NOT_LEADER_OR_FOLLOWER and counts for nothing, neither the high watermark nor the ISR.
        """
        follower = self.followers.get(replica_id)
        if follower is None or replica_id not in self.replicas or replica_id == self.broker_id:
            raise BrokerError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a follower of {self.tp} (replicas {list(self.replicas)})",
            )
        now = self._clock()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.leader_leo_at_last_fetch >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        moved = follower.leo != fetch_offset
        follower.leo = fetch_offset
        follower.leader_leo_at_last_fetch = leo
        follower.last_fetch_ms = now
        if moved:  # else nothing this fetch says can move the HW (appends and ISR changes advance it themselves)
            self.maybe_advance_hw()
        if replica_id in self.isr:
            return False
        epoch_start = (
            self.log.end_offset_for_epoch(LeaderEpoch(self.leader_epoch - 1))[1] if self.leader_epoch > 0 else 0
        )
        return fetch_offset >= self.log.high_watermark and fetch_offset >= max(epoch_start, 0)

    def isr_non_replicas(self) -> list[NodeId]:
        """ISR members that are not (any more) in the replica list: they must leave the ISR."""
        return [r for r in self.isr if r != self.broker_id and r not in self.replicas]

    def lagging_followers(self, max_lag_ms: int) -> list[NodeId]:
        """ISR members that have not caught up for ``max_lag_ms``."""
        now = self._clock()
        return [
            r
            for r in self.isr
            if r != self.broker_id
            and (f := self.followers.get(r)) is not None
            and now - f.last_caught_up_ms > max_lag_ms
        ]

    def maybe_advance_hw(self) -> bool:
        """Leader: HW = the lowest log end offset over the ISR and the followers joining it (see
        ``joining_isr``); never moves back. Wakes waiters."""
        if not self.is_leader:
            return False
        hw = self.log.log_end_offset
        for r in {*self.isr, *self.joining_isr}:
            if r == self.broker_id:
                continue
            follower = self.followers.get(r)
            if follower is None or follower.leo < 0:
                return False
            hw = min(hw, follower.leo)
        if hw > self.log.high_watermark:
            self.log.high_watermark = hw
            self.wake()
            return True
        return False

    async def wait_for_hw(self, offset: int, deadline: float) -> None:
        """Wait until the high watermark passes ``offset`` (acks=all); raise BrokerError otherwise."""
        leadership = self.leadership  # an epoch bump under the same leader keeps the batch: wait on
        while self.log.high_watermark <= offset:
            if not self.is_leader or self.leadership != leadership:
                raise BrokerError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.tp}: leadership moved before the write was replicated"
                )
            event = trio.Event()
            self.add_waiter(event)
            try:
                with trio.move_on_at(deadline) as scope:
                    await event.wait()
            finally:
                self.discard_waiter(event)
            if scope.cancelled_caught and self.log.high_watermark <= offset:
                raise BrokerError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"{self.tp}: offset {offset} was not replicated to the ISR {list(self.isr)} in time",
                )
        if len(self.isr) < self.policy.min_insync_replicas:
            raise BrokerError(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"{self.tp}: written, but the ISR {list(self.isr)} shrank below min.insync.replicas="
                f"{self.policy.min_insync_replicas}",
            )

    def check_fenced(self) -> None:
        """Refuse Produce to a fenced topic: BrokerError(POLICY_VIOLATION) with the fence's text."""
        fence = self.policy.fence
        if fence is not None:
            raise BrokerError(ErrorCode.POLICY_VIOLATION, f"topic {self.tp.topic!r} is fenced: {fence}")

    def check_writable(self) -> None:
        """Refuse client writes to a mirror topic: BrokerError(POLICY_VIOLATION) naming topic and link."""
        link = self.policy.mirror_link
        if link is not None:
            raise BrokerError(
                ErrorCode.POLICY_VIOLATION,
                f"topic {self.tp.topic!r} is a read-only mirror owned by link {link!r}",
            )

    def check_min_isr(self) -> None:
        if len(self.isr) < self.policy.min_insync_replicas:
            raise BrokerError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.tp}: the ISR {list(self.isr)} is smaller than min.insync.replicas="
                f"{self.policy.min_insync_replicas}",
            )

    # -- follower ---------------------------------------------------------------------------------

    def append_replica(self, records: memoryview | bytes) -> int:
        """Append the leader's batches at their offsets; returns how many batches were appended."""
        before = self.log.log_end_offset
        count = self.log.append_batches(records)
        if count:
            end = self.log.log_end_offset
            # The headers are in the fetched bytes: no need to read them back from the segment.
            view = memoryview(records)
            with contextlib.suppress(CorruptBatchError):  # a cut-short last batch was not appended
                for pos, header in iter_batches(view, validate=False):
                    if header.base_offset >= end:
                        break
                    if header.base_offset < before:
                        continue
                    if header.is_control:
                        self._replay(header, view[pos : pos + header.size], header.base_offset)
                    else:  # the common case, without a slice or a call more
                        self.producers.update(header, header.base_offset)
        return count

    def _replay(self, header: BatchHeader, batch: memoryview | bytes, offset: int) -> None:
        """Producer state (and the aborted-transaction index) after a batch appended at ``offset``
        by the leader's, a mirror's or the broker's own hand."""
        if not header.is_control:
            self.producers.update(header, offset)
            return
        if header.producer_id < 0 or not header.is_transactional:
            return
        try:
            marker = read_control_marker(batch)
        except RecordFormatError as exc:
            log.warning("%s: control batch at offset %d unreadable: %s", self.tp, offset, exc)
            return
        if marker is not None:
            self._end_txn(header.producer_id, header.producer_epoch, marker, offset)

    def _end_txn(self, producer_id: int, producer_epoch: int, marker: ControlMarker, offset: int) -> None:
        """A marker at ``offset`` ended the producer's transaction: index it if it aborted one."""
        completed = self.producers.complete(producer_id, producer_epoch, marker, offset)
        if completed is not None and completed.aborted:
            lso = self.producers.last_stable_offset_after(completed)
            self.log.append_aborted_txn(AbortedTxn(producer_id, completed.first_offset, offset, lso))

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> int:
        """Append a transaction marker (COMMIT or ABORT) for the coordinator; returns its offset.

        Leader only (NOT_LEADER_OR_FOLLOWER). An epoch below the producer's is
        INVALID_PRODUCER_EPOCH and a coordinator epoch below the last marker's
        TRANSACTION_COORDINATOR_FENCED: nothing is written. The marker's epoch becomes the
        producer's. The caller waits for the high watermark (Kafka writes markers with acks=all).
        Raises BrokerError, and LogDirOfflineError from the log.
        """
        self.check_leader()
        try:
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        except ProducerStateError as exc:
            raise BrokerError(ErrorCode(exc.error_code), f"{self.tp}: {exc}") from None
        batch = build_control_batch(
            commit=commit,
            timestamp=self._clock(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
        )
        info = self.log.append(batch, leader_epoch=self.leader_epoch, validate=False)
        self._end_txn(producer_id, producer_epoch, ControlMarker(commit, coordinator_epoch), info.base_offset)
        self.maybe_advance_hw()
        self.wake()
        return info.base_offset

    def truncate_to(self, offset: Offset) -> int:
        """Remove the divergent tail from ``offset`` (whole batches); rebuild producer state."""
        if offset >= self.log.log_end_offset:
            return 0
        removed = self.log.truncate_to(offset)
        self.rebuild_producer_state()
        self.wake()
        return removed

    def append_produced(self, records: memoryview | None, *, allow_zstd: bool = True) -> ProduceResult:
        """Validate and append one client batch; raises BrokerError with the Kafka code."""
        tp = self.tp
        self.check_leader()
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
        if header.is_transactional and header.producer_id < 0:
            raise invalid_record(f"{tp}: a transactional batch needs a producer id")
        if header.compression == ZSTD and not allow_zstd:
            raise BrokerError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"{tp}: zstd needs Produce v7 or later")
        stored, header = conform_batch(
            tp,
            records,
            header,
            compacted="compact" in self.log.config.cleanup_policy,
            compression_type=self.policy.compression,
        )
        now = self._clock()
        if not header.is_log_append_time and self.log.config.message_timestamp_type == "CreateTime":
            self._check_timestamps(header.base_timestamp, header.max_timestamp, now)
        try:
            duplicate = self.producers.check(header)
        except ProducerStateError as exc:
            raise BrokerError(ErrorCode(exc.error_code), f"{tp}: {exc}") from None
        if duplicate is not None:
            return ProduceResult(
                duplicate.first_offset,
                -1,
                self.log.log_start_offset,
                duplicate=True,
                last_offset=duplicate.first_offset + header.last_offset_delta,
            )
        try:
            info = self.log.append(stored, leader_epoch=self.leader_epoch, validate=False)
        except RecordTooLargeError as exc:
            raise BrokerError(ErrorCode.MESSAGE_TOO_LARGE, f"{tp}: {exc}") from None
        self.producers.update(header, info.base_offset)
        self.maybe_advance_hw()
        self.wake()
        return ProduceResult(
            info.base_offset, info.log_append_time, info.log_start_offset, last_offset=info.last_offset
        )

    def append_mirrored(
        self, records: memoryview | bytes | None, expected_end_offset: Offset, start_offset: Offset = NO_OFFSET
    ) -> int:
        """Append a mirror's batches at the offsets they carry (MirrorAppend); returns the last
        offset appended, or -1 when nothing was (a probe, or only a jump).

        Leader only (NOT_LEADER_OR_FOLLOWER). ``expected_end_offset`` must be the log end offset,
        else OFFSET_OUT_OF_RANGE: a mirror never duplicates or skips. ``start_offset`` past the
        log end says the source's log now starts there (its retention deleted records never
        mirrored): the log is emptied and restarted at it, and the gap [old end, start_offset)
        is added to ``mirror_gaps``. ``records`` must be whole batches (magic 2, valid CRC, each
        within max.message.bytes) whose offsets continue from the (new) log end; otherwise
        nothing is written (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE). A write
        (records or a jump) needs min.insync.replicas in the ISR (NOT_ENOUGH_REPLICAS). Batches
        are stored unchanged but for partitionLeaderEpoch, which becomes this leader's; producer
        state follows their headers. The caller checks the link. Raises BrokerError, and
        LogDirOfflineError from the log.
        """
        tp = self.tp
        self.check_leader()
        end = self.log.log_end_offset
        if expected_end_offset != end:
            raise BrokerError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{tp}: the mirror expected the log to end at {expected_end_offset}, it ends at {end}",
            )
        jump = start_offset > end  # -1 never jumps
        # Check every batch before anything changes: a bad request must not cost the log its jump.
        headers: list[tuple[int, BatchHeader]] = []
        next_offset = start_offset if jump else end
        limit = self.log.config.max_message_bytes
        try:
            for pos, header in iter_batches(records or b""):
                if header.size > limit:
                    raise BrokerError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"{tp}: the batch at offset {header.base_offset} has {header.size} bytes, above "
                        f"max.message.bytes={limit}",
                    )
                if header.base_offset < next_offset:
                    raise invalid_record(
                        f"{tp}: a mirrored batch starts at offset {header.base_offset}, below {next_offset}"
                    )
                # A batch past ``next_offset`` leaves a hole: the source was compacted there.
                headers.append((pos, header))
                next_offset = header.next_offset
        except CorruptBatchError as exc:
            raise BrokerError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: {exc}") from None
        if not headers and not jump:
            return -1
        self.check_min_isr()
        if jump:
            self.log.truncate_fully_and_start_at(start_offset)
            self.rebuild_producer_state()
            self.log.assign_epoch(self.leader_epoch)
            self.log.high_watermark = start_offset  # nothing below the new start is left to commit
            self.mirror_gaps.append((end, start_offset))
            self.wake()
        if not headers:
            return -1
        assert records is not None
        self.log.append_batches(records, leader_epoch=self.leader_epoch)
        view = memoryview(records)
        for pos, header in headers:
            self._replay(header, view[pos : pos + header.size], header.base_offset)
        self.maybe_advance_hw()
        self.wake()
        return headers[-1][1].last_offset

    def append_internal(self, batch: bytes) -> int:
        """Append a batch the broker built itself (``__consumer_offsets``); returns its last offset.

        A transactional batch (a transactional offset commit) opens its producer's transaction
        here as a produced one would."""
        self.check_leader()
        info = self.log.append(batch, leader_epoch=self.leader_epoch)
        self._replay(read_header(batch), batch, info.base_offset)
        self.maybe_advance_hw()
        self.wake()
        return info.last_offset

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
        """Wake every fetcher waiting on this partition (and note when, in ``woken_at``)."""
        if self._waiters:
            self.woken_at = time.perf_counter()
            for event in self._waiters:
                event.set()
            self._waiters.clear()

    def add_waiter(self, event: trio.Event) -> None:
        """Have ``event`` set by the next append (or deletion); ``discard_waiter`` when done."""
        self._waiters.add(event)

    def discard_waiter(self, event: trio.Event) -> None:
        self._waiters.discard(event)
