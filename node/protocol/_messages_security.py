"""Schemas of the security APIs: SASL authentication, ACLs and SCRAM credentials.

Declared from Apache Kafka's message specs (``clients/src/main/resources/common/message/*.json``);
versions Kafka 4 dropped (the ACL APIs' v0) are as in the 3.x specs. Field names are the snake_case
of the newest spec's names. Which of these a node serves is decided by ``node.handlers``.

Versions, and where they leave the rule "up to the highest non-flexible version":

| API (key) | declared | flexible from |
|---|---|---|
| SaslHandshake 17 | 0-1 | never (v1 only says "SaslAuthenticate follows", same bytes) |
| DescribeAcls 29, CreateAcls 30, DeleteAcls 31 | 0-3 | 2 (v1 adds the pattern type; v3 the USER type, same bytes) |
| SaslAuthenticate 36 | 0-2 | 2 (v2 is v1's fields in compact encodings) |
| DescribeUserScramCredentials 50 | 0 | 0 (only a flexible v0 exists) |
| AlterUserScramCredentials 51 | 0 | 0 (only a flexible v0 exists) |

Resource pattern types (KIP-290) are 3 (LITERAL) where the version has no field for them, as
Kafka reads a v0 ACL or filter. An ``error_message`` left out when encoding is null ("no error").
"""

from __future__ import annotations

from ._schema import BYTES, INT8, INT16, INT32, INT64, STRING, A, ApiKey, ApiSchema, F, S

LITERAL_PATTERN = 3  # the resource pattern type of every ACL before v1 (Kafka's PatternType.LITERAL)

# fmt: off
SASL_HANDSHAKE = ApiSchema(
    ApiKey.SASL_HANDSHAKE, "SaslHandshake", max_version=1, flexible_from=None,
    request=S(
        F("mechanism", STRING),  # e.g. "PLAIN", "SCRAM-SHA-256"
    ),
    response=S(
        F("error_code", INT16),
        F("mechanisms", A(STRING)),  # the mechanisms this listener enables
    ),
)

SASL_AUTHENTICATE = ApiSchema(
    ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", max_version=2, flexible_from=2,
    request=S(
        F("auth_bytes", BYTES),
    ),
    response=S(
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("auth_bytes", BYTES),
        # 0: no limit; else the client must re-authenticate (KIP-368) within this many ms
        F("session_lifetime_ms", INT64, "1+"),
    ),
)

DESCRIBE_ACLS = ApiSchema(
    ApiKey.DESCRIBE_ACLS, "DescribeAcls", max_version=3, flexible_from=2,
    request=S(
        F("resource_type_filter", INT8),
        F("resource_name_filter", STRING, nullable="0+"),  # null: any name
        F("pattern_type_filter", INT8, "1+", default=LITERAL_PATTERN),
        F("principal_filter", STRING, nullable="0+"),  # null: any principal
        F("host_filter", STRING, nullable="0+"),  # null: any host
        F("operation", INT8),
        F("permission_type", INT8),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("resources", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("pattern_type", INT8, "1+", default=LITERAL_PATTERN),
            F("acls", A(S(
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ),
)

CREATE_ACLS = ApiSchema(
    ApiKey.CREATE_ACLS, "CreateAcls", max_version=3, flexible_from=2,
    request=S(
        F("creations", A(S(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("resource_pattern_type", INT8, "1+", default=LITERAL_PATTERN),
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results", A(S(  # one per creation, in order
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ),
)

DELETE_ACLS = ApiSchema(
    ApiKey.DELETE_ACLS, "DeleteAcls", max_version=3, flexible_from=2,
    request=S(
        F("filters", A(S(
            F("resource_type_filter", INT8),
            F("resource_name_filter", STRING, nullable="0+"),
            F("pattern_type_filter", INT8, "1+", default=LITERAL_PATTERN),
            F("principal_filter", STRING, nullable="0+"),
            F("host_filter", STRING, nullable="0+"),
            F("operation", INT8),
            F("permission_type", INT8),
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("filter_results", A(S(  # one per filter, in order
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("matching_acls", A(S(
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("pattern_type", INT8, "1+", default=LITERAL_PATTERN),
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ),
)

# SCRAM mechanisms on the wire (int8): 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 is UNKNOWN).
DESCRIBE_USER_SCRAM_CREDENTIALS = ApiSchema(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", max_version=0, flexible_from=0,
    request=S(
        F("users", A(S(  # null or empty: every user
            F("name", STRING),
        )), nullable="0+"),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),  # message level: authorization or infrastructure failures only
        F("error_message", STRING, nullable="0+", default=None),
        F("results", A(S(  # one per user
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("credential_infos", A(S(
                F("mechanism", INT8),
                F("iterations", INT32),
            ))),
        ))),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = ApiSchema(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", max_version=0, flexible_from=0,
    request=S(
        F("deletions", A(S(
            F("name", STRING),
            F("mechanism", INT8),
        ))),
        F("upsertions", A(S(
            F("name", STRING),
            F("mechanism", INT8),
            F("iterations", INT32),
            F("salt", BYTES),  # chosen by the client
            F("salted_password", BYTES),  # Hi(password, salt, iterations) of RFC 5802
        ))),
    ),
    response=S(
        F("throttle_time_ms", INT32),
        F("results", A(S(  # one per user named by a deletion or upsertion
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ),
)
# fmt: on

SECURITY_APIS = (
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
)
