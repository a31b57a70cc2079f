"""A link's sync of ACLs and SCRAM credentials from the source site to the target.

After a failover, clients must authenticate and be authorised on the target exactly as they were
on the source. So, while the link mirrors (not while failed over), every sync pass:

- **ACLs** (``sync_acls``, on by default) are read from the source with DescribeAcls and made on
  the target with CreateAcls and DeleteAcls: the link's principal needs DESCRIBE on the source's
  cluster and ALTER on the target's. Copied: topic ACLs whose literal name the link mirrors, or
  ``*``, or any prefixed topic pattern; group ACLs likewise with the link's groups; every
  transactional-id ACL. Cluster ACLs are never copied: they name each site's own brokers and
  tools. In MM2 mode only literal topic ACLs of mirrored topics are copied, renamed to the
  remote topic, with WRITE left out and ALL made READ (the remote topic is the mirror's alone,
  as MirrorMaker 2 does), plus the group ACLs.
- **SCRAM credentials** (``sync_users``, off by default) are read from the source's ZooKeeper and
  written to the target's, salt and keys as they are (no Kafka API discloses them), so each user
  logs in to the target with the same password. It needs ``zookeeper`` on both sites (and their
  ``zookeeper_digest_file`` where a site secures its ZooKeeper: the source's credentials are
  readable only with its digest).

**Ownership.** The link changes only what it made. It keeps the set of ACL bindings and
``(user, mechanism)`` credentials it created on the target (its *ledger*), and deletes an entry
of the ledger once the source no longer has it. A binding or credential the target already had
is never touched and never adopted; a target credential that differs from the source's for a user
the link does not own is a *conflict*, shown in the link's status and left alone (it may be the
target's own login of the mirror). The ledger is written before anything is created, so a crash
never leaves a made-but-unowned entry behind. It lives in the target's ZooKeeper
(``/strait/mirror/<link>/security``, shared by every mirror process of the link) when the target
has ``zookeeper``, else in the mirror's state dir (``security-<link>.json``).

Nothing is deleted on an answer the sync cannot trust: a source without an authorizer
(SECURITY_DISABLED), a failed DescribeAcls or a source ZooKeeper not yet read leave the target as
it is, and the status says why.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio
from kazoo.exceptions import NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.client import AdminClient, ClientError, SiteClient
from node.coordination import CoordinationError, ZkSecurityStore, ZkSession
from node.proc import atomic_write
from node.protocol import ErrorCode
from node.security._acl import (
    MATCH_ALL,
    WILDCARD,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from node.security._store import SecurityStoreError
from node.zkkit import ZkDigest, ensure_path

from ._config import LinkConfig, MirrorError

log = logging.getLogger("strait.mirror.security")

LEDGER_VERSION = 1
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ZK_SESSION_TIMEOUT_MS = 18_000
ZK_RETRY_S = 5.0
UserMechanism = tuple[str, str]


# -- the ledger -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Owned:
    """What the link made on the target and still owns."""

    acls: frozenset[AclBinding] = frozenset()
    users: frozenset[UserMechanism] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {
            "version": LEDGER_VERSION,
            "acls": [_binding_json(b) for b in sorted(self.acls)],
            "users": [list(u) for u in sorted(self.users)],
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> Owned:
        if not isinstance(data, dict) or data.get("version") != LEDGER_VERSION:
            raise MirrorError(f"{where}: not a version {LEDGER_VERSION} security ledger")
        try:
            acls = frozenset(_binding_from_json(b) for b in data.get("acls", []))
            users = frozenset((str(u), str(m)) for u, m in data.get("users", []))
        except (TypeError, ValueError, KeyError) as exc:
            raise MirrorError(f"{where}: a malformed entry in the security ledger: {exc}") from None
        return cls(acls, users)


def _binding_json(binding: AclBinding) -> dict[str, str]:
    p, e = binding.pattern, binding.entry
    return {
        "resource_type": p.resource_type.name,
        "name": p.name,
        "pattern_type": p.pattern_type.name,
        "principal": e.principal,
        "host": e.host,
        "operation": e.operation.name,
        "permission": e.permission.name,
    }


def _binding_from_json(data: dict[str, str]) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType[data["resource_type"]], data["name"], PatternType[data["pattern_type"]]),
        AccessControlEntry(
            data["principal"], data["host"], AclOperation[data["operation"]], AclPermissionType[data["permission"]]
        ),
    )


class Ledger(Protocol):
    where: str

    async def load(self) -> Owned: ...

    async def save(self, owned: Owned) -> None: ...


class MemoryLedger:
    """A ledger that ends with the process (tests; a link run without a service)."""

    where = "memory"

    def __init__(self) -> None:
        self.owned = Owned()

    async def load(self) -> Owned:
        return self.owned

    async def save(self, owned: Owned) -> None:
        self.owned = owned


class FileLedger:
    """``<state-dir>/security-<link>.json``, for a link whose target has no ``zookeeper``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    async def load(self) -> Owned:
        def read() -> Owned:
            try:
                text = self.path.read_text()
            except FileNotFoundError:
                return Owned()
            except OSError as exc:
                raise MirrorError(f"{self.path}: cannot read the security ledger: {exc.strerror or exc}") from None
            try:
                return Owned.from_json(json.loads(text), str(self.path))
            except ValueError as exc:
                raise MirrorError(f"{self.path}: not JSON: {exc}") from None

        return await trio.to_thread.run_sync(read)

    async def save(self, owned: Owned) -> None:
        text = json.dumps(owned.to_json(), indent=1) + "\n"
        await trio.to_thread.run_sync(lambda: atomic_write(self.path, text, mode=0o600))


