"""Kafka's ACL model and authorizer: resource patterns, entries, filters, and the allow/deny decision.

An ACL binding says "principal P is ALLOWED/DENIED operation O from host H on resources matching
pattern R" (KIP-11). Patterns are LITERAL (one name, or the wildcard ``*`` meaning every name of
the type) or PREFIXED (every name that starts with the pattern's name; KIP-290).

The decision (``Authorizer.authorize``), as Kafka's ``AclAuthorizer`` makes it:

1. A super user is allowed everything.
2. The ACLs that *apply* to resource (type, name) are those on the literal name, on the literal
   ``*``, and on every prefixed pattern whose name starts the resource name, whatever their
   principal, host or operation. If none apply, the answer is ``allow_everyone_if_no_acl_found``.
3. Of those, an entry *matches* the request when its principal is the requester's or ``User:*``
   (for any principal type) and its host is the requester's address or ``*``.
4. A matching DENY for the operation itself or for ALL denies. DENY does not imply: DENY READ does
   not deny DESCRIBE (Kafka checks only the operation and ALL for denials).
5. Otherwise a matching ALLOW for the operation, for ALL, or for an operation that implies it
   allows. Only ALLOW implies: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS (the ``AclOperation`` javadoc).
6. Otherwise denied.

``authorize_by_resource_type`` answers "may this principal do the operation on *some* resource of
this type" (KIP-679: IDEMPOTENT_WRITE on the cluster is granted to whoever may WRITE some topic);
its rule is written on the method.

Decisions are cached (a dict look-up on repeated calls); any change to the ACLs clears the cache
and raises ``version``.

Sources: KIP-11 (authorization model), KIP-140 (CreateAcls/DeleteAcls/DescribeAcls and what they
refuse), KIP-290 (prefixed patterns and MATCH filters), KIP-679 (``authorizeByResourceType``),
the ``AclOperation``/``ResourceType``/``PatternType`` javadoc for the wire codes, and the Kafka
documentation's "Authorization and ACLs" section. Behaviour checked against Kafka's
``AclAuthorizer`` (the ZooKeeper-era authorizer, whose storage strait shares) and, for CreateAcls
validation, the KRaft controller's ``AclControlManager``.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from node.protocol import ErrorCode

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a literal pattern with this name applies to every name; also the any-host entry
WILDCARD_PRINCIPAL = "User:*"  # an entry with this principal matches every principal, of any type

# A decision cache larger than this is cleared (not evicted entry by entry: cheap and rare).
DECISION_CACHE_LIMIT = 100_000


class _KafkaCode(enum.IntEnum):
    """Kafka's ``fromCode``: a code this broker does not know decodes as UNKNOWN (0) instead of failing."""

    @classmethod
    def _missing_(cls, value: object) -> _KafkaCode | None:
        return cls(0) if isinstance(value, int) else None


class ResourceType(_KafkaCode):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaCode):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, names compared exactly
    MATCH = 2  # filters only: the patterns that would apply to the filter's name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaCode):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaCode):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# The operations whose ALLOW also allows the key (the key itself included). Denials never imply.
_ALLOWED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}

_STORED_PATTERN_TYPES = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
_CONCRETE_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})
_FILTER_ONLY_RESOURCE_TYPES = frozenset({ResourceType.UNKNOWN, ResourceType.ANY})
_FILTER_ONLY_OPERATIONS = frozenset({AclOperation.UNKNOWN, AclOperation.ANY})


