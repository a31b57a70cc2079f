"""node.client's ACL and SCRAM verbs over a fake Route: what they send and how they read answers."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace as NS

import pytest
import trio

from node.client import AdminClient, ClientError
from node.protocol import ApiKey, ErrorCode
from node.security._acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from node.security._scram import SALT_SIZE
from tests.node.client.test_verbs import FakeRoute

ALICE_WRITES_ORDERS = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED),
    AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
)
BOB_DENIED_GROUP = AclBinding(
    ResourcePattern(ResourceType.GROUP, "billing", PatternType.LITERAL),
    AccessControlEntry("User:bob", "10.0.0.1", AclOperation.READ, AclPermissionType.DENY),
)
ALICE_FILTER = AclBindingFilter(
    ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH),
    AccessControlEntryFilter("User:alice"),
)


def wire(binding: AclBinding) -> dict[str, object]:
    """A binding as DeleteAcls answers it (and, less the error fields, as DescribeAcls does)."""
    pattern, entry = binding.pattern, binding.entry
    return {
        "error_code": 0,
        "error_message": None,
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission,
    }


def test_describe_acls_sends_the_filter_and_reads_bindings_back() -> None:
    route = FakeRoute(version=1)
    orders, billing = wire(ALICE_WRITES_ORDERS), wire(BOB_DENIED_GROUP)
    route.answers.append(
        NS(
            error_code=0,
            error_message=None,
            resources=[
                NS(resource_type=2, resource_name="orders", pattern_type=4, acls=[NS(**orders)]),
                NS(resource_type=3, resource_name="billing", pattern_type=3, acls=[NS(**billing)]),
            ],
        )
    )
    found = trio.run(AdminClient(route).describe_acls, ALICE_FILTER)
    assert found == sorted([ALICE_WRITES_ORDERS, BOB_DENIED_GROUP])
    api_key, _, body = route.sent[0]
    assert api_key == ApiKey.DESCRIBE_ACLS
    assert body == {
        "resource_type_filter": ResourceType.TOPIC,
        "resource_name_filter": "orders",
        "pattern_type_filter": PatternType.MATCH,
        "principal_filter": "User:alice",
        "host_filter": None,
        "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }


def test_describe_acls_raises_the_nodes_code_and_message() -> None:
    route = FakeRoute(version=1)
    route.answers.append(NS(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer", resources=[]))
    with pytest.raises(ClientError, match="describing ACLs on site test: SECURITY_DISABLED: No Authorizer") as err:
        trio.run(AdminClient(route).describe_acls, AclBindingFilter())
    assert err.value.code == ErrorCode.SECURITY_DISABLED


def test_a_v0_node_is_not_sent_a_pattern_type_it_cannot_express() -> None:
    route = FakeRoute(version=0)
    with pytest.raises(ClientError, match="v0 only, which know LITERAL patterns only \\(not MATCH\\)") as err:
        trio.run(AdminClient(route).describe_acls, ALICE_FILTER)
    assert err.value.code == ErrorCode.UNSUPPORTED_VERSION and route.sent == []
    with pytest.raises(ClientError, match="creating ACL ALLOW User:alice WRITE on TOPIC 'orders' \\(PREFIXED\\)"):
        trio.run(AdminClient(route).create_acls, [ALICE_WRITES_ORDERS])


def test_create_acls_sends_every_binding_and_names_the_first_refused() -> None:
    route = FakeRoute(version=1)
    route.answers.append(NS(results=[NS(error_code=0, error_message=None)] * 2))
    trio.run(AdminClient(route).create_acls, [ALICE_WRITES_ORDERS, BOB_DENIED_GROUP])
    creations = route.sent[0][2]["creations"]
    assert route.sent[0][0] == ApiKey.CREATE_ACLS
    assert creations[1] == {
        "resource_type": ResourceType.GROUP,
        "resource_name": "billing",
        "resource_pattern_type": PatternType.LITERAL,
        "principal": "User:bob",
        "host": "10.0.0.1",
        "operation": AclOperation.READ,
        "permission_type": AclPermissionType.DENY,
    }
    route.answers.append(
        NS(
            results=[
                NS(error_code=0, error_message=None),
                NS(error_code=ErrorCode.INVALID_REQUEST, error_message="host 'x' is neither"),
            ]
        )
    )
    with pytest.raises(ClientError) as err:
        trio.run(AdminClient(route).create_acls, [ALICE_WRITES_ORDERS, BOB_DENIED_GROUP])
    assert str(err.value) == (
        "creating ACL DENY User:bob READ on GROUP 'billing' (LITERAL) from host 10.0.0.1 on site test: "
        "INVALID_REQUEST: host 'x' is neither"
    )
    assert err.value.code == ErrorCode.INVALID_REQUEST


def test_create_acls_of_nothing_sends_nothing() -> None:
    route = FakeRoute()
    trio.run(AdminClient(route).create_acls, [])
    assert route.sent == []


def test_delete_acls_gives_what_each_filter_removed_and_names_a_refused_filter() -> None:
    route = FakeRoute(version=1)
    route.answers.append(
        NS(
            filter_results=[
                NS(error_code=0, error_message=None, matching_acls=[NS(**wire(ALICE_WRITES_ORDERS))]),
                NS(error_code=0, error_message=None, matching_acls=[]),
            ]
        )
    )
    removed = trio.run(AdminClient(route).delete_acls, [ALICE_FILTER, AclBindingFilter()])
    assert removed == [[ALICE_WRITES_ORDERS], []]
    filters = route.sent[0][2]["filters"]
    assert [f["resource_type_filter"] for f in filters] == [ResourceType.TOPIC, ResourceType.ANY]
    route.answers.append(
        NS(
            filter_results=[
                NS(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="denied", matching_acls=[])
            ]
        )
    )
    with pytest.raises(ClientError, match="deleting the ACLs matching ANY 'User:alice' ANY on TOPIC 'orders'") as err:
        trio.run(AdminClient(route).delete_acls, [ALICE_FILTER])
    assert err.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_describe_scram_reads_mechanisms_and_iterations_or_names_the_user() -> None:
    route = FakeRoute()
    route.answers.append(
        NS(
            error_code=0,
            error_message=None,
            results=[
                NS(
                    user="carol",
                    error_code=0,
                    error_message=None,
                    credential_infos=[NS(mechanism=1, iterations=4096), NS(mechanism=2, iterations=8192)],
                )
            ],
        )
    )
    assert trio.run(AdminClient(route).describe_scram, None) == {
        "carol": {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 8192}
    }
    assert route.sent[0][0] == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS and route.sent[0][2] == {"users": None}
    route.answers.append(
        NS(
            error_code=0,
            error_message=None,
            results=[NS(user="dave", error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=None, credential_infos=[])],
        )
    )
    with pytest.raises(ClientError, match="SCRAM credentials of user 'dave' on site test: RESOURCE_NOT_FOUND"):
        trio.run(AdminClient(route).describe_scram, ["dave"])
    assert route.sent[1][2] == {"users": [{"name": "dave"}]}


def test_alter_scram_sends_a_fresh_salt_and_the_salted_password_never_the_password() -> None:
    route = FakeRoute()
    route.answers += [NS(results=[NS(user="carol", error_code=0, error_message=None)])] * 2
    admin = AdminClient(route)
    upsert = [("carol", "SCRAM-SHA-512", "carol-secret", 4096)]
    trio.run(lambda: admin.alter_scram(upsert, [("carol", "SCRAM-SHA-256")]))
    trio.run(lambda: admin.alter_scram(upsert))
    first, second = route.sent[0][2], route.sent[1][2]
    assert route.sent[0][0] == ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    assert first["deletions"] == [{"name": "carol", "mechanism": 1}]
    (sent,) = first["upsertions"]
    assert (sent["name"], sent["mechanism"], sent["iterations"]) == ("carol", 2, 4096)
    assert len(sent["salt"]) == SALT_SIZE and sent["salt"] != second["upsertions"][0]["salt"]
    assert sent["salted_password"] == hashlib.pbkdf2_hmac("sha512", b"carol-secret", sent["salt"], 4096)
    assert b"carol-secret" not in repr(route.sent).encode()


def test_alter_scram_names_the_refused_user_and_refuses_bad_input_before_sending() -> None:
    route = FakeRoute()
    route.answers.append(
        NS(
            results=[
                NS(user="carol", error_code=0, error_message=None),
                NS(user="dave", error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message="no SCRAM-SHA-256 credential"),
            ]
        )
    )
    admin = AdminClient(route)
    with pytest.raises(ClientError) as err:
        trio.run(lambda: admin.alter_scram([("carol", "SCRAM-SHA-256", "pw", 4096)], [("dave", "SCRAM-SHA-256")]))
    assert str(err.value) == (
        "altering the SCRAM credentials of user 'dave' on site test: RESOURCE_NOT_FOUND: no SCRAM-SHA-256 credential"
    )
    assert err.value.code == ErrorCode.RESOURCE_NOT_FOUND
    with pytest.raises(ValueError, match=r"SCRAM iterations 100 for user 'carol' is outside 4096\.\.16384"):
        trio.run(lambda: admin.alter_scram([("carol", "SCRAM-SHA-256", "pw", 100)]))
    with pytest.raises(ValueError, match="unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        trio.run(lambda: admin.alter_scram([], [("carol", "SCRAM-SHA-1")]))
    trio.run(lambda: admin.alter_scram([], []))
    assert len(route.sent) == 1
