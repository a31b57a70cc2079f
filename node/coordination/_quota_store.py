"""The site's client quotas in Kafka's znodes, and this node's live copy: :class:`ZkQuotaStore`.

==============================================================  ==  =============================================
znode                                                               data
==============================================================  ==  =============================================
``/config/users/<user>``                                        P   ``{"version":1,"config":{"producer_byte_rate":
                                                                    "1024","request_percentage":"50.0"}}``; shared
                                                                    with the user's SCRAM credentials
``/config/users/<user>/clients/<client id>``                    P   the same, for a user with a client id
``/config/clients/<client id>``                                 P   the same, for a client id
``/config/changes/config_change_<seq>``                         PS  ``{"version":2,"entity_path":"users/<user>/
                                                                    clients/<client id>"}`` (or ``users/<user>``,
                                                                    ``clients/<client id>``)
==============================================================  ==  =============================================

Names are Kafka's ``Sanitizer.sanitize`` of the user or client id; a default entity is the
literal ``<default>``. Long keys are stored as whole numbers (``"1024"``), double keys as
doubles (``"50.0"``), as Kafka's ``AdminZkClient`` writes them. A write changes only the keys it
names (SCRAM credentials in a user znode stay) and never deletes a znode, as Kafka's.

The copy. Every node holds all quotas in memory and hands each new set to ``on_change`` (the
node's :class:`node.quotas.QuotaManager`). It reads them all at start, again whenever a change
notification appears under ``/config/changes`` (every writer posts one: this node, the others,
Kafka's tools), and after every reconnection (a session may have expired meanwhile). Reading
everything is a few pipelined round trips: quota entities are few. Reads are serialised and
coalesced, so the newest read is applied last. A write is read back before it returns, so a
caller reads its own writes.

Threads: reads run in threads kazoo spawns (never on its callback thread) or in trio's worker
threads (:meth:`ZkQuotaStore.start`, writes); ``on_change`` is called on them.

A malformed znode or value is logged and skipped (its entity keeps no quota from it): refusing to
start over a quota nobody can vouch for would cost more than not enforcing it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]
from kazoo.protocol.states import KazooState  # type: ignore[import-untyped]
from kazoo.recipe.watchers import ChildrenWatch  # type: ignore[import-untyped]

from node.quotas import CLIENT_ID, DEFAULT_NAME, QUOTA_KEYS, USER, QuotaEntity, Quotas, value_of, value_text
from node.security._scram import decode_user_config, encode_user_config, user_from_znode_name, user_znode_name
from node.zkkit import ensure_path, znode_acl

from ._errors import CoordinationError
from ._layout import CONFIG_CHANGE_PREFIX, CONFIG_CHANGE_VERSION, CONFIG_CHANGES
from ._reads import read_many, retried
from ._session import ZkSession

logger = logging.getLogger(__name__)

CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
QUOTA_PATHS = (CONFIG_USERS, CONFIG_CLIENTS, CONFIG_CHANGES)
WRITE_ATTEMPTS = 50  # lost compare-and-set races before a write gives up


class QuotaStoreError(CoordinationError):
    """A quota could not be read or written; the message names the entity and the cause."""


# -- paths ----------------------------------------------------------------------------------------


def _znode_name(name: str | None) -> str:
    return DEFAULT_NAME if name is None else user_znode_name(name)


def _name_of(znode: str) -> str | None:
    """The entity name a znode name stands for (None: the default); ValueError when it is not Kafka's."""
    if znode == DEFAULT_NAME:
        return None
    name = user_from_znode_name(znode)
    if user_znode_name(name) != znode:
        raise ValueError(f"Kafka names {name!r} {user_znode_name(name)!r}, not {znode!r}")
    return name


def entity_path(entity: QuotaEntity) -> str:
    """The entity's znode path below ``/config`` (``users/alice/clients/<default>``), as a notification names it."""
    names = dict(entity)
    if USER in names and CLIENT_ID in names:
        return f"users/{_znode_name(names[USER])}/clients/{_znode_name(names[CLIENT_ID])}"
    if USER in names:
        return f"users/{_znode_name(names[USER])}"
    return f"clients/{_znode_name(names[CLIENT_ID])}"


# -- reading --------------------------------------------------------------------------------------


def read_quotas(client: Any) -> dict[QuotaEntity, dict[str, float]]:
    """Every entity with at least one quota, read pipelined (blocking)."""

    def children(path: str) -> list[str]:
        try:
            return sorted(retried(client.get_children, path))
        except NoNodeError:
            return []

    users = children(CONFIG_USERS)
    pending = [(user, client.get_children_async(f"{CONFIG_USERS}/{user}/clients")) for user in users]
    user_clients: list[tuple[str, str]] = []
    for user, result in pending:
        try:
            user_clients.extend((user, name) for name in sorted(result.get()))
        except NoNodeError:
            continue
    wanted: list[tuple[tuple[tuple[str, str], ...], str]] = [((("user", u),), f"{CONFIG_USERS}/{u}") for u in users]
    wanted += [((("user", u), ("client-id", c)), f"{CONFIG_USERS}/{u}/clients/{c}") for u, c in user_clients]
    wanted += [((("client-id", c),), f"{CONFIG_CLIENTS}/{c}") for c in children(CONFIG_CLIENTS)]
    found: dict[QuotaEntity, dict[str, float]] = {}
    for znodes, data, _stat in retried(read_many, client, wanted):
        where = "/config/" + "/".join(f"{'users' if t == USER else 'clients'}/{n}" for t, n in znodes)
        try:
            entity = tuple((t, _name_of(n)) for t, n in znodes)
            config = decode_user_config(data)
        except ValueError as exc:
            logger.warning("ignoring the quota znode %s: %s", where, exc)
            continue
        values = {}
        for key, text in config.items():
            if key not in QUOTA_KEYS:
                continue  # SCRAM credentials, or keys of a newer Kafka
            try:
                values[key] = value_of(key, text)
            except ValueError as exc:
                logger.warning("ignoring the quota %s of %s: %s", key, where, exc)
        if values:
            found[entity] = values
    return found


