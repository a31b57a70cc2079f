"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554, as Kafka's broker serves them.

Authorisation: DESCRIBE on the cluster to describe, ALTER on it to alter; refused, the top-level
error (Describe) and every named user's result carry CLUSTER_AUTHORIZATION_FAILED. Without a
security store both answer SECURITY_DISABLED: there is nowhere to read or keep credentials.

Describe: ``users`` null or empty lists every user holding a credential, sorted; a named user
without one is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (once). Only mechanisms
and iterations are shown, never salts or keys.

Alter (one result per user named, in the order first named; Kafka's ``alterUserScramCredentials``):

1. A user with an empty name (UNACCEPTABLE_CREDENTIAL), an unknown mechanism
   (UNSUPPORTED_SASL_MECHANISM), or an upsertion whose iterations are outside
   4096..16384 or whose salt or salted password do not fit the mechanism (UNACCEPTABLE_CREDENTIAL)
   fails whole: none of its changes are made.
2. A user naming the same mechanism twice (in deletions and upsertions together) fails whole with
   DUPLICATE_RESOURCE; one deletion and one upsertion of different mechanisms is fine.
3. A user deleting a credential it does not have fails whole with RESOURCE_NOT_FOUND.
4. The rest are applied, deletions first. Kafka writes a user's credentials as one znode; the
   store here takes one credential per call, so a store failure (UNKNOWN_SERVER_ERROR, naming
   it) can leave the calls before it for that user applied.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode, Struct
from node.request import Request
from node.security._acl import AclOperation, ResourceType
from node.security._scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
)
from node.security._store import SecurityStore, SecurityStoreError

from ._services import NO_AUTHORIZER, SecurityServices, denied

log = logging.getLogger("strait.node.scram")

# The wire codes of the mechanisms (Kafka's ``ScramMechanism.type``); 0 is UNKNOWN.
MECHANISM_CODES: dict[ScramMechanism, int] = {ScramMechanism.SCRAM_SHA_256: 1, ScramMechanism.SCRAM_SHA_512: 2}
_BY_CODE = {code: mechanism for mechanism, code in MECHANISM_CODES.items()}
_BY_NAME = {mechanism.mechanism_name: mechanism for mechanism in MECHANISM_CODES}

NO_STORE_MESSAGE = "no SCRAM credential store is configured on this broker"


@dataclass(frozen=True, slots=True)
class ScramServices:
    security: SecurityServices = NO_AUTHORIZER


def _distinct(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _refusal(services: ScramServices, request: Request, operation: AclOperation) -> tuple[int, str] | None:
    """(code, message) when the request may not be served at all; None when it may."""
    if not services.security.allowed(request, operation, ResourceType.CLUSTER):
        error = denied(request, operation, ResourceType.CLUSTER)
        return int(error.code), error.message
    if services.security.store is None:
        return ErrorCode.SECURITY_DISABLED, NO_STORE_MESSAGE
    return None


# -- DescribeUserScramCredentials ------------------------------------------------------------------------------------


async def handle_describe_user_scram_credentials(services: ScramServices, request: Request) -> dict[str, Any]:
    named = None if not request.body.users else [user.name for user in request.body.users]
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": []}
    refusal = _refusal(services, request, AclOperation.DESCRIBE)
    store = services.security.store
    if refusal is not None or store is None:
        code, message = refusal or (ErrorCode.SECURITY_DISABLED, NO_STORE_MESSAGE)
        body.update(error_code=code, error_message=message)
        body["results"] = [_user_result(user, code, message) for user in _distinct(named or [])]
        return body
    try:
        users = store.scram_users()
    except SecurityStoreError as exc:
        body.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=f"reading SCRAM credentials failed: {exc}")
        return body
    if named is None:
        body["results"] = [_described(user, users[user]) for user in sorted(users) if _infos(users[user])]
        return body
    counts = Counter(named)
    results = []
    for user in _distinct(named):
        if user and counts[user] > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            results.append(_user_result(user, ErrorCode.DUPLICATE_RESOURCE, message))
        elif user in users and _infos(users[user]):
            results.append(_described(user, users[user]))
        else:
            message = f"Attempt to describe a user credential that does not exist: {user}"
            results.append(_user_result(user, ErrorCode.RESOURCE_NOT_FOUND, message))
    body["results"] = results
    return body


