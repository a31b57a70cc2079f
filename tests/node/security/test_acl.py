"""Kafka's ACL model: wire codes, CreateAcls validation, filters, and the authorizer's decisions and cache."""

from __future__ import annotations

import pytest

from node.protocol import ErrorCode
from node.security._acl import (
    CLUSTER_NAME,
    MATCH_ALL,
    WILDCARD,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
    validate_binding,
    validate_filter,
)

pytestmark = pytest.mark.unit

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED, MATCH, ANY = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def lit(name: str, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, LITERAL)


def pre(name: str, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, PREFIXED)


def ace(
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    principal: str = ALICE,
    host: str = WILDCARD,
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def authorizer(
    *bindings: tuple[ResourcePattern, AccessControlEntry],
    super_users: tuple[str, ...] = (),
    allow_everyone_if_no_acl_found: bool = False,
    cache_limit: int = 100_000,
) -> Authorizer:
    auth = Authorizer(super_users, allow_everyone_if_no_acl_found, cache_limit=cache_limit)
    auth.set_all(AclBinding(pattern, entry) for pattern, entry in bindings)
    return auth


def may(auth: Authorizer, operation: AclOperation, name: str = "payments", **kwargs: str) -> bool:
    resource_type = ResourceType[kwargs.pop("resource_type", "TOPIC")]
    return auth.authorize(kwargs.get("principal", ALICE), kwargs.get("host", HOST), operation, resource_type, name)


# -- wire codes -------------------------------------------------------------------------------


def test_wire_codes_are_kafkas() -> None:
    assert {m.name: m.value for m in ResourceType} == {
        "UNKNOWN": 0, "ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4,
        "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6, "USER": 7,
    }  # fmt: skip
    assert {m.name: m.value for m in PatternType} == {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert {m.name: m.value for m in AclOperation} == {
        "UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
        "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
        "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14,
    }  # fmt: skip
    assert {m.name: m.value for m in AclPermissionType} == {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}


@pytest.mark.parametrize("kind", [ResourceType, PatternType, AclOperation, AclPermissionType])
def test_a_code_this_broker_does_not_know_decodes_as_unknown(kind: type[ResourceType]) -> None:
    assert kind(99).name == "UNKNOWN"
    assert kind(3) is not kind(0)
    with pytest.raises(ValueError):
        kind("TOPIC")  # type: ignore[arg-type]  # only codes are forgiven


# -- principals and CreateAcls validation -------------------------------------------------------


@pytest.mark.parametrize(
    ("principal", "parsed"),
    [("User:alice", ("User", "alice")), ("User:CN=a:b,O=c", ("User", "CN=a:b,O=c")), ("Group:ops", ("Group", "ops"))],
)
def test_parse_principal(principal: str, parsed: tuple[str, str]) -> None:
    assert parse_principal(principal) == parsed


@pytest.mark.parametrize("principal", ["alice", ":alice", "User:", "", ":"])
def test_parse_principal_refuses_what_is_not_type_colon_name(principal: str) -> None:
    with pytest.raises(AclError, match="PrincipalType:name") as caught:
        parse_principal(principal)
    assert caught.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    "binding",
    [
        AclBinding(lit("payments"), ace(Op.READ)),
        AclBinding(lit(WILDCARD), ace(Op.ALL, DENY, principal="User:*")),
        AclBinding(pre("pay"), ace(Op.WRITE, host="192.168.1.7")),
        AclBinding(lit(CLUSTER_NAME, CLUSTER), ace(Op.IDEMPOTENT_WRITE, host="fe80::1")),
        AclBinding(lit("tx-1", ResourceType.TRANSACTIONAL_ID), ace(Op.DESCRIBE)),
        AclBinding(lit("a.b-c_d", GROUP), ace(Op.READ, principal="User:CN=x,O=y")),
    ],
)
def test_validate_binding_accepts(binding: AclBinding) -> None:
    validate_binding(binding)


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (AclBinding(lit("t", ResourceType.ANY), ace(Op.READ)), "resource type ANY"),
        (AclBinding(lit("t", ResourceType.UNKNOWN), ace(Op.READ)), "resource type UNKNOWN"),
        (AclBinding(ResourcePattern(TOPIC, "t", MATCH), ace(Op.READ)), "pattern type MATCH"),
        (AclBinding(ResourcePattern(TOPIC, "t", ANY), ace(Op.READ)), "pattern type ANY"),
        (AclBinding(ResourcePattern(TOPIC, "t", PatternType.UNKNOWN), ace(Op.READ)), "pattern type UNKNOWN"),
        (AclBinding(lit("t"), ace(Op.ANY)), "operation ANY"),
        (AclBinding(lit("t"), ace(Op.UNKNOWN)), "operation UNKNOWN"),
        (AclBinding(lit("t"), ace(Op.READ, AclPermissionType.ANY)), "permission type ANY"),
        (AclBinding(lit("t"), ace(Op.READ, AclPermissionType.UNKNOWN)), "permission type UNKNOWN"),
        (AclBinding(lit(""), ace(Op.READ)), "Invalid empty resource name"),
        (AclBinding(pre(""), ace(Op.READ)), "Invalid empty resource name"),
        (AclBinding(lit("other", CLUSTER), ace(Op.ALTER)), "only valid name for the CLUSTER resource is kafka-cluster"),
        (AclBinding(pre(WILDCARD), ace(Op.READ)), "PREFIXED pattern may not be named"),
        (AclBinding(lit("a/b", GROUP), ace(Op.READ)), "contains '/'"),
        (AclBinding(lit("..", GROUP), ace(Op.READ)), "not a valid ZooKeeper node name"),
        (AclBinding(lit("a\x00b", GROUP), ace(Op.READ)), "U\\+0000"),
        (AclBinding(lit("t"), ace(Op.READ, principal="alice")), "PrincipalType:name"),
        (AclBinding(lit("t"), ace(Op.READ, principal="User:")), "PrincipalType:name"),
        (AclBinding(lit("t"), ace(Op.READ, host="")), "neither '\\*' nor an IP address"),
        (AclBinding(lit("t"), ace(Op.READ, host="broker.example.com")), "neither '\\*' nor an IP address"),
        (AclBinding(lit("t"), ace(Op.READ, host="10.0.0.0/8")), "neither '\\*' nor an IP address"),
    ],
)
def test_validate_binding_refuses_with_invalid_request(binding: AclBinding, message: str) -> None:
    with pytest.raises(AclError, match=message) as caught:
        validate_binding(binding)
    assert caught.value.code == ErrorCode.INVALID_REQUEST


