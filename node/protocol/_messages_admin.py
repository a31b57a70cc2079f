"""Schemas of the cluster and admin APIs: ApiVersions, Metadata, topics, partitions, configs.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``),
the topic, config and log-dir APIs up to the newest versions of Kafka 4.3 (Issue 20: Kafka 4 clients
take their newest code paths), Metadata up to 12 and ApiVersions up to 4; versions Kafka 4 dropped
are as in the 3.x specs. Not declared: DescribeLogDirs v5 (KIP-1066's cordoned log dirs). Field
names are the snake_case of the newest spec's names.
"""

from __future__ import annotations

from ._schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, A, ApiKey, ApiSchema, F, S

# fmt: off
API_VERSIONS = ApiSchema(
    ApiKey.API_VERSIONS, "ApiVersions", max_version=4, flexible_from=3,
    request=S(
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ),
    response=S(
        F("error_code", INT16),
        F("api_keys", A(S(
            F("api_key", INT16),
            F("min_version", INT16),
            F("max_version", INT16),
        ))),
        F("throttle_time_ms", INT32, "1+"),
        # Tagged fields of v3+: feature flags (KIP-584) and the ZooKeeper-migration flag. strait sets none.
        F("supported_features", A(S(
            F("name", STRING, "3+"),
            F("min_version", INT16, "3+"),
            F("max_version", INT16, "3+"),
        )), "3+", tag=0),
        F("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
        F("finalized_features", A(S(
            F("name", STRING, "3+"),
            F("max_version_level", INT16, "3+"),
            F("min_version_level", INT16, "3+"),
        )), "3+", tag=2),
        F("zk_migration_ready", BOOL, "3+", tag=3),
    ),
)

METADATA = ApiSchema(
    ApiKey.METADATA, "Metadata", max_version=12, flexible_from=9,
    request=S(
        # null (v1+) = all topics; v0 asks for all topics with an empty array
        F("topics", A(S(
            F("topic_id", UUID, "10+"),  # v10+: a topic may be asked for by id, its name null
            F("name", STRING, nullable="10+"),
        )), nullable="1+"),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "3+"),
        F("brokers", A(S(
            F("node_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, "1+", nullable="1+", default=None),
        ))),
        F("cluster_id", STRING, "2+", nullable="2+", default=None),
        F("controller_id", INT32, "1+", default=-1),
        F("topics", A(S(
            F("error_code", INT16),
            F("name", STRING, nullable="12+"),
            F("topic_id", UUID, "10+"),  # KIP-516: tells a re-created topic from the one deleted
            F("is_internal", BOOL, "1+"),
            F("partitions", A(S(
                F("error_code", INT16),
                F("partition_index", INT32),
                F("leader_id", INT32),
                F("leader_epoch", INT32, "7+", default=-1),
                F("replica_nodes", A(INT32)),
                F("isr_nodes", A(INT32)),
                F("offline_replicas", A(INT32), "5+"),
            ))),
            F("topic_authorized_operations", INT32, "8+", default=-0x80000000),
        ))),
        F("cluster_authorized_operations", INT32, "8-10", default=-0x80000000),
    ),
)

CREATE_TOPICS = ApiSchema(
    ApiKey.CREATE_TOPICS, "CreateTopics", max_version=7, flexible_from=5,
    request=S(
        F("topics", A(S(
            F("name", STRING),
            F("num_partitions", INT32),
            F("replication_factor", INT16),
            F("assignments", A(S(
                F("partition_index", INT32),
                F("broker_ids", A(INT32)),
            ))),
            F("configs", A(S(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("timeout_ms", INT32, default=60000),
        F("validate_only", BOOL, "1+"),
    ),
    response=S(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", A(S(
            F("name", STRING),
            F("topic_id", UUID, "7+"),
            F("error_code", INT16),
            F("error_message", STRING, "1+", nullable="0+"),
            F("topic_config_error_code", INT16, "5+", tag=0),
            F("num_partitions", INT32, "5+", default=-1),
            F("replication_factor", INT16, "5+", default=-1),
            F("configs", A(S(
                F("name", STRING, "5+"),
                F("value", STRING, "5+", nullable="5+"),
                F("read_only", BOOL, "5+"),
                F("config_source", INT8, "5+", default=-1),
                F("is_sensitive", BOOL, "5+"),
            )), "5+", nullable="5+"),
        ))),
    ),
)

DELETE_TOPICS = ApiSchema(
    ApiKey.DELETE_TOPICS, "DeleteTopics", max_version=6, flexible_from=4,
    request=S(
        F("topics", A(S(
            F("name", STRING, "6+", nullable="6+", default=None),
            F("topic_id", UUID, "6+"),
        )), "6+"),
        F("topic_names", A(STRING), "0-5"),
        F("timeout_ms", INT32),
    ),
    response=S(
        F("throttle_time_ms", INT32, "1+"),
        F("responses", A(S(
            F("name", STRING, nullable="6+"),
            F("topic_id", UUID, "6+"),
            F("error_code", INT16),
            F("error_message", STRING, "5+", nullable="5+", default=None),
        ))),
    ),
)

DESCRIBE_CONFIGS = ApiSchema(
    ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", max_version=4, flexible_from=4,
    request=S(
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configuration_keys", A(STRING), nullable="0+"),
        ))),
        F("include_synonyms", BOOL, "1+"),
        F("include_documentation", BOOL, "3+"),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", A(S(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
                F("read_only", BOOL),
                F("config_source", INT8, "1+", default=-1),
                F("is_default", BOOL, "0"),
                F("is_sensitive", BOOL),
                F("synonyms", A(S(
                    F("name", STRING, "1+"),
                    F("value", STRING, "1+", nullable="0+"),
                    F("source", INT8, "1+"),
                )), "1+"),
                F("config_type", INT8, "3+"),
                F("documentation", STRING, "3+", nullable="0+"),
            ))),
        ))),
    ),
)

