"""MirrorMaker-2-compatible mode (``mode = "mm2"``): the pieces a link runner puts together.

- record formats of MM2's internal topics (``_mm2_formats``): heartbeats, offset syncs, checkpoints;
- MM2's naming and topic selection with cycle prevention (``_mm2_policy``);
- ``MM2PartitionCopier``: one source partition into its ``<alias>.<topic>`` remote partition,
  read_committed, batches forwarded with their compression, offset syncs written on the source,
  exact resume (``_mm2_copier``);
- ``OffsetSyncStore``: offset syncs in memory and MM2's never-skip translation (``_mm2_syncs``);
- ``emit_heartbeat`` and ``write_checkpoints`` (``_mm2_io``).

The Kafka requests (produce, fetch, list offsets, topic creation) are node.client's.

See docs/mm2.md.
"""

from ._mm2_copier import (
    MM2PartitionCopier,
    Outgoing,
    TransactionFilter,
    forward,
    rewrite_header,
)
from ._mm2_formats import (
    Checkpoint,
    Heartbeat,
    MM2FormatError,
    OffsetSync,
    decode_checkpoint,
    decode_checkpoint_key,
    decode_checkpoint_value,
    decode_heartbeat,
    decode_heartbeat_key,
    decode_heartbeat_value,
    decode_offset_sync,
    decode_offset_sync_key,
    decode_offset_sync_value,
    encode_checkpoint,
    encode_checkpoint_key,
    encode_checkpoint_value,
    encode_heartbeat_key,
    encode_heartbeat_value,
    encode_offset_sync,
    encode_offset_sync_key,
    encode_offset_sync_value,
)
from ._mm2_io import (
    emit_heartbeat,
    write_checkpoints,
)
from ._mm2_policy import (
    HEARTBEATS_TOPIC,
    checkpoint_topic_name,
    checkpoints_topic,
    is_checkpoints_topic,
    is_cycle,
    is_heartbeats_topic,
    is_internal_topic,
    is_mm2_internal_topic,
    mm2_selects,
    offset_syncs_topic,
    original_topic,
    remote_topic,
    topic_source,
    upstream_topic,
)
from ._mm2_syncs import (
    OffsetSyncStore,
    sync_for,
)
from ._offsets import SourceOffset, TargetOffset

__all__ = [
    "Checkpoint",
    "HEARTBEATS_TOPIC",
    "Heartbeat",
    "MM2FormatError",
    "MM2PartitionCopier",
    "OffsetSync",
    "OffsetSyncStore",
    "Outgoing",
    "SourceOffset",
    "TargetOffset",
    "TransactionFilter",
    "checkpoint_topic_name",
    "checkpoints_topic",
    "decode_checkpoint",
    "decode_checkpoint_key",
    "decode_checkpoint_value",
    "decode_heartbeat",
    "decode_heartbeat_key",
    "decode_heartbeat_value",
    "decode_offset_sync",
    "decode_offset_sync_key",
    "decode_offset_sync_value",
    "emit_heartbeat",
    "encode_checkpoint",
    "encode_checkpoint_key",
    "encode_checkpoint_value",
    "encode_heartbeat_key",
    "encode_heartbeat_value",
    "encode_offset_sync",
    "encode_offset_sync_key",
    "encode_offset_sync_value",
    "forward",
    "is_checkpoints_topic",
    "is_cycle",
    "is_heartbeats_topic",
    "is_internal_topic",
    "is_mm2_internal_topic",
    "mm2_selects",
    "offset_syncs_topic",
    "original_topic",
    "remote_topic",
    "rewrite_header",
    "sync_for",
    "topic_source",
    "upstream_topic",
    "write_checkpoints",
]
