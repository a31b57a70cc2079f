"""The controller: one broker per site, elected through ZooKeeper, that elects partition leaders.

Every broker runs :class:`Controller`; the one that creates the ephemeral ``/controller``
znode (and bumps ``/controller_epoch``) is active until its ZooKeeper session ends. Brokers
learn their roles from ZooKeeper: the controller (and a leader changing its ISR) writes
``/brokers/topics/T/partitions/P/state`` with a compare-and-set on the znode version, and every
broker watches those znodes (see ``ClusterState.refresh``). As soon as a batch of its writes has
landed, the controller also hands the written states, with their new znode versions, to every
live broker (PartitionStates, strait's API 1002; itself directly), so that they take new
leaderships at once: with thousands of partitions the watches' re-reads took seconds (a failover
at 5,000 partitions: 6.4 s from the new controller to every partition led). A broker takes a
pushed state only if it is newer than the one it holds (``ClusterState.apply_pushed``); a push
that fails changes nothing but the speed, as the watches still bring every change.

After every change it sees (a broker came or went, a state, a reassignment, offline log dirs)
the active controller walks all partitions:

- a partition whose leader is gone (not registered, its log dir offline, or shutting down)
  gets a new leader: the first replica in assignment order that is alive and in the ISR, with
  the leader epoch bumped. With none, the partition goes offline (leader -1, ISR kept) unless
  ``unclean.leader.election.enable`` (per topic) lets a live out-of-sync replica lead;
- dead replicas leave the ISR of partitions whose leader is alive (no epoch bump).

It also serves ControlledShutdown (moves a stopping broker's leaderships to other ISR
members and drops it from every ISR), runs preferred leader election every
``leader.imbalance.check.interval.seconds`` when ``auto.leader.rebalance.enable``, carries
out partition reassignments (``/admin/reassign_partitions``), serves Kafka's reassignment APIs
(AlterPartitionReassignments merges into that znode, ListPartitionReassignments reads it) and
records truncations to a cut (TruncatePartitions, see ``node.truncation``).

A controller that lost its session may still write once before it notices: every write is a
compare-and-set on the partition state's version, so it only succeeds if nothing changed the
partition since the controller read it.

Like Kafka's controller, it decides every partition a change touches first and then writes all
their states as one batch (``ZkState.set_partition_states``: pipelined, each write its own
compare-and-set), so a broker that stops or dies while it leads or follows hundreds of
partitions costs a round trip or two, not one per partition; the brokers' state watches then
fire together and each broker re-reads the cluster once or twice, not once per partition. A
write that lost its race is decided again from a fresh read, alone.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import trio

from node.client import ClientError, NodeConnection
from node.cluster import ClusterState, TopicState
from node.config import NodeConfig
from node.coordination import (
    AlterOutcome,
    CoordinationError,
    PartitionState,
    StaleState,
    Truncation,
    ZkState,
    encode_partition_state,
)
from node.errors import BrokerError
from node.ids import NO_NODE, NodeId
from node.protocol import ApiKey, ErrorCode, ProtocolError
from node.tls import inter_broker_context, inter_broker_sasl
from node.truncation import (
    Again,
    LeaderAnswer,
    Outcome,
    PartitionKey,
    Record,
    answer_of,
    ask_leader,
    check_cut,
    check_policy,
    decide,
)
from storage import LeaderEpoch, Offset, StorageError, TopicPartition

log = logging.getLogger("strait.node.controller")

#: Batches of writes a controlled shutdown makes at most: the partitions whose compare-and-set
#: lost (a leader changed its ISR meanwhile) are decided again from a fresh read, this often.
SHUTDOWN_WRITE_ROUNDS = 5
#: How long a push of written partition states to one broker may take (connecting included).
PUSH_TIMEOUT_S = 10.0


def push_body(
    controller_id: NodeId, epoch: int, pushed: dict[str, tuple[str, dict[int, PartitionState]]]
) -> dict[str, Any]:
    """A PartitionStates request: each state as its znode's JSON, with its new znode version."""
    return {
        "controller_id": controller_id,
        "controller_epoch": epoch,
        "topics": [
            {
                "name": name,
                "topic_id": topic_id,
                "partitions": [
                    {"index": p, "version": state.version, "state": encode_partition_state(state)}
                    for p, state in sorted(states.items())
                ],
            }
            for name, (topic_id, states) in sorted(pushed.items())
        ],
    }


