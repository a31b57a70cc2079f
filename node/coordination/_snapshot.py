"""One read of everything a broker needs from ZooKeeper: :class:`ClusterSnapshot`.

:func:`read_snapshot` pipelines its reads in rounds (each round's requests are all sent before
any answer is awaited), so a snapshot costs four or five round trips however many topics and
partitions there are:

1. the children of ``/brokers/ids``, ``/brokers/topics`` and ``/strait/offline_replicas``;
   ``/controller``, ``/controller_epoch``, ``/controller`` again (see :func:`._controller.read`)
   and ``/admin/reassign_partitions``;
2. every broker registration, topic assignment, topic config and offline-replicas znode;
3. the state of every partition in those assignments;
4. only when some state was missing: whether those topics still exist.

ZooKeeper answers one session's requests in order, but the snapshot is not atomic: it may mix
moments a few milliseconds apart. A topic deleted meanwhile is left out (round 4) instead of
failing the read; a broker or offline-replicas znode that vanished meanwhile is left out too.

Blocking: run :func:`read_snapshot` in one worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]

from node.ids import NodeId

from . import _controller
from ._layout import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    OFFLINE_REPLICAS,
    REASSIGN_PARTITIONS,
    TOPICS,
    BrokerRegistration,
    PartitionState,
    Reassignment,
    TopicAssignment,
    broker_path,
    decode_broker,
    decode_controller,
    decode_controller_epoch,
    decode_offline_replicas,
    decode_partition_state,
    decode_reassignment,
    decode_topic,
    decode_topic_config,
    offline_replicas_path,
    partition_state_path,
    topic_config_path,
    topic_path,
)


@dataclass(frozen=True)
class ClusterSnapshot:
    """The cluster state of one site as read by :meth:`ZkState.snapshot`.

    - ``brokers``: live broker registrations, by broker id (ascending);
    - ``topics``: assignments by topic name (sorted);
    - ``configs``: the config overrides of exactly the topics in ``topics`` (``{}`` for none);
    - ``states``: leader/ISR by ``(topic, partition)``, with znode versions for compare-and-set;
      a partition whose state was never written is absent;
    - ``controller``: ``(broker id, controller epoch)``, or None while there is no controller;
    - ``reassignment``: the partition reassignment in progress, or None;
    - ``offline_replicas``: per broker id, the partitions whose replicas on that broker are on a
      failed log dir (brokers without any are absent).
    """

    brokers: dict[NodeId, BrokerRegistration]
    topics: dict[str, TopicAssignment]
    configs: dict[str, dict[str, str]]
    states: dict[tuple[str, int], PartitionState]
    controller: tuple[NodeId, int] | None
    reassignment: Reassignment | None
    offline_replicas: dict[NodeId, frozenset[tuple[str, int]]]


def read_snapshot(client: Any) -> ClusterSnapshot:
    """Read the snapshot (blocking). Raises MalformedZnode for a znode that does not decode."""
    # Round 1: the lists, the controller and the reassignment.
    broker_ids = client.get_children_async(BROKER_IDS)
    topic_names = client.get_children_async(TOPICS)
    offline_ids = client.get_children_async(OFFLINE_REPLICAS)
    controller = client.get_async(CONTROLLER)
    controller_epoch = client.get_async(CONTROLLER_EPOCH)
    controller_again = client.exists_async(CONTROLLER)
    reassign = client.get_async(REASSIGN_PARTITIONS)

    # Round 2: one znode per name.
    brokers_read = [(i, client.get_async(broker_path(i))) for i in _ids(_children(broker_ids))]
    names = sorted(_children(topic_names))
    topics_read = [(n, client.get_async(topic_path(n)), client.get_async(topic_config_path(n))) for n in names]
    offline_read = [(i, client.get_async(offline_replicas_path(i))) for i in _ids(_children(offline_ids))]
    controller_value = _controller_of(client, controller, controller_epoch, controller_again)
    reassignment = None
    data, stat = _data(reassign)
    if stat is not None:
        reassignment = decode_reassignment(data, stat.version)

    brokers: dict[NodeId, BrokerRegistration] = {}
    for broker_id, result in brokers_read:
        data, stat = _data(result)
        if stat is not None:
            brokers[broker_id] = decode_broker(broker_id, data)
    offline: dict[NodeId, frozenset[tuple[str, int]]] = {}
    for broker_id, result in offline_read:
        data, stat = _data(result)
        if stat is not None:
            offline[broker_id] = decode_offline_replicas(broker_id, data)
    topics: dict[str, TopicAssignment] = {}
    configs: dict[str, dict[str, str]] = {}
    for name, assignment, config in topics_read:
        data, stat = _data(assignment)
        if stat is None:
            continue  # deleted since we listed it
        topics[name] = decode_topic(name, data, stat.version)
        data, _ = _data(config)
        configs[name] = decode_topic_config(name, data)

    # Round 3: the partition states.
    states_read = [
        ((name, p), client.get_async(partition_state_path(name, p)))
        for name, topic in topics.items()
        for p in topic.partitions
    ]
    states = {}
    missing: set[str] = set()
    for (name, p), result in states_read:
        data, stat = _data(result)
        if stat is None:
            missing.add(name)
        else:
            states[name, p] = decode_partition_state(name, p, data, stat.version)

    # Round 4: a topic with a missing state may have been deleted since round 2; leave it out if so.
    checks = [(name, client.exists_async(topic_path(name))) for name in sorted(missing)]
    for name, result in checks:
        if result.get() is None:
            del topics[name], configs[name]
            states = {key: state for key, state in states.items() if key[0] != name}

    return ClusterSnapshot(
        brokers=brokers,
        topics=topics,
        configs=configs,
        states=states,
        controller=controller_value,
        reassignment=reassignment,
        offline_replicas=offline,
    )


def _children(result: Any) -> list[str]:
    try:
        return list(result.get())
    except NoNodeError:
        return []


def _ids(children: list[str]) -> list[NodeId]:
    return sorted(NodeId(int(c)) for c in children if c.isdigit())


def _data(result: Any) -> tuple[bytes | None, Any]:
    """``(data, stat)`` of a ``get_async`` result; ``(None, None)`` when the znode does not exist."""
    try:
        data, stat = result.get()
    except NoNodeError:
        return None, None
    return data, stat


def _controller_of(client: Any, controller: Any, epoch: Any, again: Any) -> tuple[NodeId, int] | None:
    data, stat = _data(controller)
    epoch_data, epoch_stat = _data(epoch)
    later = again.get()
    if stat is None:
        return None
    if later is not None and later.czxid == stat.czxid and epoch_stat is not None:
        return decode_controller(data), decode_controller_epoch(epoch_data)
    return _controller.current(client)  # it changed while we read: read it on its own
