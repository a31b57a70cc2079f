"""Topics: their replica assignments and their config overrides.

=========================================  ================================================================
znode (persistent)                         data (JSON)
=========================================  ================================================================
``/brokers/topics/<topic>``                ``{"version":3,"topic_id":"<22-char base64url uuid>","partitions":
                                           {"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}``:
                                           replica lists of broker ids, the first the preferred leader;
                                           rewritten with compare-and-set on its version
``/config/topics/<topic>``                 ``{"version":1,"config":{"retention.ms":"86400000"}}``
``/config/changes/config_change_<seq>``    ``{"version":2,"entity_path":"topics/<topic>"}``, persistent
                                           sequential: one per config update, telling brokers to re-read it
``/admin/delete_topics/<topic>``           Kafka's deletion marker; removed with the topic if present
=========================================  ================================================================

Partition states live under the assignment (see :mod:`._partition_states`); creating a topic
or adding partitions writes the assignment and the new states in one transaction. Unknown
keys of an assignment written by another tool are kept on rewrite. Byte-level formats are
in :mod:`._layout`.

Blocking (kazoo calls): run each function in one worker thread (``ZkSession.run``). Each
validates its arguments first and raises ``ValueError`` naming the bad one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError  # type: ignore[import-untyped]

from node.ids import NodeId

from . import _partition_states
from ._errors import CoordinationError, StaleState, TopicExists, UnknownTopic
from ._layout import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_TOPICS,
    TOPICS,
    PartitionState,
    TopicAssignment,
    decode_topic,
    decode_topic_config,
    decode_topic_raw,
    delete_topic_path,
    encode_config_change,
    encode_topic,
    encode_topic_config,
    new_uuid,
    partitions_path,
    topic_config_path,
    topic_path,
    validate_assignment,
    validate_config,
    validate_states,
    validate_topic_name,
)
from ._reads import read_many, retried
from ._transactions import failure

_WRITE_ATTEMPTS = 5  # read-modify-write loops that only race with znodes appearing/vanishing
_DELETE_ATTEMPTS = 5  # a leader may write a partition state while the topic is deleted
#: Most topics :func:`create_many` has in flight at once (two lookups and a transaction each):
#: ZooKeeper throttles a connection with more outstanding requests than ``globalOutstandingLimit`` (1000).
CREATE_PIPELINE = 200


# -- assignments --------------------------------------------------------------------------------


def create(
    client: Any,
    name: str,
    partitions: Mapping[int, tuple[NodeId, ...]],
    config: Mapping[str, str],
    states: Mapping[int, PartitionState] | None = None,
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
        _partition_states.add_creates(tx, name, states or {}, partitions_exist=False)
        error = failure(tx.commit())
        if error is None:
            return TopicAssignment(name=name, topic_id=topic_id, partitions=dict(sorted(partitions.items())), version=0)
        index, exc = error
        if index == 1 and isinstance(exc, NodeExistsError):
            raise TopicExists(name)
        if index == 0 and isinstance(exc, (NodeExistsError, NoNodeError, BadVersionError)):
            continue  # the config znode appeared, vanished or changed: look again
        raise exc
    raise CoordinationError(f"could not create topic {name!r}: {topic_config_path(name)} kept changing")


@dataclass(frozen=True)
class NewTopic:
    """A topic for :func:`create_many`: as the arguments of :func:`create`."""

    name: str
    partitions: Mapping[int, tuple[NodeId, ...]]
    config: Mapping[str, str]
    states: Mapping[int, PartitionState]


def create_many(client: Any, topics: Sequence[NewTopic]) -> dict[str, TopicAssignment | TopicExists]:
    """Create each topic as :func:`create` does (its own transaction: config, assignment and
    partition states, all or nothing), with the transactions pipelined: every request is sent
    before any answer is awaited, so a CreateTopics of a hundred topics costs two round trips,
    not three per topic. Returns, by name, the new assignment or the ``TopicExists`` that
    refused it. A topic whose config znode changed between the look and the commit is created
    again on its own (:func:`create`).

    Raises:
        ValueError: any argument as :func:`create` (nothing is written), or a name given twice.
        kazoo's error for a transaction that failed otherwise (a connection loss, ...), once every
            answer is in: some topics may have been created; re-read.
    """
    if len({t.name for t in topics}) != len(topics):
        raise ValueError("a topic is named twice")
    for topic in topics:
        validate_topic_name(topic.name)
        validate_assignment(topic.name, topic.partitions, first=0)
        validate_states(topic.name, topic.states, topic.partitions)
        validate_config(topic.name, topic.config)
    done: dict[str, TopicAssignment | TopicExists] = {}
    for start in range(0, len(topics), CREATE_PIPELINE):
        done |= _create_pipelined(client, topics[start : start + CREATE_PIPELINE])
    return done


def _create_pipelined(client: Any, topics: Sequence[NewTopic]) -> dict[str, TopicAssignment | TopicExists]:
    looks = [
        (topic, client.exists_async(topic_path(topic.name)), client.exists_async(topic_config_path(topic.name)))
        for topic in topics
    ]
    done: dict[str, TopicAssignment | TopicExists] = {}
    commits = []
    for topic, assignment_look, config_look in looks:
        name = topic.name
        config_stat = config_look.get()
        if assignment_look.get() is not None:
            done[name] = TopicExists(name)
            continue
        topic_id = new_uuid()
        tx = client.transaction()
        if config_stat is None:
            tx.create(topic_config_path(name), encode_topic_config(topic.config))
        else:
            tx.set_data(topic_config_path(name), encode_topic_config(topic.config), version=config_stat.version)
        tx.create(topic_path(name), encode_topic(topic_id, topic.partitions))
        _partition_states.add_creates(tx, name, topic.states, partitions_exist=False)
        commits.append((topic, topic_id, tx.commit_async()))
    error: Exception | None = None
    again: list[NewTopic] = []
    for topic, topic_id, result in commits:
        name = topic.name
        try:
            failed = failure(result.get())
        except Exception as exc:  # every answer is awaited before the first such error is raised
            error = error or exc
            continue
        if failed is None:
            done[name] = TopicAssignment(
                name=name, topic_id=topic_id, partitions=dict(sorted(topic.partitions.items())), version=0
            )
        elif failed[0] == 1 and isinstance(failed[1], NodeExistsError):
            done[name] = TopicExists(name)
        elif failed[0] == 0 and isinstance(failed[1], (NodeExistsError, NoNodeError, BadVersionError)):
            again.append(topic)  # the config znode appeared, vanished or changed: alone, as create does
        else:
            error = error or failed[1]
    if error is not None:
        raise error
    for topic in again:
        try:
            done[topic.name] = create(client, topic.name, topic.partitions, topic.config, topic.states)
        except TopicExists as exc:
            done[topic.name] = exc
    return done


def read_all(client: Any) -> dict[str, TopicAssignment]:
    """Every topic's assignment, by name (sorted)."""
    names = sorted(retried(client.get_children, TOPICS))
    found = read_many(client, ((name, topic_path(name)) for name in names))
    return {name: decode_topic(name, data, stat.version) for name, data, stat in found}


