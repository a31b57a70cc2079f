"""Cluster state in ZooKeeper (Kafka's classic layout) for trio code, over kazoo.

:class:`ZkState` owns one kazoo session. Kazoo is thread-based; the rules that keep it from
blocking trio:

- every blocking kazoo call runs in ``trio.to_thread.run_sync``; each public operation is one
  function in one worker thread;
- kazoo's own threads (watches, session events) never call trio except through
  ``TrioToken.run_sync_soon`` (see :mod:`._hints`), and never wait for trio.

Cancellation: every method may be cancelled. A cancelled read returns nothing. A cancelled
write is abandoned, not undone: its worker thread finishes the operation (each operation is
written so that it completes or fails as a whole), so after a cancelled write re-read to learn
the outcome, as after a ZooKeeper connection loss. :meth:`ZkState.close` is shielded.

Sessions: kazoo reconnects by itself. When ZooKeeper expired the session (the broker was
unreachable for longer than the session timeout) kazoo opens a new one; the ephemeral broker
registration and offline-replicas znode died with the old session, so :class:`ZkState`
re-creates them, then hints ``"session"``. Controllership is not restored: ``/controller``
died too, and a new election decides. Watches (kazoo ``ChildrenWatch``/``DataWatch``) survive
reconnects and session expiry.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar, TypeVarTuple, Unpack

import trio
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import KazooState  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

from . import _controller, _reassignment
from ._errors import CoordinationError, StaleState, TopicExists, UnknownTopic
from ._hints import Hints
from ._layout import (
    BROKER_IDS,
    CLUSTER_ID,
    CONFIG_CHANGE_PREFIX,
    CONFIG_TOPICS,
    PERSISTENT_PATHS,
    PRODUCER_ID_BLOCK,
    STRAIT_PATHS,
    TOPICS,
    BrokerRegistration,
    PartitionState,
    Reassignment,
    TopicAssignment,
    broker_path,
    decode_broker,
    decode_cluster_id,
    decode_partition_state,
    decode_producer_id_block_end,
    decode_topic,
    decode_topic_config,
    decode_topic_raw,
    delete_topic_path,
    encode_cluster_id,
    encode_config_change,
    encode_partition_state,
    encode_producer_id_block,
    encode_topic,
    encode_topic_config,
    new_uuid,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
    validate_assignment,
    validate_config,
    validate_partition,
    validate_reassignment,
    validate_states,
    validate_topic_name,
)
from ._offline import OfflineReplicas
from ._registration import BrokerRegistrar
from ._snapshot import ClusterSnapshot, read_snapshot
from ._transactions import failure as _failure
from ._watches import ChangeWatches

logger = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_WRITE_ATTEMPTS = 5  # read-modify-write loops that only race with znodes appearing/vanishing
_CLAIM_ATTEMPTS = 50  # producer id blocks: every broker claims from the same znode
_MAX_PRODUCER_ID = 2**63 - 1


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (the broker registration's ``timestamp``)."""
    return time.time_ns() // 1_000_000


def split_connect(connect: str) -> tuple[str, str]:
    """Split ``host:port[,host:port...][/chroot]`` into hosts and chroot (``""`` when none).

    Raises:
        ValueError: naming ``connect`` when it has no hosts or an empty chroot segment.
    """
    hosts, slash, chroot = connect.partition("/")
    if not hosts.strip() or any(not h.strip() for h in hosts.split(",")):
        raise ValueError(f"zookeeper.connect {connect!r} names no host (expected host:port[,host:port][/chroot])")
    chroot = chroot.rstrip("/")
    if slash and chroot and any(not part for part in chroot.split("/")):
        raise ValueError(f"zookeeper.connect {connect!r} has an empty path segment in its chroot")
    return hosts, f"/{chroot}" if chroot else ""


