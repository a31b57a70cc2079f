"""DescribeUserScramCredentials and AlterUserScramCredentials over a fake store, the SASL APIs
where no exchange is due, and the security APIs' place in ApiVersions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER, SERVED_APIS, SecurityServices, served_ranges
from node.handlers.sasl import SaslServices, handle_sasl_authenticate, handle_sasl_handshake
from node.handlers.scram import (
    ScramServices,
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation
from node.security._scram import ScramMechanism, make_credential
from tests.node.handlers.fakes import ALICE, BOB, FakeSecurityStore, acl, request, secured

pytestmark = pytest.mark.unit

ADMIN = "User:admin"
SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def admin_store() -> tuple[ScramServices, FakeSecurityStore]:
    security, store = secured(acl(ADMIN, AclOperation.ALTER), acl(ADMIN, AclOperation.DESCRIBE))
    return ScramServices(security), store


def upsertion(
    user: str, mechanism: int = SHA256, *, password: str = "secret", iterations: int = 4096
) -> dict[str, Any]:
    hashed = ScramMechanism.SCRAM_SHA_512 if mechanism == SHA512 else ScramMechanism.SCRAM_SHA_256
    salted = hashed.salted_password(password, SALT, max(iterations, 1))
    return {"name": user, "mechanism": mechanism, "iterations": iterations, "salt": SALT, "salted_password": salted}


def alter(
    services: ScramServices,
    upsertions: Sequence[dict[str, Any]] = (),
    deletions: Sequence[tuple[str, int]] = (),
    principal: str = ADMIN,
) -> dict[str, tuple[int, str | None]]:
    body = {"deletions": [{"name": n, "mechanism": m} for n, m in deletions], "upsertions": list(upsertions)}
    answer = run(
        handle_alter_user_scram_credentials,
        services,
        request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body, principal=principal),
    )
    return {r["user"]: (r["error_code"], r["error_message"]) for r in answer["results"]}


def describe(services: ScramServices, users: list[str] | None, principal: str = ADMIN) -> dict[str, Any]:
    body = {"users": None if users is None else [{"name": u} for u in users]}
    request_ = request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body, principal=principal)
    return run(handle_describe_user_scram_credentials, services, request_)  # type: ignore[no-any-return]


def test_an_upserted_credential_is_the_one_the_password_makes_and_is_described_without_secrets() -> None:
    services, store = admin_store()
    results = alter(services, [upsertion("alice"), upsertion("alice", SHA512, iterations=8192), upsertion("bob")])
    assert results == {"alice": (0, None), "bob": (0, None)}
    expected = make_credential(ScramMechanism.SCRAM_SHA_256, "secret", salt=SALT, iterations=4096)
    assert store.scram_credential("SCRAM-SHA-256", "alice") == expected

    everyone = describe(services, None)
    assert everyone["error_code"] == 0
    assert [(r["user"], r["credential_infos"]) for r in everyone["results"]] == [
        ("alice", [{"mechanism": SHA256, "iterations": 4096}, {"mechanism": SHA512, "iterations": 8192}]),
        ("bob", [{"mechanism": SHA256, "iterations": 4096}]),
    ]
    assert describe(services, [])["results"] == everyone["results"]  # empty, like null, is every user

    named = describe(services, ["bob", "carol", "alice", "alice", ""])["results"]
    assert [(r["user"], r["error_code"]) for r in named] == [
        ("bob", 0),
        ("carol", ErrorCode.RESOURCE_NOT_FOUND),
        ("alice", ErrorCode.DUPLICATE_RESOURCE),
        ("", ErrorCode.RESOURCE_NOT_FOUND),
    ]
    assert named[1]["error_message"] == "Attempt to describe a user credential that does not exist: carol"


def test_deleting_a_credential_and_deleting_one_that_does_not_exist() -> None:
    services, store = admin_store()
    alter(services, [upsertion("alice"), upsertion("alice", SHA512)])
    store.calls.clear()
    assert alter(services, deletions=[("alice", SHA256), ("bob", SHA256)]) == {
        "alice": (0, None),
        "bob": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist: SCRAM-SHA-256 of user 'bob'",
        ),
    }
    assert store.calls == [("delete_scram", ("alice", "SCRAM-SHA-256"))]
    assert store.scram_users() == {"alice": {"SCRAM-SHA-512": 4096}}


def test_a_user_with_any_bad_change_fails_whole_with_kafkas_code() -> None:
    services, store = admin_store()
    results = alter(
        services,
        [
            upsertion("few", iterations=4095),
            upsertion("many", iterations=16385),
            upsertion("unknown", mechanism=3),
            upsertion(""),
            upsertion("twice"),
            upsertion("twice"),
            upsertion("short") | {"salted_password": b"too short"},
            upsertion("mixed"),  # fine, but its deletion below is not
            upsertion("ok", SHA512),
        ],
        deletions=[("mixed", 9), ("ok", SHA256)],
    )
    codes = {user: code for user, (code, _) in results.items()}
    assert codes == {
        "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "unknown": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "twice": ErrorCode.DUPLICATE_RESOURCE,
        "short": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "mixed": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "ok": ErrorCode.RESOURCE_NOT_FOUND,  # deleting a credential it does not have: its upsertion is not made
    }
    assert results["few"][1] == "Too few iterations: 4095 (at least 4096)"
    assert results[""][1] == "Username must not be empty"
    assert store.calls == []

    # One deletion and one upsertion of different mechanisms is no duplicate.
    alter(services, [upsertion("carol")])
    assert alter(services, [upsertion("carol", SHA512)], deletions=[("carol", SHA256)]) == {"carol": (0, None)}
    assert store.scram_users() == {"carol": {"SCRAM-SHA-512": 4096}}


def test_the_scram_apis_need_describe_or_alter_on_the_cluster() -> None:
    services, store = admin_store()
    alter(services, [upsertion("alice")])
    store.calls.clear()
    refused = describe(services, ["alice"], principal=BOB)
    assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [(r["user"], r["error_code"], r["credential_infos"]) for r in refused["results"]] == [
        ("alice", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    ]
    assert alter(services, [upsertion("alice", password="stolen")], deletions=[("alice", SHA256)], principal=BOB) == {
        "alice": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "User:bob is not authorized to ALTER the cluster")
    }
    assert store.calls == []
    # ALTER implies DESCRIBE, not the other way round.
    security, _ = secured(acl(ALICE, AclOperation.ALTER), acl(BOB, AclOperation.DESCRIBE))
    other = ScramServices(security)
    assert describe(other, None, principal=ALICE)["error_code"] == 0
    assert describe(other, None, principal=BOB)["error_code"] == 0
    assert alter(other, [upsertion("x")], principal=BOB)["x"][0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_without_an_authorizer_credentials_are_managed_but_without_a_store_nothing_is() -> None:
    store = FakeSecurityStore()
    services = ScramServices(SecurityServices(store, authorizer_enabled=False))
    assert alter(services, [upsertion("alice")], principal=BOB) == {"alice": (0, None)}
    assert [r["user"] for r in describe(services, None, principal=BOB)["results"]] == ["alice"]

    nowhere = ScramServices(NO_AUTHORIZER)
    assert describe(nowhere, None)["error_code"] == ErrorCode.SECURITY_DISABLED
    assert alter(nowhere, [upsertion("alice")])["alice"][0] == ErrorCode.SECURITY_DISABLED


def test_a_store_failure_is_an_unknown_server_error_for_that_user() -> None:
    services, store = admin_store()
    store.failing = "ZooKeeper is unreachable"
    ((code, message),) = alter(services, [upsertion("alice")]).values()
    assert code == ErrorCode.UNKNOWN_SERVER_ERROR and "ZooKeeper is unreachable" in (message or "")


def test_the_sasl_apis_answer_illegal_sasl_state_where_no_exchange_is_due() -> None:
    handshake = run(handle_sasl_handshake, SaslServices(), request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    assert handshake == {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    plaintext = run(
        handle_sasl_authenticate, SaslServices(), request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"x"})
    )
    assert (plaintext["error_code"], plaintext["error_message"]) == (
        ErrorCode.ILLEGAL_SASL_STATE,
        "listener PLAINTEXT (PLAINTEXT) does not use SASL",
    )
    authenticated = request(
        ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"x"}, principal=ALICE, security_protocol="SASL_SSL"
    )
    again = run(handle_sasl_authenticate, SaslServices(), authenticated)
    assert again["error_message"] == "SaslAuthenticate request received after successful authentication"


def test_apiversions_advertises_the_security_apis_at_kafkas_ranges() -> None:
    ranges = served_ranges()
    assert {key: ranges[key] for key in (17, 36, 29, 30, 31, 50, 51)} == {
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_ACLS: (0, 3),
        ApiKey.CREATE_ACLS: (0, 3),
        ApiKey.DELETE_ACLS: (0, 3),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    }
    assert len(set(SERVED_APIS)) == len(SERVED_APIS)
