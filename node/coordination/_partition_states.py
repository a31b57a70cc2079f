"""Partition leader/ISR states and compare-and-set writes of a topic's replica assignment.

``/brokers/topics/<topic>/partitions/<p>/state``, persistent::

    {"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}

Every write is compare-and-set on the znode version (:attr:`PartitionState.version`, -1 for
"must not exist yet"), so two writers never both win. The parents ``partitions`` and
``partitions/<p>`` are created one by one, never with ``makepath``, so a write racing a topic
deletion cannot resurrect the topic as an empty znode. The assignment znode
``/brokers/topics/<topic>`` is described in :mod:`._topics`; :func:`set_assignment` replaces
its replica lists with compare-and-set too.

The state and the assignment are two znodes, and a snapshot may read them a few milliseconds
apart. Two writes therefore tie them together in one transaction: a leader's ISR change may
require the assignment to be still at the version it read its replica list at
(``assignment_version``), and completing a reassignment replaces the assignment together with
the partition states it shrinks (``set_assignment(..., states=...)``). So no ISR ever lands
naming a broker the assignment had already dropped.

The controller changes many states at once (a broker stopping or dying leads or follows
thousands of partitions): :func:`write_many` writes those compare-and-sets, each on its own
version, in transactions of :data:`MULTI_OPS` (ZooKeeper ``multi``), several in flight at once.
One request per few hundred writes instead of one each: 5,000 states took 0.8-1.2 s of kazoo's
time as single pipelined writes and 0.07-0.09 s as ten transactions (measured on this project's
2-core machine). A transaction is all or nothing, but a lost race must cost only its own
partition: when one fails, its lost write is reported and the others in it are written again one
by one (pipelined, each landing or losing on its own).

Blocking (kazoo calls): run each function in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.ids import NodeId

from ._errors import StaleState, UnknownTopic
from ._layout import (
    PartitionState,
    decode_partition_state,
    decode_topic,
    decode_topic_raw,
    encode_partition_state,
    encode_topic,
    new_uuid,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_path,
    validate_assignment,
    validate_partition,
    validate_states,
    validate_topic_name,
)
from ._reads import retried
from ._transactions import failure

#: Most single state writes :func:`write_many` keeps in flight at once: ZooKeeper throttles a
#: connection with more outstanding requests than its limit (``globalOutstandingLimit``, 1000 by default).
WRITE_PIPELINE = 500
#: State writes per transaction. Each is a path and a state of a few hundred bytes at most (a topic
#: name has up to 249 characters), so a transaction stays far below ZooKeeper's 1 MB request limit
#: (``jute.maxbuffer``).
MULTI_OPS = 500
#: Transactions :func:`write_many` keeps in flight at once.
MULTI_PIPELINE = 8


def read(client: Any, topic: str, partition: int) -> PartitionState | None:
    """Leader/ISR of one partition with the znode version, or None if it has no state."""
    validate_topic_name(topic)
    validate_partition(topic, partition)
    try:
        data, stat = retried(client.get, partition_state_path(topic, partition))
    except NoNodeError:
        return None
    return decode_partition_state(topic, partition, data, stat.version)


def write(client: Any, topic: str, partition: int, state: PartitionState, assignment_version: int | None = None) -> int:
    """Compare-and-set the partition state: create it when ``state.version`` is -1, else
    replace it only if the znode is still at ``state.version``. Returns the new version.

    With ``assignment_version`` (an update only), the same transaction also requires the
    topic's assignment znode to be still at that version: the writer's replica list is current.

    Raises:
        StaleState: the znode exists (create) or moved past ``state.version`` (update), or the
            assignment moved past ``assignment_version`` (the error names the path that moved).
        UnknownTopic: the topic does not exist.
        ValueError: an ``assignment_version`` with a create, or negative.
    """
    validate_topic_name(topic)
    validate_partition(topic, partition)
    path, data = partition_state_path(topic, partition), encode_partition_state(state)
    if assignment_version is not None:
        if state.version == -1 or assignment_version < 0:
            raise ValueError(
                f"{topic}-{partition}: an assignment check (version {assignment_version}) needs an existing "
                f"state and a version >= 0"
            )
        tx = client.transaction()
        tx.check(topic_path(topic), assignment_version)
        tx.set_data(path, data, version=state.version)
        results = tx.commit()
        _raise_failure(client, topic, results, [(topic_path(topic), assignment_version), (path, state.version)])
        return int(results[1].version)
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


@dataclass(frozen=True)
class StateWrites:
    """What :func:`write_many` did: the new znode version of each state that landed, by
    ``(topic, partition)``, and the partitions whose compare-and-set lost (their state moved past
    the version it was read at, or was deleted with its topic): re-read those and decide again."""

    versions: dict[tuple[str, int], int]
    lost: frozenset[tuple[str, int]]


def write_many(client: Any, states: Mapping[tuple[str, int], PartitionState]) -> StateWrites:
    """Replace each ``(topic, partition)``'s state, each only if its znode is still at that
    state's ``version``: in transactions of :data:`MULTI_OPS` writes, :data:`MULTI_PIPELINE` of them
    sent before any answer is awaited. Each write lands or loses on its own (this is not one
    transaction): the other writes of a transaction that one lost race failed are written again
    singly.

    Raises:
        ValueError: an invalid topic name or partition, or a state without a version to compare
            with (-1: creating states is :func:`write`'s or the topic creation's job); nothing is sent.
        kazoo's error for a write that failed otherwise than by losing its race (a connection
            loss, ...), once every answer of its round is in: some may have landed; re-read.
    """
    for (topic, partition), state in states.items():
        validate_topic_name(topic)
        validate_partition(topic, partition)
        if state.version < 0:
            raise ValueError(f"{topic}-{partition}: a batched state write needs the version it read, not -1")
    items = list(states.items())
    chunks = [items[start : start + MULTI_OPS] for start in range(0, len(items), MULTI_OPS)]
    versions: dict[tuple[str, int], int] = {}
    lost: set[tuple[str, int]] = set()
    again: list[tuple[tuple[str, int], PartitionState]] = []  # in a transaction another write failed
    error: Exception | None = None
    for start in range(0, len(chunks), MULTI_PIPELINE):
        pending = []
        for chunk in chunks[start : start + MULTI_PIPELINE]:
            tx = client.transaction()
            for key, state in chunk:
                tx.set_data(partition_state_path(*key), encode_partition_state(state), version=state.version)
            pending.append((chunk, tx.commit_async()))
        for chunk, result in pending:
            try:
                results = result.get()
            except Exception as exc:  # every answer is awaited before the first such error is raised
                error = error or exc
                continue
            failed = failure(results)
            if failed is None:
                versions.update((key, int(stat.version)) for (key, _), stat in zip(chunk, results, strict=True))
                continue
            index, cause = failed
            if isinstance(cause, (BadVersionError, NoNodeError)):
                lost.add(chunk[index][0])
            else:
                error = error or cause
            again.extend(item for i, item in enumerate(chunk) if i != index)
        if error is not None:
            raise error
    if again:
        singly = _write_each(client, again)
        versions.update(singly.versions)
        lost.update(singly.lost)
    return StateWrites(versions, frozenset(lost))


def _write_each(client: Any, items: list[tuple[tuple[str, int], PartitionState]]) -> StateWrites:
    """Each write on its own, :data:`WRITE_PIPELINE` in flight; raises as :func:`write_many`."""
    versions: dict[tuple[str, int], int] = {}
    lost: set[tuple[str, int]] = set()
    error: Exception | None = None
    for start in range(0, len(items), WRITE_PIPELINE):
        pending = [
            (key, client.set_async(partition_state_path(*key), encode_partition_state(state), version=state.version))
            for key, state in items[start : start + WRITE_PIPELINE]
        ]
        for key, result in pending:
            try:
                versions[key] = int(result.get().version)
            except (BadVersionError, NoNodeError):
                lost.add(key)
            except Exception as exc:  # every answer is awaited before the first such error is raised
                error = error or exc
        if error is not None:
            raise error
    return StateWrites(versions, frozenset(lost))


def add_creates(tx: Any, topic: str, states: Mapping[int, PartitionState], *, partitions_exist: bool) -> None:
    """Add to transaction ``tx`` the creation of each partition's state (and its parents)."""
    if not states:
        return
    if not partitions_exist:
        tx.create(partitions_path(topic))
    for partition, state in sorted(states.items()):
        tx.create(partition_path(topic, partition))
        tx.create(partition_state_path(topic, partition), encode_partition_state(state))