class Controller:
    def __init__(self, config: NodeConfig, cluster: ClusterState, zk: ZkState) -> None:
        self.config = config
        self.cluster = cluster
        self.zk = zk
        self.broker_id = config.broker_id
        self.epoch: int | None = None  # set while this broker is the active controller
        self.shutting_down: set[NodeId] = set()
        self._poked = trio.Event()
        self._lock = trio.Lock()
        self._pushes: trio.Nursery | None = None  # while active: where pushes to the brokers run

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def poke(self) -> None:
        """Something changed in ZooKeeper (called after every cluster refresh)."""
        self._poked.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        zk = self.zk
        while True:
            cluster = self.cluster
            if cluster.controller is None or cluster.controller[0] == self.broker_id:
                try:
                    epoch = await zk.elect_controller(self.broker_id)
                except CoordinationError as exc:
                    log.warning("controller election failed: %s; retrying", exc)
                    epoch = None
                    await trio.sleep(1)
                if epoch is not None:
                    await self._serve(epoch)
                    continue
            self._poked = trio.Event()
            with trio.move_on_after(1):
                await self._poked.wait()

    async def _serve(self, epoch: int) -> None:
        self.epoch = epoch
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        try:
            await self.cluster.refresh()
            async with trio.open_nursery() as nursery:
                self._pushes = nursery
                nursery.start_soon(self._preferred_leader_loop)
                while True:
                    cluster = self.cluster
                    if cluster.controller != (self.broker_id, epoch):
                        log.warning(
                            "broker %d is no longer the controller (ZooKeeper says %s)",
                            self.broker_id,
                            cluster.controller,
                        )
                        nursery.cancel_scope.cancel()
                        return
                    self._poked = trio.Event()
                    try:
                        async with self._lock:
                            await self._reconcile(cluster, epoch)
                            await self._reassign(cluster, epoch)
                    except CoordinationError as exc:
                        log.warning("controller pass failed: %s; retrying", exc)
                        await trio.sleep(0.5)
                        continue
                    with trio.move_on_after(5):
                        await self._poked.wait()
        finally:
            self.epoch = None
            self._pushes = None

    # -- elections -------------------------------------------------------------------------

    def _usable(self, cluster: ClusterState, broker_id: NodeId, topic: str, partition: int) -> bool:
        return (
            broker_id in cluster.brokers
            and broker_id not in self.shutting_down
            and (topic, partition) not in cluster.offline_replicas.get(broker_id, frozenset())
        )

    async def _reconcile(self, cluster: ClusterState, epoch: int) -> None:
        for gone in [b for b in self.shutting_down if b not in cluster.brokers]:
            self.shutting_down.discard(gone)
        decided: dict[PartitionKey, PartitionState] = {}
        for topic in list(cluster.topics.values()):
            for p, replicas in topic.assignment.items():
                new = self._decide(cluster, topic, p, replicas, epoch)
                if new is not None:
                    decided[topic.name, p] = new
        if decided:
            for name, p in sorted(await self._write(decided)):
                log.info("%s-%d: the partition state moved meanwhile; deciding again", name, p)
            await cluster.refresh()  # pokes this controller: the next pass decides the lost ones again

    def _decide(
        self, cluster: ClusterState, topic: TopicState, p: int, replicas: tuple[NodeId, ...], epoch: int
    ) -> PartitionState | None:
        name = topic.name
        state = topic.states.get(p)
        if state is None:
            return None  # written with the topic in one transaction; absent only while it is deleted
        isr_usable = [b for b in state.isr if self._usable(cluster, b, name, p)]
        if state.leader >= 0 and self._usable(cluster, state.leader, name, p):
            if len(isr_usable) != len(state.isr):
                return replace(state, isr=tuple(isr_usable), controller_epoch=epoch)
            return None
        candidates = [b for b in replicas if b in isr_usable]
        if candidates:
            leader = candidates[0]
            isr = tuple(b for b in replicas if b in isr_usable)
            log.info(
                "%s-%d: leader %d is gone; electing %d from ISR %s (epoch %d)",
                name,
                p,
                state.leader,
                leader,
                list(isr),
                LeaderEpoch(state.leader_epoch + 1),
            )
            return replace(
                state, leader=leader, leader_epoch=LeaderEpoch(state.leader_epoch + 1), isr=isr, controller_epoch=epoch
            )
        live = [b for b in replicas if self._usable(cluster, b, name, p)]
        if live and topic.policy.unclean_leader_election:
            log.warning(
                "%s-%d: no ISR member of %s is alive; UNCLEAN election of %d (unclean.leader.election.enable): "
                "records only the old ISR had are lost",
                name,
                p,
                list(state.isr),
                live[0],
            )
            return replace(
                state,
                leader=live[0],
                leader_epoch=LeaderEpoch(state.leader_epoch + 1),
                isr=(live[0],),
                controller_epoch=epoch,
            )
        if state.leader == NO_NODE:
            return None
        log.warning(
            "%s-%d: leader %d is gone and no other ISR member of %s is alive: the partition is offline until one "
            "returns (unclean.leader.election.enable=false)",
            name,
            p,
            state.leader,
            list(state.isr),
        )
        # Keep the ISR: its members hold every committed record, so any of them may lead again.
        return replace(state, leader=NO_NODE, leader_epoch=LeaderEpoch(state.leader_epoch + 1), controller_epoch=epoch)

    async def _write(self, states: dict[PartitionKey, PartitionState]) -> frozenset[PartitionKey]:
        """Write ``states`` as one batch, each a compare-and-set on the version it was decided
        from; returns the partitions whose write lost (the state moved meanwhile, or the topic is
        being deleted). Raises CoordinationError (ZooKeeper unreachable): re-read, decide again."""
        if not states:
            return frozenset()
        writes = await self.zk.set_partition_states(states)
        self._push({key: replace(states[key], version=version) for key, version in writes.versions.items()})
        return writes.lost

    def _push(self, landed: dict[PartitionKey, PartitionState]) -> None:
        """Hand the states that landed (with their new znode versions) to this broker's view at once
        and to every other live broker in the background (PartitionStates). Best effort: a broker
        that does not take them learns them from its watches, as it would without the push."""
        epoch, nursery = self.epoch, self._pushes
        if not landed or epoch is None:
            return
        pushed: dict[str, tuple[str, dict[int, PartitionState]]] = {}
        for (name, p), state in landed.items():
            topic = self.cluster.topics.get(name)
            if topic is not None:
                pushed.setdefault(name, (topic.topic_id, {}))[1][p] = state
        try:
            self.cluster.apply_pushed(epoch, pushed)
        except BrokerError as exc:  # a newer controller is known here: it is not this one's to push
            log.info("not pushing partition states: %s", exc.message)
            return
        if nursery is None:
            return
        body = push_body(self.broker_id, epoch, pushed)
        for broker_id, reg in self.cluster.brokers.items():
            if broker_id != self.broker_id:
                nursery.start_soon(self._push_to, broker_id, f"{reg.host}:{reg.port}", body)

    async def _push_to(self, broker_id: NodeId, address: str, body: dict[str, Any]) -> None:
        timeout = PUSH_TIMEOUT_S
        try:
            with trio.fail_after(timeout):
                async with await NodeConnection.open(
                    address,
                    client_id=f"strait-controller-{self.broker_id}",
                    timeout=timeout,
                    ssl_context=inter_broker_context(self.config),
                    sasl=inter_broker_sasl(self.config),
                ) as conn:
                    version = conn.version(ApiKey.PARTITION_STATES, 0)
                    answer = await conn.request(ApiKey.PARTITION_STATES, version, body, timeout=timeout)
        except (ClientError, ProtocolError, OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            log.info("pushing partition states to broker %d at %s failed: %s", broker_id, address, exc)
            return
        if answer.error_code:
            log.info(
                "broker %d refused the pushed partition states: %s (%s)",
                broker_id,
                ErrorCode(answer.error_code).name,
                answer.error_message,
            )

    # -- controlled shutdown ---------------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: NodeId) -> list[tuple[str, int]]:
        """Move ``broker_id``'s leaderships to other ISR members and drop it from every ISR.

        Every partition it leads or follows is decided at once and written as one batch; the
        partitions whose compare-and-set lost are decided again from a fresh read, up to
        :data:`SHUTDOWN_WRITE_ROUNDS` batches in all. Returns the partitions it still leads (no
        other ISR member is alive) and those whose writes kept losing. Raises CoordinationError
        (not the controller, or ZooKeeper unreachable).
        """
        epoch = self.epoch
        if epoch is None:
            raise CoordinationError("this broker is not the controller")
        self.shutting_down.add(broker_id)
        remaining: list[PartitionKey] = []
        moved = 0
        async with self._lock:
            cluster = self.cluster
            await cluster.refresh()
            only: frozenset[PartitionKey] | None = None  # the first batch: every partition
            lost: frozenset[PartitionKey] = frozenset()
            rounds = 0
            while rounds < SHUTDOWN_WRITE_ROUNDS:
                if rounds:
                    await cluster.refresh()  # decide the lost ones again from what they are now
                rounds += 1
                decided, stays = self._shutdown_states(cluster, broker_id, epoch, only)
                remaining += stays
                lost = await self._write(decided)
                moved += len(decided) - len(lost)
                if not lost:
                    break
                only = lost
            if lost:
                log.warning(
                    "controlled shutdown of broker %d: the states of %d partition(s) kept moving; left as they are",
                    broker_id,
                    len(lost),
                )
                remaining += sorted(lost)
            await cluster.refresh()
        log.info(
            "controlled shutdown of broker %d: %d partition state(s) written in %d batch(es); %d partition(s) have "
            "no other ISR member",
            broker_id,
            moved,
            rounds,
            len(remaining),
        )
        return remaining

    def _shutdown_states(
        self, cluster: ClusterState, broker_id: NodeId, epoch: int, only: frozenset[PartitionKey] | None
    ) -> tuple[dict[PartitionKey, PartitionState], list[PartitionKey]]:
        """The new state of each partition ``broker_id`` leads or follows (of ``only``, when
        given): leadership to the first other live ISR member in assignment order with the leader
        epoch bumped, and ``broker_id`` out of the ISR; and the partitions it must keep leading
        (no other ISR member is alive). The last in-sync replica stays in the ISR."""
        decided: dict[PartitionKey, PartitionState] = {}
        stays: list[PartitionKey] = []
        for topic in list(cluster.topics.values()):
            for p, replicas in topic.assignment.items():
                if only is not None and (topic.name, p) not in only:
                    continue
                state = topic.states.get(p)
                if state is None or broker_id not in (state.leader, *state.isr):
                    continue
                others = [b for b in replicas if b in state.isr and self._usable(cluster, b, topic.name, p)]
                isr = tuple(b for b in state.isr if b != broker_id)
                if not isr:
                    # The last in-sync replica stays in the ISR: it must be able to lead again.
                    if state.leader == broker_id:
                        stays.append((topic.name, p))
                    continue
                if state.leader == broker_id:
                    if not others:
                        stays.append((topic.name, p))
                        continue
                    decided[topic.name, p] = replace(
                        state,
                        leader=others[0],
                        leader_epoch=LeaderEpoch(state.leader_epoch + 1),
                        isr=isr,
                        controller_epoch=epoch,
                    )
                else:
                    decided[topic.name, p] = replace(state, isr=isr, controller_epoch=epoch)
        return decided, stays

    # -- truncation to a cut ---------------------------------------------------------------------

    async def truncate_partitions(self, cuts: dict[PartitionKey, int], timeout: float) -> dict[PartitionKey, Outcome]:
        """Record a truncation of each partition to its cut (steps 2-4 of ``node.truncation``).

        Retriable states (a leader moving, not yet at the state's epoch, unreachable) are tried
        again every 0.1 s until ``timeout`` seconds have passed; then their last error is the
        answer. Never raises but for cancellation; NOT_CONTROLLER for all when this broker is
        not (or stops being) the controller.
        """
        deadline = trio.current_time() + timeout
        outcomes: dict[PartitionKey, Outcome] = {}
        todo = dict(cuts)
        reread = False  # the view is re-read once before refusing a topic that is not fenced
        await self.cluster.refresh()
        while todo:
            epoch = self.epoch
            if epoch is None:
                for key in todo:
                    outcomes[key] = Outcome(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
                break
            again: dict[PartitionKey, Again] = {}
            asks: dict[NodeId, dict[PartitionKey, int]] = {}
            states: dict[PartitionKey, PartitionState] = {}
            unfenced = False
            for key, offset in todo.items():
                found = self._truncation_state(key, offset)
                if isinstance(found, Outcome) and found.error_code == ErrorCode.POLICY_VIOLATION and not reread:
                    unfenced = True
                if isinstance(found, PartitionState):
                    states[key] = found
                    asks.setdefault(found.leader, {})[key] = offset
                elif isinstance(found, Again):
                    again[key] = found
                else:
                    outcomes[key] = found
            if unfenced:
                reread = True
                for key in [k for k, o in outcomes.items() if o.error_code == ErrorCode.POLICY_VIOLATION]:
                    del outcomes[key]
                await self.cluster.refresh()
                continue
            answers = await self._ask_leaders(asks, max(0.1, min(deadline - trio.current_time(), 10.0)))
            records: dict[PartitionKey, Record] = {}
            for key, state in states.items():
                decision = decide(state, todo[key], answers[key], epoch)
                if isinstance(decision, Record):
                    records[key] = decision
                elif isinstance(decision, Again):
                    again[key] = decision
                else:
                    outcomes[key] = decision
            if records:
                outcomes |= await self._record_truncations(records, again)
            todo = {key: todo[key] for key in again}
            if not todo:
                break
            if trio.current_time() >= deadline:
                for key, last in again.items():
                    outcomes[key] = Outcome(last.code, f"{key[0]}-{key[1]}: {last.message}")
                break
            await trio.sleep(0.1)
            await self.cluster.refresh()
        return outcomes

    def _truncation_state(self, key: PartitionKey, offset: int) -> PartitionState | Outcome | Again:
        """The state to decide from, or the answer without asking the leader (step 2)."""
        name, p = key
        cluster = self.cluster
        topic = cluster.topics.get(name)
        if topic is None or p not in topic.assignment:
            return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{p}: no such topic or partition")
        try:
            check_policy(name, topic.policy)
        except BrokerError as exc:
            return Outcome(exc.code, exc.message)
        state = topic.states.get(p)
        if state is None or state.leader < 0 or not self._usable(cluster, state.leader, name, p):
            if state is not None and state.truncation == Truncation(state.leader_epoch, Offset(offset)):
                # Recorded already; its leader (down) carries it out when it leads again.
                return Outcome(0, None, state.leader_epoch)
            leader = state.leader if state is not None else NO_NODE
            return Again(ErrorCode.LEADER_NOT_AVAILABLE, f"no usable leader (leader {leader})")
        return state

    async def _ask_leaders(
        self, asks: dict[NodeId, dict[PartitionKey, int]], timeout: float
    ) -> dict[PartitionKey, LeaderAnswer]:
        """Each leader's check of its cuts: this broker's own partitions locally, others over the wire."""
        answers: dict[PartitionKey, LeaderAnswer] = {}
        for leader, cuts in asks.items():
            if leader == self.broker_id:
                for (name, p), offset in cuts.items():
                    partition = self.cluster.partitions.get(TopicPartition(name, p))
                    error: BrokerError | None = None
                    try:
                        if partition is None:
                            raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{name}-{p} is not hosted here yet")
                        check_cut(partition, offset)
                    except BrokerError as exc:
                        error = exc
                    except (StorageError, OSError) as exc:
                        error = BrokerError(ErrorCode.KAFKA_STORAGE_ERROR, f"{name}-{p}: {exc}")
                    answers[name, p] = answer_of(partition, error)
                continue
            reg = self.cluster.brokers.get(leader)
            if reg is None:
                for key in cuts:
                    answers[key] = LeaderAnswer(ErrorCode.LEADER_NOT_AVAILABLE, f"leader {leader} is not registered")
                continue
            client_id = f"strait-controller-{self.broker_id}"
            tls = inter_broker_context(self.config)
            sasl = inter_broker_sasl(self.config)
            answers |= await ask_leader(f"{reg.host}:{reg.port}", client_id, cuts, timeout, tls, sasl)
        return answers

    async def _record_truncations(
        self, records: dict[PartitionKey, Record], again: dict[PartitionKey, Again]
    ) -> dict[PartitionKey, Outcome]:
        """Write each recorded truncation (compare-and-set); a state that moved goes to ``again``."""
        outcomes: dict[PartitionKey, Outcome] = {}
        async with self._lock:
            for (name, p), record in records.items():
                new = record.state
                try:
                    await self.zk.set_partition_state(name, p, new)
                except StaleState:
                    again[name, p] = Again(ErrorCode.LEADER_NOT_AVAILABLE, "the partition state moved meanwhile")
                    continue
                except CoordinationError as exc:
                    again[name, p] = Again(ErrorCode.LEADER_NOT_AVAILABLE, f"writing the partition state failed: {exc}")
                    continue
                answer = record.answer
                log.warning(
                    "%s-%d: truncation to offset %d recorded at leader epoch %d (log %d..%d, high watermark %d on "
                    "leader %d); ISR -> %s until the followers are at the cut",
                    name,
                    p,
                    new.truncation.offset if new.truncation else -1,
                    new.leader_epoch,
                    answer.log_start_offset,
                    answer.log_end_offset,
                    answer.high_watermark,
                    new.leader,
                    list(new.isr),
                )
                outcomes[name, p] = Outcome(0, None, new.leader_epoch, truncated=True, answer=answer)
            await self.cluster.refresh()
        self.poke()
        return outcomes

    # -- preferred leaders -----------------------------------------------------------------------

    async def _preferred_leader_loop(self) -> None:
        config = self.config
        if not config.auto_leader_rebalance_enable:
            return
        while True:
            await trio.sleep(config.leader_imbalance_check_interval_seconds)
            try:
                await self.elect_preferred_leaders(config.leader_imbalance_per_broker_percentage)
            except CoordinationError as exc:
                log.warning("preferred leader election failed: %s", exc)

    async def elect_preferred_leaders(self, threshold_percent: int = 0) -> int:
        """Move leadership back to each partition's preferred replica where it is alive and in sync.

        Per preferred broker, only when more than ``threshold_percent`` of its partitions are led
        elsewhere (Kafka's leader.imbalance.per.broker.percentage). Returns how many moved.
        """
        epoch = self.epoch
        if epoch is None:
            return 0
        decided: dict[PartitionKey, PartitionState] = {}
        async with self._lock:
            cluster = self.cluster
            preferred: dict[NodeId, list[tuple[TopicState, int]]] = {}
            for topic in cluster.topics.values():
                for p, replicas in topic.assignment.items():
                    if replicas:
                        preferred.setdefault(replicas[0], []).append((topic, p))
            for broker_id, owned in preferred.items():
                imbalanced = [
                    (t, p) for t, p in owned if (st := t.states.get(p)) is not None and st.leader != broker_id
                ]
                if not owned or 100 * len(imbalanced) / len(owned) <= threshold_percent:
                    continue
                for topic, p in imbalanced:
                    state = topic.states[p]
                    if broker_id not in state.isr or not self._usable(cluster, broker_id, topic.name, p):
                        continue
                    decided[topic.name, p] = replace(
                        state,
                        leader=broker_id,
                        leader_epoch=LeaderEpoch(state.leader_epoch + 1),
                        controller_epoch=epoch,
                    )
            moved = len(decided) - len(await self._write(decided))
            if moved:
                log.info("preferred leader election moved %d leadership(s)", moved)
                await cluster.refresh()
        return moved

    async def elect_leaders(
        self, partitions: list[PartitionKey] | None, *, unclean: bool
    ) -> dict[PartitionKey, tuple[ErrorCode, str | None]]:
        """ElectLeaders (KIP-460): per partition, the outcome of a preferred or an unclean election.

        ``partitions`` None: every partition, answering only those where an election was needed.
        Preferred: the first replica of the assignment must be alive and in the ISR
        (PREFERRED_LEADER_NOT_AVAILABLE), and not lead already (ELECTION_NOT_NEEDED). Unclean:
        only a partition without a live leader is elected (ELECTION_NOT_NEEDED otherwise): the
        controller's usual choice from the ISR first, else the first live replica, which then
        leads alone (what the old ISR held beyond its log is lost, as with
        ``unclean.leader.election.enable``); with no live replica, ELIGIBLE_LEADERS_NOT_AVAILABLE.
        A partition that does not exist answers UNKNOWN_TOPIC_OR_PARTITION. The states are written
        as one batch (pushed to the brokers at once); a write that lost its race answers
        ELIGIBLE_LEADERS_NOT_AVAILABLE so the client may try again.
        """
        epoch = self.epoch
        if epoch is None:
            raise BrokerError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
        outcomes: dict[PartitionKey, tuple[ErrorCode, str | None]] = {}
        decided: dict[PartitionKey, PartitionState] = {}
        async with self._lock:
            cluster = self.cluster
            if partitions is None:
                keys = [(t.name, p) for t in cluster.topics.values() for p in sorted(t.assignment)]
            else:
                keys = list(dict.fromkeys(partitions))
            for name, p in keys:
                topic = cluster.topics.get(name)
                state = topic.states.get(p) if topic is not None else None
                if topic is None or p not in topic.assignment or state is None:
                    outcomes[name, p] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{p} does not exist")
                    continue
                replicas = topic.assignment[p]
                chosen = self._unclean_choice(cluster, topic, p, state) if unclean else None
                if unclean:
                    if state.leader >= 0 and self._usable(cluster, state.leader, name, p):
                        outcomes[name, p] = (ErrorCode.ELECTION_NOT_NEEDED, f"{name}-{p} has a leader")
                    elif chosen is None:
                        outcomes[name, p] = (
                            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                            f"{name}-{p}: no replica of {list(replicas)} is alive",
                        )
                    else:
                        decided[name, p] = chosen
                    continue
                preferred = replicas[0]
                if state.leader == preferred:
                    outcomes[name, p] = (ErrorCode.ELECTION_NOT_NEEDED, f"{name}-{p} is led by its preferred replica")
                elif preferred not in state.isr or not self._usable(cluster, preferred, name, p):
                    outcomes[name, p] = (
                        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                        f"{name}-{p}: preferred replica {preferred} is not alive and in the ISR {list(state.isr)}",
                    )
                else:
                    decided[name, p] = replace(
                        state,
                        leader=preferred,
                        leader_epoch=LeaderEpoch(state.leader_epoch + 1),
                        controller_epoch=epoch,
                    )
            lost = await self._write(decided)
        for key, state in decided.items():
            if key in lost:
                outcomes[key] = (
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"{key[0]}-{key[1]} moved meanwhile; try again",
                )
            else:
                outcomes[key] = (ErrorCode.NONE, None)
                log.info(
                    "%s-%d: %s election of %d (epoch %d)",
                    *key,
                    "unclean" if unclean else "preferred",
                    state.leader,
                    state.leader_epoch,
                )
        if decided:
            await self.cluster.refresh()
        if partitions is None:
            outcomes = {k: v for k, v in outcomes.items() if v[0] != ErrorCode.ELECTION_NOT_NEEDED}
        return outcomes

    def _unclean_choice(
        self, cluster: ClusterState, topic: TopicState, p: int, state: PartitionState
    ) -> PartitionState | None:
        """The state an unclean election gives a partition: a live ISR member if any, else the
        first live replica alone; None when no replica is alive."""
        epoch = self.epoch
        assert epoch is not None
        replicas = topic.assignment[p]
        in_sync = [b for b in replicas if b in state.isr and self._usable(cluster, b, topic.name, p)]
        if in_sync:
            isr = tuple(in_sync)
            leader = in_sync[0]
        else:
            live = [b for b in replicas if self._usable(cluster, b, topic.name, p)]
            if not live:
                return None
            leader, isr = live[0], (live[0],)
            log.warning(
                "%s-%d: UNCLEAN election (ElectLeaders) of %d, out of the ISR %s: what only the ISR had is lost",
                topic.name,
                p,
                leader,
                list(state.isr),
            )
        return replace(
            state, leader=leader, leader_epoch=LeaderEpoch(state.leader_epoch + 1), isr=isr, controller_epoch=epoch
        )

    # -- reassignment ----------------------------------------------------------------------------

    async def _reassign(self, cluster: ClusterState, epoch: int) -> None:
        """Advance each partition of ``/admin/reassign_partitions`` one step.

        1. assignment := target + the current replicas not in it (new replicas start following);
        2. once every target replica is in the ISR, in one transaction: assignment := target
           (old replicas delete their logs) and state := lead from the target, ISR := ISR ∩
           target, leader epoch + 1 (also when the leader stays, as Kafka's controller does);
           then the entry is removed.

        When step 1 already made the assignment the target (the target only adds replicas after
        the current ones), the entry is removed once every target replica is in the ISR, and not
        before: the move is not done while a new replica is still catching up (and the
        reassignment's throttle must still apply to it).

        Step 2 is one transaction so that no reader or writer ever pairs the new replica list
        with the old state or the other way round: a leader's ISR change decided on the old
        state, or checked against the old replica list, fails its compare-and-set (see
        ``ReplicaManager._change_isr``) instead of putting a removed replica back in the ISR.
        """
        plan = cluster.reassignment
        if plan is None:
            return
        for (name, p), target in plan.partitions.items():
            topic = cluster.topics.get(name)
            if topic is None or p not in topic.assignment:
                log.warning("reassignment of %s-%d: no such partition; dropping it", name, p)
                await self.zk.complete_reassignment(name, p)
                continue
            current = topic.assignment[p]
            state = topic.states.get(p)
            if state is None:
                continue
            if tuple(current) == tuple(target):
                # Only adding replicas (the target kept every current one, in order): step 1 made
                # the assignment the target already. Done once they are all in the ISR, as Kafka's.
                if not all(b in state.isr for b in target):
                    continue
                await self.zk.complete_reassignment(name, p, target)
                log.info("reassignment of %s-%d to %s is complete", name, p, list(target))
                continue
            union = tuple(target) + tuple(b for b in current if b not in target)
            if tuple(current) != union:
                assignment = dict(topic.assignment)
                assignment[p] = union
                try:
                    await self.zk.set_assignment(name, assignment, topic.version)
                except StaleState:
                    return
                log.info("reassignment of %s-%d: replicas %s -> %s (catching up)", name, p, list(current), list(union))
                await cluster.refresh()
                return  # one assignment write per pass: the topic's version moved
            if not all(b in state.isr for b in target):
                continue  # still catching up; the next pass (a state change pokes us) checks again
            isr = tuple(b for b in state.isr if b in target)
            if state.leader in target:
                leader = state.leader
            else:
                live = [b for b in target if self._usable(cluster, b, name, p) and b in isr]
                if not live:
                    continue
                leader = live[0]
            new = replace(
                state, leader=leader, leader_epoch=LeaderEpoch(state.leader_epoch + 1), isr=isr, controller_epoch=epoch
            )
            assignment = dict(topic.assignment)
            assignment[p] = tuple(target)
            try:
                await self.zk.set_assignment(name, assignment, topic.version, states={p: new})
            except StaleState:
                return
            # Only if nobody gave it another target since we read the plan (AlterPartitionReassignments):
            # then the entry stays and the next pass moves the partition on from here.
            await self.zk.complete_reassignment(name, p, target)
            log.info("reassignment of %s-%d to %s is complete", name, p, list(target))
            await cluster.refresh()
            return

    async def alter_reassignments(
        self, changes: dict[PartitionKey, tuple[NodeId, ...] | None], *, allow_replication_factor_change: bool = True
    ) -> dict[PartitionKey, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments (KIP-455): per partition, the outcome of setting its target
        replicas (a list) or cancelling its move (None), merged into the reassignment in progress.

        Checked first, as Kafka's controller does: the partition exists
        (UNKNOWN_TOPIC_OR_PARTITION); the replicas are distinct, non-negative and registered
        brokers (INVALID_REPLICA_ASSIGNMENT); without ``allow_replication_factor_change`` (KIP-860)
        the target has as many replicas as the partition had before its move
        (INVALID_REPLICATION_FACTOR). A cancel of a partition not being moved answers
        NO_REASSIGNMENT_IN_PROGRESS. A target equal to the replicas of a partition not being
        moved succeeds with nothing written. The moves themselves are carried out by ``_reassign``.

        Raises BrokerError(NOT_CONTROLLER) on a node that is not the active controller;
        CoordinationError when ZooKeeper could not be changed.
        """
        if self.epoch is None:
            raise BrokerError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
        cluster = self.cluster
        running = await self.zk.reassignment()
        outcomes: dict[PartitionKey, tuple[ErrorCode, str | None]] = {}
        valid: dict[PartitionKey, tuple[NodeId, ...] | None] = {}
        for (name, p), replicas in changes.items():
            topic = cluster.topics.get(name)
            if topic is None or p not in topic.assignment:
                outcomes[name, p] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            moving = running is not None and (name, p) in running.partitions
            if replicas is not None:
                original = topic.assignment[p]
                if running is not None and moving:
                    original = running.originals.get((name, p), original)
                problem = self._target_problem(cluster, replicas, original, allow_replication_factor_change)
                if problem is not None:
                    outcomes[name, p] = problem
                    continue
                if not moving and tuple(replicas) == tuple(topic.assignment[p]):
                    outcomes[name, p] = (ErrorCode.NONE, None)  # already there: nothing to move, as in Kafka
                    continue
            valid[name, p] = replicas
        if valid:
            done, _ = await self.zk.alter_reassignment(valid)
            for key, outcome in done.items():
                if outcome is AlterOutcome.UNKNOWN_PARTITION:  # deleted since we looked
                    outcomes[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                elif outcome is AlterOutcome.NOT_IN_PROGRESS:
                    outcomes[key] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                else:
                    outcomes[key] = (ErrorCode.NONE, None)
                    log.info("reassignment of %s-%d: %s (AlterPartitionReassignments)", *key, outcome.value)
            self.poke()
        return outcomes

    @staticmethod
    def _target_problem(
        cluster: ClusterState, replicas: tuple[NodeId, ...], original: tuple[NodeId, ...], allow_rf_change: bool
    ) -> tuple[ErrorCode, str] | None:
        if not replicas:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the replica list is empty"
        if len(set(replicas)) != len(replicas):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the replica list {list(replicas)} has duplicates"
        unknown = [b for b in replicas if b < 0 or b not in cluster.brokers]
        if unknown:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not registered"
        if not allow_rf_change and len(replicas) != len(original):
            return (
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"the replication factor would change from {len(original)} to {len(replicas)}",
            )
        return None

    async def list_reassignments(
        self, partitions: list[PartitionKey] | None
    ) -> dict[PartitionKey, tuple[tuple[NodeId, ...], tuple[NodeId, ...], tuple[NodeId, ...]]]:
        """ListPartitionReassignments: for each partition being moved (of ``partitions``, or all),
        its replicas (the target's, then the current ones that leave at the end), the adding
        replicas (in the target, not in the original list) and the removing ones (replicas not in
        the target). Partitions not being moved are left out, as in Kafka.

        Read from ZooKeeper, not the cached state, so a move just altered is listed. Raises
        BrokerError(NOT_CONTROLLER) on a node that is not the active controller.
        """
        if self.epoch is None:
            raise BrokerError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
        running = await self.zk.reassignment()
        if running is None:
            return {}
        keys = list(running.partitions) if partitions is None else [k for k in partitions if k in running.partitions]
        listed: dict[PartitionKey, tuple[tuple[NodeId, ...], tuple[NodeId, ...], tuple[NodeId, ...]]] = {}
        for name, p in keys:
            target = running.partitions[name, p]
            topic = self.cluster.topics.get(name)
            current = topic.assignment.get(p, ()) if topic is not None else ()
            original = running.originals.get((name, p), current)
            replicas = target + tuple(b for b in (*current, *original) if b not in target)
            replicas = tuple(dict.fromkeys(replicas))
            adding = tuple(b for b in target if b not in original)
            removing = tuple(b for b in replicas if b not in target)
            listed[name, p] = (replicas, adding, removing)
        return listed
