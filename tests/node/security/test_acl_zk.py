"""Kafka's ZooKeeper layout for ACLs: znode paths, znode JSON, change notifications, in both directions."""

from __future__ import annotations

import json

import pytest

from node.security._acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from node.security._acl_zk import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    ROOT_PATHS,
    TYPE_PATHS,
    acl_path,
    change_notification,
    decode_acls,
    encode_acls,
    parse_change_notification,
    pattern_from_path,
)

pytestmark = pytest.mark.unit

LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
OPERATION_NAMES = {
    Op.ALL: "All",
    Op.READ: "Read",
    Op.WRITE: "Write",
    Op.CREATE: "Create",
    Op.DELETE: "Delete",
    Op.ALTER: "Alter",
    Op.DESCRIBE: "Describe",
    Op.CLUSTER_ACTION: "ClusterAction",
    Op.DESCRIBE_CONFIGS: "DescribeConfigs",
    Op.ALTER_CONFIGS: "AlterConfigs",
    Op.IDEMPOTENT_WRITE: "IdempotentWrite",
    Op.CREATE_TOKENS: "CreateTokens",
    Op.DESCRIBE_TOKENS: "DescribeTokens",
}


# -- paths --------------------------------------------------------------------------------------


@pytest.mark.parametrize("resource_type", list(TYPE_NAMES))
def test_paths_of_every_resource_type(resource_type: ResourceType) -> None:
    type_name = TYPE_NAMES[resource_type]
    literal = ResourcePattern(resource_type, "my.name-1", LITERAL)
    prefixed = ResourcePattern(resource_type, "my.", PREFIXED)
    assert acl_path(literal) == f"/kafka-acl/{type_name}/my.name-1"
    assert acl_path(prefixed) == f"/kafka-acl-extended/prefixed/{type_name}/my."
    assert pattern_from_path(acl_path(literal)) == literal
    assert pattern_from_path(acl_path(prefixed)) == prefixed


def test_the_wildcard_and_the_cluster_paths() -> None:
    assert acl_path(ResourcePattern(ResourceType.TOPIC, "*", LITERAL)) == "/kafka-acl/Topic/*"
    assert (
        acl_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LITERAL)) == "/kafka-acl/Cluster/kafka-cluster"
    )
    assert pattern_from_path("/kafka-acl/Topic/*") == ResourcePattern(ResourceType.TOPIC, "*", LITERAL)


def test_pattern_from_path_reads_names_spelled_in_any_case() -> None:
    expected = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LITERAL)
    assert pattern_from_path("/kafka-acl/TRANSACTIONAL_ID/tx") == expected


@pytest.mark.parametrize(
    "pattern",
    [
        ResourcePattern(ResourceType.ANY, "x", LITERAL),
        ResourcePattern(ResourceType.UNKNOWN, "x", LITERAL),
        ResourcePattern(ResourceType.TOPIC, "x", PatternType.MATCH),
        ResourcePattern(ResourceType.TOPIC, "x", PatternType.ANY),
        ResourcePattern(ResourceType.GROUP, "a/b", LITERAL),
        ResourcePattern(ResourceType.GROUP, "", PREFIXED),
        ResourcePattern(ResourceType.GROUP, "..", LITERAL),
    ],
)
def test_acl_path_refuses_what_cannot_be_stored(pattern: ResourcePattern) -> None:
    with pytest.raises(ValueError, match="cannot be stored"):
        acl_path(pattern)


@pytest.mark.parametrize(
    "path",
    [
        "/kafka-acl",
        "/kafka-acl/Topic",
        "/kafka-acl/Topic/",
        "/kafka-acl/Topic/a/b",
        "/kafka-acl-extended/prefixed/Topic/",
        "/kafka-acl-extended/Topic/x",
        "/kafka-acl-changes/Topic/x",
        "/brokers/topics/x",
        "kafka-acl/Topic/x",
    ],
)
def test_pattern_from_path_refuses_other_paths(path: str) -> None:
    with pytest.raises(ValueError, match="not an ACL znode"):
        pattern_from_path(path)


def test_pattern_from_path_refuses_an_unknown_resource_type() -> None:
    with pytest.raises(ValueError, match="'Queue' is not a known ResourceType"):
        pattern_from_path("/kafka-acl/Queue/x")