# -- filters ----------------------------------------------------------------------------------

STORED = [
    AclBinding(lit("foo"), ace(Op.READ)),
    AclBinding(lit(WILDCARD), ace(Op.READ, principal="User:*")),
    AclBinding(pre("f"), ace(Op.WRITE)),
    AclBinding(pre("fo"), ace(Op.WRITE, DENY, principal=BOB)),
    AclBinding(pre("foo"), ace(Op.DESCRIBE, host=HOST)),
    AclBinding(pre("foob"), ace(Op.READ)),
    AclBinding(lit("foobar"), ace(Op.READ)),
    AclBinding(lit("foo", GROUP), ace(Op.READ)),
]


def selected(binding_filter: AclBindingFilter) -> set[AclBinding]:
    return {binding for binding in STORED if binding_filter.matches(binding)}


def test_filter_any_selects_everything() -> None:
    assert selected(MATCH_ALL) == set(STORED)
    assert selected(AclBindingFilter(ResourcePatternFilter(name="foo", pattern_type=MATCH))) == selected(
        AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", MATCH))
    ) | {STORED[7]}


def test_match_filter_selects_the_patterns_that_apply_to_the_name() -> None:
    got = selected(AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", MATCH)))
    # literal foo, literal *, and prefixes f, fo, foo; not the longer prefix foob nor literal foobar
    assert got == {STORED[0], STORED[1], STORED[2], STORED[3], STORED[4]}


def test_match_filter_without_a_name_selects_every_pattern_of_the_type() -> None:
    assert selected(AclBindingFilter(ResourcePatternFilter(TOPIC, None, MATCH))) == set(STORED[:7])


@pytest.mark.parametrize(
    ("pattern_filter", "indexes"),
    [
        (ResourcePatternFilter(TOPIC, "foo", LITERAL), {0}),
        (ResourcePatternFilter(TOPIC, "foo", PREFIXED), {4}),
        (ResourcePatternFilter(TOPIC, "foo", ANY), {0, 4}),
        (ResourcePatternFilter(ResourceType.ANY, "foo", LITERAL), {0, 7}),
        (ResourcePatternFilter(TOPIC, WILDCARD, LITERAL), {1}),  # exact: the wildcard pattern only
        (ResourcePatternFilter(TOPIC, None, PREFIXED), {2, 3, 4, 5}),
        (ResourcePatternFilter(GROUP), {7}),
    ],
)
def test_exact_pattern_filters_compare_names_exactly(pattern_filter: ResourcePatternFilter, indexes: set[int]) -> None:
    assert selected(AclBindingFilter(pattern_filter)) == {STORED[i] for i in indexes}


@pytest.mark.parametrize(
    ("entry_filter", "indexes"),
    [
        (AccessControlEntryFilter(principal=BOB), {3}),
        (AccessControlEntryFilter(principal="User:*"), {1}),  # no wildcard semantics in filters
        (AccessControlEntryFilter(host=HOST), {4}),
        (AccessControlEntryFilter(operation=Op.WRITE), {2, 3}),
        (AccessControlEntryFilter(permission=DENY), {3}),
        (AccessControlEntryFilter(principal=ALICE, operation=Op.READ, permission=ALLOW), {0, 5, 6, 7}),
    ],
)
def test_entry_filters(entry_filter: AccessControlEntryFilter, indexes: set[int]) -> None:
    assert selected(AclBindingFilter(entry=entry_filter)) == {STORED[i] for i in indexes}


@pytest.mark.parametrize(
    "binding_filter",
    [
        AclBindingFilter(ResourcePatternFilter(resource_type=ResourceType.UNKNOWN)),
        AclBindingFilter(ResourcePatternFilter(pattern_type=PatternType.UNKNOWN)),
        AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.UNKNOWN)),
        AclBindingFilter(entry=AccessControlEntryFilter(permission=AclPermissionType.UNKNOWN)),
    ],
)
def test_validate_filter_refuses_unknown_values(binding_filter: AclBindingFilter) -> None:
    with pytest.raises(AclError, match="unknown") as caught:
        validate_filter(binding_filter)
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_validate_filter_accepts_any_and_match() -> None:
    validate_filter(MATCH_ALL)
    validate_filter(AclBindingFilter(ResourcePatternFilter(TOPIC, "x", MATCH), AccessControlEntryFilter(ALICE, HOST)))


