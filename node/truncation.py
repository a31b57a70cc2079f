"""Truncation to a cut (TruncatePartitions, strait's API 1001): the leader's check and the controller's decision.

DR failback must remove from the old primary what it took after the failover: every record of
a partition from the *cut* (the offset the other site's copy ends at) on, including records
below the high watermark, which nothing else in a site ever removes. It is done with a leader
epoch bump so that every replica, also one that is down, learns of it through the partition
state in ZooKeeper:

1. A client sends TruncatePartitions (``validate_only`` false) to the controller.
2. The controller refuses, per partition: an unknown topic or partition
   (UNKNOWN_TOPIC_OR_PARTITION); a topic that still takes client writes, neither
   ``strait.fenced`` nor ``strait.mirror.link`` set (POLICY_VIOLATION "fence topic 'T' first").
3. It asks each partition's leader to check the cut against its own log (the same request with
   ``validate_only``, answered by :func:`check_cut`): below the log start or above the log end
   (OFFSET_OUT_OF_RANGE, both numbers named), inside a batch (INVALID_REQUEST: logs are cut
   between batches), a topic the *leader* does not see fenced yet (POLICY_VIOLATION, after one
   re-read of ZooKeeper), so that no Produce can land on the leader after the check.
4. :func:`decide`: a leader whose log already ends at the cut needs nothing (success, no epoch
   bump: the call is idempotent). Otherwise one compare-and-set write of the partition state
   bumps the leader epoch (same leader), shrinks the ISR to the leader and records
   ``Truncation(new epoch, cut)``. A state that moved meanwhile is decided again.
5. The leader takes the new epoch and, before serving it, truncates its log to the cut and its
   high watermark with it (``Partition.apply_state``). Followers do the same when they learn
   of the epoch (their logs hold nothing of it), then check with the leader through
   OffsetForLeaderEpoch as after any epoch change; each rejoins the ISR once it fetches from
   the cut in the new epoch. A replica that is down does it all when it returns; a leader that
   dies before carrying it out does it when it leads again (the record outlives elections).

Retriable answers (NOT_CONTROLLER, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER) are the
client's to retry; ``node.client.AdminClient.truncate_partitions`` does, and then waits until
each partition is at the cut.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, replace

import trio

from node.client import ClientError, NodeConnection, SaslCredentials
from node.config import TopicPolicy
from node.coordination import PartitionState, Truncation
from node.errors import BrokerError
from node.partition import Partition
from node.protocol import ApiKey, ErrorCode, ProtocolError, error_info
from storage import LeaderEpoch, Offset

log = logging.getLogger("strait.node.truncation")

TRUNCATE_VERSION = 0

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LeaderAnswer:
    """What a leader says of one cut: an error (0: the cut is valid) and its log's offsets.

    ``leader_epoch`` is -1 and the offsets are -1 when the node does not lead the partition.
    """

    error_code: int
    error_message: str | None
    leader_epoch: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    high_watermark: int = -1


@dataclass(frozen=True, slots=True)
class Outcome:
    """The controller's answer for one partition.

    ``leader_epoch``: from this epoch on the partition ends at the cut (the new epoch when
    ``truncated``, i.e. this call recorded the truncation); -1 on errors.
    """

    error_code: int
    error_message: str | None = None
    leader_epoch: int = -1
    truncated: bool = False
    answer: LeaderAnswer | None = None


@dataclass(frozen=True, slots=True)
class Again:
    """Not decided yet (a retriable state); the controller tries again until its deadline."""

    code: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class Record:
    """Write this state (compare-and-set on the version it was derived from)."""

    state: PartitionState
    answer: LeaderAnswer


Decision = Outcome | Again | Record

# Answers of a leader that mean "ask again shortly": leadership is moving or not yet applied.
_MOVING = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


def fence_first(topic: str) -> BrokerError:
    return BrokerError(
        ErrorCode.POLICY_VIOLATION,
        f"fence topic {topic!r} first: it still takes client writes (set strait.fenced, or strait.mirror.link)",
    )


def check_policy(topic: str, policy: TopicPolicy) -> None:
    """Refuse a topic clients may still produce to (BrokerError POLICY_VIOLATION)."""
    if policy.client_writable:
        raise fence_first(topic)


def between_batches(partition: Partition, offset: Offset) -> bool:
    """Whether ``truncate_to(offset)``, which removes whole batches, leaves the log ending at ``offset``.

    True for the log end, the base of the first segment, and the offset right after a batch;
    False inside a batch or in a compaction hole (the batch before it ends lower). Reads batch
    headers; raises storage errors.
    """
    plog = partition.log
    end = plog.log_end_offset
    if offset >= end:
        return offset == end
    if offset <= plog.segments[0].base_offset:
        return True
    for _segment, _pos, header in plog.batch_headers(Offset(offset - 1)):
        return header.base_offset < offset and header.last_offset == offset - 1
    return False


def check_cut(partition: Partition, offset: int) -> None:
    """The leader's check of a cut (step 3 of the module docstring). Raises BrokerError:
    NOT_LEADER_OR_FOLLOWER, POLICY_VIOLATION, OFFSET_OUT_OF_RANGE, INVALID_REQUEST."""
    partition.check_leader()
    tp = partition.tp
    check_policy(tp.topic, partition.policy)
    plog = partition.log
    start, end = plog.log_start_offset, plog.log_end_offset
    if offset < start or offset > end:
        raise BrokerError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"{tp}: cannot truncate to offset {offset}: it is outside the log, which starts at {start} and "
            f"ends at {end}",
        )
    if not between_batches(partition, Offset(offset)):
        around = next(iter(plog.batch_headers(Offset(offset))), None)
        where = f" (the batch at offsets {around[2].base_offset}..{around[2].last_offset})" if around else ""
        raise BrokerError(
            ErrorCode.INVALID_REQUEST,
            f"{tp}: offset {offset} is not between two batches{where}; a log is truncated by whole batches",
        )


def answer_of(partition: Partition | None, error: BrokerError | None) -> LeaderAnswer:
    """The answer to a leader's check: the error (if any) and the partition's offsets (if hosted)."""
    code = int(error.code) if error is not None else 0
    message = error.message if error is not None else None
    if partition is None:
        return LeaderAnswer(code, message)
    plog = partition.log
    return LeaderAnswer(
        code,
        message,
        partition.leader_epoch if partition.is_leader else -1,
        plog.log_start_offset,
        plog.log_end_offset,
        plog.high_watermark,
    )


def decide(state: PartitionState, offset: int, answer: LeaderAnswer, controller_epoch: int) -> Decision:
    """The controller's decision for one partition from its state and its leader's answer (step 4).

    A truncation already recorded for this very cut in the current epoch, whose leader has not
    taken the epoch yet (or cannot be asked: it is down), is success without a second bump.
    """
    pending = state.truncation == Truncation(state.leader_epoch, Offset(offset))
    here = Outcome(0, None, state.leader_epoch, answer=answer)
    if answer.error_code in _MOVING or (answer.error_code == 0 and answer.leader_epoch < state.leader_epoch):
        if pending:
            return here
        message = answer.error_message or f"the leader is at epoch {answer.leader_epoch}, not {state.leader_epoch} yet"
        return Again(ErrorCode.LEADER_NOT_AVAILABLE, message)
    if answer.error_code:
        return Outcome(answer.error_code, answer.error_message, answer=answer)
    if answer.leader_epoch > state.leader_epoch:
        return Again(ErrorCode.LEADER_NOT_AVAILABLE, f"the controller's view (epoch {state.leader_epoch}) is behind")
    if answer.log_end_offset == offset:
        return here  # already there: idempotent, no second epoch bump
    epoch = LeaderEpoch(state.leader_epoch + 1)
    new = replace(
        state,
        leader_epoch=epoch,
        isr=(state.leader,),
        controller_epoch=controller_epoch,
        truncation=Truncation(epoch, Offset(offset)),
    )
    return Record(new, answer)


async def ask_leader(
    address: str,
    client_id: str,
    cuts: dict[PartitionKey, int],
    timeout: float,
    ssl_context: ssl.SSLContext | None = None,
    sasl: SaslCredentials | None = None,
) -> dict[PartitionKey, LeaderAnswer]:
    """Send the leader check (TruncatePartitions with ``validate_only``) to the node at ``address``.

    A node that cannot be reached, or answers without an entry, gives LEADER_NOT_AVAILABLE for
    those partitions (never raises but for cancellation)."""
    topics: dict[str, list[dict[str, int]]] = {}
    for (topic, p), offset in cuts.items():
        topics.setdefault(topic, []).append({"index": p, "offset": offset})
    body = {
        "timeout_ms": int(timeout * 1000),
        "validate_only": True,
        "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
    }
    out: dict[PartitionKey, LeaderAnswer] = {}
    try:
        with trio.fail_after(timeout):
            async with await NodeConnection.open(
                address, client_id=client_id, timeout=timeout, ssl_context=ssl_context, sasl=sasl
            ) as conn:
                version = conn.version(ApiKey.TRUNCATE_PARTITIONS, TRUNCATE_VERSION)
                response = await conn.request(ApiKey.TRUNCATE_PARTITIONS, version, body, timeout=timeout)
        for t in response.topics:
            for p in t.partitions:
                out[t.name, p.index] = LeaderAnswer(
                    p.error_code,
                    p.error_message,
                    p.leader_epoch,
                    p.log_start_offset,
                    p.log_end_offset,
                    p.high_watermark,
                )
    except (ClientError, ProtocolError, OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
        log.info("truncation check on the leader at %s failed: %s", address, exc)
        return {key: LeaderAnswer(ErrorCode.LEADER_NOT_AVAILABLE, f"the leader at {address} did not answer: {exc}")
                for key in cuts}  # fmt: skip
    for key in cuts:
        out.setdefault(key, LeaderAnswer(ErrorCode.LEADER_NOT_AVAILABLE, f"the leader at {address} left it out"))
    return out


def retriable(code: int) -> bool:
    return error_info(code).retriable
