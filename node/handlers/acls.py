"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): the site's ACLs, as Kafka's ``AclApis`` serves them.

Authorisation: DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER on it;
refused, DescribeAcls answers CLUSTER_AUTHORIZATION_FAILED at the top level and the other two in
every result. Without an authorizer (``authorizer.class.name`` unset, or no security store) each
answers SECURITY_DISABLED, as Kafka does: ACLs that nothing on this node would enforce are not
written or shown through it.

CreateAcls checks each binding (``validate_binding``; INVALID_REQUEST naming what is wrong) and
stores the valid ones in one write; DeleteAcls removes, filter by filter in order, what each
filter matches, so a binding matched by two filters is reported by the first. v0 of all three
knows only LITERAL patterns: the schema reads its requests as LITERAL, and a LITERAL filter never
matches a PREFIXED binding, so a v0 answer never holds one it cannot express. A filter Kafka
refuses while parsing (an UNKNOWN type, operation or permission) is answered INVALID_REQUEST in
its own result instead of closing the connection.

A failure of the store (ZooKeeper unreachable) answers UNKNOWN_SERVER_ERROR naming it, as Kafka's
``AclAuthorizer`` answers its own storage failures; the bindings of a failed CreateAcls write
may or may not have been stored, and a DescribeAcls tells.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    validate_binding,
    validate_filter,
)
from node.security._store import SecurityStore, SecurityStoreError

from ._services import NO_AUTHORIZER, SecurityServices, denied

log = logging.getLogger("strait.node.acls")

NO_AUTHORIZER_MESSAGE = "No Authorizer is configured on this broker (authorizer.class.name is not set)"


@dataclass(frozen=True, slots=True)
class AclServices:
    security: SecurityServices = NO_AUTHORIZER


def _store(services: AclServices) -> SecurityStore | None:
    """The store ACLs are read from and written to; None when this node has no authorizer."""
    security = services.security
    return security.store if security.authorizer_enabled else None


def _filter(item: Struct) -> AclBindingFilter:
    """The filter of a DescribeAcls request or of one DeleteAcls filter (codes Kafka does not know are UNKNOWN)."""
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType(item.resource_type_filter), item.resource_name_filter, PatternType(item.pattern_type_filter)
        ),
        AccessControlEntryFilter(
            item.principal_filter,
            item.host_filter,
            AclOperation(item.operation),
            AclPermissionType(item.permission_type),
        ),
    )


def _binding(creation: Struct) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(creation.resource_type),
            creation.resource_name,
            PatternType(creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            AclOperation(creation.operation),
            AclPermissionType(creation.permission_type),
        ),
    )


def _describe_resources(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    """Bindings (sorted) grouped by pattern, as DescribeAcls answers them."""
    resources: dict[ResourcePattern, list[dict[str, Any]]] = {}
    for binding in bindings:
        entry = binding.entry
        resources.setdefault(binding.pattern, []).append(
            {
                "principal": entry.principal,
                "host": entry.host,
                "operation": entry.operation,
                "permission_type": entry.permission,
            }
        )
    return [
        {
            "resource_type": pattern.resource_type,
            "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type,
            "acls": acls,
        }
        for pattern, acls in resources.items()
    ]


def _matching(binding: AclBinding) -> dict[str, Any]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission,
    }


async def handle_describe_acls(services: AclServices, request: Request) -> dict[str, Any]:
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": []}
    if not services.security.allowed(request, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        refusal = denied(request, AclOperation.DESCRIBE, ResourceType.CLUSTER)
        body.update(error_code=refusal.code, error_message=refusal.message)
        return body
    store = _store(services)
    if store is None:
        body.update(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER_MESSAGE)
        return body
    acl_filter = _filter(request.body)
    try:
        validate_filter(acl_filter)
    except AclError as exc:
        body.update(error_code=exc.code, error_message=exc.message)
        return body
    body["resources"] = _describe_resources(store.authorizer.bindings(acl_filter))
    return body


async def handle_create_acls(services: AclServices, request: Request) -> dict[str, Any]:
    creations = request.body.creations
    store, refusal = _altering(services, request)
    if store is not None:
        return {"throttle_time_ms": 0, "results": await _create(store, request, creations)}
    code, message = refusal
    return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message} for _ in creations]}


def _altering(services: AclServices, request: Request) -> tuple[SecurityStore | None, tuple[int, str]]:
    """The store for a CreateAcls or DeleteAcls (ALTER on the cluster), or None and the refusal
    every entry of the answer carries."""
    store = _store(services)
    if not services.security.allowed(request, AclOperation.ALTER, ResourceType.CLUSTER):
        error = denied(request, AclOperation.ALTER, ResourceType.CLUSTER)
        return None, (int(error.code), error.message)
    if store is None:
        return None, (ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE)
    return store, (ErrorCode.NONE, "")


async def _create(store: SecurityStore, request: Request, creations: list[Struct]) -> list[dict[str, Any]]:
    """One result per creation, in order: the valid bindings are stored in one write."""
    results: list[dict[str, Any]] = [{"error_code": 0, "error_message": None} for _ in creations]
    valid: list[tuple[dict[str, Any], AclBinding]] = []
    for creation, result in zip(creations, results, strict=True):
        binding = _binding(creation)
        try:
            validate_binding(binding)
        except AclError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
            continue
        valid.append((result, binding))
    if not valid:
        return results
    try:
        await store.add_acls([binding for _, binding in valid])
    except SecurityStoreError as exc:
        log.warning("CreateAcls from %s: storing %d ACLs failed: %s", request.principal, len(valid), exc)
        for result, _ in valid:
            result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"storing the ACL failed: {exc}")
        return results
    for _, binding in valid:
        log.info("principal %s added ACL %s", request.principal, binding)
    return results


async def handle_delete_acls(services: AclServices, request: Request) -> dict[str, Any]:
    filters = request.body.filters
    store, (code, message) = _altering(services, request)
    if store is not None:
        return {"throttle_time_ms": 0, "filter_results": [await _delete(store, request, item) for item in filters]}
    results = [{"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]
    return {"throttle_time_ms": 0, "filter_results": results}


async def _delete(store: SecurityStore, request: Request, item: Struct) -> dict[str, Any]:
    """One DeleteAcls filter's result: the bindings it removed, or why it removed none."""
    result: dict[str, Any] = {"error_code": 0, "error_message": None, "matching_acls": []}
    acl_filter = _filter(item)
    try:
        validate_filter(acl_filter)
        removed = await store.remove_acls(acl_filter)
    except AclError as exc:
        result.update(error_code=exc.code, error_message=exc.message)
        return result
    except SecurityStoreError as exc:
        log.warning("DeleteAcls from %s: removing ACLs failed: %s", request.principal, exc)
        result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"removing ACLs failed: {exc}")
        return result
    for binding in removed:
        log.info("principal %s removed ACL %s", request.principal, binding)
    result["matching_acls"] = [_matching(binding) for binding in removed]
    return result