# -- authorize ----------------------------------------------------------------------------------


def test_an_allow_grants_that_operation_only() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)))
    assert may(auth, Op.READ)
    assert not may(auth, Op.WRITE)
    assert not may(auth, Op.READ, principal=BOB)


def test_acls_of_one_resource_type_do_not_apply_to_another() -> None:
    auth = authorizer((lit("payments", GROUP), ace(Op.READ)))
    assert may(auth, Op.READ, resource_type="GROUP")
    assert not may(auth, Op.READ, resource_type="TOPIC")


@pytest.mark.parametrize(
    "deny_pattern", [lit("payments"), lit(WILDCARD), pre("pay"), pre("payments")], ids=lambda p: p.name
)
def test_deny_beats_allow_from_any_applying_pattern(deny_pattern: ResourcePattern) -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (deny_pattern, ace(Op.READ, DENY)))
    assert not may(auth, Op.READ)


def test_deny_all_denies_every_operation_and_allow_all_allows_every_operation() -> None:
    auth = authorizer(
        (lit("payments"), ace(Op.ALL)),
        (lit("payments"), ace(Op.ALL, DENY, principal=BOB)),
        (lit("payments"), ace(Op.ALL, principal=BOB)),
    )
    for operation in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DELETE):
        assert may(auth, operation)
        assert not may(auth, operation, principal=BOB)


