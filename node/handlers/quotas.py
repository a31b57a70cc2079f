"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546, as Kafka's broker serves them.

Authorisation (Kafka's): DESCRIBE_CONFIGS on the cluster to describe, ALTER_CONFIGS on it to
alter. Refused, Describe answers CLUSTER_AUTHORIZATION_FAILED with no entries, Alter the same
code in every entry.

Describe: a filter's components each name an entity type (``user``, ``client-id``) at most once
and match an exact name (0), the default (1) or any name (2); ``strict`` leaves out entities with
types the filter does not name. Only entities holding a quota are listed. A filter that breaks
these rules is INVALID_REQUEST with a message naming the fault, and no entries.

Alter: each entry is answered on its own, in the request's order. An entity that is empty, names
a type twice, an unknown type, ``ip`` (connection quotas, not served) or an empty name; an unknown
key; a key named twice; a value that is not a positive number (or a fraction for a byte rate):
INVALID_REQUEST naming it, and nothing of that entry is written. ``validate_only`` checks and
writes nothing. A write that fails in ZooKeeper is UNKNOWN_SERVER_ERROR naming the entity. Values
are written to ZooKeeper (``node.coordination``'s quota store) and every node's copy follows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from node.protocol import ErrorCode
from node.quotas import (
    QUOTA_KEYS,
    FilterComponent,
    QuotaEntity,
    QuotaError,
    Quotas,
    check_filter,
    check_value,
    entity,
    matches,
)
from node.request import Request
from node.security._acl import AclOperation, ResourceType

from ._services import NO_AUTHORIZER, SecurityServices, denied

log = logging.getLogger("strait.node.quotas")

NO_STORE_MESSAGE = "no client quota store is wired to this broker"


class QuotaStore(Protocol):
    """Where the site's quotas are kept (``node.coordination.ZkQuotaStore``)."""

    def quotas(self) -> Quotas:
        """Every entity's quotas, as this node knows them now."""
        ...

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        """Set (a value) or remove (None) keys of ``entity``; raises an Exception naming what failed."""
        ...


@dataclass(frozen=True, slots=True)
class QuotaServices:
    store: QuotaStore | None
    security: SecurityServices = NO_AUTHORIZER


def _wire_entity(value: QuotaEntity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": name} for t, name in value]


# -- DescribeClientQuotas ------------------------------------------------------------------------


async def handle_describe_client_quotas(services: QuotaServices, request: Request) -> dict[str, Any]:
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": None}
    if not services.security.allowed(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        error = denied(request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        body.update(error_code=int(error.code), error_message=error.message)
        return body
    if services.store is None:
        body.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=NO_STORE_MESSAGE)
        return body
    try:
        by_type = check_filter(
            FilterComponent(str(c.entity_type), int(c.match_type), c.match) for c in request.body.components
        )
    except QuotaError as exc:
        body.update(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc))
        return body
    strict = bool(request.body.strict)
    quotas = services.store.quotas()
    body["entries"] = [
        {
            "entity": _wire_entity(found),
            "values": [{"key": key, "value": float(value)} for key, value in sorted(quotas[found].items())],
        }
        for found in sorted(quotas, key=_order)
        if quotas[found] and matches(by_type, strict, found)
    ]
    return body


def _order(value: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((t, name is not None, name or "") for t, name in value)


# -- AlterClientQuotas -----------------------------------------------------------------------------


async def handle_alter_client_quotas(services: QuotaServices, request: Request) -> dict[str, Any]:
    entries = list(request.body.entries)
    results: list[dict[str, Any]] = []
    refusal: tuple[int, str] | None = None
    if not services.security.allowed(request, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
        error = denied(request, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
        refusal = (int(error.code), error.message)
    elif services.store is None:
        refusal = (ErrorCode.UNKNOWN_SERVER_ERROR, NO_STORE_MESSAGE)
    for entry in entries:
        wire = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        code, message = refusal or await _alter_one(services, entry, bool(request.body.validate_only))
        results.append({"error_code": code, "error_message": message, "entity": wire})
    return {"throttle_time_ms": 0, "entries": results}


async def _alter_one(services: QuotaServices, entry: Any, validate_only: bool) -> tuple[int, str | None]:
    """(error code, message) of one entry, written unless ``validate_only``."""
    try:
        target = entity((str(e.entity_type), e.entity_name) for e in entry.entity)
        changes = _changes(entry.ops)
    except QuotaError as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    if validate_only:
        return ErrorCode.NONE, None
    store = services.store
    assert store is not None
    try:
        await store.alter(target, changes)
    except Exception as exc:
        log.warning("AlterClientQuotas failed: %s", exc)
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"changing the quotas of the entity failed: {exc}"
    return ErrorCode.NONE, None


def _changes(ops: Any) -> dict[str, float | None]:
    """key -> new value (None: remove); QuotaError for an unknown or repeated key or a bad value."""
    changes: dict[str, float | None] = {}
    for op in ops:
        key = str(op.key)
        if key in changes:
            raise QuotaError(f"Duplicate quota key {key} in one entity's ops")
        if op.remove:
            if key not in QUOTA_KEYS:
                raise QuotaError(f"Invalid configuration key {key}")
            changes[key] = None
        else:
            changes[key] = check_value(key, float(op.value))
    return changes
