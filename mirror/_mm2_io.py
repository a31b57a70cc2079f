"""Writing MM2's internal topics on a site: heartbeats and checkpoints (created when missing).

The Kafka requests themselves are node.client's (``ensure_topic``, ``produce_records``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from node.client import ProduceRecord, SiteClient, ensure_topic, produce_records

from ._mm2_formats import (
    Checkpoint,
    encode_checkpoint,
    encode_heartbeat_key,
    encode_heartbeat_value,
)
from ._mm2_policy import HEARTBEATS_TOPIC, checkpoints_topic
from ._offsets import source_offset, target_offset

INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact"}  # MM2's createSinglePartitionCompactedTopic
CHECKPOINT_CHUNK = 500  # records per produced batch of checkpoints: well under max.message.bytes


async def emit_heartbeat(site: SiteClient, source_alias: str, target_alias: str, *, now_ms: int | None = None) -> int:
    """Produce one MM2 heartbeat (source alias, target alias, now) into ``heartbeats`` on ``site``
    (the target), creating that topic when missing (1 partition, compacted). Returns its offset.
    Raises ClientError."""
    await ensure_topic(site, HEARTBEATS_TOPIC, configs=INTERNAL_TOPIC_CONFIGS)
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    record = ProduceRecord(encode_heartbeat_key(source_alias, target_alias), encode_heartbeat_value(ts), (), ts)
    return await produce_records(site, HEARTBEATS_TOPIC, 0, [record])


CheckpointLike = Checkpoint | tuple[str, str, int, int, int, str | None]


async def write_checkpoints(
    site: SiteClient, source_alias: str, checkpoints: Sequence[CheckpointLike], *, now_ms: int | None = None
) -> int:
    """Produce MM2 checkpoints into ``<source alias>.checkpoints.internal`` on ``site`` (the target),
    creating it when missing (1 partition, compacted). Returns how many were written.

    Each entry is a ``Checkpoint`` or ``(group, topic, partition, upstream, downstream, metadata)``
    where ``topic`` is the **target-side** name (``checkpoint_topic_name`` gives it; MM2 keys
    checkpoints by the remote topic-partition) and a None metadata is written as "" (as Kafka's
    OffsetAndMetadata does). Raises ClientError, or MM2FormatError for a string over 32767 bytes.
    """
    entries = [c if isinstance(c, Checkpoint) else _as_checkpoint(c) for c in checkpoints]
    if not entries:
        return 0
    topic = checkpoints_topic(source_alias)
    await ensure_topic(site, topic, configs=INTERNAL_TOPIC_CONFIGS)
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    records = [ProduceRecord(*encode_checkpoint(c), (), ts) for c in entries]
    for start in range(0, len(records), CHECKPOINT_CHUNK):
        await produce_records(site, topic, 0, records[start : start + CHECKPOINT_CHUNK])
    return len(records)


def _as_checkpoint(entry: tuple[str, str, int, int, int, str | None]) -> Checkpoint:
    group, topic, partition, upstream, downstream, metadata = entry
    return Checkpoint(group, topic, partition, source_offset(upstream), target_offset(downstream), metadata or "")