def test_deny_of_another_operation_does_not_deny() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (lit("payments"), ace(Op.WRITE, DENY)))
    assert may(auth, Op.READ)
    assert not may(auth, Op.WRITE)


@pytest.mark.parametrize("principal", [ALICE, BOB, "User:*", "Group:ops", "ServiceAccount:sa-1"])
def test_the_wildcard_principal_matches_every_principal(principal: str) -> None:
    auth = authorizer((lit("payments"), ace(Op.READ, principal="User:*")))
    assert may(auth, Op.READ, principal=principal)


def test_a_wildcard_principal_deny_denies_everyone() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (lit("payments"), ace(Op.READ, DENY, principal="User:*")))
    assert not may(auth, Op.READ)


def test_host_must_match_exactly_or_be_the_wildcard() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ, host=HOST)), (lit("payments"), ace(Op.WRITE, host=WILDCARD)))
    assert may(auth, Op.READ, host=HOST)
    assert not may(auth, Op.READ, host="10.0.0.2")
    assert may(auth, Op.WRITE, host="10.0.0.2")


def test_a_deny_from_another_host_does_not_deny() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (lit("payments"), ace(Op.READ, DENY, host="10.9.9.9")))
    assert may(auth, Op.READ, host=HOST)
    assert not may(auth, Op.READ, host="10.9.9.9")


def test_ipv6_hosts_match_whatever_their_spelling() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ, host="::1")))
    assert may(auth, Op.READ, host="0:0:0:0:0:0:0:1")
    assert may(auth, Op.READ, host="::1")
    assert not may(auth, Op.READ, host="::2")


@pytest.mark.parametrize(("name", "allowed"), [("pay", True), ("payments", True), ("pa", False), ("xpay", False)])
def test_a_prefixed_pattern_applies_to_names_it_starts(name: str, allowed: bool) -> None:
    auth = authorizer((pre("pay"), ace(Op.READ)))
    assert may(auth, Op.READ, name) is allowed


def test_prefix_lookup_with_more_prefixes_than_the_name_is_long() -> None:
    many = [(pre(f"p{i:03d}"), ace(Op.READ)) for i in range(50)]
    auth = authorizer(*many, (pre("ab"), ace(Op.WRITE)))
    assert may(auth, Op.READ, "p007-topic")
    assert may(auth, Op.WRITE, "abc")
    assert not may(auth, Op.READ, "abc")
    assert not may(auth, Op.READ, "p0")


@pytest.mark.parametrize("name", ["payments", "x", WILDCARD])
def test_the_literal_wildcard_applies_to_every_name(name: str) -> None:
    auth = authorizer((lit(WILDCARD), ace(Op.READ)))
    assert may(auth, Op.READ, name)


def test_a_super_user_is_allowed_everything_even_when_denied() -> None:
    auth = authorizer((lit(WILDCARD), ace(Op.ALL, DENY, principal="User:*")), super_users=("User:admin", " User:ops "))
    assert may(auth, Op.ALTER, principal="User:admin")
    assert may(auth, Op.CLUSTER_ACTION, CLUSTER_NAME, principal="User:ops", resource_type="CLUSTER")
    assert not may(auth, Op.READ, principal="User:admins")


def test_a_malformed_super_user_is_refused() -> None:
    with pytest.raises(ValueError, match="PrincipalType:name"):
        Authorizer(["admin"])
    with pytest.raises(TypeError, match=r"split super\.users"):
        Authorizer("User:admin")


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_no_acl_found_answers_the_setting(allow_everyone: bool) -> None:
    auth = authorizer((lit("other"), ace(Op.READ)), allow_everyone_if_no_acl_found=allow_everyone)
    assert may(auth, Op.READ, "payments") is allow_everyone
    assert may(auth, Op.WRITE, "payments", principal=BOB) is allow_everyone