# -- writing --------------------------------------------------------------------------------------


def write_entity(client: Any, entity: QuotaEntity, changes: Mapping[str, float | None]) -> bool:
    """Set (a value) or remove (None) the named keys of ``entity``'s znode with compare-and-set, then
    post the change notification; False when nothing changed (nothing written). Blocking.

    Raises QuotaStoreError for a malformed znode (left as it is) or too many lost races.
    """
    below = entity_path(entity)
    path = f"/config/{below}"
    for _ in range(WRITE_ATTEMPTS):
        try:
            data, stat = retried(client.get, path)
        except NoNodeError:
            data, stat = b"", None
        try:
            config = decode_user_config(data)
        except ValueError as exc:
            raise QuotaStoreError(f"cannot change the quotas of {path}: it is malformed ({exc}); fix it") from None
        new = dict(config)
        for key, value in changes.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value_text(key, value)
        if new == config:
            return False
        try:
            if stat is None:
                ensure_path(client, path.rsplit("/", 1)[0])
                client.create(path, encode_user_config(new), acl=znode_acl(client, path))
            else:
                client.set(path, encode_user_config(new), version=stat.version)
        except (BadVersionError, NoNodeError, NodeExistsError):
            continue  # another writer got there first: read again
        notice = {"version": CONFIG_CHANGE_VERSION, "entity_path": below}
        client.create(CONFIG_CHANGE_PREFIX, json.dumps(notice, separators=(",", ":")).encode(), sequence=True)
        return True
    raise QuotaStoreError(
        f"cannot change the quotas of {path}: it changed concurrently {WRITE_ATTEMPTS} times in a row"
    )


# -- the store --------------------------------------------------------------------------------------


class ZkQuotaStore:
    """The quotas of the site whose ZooKeeper ``session`` is connected to (started before
    :meth:`start`, closed after :meth:`close`); ``on_change`` gets every new set."""

    def __init__(self, session: ZkSession, on_change: Callable[[Quotas], None] = lambda quotas: None) -> None:
        self._session = session
        self._on_change = on_change
        self._quotas: Quotas = {}
        self._closed = False
        self._client: Any = None
        self._read_lock = threading.Lock()  # one read at a time: the newest read is applied last
        self._count_lock = threading.Lock()
        self._wanted = 0  # reads asked for
        self._done = 0  # reads asked for that a completed read covers

    def quotas(self) -> Quotas:
        """Every entity's quotas, as last read (any thread)."""
        return self._quotas

    async def start(self) -> None:
        """Create the paths where missing, read every quota and follow changes.

        Raises QuotaStoreError (started after close, or ZooKeeper failed)."""
        if self._closed:
            raise QuotaStoreError("the quota store is closed")
        await self._run("load the client quotas", self._start)

    def close(self) -> None:
        """Stop following changes (the watch ends at its next event). Idempotent, never blocks."""
        self._closed = True
        if self._client is not None:
            self._client.remove_listener(self._on_state)

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        """Set (a value) or remove (None) keys of ``entity``, read back before returning.

        Raises QuotaStoreError naming the entity; a cancelled or failed call may have written."""
        await self._run(f"change the quotas of {entity_path(entity)}", self._alter, entity, dict(changes))

    # -- worker threads -----------------------------------------------------------------------------

    def _start(self, client: Any) -> None:
        self._client = client
        for path in QUOTA_PATHS:
            ensure_path(client, path)
        self._reload(client)
        client.add_listener(self._on_state)
        ChildrenWatch(client, CONFIG_CHANGES, self._on_changes)

    def _alter(self, client: Any, entity: QuotaEntity, changes: dict[str, float | None]) -> None:
        if write_entity(client, entity, changes):
            self._reload(client)

    def _reload(self, client: Any) -> None:
        """Read every quota and apply it, unless a read that began after this was asked has done so."""
        with self._count_lock:
            self._wanted += 1
            asked = self._wanted
        with self._read_lock:
            if self._closed or self._done >= asked:
                return
            with self._count_lock:
                covers = self._wanted
            quotas = read_quotas(client)
            self._done = covers
            self._quotas = quotas
            self._on_change(quotas)

    def _reload_quietly(self, client: Any) -> None:
        try:
            self._reload(client)
        except Exception as exc:  # the next notification or reconnection reads again
            logger.warning("reading the client quotas failed (%r); the node keeps the ones it has", exc)

    # -- kazoo's threads ----------------------------------------------------------------------------

    def _on_changes(self, children: list[str]) -> bool | None:
        if self._closed:
            return False
        self._client.handler.spawn(self._reload_quietly, self._client)
        return None

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED and not self._closed:
            self._client.handler.spawn(self._reload_quietly, self._client)

    async def _run(self, what: str, fn: Callable[..., None], *args: Any) -> None:
        if self._closed:
            raise QuotaStoreError(f"the quota store is closed; cannot {what}")
        try:
            await self._session.run(what, fn, *args)
        except QuotaStoreError:
            raise
        except CoordinationError as exc:
            raise QuotaStoreError(str(exc)) from exc
