"""The catalogue of declared APIs: keys, names, version ranges, flexibility; the schema notation."""

from __future__ import annotations

import struct

import pytest

from node.protocol import (
    ApiKey,
    UnknownApi,
    advertised_ranges,
    all_schemas,
    decode_response,
    encode_request,
    request_header,
    schema,
)
from node.protocol._schema import INT32, STRING, A, F, S, Versions
from tests.node.protocol.helpers import kp_classes

# Kafka's API keys (kafka.apache.org/protocol#protocol_api_keys) and the ranges strait advertises:
# 0 up to the highest non-flexible version; ApiVersions 0-4, SaslAuthenticate 0-2 and the SCRAM
# credential APIs (flexible v0 only), Metadata 0-12, ElectLeaders 0-2, InitProducerId 0-4, the transaction APIs,
# the data path (Produce 0-11, Fetch 0-17, ListOffsets 0-10, DeleteRecords 0-2, OffsetForLeaderEpoch 0-4) and
# the group, admin and ACL APIs (Issue 20) are the flexible exceptions. Keys from 1000 are strait's own.
EXPECTED = {
    0: ("Produce", 11),
    1: ("Fetch", 17),
    2: ("ListOffsets", 10),
    3: ("Metadata", 12),
    7: ("ControlledShutdown", 2),
    8: ("OffsetCommit", 9),
    9: ("OffsetFetch", 9),
    10: ("FindCoordinator", 6),
    11: ("JoinGroup", 9),
    12: ("Heartbeat", 4),
    13: ("LeaveGroup", 5),
    14: ("SyncGroup", 5),
    15: ("DescribeGroups", 6),
    16: ("ListGroups", 5),
    17: ("SaslHandshake", 1),
    18: ("ApiVersions", 4),
    19: ("CreateTopics", 7),
    20: ("DeleteTopics", 6),
    21: ("DeleteRecords", 2),
    22: ("InitProducerId", 4),
    23: ("OffsetForLeaderEpoch", 4),
    24: ("AddPartitionsToTxn", 3),
    25: ("AddOffsetsToTxn", 3),
    26: ("EndTxn", 3),
    27: ("WriteTxnMarkers", 1),
    28: ("TxnOffsetCommit", 3),
    29: ("DescribeAcls", 3),
    30: ("CreateAcls", 3),
    31: ("DeleteAcls", 3),
    32: ("DescribeConfigs", 4),
    33: ("AlterConfigs", 2),
    34: ("AlterReplicaLogDirs", 2),
    35: ("DescribeLogDirs", 4),
    36: ("SaslAuthenticate", 2),
    37: ("CreatePartitions", 3),
    42: ("DeleteGroups", 2),
    44: ("IncrementalAlterConfigs", 1),
    45: ("AlterPartitionReassignments", 1),
    46: ("ListPartitionReassignments", 0),
    43: ("ElectLeaders", 2),
    47: ("OffsetDelete", 0),
    48: ("DescribeClientQuotas", 1),
    49: ("AlterClientQuotas", 1),
    50: ("DescribeUserScramCredentials", 0),
    51: ("AlterUserScramCredentials", 0),
    60: ("DescribeCluster", 2),
    61: ("DescribeProducers", 0),
    65: ("DescribeTransactions", 0),
    66: ("ListTransactions", 1),
    1000: ("MirrorAppend", 0),
    1001: ("TruncatePartitions", 0),
    1002: ("PartitionStates", 0),
}


def test_every_api_key_is_declared_with_kafkas_name_and_range() -> None:
    assert {int(k) for k in ApiKey} == set(EXPECTED)
    assert {api.api_key: (api.name, api.max_version) for api in all_schemas()} == EXPECTED
    assert [api.api_key for api in all_schemas()] == sorted(EXPECTED)


MIN_VERSION_1 = (ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_REPLICA_LOG_DIRS)  # Kafka 4 dropped their v0 (KIP-896)


def test_advertised_ranges() -> None:
    assert advertised_ranges(EXPECTED) == {
        key: (1 if key in MIN_VERSION_1 else 0, high) for key, (_, high) in EXPECTED.items()
    }
    assert advertised_ranges([]) == {}
    with pytest.raises(UnknownApi, match="unknown api key 4"):
        advertised_ranges([0, 4])  # LeaderAndIsr: broker-internal, not declared


