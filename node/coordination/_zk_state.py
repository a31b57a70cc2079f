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

from collections.abc import Iterable

from node.ids import NodeId

from . import _brokers, _cluster_id, _controller, _offline, _partition_states, _producer_ids, _reassignment, _topics
from ._layout import BrokerRegistration
from ._session import Operation, ZkSession
from ._snapshot import read_snapshot


class ZkState(ZkSession):
    """The cluster state of one site, in the ZooKeeper named by ``connect`` (``zookeeper.connect``).

    Use ``async with ZkState(connect) as zk:`` or :meth:`start` / :meth:`close`. One trio run
    per instance. Errors: the subclasses of :class:`CoordinationError` each operation names;
    any other ZooKeeper failure (connection loss, closed session) is a
    :class:`CoordinationError` naming the operation and the connect string. Invalid arguments
    raise ``ValueError``.
    """

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

    create_topic = Operation("create topic {name!r}", _topics.create)
    topics = Operation("list topics", _topics.read_all)
    topic = Operation("read topic {name!r}", _topics.read)
    add_partitions = Operation("add partitions to {name!r}", _topics.add_partitions)
    delete_topic = Operation("delete topic {name!r}", _topics.delete)
    topic_config = Operation("read config of {name!r}", _topics.read_config)
    all_topic_configs = Operation("list topic configs", _topics.read_all_configs)
    set_topic_config = Operation("set config of {name!r}", _topics.set_config)

    # -- partition states and assignments -------------------------------------------------------

    partition_state = Operation("read state of {topic}-{partition}", _partition_states.read)
    set_partition_state = Operation("write state of {topic}-{partition}", _partition_states.write)
    set_partition_states = Operation(
        lambda states, **_: f"write the states of {len(states)} partitions", _partition_states.write_many
    )
    set_assignment = Operation("set the assignment of {topic!r}", _partition_states.set_assignment)

    # -- controller -----------------------------------------------------------------------------

    async def elect_controller(self, broker_id: NodeId) -> int | None:
        """:func:`._controller.elect` as ``broker_id``, timestamped now by the injected clock."""
        return await self.run(f"elect broker {broker_id} controller", _controller.elect, broker_id, self.clock_ms())

    controller = Operation("read the controller", _controller.current, retry=True)
    resign_controller = Operation("resign controller {broker_id}", _controller.resign)

    # -- everything at once -----------------------------------------------------------------------

    snapshot = Operation("read a cluster snapshot", read_snapshot, retry=True)

    # -- partition reassignment -----------------------------------------------------------------

    start_reassignment = Operation(
        lambda partitions, **_: f"start reassigning {len(partitions)} partitions", _reassignment.start
    )
    reassignment = Operation("read the reassignment", _reassignment.read, retry=True)
    complete_reassignment = Operation("complete the reassignment of {topic}-{partition}", _reassignment.complete)

    # -- offline replicas -----------------------------------------------------------------------

    async def set_offline_replicas(self, broker_id: NodeId, partitions: Iterable[tuple[str, int]]) -> None:
        """:func:`._offline.publish`: kept across session expiry; an empty ``partitions`` deletes it."""
        await self.run(
            f"publish offline replicas of broker {broker_id}", _offline.publish, self.ephemerals, broker_id, partitions
        )
