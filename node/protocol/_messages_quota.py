"""Schemas of the client quota APIs (KIP-546): DescribeClientQuotas and AlterClientQuotas.

Declared from Apache Kafka 4.3's message specs (``DescribeClientQuotasRequest.json`` and its
siblings); field names are the snake_case of the spec's names.

| API (key) | declared | flexible from |
|---|---|---|
| DescribeClientQuotas 48 | 0-1 | 1 |
| AlterClientQuotas 49 | 0-1 | 1 |

Both are declared up to their flexible v1, as Kafka 4.3 declares them: admin clients (Kafka's
Admin 4.3 among them) send v1, and nothing else changes between the two versions.

Entity types are strings (``user``, ``client-id``, ``ip``); a null entity name is the default
entity. Filter match types: 0 exact name, 1 the default, 2 any name of the type (defaults too).
"""

from __future__ import annotations

from ._schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, A, ApiKey, ApiSchema, F, S

# fmt: off
DESCRIBE_CLIENT_QUOTAS = ApiSchema(
    ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", max_version=1, flexible_from=1,
    request=S(
        F("components", A(S(  # every component must match; none: every entity
            F("entity_type", STRING),
            F("match_type", INT8),  # 0 exact, 1 default, 2 any specified name
            F("match", STRING, nullable="0+"),  # the name for an exact match, else null
        ))),
        F("strict", BOOL),  # exclude entities with types the components do not name
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("entries", A(S(
            F("entity", A(S(
                F("entity_type", STRING),
                F("entity_name", STRING, nullable="0+"),  # null: the default
            ))),
            F("values", A(S(
                F("key", STRING),
                F("value", FLOAT64),
            ))),
        )), nullable="0+"),
    ),
)

ALTER_CLIENT_QUOTAS = ApiSchema(
    ApiKey.ALTER_CLIENT_QUOTAS, "AlterClientQuotas", max_version=1, flexible_from=1,
    request=S(
        F("entries", A(S(
            F("entity", A(S(
                F("entity_type", STRING),
                F("entity_name", STRING, nullable="0+"),  # null: the default
            ))),
            F("ops", A(S(
                F("key", STRING),
                F("value", FLOAT64),  # ignored when removing
                F("remove", BOOL),
            ))),
        ))),
        F("validate_only", BOOL),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("entries", A(S(  # one per entry of the request, in its order
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("entity", A(S(
                F("entity_type", STRING),
                F("entity_name", STRING, nullable="0+"),
            ))),
        ))),
    ),
)
# fmt: on

QUOTA_APIS = (DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS)