class AclError(ValueError):
    """An ACL binding or filter the broker refuses; ``code`` is the Kafka error code the client gets."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str  # "Type:name", e.g. "User:alice"; "User:*" matches every principal
    host: str  # an IP address, or "*" for every host
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def parse_principal(principal: str) -> tuple[str, str]:
    """``"User:alice"`` -> ``("User", "alice")``; the name may itself hold colons (split at the first).

    Raises AclError (INVALID_REQUEST) when there is no colon, or the type or the name is empty.
    """
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        raise AclError(
            ErrorCode.INVALID_REQUEST, f"principal {principal!r} is not of the form PrincipalType:name (User:alice)"
        )
    return kind, name


def storable_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a resource name of a stored pattern, or None when it can.

    Each pattern is one ZooKeeper node named after the resource (``_acl_zk``): Kafka refuses
    names holding ``/`` ("ACL binding contains invalid resource name"), and ZooKeeper refuses the
    node names ``.`` and ``..`` and control or non-character code points.
    """
    if not name:
        return "the resource name is empty"
    if "/" in name:
        return f"resource name {name!r} contains '/'"
    if name in (".", ".."):
        return f"resource name {name!r} is not a valid ZooKeeper node name"
    for char in name:
        point = ord(char)
        if point < 0x20 or 0x7F <= point <= 0x9F or 0xD800 <= point <= 0xF8FF or 0xFFF0 <= point <= 0xFFFF:
            return f"resource name {name!r} contains the character U+{point:04X}, which ZooKeeper refuses"
    return None


def _host_problem(host: str) -> str | None:
    if host == WILDCARD:
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"host {host!r} is neither '*' nor an IP address (Kafka matches hosts by client IP address)"
    return None


