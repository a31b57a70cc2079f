"""Schemas of the transaction coordinator's APIs (KIP-98, KIP-664): AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions; and DescribeProducers (KIP-664), which
a partition leader answers from its producer state.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``).
Unlike the other APIs these go past the highest non-flexible version: the client-facing versions of
the four producer APIs end at v3, their first flexible version (v4 and up are broker-to-broker or
KIP-890's), and DescribeProducers, DescribeTransactions and ListTransactions only ever existed as
flexible versions.
Field names are the snake_case of the newest spec's names (AddPartitionsToTxn's keep their
``v3_and_below`` prefix: v4+ batch several transactions in other fields, not declared here).
"""

from __future__ import annotations

from ._schema import BOOL, INT16, INT32, INT64, STRING, A, ApiKey, ApiSchema, F, S

# fmt: off
ADD_PARTITIONS_TO_TXN = ApiSchema(
    ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", max_version=3, flexible_from=3,
    request=S(
        F("v3_and_below_transactional_id", STRING, "0-3"),
        F("v3_and_below_producer_id", INT64, "0-3"),
        F("v3_and_below_producer_epoch", INT16, "0-3"),
        F("v3_and_below_topics", A(S(
            F("name", STRING),
            F("partitions", A(INT32)),
        )), "0-3"),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results_by_topic_v3_and_below", A(S(
            F("name", STRING),
            F("results_by_partition", A(S(
                F("partition_index", INT32),
                F("partition_error_code", INT16),
            ))),
        )), "0-3"),
    ),
)

ADD_OFFSETS_TO_TXN = ApiSchema(
    ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", max_version=3, flexible_from=3,
    request=S(
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("group_id", STRING),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
    ),
)

END_TXN = ApiSchema(
    ApiKey.END_TXN, "EndTxn", max_version=3, flexible_from=3,
    request=S(
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("committed", BOOL),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
    ),
)

TXN_OFFSET_COMMIT = ApiSchema(
    ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", max_version=3, flexible_from=3,
    request=S(
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+"),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("committed_offset", INT64),
                F("committed_leader_epoch", INT32, "2+", default=-1),
                F("committed_metadata", STRING, nullable="0+"),
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ),
)

DESCRIBE_PRODUCERS = ApiSchema(
    ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", max_version=0, flexible_from=0,
    request=S(
        F("topics", A(S(
            F("name", STRING),
            F("partition_indexes", A(INT32)),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("active_producers", A(S(
                    F("producer_id", INT64),
                    F("producer_epoch", INT32),
                    F("last_sequence", INT32, default=-1),
                    F("last_timestamp", INT64, default=-1),
                    F("coordinator_epoch", INT32),
                    F("current_txn_start_offset", INT64, default=-1),
                ))),
            ))),
        ))),
    ),
)

DESCRIBE_TRANSACTIONS = ApiSchema(
    ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", max_version=0, flexible_from=0,
    request=S(
        F("transactional_ids", A(STRING)),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("transaction_states", A(S(
            F("error_code", INT16),
            F("transactional_id", STRING),
            F("transaction_state", STRING),
            F("transaction_timeout_ms", INT32),
            F("transaction_start_time_ms", INT64),
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("topics", A(S(
                F("topic", STRING),
                F("partitions", A(INT32)),
            ))),
        ))),
    ),
)

LIST_TRANSACTIONS = ApiSchema(
    ApiKey.LIST_TRANSACTIONS, "ListTransactions", max_version=1, flexible_from=0,
    request=S(
        F("state_filters", A(STRING)),
        F("producer_id_filters", A(INT64)),
        F("duration_filter", INT64, "1+", default=-1),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("unknown_state_filters", A(STRING)),
        F("transaction_states", A(S(
            F("transactional_id", STRING),
            F("producer_id", INT64),
            F("transaction_state", STRING),
        ))),
    ),
)
# fmt: on

TXN_APIS = (
    DESCRIBE_PRODUCERS,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
)
