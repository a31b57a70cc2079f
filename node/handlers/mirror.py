"""MirrorAppend (strait's API 1000) and the read-only rule of mirror topics.

A topic whose ``strait.mirror.link`` is set is a *mirror*: the link of that name copies the
source site's batches into it at the source's offsets, so clients may not write it. Produce
and DeleteRecords to it fail with POLICY_VIOLATION (``Partition.check_writable``). Removing the key
(AlterConfigs, IncrementalAlterConfigs) makes it a normal topic again: that is failover.

MirrorAppend, per partition, on the target leader (``Partition.append_mirrored`` holds the
rules): the topic's link must be the request's (POLICY_VIOLATION); the log must end at
``expected_end_offset`` (OFFSET_OUT_OF_RANGE, answered with the real end so the mirror resumes
there); ``start_offset`` past the log end restarts the log there first (the source deleted
records that were never mirrored: a gap, logged and counted); the batches are appended at
their own offsets. The answer waits, like acks=all, until everything appended is below the
high watermark or ``timeout_ms`` passes (REQUEST_TIMED_OUT), and always carries the
partition's log end offset, high watermark and log start offset when this node hosts it.

Authorisation: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition, nothing appended and no offsets disclosed. MirrorAppend is replication, not producing:
it writes at offsets the source chose, into topics clients may not write, and may restart a log.
Kafka asks CLUSTER_ACTION of the principal that replicates (a follower's Fetch, LeaderAndIsr), so
an operator grants the link's principal what a broker's has, and WRITE on a topic (which every
producer of it holds) is never enough to overwrite a mirror.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from node.config import TopicPolicy
from node.errors import BrokerError, answer_errors
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, PartitionSource, RequestMetrics, SecurityServices, denied

if TYPE_CHECKING:
    from node.partition import Partition

log = logging.getLogger("strait.node.mirror")


@dataclass(frozen=True, slots=True)
class MirrorServices:
    partitions: PartitionSource
    metrics: RequestMetrics
    security: SecurityServices = NO_AUTHORIZER


def _check_link(topic: str, policy: TopicPolicy, link: str) -> None:
    if policy.mirror_link is None:
        raise BrokerError(
            ErrorCode.POLICY_VIOLATION, f"topic {topic!r} is not a mirror topic (strait.mirror.link is not set)"
        )
    if policy.mirror_link != link:
        raise BrokerError(
            ErrorCode.POLICY_VIOLATION,
            f"topic {topic!r} is a mirror owned by link {policy.mirror_link!r}, not by link {link!r}",
        )


def _offsets(entry: dict[str, Any], partition: Partition) -> None:
    plog = partition.log
    entry["log_end_offset"] = plog.log_end_offset
    entry["high_watermark"] = plog.high_watermark
    entry["log_start_offset"] = plog.log_start_offset


def _refused(services: MirrorServices, entry: dict[str, Any], exc: BrokerError, name: str, link: str) -> None:
    services.metrics.record_error("MirrorAppend", exc.code.name)
    log.info("mirror append by link %r to %s-%d refused: %s", link, name, entry["index"], exc.message)


async def handle_mirror_append(services: MirrorServices, request: Request) -> dict[str, Any]:
    req = request.body
    link = req.link
    allowed = services.security.allowed(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    topics = []
    waiting: list[tuple[dict[str, Any], Partition, int, str]] = []
    for topic in req.topics:
        partitions = []
        for mp in topic.partitions:
            entry: dict[str, Any] = {
                "index": mp.index,
                "error_code": 0,
                "error_message": None,
                "log_end_offset": -1,
                "high_watermark": -1,
                "log_start_offset": -1,
            }
            partitions.append(entry)
            partition: Partition | None = None
            with answer_errors(entry) as answer:
                if not allowed:
                    raise denied(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
                partition = services.partitions.partition(topic.name, mp.index)
                _check_link(topic.name, partition.policy, link)
                gaps = len(partition.mirror_gaps)
                last_offset = partition.append_mirrored(mp.records, mp.expected_end_offset, mp.start_offset)
                if len(partition.mirror_gaps) > gaps:
                    gap_from, gap_to = partition.mirror_gaps[-1]
                    log.warning(
                        "mirror link %r: %s-%d jumps from offset %d to the source's log start %d: "
                        "offsets [%d, %d) were deleted at the source before they were mirrored",
                        link,
                        topic.name,
                        mp.index,
                        gap_from,
                        gap_to,
                        gap_from,
                        gap_to,
                    )
                if last_offset >= 0:
                    waiting.append((entry, partition, last_offset, topic.name))
            if answer.error is not None:
                _refused(services, entry, answer.error, topic.name, link)
            if partition is not None:
                _offsets(entry, partition)
        topics.append({"name": topic.name, "partitions": partitions})
    if waiting:
        # As acks=all: answer once every appended batch is below its partition's high watermark.
        deadline = trio.current_time() + max(req.timeout_ms, 0) / 1000
        for entry, partition, last_offset, name in waiting:
            with answer_errors(entry) as answer:
                await partition.wait_for_hw(last_offset, deadline)
            if answer.error is not None:
                _refused(services, entry, answer.error, name, link)
            _offsets(entry, partition)
    return {"throttle_time_ms": 0, "topics": topics}