def test_root_paths_are_kafkas_and_parents_come_first() -> None:
    assert {"/kafka-acl", "/kafka-acl-extended/prefixed", "/kafka-acl-changes", "/kafka-acl-extended-changes"} <= set(
        ROOT_PATHS
    )
    assert set(TYPE_PATHS) <= set(ROOT_PATHS)
    assert "/kafka-acl/Topic" in TYPE_PATHS
    assert "/kafka-acl-extended/prefixed/TransactionalId" in TYPE_PATHS
    assert len(TYPE_PATHS) == 2 * len(TYPE_NAMES)
    seen: set[str] = set()
    for path in ROOT_PATHS:
        parent = path.rsplit("/", 1)[0]
        assert parent == "" or parent in seen, path
        seen.add(path)
    assert len(seen) == len(ROOT_PATHS)


# -- znode data ---------------------------------------------------------------------------------


def test_encode_writes_kafkas_json() -> None:
    entry = AccessControlEntry("User:alice", "*", Op.READ, ALLOW)
    assert encode_acls([entry]) == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
    )


def test_encode_is_sorted_and_stable() -> None:
    entries = [
        AccessControlEntry("User:bob", "*", Op.WRITE, DENY),
        AccessControlEntry("User:alice", "10.0.0.1", Op.IDEMPOTENT_WRITE, ALLOW),
        AccessControlEntry("User:alice", "*", Op.DESCRIBE_CONFIGS, ALLOW),
    ]
    data = encode_acls(entries)
    assert data == encode_acls(reversed(entries)) == encode_acls([*entries, entries[0]])
    acls = json.loads(data)["acls"]
    assert [a["principal"] for a in acls] == ["User:alice", "User:alice", "User:bob"]
    assert [a["operation"] for a in acls] == ["DescribeConfigs", "IdempotentWrite", "Write"]
    assert acls[2]["permissionType"] == "Deny"


def test_encode_empty_and_refusals() -> None:
    assert decode_acls(encode_acls([])) == frozenset()
    with pytest.raises(ValueError, match="filter value"):
        encode_acls([AccessControlEntry("User:a", "*", Op.ANY, ALLOW)])
    with pytest.raises(ValueError, match="filter value"):
        encode_acls([AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.ANY)])


def test_every_operation_and_permission_round_trips_by_kafkas_name() -> None:
    entries = {
        AccessControlEntry("User:alice", "*", operation, permission)
        for operation in OPERATION_NAMES
        for permission in (ALLOW, DENY)
    }
    data = encode_acls(entries)
    assert decode_acls(data) == entries
    written = {(a["operation"], a["permissionType"]) for a in json.loads(data)["acls"]}
    assert written == {(name, p) for name in OPERATION_NAMES.values() for p in ("Allow", "Deny")}


def test_decode_reads_json_kafka_wrote() -> None:
    # As Kafka's tools leave it: spaces, any key order, several entries.
    data = b"""{"version": 1, "acls": [
        {"host": "*", "permissionType": "Allow", "operation": "Read", "principal": "User:alice"},
        {"principal": "User:CN=svc,O=acme", "host": "192.168.0.4", "operation": "ClusterAction",
         "permissionType": "Deny"},
        {"principal": "User:*", "permissionType": "Allow", "operation": "All", "host": "*"}]}"""
    assert decode_acls(data) == {
        AccessControlEntry("User:alice", "*", Op.READ, ALLOW),
        AccessControlEntry("User:CN=svc,O=acme", "192.168.0.4", Op.CLUSTER_ACTION, DENY),
        AccessControlEntry("User:*", "*", Op.ALL, ALLOW),
    }