class ZkLedger:
    """``/strait/mirror/<link>/security`` in the target's ZooKeeper, shared by the link's processes."""

    def __init__(self, session: ZkSession, link: str) -> None:
        self._session = session
        self.path = f"/strait/mirror/{link}/security"
        self.where = f"ZooKeeper {session.connect}{self.path}"

    async def load(self) -> Owned:
        def read(client: Any) -> bytes | None:
            try:
                data, _ = client.get(self.path)
            except NoNodeError:
                return None
            return bytes(data)

        data = await self._session.run(f"read {self.path}", read)
        if not data:
            return Owned()
        try:
            return Owned.from_json(json.loads(data), self.where)
        except ValueError as exc:
            raise MirrorError(f"{self.where}: not JSON: {exc}") from None

    async def save(self, owned: Owned) -> None:
        data = json.dumps(owned.to_json(), separators=(",", ":")).encode()

        def write(client: Any) -> None:
            try:
                client.set(self.path, data)
            except NoNodeError:
                ensure_path(client, self.path.rpartition("/")[0])
                try:
                    client.create(self.path, data)
                except NodeExistsError:
                    client.set(self.path, data)

        await self._session.run(f"write {self.path}", write)


# -- what is copied -------------------------------------------------------------------------------


def copied_binding(
    binding: AclBinding, config: LinkConfig, *, mm2: bool, target_topic: Callable[[str], str]
) -> AclBinding | None:
    """The target's binding for source ``binding``, or None when the link does not copy it."""
    pattern, entry = binding.pattern, binding.entry
    literal = pattern.pattern_type is PatternType.LITERAL
    if pattern.resource_type is ResourceType.TOPIC:
        if mm2:
            if not literal or pattern.name == WILDCARD or not config.mirrors_topic(pattern.name):
                return None
            if entry.operation is AclOperation.WRITE:
                return None
            operation = AclOperation.READ if entry.operation is AclOperation.ALL else entry.operation
            return AclBinding(
                ResourcePattern(ResourceType.TOPIC, target_topic(pattern.name), PatternType.LITERAL),
                AccessControlEntry(entry.principal, entry.host, operation, entry.permission),
            )
        if literal and pattern.name != WILDCARD and not config.mirrors_topic(pattern.name):
            return None
        return binding
    if pattern.resource_type is ResourceType.GROUP:
        if literal and pattern.name != WILDCARD and not config.mirrors_group(pattern.name):
            return None
        return binding
    if pattern.resource_type is ResourceType.TRANSACTIONAL_ID and not mm2:
        return binding
    return None


# -- the sync -------------------------------------------------------------------------------------


@dataclass
class _Part:
    """One half's status (ACLs or users)."""

    enabled: bool
    passes: int = 0
    last_error: str | None = None
    note: str | None = None  # why the last pass changed nothing, when it is not an error
    created: int = 0
    deleted: int = 0
    conflicts: list[str] = field(default_factory=list)

    def to_dict(self, owned: int) -> dict[str, Any]:
        out: dict[str, Any] = {"enabled": self.enabled}
        if self.enabled:
            out |= {
                "owned": owned,
                "passes": self.passes,
                "created": self.created,
                "deleted": self.deleted,
                "last_error": self.last_error,
                "note": self.note,
            }
            if self.conflicts:
                out["conflicts"] = list(self.conflicts)
        return out


