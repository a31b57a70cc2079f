"""The replica manager: follower fetchers, and the leader's side of the ISR.

Followers: one fetcher task per leader broker (Kafka's replica fetcher thread) keeps one
connection to that leader and fetches every partition this node follows from it, with this
broker's id as ``replica_id``, ``replica.fetch.wait.max.ms`` of long poll and
``replica.fetch.max.bytes`` per partition. Batches are appended at the leader's offsets. A
partition that starts following (a new leader epoch, or after a restart) first asks the
leader OffsetForLeaderEpoch for the end of the latest epoch it has and truncates exactly its
divergent tail (KIP-101/KIP-279), never blindly to its high watermark.

Each round of a fetcher (Kafka's ``AbstractFetcherThread``) first asks about the partitions
that must truncate, then fetches for all the others: a partition still waiting to truncate never
holds up the rest. A partition the leader answers with an error (it no longer leads, or its
topic is gone: this node's view of ZooKeeper is older than the leader's) waits
``replica.fetch.backoff.ms`` before it is asked about or fetched again; that wait belongs to its
leader epoch, so a new leader or epoch from ZooKeeper ends it. A partition that moved to
another leader, or whose topic was deleted, leaves its fetcher with the next refresh. A
stopping node stops every fetcher when its controlled shutdown starts (``stop_following``,
Kafka's StopReplica to a shutting-down broker) and starts none after that.

Leaders: a follower's fetch offset is its log end offset; the high watermark is the lowest
log end offset over the ISR. A follower that has caught up joins the ISR, and an ISR member
that has not caught up for ``replica.lag.time.max.ms`` leaves it, and so does a member that is
no longer a replica. The leader writes each ISR change to the partition state in ZooKeeper
and only then acts on it. The write is a compare-and-set on the version of the state the
change was decided from, and on the version of the assignment whose replica list it was
checked against (one transaction): a leader that lost a race (the controller moved leadership,
or a reassignment completed, meanwhile) learns the new state instead of shrinking the ISR to
itself or adding a broker that is no longer a replica.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

import trio

from node.client import ClientError, FetcherSession, NodeConnection
from node.cluster import ClusterState
from node.config import NodeConfig
from node.coordination import CoordinationError, PartitionState, StaleState, ZkState
from node.ids import NodeId
from node.partition import FOLLOWER, Partition
from node.protocol import ApiKey, ErrorCode, ProtocolError
from node.tls import TlsError, inter_broker_context, inter_broker_sasl
from storage import InvalidOffsetError, LeaderEpoch, LogDirOfflineError, Offset, StorageError, TopicPartition

log = logging.getLogger("strait.node.replicas")

FETCH_VERSION = 11
EPOCH_VERSION = 3
MAX_TRUNCATION_ROUNDS = 16


class TokenBucket:
    """Bytes per second for throttled (reassigning) replicas; ``None`` rate means unthrottled."""

    def __init__(self) -> None:
        self.rate: float | None = None
        self._tokens = 0.0
        self._stamp = 0.0

    def take(self, now: float, amount: int) -> None:
        if self.rate is None:
            return
        self._refill(now)
        self._tokens -= amount

    def available(self, now: float) -> bool:
        if self.rate is None:
            return True
        self._refill(now)
        return self._tokens > 0

    def _refill(self, now: float) -> None:
        assert self.rate is not None
        self._tokens = min(self._tokens + (now - self._stamp) * self.rate, self.rate)
        self._stamp = now


class ReplicaMetrics(Protocol):
    """What the fetcher reports (``node.metrics.NodeMetrics``)."""

    def observe_replica_round_trip(self, seconds: float) -> None: ...

    def observe_replica_turnaround(self, seconds: float) -> None: ...


class _NoMetrics:
    def observe_replica_round_trip(self, seconds: float) -> None:
        pass

    def observe_replica_turnaround(self, seconds: float) -> None:
        pass


NO_METRICS: ReplicaMetrics = _NoMetrics()


class ReplicaManager:
    def __init__(
        self, config: NodeConfig, cluster: ClusterState, zk: ZkState, metrics: ReplicaMetrics = NO_METRICS
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.broker_id = config.broker_id
        self.cluster = cluster
        self.zk = zk
        self._nursery: trio.Nursery | None = None
        self._fetchers: dict[NodeId, trio.CancelScope] = {}
        self._isr_writes: set[TopicPartition] = set()
        self.throttle = TokenBucket()
        self.fetch_errors = 0
        # Partitions backing off after an error: (the leader epoch it happened in, when to try again).
        self._retry_at: dict[TopicPartition, tuple[LeaderEpoch, float]] = {}
        self._stopped = False  # controlled shutdown started: no fetcher any more

    # -- life -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._shrink_isr_loop)
            task_status.started()
            self.roles_changed(list(self.cluster.partitions.values()))
            await trio.sleep_forever()

    def roles_changed(self, changed: Iterable[Partition]) -> None:
        """After a refresh: make sure a fetcher runs for every leader this node follows."""
        cluster = self.cluster
        reassigning = cluster.reassignment
        self.throttle.rate = (
            float(reassigning.throttle_bytes_per_s)
            if reassigning is not None and reassigning.throttle_bytes_per_s
            else None
        )
        for p in changed:
            log.info(
                "%s: now %s in leader epoch %d (leader %d, isr %s)",
                p.tp,
                p.role,
                p.leader_epoch,
                p.leader_id,
                list(p.isr),
            )
        partitions = cluster.partitions
        for tp, (epoch, _) in list(self._retry_at.items()):
            partition = partitions.get(tp)
            if partition is None or partition.leader_epoch != epoch:
                del self._retry_at[tp]  # deleted, or a new epoch: its backoff is over
        if self._nursery is None or self._stopped:
            return
        leaders = {p.leader_id for p in cluster.partitions.values() if p.role == FOLLOWER and p.leader_id >= 0}
        for leader_id in leaders - set(self._fetchers):
            scope = trio.CancelScope()
            self._fetchers[leader_id] = scope
            self._nursery.start_soon(self._fetcher, leader_id, scope)

    def stop_following(self) -> None:
        """Stop every fetcher now and start none any more; called when controlled shutdown starts.

        A stopping node replicates nothing more (Kafka's controller sends it StopReplica): if it
        kept fetching, the leaders its partitions just moved to would add it back to the ISRs the
        controller takes it out of, and it would go on asking them to check its logs while it
        stops. Fetchers end at once (cancellation); never blocks.
        """
        self._stopped = True
        for scope in self._fetchers.values():
            scope.cancel()

    # -- leader side ------------------------------------------------------------------------

    def follower_fetched(self, partition: Partition, replica_id: NodeId, fetch_offset: Offset) -> None:
        """Called by the Fetch handler for a follower's fetch; may start an ISR expansion.

        Raises BrokerError(NOT_LEADER_OR_FOLLOWER) for a broker that is not a replica: its
        fetch counts for nothing (see ``Partition.record_follower_fetch``)."""
        if partition.record_follower_fetch(replica_id, fetch_offset):
            new_isr = tuple(sorted({*partition.isr, replica_id}))
            self._start_isr_change(partition, new_isr, f"broker {replica_id} caught up")

    async def _shrink_isr_loop(self) -> None:
        max_lag = self.config.replica_lag_time_max_ms
        while True:
            await trio.sleep(max(max_lag / 2, 100) / 1000)
            for partition in list(self.cluster.partitions.values()):
                if not partition.is_leader or partition.log.is_offline:
                    continue
                removed = partition.isr_non_replicas()
                lagging = partition.lagging_followers(max_lag)
                reasons = [f"brokers {removed} are no longer replicas"] if removed else []
                if lagging:
                    reasons.append(f"brokers {lagging} did not catch up within replica.lag.time.max.ms={max_lag}")
                if reasons:
                    new_isr = tuple(r for r in partition.isr if r not in removed and r not in lagging)
                    self._start_isr_change(partition, new_isr, "; ".join(reasons))

    def _start_isr_change(self, partition: Partition, new_isr: tuple[NodeId, ...], why: str) -> None:
        """Decide an ISR change from the partition's current state; the write happens in a task.

        The new ISR holds only this leader and brokers in the replica list. It is written
        against the state version it was decided from, so a state that moved meanwhile (the
        controller shrank the ISR, a reassignment completed) fails the write instead of being
        overwritten."""
        if partition.tp in self._isr_writes or self._nursery is None or not partition.is_leader:
            return
        new_isr = _only_replicas(new_isr, partition.replicas, self.broker_id)
        if new_isr == partition.isr:
            return
        decided = PartitionState(
            self.broker_id,
            partition.leader_epoch,
            new_isr,
            partition.controller_epoch,
            partition.state_version,
            truncation=partition.truncation,
        )
        self._isr_writes.add(partition.tp)
        partition.joining_isr = frozenset(new_isr) - set(partition.isr)
        self._nursery.start_soon(self._change_isr, partition, decided, why)

    async def _change_isr(self, partition: Partition, decided: PartitionState, why: str) -> None:
        """Write ``decided`` (the ISR change and the state version it was decided from) if it
        still holds: checked again, at write time, against the replica list of the assignment it
        is written with, and compare-and-set on both znodes' versions."""
        tp = partition.tp
        try:
            epoch = decided.leader_epoch
            topic = self.cluster.topics.get(tp.topic)
            replicas = topic.assignment.get(tp.partition) if topic is not None else None
            if topic is None or replicas is None or topic.version < 0:
                return  # the topic is being deleted
            if not partition.is_leader or partition.leader_epoch != epoch or partition.state_version != decided.version:
                return  # the state moved since the decision: the next fetch or shrink pass decides again
            new_isr = _only_replicas(decided.isr, replicas, self.broker_id)
            if new_isr == partition.isr:
                return
            state = replace(decided, isr=new_isr)
            try:
                version = await self.zk.set_partition_state(
                    tp.topic, tp.partition, state, assignment_version=topic.version
                )
            except StaleState as exc:
                log.info("%s: ISR change to %s lost a race (%s); re-reading the state", tp, list(new_isr), exc)
                await self.cluster.refresh()
                return
            except CoordinationError as exc:
                log.warning("%s: ISR change to %s failed: %s", tp, list(new_isr), exc)
                return
            if partition.is_leader and partition.leader_epoch == epoch:
                log.info("%s: ISR %s -> %s (%s)", tp, list(partition.isr), list(new_isr), why)
                partition.apply_state(replace(state, version=version), partition.replicas)
                partition.maybe_advance_hw()
                partition.wake()
        finally:
            self._isr_writes.discard(tp)
            partition.joining_isr = frozenset()

    async def settle_startup_claims(self) -> None:
        """At startup ZooKeeper may still name this broker leader (it restarted before its old
        session expired, so the controller never saw it leave). Before serving, give each such
        leadership to another live ISR member, or take it under a new epoch if there is none, so
        followers re-check their logs against it. Called once, right after registration."""
        cluster = self.cluster
        claims = list(cluster.startup_claims)
        for partition, state in claims:
            await self._hand_over(partition, state)
        if claims:
            await cluster.refresh()

    async def _hand_over(self, partition: Partition, first: PartitionState) -> None:
        tp = partition.tp
        cluster = self.cluster
        state: PartitionState | None = first
        for _ in range(5):
            if state is None or state.leader != self.broker_id:
                return  # someone else moved it meanwhile
            others = [
                b
                for b in partition.replicas
                if b in state.isr
                and b != self.broker_id
                and b in cluster.brokers
                and (tp.topic, tp.partition) not in cluster.offline_replicas.get(b, frozenset())
            ]
            if others:
                isr = tuple(b for b in state.isr if b != self.broker_id)
                new = replace(state, leader=others[0], leader_epoch=LeaderEpoch(state.leader_epoch + 1), isr=isr)
            else:
                new = replace(state, leader=self.broker_id, leader_epoch=LeaderEpoch(state.leader_epoch + 1))
            try:
                await self.zk.set_partition_state(tp.topic, tp.partition, new)
            except StaleState:
                state = await self.zk.partition_state(tp.topic, tp.partition)
                continue
            except CoordinationError as exc:
                log.warning("%s: handing leadership over after restart failed: %s", tp, exc)
                return
            log.info(
                "%s: restarted as its recorded leader; leadership now %d (epoch %d)", tp, new.leader, new.leader_epoch
            )
            return

    # -- follower side ----------------------------------------------------------------------

    def _followed(self, leader_id: NodeId) -> list[Partition]:
        return [
            p
            for p in self.cluster.partitions.values()
            if p.role == FOLLOWER and p.leader_id == leader_id and not p.log.is_offline
        ]

    async def _fetcher(self, leader_id: NodeId, scope: trio.CancelScope) -> None:
        backoff = self.config.replica_fetch_backoff_ms / 1000
        try:
            with scope:
                while self._followed(leader_id):
                    reg = self.cluster.brokers.get(leader_id)
                    if reg is None:
                        await trio.sleep(backoff)
                        continue
                    address = f"{reg.host}:{reg.port}"
                    try:
                        conn = await NodeConnection.open(
                            address,
                            client_id=f"strait-replica-fetcher-{self.broker_id}",
                            timeout=self.config.replica_socket_timeout_ms / 1000,
                            ssl_context=inter_broker_context(self.config),
                            sasl=inter_broker_sasl(self.config),
                        )
                    except (ClientError, TlsError) as exc:
                        self.fetch_errors += 1
                        log.info("fetcher for leader %d: %s; retrying", leader_id, exc)
                        await trio.sleep(backoff)
                        continue
                    try:
                        async with conn:
                            await self._fetch_loop(conn, leader_id)
                    except (ClientError, ProtocolError, OSError, trio.BrokenResourceError) as exc:
                        self.fetch_errors += 1
                        log.info("fetcher for leader %d at %s failed: %s; reconnecting", leader_id, address, exc)
                        await trio.sleep(backoff)
        finally:
            if self._fetchers.get(leader_id) is scope:
                del self._fetchers[leader_id]
            if trio.current_effective_deadline() != -math.inf:
                # Not shutting down: a partition may have moved to this leader while we were stopping.
                self.roles_changed([])

    async def _fetch_loop(self, conn: NodeConnection, leader_id: NodeId) -> None:
        """Rounds over one connection to ``leader_id`` until it leads nothing this node follows:
        truncate the partitions that must and may (not backing off), then fetch the others.

        Raises what the connection raises (ClientError, ProtocolError, OSError); cancellable."""
        timeout = self.config.replica_socket_timeout_ms / 1000
        max_bytes = self.config.replica_fetch_max_bytes
        answered: float | None = None  # when the last fetch that brought records was answered
        session: FetcherSession[TopicPartition, _Position] = FetcherSession()  # one per connection (KIP-227)
        while True:
            partitions = self._followed(leader_id)
            if not partitions:
                return
            now = trio.current_time()
            ready = [p for p in partitions if not self._backing_off(p, now)]
            truncating = [p for p in ready if p.needs_truncation]
            if truncating:
                # Each one is done afterwards, or backing off, or in a new epoch: no busy loop.
                await self._truncate(conn, truncating, timeout)
                continue
            moving = self._throttled()
            chosen = [p for p in ready if p.tp not in moving or self.throttle.available(now)]
            if not chosen:
                await trio.sleep(0.05)
                continue
            wanted = {p.tp: (p.log.log_end_offset, p.log.log_start_offset, p.leader_epoch) for p in chosen}
            fetch = session.next_fetch(wanted)
            request = {
                "replica_id": self.broker_id,
                "max_wait_ms": self.config.replica_fetch_wait_max_ms,
                "min_bytes": self.config.replica_fetch_min_bytes,
                "max_bytes": self.config.replica_fetch_response_max_bytes,
                "isolation_level": 0,
                "session_id": fetch.session_id,
                "session_epoch": fetch.session_epoch,
                "topics": _grouped(
                    fetch.partitions.items(),
                    lambda tp, pos: {
                        "partition": tp.partition,
                        "current_leader_epoch": pos[2],
                        "fetch_offset": pos[0],
                        "log_start_offset": pos[1],
                        "partition_max_bytes": max_bytes,
                    },
                ),
                "forgotten_topics_data": _forgotten(fetch.forgotten),
                "rack_id": self.config.broker_rack or "",
            }
            epochs = {tp: pos[2] for tp, pos in wanted.items()}
            sent = time.perf_counter()
            if answered is not None:
                self.metrics.observe_replica_turnaround(sent - answered)
            try:
                body = await conn.request(
                    ApiKey.FETCH, FETCH_VERSION, request, timeout=timeout + self.config.replica_fetch_wait_max_ms / 1000
                )
            except BaseException:
                session.reset()
                raise
            arrived = time.perf_counter()
            if not session.answered(fetch, body.error_code, body.session_id):
                log.info(
                    "fetch session %d with leader %d: %s; fetching in full",
                    fetch.session_id,
                    leader_id,
                    ErrorCode(body.error_code).name,
                )
                continue
            if body.error_code:
                raise ClientError.from_code(body.error_code, "replica fetch")
            answered = None
            if self._apply_fetch(body, epochs, moving):
                self.metrics.observe_replica_round_trip(arrived - sent)
                answered = arrived  # the leader's high watermark waits for the next fetch

    def _backing_off(self, partition: Partition, now: float) -> bool:
        delay = self._retry_at.get(partition.tp)
        return delay is not None and delay[0] == partition.leader_epoch and now < delay[1]

    def _back_off(self, partition: Partition) -> None:
        """Leave ``partition`` alone for ``replica.fetch.backoff.ms`` (in its current leader epoch)."""
        until = trio.current_time() + self.config.replica_fetch_backoff_ms / 1000
        self._retry_at[partition.tp] = (partition.leader_epoch, until)
        self.fetch_errors += 1

    def _throttled(self) -> set[TopicPartition]:
        cluster = self.cluster
        if cluster.reassignment is None or self.throttle.rate is None:
            return set()
        out = set()
        for (topic, p), target in cluster.reassignment.partitions.items():
            local = cluster.partitions.get(TopicPartition(topic, p))
            if local is not None and self.broker_id in target and self.broker_id not in local.isr:
                out.add(local.tp)
        return out

    def _apply_fetch(self, body: Any, epochs: dict[TopicPartition, LeaderEpoch], moving: set[TopicPartition]) -> bool:
        """Append what the leader sent; whether any records were appended."""
        cluster = self.cluster
        appended = False
        for topic in body.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                partition = cluster.partitions.get(tp)
                if partition is None or partition.role != FOLLOWER or partition.leader_epoch != epochs.get(tp):
                    continue  # the role changed while the fetch was in flight
                code = part.error_code
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(partition, part.log_start_offset)
                    continue
                if code:
                    # Typically this node or the leader is behind ZooKeeper (NOT_LEADER_OR_FOLLOWER,
                    # FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION): back off this partition.
                    self._back_off(partition)
                    log.debug("%s: replica fetch error %s", tp, ErrorCode(code).name)
                    continue
                self._retry_at.pop(tp, None)
                try:
                    records = part.records
                    if records:
                        if tp in moving:
                            self.throttle.take(trio.current_time(), len(records))
                        partition.append_replica(records)
                        appended = True
                    plog = partition.log
                    if part.log_start_offset > plog.log_start_offset and part.log_start_offset <= plog.log_end_offset:
                        plog.delete_records_before(part.log_start_offset)
                    plog.high_watermark = min(part.high_watermark, plog.log_end_offset)
                except InvalidOffsetError as exc:
                    log.warning("%s: leader sent data overlapping our log end (%s); re-checking divergence", tp, exc)
                    partition.needs_truncation = True
                except LogDirOfflineError:
                    log.warning("%s: log dir offline; not following any more", tp)
                except StorageError as exc:
                    log.error("%s: appending replicated data failed: %s", tp, exc)
                    partition.needs_truncation = True
        return appended

    def _out_of_range(self, partition: Partition, leader_start: Offset) -> None:
        plog = partition.log
        if leader_start > plog.log_end_offset:
            # The leader deleted what we would fetch next (retention): start where it starts.
            log.warning(
                "%s: the leader's log starts at %d, past our end %d; restarting the replica there",
                partition.tp,
                leader_start,
                plog.log_end_offset,
            )
            plog.truncate_fully_and_start_at(leader_start)
            partition.rebuild_producer_state()
        else:
            partition.needs_truncation = True

    async def _truncate(self, conn: NodeConnection, partitions: list[Partition], timeout: float) -> None:
        """OffsetForLeaderEpoch with the leader, then truncate each divergent tail.

        Afterwards each partition has truncated, or backs off (the leader answered an error or
        nothing for it, or the rounds ran out), or is no longer this leader's follower in the
        epoch it was asked about (a refresh moved it on, or its topic was deleted). Raises what
        the connection raises; cancellable."""
        by_tp = {p.tp: p for p in partitions}
        epochs_at_start = {p.tp: p.leader_epoch for p in partitions}
        await self._truncation_rounds(conn, by_tp, epochs_at_start, timeout)
        for tp, p in by_tp.items():
            if p.needs_truncation and self._still_following(p, epochs_at_start[tp]):
                self._back_off(p)

    def _still_following(self, partition: Partition, epoch: LeaderEpoch) -> bool:
        """Whether ``partition`` is still this node's replica, following in ``epoch``."""
        tp = partition.tp
        return (
            self.cluster.partitions.get(tp) is partition
            and partition.role == FOLLOWER
            and partition.leader_epoch == epoch
        )

    async def _truncation_rounds(
        self,
        conn: NodeConnection,
        by_tp: dict[TopicPartition, Partition],
        epochs_at_start: dict[TopicPartition, LeaderEpoch],
        timeout: float,
    ) -> None:
        asking: dict[TopicPartition, int] = {tp: p.log.latest_epoch for tp, p in by_tp.items()}
        for _ in range(MAX_TRUNCATION_ROUNDS):
            if not asking:
                return
            undefined = [tp for tp, e in asking.items() if e < 0]
            for tp in undefined:
                # An empty log (or one without epochs) has nothing that can diverge.
                p = by_tp[tp]
                if p.log.log_end_offset > p.log.high_watermark:
                    self._truncate_one(p, p.log.high_watermark, "no leader epochs in the local log")
                p.needs_truncation = False
                del asking[tp]
            if not asking:
                return
            request = {
                "replica_id": self.broker_id,
                "topics": _by_topic(
                    [by_tp[tp] for tp in asking],
                    lambda p, ask=asking: {
                        "partition": p.tp.partition,
                        "current_leader_epoch": p.leader_epoch,
                        "leader_epoch": ask[p.tp],
                    },
                ),
            }
            body = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, request, timeout=timeout)
            again: dict[TopicPartition, int] = {}
            for topic in body.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.topic, part.partition)
                    found = by_tp.get(tp)
                    if found is None or tp not in asking:
                        continue
                    p = found
                    if not self._still_following(p, epochs_at_start[tp]):
                        continue  # moved on (or deleted) while we asked: its log is not ours to cut now
                    if part.error_code:
                        log.info(
                            "%s: OffsetForLeaderEpoch error %s (leader %d, epoch %d); retrying in %d ms",
                            tp,
                            ErrorCode(part.error_code).name,
                            p.leader_id,
                            p.leader_epoch,
                            self.config.replica_fetch_backoff_ms,
                        )
                        continue  # still needs truncation: it backs off, then the fetch loop asks again
                    leader_epoch, leader_end = part.leader_epoch, part.end_offset
                    if leader_epoch < 0 or leader_end < 0:
                        # The leader has no epoch at or below ours: our whole log is from other epochs.
                        self._truncate_one(
                            p, min(p.log.high_watermark, p.log.log_end_offset), "leader knows no such epoch"
                        )
                        p.needs_truncation = False
                        continue
                    local_epoch, local_end = p.log.end_offset_for_epoch(leader_epoch)
                    if local_epoch == leader_epoch:
                        self._truncate_one(
                            p, min(leader_end, local_end), f"epoch {leader_epoch} ends at {leader_end} on the leader"
                        )
                        p.needs_truncation = False
                    elif local_epoch < 0:
                        self._truncate_one(p, min(p.log.high_watermark, p.log.log_end_offset), "no common epoch")
                        p.needs_truncation = False
                    else:
                        again[tp] = local_epoch  # we do not have the leader's epoch: ask about our older one
            asking = again
        for tp in asking:
            by_tp[tp].needs_truncation = True  # the rounds ran out: it backs off and asks again

    def _truncate_one(self, partition: Partition, offset: Offset, why: str) -> None:
        plog = partition.log
        end = plog.log_end_offset
        if offset < end:
            removed = partition.truncate_to(offset)
            log.warning(
                "%s: truncated the divergent tail %d..%d (%d bytes, %s); log end now %d",
                partition.tp,
                offset,
                end,
                removed,
                why,
                plog.log_end_offset,
            )