def validate_binding(binding: AclBinding) -> None:
    """Raise AclError unless CreateAcls may store ``binding``.

    Every refusal answers INVALID_REQUEST (42), as Kafka does:
    - UNKNOWN or ANY resource type, pattern type other than LITERAL/PREFIXED, UNKNOWN or ANY
      operation, permission other than ALLOW/DENY: the KRaft controller's ``validateNewAcl``
      answers INVALID_REQUEST. (The ZooKeeper-era broker failed the whole request while parsing
      it, with UNKNOWN_SERVER_ERROR; the per-creation INVALID_REQUEST is the current behaviour.)
    - An empty name ("Invalid empty resource name") and a CLUSTER resource not named
      ``kafka-cluster`` ("The only valid name for the CLUSTER resource is kafka-cluster"): the
      broker's CreateAcls handler (KIP-140), INVALID_REQUEST.
    - A principal without a colon: ``validateNewAcl`` and ``parseKafkaPrincipal``,
      INVALID_REQUEST. Stricter than Kafka: an empty type or name ("User:") is refused too.
    - A name holding ``/``: ``AclAuthorizer.validateAclBinding``, INVALID_REQUEST ("Failed to
      create ACL"). Names ZooKeeper cannot hold as a node name are refused likewise.
    - Stricter than Kafka, which stores these and then never matches them as intended:
      a PREFIXED pattern named ``*`` (it would only match names starting with a literal ``*``;
      LITERAL ``*`` is the wildcard), and a host that is neither ``*`` nor an IP address (Kafka
      compares hosts with the client's IP address, so a host name never matches).
    """
    pattern, entry = binding.pattern, binding.entry
    problem: str | None = None
    if pattern.resource_type in _FILTER_ONLY_RESOURCE_TYPES:
        problem = f"invalid resource type {pattern.resource_type.name}"
    elif pattern.pattern_type not in _STORED_PATTERN_TYPES:
        problem = f"invalid pattern type {pattern.pattern_type.name} (ACLs are LITERAL or PREFIXED)"
    elif entry.operation in _FILTER_ONLY_OPERATIONS:
        problem = f"invalid operation {entry.operation.name}"
    elif entry.permission not in _CONCRETE_PERMISSIONS:
        problem = f"invalid permission type {entry.permission.name} (ACLs ALLOW or DENY)"
    elif not pattern.name:
        problem = "Invalid empty resource name"
    elif pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        problem = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME} (not {pattern.name!r})"
    elif pattern.pattern_type is PatternType.PREFIXED and pattern.name == WILDCARD:
        problem = "a PREFIXED pattern may not be named '*': use a LITERAL '*' for every resource of the type"
    else:
        problem = storable_name_problem(pattern.name) or _host_problem(entry.host)
    if problem is not None:
        raise AclError(ErrorCode.INVALID_REQUEST, problem)
    parse_principal(entry.principal)


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which patterns a DescribeAcls/DeleteAcls filter selects; ANY and None select everything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``.

        With a name and pattern type ANY, LITERAL or PREFIXED the name must equal the pattern's;
        with MATCH a pattern matches when it would apply to a resource of that name: the literal
        name, the literal ``*``, or a prefixed pattern whose name starts the filter's name.
        """
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type is PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD)
            if pattern.pattern_type is PatternType.PREFIXED:
                return self.name.startswith(pattern.name)
            return False
        if self.pattern_type is not PatternType.ANY and self.pattern_type is not pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Which entries a filter selects; principal and host compare exactly (``User:*`` is not a wildcard here)."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation is entry.operation)
            and (self.permission is AclPermissionType.ANY or self.permission is entry.permission)
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = field(default_factory=ResourcePatternFilter)
    entry: AccessControlEntryFilter = field(default_factory=AccessControlEntryFilter)

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


MATCH_ALL = AclBindingFilter()  # selects every binding


def validate_filter(binding_filter: AclBindingFilter) -> None:
    """Raise AclError (INVALID_REQUEST) when a DescribeAcls/DeleteAcls filter holds an UNKNOWN value.

    Kafka refuses exactly that (``AclControlManager.validateFilter``: "Unknown patternFilter." /
    "Unknown entryFilter."); ANY, MATCH and absent names and principals are what filters are for.
    """
    pattern, entry = binding_filter.pattern, binding_filter.entry
    if pattern.resource_type is ResourceType.UNKNOWN or pattern.pattern_type is PatternType.UNKNOWN:
        raise AclError(
            ErrorCode.INVALID_REQUEST,
            f"unknown pattern filter: resource type {pattern.resource_type.name}, "
            f"pattern type {pattern.pattern_type.name}",
        )
    if entry.operation is AclOperation.UNKNOWN or entry.permission is AclPermissionType.UNKNOWN:
        raise AclError(
            ErrorCode.INVALID_REQUEST,
            f"unknown entry filter: operation {entry.operation.name}, permission type {entry.permission.name}",
        )


@functools.lru_cache(maxsize=4096)
def _canonical_host(host: str) -> str:
    """One spelling per address, so ``::1`` in an ACL matches a client at ``0:0:0:0:0:0:0:1``."""
    if host == WILDCARD:
        return host
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _entry_matches(entry: AccessControlEntry, principal: str, client: str) -> bool:
    """Whether ``entry`` is about ``principal`` (or ``User:*``) connected from ``client`` (a canonical host)."""
    if entry.principal not in (principal, WILDCARD_PRINCIPAL):
        return False
    return entry.host == WILDCARD or _canonical_host(entry.host) == client


def _check_storable(pattern: ResourcePattern) -> None:
    if pattern.resource_type in _FILTER_ONLY_RESOURCE_TYPES or pattern.pattern_type not in _STORED_PATTERN_TYPES:
        raise ValueError(f"{pattern} cannot hold ACLs: it names no concrete resource type and pattern type")


_DecisionKey = tuple[str, str, AclOperation, ResourceType, str]
_TypeDecisionKey = tuple[str, str, AclOperation, ResourceType]


class Authorizer:
    """The broker's ACLs and the decisions made from them (pure: storage loads and saves through it).

    Not thread-safe; the broker calls it from its one trio thread.
    """

    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        *,
        cache_limit: int = DECISION_CACHE_LIMIT,
    ) -> None:
        """``super_users`` are principals (``super.users``, already split at ';'); ValueError for a malformed one."""
        if isinstance(super_users, str):
            raise TypeError("super_users is an iterable of principals: split super.users at ';' first")
        users = frozenset(user.strip() for user in super_users)
        for user in users:
            parse_principal(user)
        self.super_users = users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._cache_limit = cache_limit
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._prefixes: dict[ResourceType, set[str]] = {}  # names of the prefixed patterns, by type
        self._decisions: dict[_DecisionKey, bool] = {}
        self._type_decisions: dict[_TypeDecisionKey, bool] = {}
        self._version = 0

    @property
    def version(self) -> int:
        """Goes up by at least one on every change to the ACLs."""
        return self._version

    def __len__(self) -> int:
        """How many bindings are held (Kafka's ``aclCount``)."""
        return sum(len(entries) for entries in self._acls.values())

    # -- loading and changing -------------------------------------------------------------

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The entries held for exactly ``pattern`` (empty when none)."""
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        """Every pattern that holds at least one entry, sorted."""
        return sorted(self._acls)

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> bool:
        """Make ``entries`` the whole set for ``pattern`` (as read from its znode); True when that changed anything.

        Not validated (ACLs already stored are taken as they are), but ``pattern`` must be a
        concrete LITERAL or PREFIXED pattern (ValueError otherwise).
        """
        _check_storable(pattern)
        new = frozenset(entries)
        if new == self._acls.get(pattern, frozenset()):
            return False
        self._store(pattern, new)
        self._changed()
        return True

    def set_all(self, bindings: Iterable[AclBinding]) -> None:
        """Replace every ACL with ``bindings`` (a full load from storage)."""
        grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            _check_storable(binding.pattern)
            grouped.setdefault(binding.pattern, set()).add(binding.entry)
        self._acls = {}
        self._prefixes = {}
        for pattern, entries in grouped.items():
            self._store(pattern, frozenset(entries))
        self._changed()

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Add ``bindings`` (CreateAcls); returns those not already held, sorted.

        Raises AclError for the first binding ``validate_binding`` refuses, before adding any.
        """
        wanted = list(bindings)
        for binding in wanted:
            validate_binding(binding)
        added = sorted({b for b in wanted if b.entry not in self._acls.get(b.pattern, frozenset())})
        if not added:
            return []
        for pattern in {b.pattern for b in added}:
            new = {b.entry for b in added if b.pattern == pattern}
            self._store(pattern, self._acls.get(pattern, frozenset()) | new)
        self._changed()
        return added

    def remove(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove every binding ``binding_filter`` matches (DeleteAcls); returns them, sorted.

        Raises AclError when ``validate_filter`` refuses the filter.
        """
        validate_filter(binding_filter)
        removed = self.bindings(binding_filter)
        if not removed:
            return []
        for pattern in {b.pattern for b in removed}:
            gone = {b.entry for b in removed if b.pattern == pattern}
            self._store(pattern, self._acls[pattern] - gone)
        self._changed()
        return removed

    def bindings(self, binding_filter: AclBindingFilter = MATCH_ALL) -> list[AclBinding]:
        """The bindings ``binding_filter`` matches (DescribeAcls), sorted."""
        found = [
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            if binding_filter.pattern.matches(pattern)
            for entry in entries
            if binding_filter.entry.matches(entry)
        ]
        found.sort()
        return found

    def _store(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        prefixed = pattern.pattern_type is PatternType.PREFIXED
        if entries:
            self._acls[pattern] = entries
            if prefixed:
                self._prefixes.setdefault(pattern.resource_type, set()).add(pattern.name)
        else:
            self._acls.pop(pattern, None)
            if prefixed:
                names = self._prefixes.get(pattern.resource_type)
                if names is not None:
                    names.discard(pattern.name)

    def _changed(self) -> None:
        self._version += 1
        self._decisions.clear()
        self._type_decisions.clear()

    # -- decisions --------------------------------------------------------------------------

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """May ``principal`` connected from ``host`` (an IP address) perform ``operation`` on the named resource.

        The rule is in the module docstring. A dict look-up when asked before with no ACL change since.
        """
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= self._cache_limit:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _applying(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        """The entry sets of every pattern that applies to the resource: literal name, literal ``*``, prefixes."""
        found: list[frozenset[AccessControlEntry]] = []
        for literal in {name, WILDCARD}:
            entries = self._acls.get(ResourcePattern(resource_type, literal, PatternType.LITERAL))
            if entries:
                found.append(entries)
        prefixes = self._prefixes.get(resource_type)
        if prefixes:
            # Walk whichever is shorter: the stored prefixes, or the name's own prefixes.
            if len(prefixes) <= len(name):
                starts = [prefix for prefix in prefixes if name.startswith(prefix)]
            else:
                starts = [name[:end] for end in range(1, len(name) + 1) if name[:end] in prefixes]
            for prefix in starts:
                found.append(self._acls[ResourcePattern(resource_type, prefix, PatternType.PREFIXED)])
        return found

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        applying = self._applying(resource_type, name)
        if not applying:
            return self.allow_everyone_if_no_acl_found
        client = _canonical_host(host)
        allowed_by = _ALLOWED_BY.get(operation, frozenset({operation}))
        allowed = False
        for entries in applying:
            for entry in entries:
                if not _entry_matches(entry, principal, client):
                    continue
                if entry.permission is AclPermissionType.DENY:
                    if entry.operation is operation or entry.operation is AclOperation.ALL:
                        return False
                elif entry.permission is AclPermissionType.ALLOW and (
                    entry.operation is AclOperation.ALL or entry.operation in allowed_by
                ):
                    allowed = True
        return allowed

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May ``principal`` perform ``operation`` on at least one resource of ``resource_type`` (KIP-679).

        Kafka's ``AclAuthorizer.authorizeByResourceType``, over the entries that match the
        principal (or ``User:*``), the host (or ``*``) and the operation (or ALL; no implied
        operations here):

        1. A super user: allowed.
        2. A matching DENY on the literal ``*``: denied.
        3. ``allow_everyone_if_no_acl_found``: allowed (whatever ACLs other resources have).
        4. No matching DENY at all: allowed when any matching ALLOW exists.
        5. Otherwise allowed when some ALLOW survives the denials: a literal ``*``; a literal name
           not denied by the same literal name nor by a prefixed DENY that starts it; or a prefix
           not starting with any prefixed DENY. (A literal DENY never cancels a prefixed ALLOW:
           the prefix still grants other names.)

        Raises ValueError for an UNKNOWN or ANY operation or resource type, as Kafka does.
        """
        if operation in _FILTER_ONLY_OPERATIONS or resource_type in _FILTER_ONLY_RESOURCE_TYPES:
            raise ValueError(
                f"authorize_by_resource_type needs a concrete operation and resource type, "
                f"not {operation.name} on {resource_type.name}"
            )
        key = (principal, host, operation, resource_type)
        decision = self._type_decisions.get(key)
        if decision is None:
            decision = self._decide_by_type(principal, host, operation, resource_type)
            if len(self._type_decisions) >= self._cache_limit:
                self._type_decisions.clear()
            self._type_decisions[key] = decision
        return decision

    def _decide_by_type(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        if principal in self.super_users:
            return True
        client = _canonical_host(host)
        names: dict[tuple[AclPermissionType, PatternType], set[str]] = {
            (permission, pattern_type): set()
            for permission in _CONCRETE_PERMISSIONS
            for pattern_type in _STORED_PATTERN_TYPES
        }
        for pattern, entries in self._acls.items():
            if pattern.resource_type is not resource_type:
                continue
            for entry in entries:
                if (
                    _entry_matches(entry, principal, client)
                    and (entry.operation is operation or entry.operation is AclOperation.ALL)
                    and entry.permission in _CONCRETE_PERMISSIONS
                ):
                    names[entry.permission, pattern.pattern_type].add(pattern.name)
        deny_literals = names[AclPermissionType.DENY, PatternType.LITERAL]
        deny_prefixes = names[AclPermissionType.DENY, PatternType.PREFIXED]
        allow_literals = names[AclPermissionType.ALLOW, PatternType.LITERAL]
        allow_prefixes = names[AclPermissionType.ALLOW, PatternType.PREFIXED]
        if WILDCARD in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        if not deny_literals and not deny_prefixes:
            return bool(allow_literals or allow_prefixes)

        def prefix_denied(allowed_name: str) -> bool:
            return any(allowed_name.startswith(prefix) for prefix in deny_prefixes)

        if any(not prefix_denied(prefix) for prefix in allow_prefixes):
            return True
        return any(
            literal == WILDCARD or (literal not in deny_literals and not prefix_denied(literal))
            for literal in allow_literals
        )
