"""Partition reassignment in Kafka's ZooKeeper layout: ``/admin/reassign_partitions``.

One reassignment runs at a time. Starting one creates the znode with every target replica
list; whoever carries out a partition's move removes its entry when done (compare-and-set on
the znode version, retried on a lost race); the last removal deletes the znode. strait adds
``throttle_bytes_per_s`` to Kafka's JSON (Kafka ignores keys it does not know).

All functions block (kazoo calls): run each in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.ids import NodeId

from ._errors import CoordinationError, ReassignmentInProgress, UnknownTopic
from ._layout import (
    ADMIN,
    REASSIGN_PARTITIONS,
    Reassignment,
    decode_reassignment,
    decode_topic,
    encode_reassignment,
    topic_path,
    validate_partition,
    validate_reassignment,
    validate_topic_name,
)
from ._transactions import failure

_START_ATTEMPTS = 5  # only races with topics changing (or a reassignment starting) meanwhile
_COMPLETE_ATTEMPTS = 50  # every partition's completion rewrites the same znode


def read(client: Any) -> Reassignment | None:
    """The reassignment in progress, or None."""
    try:
        data, stat = client.get(REASSIGN_PARTITIONS)
    except NoNodeError:
        return None
    return decode_reassignment(data, stat.version)


def start(
    client: Any, partitions: Mapping[tuple[str, int], Iterable[NodeId]], throttle_bytes_per_s: int | None = None
) -> Reassignment:
    """Create ``/admin/reassign_partitions``: move each ``(topic, partition)`` to its new
    replica list (preferred leader first). Returns what was written.

    Created in one transaction with a version check of every topic involved, so it never names
    a topic deleted (or a partition gone) since we looked.

    Raises:
        ReassignmentInProgress: a reassignment is running (one at a time).
        UnknownTopic: a topic does not exist.
        ValueError: naming the bad entry: no partitions, an invalid name, a partition the
            topic does not have, a replica list empty, negative or with duplicates; a
            throttle that is not a positive integer.
    """
    wanted = {(topic, partition): tuple(replicas) for (topic, partition), replicas in partitions.items()}
    validate_reassignment(wanted, throttle_bytes_per_s)
    data = encode_reassignment(wanted, throttle_bytes_per_s)
    names = sorted({topic for topic, _ in wanted})
    for _ in range(_START_ATTEMPTS):
        current = read(client)
        if current is not None:
            raise ReassignmentInProgress(tuple(current.partitions))
        reads = [(name, client.get_async(topic_path(name))) for name in names]
        tx = client.transaction()
        tx.create(REASSIGN_PARTITIONS, data)  # first: if it fails, that is the error reported
        for name, result in reads:
            try:
                topic_data, stat = result.get()
            except NoNodeError:
                raise UnknownTopic(name) from None
            known = decode_topic(name, topic_data, stat.version).partitions
            for topic, partition in sorted(wanted):
                if topic == name and partition not in known:
                    raise ValueError(
                        f"reassignment of {topic}-{partition}: topic {topic!r} has partitions "
                        f"0..{len(known) - 1}, not {partition}"
                    )
            tx.check(topic_path(name), stat.version)
        error = failure(tx.commit())
        if error is None:
            return Reassignment(dict(sorted(wanted.items())), throttle_bytes_per_s, version=0)
        index, exc = error
        if index == 0 and isinstance(exc, NoNodeError):
            client.ensure_path(ADMIN)  # someone removed /admin
        elif (index == 0 and not isinstance(exc, NodeExistsError)) or (
            index > 0 and not isinstance(exc, (BadVersionError, NoNodeError))
        ):
            raise exc
        # A reassignment started meanwhile, or a topic changed since we read it: look again.
    raise CoordinationError(f"could not start the reassignment: {REASSIGN_PARTITIONS} or its topics kept changing")


def complete(client: Any, topic: str, partition: int) -> Reassignment | None:
    """Remove ``(topic, partition)`` from the reassignment in progress (compare-and-set,
    retried on a lost race), deleting the znode when it was the last. Returns what is left,
    None when nothing is. Removing an entry that is not there changes nothing."""
    validate_topic_name(topic)
    validate_partition(topic, partition)
    for _ in range(_COMPLETE_ATTEMPTS):
        current = read(client)
        if current is None:
            return None
        left = {key: replicas for key, replicas in current.partitions.items() if key != (topic, partition)}
        if len(left) == len(current.partitions):
            return current  # not (or no longer) part of it
        try:
            if not left:
                client.delete(REASSIGN_PARTITIONS, version=current.version)
                return None
            stat = client.set(
                REASSIGN_PARTITIONS, encode_reassignment(left, current.throttle_bytes_per_s), version=current.version
            )
        except (BadVersionError, NoNodeError):
            continue  # another entry completed meanwhile: remove ours from what is there now
        return Reassignment(left, current.throttle_bytes_per_s, int(stat.version))
    raise CoordinationError(f"could not complete the reassignment of {topic}-{partition}: it kept changing")