class ZkState:
    """The cluster state of one site, in the ZooKeeper named by ``connect`` (``zookeeper.connect``).

    Use ``async with ZkState(connect) as zk:`` or :meth:`start` / :meth:`close`. One trio run
    per instance. Errors: the subclasses of :class:`CoordinationError` named per method; any
    other ZooKeeper failure (connection loss, closed session) is a :class:`CoordinationError`
    naming the operation and the connect string. Invalid arguments raise ``ValueError``.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        """Nothing connects until :meth:`start`.

        Raises:
            ValueError: ``connect`` is malformed, or a timeout is not positive.
        """
        self._hosts, self._chroot = split_connect(connect)
        if session_timeout_ms <= 0 or connection_timeout_ms <= 0:
            raise ValueError(
                f"ZooKeeper timeouts must be positive: session {session_timeout_ms} ms, "
                f"connection {connection_timeout_ms} ms"
            )
        self.connect = connect
        self._session_timeout = session_timeout_ms / 1000
        self._connection_timeout = connection_timeout_ms / 1000
        # Command retries for idempotent reads only; copied per call (KazooRetry is stateful).
        self._read_retry = KazooRetry(max_tries=5, delay=0.05, max_delay=1.0)
        self._client: Any = None  # KazooClient, set by start()
        self._hints = Hints()
        self._closed = False
        self._clock_ms = clock_ms
        self._registrar = BrokerRegistrar(clock_ms)
        self._offline = OfflineReplicas()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, create the chroot and Kafka's persistent paths if missing, and set the watches.

        Raises:
            CoordinationError: already started or closed; no session within the connection
                timeout (the message names the connect string).
        """
        if self._client is not None or self._closed:
            raise CoordinationError(f"ZkState({self.connect!r}) was started before; use a new ZkState")
        self._hints.bind(trio.lowlevel.current_trio_token())
        deadline = trio.current_time() + self._connection_timeout
        try:
            if self._chroot:
                await self._ensure_chroot(deadline)
            client = self._new_client(self._hosts + self._chroot)
            client.add_listener(self._on_state)
            self._client = client
            await self._connect(client, deadline)
            await self._run("initialise", self._initialise_sync)
        except BaseException:
            self._closed = True
            self._hints.close()
            if self._client is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(_stop_quietly, self._client)
            raise

    async def close(self) -> None:
        """Delete our broker registration, end the session and close the hint channel. Idempotent.

        Shielded from cancellation; bounded by kazoo's own stop timeout.
        """
        if self._closed:
            return
        self._closed = True
        client = self._client
        try:
            if client is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self._close_sync, client)
        finally:
            self._hints.close()

    async def __aenter__(self) -> ZkState:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def events(self) -> trio.MemoryReceiveChannel[str]:
        """Hints that something changed; re-read the named state when one arrives.

        ``"topics"`` (a topic was created or deleted), ``"topic:<name>"`` (its assignment changed
        or it was deleted), ``"config:<name>"`` (its config znode appeared, changed or vanished),
        ``"brokers"`` (a broker registered or went away), ``"states"`` (the leader/ISR state of
        some partition was written or deleted), ``"controller"`` (``/controller`` appeared,
        changed or vanished), ``"reassignment"`` (a reassignment started, progressed or ended),
        ``"offline"`` (some broker's offline replicas changed), ``"session"`` (the session
        expired and a new one was opened: anything may have changed meanwhile; our registration
        and offline replicas are restored).
        Hints from before :meth:`start` returned are not sent: read the state after starting.
        Each hint is queued at most once until read. Always the same channel, meant for one
        reader; it ends after :meth:`close`.
        """
        return self._hints.receive_channel

    # -- cluster id and brokers ---------------------------------------------------------------

    async def cluster_id(self) -> str:
        """The cluster id in ``/cluster/id``, created on first use; concurrent creators agree on one."""
        return await self._run("read or create the cluster id", self._cluster_id_sync)

    async def register_broker(self, reg: BrokerRegistration) -> None:
        """Create our ephemeral ``/brokers/ids/<id>`` (or update it if this session holds it).

        It is re-created automatically after a session expiry and deleted by :meth:`close`.

        Raises:
            BrokerIdInUse: another session holds that broker id.
            ValueError: this ZkState already registered a different broker id.
        """
        await self._run(f"register broker {reg.broker_id}", self._registrar.register, self._client, reg)

    async def brokers(self) -> dict[int, BrokerRegistration]:
        """The live brokers, by broker id (ascending)."""
        return await self._run("list brokers", self._brokers_sync)

    async def claim_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Claim the next ``size`` producer ids for ``broker_id``; returns ``(first, last)``, inclusive.

        Kafka's scheme: ``/latest_producer_id_block`` holds the last block claimed by any broker,
        and the next block starts after it, written with compare-and-set (retried on a lost race).
        Ids are never handed out twice, across brokers and restarts.

        Raises:
            ValueError: ``size`` is not positive or ``broker_id`` is negative.
            CoordinationError: the id space is exhausted, or the race kept being lost.
        """
        if size <= 0 or broker_id < 0:
            raise ValueError(f"cannot claim {size} producer ids for broker {broker_id}")
        return await self._run(
            f"claim {size} producer ids for broker {broker_id}", self._claim_producer_id_block_sync, broker_id, size
        )

    # -- topics -------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: dict[int, tuple[int, ...]],
        config: dict[str, str],
        states: dict[int, PartitionState] | None = None,
    ) -> TopicAssignment:
        """Create a topic: its config, its assignment (with a new topic id), and partition states.

        The three are written in one ZooKeeper transaction, config first as Kafka's AdminZkClient
        orders them, so a watcher never sees a topic without its config, and a failed create
        changes nothing (Kafka's overwrites the config of a topic that already exists).

        Raises:
            TopicExists: ``name`` already has an assignment.
            ValueError: invalid name; partitions not numbered 0..n-1, or a replica list empty,
                negative or with duplicates; a state for a partition not in ``partitions``.
        """
        validate_topic_name(name)
        validate_assignment(name, partitions, first=0)
        validate_states(name, states or {}, partitions)
        validate_config(name, config)
        return await self._run(
            f"create topic {name!r}", self._create_topic_sync, name, dict(partitions), dict(config), dict(states or {})
        )

    async def topics(self) -> dict[str, TopicAssignment]:
        """Every topic's assignment, by name (sorted)."""
        return await self._run("list topics", self._topics_sync)

    async def topic(self, name: str) -> TopicAssignment | None:
        """One topic's assignment, or None if it does not exist."""
        validate_topic_name(name)
        return await self._run(f"read topic {name!r}", self._topic_sync, name)

    async def add_partitions(
        self, name: str, added: dict[int, tuple[int, ...]], states: dict[int, PartitionState] | None = None
    ) -> TopicAssignment:
        """Append partitions (numbered on from the current count) with a versioned write.

        The assignment and the new partition states are written in one transaction that fails if
        the assignment changed since it was read.

        Raises:
            UnknownTopic: no such topic.
            StaleState: the assignment changed concurrently (re-read and retry).
            ValueError: ``added`` does not continue the numbering, or bad replica lists/states.
        """
        validate_topic_name(name)
        if not added:
            raise ValueError(f"topic {name!r}: no partitions to add")
        validate_states(name, states or {}, added)
        return await self._run(
            f"add partitions to {name!r}", self._add_partitions_sync, name, dict(added), dict(states or {})
        )

    async def delete_topic(self, name: str) -> None:
        """Delete the topic's assignment, partition states and config (recursively).

        Raises:
            UnknownTopic: no such topic.
        """
        validate_topic_name(name)
        await self._run(f"delete topic {name!r}", self._delete_topic_sync, name)

    # -- topic configs ------------------------------------------------------------------------

    async def topic_config(self, name: str) -> dict[str, str]:
        """The topic's config overrides; ``{}`` when it has none (or does not exist)."""
        validate_topic_name(name)
        return await self._run(f"read config of {name!r}", self._topic_config_sync, name)

    async def all_topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic config znode, by topic name (sorted)."""
        return await self._run("list topic configs", self._all_topic_configs_sync)

    async def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        """Replace the topic's config overrides, then post a ``/config/changes`` notification.

        Raises:
            UnknownTopic: no such topic.
        """
        validate_topic_name(name)
        validate_config(name, config)
        await self._run(f"set config of {name!r}", self._set_topic_config_sync, name, dict(config))

    # -- partition state ----------------------------------------------------------------------

    async def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """Leader/ISR of one partition with the znode version, or None if it has no state."""
        validate_topic_name(topic)
        validate_partition(topic, partition)
        return await self._run(f"read state of {topic}-{partition}", self._partition_state_sync, topic, partition)

    async def set_partition_state(self, topic: str, partition: int, state: PartitionState) -> int:
        """Compare-and-set the partition state: create it when ``state.version`` is -1, else
        replace it only if the znode is still at ``state.version``. Returns the new version.

        Raises:
            StaleState: the znode exists (create) or moved past ``state.version`` (update).
            UnknownTopic: the topic does not exist.
        """
        validate_topic_name(topic)
        validate_partition(topic, partition)
        return await self._run(
            f"write state of {topic}-{partition}", self._set_partition_state_sync, topic, partition, state
        )

    async def set_assignment(self, topic: str, partitions: dict[int, tuple[int, ...]], version: int) -> int:
        """Replace the topic's replica assignment if its znode is still at ``version`` (the
        :attr:`TopicAssignment.version` it was read at); returns the new version.

        The topic id and unknown keys are kept; ``adding_replicas``/``removing_replicas`` are
        emptied (the new lists are the whole truth). The partitions must be exactly the topic's
        (use :meth:`add_partitions` to add some).

        Raises:
            StaleState: the assignment changed since it was read at ``version``.
            UnknownTopic: no such topic.
            ValueError: invalid name or version; partitions not numbered 0..n-1 or not the topic's;
                a replica list empty, negative or with duplicates.
        """
        validate_topic_name(topic)
        validate_assignment(topic, partitions, first=0)
        if version < 0:
            raise ValueError(f"topic {topic!r}: assignment version {version} is negative")
        return await self._run(
            f"set the assignment of {topic!r}", self._set_assignment_sync, topic, dict(partitions), version
        )

    # -- controller -----------------------------------------------------------------------------

    async def elect_controller(self, broker_id: int) -> int | None:
        """Try to become controller: create the ephemeral ``/controller`` and bump
        ``/controller_epoch`` in one transaction. Returns the new controller epoch, or None when
        another broker holds ``/controller``.

        No two elections get the same epoch, and epochs only grow. If this session already is
        the controller as ``broker_id`` (say, a retry after a lost reply), returns the current
        epoch. Controllership ends with the session (or :meth:`resign_controller`).

        Raises:
            ValueError: ``broker_id`` is negative.
            MalformedZnode: ``/controller_epoch`` is not a decimal number.
        """
        _check_broker_id(broker_id)
        return await self._run(
            f"elect broker {broker_id} controller", _controller.elect, self._client, broker_id, self._clock_ms()
        )

    async def controller(self) -> tuple[int, int] | None:
        """``(controller broker id, controller epoch)``, or None while there is no controller."""
        current = await self._run("read the controller", self._read, _controller.read, self._client)
        return None if current is None else current[:2]

    async def resign_controller(self, broker_id: int) -> bool:
        """Delete ``/controller`` if this session holds it as ``broker_id``; True if it did.

        Anyone else's ``/controller`` is left alone (returns False).
        """
        _check_broker_id(broker_id)
        return await self._run(f"resign controller {broker_id}", _controller.resign, self._client, broker_id)

    # -- everything at once -----------------------------------------------------------------------

    async def snapshot(self) -> ClusterSnapshot:
        """Brokers, topics, their configs and partition states, the controller, the reassignment
        and the offline replicas, read in one worker thread with pipelined reads (see
        :class:`ClusterSnapshot`). A topic deleted during the read is left out."""
        return await self._run("read a cluster snapshot", self._read, read_snapshot, self._client)

    # -- partition reassignment -----------------------------------------------------------------

    async def start_reassignment(
        self, partitions: Mapping[tuple[str, int], Iterable[int]], throttle_bytes_per_s: int | None = None
    ) -> Reassignment:
        """Create ``/admin/reassign_partitions``: move each ``(topic, partition)`` to its new
        replica list (preferred leader first). Returns what was written.

        Created only if every topic still has the assignment it was checked against (one
        transaction), so a reassignment never names a deleted topic or partition.

        Raises:
            ReassignmentInProgress: a reassignment is running (one at a time).
            UnknownTopic: a topic does not exist.
            ValueError: naming the bad entry: no partitions, an invalid name, a partition the
                topic does not have, a replica list empty, negative or with duplicates; a
                throttle that is not a positive integer.
        """
        wanted = {(topic, partition): tuple(replicas) for (topic, partition), replicas in partitions.items()}
        validate_reassignment(wanted, throttle_bytes_per_s)
        return await self._run(
            f"start reassigning {len(wanted)} partitions",
            _reassignment.start,
            self._client,
            wanted,
            throttle_bytes_per_s,
        )

    async def reassignment(self) -> Reassignment | None:
        """The reassignment in progress, or None."""
        return await self._run("read the reassignment", self._read, _reassignment.read, self._client)

    async def complete_reassignment(self, topic: str, partition: int) -> Reassignment | None:
        """Remove ``(topic, partition)`` from the reassignment in progress (compare-and-set,
        retried on a lost race), deleting the znode when it was the last. Returns what is left,
        None when nothing is. Removing an entry that is not there changes nothing."""
        validate_topic_name(topic)
        validate_partition(topic, partition)
        return await self._run(
            f"complete the reassignment of {topic}-{partition}", _reassignment.complete, self._client, topic, partition
        )

    # -- offline replicas -----------------------------------------------------------------------

    async def set_offline_replicas(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        """Publish the replicas of ``broker_id`` on failed log dirs, replacing what was published.

        Ephemeral ``/strait/offline_replicas/<broker_id>``: it ends with the session and is
        re-created after a session expiry; an empty ``partitions`` deletes it.

        Raises:
            BrokerIdInUse: another session holds that broker's znode.
            ValueError: a negative broker id, an invalid topic name or partition.
        """
        _check_broker_id(broker_id)
        wanted = frozenset((topic, partition) for topic, partition in partitions)
        for topic, partition in wanted:
            validate_topic_name(topic)
            validate_partition(topic, partition)
        await self._run(
            f"publish offline replicas of broker {broker_id}", self._offline.publish, self._client, broker_id, wanted
        )

    # -- plumbing -----------------------------------------------------------------------------

    async def _run(self, what: str, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:  # noqa: UP044
        if self._closed or self._client is None:
            state = "closed" if self._closed else "not started"
            raise CoordinationError(f"ZkState({self.connect!r}) is {state}; cannot {what}")
        try:
            return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        except KazooException as exc:
            raise CoordinationError(
                f"ZooKeeper {self.connect}: {what} failed: {type(exc).__name__} {exc}".rstrip()
            ) from exc

    def _new_client(self, hosts: str) -> Any:
        return KazooClient(
            hosts=hosts,
            timeout=self._session_timeout,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
            command_retry=KazooRetry(max_tries=5, delay=0.05, backoff=2, max_delay=1.0),
        )

    async def _connect(self, client: Any, deadline: float) -> None:
        """Start ``client`` and wait (in trio, cancellably) until it has a session."""
        connected = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def on_state(state: str) -> bool:
            if state != KazooState.CONNECTED:
                return False
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(connected.set)
            return True  # one-shot: kazoo removes the listener

        client.add_listener(on_state)
        client.start_async()
        with trio.move_on_at(deadline):
            await connected.wait()
        if not connected.is_set():
            raise CoordinationError(
                f"could not connect to ZooKeeper at {self.connect} within {self._connection_timeout:g} s"
            )

    async def _ensure_chroot(self, deadline: float) -> None:
        """Create the chroot with a short-lived session outside it (kazoo needs it to exist)."""
        client = self._new_client(self._hosts)
        try:
            await self._connect(client, deadline)
            await trio.to_thread.run_sync(client.ensure_path, self._chroot, abandon_on_cancel=True)
        except KazooException as exc:
            raise CoordinationError(
                f"ZooKeeper {self.connect}: creating chroot {self._chroot} failed: {exc!r}"
            ) from exc
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_stop_quietly, client)

    def _initialise_sync(self) -> None:
        client = self._client
        for path in PERSISTENT_PATHS + STRAIT_PATHS:
            client.ensure_path(path)
        self._registrar.after_connect(client)  # notes the first session (also done on kazoo's thread)
        ChangeWatches(client, self._hints, lambda: self._closed).start()

    def _close_sync(self, client: Any) -> None:
        self._offline.close()
        self._registrar.deregister(client)
        _stop_quietly(client)

    # -- kazoo-thread callbacks (never block, never touch trio but through Hints.post) ---------

    def _on_state(self, state: str) -> None:
        """Connection listener (kazoo's connection thread): hand session changes to a kazoo worker."""
        if state == KazooState.CONNECTED and not self._closed:
            self._client.handler.spawn(self._after_connect)

    def _after_connect(self) -> None:
        """Kazoo worker thread: restore the ephemerals if needed; hint ``"session"`` for a new session."""
        new_session = self._registrar.after_connect(self._client)
        self._offline.after_connect(self._client)
        if new_session:
            self._hints.post("session")

    # -- the operations, each run whole in one worker thread ----------------------------------

    def _read(self, fn: Callable[..., T], *args: object) -> T:
        return self._read_retry.copy()(fn, *args)  # type: ignore[no-any-return]

    def _cluster_id_sync(self) -> str:
        client = self._client
        try:
            data, _ = self._read(client.get, CLUSTER_ID)
            return decode_cluster_id(data)
        except NoNodeError:
            pass
        with contextlib.suppress(NodeExistsError):  # another creator won; everyone reads the winner's id
            client.create(CLUSTER_ID, encode_cluster_id(new_uuid()), makepath=True)
        data, _ = self._read(client.get, CLUSTER_ID)
        return decode_cluster_id(data)

    def _claim_producer_id_block_sync(self, broker_id: int, size: int) -> tuple[int, int]:
        client = self._client
        for _ in range(_CLAIM_ATTEMPTS):
            try:
                data, stat = self._read(client.get, PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = None, None
            previous_end = decode_producer_id_block_end(data)
            first = 0 if previous_end is None else previous_end + 1
            last = first + size - 1
            if last > _MAX_PRODUCER_ID:
                raise CoordinationError(f"producer ids are exhausted: the last block claimed ends at {previous_end}")
            block = encode_producer_id_block(broker_id, first, last)
            try:
                if stat is None:
                    client.create(PRODUCER_ID_BLOCK, block)
                else:
                    client.set(PRODUCER_ID_BLOCK, block, version=stat.version)
                return first, last
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker claimed a block first: claim the one after it
        raise CoordinationError(f"could not claim producer ids: {PRODUCER_ID_BLOCK} kept changing")

    def _brokers_sync(self) -> dict[int, BrokerRegistration]:
        client = self._client
        ids = sorted(int(c) for c in self._read(client.get_children, BROKER_IDS) if c.isdigit())
        pending = [(broker_id, client.get_async(broker_path(broker_id))) for broker_id in ids]
        brokers = {}
        for broker_id, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue  # went away while we listed
            brokers[broker_id] = decode_broker(broker_id, data)
        return brokers

    def _create_topic_sync(
        self,
        name: str,
        partitions: dict[int, tuple[int, ...]],
        config: dict[str, str],
        states: dict[int, PartitionState],
    ) -> TopicAssignment:
        client = self._client
        topic_id = new_uuid()
        for _ in range(_WRITE_ATTEMPTS):
            if client.exists(topic_path(name)):
                raise TopicExists(name)
            config_stat = client.exists(topic_config_path(name))
            tx = client.transaction()
            if config_stat is None:
                tx.create(topic_config_path(name), encode_topic_config(config))
            else:  # left over, or set before the topic: replace it unless it changes meanwhile
                tx.set_data(topic_config_path(name), encode_topic_config(config), version=config_stat.version)
            tx.create(topic_path(name), encode_topic(topic_id, partitions))
            _add_state_creates(tx, name, states, partitions_exist=False)
            failure = _failure(tx.commit())
            if failure is None:
                return TopicAssignment(
                    name=name, topic_id=topic_id, partitions=dict(sorted(partitions.items())), version=0
                )
            index, exc = failure
            if index == 1 and isinstance(exc, NodeExistsError):
                raise TopicExists(name)
            if index == 0 and isinstance(exc, (NodeExistsError, NoNodeError, BadVersionError)):
                continue  # the config znode appeared, vanished or changed: look again
            raise exc
        raise CoordinationError(f"could not create topic {name!r}: {topic_config_path(name)} kept changing")

    def _topics_sync(self) -> dict[str, TopicAssignment]:
        client = self._client
        names = sorted(self._read(client.get_children, TOPICS))
        pending = [(name, client.get_async(topic_path(name))) for name in names]
        topics = {}
        for name, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            topics[name] = decode_topic(name, data, stat.version)
        return topics

    def _topic_sync(self, name: str) -> TopicAssignment | None:
        try:
            data, stat = self._read(self._client.get, topic_path(name))
        except NoNodeError:
            return None
        return decode_topic(name, data, stat.version)

    def _add_partitions_sync(
        self, name: str, added: dict[int, tuple[int, ...]], states: dict[int, PartitionState]
    ) -> TopicAssignment:
        client = self._client
        path = topic_path(name)
        try:
            data, stat = self._read(client.get, path)
        except NoNodeError:
            raise UnknownTopic(name) from None
        current = decode_topic(name, data, stat.version)
        validate_assignment(name, added, first=len(current.partitions))
        raw = decode_topic_raw(name, data)
        kept = {k: v for k, v in raw.items() if k not in ("version", "topic_id", "partitions")}
        merged = {**current.partitions, **added}
        topic_id = current.topic_id or new_uuid()  # topics from pre-2.8 Kafka get an id, as Kafka does
        tx = client.transaction()
        tx.set_data(path, encode_topic(topic_id, merged, kept), version=stat.version)
        _add_state_creates(tx, name, states, partitions_exist=client.exists(partitions_path(name)) is not None)
        results = tx.commit()
        failure = _failure(results)
        if failure is not None:
            index, exc = failure
            if index == 0 and isinstance(exc, NoNodeError):
                raise UnknownTopic(name)
            if index == 0 and isinstance(exc, BadVersionError):
                raise StaleState(path, stat.version)
            if isinstance(exc, NodeExistsError):
                raise StaleState(partitions_path(name), -1)
            raise exc
        return TopicAssignment(
            name=name, topic_id=topic_id, partitions=dict(sorted(merged.items())), version=results[0].version
        )

    def _delete_topic_sync(self, name: str) -> None:
        client = self._client
        if client.exists(topic_path(name)) is None:  # kazoo's recursive delete ignores a missing node
            raise UnknownTopic(name)
        for attempt in range(5):
            try:
                client.delete(topic_path(name), recursive=True)
                break
            except NotEmptyError:
                # A partition state was written while we deleted (a leader changing its ISR): again.
                if attempt == 4:
                    raise
        for path in (topic_config_path(name), delete_topic_path(name)):
            with contextlib.suppress(NoNodeError):
                client.delete(path, recursive=True)

    def _topic_config_sync(self, name: str) -> dict[str, str]:
        try:
            data, _ = self._read(self._client.get, topic_config_path(name))
        except NoNodeError:
            return {}
        return decode_topic_config(name, data)

    def _all_topic_configs_sync(self) -> dict[str, dict[str, str]]:
        client = self._client
        names = sorted(self._read(client.get_children, CONFIG_TOPICS))
        pending = [(name, client.get_async(topic_config_path(name))) for name in names]
        configs = {}
        for name, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue
            configs[name] = decode_topic_config(name, data)
        return configs

    def _set_topic_config_sync(self, name: str, config: dict[str, str]) -> None:
        client = self._client
        if client.exists(topic_path(name)) is None:
            raise UnknownTopic(name)
        path, data = topic_config_path(name), encode_topic_config(config)
        for _ in range(_WRITE_ATTEMPTS):
            try:
                client.set(path, data)
                break
            except NoNodeError:
                pass
            try:
                client.create(path, data)
                break
            except NodeExistsError:
                continue
        else:
            raise CoordinationError(f"could not write {path}: it kept appearing and vanishing")
        client.create(CONFIG_CHANGE_PREFIX, encode_config_change(name), sequence=True)

    def _partition_state_sync(self, topic: str, partition: int) -> PartitionState | None:
        try:
            data, stat = self._read(self._client.get, partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return decode_partition_state(topic, partition, data, stat.version)

    def _set_partition_state_sync(self, topic: str, partition: int, state: PartitionState) -> int:
        client = self._client
        path, data = partition_state_path(topic, partition), encode_partition_state(state)
        if state.version != -1:
            try:
                return int(client.set(path, data, version=state.version).version)
            except BadVersionError:
                raise StaleState(path, state.version) from None
            except NoNodeError:
                if client.exists(topic_path(topic)) is None:
                    raise UnknownTopic(topic) from None
                raise StaleState(path, state.version) from None
        # Parents one by one, never makepath: a deleted topic must not be resurrected as an empty znode.
        for parent in (partitions_path(topic), partition_path(topic, partition)):
            try:
                client.create(parent)
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopic(topic) from None
        try:
            client.create(path, data)
        except NodeExistsError:
            raise StaleState(path, -1) from None
        except NoNodeError:
            raise UnknownTopic(topic) from None
        return 0

    def _set_assignment_sync(self, topic: str, partitions: dict[int, tuple[int, ...]], version: int) -> int:
        client = self._client
        path = topic_path(topic)
        try:
            data, stat = self._read(client.get, path)
        except NoNodeError:
            raise UnknownTopic(topic) from None
        if stat.version != version:
            raise StaleState(path, version)
        current = decode_topic(topic, data, stat.version)
        if current.partitions.keys() != partitions.keys():
            raise ValueError(
                f"topic {topic!r}: the new assignment has partitions {sorted(partitions)}, the topic has "
                f"{sorted(current.partitions)}; use add_partitions to add partitions"
            )
        raw = decode_topic_raw(topic, data)
        kept = {k: v for k, v in raw.items() if k not in ("version", "topic_id", "partitions")}
        kept.update(adding_replicas={}, removing_replicas={})
        topic_id = current.topic_id or new_uuid()
        try:
            return int(client.set(path, encode_topic(topic_id, partitions, kept), version=version).version)
        except BadVersionError:
            raise StaleState(path, version) from None
        except NoNodeError:
            raise UnknownTopic(topic) from None


# -- module helpers ---------------------------------------------------------------------------


def _stop_quietly(client: Any) -> None:
    try:
        client.stop()
    except Exception as exc:  # stopping must not mask the error that got us here
        logger.warning("stopping the ZooKeeper client failed: %r", exc)
    try:
        client.close()
    except Exception as exc:
        logger.warning("closing the ZooKeeper client failed: %r", exc)


def _check_broker_id(broker_id: int) -> None:
    if broker_id < 0:
        raise ValueError(f"broker id {broker_id} is negative")


def _add_state_creates(tx: Any, topic: str, states: Mapping[int, PartitionState], *, partitions_exist: bool) -> None:
    if not states:
        return
    if not partitions_exist:
        tx.create(partitions_path(topic))
    for partition, state in sorted(states.items()):
        tx.create(partition_path(topic, partition))
        tx.create(partition_state_path(topic, partition), encode_partition_state(state))