def test_any_acl_on_the_resource_turns_allow_everyone_off_for_it() -> None:
    # An ACL for bob (any operation) is an ACL found: alice is then judged by the ACLs, and has none.
    auth = authorizer((lit("payments"), ace(Op.WRITE, principal=BOB)), allow_everyone_if_no_acl_found=True)
    assert not may(auth, Op.READ)
    assert may(auth, Op.READ, "other")


@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied_by_read_write_delete_and_alter(implying: AclOperation) -> None:
    auth = authorizer((lit("payments"), ace(implying)))
    assert may(auth, Op.DESCRIBE)
    assert not may(auth, Op.DESCRIBE_CONFIGS)


@pytest.mark.parametrize("not_implying", [Op.CREATE, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE])
def test_describe_is_not_implied_by_other_operations(not_implying: AclOperation) -> None:
    auth = authorizer((lit("payments"), ace(not_implying)))
    assert not may(auth, Op.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    auth = authorizer((lit("payments"), ace(Op.ALTER_CONFIGS)), (lit("orders"), ace(Op.ALTER)))
    assert may(auth, Op.DESCRIBE_CONFIGS)
    assert not may(auth, Op.DESCRIBE_CONFIGS, "orders")


def test_implication_goes_one_way() -> None:
    auth = authorizer((lit("payments"), ace(Op.DESCRIBE)), (lit("payments"), ace(Op.DESCRIBE_CONFIGS)))
    assert not may(auth, Op.READ)
    assert not may(auth, Op.ALTER_CONFIGS)


def test_deny_does_not_imply_deny_read_leaves_describe_allowed() -> None:
    # Kafka checks only the requested operation and ALL for denials.
    auth = authorizer((lit("payments"), ace(Op.READ)), (lit("payments"), ace(Op.READ, DENY)))
    assert not may(auth, Op.READ)
    assert may(auth, Op.DESCRIBE)


def test_deny_describe_denies_describe_implied_by_an_allow() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (lit("payments"), ace(Op.DESCRIBE, DENY)))
    assert may(auth, Op.READ)
    assert not may(auth, Op.DESCRIBE)


# -- the store: add, remove, replace, set_all; the cache ---------------------------------------


def test_add_returns_what_was_new_and_bindings_lists_them_sorted() -> None:
    auth = Authorizer()
    first = [AclBinding(lit("b"), ace(Op.READ)), AclBinding(lit("a"), ace(Op.READ))]
    assert auth.add(first) == sorted(first)
    again = [AclBinding(lit("a"), ace(Op.READ)), AclBinding(pre("a"), ace(Op.WRITE))]
    assert auth.add(again) == [again[1]]
    assert auth.bindings() == sorted([*first, again[1]])
    assert len(auth) == 3
    assert auth.entries(lit("a")) == {ace(Op.READ)}
    assert auth.patterns() == sorted([lit("a"), lit("b"), pre("a")])


def test_add_validates_every_binding_before_adding_any() -> None:
    auth = Authorizer()
    with pytest.raises(AclError, match="empty resource name"):
        auth.add([AclBinding(lit("ok"), ace(Op.READ)), AclBinding(lit(""), ace(Op.READ))])
    assert auth.bindings() == []
    assert auth.version == 0


def test_remove_deletes_what_the_filter_matches_and_returns_it() -> None:
    auth = Authorizer()
    auth.set_all(STORED)
    gone = auth.remove(AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", MATCH)))
    assert gone == sorted(STORED[:5])
    assert auth.bindings() == sorted(STORED[5:])
    assert auth.remove(AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", MATCH))) == []
    assert auth.entries(pre("f")) == frozenset()


def test_remove_refuses_an_unknown_filter() -> None:
    with pytest.raises(AclError):
        Authorizer().remove(AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.UNKNOWN)))


def test_bindings_applies_the_filter() -> None:
    auth = Authorizer()
    auth.set_all(STORED)
    assert auth.bindings(AclBindingFilter(entry=AccessControlEntryFilter(permission=DENY))) == [STORED[3]]