def set_assignment(
    client: Any,
    topic: str,
    partitions: Mapping[int, tuple[NodeId, ...]],
    version: int,
    states: Mapping[int, PartitionState] | None = None,
) -> int:
    """Replace the topic's replica assignment if its znode is still at ``version`` (the
    :attr:`TopicAssignment.version` it was read at); returns the new version.

    The topic id and unknown keys are kept; ``adding_replicas``/``removing_replicas`` are
    emptied (the new lists are the whole truth). The partitions must be exactly the topic's
    (use ``add_partitions`` to add some). ``states`` replaces those partitions' states in the
    same transaction, each compare-and-set on its own ``version``: all land or none does.

    Raises:
        StaleState: the assignment changed since it was read at ``version``, or one of the
            ``states`` since it was read (the error names the path).
        UnknownTopic: no such topic.
        ValueError: invalid name or version; partitions not numbered 0..n-1 or not the topic's;
            a replica list empty, negative or with duplicates; a state for a partition not in
            ``partitions`` or without a version to compare with.
    """
    validate_topic_name(topic)
    validate_assignment(topic, partitions, first=0)
    if version < 0:
        raise ValueError(f"topic {topic!r}: assignment version {version} is negative")
    states = dict(sorted((states or {}).items()))
    validate_states(topic, states, partitions)
    for p, state in states.items():
        if state.version < 0:
            raise ValueError(f"{topic}-{p}: a state replaced with the assignment needs its version, not -1")
    partitions = dict(partitions)
    path = topic_path(topic)
    try:
        data, stat = retried(client.get, path)
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
    tx = client.transaction()
    tx.set_data(path, encode_topic(topic_id, partitions, kept), version=version)
    versions = [(path, version)]
    for p, state in states.items():
        state_path = partition_state_path(topic, p)
        tx.set_data(state_path, encode_partition_state(state), version=state.version)
        versions.append((state_path, state.version))
    results = tx.commit()
    _raise_failure(client, topic, results, versions)
    return int(results[0].version)


def _raise_failure(client: Any, topic: str, results: list[Any], versions: list[tuple[str, int]]) -> None:
    """Raise what failed a transaction of versioned operations (``versions``: path and expected
    version of each, in order); return if it committed."""
    error = failure(results)
    if error is None:
        return
    index, exc = error
    if not isinstance(exc, (BadVersionError, NoNodeError)):
        raise exc
    if isinstance(exc, NoNodeError) and client.exists(topic_path(topic)) is None:
        raise UnknownTopic(topic)
    raise StaleState(*versions[index])