ALTER_CONFIGS = ApiSchema(
    ApiKey.ALTER_CONFIGS, "AlterConfigs", max_version=2, flexible_from=2,
    request=S(
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", A(S(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("validate_only", BOOL),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("responses", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
        ))),
    ),
)

CREATE_PARTITIONS = ApiSchema(
    ApiKey.CREATE_PARTITIONS, "CreatePartitions", max_version=3, flexible_from=2,
    request=S(
        F("topics", A(S(
            F("name", STRING),
            F("count", INT32),
            F("assignments", A(S(
                F("broker_ids", A(INT32)),
            )), nullable="0+"),
        ))),
        F("timeout_ms", INT32),
        F("validate_only", BOOL),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results", A(S(
            F("name", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ),
)

INCREMENTAL_ALTER_CONFIGS = ApiSchema(
    ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", max_version=1, flexible_from=1,
    request=S(
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", A(S(
                F("name", STRING),
                F("config_operation", INT8),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("validate_only", BOOL),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("responses", A(S(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
        ))),
    ),
)

# v1 is v0 with throttling on quota violation (KIP-219); v2 is flexible, v3 adds a top-level error,
# v4 each log dir's total and usable bytes.
DESCRIBE_LOG_DIRS = ApiSchema(
    ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", max_version=4, flexible_from=2,
    request=S(
        F("topics", A(S(
            F("topic", STRING),
            F("partitions", A(INT32)),
        )), nullable="0+"),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "3+"),
        F("results", A(S(
            F("error_code", INT16),
            F("log_dir", STRING),
            F("topics", A(S(
                F("name", STRING),
                F("partitions", A(S(
                    F("partition_index", INT32),
                    F("partition_size", INT64),
                    F("offset_lag", INT64),
                    F("is_future_key", BOOL),
                ))),
            ))),
            F("total_bytes", INT64, "4+", default=-1),  # of the volume the dir is on
            F("usable_bytes", INT64, "4+", default=-1),
        ))),
    ),
)

# KIP-700: the cluster's id, controller and brokers without a Metadata request. Only flexible versions
# exist; v1 names the endpoint type asked for (KIP-919: 1 broker, 2 controller), v2 fenced brokers (KIP-1073).
DESCRIBE_CLUSTER = ApiSchema(
    ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", max_version=2, flexible_from=0,
    request=S(
        F("include_cluster_authorized_operations", BOOL),
        F("endpoint_type", INT8, "1+", default=1),
        F("include_fenced_brokers", BOOL, "2+"),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("endpoint_type", INT8, "1+", default=1),
        F("cluster_id", STRING),
        F("controller_id", INT32, default=-1),
        F("brokers", A(S(
            F("broker_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, nullable="0+", default=None),
            F("is_fenced", BOOL, "2+"),
        ))),
        F("cluster_authorized_operations", INT32, default=-0x80000000),
    ),
)

# Inter-broker: a stopping node asks the controller to move its leaderships away. v0 used a
# request header without client id; strait declares v1+ only.
CONTROLLED_SHUTDOWN = ApiSchema(
    ApiKey.CONTROLLED_SHUTDOWN, "ControlledShutdown", max_version=2, flexible_from=3, min_version=1,
    request=S(
        F("broker_id", INT32),
        F("broker_epoch", INT64, "2+", default=-1),
    ),
    response=S(
        F("error_code", INT16),
        F("remaining_partitions", A(S(
            F("topic_name", STRING),
            F("partition_index", INT32),
        ))),
    ),
)

ELECT_LEADERS = ApiSchema(
    ApiKey.ELECT_LEADERS, "ElectLeaders", max_version=2, flexible_from=2,
    request=S(
        F("election_type", INT8, "1+"),  # 0 preferred, 1 unclean (v0: preferred)
        F("topic_partitions", A(S(  # null: every partition
            F("topic", STRING),
            F("partitions", A(INT32)),
        )), nullable="0+"),
        F("timeout_ms", INT32, default=60000),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "1+"),
        F("replica_election_results", A(S(
            F("topic", STRING),
            F("partition_result", A(S(
                F("partition_id", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
        ))),
    ),
)
# fmt: on

ADMIN_APIS = (
    DESCRIBE_CLUSTER,
    ELECT_LEADERS,
    API_VERSIONS,
    DESCRIBE_LOG_DIRS,
    METADATA,
    CONTROLLED_SHUTDOWN,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    INCREMENTAL_ALTER_CONFIGS,
)
