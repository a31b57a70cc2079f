"""SCRAM credentials and ACLs in Kafka's own znodes: blocking reads and compare-and-set writes.

==================================================  ==  ======================================================
znode                                                   data
==================================================  ==  ======================================================
``/config/users/<sanitized user>``                  P   ``{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,
                                                        stored_key=<b64>,server_key=<b64>,iterations=4096"}}``;
                                                        other keys (quotas) are kept; no znode once the config
                                                        is empty (kept, empty, over a user's client quotas).
                                                        The name is ``Sanitizer.sanitize(user)``
``/config/changes/config_change_<seq>``             PS  ``{"version":2,"entity_path":"users/<sanitized user>"}``
``/kafka-acl/<Type>/<name>``                        P   ``{"version":1,"acls":[{"principal":"User:alice",
                                                        "permissionType":"Allow","operation":"Read",
                                                        "host":"*"}]}``: a LITERAL pattern's entries
``/kafka-acl-extended/prefixed/<Type>/<name>``      P   the same, for a PREFIXED pattern
``/kafka-acl-changes/acl_changes_<seq>``            PS  ``TOPIC:<name>`` (a LITERAL pattern changed)
``/kafka-acl-extended-changes/acl_changes_<seq>``   PS  ``{"version":1,"resourceType":"TOPIC","name":"<name>",
                                                        "patternType":"PREFIXED"}``
==================================================  ==  ======================================================

The bytes come from the pure modules :mod:`node.security._scram` (user config, credential text,
znode names) and :mod:`node.security._acl_zk` (ACL paths, entries, notifications); this module
only moves them. Every write is a compare-and-set on the znode's version (or a create that
fails if the znode appeared), retried from a fresh read when it loses a race, and followed by
the change notification Kafka writes, so Kafka brokers sharing the ZooKeeper re-read it too.

On a secured site (``zookeeper.set.acl``) the user znodes and their parent are not readable
by the world (:func:`node.zkkit.znode_acl`); every other znode here is.

Blocking (kazoo calls): run each function in one worker thread (``ZkSession.run``) or on
kazoo's threads. Reads are retried through a connection loss; a write that fails with one
may have happened (re-read to learn the outcome).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from node.security._acl import AccessControlEntry, ResourcePattern
from node.security._acl_zk import (
    ROOT_PATHS,
    TYPE_PATHS,
    acl_path,
    change_notification,
    decode_acls,
    encode_acls,
    pattern_from_path,
)
from node.security._scram import (
    ScramCredential,
    credential_from_text,
    decode_user_config,
    encode_user_config,
    user_znode_name,
)
from node.security._store import SecurityStoreError
from node.zkkit import ensure_path, znode_acl

from ._layout import CONFIG_CHANGE_PREFIX, CONFIG_CHANGE_VERSION, CONFIG_CHANGES
from ._reads import read_many, retried

logger = logging.getLogger(__name__)

CONFIG_USERS = "/config/users"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")  # the user config keys that are credentials
#: Every persistent parent the store needs, parents first (Kafka creates them at startup too).
SECURITY_PATHS: tuple[str, ...] = (CONFIG_USERS, CONFIG_CHANGES, *ROOT_PATHS)
# A compare-and-set loop gives up after this many lost races (each one means another writer progressed).
WRITE_ATTEMPTS = 50


def ensure_paths(client: Any) -> None:
    """Create :data:`SECURITY_PATHS` where missing."""
    for path in SECURITY_PATHS:
        ensure_path(client, path)


# -- users ------------------------------------------------------------------------------------


def user_path(user: str) -> str:
    """``/config/users/<sanitized user>``; ValueError for an empty name."""
    if not user:
        raise ValueError("a SCRAM user name may not be empty")
    return f"{CONFIG_USERS}/{user_znode_name(user)}"


def decode_credentials(data: bytes) -> dict[str, ScramCredential]:
    """The credentials in a user znode's data, by mechanism; all or nothing.

    Raises ValueError (never quoting a key) when the data or any credential in it is malformed.
    """
    config = decode_user_config(data)
    credentials = {}
    for mechanism in SCRAM_MECHANISMS:
        if mechanism in config:
            try:
                credentials[mechanism] = credential_from_text(config[mechanism])
            except ValueError as exc:
                raise ValueError(f"{mechanism}: {exc}") from None
    return credentials


@dataclass(frozen=True)
class UserWrite:
    """What a write left in a user znode, and where it stands in ZooKeeper's history.

    ``data`` is the znode's new data, or None when the write deleted it. ``zxid`` orders it
    against what watches report: the new ``mzxid`` of a written znode; for a deletion, the
    ``mzxid`` of the deleted version plus one (the deletion came after it, every later
    re-creation after the deletion).
    """

    name: str  # the znode name (sanitized user)
    data: bytes | None
    zxid: int


def update_user_config(
    client: Any, user: str, edit: Callable[[dict[str, str]], dict[str, str]], what: str
) -> UserWrite | None:
    """Apply ``edit`` to ``user``'s config (``{}`` without a znode) with compare-and-set, deleting the
    znode when the result is empty, then post a ``/config/changes`` notification.

    Returns None, writing nothing, when ``edit`` changes nothing. ``what`` names the operation in errors.

    Raises:
        SecurityStoreError: the znode holds malformed data (it is left as it is), or the write
            lost :data:`WRITE_ATTEMPTS` races in a row.
    """
    path = user_path(user)
    for _ in range(WRITE_ATTEMPTS):
        try:
            data, stat = retried(client.get, path)
        except NoNodeError:
            data, stat = None, None
        try:
            config = decode_user_config(data or b"")
        except ValueError as exc:
            raise SecurityStoreError(f"cannot {what}: znode {path} is malformed ({exc}); fix or delete it") from None
        new = edit(dict(config))
        if new == config:
            return None
        new_data = encode_user_config(new)
        try:
            if stat is None:
                _, new_stat = client.create(path, new_data, acl=znode_acl(client, path), include_data=True)
                written = UserWrite(path.rsplit("/", 1)[1], new_data, new_stat.mzxid)
            elif not new:
                try:
                    client.delete(path, version=stat.version)
                    written = UserWrite(path.rsplit("/", 1)[1], None, stat.mzxid + 1)
                except NotEmptyError:  # the user's per-client quotas live below it: keep it, empty
                    new_stat = client.set(path, new_data, version=stat.version)
                    written = UserWrite(path.rsplit("/", 1)[1], new_data, new_stat.mzxid)
            else:
                new_stat = client.set(path, new_data, version=stat.version)
                written = UserWrite(path.rsplit("/", 1)[1], new_data, new_stat.mzxid)
        except (BadVersionError, NoNodeError, NodeExistsError):
            continue  # another writer got there first: read again
        notice = {"version": CONFIG_CHANGE_VERSION, "entity_path": f"users/{written.name}"}
        client.create(CONFIG_CHANGE_PREFIX, json.dumps(notice, separators=(",", ":")).encode(), sequence=True)
        return written
    raise SecurityStoreError(f"cannot {what}: {path} changed concurrently {WRITE_ATTEMPTS} times in a row")


# -- ACLs -------------------------------------------------------------------------------------


def list_patterns(client: Any) -> list[ResourcePattern]:
    """Every pattern with a znode (read pipelined: one round trip); unparseable znode names are logged and skipped."""

    def list_all() -> list[tuple[str, list[str]]]:
        pending = [(path, client.get_children_async(path)) for path in TYPE_PATHS]
        found = []
        for path, result in pending:
            try:
                found.append((path, result.get()))
            except NoNodeError:
                continue
        return found

    patterns = []
    for type_path, children in retried(list_all):
        for child in sorted(children):
            try:
                patterns.append(pattern_from_path(f"{type_path}/{child}"))
            except ValueError as exc:
                logger.warning("ignoring the ACL znode %s/%s: %s", type_path, child, exc)
    return patterns


def read_patterns(
    client: Any, patterns: Iterable[ResourcePattern]
) -> dict[ResourcePattern, frozenset[AccessControlEntry] | None]:
    """Each pattern's entries as stored now (empty without a znode), read pipelined; None for a
    pattern whose znode is malformed (logged)."""
    wanted = sorted(set(patterns))
    found = {pattern: data for pattern, data, _ in retried(read_many, client, [(p, acl_path(p)) for p in wanted])}
    entries: dict[ResourcePattern, frozenset[AccessControlEntry] | None] = {}
    for pattern in wanted:
        try:
            entries[pattern] = decode_acls(found.get(pattern, b""))
        except ValueError as exc:
            logger.error("the ACL znode %s is malformed, its ACLs are not applied: %s", acl_path(pattern), exc)
            entries[pattern] = None
    return entries


def update_pattern(
    client: Any,
    pattern: ResourcePattern,
    edit: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    what: str,
) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
    """Apply ``edit`` to ``pattern``'s stored entries with compare-and-set (creating the znode if
    missing, deleting it when no entry is left), then post the pattern's change notification.

    Returns the entries before and after; equal when ``edit`` changed nothing (nothing is written).

    Raises:
        ValueError: the pattern or an entry cannot be stored (``acl_path``, ``encode_acls``).
        SecurityStoreError: the znode holds malformed data (it is left as it is), or the write
            lost :data:`WRITE_ATTEMPTS` races in a row.
    """
    path = acl_path(pattern)
    for _ in range(WRITE_ATTEMPTS):
        try:
            data, stat = retried(client.get, path)
        except NoNodeError:
            data, stat = b"", None
        try:
            current = decode_acls(data)
        except ValueError as exc:
            raise SecurityStoreError(f"cannot {what}: znode {path} is malformed ({exc}); fix or delete it") from None
        new = edit(current)
        if new == current:
            return current, current
        try:
            if stat is None:
                client.create(path, encode_acls(new), makepath=True)
            elif not new:
                client.delete(path, version=stat.version)
            else:
                client.set(path, encode_acls(new), version=stat.version)
        except (BadVersionError, NoNodeError, NodeExistsError):
            continue
        prefix, notice = change_notification(pattern)
        client.create(prefix, notice, sequence=True)
        return current, new
    raise SecurityStoreError(f"cannot {what}: {path} changed concurrently {WRITE_ATTEMPTS} times in a row")


def add_entries(client: Any, entries: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> list[ResourcePattern]:
    """Merge ``entries`` into each pattern's znode (:func:`update_pattern`); returns the patterns changed."""
    changed = []
    for pattern, adding in sorted(entries.items()):
        before, after = update_pattern(client, pattern, adding.union, f"add ACLs to {pattern}")
        if before != after:
            changed.append(pattern)
    return changed


def remove_entries(
    client: Any,
    selects_pattern: Callable[[ResourcePattern], bool],
    selects_entry: Callable[[AccessControlEntry], bool],
) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """Remove the selected entries of every selected pattern stored now (:func:`update_pattern`);
    returns what each changed pattern lost."""
    removed = {}
    for pattern in list_patterns(client):
        if not selects_pattern(pattern):
            continue
        before, after = update_pattern(
            client,
            pattern,
            lambda current: frozenset(e for e in current if not selects_entry(e)),
            f"remove ACLs of {pattern}",
        )
        if before != after:
            removed[pattern] = before - after
    return removed
