"""Schemas of strait's own APIs, which Kafka does not have. Their keys start at 1000.

Written in the same notation as Kafka's, never flexible (no tagged fields, no compact
encodings), so that a Kafka client library's plain encoders can speak them too.

MirrorAppend (1000): the mirror service hands the target site's partition leader whole record
batches copied from the source site, to be appended at the offsets they carry. The contract
is in docs/node.md ("Mirror topics"); the broker side is ``node.handlers.mirror``.

TruncatePartitions (1001): truncate partitions to a cut (an offset per partition), below the
high watermark if need be: DR failback removes what the old primary took after the failover.
Sent to the controller, which checks each partition with its leader (the same request with
``validate_only``, answered by the leader from its own log), then bumps the leader epoch and
records the truncation in ZooKeeper. The contract is in docs/replication.md ("Fencing and
truncation"); the broker side is ``node.handlers.truncate`` and ``node.truncation``.
"""

from __future__ import annotations

from ._schema import BOOL, BYTES, INT16, INT32, INT64, RECORDS, STRING, A, ApiKey, ApiSchema, F, S

# fmt: off
MIRROR_APPEND = ApiSchema(
    ApiKey.MIRROR_APPEND, "MirrorAppend", max_version=0, flexible_from=None,
    request=S(
        F("link", STRING),  # the link appending: must equal the topic's strait.mirror.link
        F("timeout_ms", INT32),  # how long to wait for the appended data to be committed
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("index", INT32),
                F("expected_end_offset", INT64),  # append only if the log ends here
                F("start_offset", INT64, default=-1),  # the source's log start when past our end; -1: no jump
                F("records", RECORDS, nullable="0+"),  # whole batches from expected end (or start_offset)
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("log_end_offset", INT64, default=-1),
                F("high_watermark", INT64, default=-1),
                F("log_start_offset", INT64, default=-1),
            ))),
        ))),
    ),
)

TRUNCATE_PARTITIONS = ApiSchema(
    ApiKey.TRUNCATE_PARTITIONS, "TruncatePartitions", max_version=0, flexible_from=None,
    request=S(
        F("timeout_ms", INT32),  # how long the controller may take to check and record, in all
        # false: to the controller, which records the truncations; true: to a leader, which checks
        # each partition it leads against its own log and view of the topic and changes nothing
        F("validate_only", BOOL),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("index", INT32),
                F("offset", INT64),  # the cut: the log keeps [log start, offset)
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                # The epoch from which the partition ends at the cut (the new one when this call
                # recorded a truncation); a leader's check: its current epoch. -1 when unknown.
                F("leader_epoch", INT32, default=-1),
                F("truncated", BOOL, default=False),  # this call recorded a truncation (an epoch bump)
                F("log_start_offset", INT64, default=-1),  # the leader's, when the call was checked
                F("log_end_offset", INT64, default=-1),
                F("high_watermark", INT64, default=-1),
            ))),
        ))),
    ),
)
PARTITION_STATES = ApiSchema(
    ApiKey.PARTITION_STATES, "PartitionStates", max_version=0, flexible_from=None,
    request=S(
        F("controller_id", INT32),
        F("controller_epoch", INT32),  # refused (STALE_CONTROLLER_EPOCH) below the epoch the broker knows
        F("topics", A(S(
            F("name", STRING),
            F("topic_id", STRING),  # the assignment's topic id: a re-created topic's states never mix
            F("partitions", A(S(
                F("index", INT32),
                F("version", INT32),  # the state znode's version after the controller's write
                F("state", BYTES),  # the znode's data, as written
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("applied", INT32, default=0),  # states newer than what the broker held
    ),
)
# fmt: on

STRAIT_APIS = (MIRROR_APPEND, TRUNCATE_PARTITIONS, PARTITION_STATES)
