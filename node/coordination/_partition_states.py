"""Partition leader/ISR states and compare-and-set writes of a topic's replica assignment.

``/brokers/topics/<topic>/partitions/<p>/state``, persistent::

    {"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}

Every write is compare-and-set on the znode version (:attr:`PartitionState.version`, -1 for
"must not exist yet"), so two writers never both win. The parents ``partitions`` and
``partitions/<p>`` are created one by one, never with ``makepath``, so a write racing a topic
deletion cannot resurrect the topic as an empty znode. The assignment znode
``/brokers/topics/<topic>`` is described in :mod:`._topics`; :func:`set_assignment` replaces
its replica lists with compare-and-set too.

Blocking (kazoo calls): run each function in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

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
    validate_topic_name,
)
from ._reads import retried


def read(client: Any, topic: str, partition: int) -> PartitionState | None:
    """Leader/ISR of one partition with the znode version, or None if it has no state."""
    validate_topic_name(topic)
    validate_partition(topic, partition)
    try:
        data, stat = retried(client.get, partition_state_path(topic, partition))
    except NoNodeError:
        return None
    return decode_partition_state(topic, partition, data, stat.version)


def write(client: Any, topic: str, partition: int, state: PartitionState) -> int:
    """Compare-and-set the partition state: create it when ``state.version`` is -1, else
    replace it only if the znode is still at ``state.version``. Returns the new version.

    Raises:
        StaleState: the znode exists (create) or moved past ``state.version`` (update).
        UnknownTopic: the topic does not exist.
    """
    validate_topic_name(topic)
    validate_partition(topic, partition)
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


def add_creates(tx: Any, topic: str, states: Mapping[int, PartitionState], *, partitions_exist: bool) -> None:
    """Add to transaction ``tx`` the creation of each partition's state (and its parents)."""
    if not states:
        return
    if not partitions_exist:
        tx.create(partitions_path(topic))
    for partition, state in sorted(states.items()):
        tx.create(partition_path(topic, partition))
        tx.create(partition_state_path(topic, partition), encode_partition_state(state))


def set_assignment(client: Any, topic: str, partitions: Mapping[int, tuple[int, ...]], version: int) -> int:
    """Replace the topic's replica assignment if its znode is still at ``version`` (the
    :attr:`TopicAssignment.version` it was read at); returns the new version.

    The topic id and unknown keys are kept; ``adding_replicas``/``removing_replicas`` are
    emptied (the new lists are the whole truth). The partitions must be exactly the topic's
    (use ``add_partitions`` to add some).

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
    try:
        return int(client.set(path, encode_topic(topic_id, partitions, kept), version=version).version)
    except BadVersionError:
        raise StaleState(path, version) from None
    except NoNodeError:
        raise UnknownTopic(topic) from None