# The APIs declared with flexible versions, each added on purpose with its tests: (flexible_from, max_version).
FLEXIBLE: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (3, 4),
    ApiKey.SASL_AUTHENTICATE: (2, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # only a flexible v0 exists
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (1, 1),  # Kafka 4.3's versions, as its Admin sends them
    ApiKey.ALTER_CLIENT_QUOTAS: (1, 1),
    ApiKey.METADATA: (9, 12),  # v10+ carries topic ids (KIP-516): a re-created topic is told apart
    ApiKey.ELECT_LEADERS: (2, 2),  # KIP-460, as admin clients send it
    ApiKey.INIT_PRODUCER_ID: (2, 4),  # KIP-360's producer id and epoch are v3+
    ApiKey.ADD_PARTITIONS_TO_TXN: (3, 3),  # the transaction APIs up to their last client-facing version
    ApiKey.ADD_OFFSETS_TO_TXN: (3, 3),
    ApiKey.END_TXN: (3, 3),
    ApiKey.TXN_OFFSET_COMMIT: (3, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),  # only flexible versions exist
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),  # only flexible versions exist
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),  # only flexible versions exist (KIP-664)
    ApiKey.WRITE_TXN_MARKERS: (1, 1),  # sent by brokers only; Kafka 4 keeps only the flexible v1
    # Issue 20: the group, admin and ACL APIs up to Kafka 4.3's newest versions a classic group uses
    ApiKey.OFFSET_COMMIT: (8, 9),  # v10 (topic ids, KIP-848) not declared
    ApiKey.OFFSET_FETCH: (6, 9),  # v10 (topic ids, KIP-848) not declared
    ApiKey.FIND_COORDINATOR: (3, 6),
    ApiKey.JOIN_GROUP: (6, 9),
    ApiKey.HEARTBEAT: (4, 4),
    ApiKey.LEAVE_GROUP: (4, 5),
    ApiKey.SYNC_GROUP: (4, 5),
    ApiKey.DESCRIBE_GROUPS: (5, 6),
    ApiKey.LIST_GROUPS: (3, 5),
    ApiKey.DELETE_GROUPS: (2, 2),
    ApiKey.CREATE_TOPICS: (5, 7),
    ApiKey.DELETE_TOPICS: (4, 6),
    ApiKey.DESCRIBE_CONFIGS: (4, 4),
    ApiKey.ALTER_CONFIGS: (2, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (1, 1),
    ApiKey.CREATE_PARTITIONS: (2, 3),
    ApiKey.DESCRIBE_LOG_DIRS: (2, 4),  # v5 (KIP-1066's cordoned dirs) not declared
    ApiKey.DESCRIBE_ACLS: (2, 3),
    ApiKey.CREATE_ACLS: (2, 3),
    ApiKey.DELETE_ACLS: (2, 3),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),  # only flexible versions exist (KIP-700)
    ApiKey.ALTER_REPLICA_LOG_DIRS: (2, 2),  # Kafka 4.3 keeps v1-2; its Admin sends v2
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),  # KIP-455: only flexible versions exist
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # the data path at Kafka 4.3's newest versions the node implements (issue 20)
    ApiKey.PRODUCE: (9, 11),  # v12 is KIP-890's transactions v2, v13 topic ids
    ApiKey.FETCH: (12, 17),  # v18 is KIP-1166's follower high watermark
    ApiKey.LIST_OFFSETS: (6, 10),  # v11 asks for tiered storage's pending uploads
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (4, 4),
    ApiKey.DELETE_RECORDS: (2, 2),
}


def test_flexible_versions_are_declared_only_where_chosen() -> None:
    for api in all_schemas():
        if api.flexible_from is None:  # never flexible in Kafka's spec (OffsetDelete, SaslHandshake)
            assert not any(api.is_flexible(v) for v in range(api.max_version + 1)), api.name
            continue
        if api.api_key in FLEXIBLE:
            assert (api.flexible_from, api.max_version) == FLEXIBLE[api.api_key], api.name
        else:
            assert api.max_version == api.flexible_from - 1, api.name


def test_flexible_from_matches_kafkas_specs() -> None:
    # kafka-python ships Kafka's JSON specs; their flexibleVersions is "N+" for every API here
    classes = kp_classes()
    missing = {api.name for api in all_schemas() if (api.api_key, True) not in classes}
    # Inter-broker only (ControlledShutdown) or strait's own (MirrorAppend, TruncatePartitions, PartitionStates): their
    # bytes are checked below.
    assert missing == {"ControlledShutdown", "MirrorAppend", "TruncatePartitions", "PartitionStates"}
    for api in all_schemas():
        if api.name in missing:
            continue
        for request in (True, False):
            theirs = classes[api.api_key, request]
            if api.flexible_from is None:
                assert not any(theirs.flexible_version_q(v) for v in range(api.max_version + 1)), api.name
                continue
            assert theirs.flexible_version_q(api.flexible_from)
            assert not theirs.flexible_version_q(api.flexible_from - 1)  # type: ignore[operator]