def read(client: Any, name: str) -> TopicAssignment | None:
    """One topic's assignment, or None if it does not exist."""
    validate_topic_name(name)
    try:
        data, stat = retried(client.get, topic_path(name))
    except NoNodeError:
        return None
    return decode_topic(name, data, stat.version)


def add_partitions(
    client: Any,
    name: str,
    added: Mapping[int, tuple[NodeId, ...]],
    states: Mapping[int, PartitionState] | None = None,
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
    path = topic_path(name)
    try:
        data, stat = retried(client.get, path)
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
    partitions_exist = client.exists(partitions_path(name)) is not None
    _partition_states.add_creates(tx, name, states or {}, partitions_exist=partitions_exist)
    results = tx.commit()
    error = failure(results)
    if error is not None:
        index, exc = error
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


def delete(client: Any, name: str) -> None:
    """Delete the topic's assignment, partition states and config (recursively).

    Raises:
        UnknownTopic: no such topic.
    """
    validate_topic_name(name)
    if client.exists(topic_path(name)) is None:  # kazoo's recursive delete ignores a missing node
        raise UnknownTopic(name)
    for attempt in range(_DELETE_ATTEMPTS):
        try:
            client.delete(topic_path(name), recursive=True)
            break
        except NotEmptyError:
            # A partition state was written while we deleted (a leader changing its ISR): again.
            if attempt == _DELETE_ATTEMPTS - 1:
                raise
    for path in (topic_config_path(name), delete_topic_path(name)):
        with contextlib.suppress(NoNodeError):
            client.delete(path, recursive=True)


# -- config overrides ---------------------------------------------------------------------------


def read_config(client: Any, name: str) -> dict[str, str]:
    """The topic's config overrides; ``{}`` when it has none (or does not exist)."""
    validate_topic_name(name)
    try:
        data, _ = retried(client.get, topic_config_path(name))
    except NoNodeError:
        return {}
    return decode_topic_config(name, data)


def read_all_configs(client: Any) -> dict[str, dict[str, str]]:
    """Every topic config znode, by topic name (sorted)."""
    names = sorted(retried(client.get_children, CONFIG_TOPICS))
    found = read_many(client, ((name, topic_config_path(name)) for name in names))
    return {name: decode_topic_config(name, data) for name, data, _ in found}


def set_config(client: Any, name: str, config: Mapping[str, str]) -> None:
    """Replace the topic's config overrides, then post a ``/config/changes`` notification.

    Raises:
        UnknownTopic: no such topic.
    """
    validate_topic_name(name)
    validate_config(name, config)
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