def test_replace_and_set_all_refuse_filter_patterns() -> None:
    with pytest.raises(ValueError, match="cannot hold ACLs"):
        Authorizer().replace(ResourcePattern(TOPIC, "x", MATCH), [ace(Op.READ)])
    with pytest.raises(ValueError, match="cannot hold ACLs"):
        Authorizer().set_all([AclBinding(lit("x", ResourceType.ANY), ace(Op.READ))])


def test_a_decision_is_cached_until_the_acls_change() -> None:
    auth = Authorizer()
    assert not may(auth, Op.READ)
    assert len(auth._decisions) == 1
    assert not may(auth, Op.READ)
    assert len(auth._decisions) == 1


def test_add_changes_a_cached_decision() -> None:
    auth = authorizer((lit("other"), ace(Op.READ)))
    assert not may(auth, Op.READ)
    before = auth.version
    auth.add([AclBinding(pre("pay"), ace(Op.READ))])
    assert auth.version > before
    assert may(auth, Op.READ)


def test_remove_changes_a_cached_decision() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (lit("payments"), ace(Op.READ, DENY, principal=BOB)))
    assert may(auth, Op.READ)
    before = auth.version
    auth.remove(AclBindingFilter(ResourcePatternFilter(TOPIC, "payments", LITERAL), AccessControlEntryFilter(ALICE)))
    assert auth.version > before
    assert not may(auth, Op.READ)


def test_replace_changes_a_cached_decision_and_empty_removes_the_pattern() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)))
    assert may(auth, Op.READ)
    assert auth.replace(lit("payments"), [ace(Op.READ, DENY)])
    assert not may(auth, Op.READ)
    assert auth.replace(pre("pay"), [ace(Op.WRITE)])
    assert auth.replace(pre("pay"), [])
    assert auth.patterns() == [lit("payments")]
    assert auth.replace(lit("payments"), [])
    assert auth.patterns() == []
    assert may(auth, Op.READ) is False  # no ACL found, allow_everyone off


def test_replace_with_the_same_entries_is_no_change() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)))
    before = auth.version
    assert not auth.replace(lit("payments"), [ace(Op.READ)])
    assert auth.version == before


def test_set_all_replaces_everything_and_changes_decisions() -> None:
    auth = authorizer((lit("payments"), ace(Op.READ)), (pre("pay"), ace(Op.WRITE)))
    assert may(auth, Op.WRITE)
    before = auth.version
    auth.set_all([AclBinding(lit("payments"), ace(Op.READ, DENY))])
    assert auth.version > before
    assert not may(auth, Op.WRITE)
    assert not may(auth, Op.READ)
    assert auth.bindings() == [AclBinding(lit("payments"), ace(Op.READ, DENY))]


def test_the_decision_cache_is_bounded() -> None:
    auth = authorizer((lit(WILDCARD), ace(Op.READ)), cache_limit=10)
    for i in range(100):
        assert may(auth, Op.READ, f"t{i}")
        assert len(auth._decisions) <= 10
    for i in range(20):
        assert auth.authorize_by_resource_type(f"User:u{i}", HOST, Op.WRITE, TOPIC) is False
        assert len(auth._type_decisions) <= 10


# -- authorize_by_resource_type (KIP-679) --------------------------------------------------------


def by_type(auth: Authorizer, operation: AclOperation = Op.WRITE, principal: str = ALICE, host: str = HOST) -> bool:
    return auth.authorize_by_resource_type(principal, host, operation, TOPIC)


def test_by_type_allows_when_some_topic_is_writable() -> None:
    auth = authorizer((lit("payments"), ace(Op.WRITE)), (lit("orders", GROUP), ace(Op.READ)))
    assert by_type(auth)
    assert not by_type(auth, Op.READ)  # the group's READ is another type
    assert not by_type(auth, principal=BOB)
    assert auth.authorize_by_resource_type(ALICE, HOST, Op.READ, GROUP)


def test_by_type_counts_all_the_wildcard_principal_and_the_host() -> None:
    assert by_type(authorizer((pre("p"), ace(Op.ALL))))
    assert by_type(authorizer((lit("t"), ace(Op.WRITE, principal="User:*"))))
    assert by_type(authorizer((lit("t"), ace(Op.WRITE, host=HOST))))
    assert not by_type(authorizer((lit("t"), ace(Op.WRITE, host="10.9.9.9"))))