def test_header_versions() -> None:
    produce, api_versions = schema(ApiKey.PRODUCE), schema(ApiKey.API_VERSIONS)
    assert [produce.request_header_version(v) for v in (0, 8, 9)] == [1, 1, 2]
    assert [produce.response_header_version(v) for v in (0, 8, 9)] == [0, 0, 1]
    assert [api_versions.request_header_version(v) for v in (2, 3, 4)] == [1, 2, 2]
    assert [api_versions.response_header_version(v) for v in (2, 3, 4)] == [0, 0, 0]


def test_schema_of_unknown_key_raises() -> None:
    with pytest.raises(UnknownApi) as caught:
        schema(4)  # LeaderAndIsr: broker-internal, not declared
    assert caught.value.api_key == 4
    assert caught.value.api_version is None


def test_version_ranges_parse_like_kafkas() -> None:
    assert Versions.parse("3+") == Versions(3, 0x7FFF)
    assert Versions.parse("2-4") == Versions(2, 4)
    assert Versions.parse("1") == Versions(1, 1)
    assert 0 not in Versions.parse("none")
    assert 4 in Versions.parse("2-4")
    assert 5 not in Versions.parse("2-4")
    with pytest.raises(ValueError, match="'2-x'"):
        Versions.parse("2-x")


def test_notation_rejects_duplicate_fields_and_resolves_defaults() -> None:
    with pytest.raises(ValueError, match="'a'"):
        S(F("a", INT32), F("a", STRING))
    for bad in ("PartitionIndex", "a-b", 'x"]', "_private"):
        with pytest.raises(ValueError, match="snake_case"):
            F(bad, INT32)
    assert F("xs", A(INT32)).fresh_default() == []
    assert F("xs", A(INT32)).fresh_default() is not F("xs", A(INT32)).fresh_default()
    assert F("s", STRING, nullable="0+", default=None).default is None
    assert F("n", INT32, default=-1).default == -1


def test_controlled_shutdown_bytes_follow_kafkas_spec() -> None:
    # Request v2: broker_id int32, broker_epoch int64. Response: error_code int16,
    # remaining_partitions [topic_name string, partition_index int32].
    api = schema(ApiKey.CONTROLLED_SHUTDOWN)
    assert (api.min_version, api.max_version, api.flexible_from) == (1, 2, 3)
    frame = encode_request(request_header(ApiKey.CONTROLLED_SHUTDOWN, 2, 9, "c"), {"broker_id": 3, "broker_epoch": 77})
    assert frame == struct.pack(">ihhih", len(frame) - 4, 7, 2, 9, 1) + b"c" + struct.pack(">iq", 3, 77)
    response = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 4)
    correlation, decoded = decode_response(ApiKey.CONTROLLED_SHUTDOWN, 1, struct.pack(">i", 9) + response)
    assert correlation == 9
    assert decoded.error_code == 0
    assert [(p.topic_name, p.partition_index) for p in decoded.remaining_partitions] == [("t", 4)]


def test_mirror_append_bytes_follow_its_declaration() -> None:
    # strait's own API: v0 only, never flexible (request header v1, response header v0).
    # Request: link string, timeout_ms int32, topics [name string, partitions [index int32,
    # expected_end_offset int64, start_offset int64, records nullable records (int32 length)]].
    # Response: throttle_time_ms int32, topics [name string, partitions [index int32,
    # error_code int16, error_message nullable string, log_end_offset, high_watermark, log_start_offset int64]].
    api = schema(ApiKey.MIRROR_APPEND)
    assert (api.api_key, api.min_version, api.max_version, api.flexible_from) == (1000, 0, 0, None)
    assert (api.request_header_version(0), api.response_header_version(0)) == (1, 0)
    body = {
        "link": "l1",
        "timeout_ms": 500,
        "topics": [
            {
                "name": "m",
                "partitions": [
                    {"index": 2, "expected_end_offset": 10, "start_offset": -1, "records": b"abc"},
                    {"index": 3, "expected_end_offset": 0, "start_offset": 7, "records": None},
                ],
            }
        ],
    }
    frame = encode_request(request_header(ApiKey.MIRROR_APPEND, 0, 5, "c"), body)
    expected = (
        struct.pack(">hhih", 1000, 0, 5, 1)
        + b"c"
        + struct.pack(">h", 2)
        + b"l1"
        + struct.pack(">ii", 500, 1)
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">i", 2)
        + struct.pack(">iqqi", 2, 10, -1, 3)
        + b"abc"
        + struct.pack(">iqqi", 3, 0, 7, -1)
    )
    assert frame == struct.pack(">i", len(expected)) + expected

    response = (
        struct.pack(">ii", 9, 0)  # correlation id, throttle_time_ms
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"m"
        + struct.pack(">i", 2)
        + struct.pack(">ihh", 2, 1, 3)
        + b"end"
        + struct.pack(">qqq", 12, 11, 0)
        + struct.pack(">ihh", 3, 0, -1)
        + struct.pack(">qqq", 7, 7, 7)
    )
    correlation, decoded = decode_response(ApiKey.MIRROR_APPEND, 0, response)
    assert correlation == 9
    (topic,) = decoded.topics
    assert topic.name == "m"
    assert [
        (p.index, p.error_code, p.error_message, p.log_end_offset, p.high_watermark, p.log_start_offset)
        for p in topic.partitions
    ] == [(2, 1, "end", 12, 11, 0), (3, 0, None, 7, 7, 7)]


