"""Quota entities, their keys and values, Kafka's precedence and DescribeClientQuotas filters.

An entity is what a quota is set on (Kafka's ``ClientQuotaEntity``): a user, a client id, or a
user and a client id together, where either name may be the *default* (every user, every client
id that has no quota of its own). Here it is a tuple of ``(entity type, name)`` components, user
first, with ``None`` as the name of a default, exactly as the wire spells it.

Keys (Kafka's ``QuotaConfigs``), all optional on every entity:

=============================  ======  ===============================================================
key                            type    meaning
=============================  ======  ===============================================================
``producer_byte_rate``         long    Produce request bytes per second
``consumer_byte_rate``         long    Fetch response bytes per second (consumers only)
``request_percentage``         double  handler time per quota window, as a percentage of one thread
``controller_mutation_rate``   double  topic and partition mutations per second (stored, validated,
                                       not enforced: see docs/quotas.md)
=============================  ======  ===============================================================

Precedence (Kafka's ``DefaultQuotaCallback``, KIP-55): for a request from user ``u`` with client id
``c``, a key's quota is the first entity below that sets it:

1. ``user=u, client-id=c``        5. ``user=<default>, client-id=<default>``
2. ``user=u, client-id=<default>`` 6. ``user=<default>``
3. ``user=u``                     7. ``client-id=c``
4. ``user=<default>, client-id=c`` 8. ``client-id=<default>``

Whoever matches the same entity shares one rate; a default entity gives each user (or client
id) a rate of its own (Kafka's metric tags): :func:`resolve` returns the quota and that key.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)  # the order of components in an entity

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: Every key an entity may hold, and whether its values are whole numbers (Kafka's LONG) or doubles.
QUOTA_KEYS: Mapping[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}

#: The name Kafka's znode paths give a default entity (``ConfigEntityName.DEFAULT``).
DEFAULT_NAME = "<default>"

# Entity match types of a DescribeClientQuotas filter component.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Component = tuple[str, str | None]  # (entity type, name); None is the default
QuotaEntity = tuple[Component, ...]
Quotas = Mapping[QuotaEntity, Mapping[str, float]]
#: Whose rate a quota is measured on: (user, client id), "" where the entity does not name one.
RateKey = tuple[str, str]


class QuotaError(ValueError):
    """A quota entity, key, value or filter Kafka answers INVALID_REQUEST for; the message names it."""


def entity(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of wire components, in canonical order.

    Raises QuotaError for no component, an entity type named twice, an unknown type, ``ip``
    (connection quotas are not served) or an empty name.
    """
    by_type: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type == IP:
            raise QuotaError("ip quotas (connection_creation_rate) are not supported by strait")
        if entity_type not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if entity_type in by_type:
            raise QuotaError(f"Duplicate {entity_type} entity in the client quota entity")
        if name == "":
            raise QuotaError(f"the {entity_type} entity name may not be empty (null names the default)")
        by_type[entity_type] = name
    if not by_type:
        raise QuotaError("Invalid empty client quota entity")
    return tuple((t, by_type[t]) for t in ENTITY_TYPES if t in by_type)


def describe_entity(value: QuotaEntity) -> str:
    """``user=alice,client-id=<default>``: an entity as operators read it."""
    return ",".join(f"{t}={DEFAULT_NAME if name is None else name}" for t, name in value)


def check_value(key: str, value: float) -> float:
    """The value to store for ``key``; QuotaError for an unknown key, a value that is not a positive
    finite number, or a fraction where the key takes whole numbers."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"Configuration {key} must be a positive number, not {value}")
    if whole:
        rounded = float(round(value))
        if abs(rounded - value) > 1e-6:
            raise QuotaError(f"Configuration {key} must be a Long value, not {value}")
        return rounded
    return float(value)


def value_text(key: str, value: float) -> str:
    """How a value is stored in a znode: ``"1024"`` for a long key, ``"12.5"`` for a double (as Kafka)."""
    return str(int(value)) if QUOTA_KEYS.get(key) else repr(float(value))


def value_of(key: str, text: str) -> float:
    """A stored value; ValueError when it does not parse or fit its key."""
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{key}={text!r} is not a number") from None
    return check_value(key, number)


# -- precedence ---------------------------------------------------------------------------------


def _candidates(user: str, client_id: str) -> tuple[tuple[QuotaEntity, RateKey], ...]:
    """The entities that may set a quota for ``user`` and ``client_id``, most specific first,
    each with the rate key of whoever it covers."""
    both = (user, client_id)
    return (
        (((USER, user), (CLIENT_ID, client_id)), both),
        (((USER, user), (CLIENT_ID, None)), both),
        (((USER, user),), (user, "")),
        (((USER, None), (CLIENT_ID, client_id)), both),
        (((USER, None), (CLIENT_ID, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    )


def resolve(quotas: Quotas, key: str, user: str, client_id: str) -> tuple[float, RateKey] | None:
    """The quota on ``key`` for ``user`` with ``client_id`` and whose rate it is measured on; None
    when no entity sets it."""
    for candidate, rate_key in _candidates(user, client_id):
        found = quotas.get(candidate)
        if found is not None and key in found:
            return found[key], rate_key
    return None


# -- DescribeClientQuotas filters ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def check_filter(components: Iterable[FilterComponent]) -> dict[str, FilterComponent]:
    """The components by entity type; QuotaError for an unknown or repeated type, an unknown match
    type, or a match string where the match type takes none (or none where it needs one)."""
    by_type: dict[str, FilterComponent] = {}
    for component in components:
        if component.entity_type not in ENTITY_TYPES:
            raise QuotaError(f"Custom entity type '{component.entity_type}' not supported")
        if component.entity_type in by_type:
            raise QuotaError(f"Duplicate {component.entity_type} filter component entity type")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise QuotaError(f"an exact {component.entity_type} filter component needs a match string")
        elif component.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if component.match is not None:
                raise QuotaError(
                    f"the {component.entity_type} filter component of match type {component.match_type} takes no match"
                )
        else:
            raise QuotaError(f"Unexpected match type {component.match_type} for {component.entity_type}")
        by_type[component.entity_type] = component
    return by_type


def matches(by_type: Mapping[str, FilterComponent], strict: bool, value: QuotaEntity) -> bool:
    """Whether a filter (checked by :func:`check_filter`) selects ``value``: every component matches
    the entity's name of its type; with ``strict``, the entity has no other type."""
    names = dict(value)
    for entity_type, component in by_type.items():
        if entity_type not in names:
            return False
        name = names[entity_type]
        if component.match_type == MATCH_EXACT and name != component.match:
            return False
        if component.match_type == MATCH_DEFAULT and name is not None:
            return False
    return not strict or set(names) <= set(by_type)
