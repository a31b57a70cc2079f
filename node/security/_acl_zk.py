"""Kafka's ZooKeeper layout for ACLs, so that ACLs written by Kafka or its tools are read as they are.

Znodes (one per resource pattern; ``<Type>`` is the resource type in PascalCase: ``Topic``,
``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``, ``User``)::

    /kafka-acl/<Type>/<name>                     LITERAL patterns (``*`` is the node ``/kafka-acl/Topic/*``)
    /kafka-acl-extended/prefixed/<Type>/<name>   PREFIXED patterns (the pattern type, lower-cased)

Data of a pattern's znode (a pattern with no ACLs left has no znode)::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}

``permissionType`` is ``Allow`` or ``Deny``; ``operation`` is the operation in PascalCase
(``Read``, ``Write``, ``Create``, ``Delete``, ``Alter``, ``Describe``, ``ClusterAction``,
``DescribeConfigs``, ``AlterConfigs``, ``IdempotentWrite``, ``CreateTokens``, ``DescribeTokens``,
``All``). Empty data reads as no ACLs.

Change notifications, persistent sequential znodes that tell every broker which pattern to re-read::

    /kafka-acl-changes/acl_changes_<seq>             data "<TYPE>:<name>"            (LITERAL)
    /kafka-acl-extended-changes/acl_changes_<seq>    data {"version":1,"resourceType":"<TYPE>",
                                                           "name":"<name>","patternType":"PREFIXED"}

What is written matches what the last ZooKeeper-era Kafka writes. Its notifications spell the
resource type and pattern type as Java enum names (``TOPIC``, ``TRANSACTIONAL_ID``,
``PREFIXED``): ``resourceType.toString``/``.name`` of the Java enums. Kafka 2.0-2.4 wrote the
older Scala names (``Topic``); Kafka reads both case-insensitively. Everything read here
accepts any case, with or without underscores (``TransactionalId``, ``TRANSACTIONAL_ID``), so
notifications and znodes from either era parse.

Sources: Kafka's ``ZkData`` (``ZkAclStore``, ``LiteralAclChangeStore``,
``ExtendedAclChangeStore``, ``ResourceZNode``, ``ExtendedAclChangeEvent``), ``AclEntry``
(``toJsonCompatibleMap``/``fromBytes``), ``SecurityUtils`` (PascalCase names),
``KafkaZkClient.createAclPaths``, and KIP-290 ("Storage model": the ``/kafka-acl-extended/prefixed``
and ``/kafka-acl-extended-changes`` paths).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from typing import Any, TypeVar

from ._acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
    storable_name_problem,
)

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = f"{EXTENDED_ROOT}/prefixed"  # ExtendedAclStore: the pattern type's name, lower-cased
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"  # sequential node names: acl_changes_0000000042
ACL_DATA_VERSION = 1  # "version" of a pattern's znode data
CHANGE_EVENT_VERSION = 1  # "version" of an extended change notification

_E = TypeVar("_E", bound=enum.Enum)


def _pascal(member: enum.Enum) -> str:
    """Kafka's ``SecurityUtils`` spelling: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(word.capitalize() for word in member.name.split("_"))


def _squash(text: str) -> str:
    return text.replace("_", "").upper()


def _parse_name(kind: type[_E], text: object, allowed: Iterable[_E], what: str) -> _E:
    """The member of ``allowed`` named ``text`` in any case, with or without underscores; ValueError otherwise."""
    if isinstance(text, str):
        for member in allowed:
            if _squash(member.name) == _squash(text):
                return member
    names = ", ".join(_pascal(member) for member in allowed)
    raise ValueError(f"{what} {text!r} is not a known {kind.__name__} ({names})")


_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)
_OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))
_PERMISSIONS = (AclPermissionType.ALLOW, AclPermissionType.DENY)
_PATTERN_ROOTS = {PatternType.LITERAL: LITERAL_ROOT, PatternType.PREFIXED: PREFIXED_ROOT}

# The directories whose children are pattern znodes: list each, and pass f"{dir}/{child}" to pattern_from_path.
TYPE_PATHS: tuple[str, ...] = tuple(
    f"{root}/{_pascal(resource_type)}" for root in _PATTERN_ROOTS.values() for resource_type in _RESOURCE_TYPES
)
# Every persistent path to create before use, parents first (KafkaZkClient.createAclPaths).
ROOT_PATHS: tuple[str, ...] = (
    LITERAL_ROOT,
    EXTENDED_ROOT,
    PREFIXED_ROOT,
    *TYPE_PATHS,
    LITERAL_CHANGES,
    EXTENDED_CHANGES,
)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def acl_path(pattern: ResourcePattern) -> str:
    """The znode that holds ``pattern``'s ACLs.

    Raises ValueError for a pattern that cannot be stored: a filter-only resource or pattern type,
    or a name that is not one ZooKeeper node name (empty, holding ``/``, ...).
    """
    root = _PATTERN_ROOTS.get(pattern.pattern_type)
    if root is None or pattern.resource_type not in _RESOURCE_TYPES:
        raise ValueError(f"{pattern} cannot be stored: ACLs are on a concrete resource type, LITERAL or PREFIXED")
    problem = storable_name_problem(pattern.name)
    if problem is not None:
        raise ValueError(f"{pattern} cannot be stored: {problem}")
    return f"{root}/{_pascal(pattern.resource_type)}/{pattern.name}"


