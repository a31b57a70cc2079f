"""Schemas of the partition reassignment APIs (KIP-455): AlterPartitionReassignments (45) and
ListPartitionReassignments (46); and AlterReplicaLogDirs (34, KIP-113), which moves a replica
between the log dirs of one node.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``).
Both APIs only ever existed as flexible versions, so, like the transaction APIs, they are declared
past the "highest non-flexible version" rule: all the versions Kafka 4.3 declares
(AlterPartitionReassignments v0-1, v1 adding KIP-860's ``allow_replication_factor_change``;
ListPartitionReassignments v0). Field names are the snake_case of the spec's names.
AlterReplicaLogDirs is declared at the versions Kafka 4.3 keeps, v1-2 (v2 flexible; v0 was removed
by KIP-896); v1 answers as v0 did, only its throttling differs.
"""

from __future__ import annotations

from ._schema import BOOL, INT16, INT32, STRING, A, ApiKey, ApiSchema, F, S

# fmt: off
ALTER_PARTITION_REASSIGNMENTS = ApiSchema(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", max_version=1, flexible_from=0,
    request=S(
        F("timeout_ms", INT32, default=60000),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                # null cancels the partition's reassignment in progress
                F("replicas", A(INT32), nullable="0+", default=None),
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("responses", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
        ))),
    ),
)

LIST_PARTITION_REASSIGNMENTS = ApiSchema(
    ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", max_version=0, flexible_from=0,
    request=S(
        F("timeout_ms", INT32, default=60000),
        F("topics", A(S(  # null: every reassignment in progress
            F("name", STRING),
            F("partition_indexes", A(INT32)),
        )), nullable="0+", default=None),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("replicas", A(INT32)),
                F("adding_replicas", A(INT32)),
                F("removing_replicas", A(INT32)),
            ))),
        ))),
    ),
)

ALTER_REPLICA_LOG_DIRS = ApiSchema(
    ApiKey.ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", max_version=2, flexible_from=2, min_version=1,
    request=S(
        F("dirs", A(S(
            F("path", STRING),  # the absolute path of the log dir to move to
            F("topics", A(S(
                F("name", STRING),
                F("partitions", A(INT32)),
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("topic_name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ),
)
# fmt: on

REASSIGN_APIS = (ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS, ALTER_REPLICA_LOG_DIRS)
