"""Schemas of the consumer-group APIs: offsets, coordinator lookup, membership, group listing.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``),
up to the newest version Kafka 4.3 defines for a classic group, flexible ones included; versions
Kafka 4 dropped are as in the 3.x specs. Not declared: OffsetCommit v10 and OffsetFetch v10 (topic
ids instead of names, KIP-848), which a classic-group client never needs. Field names are the
snake_case of the newest spec's names.
"""

from __future__ import annotations

from ._schema import BOOL, BYTES, INT8, INT16, INT32, INT64, STRING, A, ApiKey, ApiSchema, F, S

# fmt: off
OFFSET_COMMIT = ApiSchema(
    ApiKey.OFFSET_COMMIT, "OffsetCommit", max_version=9, flexible_from=8,
    request=S(
        F("group_id", STRING),
        F("generation_id_or_member_epoch", INT32, "1+", default=-1),
        F("member_id", STRING, "1+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=None),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F("topics", A(S(
            F("name", STRING, "0-9"),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("committed_offset", INT64),
                F("committed_leader_epoch", INT32, "6+", default=-1),
                F("commit_timestamp", INT64, "1", default=-1),
                F("committed_metadata", STRING, nullable="0+"),
            ))),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32, "3+"),
        F("topics", A(S(
            F("name", STRING, "0-9"),
            F("partitions", A(S(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ),
)

OFFSET_FETCH = ApiSchema(
    ApiKey.OFFSET_FETCH, "OffsetFetch", max_version=9, flexible_from=6,
    request=S(
        F("group_id", STRING, "0-7"),
        F("topics", A(S(
            F("name", STRING, "0-7"),
            F("partition_indexes", A(INT32), "0-7"),
        )), "0-7", nullable="2-7"),
        F("groups", A(S(
            F("group_id", STRING, "8+"),
            F("member_id", STRING, "9+", nullable="9+", default=None),
            F("member_epoch", INT32, "9+", default=-1),
            F("topics", A(S(
                F("name", STRING, "8+"),
                F("partition_indexes", A(INT32), "8+"),
            )), "8+", nullable="8+"),
        )), "8+"),
        F("require_stable", BOOL, "7+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "3+"),
        F("topics", A(S(
            F("name", STRING, "0-7"),
            F("partitions", A(S(
                F("partition_index", INT32, "0-7"),
                F("committed_offset", INT64, "0-7"),
                F("committed_leader_epoch", INT32, "5-7", default=-1),
                F("metadata", STRING, "0-7", nullable="0-7"),
                F("error_code", INT16, "0-7"),
            )), "0-7"),
        )), "0-7"),
        F("error_code", INT16, "2-7"),
        F("groups", A(S(
            F("group_id", STRING, "8+"),
            F("topics", A(S(
                F("name", STRING, "8+"),
                F("partitions", A(S(
                    F("partition_index", INT32, "8+"),
                    F("committed_offset", INT64, "8+"),
                    F("committed_leader_epoch", INT32, "8+", default=-1),
                    F("metadata", STRING, "8+", nullable="8+"),
                    F("error_code", INT16, "8+"),
                )), "8+"),
            )), "8+"),
            F("error_code", INT16, "8+"),
        )), "8+"),
    ),
)

FIND_COORDINATOR = ApiSchema(
    ApiKey.FIND_COORDINATOR, "FindCoordinator", max_version=6, flexible_from=3,
    request=S(
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+"),
        F("coordinator_keys", A(STRING), "4+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3"),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
        F("coordinators", A(S(
            F("key", STRING, "4+"),
            F("node_id", INT32, "4+"),
            F("host", STRING, "4+"),
            F("port", INT32, "4+"),
            F("error_code", INT16, "4+"),
            F("error_message", STRING, "4+", nullable="4+", default=None),
        )), "4+"),
    ),
)

JOIN_GROUP = ApiSchema(
    ApiKey.JOIN_GROUP, "JoinGroup", max_version=9, flexible_from=6,
    request=S(
        F("group_id", STRING),
        F("session_timeout_ms", INT32),
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("protocol_type", STRING),
        F("protocols", A(S(
            F("name", STRING),
            F("metadata", BYTES),
        ))),
        F("reason", STRING, "8+", nullable="8+", default=None),
    ),
    response=S(
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16),
        F("generation_id", INT32, default=-1),
        F("protocol_type", STRING, "7+", nullable="7+", default=None),
        F("protocol_name", STRING, nullable="7+"),
        F("leader", STRING),
        F("skip_assignment", BOOL, "9+"),
        F("member_id", STRING),
        F("members", A(S(
            F("member_id", STRING),
            F("group_instance_id", STRING, "5+", nullable="5+", default=None),
            F("metadata", BYTES),
        ))),
    ),
)

HEARTBEAT = ApiSchema(
    ApiKey.HEARTBEAT, "Heartbeat", max_version=4, flexible_from=4,
    request=S(
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
    ),
)

LEAVE_GROUP = ApiSchema(
    ApiKey.LEAVE_GROUP, "LeaveGroup", max_version=5, flexible_from=4,
    request=S(
        F("group_id", STRING),
        F("member_id", STRING, "0-2"),
        F("members", A(S(
            F("member_id", STRING, "3+"),
            F("group_instance_id", STRING, "3+", nullable="3+", default=None),
            F("reason", STRING, "5+", nullable="5+", default=None),
        )), "3+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("members", A(S(
            F("member_id", STRING, "3+"),
            F("group_instance_id", STRING, "3+", nullable="3+"),
            F("error_code", INT16, "3+"),
        )), "3+"),
    ),
)

SYNC_GROUP = ApiSchema(
    ApiKey.SYNC_GROUP, "SyncGroup", max_version=5, flexible_from=4,
    request=S(
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignments", A(S(
            F("member_id", STRING),
            F("assignment", BYTES),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignment", BYTES),
    ),
)

DESCRIBE_GROUPS = ApiSchema(
    ApiKey.DESCRIBE_GROUPS, "DescribeGroups", max_version=6, flexible_from=5,
    request=S(
        F("groups", A(STRING)),
        F("include_authorized_operations", BOOL, "3+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("groups", A(S(
            F("error_code", INT16),
            F("error_message", STRING, "6+", nullable="6+", default=None),
            F("group_id", STRING),
            F("group_state", STRING),
            F("protocol_type", STRING),
            F("protocol_data", STRING),
            F("members", A(S(
                F("member_id", STRING),
                F("group_instance_id", STRING, "4+", nullable="4+", default=None),
                F("client_id", STRING),
                F("client_host", STRING),
                F("member_metadata", BYTES),
                F("member_assignment", BYTES),
            ))),
            F("authorized_operations", INT32, "3+", default=-0x80000000),
        ))),
    ),
)

LIST_GROUPS = ApiSchema(
    ApiKey.LIST_GROUPS, "ListGroups", max_version=5, flexible_from=3,
    request=S(
        F("states_filter", A(STRING), "4+"),
        F("types_filter", A(STRING), "5+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("groups", A(S(
            F("group_id", STRING),
            F("protocol_type", STRING),
            F("group_state", STRING, "4+"),
            F("group_type", STRING, "5+"),
        ))),
    ),
)

DELETE_GROUPS = ApiSchema(
    ApiKey.DELETE_GROUPS, "DeleteGroups", max_version=2, flexible_from=2,
    request=S(
        F("groups_names", A(STRING)),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("group_id", STRING),
            F("error_code", INT16),
        ))),
    ),
)

OFFSET_DELETE = ApiSchema(
    ApiKey.OFFSET_DELETE, "OffsetDelete", max_version=0, flexible_from=None,
    request=S(
        F("group_id", STRING),
        F("topics", A(S(
            F("name", STRING),
            F("partitions", A(S(
                F("partition_index", INT32),
            ))),
        ))),
    ),
    response=S(
        F("error_code", INT16),
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
# fmt: on

GROUP_APIS = (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    DELETE_GROUPS,
    OFFSET_DELETE,
)
