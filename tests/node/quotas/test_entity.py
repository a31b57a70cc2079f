"""Quota entities, values, Kafka's precedence order and DescribeClientQuotas filters."""

from __future__ import annotations

import pytest

from node.quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    FilterComponent,
    QuotaEntity,
    QuotaError,
    check_filter,
    check_value,
    describe_entity,
    entity,
    matches,
    resolve,
    value_of,
    value_text,
)

pytestmark = pytest.mark.unit

P = "producer_byte_rate"
ALICE_C1: QuotaEntity = (("user", "alice"), ("client-id", "c1"))
ALICE_DEFAULT_CLIENT: QuotaEntity = (("user", "alice"), ("client-id", None))
ALICE: QuotaEntity = (("user", "alice"),)
DEFAULT_USER_C1: QuotaEntity = (("user", None), ("client-id", "c1"))
DEFAULT_USER_DEFAULT_CLIENT: QuotaEntity = (("user", None), ("client-id", None))
DEFAULT_USER: QuotaEntity = (("user", None),)
C1: QuotaEntity = (("client-id", "c1"),)
DEFAULT_CLIENT: QuotaEntity = (("client-id", None),)
# Kafka's order, most specific first.
PRECEDENCE = [
    ALICE_C1,
    ALICE_DEFAULT_CLIENT,
    ALICE,
    DEFAULT_USER_C1,
    DEFAULT_USER_DEFAULT_CLIENT,
    DEFAULT_USER,
    C1,
    DEFAULT_CLIENT,
]


def test_entities_are_put_in_canonical_order() -> None:
    assert entity([("client-id", "c1"), ("user", "alice")]) == ALICE_C1
    assert entity([("user", None)]) == DEFAULT_USER
    assert describe_entity(ALICE_DEFAULT_CLIENT) == "user=alice,client-id=<default>"


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("user", "a"), ("user", "b")], "Duplicate user entity"),
        ([("topic", "t")], "Unhandled client quota entity type: topic"),
        ([("ip", "10.0.0.1")], "ip quotas"),
        ([("client-id", "")], "may not be empty"),
    ],
)
def test_bad_entities_are_named(components: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        entity(components)


def test_values_are_checked_against_their_keys() -> None:
    assert check_value(P, 1024.0) == 1024.0
    assert check_value("request_percentage", 12.5) == 12.5
    assert check_value("controller_mutation_rate", 3.0) == 3.0
    with pytest.raises(QuotaError, match="Invalid configuration key bogus_rate"):
        check_value("bogus_rate", 1.0)
    with pytest.raises(QuotaError, match="producer_byte_rate must be a Long value"):
        check_value(P, 10.5)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(QuotaError, match="must be a positive number"):
            check_value("consumer_byte_rate", bad)


def test_values_are_stored_as_kafka_writes_them() -> None:
    assert value_text(P, 1024.0) == "1024"
    assert value_text("request_percentage", 50.0) == "50.0"
    assert value_of(P, "1024") == 1024.0
    with pytest.raises(ValueError, match="not a number"):
        value_of(P, "lots")


@pytest.mark.parametrize("level", range(len(PRECEDENCE)))
def test_the_most_specific_entity_wins(level: int) -> None:
    # Every entity at this level or below sets a quota; the one at ``level`` must win.
    quotas = {e: {P: float(1000 + i)} for i, e in enumerate(PRECEDENCE) if i >= level}
    found = resolve(quotas, P, "alice", "c1")
    assert found is not None
    assert found[0] == 1000 + level


def test_rates_are_shared_by_whoever_an_entity_covers() -> None:
    assert resolve({ALICE: {P: 1.0}}, P, "alice", "any")[1] == ("alice", "")  # type: ignore[index]
    assert resolve({DEFAULT_USER: {P: 1.0}}, P, "bob", "any")[1] == ("bob", "")  # type: ignore[index]
    assert resolve({DEFAULT_CLIENT: {P: 1.0}}, P, "bob", "c9")[1] == ("", "c9")  # type: ignore[index]
    assert resolve({ALICE_C1: {P: 1.0}}, P, "alice", "c1")[1] == ("alice", "c1")  # type: ignore[index]


def test_precedence_is_per_key_and_unrelated_entities_do_not_apply() -> None:
    quotas = {ALICE: {"consumer_byte_rate": 5.0}, C1: {P: 7.0}}
    assert resolve(quotas, P, "alice", "c1") == (7.0, ("", "c1"))
    assert resolve(quotas, P, "alice", "c2") is None
    assert resolve(quotas, "consumer_byte_rate", "bob", "c1") is None


def component(entity_type: str, match_type: int, match: str | None = None) -> FilterComponent:
    return FilterComponent(entity_type, match_type, match)


def selected(components: list[FilterComponent], strict: bool = False) -> list[QuotaEntity]:
    by_type = check_filter(components)
    return [e for e in PRECEDENCE if matches(by_type, strict, e)]


def test_filters_select_as_kafka_describes() -> None:
    assert selected([]) == PRECEDENCE
    assert selected([], strict=True) == []
    assert selected([component("user", MATCH_EXACT, "alice")]) == [ALICE_C1, ALICE_DEFAULT_CLIENT, ALICE]
    assert selected([component("user", MATCH_EXACT, "alice")], strict=True) == [ALICE]
    assert selected([component("user", MATCH_DEFAULT)], strict=True) == [DEFAULT_USER]
    assert selected([component("client-id", MATCH_SPECIFIED)], strict=True) == [C1, DEFAULT_CLIENT]
    assert selected([component("user", MATCH_SPECIFIED), component("client-id", MATCH_DEFAULT)]) == [
        ALICE_DEFAULT_CLIENT,
        DEFAULT_USER_DEFAULT_CLIENT,
    ]


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([component("topic", MATCH_SPECIFIED)], "Custom entity type 'topic' not supported"),
        ([component("user", MATCH_SPECIFIED), component("user", MATCH_DEFAULT)], "Duplicate user filter"),
        ([component("user", MATCH_EXACT)], "needs a match string"),
        ([component("user", MATCH_DEFAULT, "alice")], "takes no match"),
        ([component("user", 7)], "Unexpected match type 7"),
    ],
)
def test_bad_filters_are_named(components: list[FilterComponent], message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        check_filter(components)