def test_decode_empty_data_is_no_acls() -> None:
    assert decode_acls(b"") == frozenset()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not UTF-8 JSON"),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"acls": []}', "version None"),
        (b'{"version": 2, "acls": []}', "version 2"),
        (b'{"version": true, "acls": []}', "version True"),
        (b'{"version": 1}', "no 'acls' list"),
        (b'{"version": 1, "acls": {}}', "no 'acls' list"),
        (b'{"version": 1, "acls": ["User:a"]}', "entry 0 is not a JSON object"),
        (
            b'{"version":1,"acls":[{"permissionType":"Allow","operation":"Read","host":"*"}]}',
            "entry 0 has no string 'principal'",
        ),
        (
            b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
            "entry 0: principal 'alice'",
        ),
        (
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}',
            "entry 0: operation 'Fly' is not a known AclOperation",
        ),
        (
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Any","host":"*"}]}',
            "operation 'Any'",
        ),
        (
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}',
            "entry 0: permissionType 'Maybe'",
        ),
        (
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"},'
            b'{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
            "entry 1 has no string 'host'",
        ),
    ],
)
def test_decode_refuses_malformed_data_naming_the_fault(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_acls(data)


# -- change notifications --------------------------------------------------------------------------


def test_a_literal_change_notification_is_kafkas() -> None:
    pattern = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-1", LITERAL)
    assert change_notification(pattern) == ("/kafka-acl-changes/acl_changes_", b"TRANSACTIONAL_ID:tx-1")


def test_a_prefixed_change_notification_is_kafkas() -> None:
    prefix, data = change_notification(ResourcePattern(ResourceType.TOPIC, "pay", PREFIXED))
    assert prefix == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "TOPIC", "name": "pay", "patternType": "PREFIXED"}


@pytest.mark.parametrize("pattern_type", [LITERAL, PREFIXED])
@pytest.mark.parametrize("resource_type", list(TYPE_NAMES))
def test_change_notifications_round_trip(resource_type: ResourceType, pattern_type: PatternType) -> None:
    pattern = ResourcePattern(resource_type, "name:with:colons", pattern_type)
    prefix, data = change_notification(pattern)
    assert parse_change_notification(prefix, data) == pattern
    assert parse_change_notification(prefix + "0000000042", data) == pattern


@pytest.mark.parametrize(
    ("path", "data", "pattern"),
    [
        (LITERAL_CHANGES, b"Topic:orders", ResourcePattern(ResourceType.TOPIC, "orders", LITERAL)),
        (LITERAL_CHANGES, b"TransactionalId:tx", ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LITERAL)),
        (LITERAL_CHANGES, b"Topic:*", ResourcePattern(ResourceType.TOPIC, "*", LITERAL)),
        (
            f"{EXTENDED_CHANGES}/acl_changes_0000000003",
            b'{"version":1,"resourceType":"Group","name":"g-","patternType":"PREFIXED"}',
            ResourcePattern(ResourceType.GROUP, "g-", PREFIXED),
        ),
        (
            EXTENDED_CHANGES,
            b'{"patternType": "Prefixed", "name": "x", "resourceType": "Topic", "version": 1}',
            ResourcePattern(ResourceType.TOPIC, "x", PREFIXED),
        ),
    ],
)
def test_change_notifications_of_either_kafka_era_parse(path: str, data: bytes, pattern: ResourcePattern) -> None:
    assert parse_change_notification(path, data) == pattern


@pytest.mark.parametrize(
    ("path", "data", "message"),
    [
        (LITERAL_CHANGES, b"orders", "not of the form ResourceType:name"),
        (LITERAL_CHANGES, b"Topic:", "not of the form ResourceType:name"),
        (LITERAL_CHANGES, b"Queue:x", "'Queue' is not a known ResourceType"),
        (LITERAL_CHANGES, b"\xff", "not UTF-8"),
        (EXTENDED_CHANGES, b"Topic:x", "not UTF-8 JSON"),
        (EXTENDED_CHANGES, b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}', "version 2"),
        (EXTENDED_CHANGES, b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}', "patternType"),
        (EXTENDED_CHANGES, b'{"version":1,"resourceType":"ANY","name":"x","patternType":"PREFIXED"}', "resourceType"),
        (EXTENDED_CHANGES, b'{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}', "no string 'name'"),
        (EXTENDED_CHANGES, b'{"version":1,"resourceType":"TOPIC","name":"","patternType":"PREFIXED"}', "empty name"),
        ("/config/changes/config_change_0000000001", b"Topic:x", "under neither"),
        ("/kafka-acl-changes-other", b"Topic:x", "under neither"),
    ],
)
def test_malformed_change_notifications_are_refused(path: str, data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_change_notification(path, data)


def test_change_notification_refuses_unstorable_patterns() -> None:
    with pytest.raises(ValueError, match="cannot be stored"):
        change_notification(ResourcePattern(ResourceType.TOPIC, "x", PatternType.MATCH))
