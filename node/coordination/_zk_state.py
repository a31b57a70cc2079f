"""The cluster state of one site (Kafka's classic ZooKeeper layout) as async methods for trio.

:class:`ZkState` is a :class:`._session.ZkSession` plus the operations on the state, each
declared once from the blocking ``fn(client, ...)`` that does it; the subject modules hold
those functions, their docstrings (what each guarantees and raises) and their znode formats.
Threading, cancellation and session expiry: see :mod:`._session`.

The methods below are one line each: an :class:`._session.Operation` over a subject module's
function, or, where the session supplies an argument (the injected clock, the kept
ephemerals), a one-line ``await self.run(...)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import trio

from node.ids import NodeId

from . import _brokers, _cluster_id, _controller, _offline, _partition_states, _producer_ids, _reassignment, _topics
from ._errors import TopicExists
from ._layout import BrokerRegistration, PartitionState, TopicAssignment, partition_state_path
from ._partition_states import StateWrites
from ._session import Operation, ZkSession
from ._snapshot import ClusterSnapshot, read_snapshot
from ._topics import NewTopic


class ZkState(ZkSession):
    """The cluster state of one site, in the ZooKeeper named by ``connect`` (``zookeeper.connect``).

    Use ``async with ZkState(connect) as zk:`` or :meth:`start` / :meth:`close`. One trio run
    per instance. Errors: the subclasses of :class:`CoordinationError` each operation names;
    any other ZooKeeper failure (connection loss, closed session) is a
    :class:`CoordinationError` naming the operation and the connect string. Invalid arguments
    raise ``ValueError``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._snapshot_lock = trio.Lock()

    # -- cluster id, brokers, producer ids ------------------------------------------------------

    cluster_id = Operation("read or create the cluster id", _cluster_id.read_or_create)
    brokers = Operation("list brokers", _brokers.live)
    claim_producer_id_block = Operation("claim {size} producer ids for broker {broker_id}", _producer_ids.claim_block)

    async def register_broker(self, reg: BrokerRegistration) -> None:
        """Create our ephemeral ``/brokers/ids/<id>`` (or update it if this session holds it).

        It is re-created after a session expiry and deleted by :meth:`close`. Raises as
        :func:`._brokers.register`: ``BrokerIdInUse``, or ``ValueError`` for a second broker id.
        """
        await self.run(f"register broker {reg.broker_id}", _brokers.register, self.ephemerals, self.clock_ms, reg)

    # -- topics and their configs ---------------------------------------------------------------

    # Every write of a topic's znodes marks them in the snapshot cache (before and after: a re-read
    # after our own write must never take the old value, whatever the write's outcome).

    _create_topic = Operation("create topic {name!r}", _topics.create)
    _create_topics = Operation(lambda topics, **_: f"create {len(topics)} topics", _topics.create_many)
    topics = Operation("list topics", _topics.read_all)
    topic = Operation("read topic {name!r}", _topics.read)
    _add_partitions = Operation("add partitions to {name!r}", _topics.add_partitions)
    _delete_topic = Operation("delete topic {name!r}", _topics.delete)
    topic_config = Operation("read config of {name!r}", _topics.read_config)
    all_topic_configs = Operation("list topic configs", _topics.read_all_configs)
    _set_topic_config = Operation("set config of {name!r}", _topics.set_config)

    async def create_topic(
        self,
        name: str,
        partitions: Mapping[int, tuple[NodeId, ...]],
        config: Mapping[str, str],
        states: Mapping[int, PartitionState] | None = None,
    ) -> TopicAssignment:
        """:func:`._topics.create`."""
        with self._writing_topics([name]):
            return await self._create_topic(name, partitions, config, states)

    async def create_topics(self, topics: Sequence[NewTopic]) -> dict[str, TopicAssignment | TopicExists]:
        """:func:`._topics.create_many`."""
        with self._writing_topics(t.name for t in topics):
            return await self._create_topics(topics)

    async def add_partitions(
        self, name: str, added: Mapping[int, tuple[NodeId, ...]], states: Mapping[int, PartitionState] | None = None
    ) -> TopicAssignment:
        """:func:`._topics.add_partitions`."""
        with self._writing_topics([name]):
            return await self._add_partitions(name, added, states)

    async def delete_topic(self, name: str) -> None:
        """:func:`._topics.delete`."""
        with self._writing_topics([name]):
            await self._delete_topic(name)

    async def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """:func:`._topics.set_config`."""
        with self._writing_topics([name]):
            await self._set_topic_config(name, config)

    # -- partition states and assignments -------------------------------------------------------

    partition_state = Operation("read state of {topic}-{partition}", _partition_states.read)
    _set_partition_state = Operation("write state of {topic}-{partition}", _partition_states.write)
    _set_partition_states = Operation(
        lambda states, **_: f"write the states of {len(states)} partitions", _partition_states.write_many
    )
    _set_assignment = Operation("set the assignment of {topic!r}", _partition_states.set_assignment)

    async def set_partition_state(
        self, topic: str, partition: int, state: PartitionState, assignment_version: int | None = None
    ) -> int:
        """:func:`._partition_states.write`."""
        with self._writing_topics([topic]):
            return await self._set_partition_state(topic, partition, state, assignment_version)

    async def set_partition_states(self, states: Mapping[tuple[str, int], PartitionState]) -> StateWrites:
        """:func:`._partition_states.write_many`."""
        paths = [partition_state_path(topic, p) for topic, p in states]
        self.read_cache.mark(paths)
        try:
            return await self._set_partition_states(states)
        finally:
            self.read_cache.mark(paths)

    async def set_assignment(
        self,
        topic: str,
        partitions: Mapping[int, tuple[NodeId, ...]],
        version: int,
        states: Mapping[int, PartitionState] | None = None,
    ) -> int:
        """:func:`._partition_states.set_assignment`."""
        with self._writing_topics([topic]):
            return await self._set_assignment(topic, partitions, version, states)

    @contextlib.contextmanager
    def _writing_topics(self, names: Iterable[str]) -> Iterator[None]:
        names = list(names)
        for name in names:
            self.read_cache.mark_topic(name)
        try:
            yield
        finally:
            for name in names:
                self.read_cache.mark_topic(name)

    # -- controller -----------------------------------------------------------------------------

    async def elect_controller(self, broker_id: NodeId) -> int | None:
        """:func:`._controller.elect` as ``broker_id``, timestamped now by the injected clock."""
        return await self.run(f"elect broker {broker_id} controller", _controller.elect, broker_id, self.clock_ms())

    controller = Operation("read the controller", _controller.current, retry=True)
    resign_controller = Operation("resign controller {broker_id}", _controller.resign)

    # -- everything at once -----------------------------------------------------------------------

    _snapshot = Operation("read a cluster snapshot", read_snapshot, retry=True)

    async def snapshot(self, *, incremental: bool = False, full: bool = False) -> ClusterSnapshot:
        """:func:`._snapshot.read_snapshot`. ``incremental`` takes the watched znodes that did not
        change since the last incremental snapshot from :attr:`read_cache` (``full`` reads them
        anyway and refills it); without it everything is read and the cache is left alone."""
        if not incremental:
            return await self._snapshot()
        async with self._snapshot_lock:  # snapshots with one cache must not overlap
            try:
                return await self._snapshot(self.read_cache, full=full)
            except BaseException:
                # Cancelled: the abandoned read may still be running; the next one reads everything.
                self.read_cache.invalidate()
                raise

    # -- partition reassignment -----------------------------------------------------------------

    start_reassignment = Operation(
        lambda partitions, **_: f"start reassigning {len(partitions)} partitions", _reassignment.start
    )
    reassignment = Operation("read the reassignment", _reassignment.read, retry=True)
    complete_reassignment = Operation("complete the reassignment of {topic}-{partition}", _reassignment.complete)
    alter_reassignment = Operation(
        lambda changes: f"alter the reassignment of {len(changes)} partitions", _reassignment.alter
    )

    # -- offline replicas -----------------------------------------------------------------------

    async def set_offline_replicas(self, broker_id: NodeId, partitions: Iterable[tuple[str, int]]) -> None:
        """:func:`._offline.publish`: kept across session expiry; an empty ``partitions`` deletes it."""
        await self.run(
            f"publish offline replicas of broker {broker_id}", _offline.publish, self.ephemerals, broker_id, partitions
        )