def test_by_type_uses_no_implied_operations() -> None:
    assert not by_type(authorizer((lit("t"), ace(Op.READ))), Op.DESCRIBE)


def test_by_type_super_user_and_no_acls() -> None:
    assert by_type(authorizer((lit(WILDCARD), ace(Op.ALL, DENY, principal="User:*")), super_users=(ALICE,)))
    assert not by_type(Authorizer())
    assert by_type(Authorizer(allow_everyone_if_no_acl_found=True))


def test_by_type_a_wildcard_deny_wins_even_over_allow_everyone() -> None:
    auth = authorizer(
        (lit("t"), ace(Op.WRITE)), (lit(WILDCARD), ace(Op.WRITE, DENY)), allow_everyone_if_no_acl_found=True
    )
    assert not by_type(auth)


def test_by_type_allow_everyone_allows_despite_other_denials() -> None:
    auth = authorizer((lit("t"), ace(Op.WRITE, DENY)), allow_everyone_if_no_acl_found=True)
    assert by_type(auth)


@pytest.mark.parametrize(
    ("bindings", "allowed"),
    [
        ([(lit("t"), ace(Op.WRITE)), (lit("t"), ace(Op.WRITE, DENY))], False),
        ([(lit("t"), ace(Op.WRITE)), (lit("u"), ace(Op.WRITE, DENY))], True),
        ([(lit("foo"), ace(Op.WRITE)), (pre("f"), ace(Op.WRITE, DENY))], False),
        ([(lit("foo"), ace(Op.WRITE)), (pre("foo"), ace(Op.WRITE, DENY))], False),
        ([(lit("foo"), ace(Op.WRITE)), (pre("foox"), ace(Op.WRITE, DENY))], True),
        ([(pre("foo"), ace(Op.WRITE)), (pre("fo"), ace(Op.WRITE, DENY))], False),
        ([(pre("foo"), ace(Op.WRITE)), (pre("foob"), ace(Op.WRITE, DENY))], True),  # "fooa" is still writable
        ([(pre("foo"), ace(Op.WRITE)), (lit("foo"), ace(Op.WRITE, DENY))], True),
        ([(lit(WILDCARD), ace(Op.WRITE)), (pre("a"), ace(Op.WRITE, DENY))], True),
        ([(lit("t"), ace(Op.WRITE)), (pre("x"), ace(Op.ALL, DENY))], True),
        ([(lit("t"), ace(Op.WRITE)), (pre("t"), ace(Op.READ, DENY))], True),  # another operation's denial
        ([(lit("t"), ace(Op.WRITE)), (pre("t"), ace(Op.WRITE, DENY, principal=BOB))], True),
    ],
)
def test_by_type_denials_cancel_only_the_allows_they_cover(
    bindings: list[tuple[ResourcePattern, AccessControlEntry]], allowed: bool
) -> None:
    assert by_type(authorizer(*bindings)) is allowed


def test_by_type_decision_changes_when_the_acls_change() -> None:
    auth = authorizer((lit("t"), ace(Op.WRITE)))
    assert by_type(auth)
    auth.add([AclBinding(pre("t"), ace(Op.WRITE, DENY))])
    assert not by_type(auth)
    auth.remove(AclBindingFilter(entry=AccessControlEntryFilter(permission=DENY)))
    assert by_type(auth)


@pytest.mark.parametrize(
    ("operation", "resource_type"),
    [(Op.ANY, TOPIC), (Op.UNKNOWN, TOPIC), (Op.WRITE, ResourceType.ANY), (Op.WRITE, ResourceType.UNKNOWN)],
)
def test_by_type_refuses_filter_values(operation: AclOperation, resource_type: ResourceType) -> None:
    with pytest.raises(ValueError, match="concrete operation and resource type"):
        Authorizer().authorize_by_resource_type(ALICE, HOST, operation, resource_type)