def test_truncate_partitions_bytes_follow_its_declaration() -> None:
    # strait's own API: v0 only, never flexible (request header v1, response header v0).
    # Request: timeout_ms int32, validate_only bool, topics [name string, partitions [index int32,
    # offset int64]]. Response: throttle_time_ms int32, topics [name string, partitions [index int32,
    # error_code int16, error_message nullable string, leader_epoch int32, truncated bool,
    # log_start_offset, log_end_offset, high_watermark int64]].
    api = schema(ApiKey.TRUNCATE_PARTITIONS)
    assert (api.api_key, api.min_version, api.max_version, api.flexible_from) == (1001, 0, 0, None)
    assert (api.request_header_version(0), api.response_header_version(0)) == (1, 0)
    body = {
        "timeout_ms": 3000,
        "validate_only": True,
        "topics": [{"name": "t", "partitions": [{"index": 0, "offset": 40}, {"index": 4, "offset": 0}]}],
    }
    frame = encode_request(request_header(ApiKey.TRUNCATE_PARTITIONS, 0, 6, "c"), body)
    expected = (
        struct.pack(">hhih", 1001, 0, 6, 1)
        + b"c"
        + struct.pack(">ib", 3000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 2)
        + struct.pack(">iq", 0, 40)
        + struct.pack(">iq", 4, 0)
    )
    assert frame == struct.pack(">i", len(expected)) + expected

    response = (
        struct.pack(">ii", 9, 0)  # correlation id, throttle_time_ms
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 2)
        + struct.pack(">ihh", 0, 1, 2)
        + b"no"
        + struct.pack(">ib", -1, 0)
        + struct.pack(">qqq", 5, 30, 30)
        + struct.pack(">ihh", 4, 0, -1)
        + struct.pack(">ib", 8, 1)
        + struct.pack(">qqq", 0, 9, 9)
    )
    correlation, decoded = decode_response(ApiKey.TRUNCATE_PARTITIONS, 0, response)
    assert correlation == 9
    (topic,) = decoded.topics
    assert [
        (
            p.index,
            p.error_code,
            p.error_message,
            p.leader_epoch,
            p.truncated,
            p.log_start_offset,
            p.log_end_offset,
            p.high_watermark,
        )
        for p in topic.partitions
    ] == [(0, 1, "no", -1, False, 5, 30, 30), (4, 0, None, 8, True, 0, 9, 9)]


def test_partition_states_is_strait_api_1002_in_plain_kafka_encodings() -> None:
    # Request: controller_id int32, controller_epoch int32, topics [name string, topic_id string,
    # partitions [index int32, version int32, state bytes]]. Response: throttle_time_ms int32,
    # error_code int16, error_message nullable string, applied int32.
    api = schema(ApiKey.PARTITION_STATES)
    assert (api.api_key, api.min_version, api.max_version, api.flexible_from) == (1002, 0, 0, None)
    body = {
        "controller_id": 2,
        "controller_epoch": 5,
        "topics": [{"name": "t", "topic_id": "id", "partitions": [{"index": 1, "version": 3, "state": b"{}"}]}],
    }
    frame = encode_request(request_header(ApiKey.PARTITION_STATES, 0, 6, "c"), body)
    expected = (
        struct.pack(">hhih", 1002, 0, 6, 1)
        + b"c"
        + struct.pack(">ii", 2, 5)
        + struct.pack(">ih", 1, 1)
        + b"t"
        + struct.pack(">h", 2)
        + b"id"
        + struct.pack(">iiii", 1, 1, 3, 2)
        + b"{}"
    )
    assert frame == struct.pack(">i", len(expected)) + expected
    response = struct.pack(">iihhi", 9, 0, 11, -1, 0)  # correlation id, throttle, STALE_CONTROLLER_EPOCH, null, applied
    correlation, decoded = decode_response(ApiKey.PARTITION_STATES, 0, response)
    assert (correlation, decoded.error_code, decoded.error_message, decoded.applied) == (9, 11, None, 0)