class SecuritySync:
    """A link's ACL and SCRAM sync; ``run`` holds its ZooKeeper sessions, ``sync`` is one pass.

    ``ledger`` is where the owned set lives when the target has no ``zookeeper`` (a
    :class:`MemoryLedger` without one); with it, the target's ZooKeeper holds the ledger.
    """

    def __init__(
        self,
        config: LinkConfig,
        *,
        mm2: bool,
        target_topic: Callable[[str], str],
        ledger: Ledger | None = None,
    ) -> None:
        self.config = config
        self.mm2 = mm2
        self.target_topic = target_topic
        self._needs_zk = config.target.zookeeper is not None
        self._ledger: Ledger | None = None if self._needs_zk else (ledger or MemoryLedger())
        self._source_store: ZkSecurityStore | None = None
        self._target_store: ZkSecurityStore | None = None
        self._zk_error: str | None = None
        self._owned = Owned()
        self._acls = _Part(config.sync_acls)
        self._users = _Part(config.sync_users)
        self._last_pass_ms: int | None = None

    @property
    def enabled(self) -> bool:
        return self.config.sync_acls or self.config.sync_users

    # -- ZooKeeper sessions ----------------------------------------------------------------------

    async def run(self) -> None:
        """Hold the target's (and, to sync users, the source's) ZooKeeper sessions until cancelled,
        opening them again after a failure."""
        if not self.enabled or not self._needs_zk:
            return
        while True:
            try:
                await self._hold_sessions()
            except (CoordinationError, SecurityStoreError, MirrorError, OSError) as exc:
                self._zk_error = str(exc)
                log.warning("link %s: security sync: %s; again in %g s", self.config.name, exc, ZK_RETRY_S)
            finally:
                self._ledger = None
                self._source_store = self._target_store = None
            await trio.sleep(ZK_RETRY_S)

    async def _hold_sessions(self) -> None:
        cfg = self.config
        assert cfg.target.zookeeper is not None
        target_digest = cfg.target.zookeeper_digest()
        async with _session(cfg.target.zookeeper, target_digest) as target:
            if not cfg.sync_users:
                self._ledger = ZkLedger(target, cfg.name)
                self._zk_error = None
                await trio.sleep_forever()
            assert cfg.source.zookeeper is not None
            async with (
                _session(cfg.source.zookeeper, cfg.source.zookeeper_digest()) as source,
                ZkSecurityStore(source) as source_store,
                ZkSecurityStore(target) as target_store,
            ):
                self._ledger = ZkLedger(target, cfg.name)
                self._source_store, self._target_store = source_store, target_store
                self._zk_error = None
                await trio.sleep_forever()

    # -- one pass --------------------------------------------------------------------------------

    async def sync(self, source: SiteClient, target: SiteClient) -> None:
        """One pass of both halves; failures are recorded in the status, never raised."""
        if not self.enabled:
            return
        ledger = self._ledger
        if ledger is None:
            why = f"waiting for the target's ZooKeeper ({self._zk_error or 'connecting'})"
            for part in (self._acls, self._users):
                part.note = why
            return
        try:
            self._owned = await ledger.load()
        except (CoordinationError, MirrorError) as exc:
            for part in (self._acls, self._users):
                part.last_error = f"cannot read the security ledger: {exc}"
            return
        if self._acls.enabled:
            await self._guard(self._acls, self._sync_acls(ledger, source, target))
        if self._users.enabled:
            await self._guard(self._users, self._sync_users(ledger))
        self._last_pass_ms = int(time.time() * 1000)

    async def _guard(self, part: _Part, work: Any) -> None:
        try:
            part.note = await work
            part.last_error = None
        except (ClientError, CoordinationError, SecurityStoreError, MirrorError, OSError) as exc:
            if part.last_error != str(exc):
                log.warning("link %s: security sync: %s", self.config.name, exc)
            part.last_error = str(exc)
        part.passes += 1

    async def _save(self, ledger: Ledger, owned: Owned) -> None:
        if owned != self._owned:
            await ledger.save(owned)
            self._owned = owned

    async def _sync_acls(self, ledger: Ledger, source: SiteClient, target: SiteClient) -> str | None:
        try:
            found = await AdminClient(source).describe_acls(MATCH_ALL)
        except ClientError as exc:
            if exc.code == ErrorCode.SECURITY_DISABLED:
                return f"site {source.name} has no authorizer: no ACL is copied and none is removed"
            raise
        wanted: set[AclBinding] = set()
        for binding in found:
            copy = copied_binding(binding, self.config, mm2=self.mm2, target_topic=self.target_topic)
            if copy is not None:
                wanted.add(copy)
        try:
            present = set(await AdminClient(target).describe_acls(MATCH_ALL))
        except ClientError as exc:
            if exc.code == ErrorCode.SECURITY_DISABLED:
                return f"site {target.name} has no authorizer: no ACL is copied"
            raise
        owned = self._owned.acls
        creating = wanted - present
        deleting = (owned - wanted) & present
        await self._save(ledger, Owned(owned | creating, self._owned.users))
        if creating:
            await AdminClient(target).create_acls(sorted(creating))
            self._acls.created += len(creating)
            log.info("link %s: %d ACLs copied to site %s", self.config.name, len(creating), target.name)
        if deleting:
            await AdminClient(target).delete_acls(_exactly(b) for b in sorted(deleting))
            self._acls.deleted += len(deleting)
            log.info(
                "link %s: %d ACLs removed from site %s (gone from site %s)",
                self.config.name,
                len(deleting),
                target.name,
                source.name,
            )
        await self._save(ledger, Owned((owned | creating) & wanted, self._owned.users))
        return None

    async def _sync_users(self, ledger: Ledger) -> str | None:
        source, target = self._source_store, self._target_store
        if source is None or target is None:
            return f"waiting for the source's and the target's ZooKeeper ({self._zk_error or 'connecting'})"
        owned = self._owned.users
        wanted: dict[UserMechanism, Any] = {}
        for user, mechanisms in source.scram_users().items():
            for mechanism in mechanisms:
                credential = source.scram_credential(mechanism, user)
                if credential is not None:
                    wanted[(user, mechanism)] = credential
        writing: dict[UserMechanism, Any] = {}
        conflicts: list[str] = []
        for key, credential in sorted(wanted.items()):
            present = target.scram_credential(key[1], key[0])
            if present == credential:
                continue
            if present is None or key in owned:
                writing[key] = credential
            else:
                conflicts.append(f"{key[0]} ({key[1]}): the target has its own credential; left as it is")
        deleting = {key for key in owned - wanted.keys() if target.scram_credential(key[1], key[0]) is not None}
        await self._save(ledger, Owned(self._owned.acls, owned | writing.keys()))
        for (user, mechanism), credential in writing.items():
            await target.set_scram(user, mechanism, credential)
        for user, mechanism in sorted(deleting):
            await target.delete_scram(user, mechanism)
        self._users.created += len(writing)
        self._users.deleted += len(deleting)
        if writing or deleting:
            log.info(
                "link %s: %d SCRAM credentials copied to site %s, %d removed",
                self.config.name,
                len(writing),
                self.config.target.name,
                len(deleting),
            )
        if conflicts != self._users.conflicts and conflicts:
            log.warning("link %s: SCRAM credentials not copied: %s", self.config.name, "; ".join(conflicts))
        self._users.conflicts = conflicts
        await self._save(ledger, Owned(self._owned.acls, (owned | writing.keys()) & wanted.keys()))
        return None

    def status(self) -> dict[str, Any]:
        return {
            "acls": self._acls.to_dict(len(self._owned.acls)),
            "users": self._users.to_dict(len(self._owned.users)),
            "ledger": None if self._ledger is None else self._ledger.where,
            "last_pass_ms": self._last_pass_ms,
        }


def _exactly(binding: AclBinding) -> AclBindingFilter:
    """The filter that selects ``binding`` and nothing else."""
    p, e = binding.pattern, binding.entry
    return AclBindingFilter(
        ResourcePatternFilter(p.resource_type, p.name, p.pattern_type),
        AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission),
    )


def _session(connect: str, digest: ZkDigest | None) -> ZkSession:
    """A session with ``connect`` (``async with`` starts and closes it); the znodes it creates get
    the site's secured ACL when it authenticates."""
    return ZkSession(
        connect,
        session_timeout_ms=ZK_SESSION_TIMEOUT_MS,
        connection_timeout_ms=ZK_SESSION_TIMEOUT_MS,
        digest=digest,
        set_acl=digest is not None,
    )
