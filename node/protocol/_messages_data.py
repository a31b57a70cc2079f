"""Schemas of the data-path APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
InitProducerId, WriteTxnMarkers.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``),
up to each API's highest non-flexible version; versions Kafka 4 dropped are as in the 3.x specs.
WriteTxnMarkers, which only brokers send, is declared on purpose up to its flexible v1 (the only
version Kafka 4 keeps). Field names are the snake_case of the newest spec's names.
"""

from __future__ import annotations

from ._schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    A,
    ApiKey,
    ApiSchema,
    F,
    S,
)

# fmt: off
PRODUCE = ApiSchema(
    ApiKey.PRODUCE, "Produce", max_version=8, flexible_from=9,
    request=S(
        F("transactional_id", STRING, "3+", nullable="3+", default=None),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F("topic_data", A(S(
            F("name", STRING),
            F("partition_data", A(S(
                F("index", INT32),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
    ),
    response=S(
        F("responses", A(S(
            F("name", STRING),
            F("partition_responses", A(S(
                F("index", INT32),
                F("error_code", INT16),
                F("base_offset", INT64),
                F("log_append_time_ms", INT64, "2+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("record_errors", A(S(
                    F("batch_index", INT32, "8+"),
                    F("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
                )), "8+"),
                F("error_message", STRING, "8+", nullable="8+", default=None),
            ))),
        ))),
        F("throttle_time_ms", INT32, "1+"),
    ),
)

FETCH = ApiSchema(
    ApiKey.FETCH, "Fetch", max_version=11, flexible_from=12,
    request=S(
        F("replica_id", INT32, default=-1),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F("topics", A(S(
            F("topic", STRING),
            F("partitions", A(S(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "9+", default=-1),
                F("fetch_offset", INT64),
                F("log_start_offset", INT64, "5+", default=-1),
                F("partition_max_bytes", INT32),
            ))),
        ))),
        F("forgotten_topics_data", A(S(
            F("topic", STRING, "7+"),
            F("partitions", A(INT32), "7+"),
        )), "7+"),
        F("rack_id", STRING, "11+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F("responses", A(S(
            F("topic", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("high_watermark", INT64),
                F("last_stable_offset", INT64, "4+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("aborted_transactions", A(S(
                    F("producer_id", INT64, "4+"),
                    F("first_offset", INT64, "4+"),
                )), "4+", nullable="4+"),
                F("preferred_read_replica", INT32, "11+", default=-1),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
    ),
)

LIST_OFFSETS = ApiSchema(
    ApiKey.LIST_OFFSETS, "ListOffsets", max_version=5, flexible_from=6,
    request=S(
        F("replica_id", INT32),
        F("isolation_level", INT8, "2+"),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("current_leader_epoch", INT32, "4+", default=-1),
                F("timestamp", INT64),
                F("max_num_offsets", INT32, "0", default=1),
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("old_style_offsets", A(INT64), "0"),
                F("timestamp", INT64, "1+", default=-1),
                F("offset", INT64, "1+", default=-1),
                F("leader_epoch", INT32, "4+", default=-1),
            ))),
        ))),
    ),
)

OFFSET_FOR_LEADER_EPOCH = ApiSchema(
    ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", max_version=3, flexible_from=4,
    request=S(
        F("replica_id", INT32, "3+", default=-2),
        F("topics", A(S(
            F("topic", STRING),
            F("partitions", A(S(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "2+", default=-1),
                F("leader_epoch", INT32),
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", A(S(
            F("topic", STRING),
            F("partitions", A(S(
                F("error_code", INT16),
                F("partition", INT32),
                F("leader_epoch", INT32, "1+", default=-1),
                F("end_offset", INT64, default=-1),
            ))),
        ))),
    ),
)

DELETE_RECORDS = ApiSchema(
    ApiKey.DELETE_RECORDS, "DeleteRecords", max_version=1, flexible_from=2,
    request=S(
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("offset", INT64),
            ))),
        ))),
        F("timeout_ms", INT32),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("low_watermark", INT64),
                F("error_code", INT16),
            ))),
        ))),
    ),
)

# v2 is the first flexible version; v3 adds the producer id and epoch a producer resumes with (KIP-360);
# v4 may answer PRODUCER_FENCED (KIP-588), where older versions get INVALID_PRODUCER_EPOCH.
INIT_PRODUCER_ID = ApiSchema(
    ApiKey.INIT_PRODUCER_ID, "InitProducerId", max_version=4, flexible_from=2,
    request=S(
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16),
    ),
)

WRITE_TXN_MARKERS = ApiSchema(
    ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", max_version=1, flexible_from=1,
    request=S(
        F("markers", A(S(
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("transaction_result", BOOL),  # False = ABORT, True = COMMIT
            F("topics", A(S(
                F("name", STRING),
                F("partition_indexes", A(INT32)),
            ))),
            F("coordinator_epoch", INT32),
        ))),
    ),
    response=S(
        F("markers", A(S(
            F("producer_id", INT64),
            F("topics", A(S(
                F("name", STRING),
                F("partitions", A(S(
                    F("partition_index", INT32),
                    F("error_code", INT16),
                ))),
            ))),
        ))),
    ),
)
# fmt: on

DATA_APIS = (
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    DELETE_RECORDS,
    INIT_PRODUCER_ID,
    WRITE_TXN_MARKERS,
)