def _user_result(user: str, code: int, message: str | None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def _infos(iterations: Mapping[str, int]) -> list[dict[str, int]]:
    """The credential infos of one user's ``mechanism -> iterations``, by mechanism code; unknown names skipped."""
    infos = [
        {"mechanism": MECHANISM_CODES[_BY_NAME[name]], "iterations": count}
        for name, count in iterations.items()
        if name in _BY_NAME
    ]
    return sorted(infos, key=lambda info: info["mechanism"])


def _described(user: str, iterations: Mapping[str, int]) -> dict[str, Any]:
    return {"user": user, "error_code": 0, "error_message": None, "credential_infos": _infos(iterations)}


# -- AlterUserScramCredentials ---------------------------------------------------------------------------------------


async def handle_alter_user_scram_credentials(services: ScramServices, request: Request) -> dict[str, Any]:
    req = request.body
    users = _distinct([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    refusal = _refusal(services, request, AclOperation.ALTER)
    store = services.security.store
    if refusal is not None or store is None:
        code, message = refusal or (ErrorCode.SECURITY_DISABLED, NO_STORE_MESSAGE)
        return {"throttle_time_ms": 0, "results": [_alter_result(user, code, message) for user in users]}
    outcome: dict[str, tuple[int, str | None]] = {}
    credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}
    for upsertion in req.upsertions:
        problem = _name_problem(upsertion.name, upsertion.mechanism) or _credential_problem(upsertion, credentials)
        if problem is not None:
            outcome.setdefault(upsertion.name, problem)
    for deletion in req.deletions:
        problem = _name_problem(deletion.name, deletion.mechanism)
        if problem is not None:
            outcome.setdefault(deletion.name, problem)
    pairs = Counter(
        (item.name, item.mechanism) for item in [*req.deletions, *req.upsertions] if item.name not in outcome
    )
    for (user, _mechanism), count in pairs.items():
        if count > 1:
            outcome.setdefault(
                user, (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            )
    try:
        existing = store.scram_users()
    except SecurityStoreError as exc:
        failure = (ErrorCode.UNKNOWN_SERVER_ERROR, f"reading SCRAM credentials failed: {exc}")
        return {"throttle_time_ms": 0, "results": [_alter_result(user, *outcome.get(user, failure)) for user in users]}
    for deletion in req.deletions:
        mechanism = _BY_CODE[deletion.mechanism] if deletion.name not in outcome else None
        if mechanism is not None and mechanism.mechanism_name not in existing.get(deletion.name, {}):
            outcome[deletion.name] = (
                ErrorCode.RESOURCE_NOT_FOUND,
                _missing_credential(deletion.name, mechanism.mechanism_name),
            )
    for user in users:
        if user not in outcome:
            outcome[user] = await _apply(store, request, user, req, credentials)
    return {"throttle_time_ms": 0, "results": [_alter_result(user, *outcome[user]) for user in users]}


def _missing_credential(user: str, mechanism: str) -> str:
    return f"Attempt to delete a user credential that does not exist: {mechanism} of user {user!r}"


def _alter_result(user: str, code: int, message: str | None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message}


def _name_problem(user: str, mechanism: int) -> tuple[int, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in _BY_CODE:
        return (
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"Unknown SCRAM mechanism {mechanism} (1 is SCRAM-SHA-256, 2 SCRAM-SHA-512)",
        )
    return None


def _credential_problem(
    upsertion: Struct, credentials: dict[tuple[str, ScramMechanism], ScramCredential]
) -> tuple[int, str] | None:
    """Why the upsertion's credential is refused, or None after keeping it in ``credentials``."""
    mechanism = _BY_CODE[upsertion.mechanism]
    iterations = upsertion.iterations
    if iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: {iterations} (at least {MIN_ITERATIONS})"
    if iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: {iterations} (at most {MAX_ITERATIONS})"
    try:
        credential = credential_from_salted_password(
            mechanism, bytes(upsertion.salt), bytes(upsertion.salted_password), iterations
        )
    except ValueError as exc:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)
    credentials[upsertion.name, mechanism] = credential
    return None


async def _apply(
    store: SecurityStore,
    request: Request,
    user: str,
    req: Struct,
    credentials: dict[tuple[str, ScramMechanism], ScramCredential],
) -> tuple[int, str | None]:
    """Make one user's checked changes, deletions first: (code, message) of the result."""
    try:
        for deletion in req.deletions:
            if deletion.name == user:
                name = _BY_CODE[deletion.mechanism].mechanism_name
                if not await store.delete_scram(user, name):
                    return ErrorCode.RESOURCE_NOT_FOUND, _missing_credential(user, name)
                log.info("principal %s deleted the %s credential of user %r", request.principal, name, user)
        for upsertion in req.upsertions:
            if upsertion.name == user:
                mechanism = _BY_CODE[upsertion.mechanism]
                name = mechanism.mechanism_name
                await store.set_scram(user, name, credentials[user, mechanism])
                log.info("principal %s set the %s credential of user %r", request.principal, name, user)
    except SecurityStoreError as exc:
        log.warning("AlterUserScramCredentials from %s for user %r failed: %s", request.principal, user, exc)
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"storing the credentials of user {user!r} failed: {exc}"
    return ErrorCode.NONE, None
