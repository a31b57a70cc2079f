"""Partition reassignment in Kafka's ZooKeeper layout: ``/admin/reassign_partitions``.

The znode holds every partition being moved with its target replica list. :func:`start` (the
``strait topics reassign`` tool and the admin HTTP API) creates it and refuses while one runs;
:func:`alter` (AlterPartitionReassignments, KIP-455) merges into a running one instead: it adds
partitions, replaces a partition's target, or cancels a partition's move by setting its target
back to its original replicas. Whoever carries out a partition's move removes its entry when
done (compare-and-set on the znode version, retried on a lost race); the last removal deletes
the znode. strait adds ``throttle_bytes_per_s`` and each entry's ``original_replicas`` to
Kafka's JSON (Kafka ignores keys it does not know).

All functions block (kazoo calls): run each in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

import enum
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
_ALTER_ATTEMPTS = 50  # as do completions and other admin clients' alters, and the controller moves topics


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
    names = sorted({topic for topic, _ in wanted})
    for _ in range(_START_ATTEMPTS):
        current = read(client)
        if current is not None:
            raise ReassignmentInProgress(tuple(current.partitions))
        reads = [(name, client.get_async(topic_path(name))) for name in names]
        checks: list[tuple[str, int]] = []
        originals: dict[tuple[str, int], tuple[NodeId, ...]] = {}
        for name, result in reads:
            try:
                topic_data, stat = result.get()
            except NoNodeError:
                raise UnknownTopic(name) from None
            known = decode_topic(name, topic_data, stat.version).partitions
            for topic, partition in sorted(wanted):
                if topic != name:
                    continue
                if partition not in known:
                    raise ValueError(
                        f"reassignment of {topic}-{partition}: topic {topic!r} has partitions "
                        f"0..{len(known) - 1}, not {partition}"
                    )
                originals[topic, partition] = known[partition]
            checks.append((name, stat.version))
        tx = client.transaction()
        tx.create(REASSIGN_PARTITIONS, encode_reassignment(wanted, throttle_bytes_per_s, originals))
        for name, version in checks:  # the originals are what the topics hold when the znode appears
            tx.check(topic_path(name), version)
        error = failure(tx.commit())
        if error is None:
            return Reassignment(dict(sorted(wanted.items())), throttle_bytes_per_s, 0, dict(sorted(originals.items())))
        index, exc = error
        if index == 0 and isinstance(exc, NoNodeError):
            client.ensure_path(ADMIN)  # someone removed /admin
        elif (index == 0 and not isinstance(exc, NodeExistsError)) or (
            index > 0 and not isinstance(exc, (BadVersionError, NoNodeError))
        ):
            raise exc
        # A reassignment started meanwhile, or a topic changed since we read it: look again.
    raise CoordinationError(f"could not start the reassignment: {REASSIGN_PARTITIONS} or its topics kept changing")


def complete(client: Any, topic: str, partition: int, target: Iterable[NodeId] | None = None) -> Reassignment | None:
    """Remove ``(topic, partition)`` from the reassignment in progress (compare-and-set,
    retried on a lost race), deleting the znode when it was the last. Returns what is left,
    None when nothing is. Removing an entry that is not there changes nothing.

    With ``target``, only an entry that still has that target is removed: a move that
    :func:`alter` gave a new target (or cancelled) after the caller read it stays, to be
    carried out from where the partition is now."""
    validate_topic_name(topic)
    validate_partition(topic, partition)
    expected = None if target is None else tuple(target)
    for _ in range(_COMPLETE_ATTEMPTS):
        current = read(client)
        if current is None:
            return None
        if expected is not None and current.partitions.get((topic, partition), expected) != expected:
            return current  # re-targeted meanwhile: not complete
        left = {key: replicas for key, replicas in current.partitions.items() if key != (topic, partition)}
        if len(left) == len(current.partitions):
            return current  # not (or no longer) part of it
        originals = {key: replicas for key, replicas in current.originals.items() if key in left}
        try:
            if not left:
                client.delete(REASSIGN_PARTITIONS, version=current.version)
                return None
            stat = client.set(
                REASSIGN_PARTITIONS,
                encode_reassignment(left, current.throttle_bytes_per_s, originals),
                version=current.version,
            )
        except (BadVersionError, NoNodeError):
            continue  # another entry completed meanwhile: remove ours from what is there now
        return Reassignment(left, current.throttle_bytes_per_s, int(stat.version), originals)
    raise CoordinationError(f"could not complete the reassignment of {topic}-{partition}: it kept changing")


class AlterOutcome(enum.Enum):
    """What :func:`alter` did with one partition."""

    STARTED = "started"  # a move to a new target was recorded (added, or its target replaced)
    CANCELLED = "cancelled"  # its target is now its original replicas (or, unknown, it stops where it is)
    UNKNOWN_PARTITION = "unknown partition"  # the topic or the partition does not exist
    NOT_IN_PROGRESS = "not in progress"  # a cancel of a partition that is not being moved


def alter(
    client: Any, changes: Mapping[tuple[str, int], tuple[NodeId, ...] | None]
) -> tuple[dict[tuple[str, int], AlterOutcome], Reassignment | None]:
    """Merge ``changes`` into ``/admin/reassign_partitions`` (creating it if absent): a replica
    list sets the partition's target (keeping the original of a move already running), None
    cancels its move. Returns each partition's outcome and what the znode holds afterwards.

    A cancelled partition's target becomes the replicas it had when its move started, so the
    controller moves it back there (the replicas only the cancelled target had leave once the
    original ones are all in the ISR), as Kafka's controller does; an entry written without
    ``original_replicas`` (by another tool) is removed instead, leaving the partition with the
    replicas it has at that moment, which no data is lost from.

    One compare-and-set on the znode together with a version check of every topic named, retried
    on a lost race, so entries added by others meanwhile are kept and no entry names a topic
    deleted since it was read.

    Raises:
        ValueError: an invalid topic name or partition, a replica list empty, negative or with
            duplicates (the caller answers those itself, before calling).
        CoordinationError: the znode or its topics kept changing.
    """
    for (topic, partition), replicas in changes.items():
        validate_topic_name(topic)
        validate_partition(topic, partition)
        if replicas is not None:
            validate_reassignment({(topic, partition): replicas}, None)
    names = sorted({topic for topic, _ in changes})
    for _ in range(_ALTER_ATTEMPTS):
        try:
            data, stat = client.get(REASSIGN_PARTITIONS)
            current: Reassignment | None = decode_reassignment(data, stat.version)
        except NoNodeError:
            current = None
        targets = dict(current.partitions) if current is not None else {}
        originals = dict(current.originals) if current is not None else {}
        outcomes: dict[tuple[str, int], AlterOutcome] = {}
        checks: list[tuple[str, int]] = []
        for name in names:
            try:
                topic_data, topic_stat = client.get(topic_path(name))
            except NoNodeError:
                outcomes.update({key: AlterOutcome.UNKNOWN_PARTITION for key in changes if key[0] == name})
                continue
            known = decode_topic(name, topic_data, topic_stat.version).partitions
            checks.append((name, topic_stat.version))
            for key, replicas in changes.items():
                if key[0] != name:
                    continue
                if key[1] not in known:
                    outcomes[key] = AlterOutcome.UNKNOWN_PARTITION
                elif replicas is not None:
                    if key not in targets:  # a new move: it starts from what the partition has now
                        originals[key] = known[key[1]]
                    targets[key] = tuple(replicas)
                    outcomes[key] = AlterOutcome.STARTED
                elif key not in targets:
                    outcomes[key] = AlterOutcome.NOT_IN_PROGRESS
                else:
                    if key in originals:
                        targets[key] = originals[key]
                    else:
                        del targets[key]
                    outcomes[key] = AlterOutcome.CANCELLED
        if current is not None and targets == current.partitions and originals == current.originals:
            return outcomes, current  # nothing to write (only errors)
        if current is None and not targets:
            return outcomes, None
        originals = {key: replicas for key, replicas in originals.items() if key in targets}
        throttle = current.throttle_bytes_per_s if current is not None else None
        tx = client.transaction()
        if current is None:
            tx.create(REASSIGN_PARTITIONS, encode_reassignment(targets, throttle, originals))
        elif not targets:
            tx.delete(REASSIGN_PARTITIONS, version=current.version)
        else:
            tx.set_data(REASSIGN_PARTITIONS, encode_reassignment(targets, throttle, originals), version=current.version)
        for name, version in checks:
            tx.check(topic_path(name), version)
        error = failure(tx.commit())
        if error is None:
            if not targets:
                return outcomes, None
            version = 0 if current is None else current.version + 1
            return outcomes, Reassignment(
                dict(sorted(targets.items())), throttle, version, dict(sorted(originals.items()))
            )
        index, exc = error
        if index == 0 and current is None and isinstance(exc, NoNodeError):
            client.ensure_path(ADMIN)  # someone removed /admin
        elif not isinstance(exc, (BadVersionError, NoNodeError, NodeExistsError)):
            raise exc
        # The znode or a topic changed since we read them: merge into what is there now.
    raise CoordinationError(f"could not alter the reassignment: {REASSIGN_PARTITIONS} or its topics kept changing")