def pattern_from_path(path: str) -> ResourcePattern:
    """The pattern whose ACLs the znode at ``path`` holds (the inverse of ``acl_path``); ValueError otherwise."""
    for pattern_type, root in _PATTERN_ROOTS.items():
        if path.startswith(root + "/"):
            type_name, slash, name = path[len(root) + 1 :].partition("/")
            if not slash or not name or "/" in name:
                break
            resource_type = _parse_name(ResourceType, type_name, _RESOURCE_TYPES, f"resource type in {path!r}:")
            return ResourcePattern(resource_type, name, pattern_type)
    raise ValueError(f"{path!r} is not an ACL znode ({LITERAL_ROOT}/<Type>/<name> or {PREFIXED_ROOT}/<Type>/<name>)")


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern's znode data in Kafka's format, entries sorted so equal sets encode to equal bytes.

    Raises ValueError for an entry with a filter-only operation or permission.
    """
    acls = []
    for entry in sorted(set(entries)):
        if entry.operation not in _OPERATIONS or entry.permission not in _PERMISSIONS:
            raise ValueError(f"{entry} cannot be stored: its operation or permission is a filter value")
        acls.append(
            {
                "principal": entry.principal,
                "permissionType": _pascal(entry.permission),
                "operation": _pascal(entry.operation),
                "host": entry.host,
            }
        )
    document = {"version": ACL_DATA_VERSION, "acls": acls}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} is not UTF-8 JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError(f"{what} is not a JSON object: {data[:200]!r}")
    return document


def _string_field(document: dict[str, Any], key: str, what: str) -> str:
    value = document.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{what} has no string {key!r} (got {value!r})")
    return value


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """The entries in a pattern's znode data (Kafka's format); empty data is no entries.

    Raises ValueError naming what is malformed: not JSON, a version other than 1, no ``acls``
    list, or an entry without one of its four fields or with an unknown operation or permission.
    """
    if not data:
        return frozenset()
    document = _json_object(data, "ACL znode data")
    version = document.get("version")
    if type(version) is not int or version != ACL_DATA_VERSION:
        raise ValueError(f"ACL znode data has version {version!r}; only version {ACL_DATA_VERSION} is known")
    items = document.get("acls")
    if not isinstance(items, list):
        raise ValueError(f"ACL znode data has no 'acls' list (got {items!r})")
    entries = set()
    for index, item in enumerate(items):
        what = f"ACL znode data entry {index}"
        if not isinstance(item, dict):
            raise ValueError(f"{what} is not a JSON object: {item!r}")
        principal = _string_field(item, "principal", what)
        try:
            parse_principal(principal)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from exc
        permission = _parse_name(AclPermissionType, item.get("permissionType"), _PERMISSIONS, f"{what}: permissionType")
        operation = _parse_name(AclOperation, item.get("operation"), _OPERATIONS, f"{what}: operation")
        host = _string_field(item, "host", what)
        entries.add(AccessControlEntry(principal, host, operation, permission))
    return frozenset(entries)


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The path prefix of the persistent sequential znode to create after changing ``pattern``'s ACLs, and its data.

    Raises ValueError for a pattern that cannot be stored (see ``acl_path``).
    """
    acl_path(pattern)  # the same refusals
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": CHANGE_EVENT_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def parse_change_notification(path: str, data: bytes) -> ResourcePattern:
    """The pattern a change notification names.

    ``path`` says which notification root it came from: the root itself, the sequential prefix
    (as ``change_notification`` returns it) or the notification's own znode path. Raises
    ValueError for data not in that root's format, or a path under neither root.
    """
    if _under(path, LITERAL_CHANGES):
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            raise ValueError(f"ACL change notification {data[:200]!r} is not UTF-8") from exc
        type_name, colon, name = text.partition(":")
        if not colon or not name:
            raise ValueError(f"ACL change notification {text!r} is not of the form ResourceType:name")
        resource_type = _parse_name(ResourceType, type_name, _RESOURCE_TYPES, "ACL change notification resource type")
        return ResourcePattern(resource_type, name, PatternType.LITERAL)
    if _under(path, EXTENDED_CHANGES):
        what = "extended ACL change notification"
        event = _json_object(data, what)
        version = event.get("version")
        if type(version) is not int or not 0 < version <= CHANGE_EVENT_VERSION:
            raise ValueError(f"{what} has version {version!r}; only version {CHANGE_EVENT_VERSION} is known")
        resource_type = _parse_name(ResourceType, event.get("resourceType"), _RESOURCE_TYPES, f"{what} resourceType")
        pattern_type = _parse_name(PatternType, event.get("patternType"), tuple(_PATTERN_ROOTS), f"{what} patternType")
        name = _string_field(event, "name", what)
        if not name:
            raise ValueError(f"{what} has an empty name")
        return ResourcePattern(resource_type, name, pattern_type)
    raise ValueError(f"{path!r} is under neither {LITERAL_CHANGES} nor {EXTENDED_CHANGES}")