def _only_replicas(isr: tuple[NodeId, ...], replicas: tuple[NodeId, ...], leader: NodeId) -> tuple[NodeId, ...]:
    """``isr`` without the brokers that are not in ``replicas``: a leader never puts a non-replica
    in the ISR (and takes out one a reassignment removed)."""
    return tuple(r for r in isr if r == leader or r in replicas)


#: What a follower's fetch asks of one partition: (fetch offset, log start offset, leader epoch); a
#: fetch session resends it only when it changes. A tuple: built for every followed partition every
#: round, where a dataclass's construction and comparison cost several times more.
_Position = tuple[Offset, Offset, LeaderEpoch]


def _grouped(
    items: Iterable[tuple[TopicPartition, _Position]], entry: Callable[[TopicPartition, _Position], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Fetch's ``topics``: the partitions' entries grouped by topic."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, pos in items:
        topics.setdefault(tp.topic, []).append(entry(tp, pos))
    return [{"topic": name, "partitions": parts} for name, parts in topics.items()]


def _forgotten(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    """Fetch's ``forgotten_topics_data``: the partitions a fetch session is to drop, by topic."""
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": name, "partitions": parts} for name, parts in topics.items()]


def _by_topic(partitions: list[Partition], entry: Any) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for p in partitions:
        topics.setdefault(p.tp.topic, []).append(entry(p))
    return [{"topic": name, "partitions": parts} for name, parts in topics.items()]
