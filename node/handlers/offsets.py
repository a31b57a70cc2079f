"""ListOffsets (2) and DeleteRecords (21); DeleteRecords refuses mirror topics (POLICY_VIOLATION).

ListOffsets answers a client OFFSET_NOT_AVAILABLE (retriable) for the latest offset, or a time
past the high watermark, while the leader's high watermark is behind the start of its epoch:
just elected, it does not know yet how far the old leader had committed, and an end offset that
went back would make a reader stop short.

A read_committed ListOffsets (``isolation_level`` 1, v2+) answers the last stable offset for the
latest offset, and finds no offset by time at or past it: a read_committed consumer's end is
where the earliest open transaction starts (Kafka's ``lastFetchableOffset``).

Special timestamps, each from the version that defines it (INVALID_REQUEST before, and for any
other negative value): -1 latest, -2 earliest (the log start offset); v7 -3 MAX_TIMESTAMP
(KIP-734): the offset and timestamp of the first record stamped with the largest timestamp in the
log, and the leader epoch of its batch, as Kafka 3.8+ answers it (none when that record is not
below the high watermark, or the last stable offset for read_committed); v8 -4 EARLIEST_LOCAL
(KIP-405): the log start offset, since every record here is local; v9 -5 LATEST_TIERED (KIP-1005):
offset -1 and timestamp -1, what Kafka answers without tiered storage. v10 adds ``timeout_ms``
(KIP-1075), for lookups in remote storage: every answer here is immediate, so it is not used.

Authorisation (Kafka's): ListOffsets needs DESCRIBE on each topic, DeleteRecords DELETE on it;
otherwise its partitions answer TOPIC_AUTHORIZATION_FAILED and are not looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.errors import BrokerError, answer_errors
from node.protocol import ErrorCode
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from storage.records import NO_OFFSET, LeaderEpoch, Offset

from ._services import NO_AUTHORIZER, PartitionSource, SecurityServices, denied

if TYPE_CHECKING:
    from node.partition import Partition
    from storage import PartitionLog

LATEST = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# The first ListOffsets version that may ask for each special timestamp; NO_VERSION for the others.
NO_VERSION = 0x7FFF
SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


@dataclass(frozen=True, slots=True)
class OffsetsServices:
    partitions: PartitionSource
    security: SecurityServices = NO_AUTHORIZER


async def handle_list_offsets(services: OffsetsServices, request: Request) -> dict[str, Any]:
    req = request.body
    client = req.replica_id < 0  # not a replica (consumers send -1, Kafka's own tools -2)
    read_committed = client and getattr(req, "isolation_level", READ_UNCOMMITTED) == READ_COMMITTED
    topics = []
    for topic in req.topics:
        partitions = []
        may_describe = services.security.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for lp in topic.partitions:
            entry: dict[str, Any] = {
                "partition_index": lp.partition_index,
                "error_code": 0,
                "old_style_offsets": [],
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            with answer_errors(entry):
                if not may_describe:
                    raise denied(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
                partition = services.partitions.partition(topic.name, lp.partition_index)
                partition.check_epoch(getattr(lp, "current_leader_epoch", -1))
                plog = partition.log
                ts = lp.timestamp
                fetchable = partition.last_stable_offset if read_committed else plog.high_watermark
                # A client must not see the end go back: a leader just elected may not know yet
                # how far the old one had committed (Kafka answers the same, retriable, error).
                lagging = client and partition.high_watermark_lagging
                epoch: int = partition.leader_epoch
                if ts < 0 and SPECIAL_SINCE.get(ts, NO_VERSION) > request.api_version:
                    raise BrokerError(
                        ErrorCode.INVALID_REQUEST,
                        f"timestamp {ts} is not a valid ListOffsets v{request.api_version} target",
                    )
                if ts in (EARLIEST, EARLIEST_LOCAL):
                    offset, found_ts = plog.log_start_offset, -1
                elif ts == LATEST:
                    if lagging:
                        raise _lagging(partition)
                    offset, found_ts = fetchable, -1
                elif ts == LATEST_TIERED:
                    offset, found_ts = NO_OFFSET, -1
                elif ts == MAX_TIMESTAMP:
                    found_max = _max_timestamp(plog)
                    offset, found_ts, epoch = found_max if found_max is not None else (NO_OFFSET, -1, LeaderEpoch(-1))
                    if offset >= fetchable:
                        offset, found_ts = NO_OFFSET, -1
                else:
                    found = plog.find_offset_by_timestamp(ts)
                    offset, found_ts = found if found is not None else (NO_OFFSET, -1)
                    if offset >= fetchable:
                        if lagging and offset >= plog.high_watermark:
                            raise _lagging(partition)
                        offset, found_ts = NO_OFFSET, -1
                if request.api_version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 and lp.max_num_offsets > 0 else []
                entry["offset"] = offset
                entry["timestamp"] = found_ts
                if offset >= 0:
                    entry["leader_epoch"] = epoch
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def _max_timestamp(plog: PartitionLog) -> tuple[Offset, int, LeaderEpoch] | None:
    """(offset, timestamp, batch leader epoch) of the first record stamped with the log's largest
    timestamp (Kafka's ``offsetOfMaxTimestamp``): the segment with the largest timestamp, the first
    of its batches with that timestamp from the one its index names, the first record in it with
    that timestamp (with LogAppendTime every record has the batch's: its first one). None for an
    empty log."""
    start = plog.log_start_offset
    segments = [s for s in plog.segments if s.next_offset > start and s.max_timestamp >= 0]
    if not segments:
        return None
    segment = max(segments, key=lambda s: s.max_timestamp)  # the first of equals, as Kafka's maxBy
    target = segment.max_timestamp
    found = segment.find_batch(max(Offset(segment.offset_of_max_timestamp), start))
    positions = segment.headers(found[0]) if found is not None else iter(())
    for position, header in positions:
        if header.max_timestamp != target:
            continue
        for record in segment.read_batch(position, header).records():
            if record.timestamp == target and record.offset >= start:
                return record.offset, target, header.partition_leader_epoch
    return None


def _lagging(partition: Partition) -> BrokerError:
    return BrokerError(
        ErrorCode.OFFSET_NOT_AVAILABLE,
        f"{partition.tp}: high watermark {partition.log.high_watermark} is behind "
        f"the start of leader epoch {partition.leader_epoch} ({partition.epoch_start_offset}): retry",
    )


async def handle_delete_records(services: OffsetsServices, request: Request) -> dict[str, Any]:
    req = request.body
    topics = []
    for topic in req.topics:
        partitions = []
        may_delete = services.security.allowed(request, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for dp in topic.partitions:
            entry = {"partition_index": dp.partition_index, "low_watermark": -1, "error_code": 0}
            with answer_errors(entry):
                if not may_delete:
                    raise denied(request, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
                partition = services.partitions.partition(topic.name, dp.partition_index)
                partition.check_writable()
                plog = partition.log
                hw = plog.high_watermark
                target = hw if dp.offset == -1 else dp.offset
                if target < 0 or target > hw:
                    raise BrokerError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"{topic.name}-{dp.partition_index}: cannot delete before {target}, high watermark is {hw}",
                    )
                if target > plog.log_start_offset:
                    plog.delete_records_before(target)
                entry["low_watermark"] = plog.log_start_offset
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
