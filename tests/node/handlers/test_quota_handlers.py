"""DescribeClientQuotas and AlterClientQuotas over a fake quota store: filters, validation, errors,
validate_only and the ACLs Kafka asks for (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import trio

from node.handlers import NO_AUTHORIZER, served_ranges
from node.handlers.quotas import QuotaServices, handle_alter_client_quotas, handle_describe_client_quotas
from node.protocol import ApiKey, ErrorCode
from node.quotas import QuotaEntity, Quotas
from node.security._acl import AclOperation
from tests.node.handlers.fakes import ALICE, BOB, acl, request, secured

pytestmark = pytest.mark.unit


class FakeQuotaStore:
    def __init__(self) -> None:
        self.held: dict[QuotaEntity, dict[str, float]] = {}
        self.failing = False

    def quotas(self) -> Quotas:
        return self.held

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        if self.failing:
            raise RuntimeError("ZooKeeper is gone")
        values = dict(self.held.get(entity, {}))
        for key, value in changes.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        self.held[entity] = values


def op(key: str, value: float = 0.0, remove: bool = False) -> dict[str, Any]:
    return {"key": key, "value": value, "remove": remove}


def alter(
    services: QuotaServices,
    entries: list[tuple[list[tuple[str, str | None]], list[dict[str, Any]]]],
    *,
    validate_only: bool = False,
    principal: str = ALICE,
    version: int = 1,
) -> list[tuple[int, str | None]]:
    body = {
        "entries": [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops} for entity, ops in entries
        ],
        "validate_only": validate_only,
    }
    answer = trio.run(
        handle_alter_client_quotas, services, request(ApiKey.ALTER_CLIENT_QUOTAS, version, body, principal=principal)
    )
    return [(e["error_code"], e["error_message"]) for e in answer["entries"]]


def describe(
    services: QuotaServices,
    components: list[tuple[str, int, str | None]],
    strict: bool = False,
    principal: str = ALICE,
    version: int = 1,
) -> dict[str, Any]:
    body = {"components": [{"entity_type": t, "match_type": m, "match": s} for t, m, s in components], "strict": strict}
    return trio.run(  # type: ignore[no-any-return]
        handle_describe_client_quotas,
        services,
        request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body, principal=principal),
    )


def open_services() -> tuple[QuotaServices, FakeQuotaStore]:
    store = FakeQuotaStore()
    return QuotaServices(store, NO_AUTHORIZER), store


def test_both_apis_are_served_at_kafka_43s_versions() -> None:
    ranges = served_ranges()
    assert ranges[ApiKey.DESCRIBE_CLIENT_QUOTAS] == (0, 1)
    assert ranges[ApiKey.ALTER_CLIENT_QUOTAS] == (0, 1)


@pytest.mark.parametrize("version", [0, 1])
def test_set_describe_and_remove(version: int) -> None:
    services, store = open_services()
    results = alter(
        services,
        [
            ([("user", "alice")], [op("producer_byte_rate", 1024), op("request_percentage", 50)]),
            ([("client-id", None)], [op("consumer_byte_rate", 2048)]),
            ([("client-id", "c1"), ("user", "alice")], [op("controller_mutation_rate", 5)]),
        ],
        version=version,
    )
    assert results == [(0, None)] * 3
    assert store.held[(("user", "alice"),)] == {"producer_byte_rate": 1024.0, "request_percentage": 50.0}
    everything = describe(services, [], version=version)
    assert everything["error_code"] == 0
    entities = [[(e["entity_type"], e["entity_name"]) for e in entry["entity"]] for entry in everything["entries"]]
    assert entities == [[("client-id", None)], [("user", "alice")], [("user", "alice"), ("client-id", "c1")]]
    only_alice = describe(services, [("user", 0, "alice")], strict=True, version=version)
    assert [(v["key"], v["value"]) for v in only_alice["entries"][0]["values"]] == [
        ("producer_byte_rate", 1024.0),
        ("request_percentage", 50.0),
    ]
    assert len(only_alice["entries"]) == 1
    assert alter(services, [([("user", "alice")], [op("producer_byte_rate", remove=True)])]) == [(0, None)]
    assert store.held[(("user", "alice"),)] == {"request_percentage": 50.0}


def test_bad_entries_are_invalid_request_naming_the_fault_and_the_rest_apply() -> None:
    services, store = open_services()
    results = alter(
        services,
        [
            ([("user", "alice")], [op("producer_byte_rate", 10.5)]),
            ([("user", "alice")], [op("bogus_rate", 1)]),
            ([("user", "alice")], [op("bogus_rate", remove=True)]),
            ([("user", "alice")], [op("consumer_byte_rate", -1)]),
            ([("user", "alice")], [op("consumer_byte_rate", 1), op("consumer_byte_rate", 2)]),
            ([], [op("consumer_byte_rate", 1)]),
            ([("group", "g")], [op("consumer_byte_rate", 1)]),
            ([("user", "a"), ("user", "b")], [op("consumer_byte_rate", 1)]),
            ([("client-id", "ok")], [op("consumer_byte_rate", 100)]),
        ],
    )
    codes = [code for code, _ in results]
    assert codes == [ErrorCode.INVALID_REQUEST] * 8 + [0]
    messages = [message for _, message in results]
    assert "producer_byte_rate must be a Long value" in str(messages[0])
    assert "Invalid configuration key bogus_rate" in str(messages[1])
    assert "Invalid configuration key bogus_rate" in str(messages[2])
    assert "must be a positive number" in str(messages[3])
    assert "Duplicate quota key consumer_byte_rate" in str(messages[4])
    assert "Invalid empty client quota entity" in str(messages[5])
    assert "Unhandled client quota entity type: group" in str(messages[6])
    assert "Duplicate user entity" in str(messages[7])
    assert store.held == {(("client-id", "ok"),): {"consumer_byte_rate": 100.0}}


def test_validate_only_writes_nothing() -> None:
    services, store = open_services()
    assert alter(services, [([("user", "alice")], [op("producer_byte_rate", 5)])], validate_only=True) == [(0, None)]
    assert alter(services, [([("user", "alice")], [op("nope", 5)])], validate_only=True)[0][0] == 42
    assert store.held == {}


def test_a_store_failure_is_unknown_server_error_naming_it() -> None:
    services, store = open_services()
    store.failing = True
    [(code, message)] = alter(services, [([("user", "alice")], [op("producer_byte_rate", 5)])])
    assert code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "ZooKeeper is gone" in str(message)


def test_a_bad_filter_is_invalid_request_with_no_entries() -> None:
    services, _ = open_services()
    answer = describe(services, [("user", 0, None)])
    assert answer["error_code"] == ErrorCode.INVALID_REQUEST
    assert "needs a match string" in answer["error_message"]
    assert answer["entries"] is None


def test_kafkas_acls_guard_both_apis() -> None:
    security, _ = secured(acl(ALICE, AclOperation.ALTER_CONFIGS))  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    store = FakeQuotaStore()
    services = QuotaServices(store, security)
    entry = ([("user", "x")], [op("producer_byte_rate", 5)])
    assert alter(services, [entry]) == [(0, None)]
    assert describe(services, [])["error_code"] == 0
    [(code, message)] = alter(services, [entry], principal=BOB)
    assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "User:bob is not authorized to ALTER_CONFIGS the cluster" in str(message)
    refused = describe(services, [], principal=BOB)
    assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused["entries"] is None
