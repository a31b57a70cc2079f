"""Schemas of the data-path APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
InitProducerId, WriteTxnMarkers.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``,
Kafka 4.3), up to the newest version whose meaning the node implements (issue 20); versions Kafka 4
dropped are kept as in the 3.x specs (KIP-896 removed them from Kafka, not from the clients strait
serves). Where a version stops short of Kafka's newest, the comment above the schema says why.
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
    UUID,
    A,
    ApiKey,
    ApiSchema,
    ArrayOf,
    F,
    S,
    StructDef,
)


# fmt: off
# A leader hint (KIP-951): the leader and epoch a NOT_LEADER_OR_FOLLOWER answer names, and the
# address of that leader, so that a client retries there without a Metadata round trip first.
def _leader_id_and_epoch(versions: str) -> StructDef:
    return S(F("leader_id", INT32, versions, default=-1), F("leader_epoch", INT32, versions, default=-1))


def _node_endpoints(versions: str) -> ArrayOf:
    return A(S(
        F("node_id", INT32, versions),
        F("host", STRING, versions),
        F("port", INT32, versions),
        F("rack", STRING, versions, nullable=versions, default=None),
    ))

# Produce v12 is KIP-890's transactions v2 (the broker adds partitions to a transaction itself) and
# v13 names topics by id: neither is implemented, so neither is advertised.
PRODUCE = ApiSchema(
    ApiKey.PRODUCE, "Produce", max_version=11, flexible_from=9,
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
                F("current_leader", _leader_id_and_epoch("10+"), "10+", tag=0),
            ))),
        ))),
        F("throttle_time_ms", INT32, "1+"),
        F("node_endpoints", _node_endpoints("10+"), "10+", tag=0),
    ),
)

# Fetch v18 adds a follower's high watermark (KIP-1166, for KRaft replicas): not declared.
FETCH = ApiSchema(
    ApiKey.FETCH, "Fetch", max_version=17, flexible_from=12,
    request=S(
        F("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
        F("replica_id", INT32, "0-14", default=-1),
        F("replica_state", S(
            F("replica_id", INT32, "15+", default=-1),
            F("replica_epoch", INT64, "15+", default=-1),
        ), "15+", tag=1),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F("topics", A(S(
            F("topic", STRING, "0-12"),
            F("topic_id", UUID, "13+"),
            F("partitions", A(S(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "9+", default=-1),
                F("fetch_offset", INT64),
                F("last_fetched_epoch", INT32, "12+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("partition_max_bytes", INT32),
                F("replica_directory_id", UUID, "17+", tag=0),
            ))),
        ))),
        F("forgotten_topics_data", A(S(
            F("topic", STRING, "7-12"),
            F("topic_id", UUID, "13+"),
            F("partitions", A(INT32), "7+"),
        )), "7+"),
        F("rack_id", STRING, "11+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F("responses", A(S(
            F("topic", STRING, "0-12"),
            F("topic_id", UUID, "13+"),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("high_watermark", INT64),
                F("last_stable_offset", INT64, "4+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("diverging_epoch", S(
                    F("epoch", INT32, "12+", default=-1),
                    F("end_offset", INT64, "12+", default=-1),
                ), "12+", tag=0),
                F("current_leader", _leader_id_and_epoch("12+"), "12+", tag=1),
                F("snapshot_id", S(
                    F("end_offset", INT64, default=-1),
                    F("epoch", INT32, default=-1),
                ), "12+", tag=2),
                F("aborted_transactions", A(S(
                    F("producer_id", INT64, "4+"),
                    F("first_offset", INT64, "4+"),
                )), "4+", nullable="4+"),
                F("preferred_read_replica", INT32, "11+", default=-1),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
        F("node_endpoints", _node_endpoints("16+"), "16+", tag=0),
    ),
)

# ListOffsets v11 asks for the earliest offset pending upload to tiered storage (KIP-1023): not declared.
LIST_OFFSETS = ApiSchema(
    ApiKey.LIST_OFFSETS, "ListOffsets", max_version=10, flexible_from=6,
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
        F("timeout_ms", INT32, "10+"),
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
    ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", max_version=4, flexible_from=4,
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
    ApiKey.DELETE_RECORDS, "DeleteRecords", max_version=2, flexible_from=2,
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
