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
from ._read_cache import CacheView, ReadCache


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


def read_snapshot(client: Any, cache: ReadCache | None = None, *, full: bool = False) -> ClusterSnapshot:
    """Read the snapshot (blocking). Raises MalformedZnode for a znode that does not decode.

    With ``cache``, the topic assignments, topic configs and partition states that did not
    change since the last snapshot are taken from it instead of read (see :mod:`._read_cache`;
    ``full`` reads them all anyway); what this snapshot holds is kept in it for the next one.
    Snapshots with one cache must not overlap."""
    if cache is None:
        return _read(client, None)
    view = cache.begin(full=full)
    try:
        return _read(client, cache, view)
    except BaseException:
        cache.invalidate()  # its marks were taken: only a whole read is sure to see those changes
        raise


def _read(client: Any, cache: ReadCache | None, view: CacheView | None = None) -> ClusterSnapshot:
    kept: dict[str, Any] = {}

    def lookup(topic: str, path: str) -> Any:
        """A ``get_async`` of ``path``, or its cached value."""
        found = view.get(topic, path) if view is not None else None
        return _Cached(found) if found is not None else client.get_async(path)

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
    topics_read = [(n, lookup(n, topic_path(n)), lookup(n, topic_config_path(n))) for n in names]
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
        if isinstance(assignment, _Cached):
            topics[name] = kept[topic_path(name)] = assignment.value
        else:
            data, stat = _data(assignment)
            if stat is None:
                continue  # deleted since we listed it
            topics[name] = kept[topic_path(name)] = decode_topic(name, data, stat.version)
        if isinstance(config, _Cached):
            configs[name] = kept[topic_config_path(name)] = config.value
        else:
            data, _ = _data(config)
            configs[name] = kept[topic_config_path(name)] = decode_topic_config(name, data)

    # Round 3: the partition states.
    states_read = [
        ((name, p), path, lookup(name, path))
        for name, topic in topics.items()
        for p in topic.partitions
        for path in (partition_state_path(name, p),)
    ]
    states = {}
    missing: set[str] = set()
    for (name, p), path, result in states_read:
        if isinstance(result, _Cached):
            states[name, p] = kept[path] = result.value
            continue
        data, stat = _data(result)
        if stat is None:
            missing.add(name)
        else:
            states[name, p] = kept[path] = decode_partition_state(name, p, data, stat.version)

    # Round 4: a topic with a missing state may have been deleted since round 2; leave it out if so.
    checks = [(name, client.exists_async(topic_path(name))) for name in sorted(missing)]
    for name, result in checks:
        if result.get() is None:
            del topics[name], configs[name]
            states = {key: state for key, state in states.items() if key[0] != name}

    if cache is not None and view is not None:
        # Keep only values whose watch was set before they were read: another may be stale already.
        kept = {path: value for path, value in kept.items() if path in view.armed}
        deleted = [n for n in missing if n not in topics]
        if deleted:
            exact = {topic_path(n) for n in deleted} | {topic_config_path(n) for n in deleted}
            under = tuple(f"{topic_path(n)}/" for n in deleted)
            kept = {path: value for path, value in kept.items() if path not in exact and not path.startswith(under)}
        cache.end(view, kept)
    return ClusterSnapshot(
        brokers=brokers,
        topics=topics,
        configs=configs,
        states=states,
        controller=controller_value,
        reassignment=reassignment,
        offline_replicas=offline,
    )


class _Cached:
    """A value the snapshot takes from the cache instead of reading it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


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
