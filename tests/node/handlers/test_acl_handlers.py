"""DescribeAcls, CreateAcls and DeleteAcls over a fake store: results, refusals and Kafka's error codes."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER, SecurityServices
from node.handlers.acls import AclServices, handle_create_acls, handle_delete_acls, handle_describe_acls
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.node.handlers.fakes import ALICE, BOB, FakeSecurityStore, acl, request, secured

pytestmark = pytest.mark.unit

ADMIN = "User:admin"  # holds ALTER and DESCRIBE on the cluster
ANY = 1  # the ANY code of resource types, operations, permissions and pattern types in filters
TOPIC = int(ResourceType.TOPIC)
LITERAL, PREFIXED = int(PatternType.LITERAL), int(PatternType.PREFIXED)
READ, WRITE = int(AclOperation.READ), int(AclOperation.WRITE)
ALLOW, DENY = int(AclPermissionType.ALLOW), int(AclPermissionType.DENY)


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def admin_store() -> tuple[AclServices, FakeSecurityStore]:
    security, store = secured(acl(ADMIN, AclOperation.ALTER), acl(ADMIN, AclOperation.DESCRIBE))
    return AclServices(security), store


def creation(
    name: str,
    *,
    principal: str = ALICE,
    operation: int = READ,
    pattern: int = LITERAL,
    host: str = "*",
    kind: int = TOPIC,
) -> dict[str, Any]:
    return {
        "resource_type": kind,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": ALLOW,
    }


def acl_filter(**fields: Any) -> dict[str, Any]:
    """A filter matching everything except what ``fields`` pin."""
    return {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    } | fields


def create(services: AclServices, *creations: dict[str, Any], principal: str = ADMIN, version: int = 1) -> list[Any]:
    body = {"creations": list(creations)}
    answer = run(handle_create_acls, services, request(ApiKey.CREATE_ACLS, version, body, principal=principal))
    return [(r["error_code"], r["error_message"]) for r in answer["results"]]


def describe(services: AclServices, principal: str = ADMIN, version: int = 1, **fields: Any) -> dict[str, Any]:
    body = acl_filter(**fields)
    return run(handle_describe_acls, services, request(ApiKey.DESCRIBE_ACLS, version, body, principal=principal))  # type: ignore[no-any-return]


def test_created_acls_are_stored_and_described_grouped_by_resource() -> None:
    services, store = admin_store()
    assert (
        create(
            services,
            creation("orders"),
            creation("orders", principal=BOB, operation=WRITE),
            creation("ord", pattern=PREFIXED),
        )
        == [(0, None)] * 3
    )
    assert store.authorizer.authorize(ALICE, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders-eu")

    answer = describe(services, resource_type_filter=TOPIC)
    assert (answer["error_code"], answer["error_message"]) == (0, None)
    resources = [
        (r["resource_name"], r["pattern_type"], [(a["principal"], a["operation"]) for a in r["acls"]])
        for r in answer["resources"]
    ]
    assert resources == [("ord", PREFIXED, [(ALICE, READ)]), ("orders", LITERAL, [(ALICE, READ), (BOB, WRITE)])]

    only_bob = describe(services, principal_filter=BOB)["resources"]
    assert [(r["resource_name"], len(r["acls"])) for r in only_bob] == [("orders", 1)]
    # MATCH: every pattern that applies to the name, literal and prefixed.
    matching = describe(services, resource_type_filter=TOPIC, resource_name_filter="orders", pattern_type_filter=2)
    assert [r["resource_name"] for r in matching["resources"]] == ["ord", "orders"]
    # v0 knows only LITERAL patterns: its filters never match a prefixed one.
    assert [r["resource_name"] for r in describe(services, version=0, resource_type_filter=TOPIC)["resources"]] == [
        "orders"
    ]


def test_create_acls_answers_invalid_request_per_binding_and_stores_the_valid_ones() -> None:
    services, store = admin_store()
    results = create(
        services,
        creation("orders"),
        creation("", operation=READ),
        creation("orders", principal="alice"),
        creation("orders", host="db.example.com"),
        creation("other-cluster", kind=int(ResourceType.CLUSTER), operation=int(AclOperation.ALTER)),
        creation("orders", operation=ANY),
    )
    assert [code for code, _ in results] == [0] + [ErrorCode.INVALID_REQUEST] * 5
    assert results[1][1] == "Invalid empty resource name"
    assert "kafka-cluster" in results[4][1]
    assert store.calls == [("add_acls", [acl(ALICE, AclOperation.READ, ResourceType.TOPIC, "orders")])]


def test_delete_acls_removes_what_each_filter_matches_first_filter_first() -> None:
    services, store = admin_store()
    create(services, creation("orders"), creation("orders", principal=BOB, operation=WRITE), creation("audit"))
    body = {
        "filters": [
            acl_filter(resource_type_filter=TOPIC, resource_name_filter="orders", principal_filter=BOB),
            acl_filter(resource_type_filter=TOPIC, resource_name_filter="orders"),
            acl_filter(resource_type_filter=TOPIC, resource_name_filter="orders"),
            acl_filter(operation=0),  # UNKNOWN: refused, as Kafka refuses such a filter
        ]
    }
    answer = run(handle_delete_acls, services, request(ApiKey.DELETE_ACLS, 1, body, principal=ADMIN))
    results = answer["filter_results"]
    assert [(r["error_code"], [(m["principal"], m["operation"]) for m in r["matching_acls"]]) for r in results] == [
        (0, [(BOB, WRITE)]),
        (0, [(ALICE, READ)]),
        (0, []),
        (ErrorCode.INVALID_REQUEST, []),
    ]
    assert "unknown entry filter" in results[3]["error_message"]
    assert [b.pattern.name for b in store.authorizer.bindings()] == ["audit", "kafka-cluster", "kafka-cluster"]


def test_the_acl_apis_need_describe_or_alter_on_the_cluster() -> None:
    services, store = admin_store()
    create(services, creation("orders"))
    store.calls.clear()

    refused = describe(services, principal=BOB)
    assert (refused["error_code"], refused["resources"]) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    assert refused["error_message"] == "User:bob is not authorized to DESCRIBE the cluster"
    assert (
        create(services, creation("x"), creation("y"), principal=BOB)
        == [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "User:bob is not authorized to ALTER the cluster")] * 2
    )
    body = {"filters": [acl_filter()]}
    deleted = run(handle_delete_acls, services, request(ApiKey.DELETE_ACLS, 1, body, principal=BOB))
    assert [(r["error_code"], r["matching_acls"]) for r in deleted["filter_results"]] == [
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    ]
    assert store.calls == [] and len(store.authorizer) == 3  # the admin's two and alice's


@pytest.mark.parametrize(
    "security",
    [NO_AUTHORIZER, SecurityServices(FakeSecurityStore(), authorizer_enabled=False)],
    ids=["no store", "no authorizer"],
)
def test_without_an_authorizer_the_acl_apis_answer_security_disabled(security: SecurityServices) -> None:
    services = AclServices(security)
    assert describe(services)["error_code"] == ErrorCode.SECURITY_DISABLED
    assert [code for code, _ in create(services, creation("orders"))] == [ErrorCode.SECURITY_DISABLED]
    deleted = run(handle_delete_acls, services, request(ApiKey.DELETE_ACLS, 1, {"filters": [acl_filter()]}))
    assert deleted["filter_results"][0]["error_code"] == ErrorCode.SECURITY_DISABLED


def test_a_store_failure_is_an_unknown_server_error_naming_it() -> None:
    services, store = admin_store()
    store.failing = "ZooKeeper is unreachable"
    ((code, message),) = create(services, creation("orders"))
    assert (code, message) == (ErrorCode.UNKNOWN_SERVER_ERROR, "storing the ACL failed: ZooKeeper is unreachable")
    deleted = run(
        handle_delete_acls, services, request(ApiKey.DELETE_ACLS, 1, {"filters": [acl_filter()]}, principal=ADMIN)
    )
    assert deleted["filter_results"][0]["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR


def test_a_deny_acl_created_through_the_api_takes_effect() -> None:
    services, store = admin_store()
    deny = creation("orders", principal=BOB, operation=READ) | {"permission_type": DENY}
    assert create(services, creation("orders", principal="User:*"), deny) == [(0, None), (0, None)]
    authorize = store.authorizer.authorize
    assert authorize(ALICE, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders")
    assert not authorize(BOB, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders")
    assert not authorize(ALICE, "10.0.0.1", AclOperation.READ, ResourceType.GROUP, "orders")
