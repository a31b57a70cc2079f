"""Transactions a mirror copied that no coordinator will ever end: found, shown and aborted.

A mirror topic holds the source's transactional batches and markers at their offsets, and its
partitions keep the same producer state as the source's (``docs/transactions.md``, "Across
sites"). A transaction open at the source when the mirror stopped stays open on the target:
its coordinator is on the source site, and the target's own coordinators know nothing of the
source's transactional ids. Open, it holds the partition's last stable offset where it started,
so read_committed consumers on the promoted site would wait behind it for ever.

So a promote ends them the way Kafka's tools end a hanging transaction
(``kafka-transactions.sh find-hanging`` / ``abort``): DescribeProducers on each partition's
leader gives every producer with an open transaction (its producer id and epoch, the first offset
of the transaction, the coordinator epoch of its last marker), and WriteTxnMarkers writes an
ABORT marker with those values (``node.client.describe_producers`` / ``abort_transactions``).
This is the DR layer's job, through the Kafka protocol like every other failover step: the node
only keeps producer state and takes markers; which transactions a promote must abort, and when,
is a failover decision (only those the mirror copied, found while the topics are still sealed
mirrors, written once they are writable: a mirror topic refuses markers).

``status`` shows the same list before a promote (count, oldest first offset and age per topic):
what a promote would abort.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import trio

from node.client import (
    READ_UNCOMMITTED,
    ClientError,
    ProducerState,
    SiteClient,
    TxnAbort,
    abort_transactions,
    complete_batches,
    describe_producers,
    fetch_partition,
)
from node.protocol import ErrorCode
from storage.records import Offset

from .errors import FailoverError

REPORTED = 20  # transactions a promote lists in its journal (all are counted)
_RETRY_BACKOFF_S = 0.25
# Refusals that pass: a leader that has not seen the topic's new config yet (still a mirror to
# it), leadership moving, too few in-sync replicas for a moment.
_PASSING = frozenset(
    {
        ErrorCode.POLICY_VIOLATION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)


@dataclass(frozen=True)
class OpenTxn:
    """A producer's transaction open in one partition: where it starts and what ends it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int

    @classmethod
    def of(cls, topic: str, partition: int, state: ProducerState) -> OpenTxn:
        return cls(
            topic,
            partition,
            state.producer_id,
            state.producer_epoch,
            state.coordinator_epoch,
            state.txn_start_offset,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def open_transactions(site: SiteClient, topics: Mapping[str, int]) -> list[OpenTxn]:
    """Every transaction open in the partitions of ``topics`` (topic -> partition count), as their
    leaders' producer state has it, ordered by topic, partition and first offset.

    Raises:
        FailoverError: a partition's leader refused or could not be reached (names the site and
            the partition).
    """
    found: list[OpenTxn] = []
    for topic, count in sorted(topics.items()):
        try:
            states = await describe_producers(site, topic, list(range(count)))
        except ClientError as exc:
            raise FailoverError(f"site {site.name}: reading the producers of {topic!r}: {exc}") from None
        for partition, answer in sorted(states.items()):
            if isinstance(answer, ClientError):
                raise FailoverError(f"site {site.name}: reading the producers of {topic}-{partition}: {answer}")
            found += [OpenTxn.of(topic, partition, s) for s in answer if s.in_transaction]
    return sorted(found, key=lambda t: (t.topic, t.partition, t.first_offset, t.producer_id))


async def abort_mirrored(
    site: SiteClient, topics: Mapping[str, int], cut: Mapping[tuple[str, int], int], *, retry_s: float = 30.0
) -> dict[str, Any]:
    """Abort every transaction open in ``topics`` that began below the cut (``cut``: (topic,
    partition) -> the mirrored end): the ones the mirror copied. A transaction that began at or
    past the cut is the promoted site's own and is left alone, and so is a partition missing from
    the cut; one already aborted is no longer open, so running this again writes nothing twice.

    A refusal that passes (POLICY_VIOLATION from a leader that has not seen yet that the topic is
    no longer a mirror, a leader moving, too few in-sync replicas, an unreachable leader) is tried
    again, from a fresh DescribeProducers, for up to ``retry_s`` seconds.

    Returns ``aborted`` (how many), ``left_open`` (the site's own, left alone) and the first
    ``REPORTED`` transactions aborted. Raises FailoverError when a partition still refuses a
    marker (naming it and why) or a leader cannot be reached: run it again.
    """
    deadline = trio.current_time() + retry_s
    aborted: list[OpenTxn] = []
    while True:
        found = await open_transactions(site, topics)
        mirrored = [t for t in found if t.first_offset < cut.get((t.topic, t.partition), -1)]
        why = ""
        if mirrored:
            try:
                refused = await _write_aborts(site, mirrored)
            except ClientError as exc:
                why = f"aborting the open transactions: {exc}"
            else:
                aborted += [t for t in mirrored if (t.topic, t.partition, t.producer_id) not in refused]
                if refused:
                    shown = ", ".join(
                        f"{topic}-{p} producer {pid}: {_code_name(code)}"
                        for (topic, p, pid), code in sorted(refused.items())[:5]
                    )
                    why = f"{len(refused)} ABORT markers refused ({shown})"
                    if any(code not in _PASSING for code in refused.values()):
                        deadline = trio.current_time()  # no point in waiting
        if not why:
            return {
                "aborted": len(aborted),
                "left_open": len(found) - len(mirrored),
                "transactions": [t.to_dict() for t in aborted[:REPORTED]],
            }
        if trio.current_time() >= deadline:
            raise FailoverError(f"site {site.name}: {why}; run the same command again")
        await trio.sleep(_RETRY_BACKOFF_S)
        await site.refresh()


async def _write_aborts(site: SiteClient, txns: list[OpenTxn]) -> dict[tuple[str, int, int], int]:
    """Write an ABORT marker for each transaction; the error code of each refused one by (topic,
    partition, producer id). Raises ClientError when a leader cannot be reached."""
    by_topic: dict[str, list[OpenTxn]] = {}
    for t in txns:
        by_topic.setdefault(t.topic, []).append(t)
    refused: dict[tuple[str, int, int], int] = {}
    for topic, some in sorted(by_topic.items()):
        aborts = [TxnAbort(t.partition, t.producer_id, t.producer_epoch, max(0, t.coordinator_epoch)) for t in some]
        codes = await abort_transactions(site, topic, aborts)
        refused.update({(topic, p, pid): code for (p, pid), code in codes.items() if code})
    return refused


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


async def first_timestamp(site: SiteClient, txn: OpenTxn, *, timeout: float = 10.0) -> int | None:
    """The timestamp (ms) of the batch that opened ``txn`` (its producer's time of the first
    record), None when it cannot be read. Reads one batch."""
    try:
        conn = await site.open_leader(txn.topic, txn.partition)
    except ClientError:
        return None
    try:
        fetched = await fetch_partition(
            conn,
            txn.topic,
            txn.partition,
            Offset(txn.first_offset),
            isolation_level=READ_UNCOMMITTED,
            max_wait_ms=0,
            max_bytes=1,  # the node always answers the first batch whole
            timeout=timeout,
        )
        if fetched.error_code:
            return None
        for _, header in complete_batches(fetched.records):
            if header.next_offset > txn.first_offset:
                return int(header.base_timestamp)
        return None
    except ClientError:
        return None
    finally:
        await conn.aclose()


def by_topic(txns: Iterable[OpenTxn], opened_ms: Mapping[OpenTxn, int | None], now_ms: int) -> dict[str, Any]:
    """Per topic: how many transactions are open, and the oldest (the one whose first batch is
    the oldest, else the lowest first offset): partition, first offset, producer, age in seconds."""
    txns = list(txns)
    out: dict[str, Any] = {}
    for topic in sorted({t.topic for t in txns}):
        mine = [t for t in txns if t.topic == topic]

        def age_key(t: OpenTxn) -> tuple[int, int, int]:
            at = opened_ms.get(t)
            return (at if at is not None else now_ms, t.partition, t.first_offset)

        oldest = min(mine, key=age_key)
        at = opened_ms.get(oldest)
        out[topic] = {
            "count": len(mine),
            "partitions": sorted({t.partition for t in mine}),
            "oldest": {
                "partition": oldest.partition,
                "first_offset": oldest.first_offset,
                "producer_id": oldest.producer_id,
                "producer_epoch": oldest.producer_epoch,
                "opened_ms": at,
                "age_s": None if at is None else round(max(0.0, (now_ms - at) / 1000), 3),
            },
        }
    return out
