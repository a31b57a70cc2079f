"""The site's SCRAM credentials and ACLs in ZooKeeper, in Kafka's layout: :class:`ZkSecurityStore`.

It implements :class:`node.security.SecurityStore` over a started :class:`._session.ZkSession`
(its kazoo client and its worker threads; it opens no session of its own). Writes go to
ZooKeeper with compare-and-set and change notifications (:mod:`._security`); look-ups answer
from local copies kept current by watches (:mod:`._scram_copy`, :mod:`._acl_copy`), so a SASL
exchange or an authorised request never waits for ZooKeeper. Each node sees a change made on
any node within about a second (a watch round trip), and its own writes at once.

Threads. Credentials are updated on kazoo's threads under a lock and read from any thread.
The :class:`~node.security._acl.Authorizer` lives on the trio thread: ACLs read elsewhere are
handed to it with ``TrioToken.run_sync_soon``. Kazoo's callbacks never block: whatever must
read ZooKeeper runs in a thread kazoo spawns, or in trio's worker threads.

Errors. A ZooKeeper failure raises :class:`~node.security._store.SecurityStoreError` naming
the operation (after which a write may or may not have happened, as with any ZooKeeper
write); invalid arguments raise ``ValueError``. Every method may be cancelled, with the
outcome of a write then unknown (see :mod:`._session`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import trio
from kazoo.protocol.states import KazooState  # type: ignore[import-untyped]

from node.security._acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Authorizer,
    ResourcePattern,
    validate_filter,
)
from node.security._acl_zk import acl_path, encode_acls
from node.security._scram import ScramCredential, ScramMechanism, credential_to_text
from node.security._store import SecurityStoreError
from node.zkkit import session_of

from . import _security
from ._acl_copy import NOTIFICATION_EXPIRY_MS, AclCopy, PatternUpdate
from ._errors import CoordinationError
from ._scram_copy import ScramCopy
from ._session import ZkSession

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ZkSecurityStore:
    """SCRAM credentials and ACLs of the site whose ZooKeeper ``session`` is connected to.

    ``session`` must be started before :meth:`start` and closed after :meth:`close`. The
    authorizer is made with ``super_users`` (principals, ``super.users`` split at ``;``) and
    ``allow_everyone_if_no_acl_found``. ACL change notifications older than
    ``notification_expiry_ms`` (judged by the session's ``clock_ms``) are deleted when seen.
    Use ``async with`` or :meth:`start` / :meth:`close`; one trio run per instance.
    """

    def __init__(
        self,
        session: ZkSession,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        notification_expiry_ms: int = NOTIFICATION_EXPIRY_MS,
    ) -> None:
        """Nothing is read until :meth:`start`. ValueError for a malformed super user."""
        self._session = session
        self._authorizer = Authorizer(super_users, allow_everyone_if_no_acl_found)
        self._closed = False
        self._started = False
        self._token: trio.lowlevel.TrioToken | None = None
        self._client: Any = None
        self._scram = ScramCopy(self._is_closed)
        self._acls = AclCopy(self._post, self._is_closed, session.clock_ms, notification_expiry_ms)
        self._session_lock = threading.Lock()  # _zk_session is noted from trio's and kazoo's threads
        self._zk_session: int | None = None

    # -- life -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Create Kafka's paths where missing, read every credential and ACL, and set the watches.

        Raises:
            SecurityStoreError: started before or closed; the session is not started; ZooKeeper failed.
        """
        if self._started or self._closed:
            raise SecurityStoreError(f"{type(self).__name__} was started before; use a new one")
        self._started = True
        self._token = trio.lowlevel.current_trio_token()
        try:
            await self._run("load SCRAM credentials and ACLs", self._start)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop following changes (the watches end at their next event). Idempotent, never blocks;
        the session stays open."""
        self._closed = True
        client = self._client
        if client is not None:
            client.remove_listener(self._on_state)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _start(self, client: Any) -> None:
        self._client = client
        _security.ensure_paths(client)
        self._note_session(client)
        client.add_listener(self._on_state)
        self._scram.watch(client)
        self._acls.watch(client)  # before loading: a change made meanwhile is read again, never missed
        self._acls.load(client)

    # -- SecurityStore: look-ups ----------------------------------------------------------------

    @property
    def authorizer(self) -> Authorizer:
        """Every ACL of the site (trio thread only: the authorizer is not thread-safe)."""
        return self._authorizer

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """A dict look-up, safe from any thread."""
        return self._scram.credential(mechanism, user)

    def scram_users(self) -> Mapping[str, Mapping[str, int]]:
        return self._scram.users()

    # -- SecurityStore: SCRAM writes ------------------------------------------------------------

    async def set_scram(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Store (or replace) ``user``'s credential for ``mechanism`` in ``/config/users/<user>``,
        keeping the znode's other keys. ValueError for an empty user or an unknown mechanism."""
        ScramMechanism.from_name(mechanism)
        _security.user_path(user)
        text = credential_to_text(credential)
        what = f"set the {mechanism} credential of user {user!r}"

        def edit(config: dict[str, str]) -> dict[str, str]:
            return {**config, mechanism: text}

        await self._run(what, self._write_user, user, edit, what)

    async def delete_scram(self, user: str, mechanism: str) -> bool:
        """Remove ``user``'s credential for ``mechanism`` (the znode goes when nothing is left in it);
        False when there was none. ValueError for an empty user or an unknown mechanism."""
        ScramMechanism.from_name(mechanism)
        _security.user_path(user)
        what = f"delete the {mechanism} credential of user {user!r}"

        def edit(config: dict[str, str]) -> dict[str, str]:
            return {key: value for key, value in config.items() if key != mechanism}

        return await self._run(what, self._write_user, user, edit, what)

    def _write_user(self, client: Any, user: str, edit: Callable[[dict[str, str]], dict[str, str]], what: str) -> bool:
        written = _security.update_user_config(client, user, edit, what)
        if written is None:
            return False
        self._scram.wrote(written)
        return True

    # -- SecurityStore: ACL writes --------------------------------------------------------------

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Merge ``bindings`` into their patterns' znodes (one compare-and-set per pattern) and notify.

        Raises ValueError, before writing anything, for a binding that cannot be stored.
        """
        grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            grouped.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in grouped.items():
            acl_path(pattern)
            encode_acls(entries)
        adding = {pattern: frozenset(entries) for pattern, entries in grouped.items()}
        if adding:
            await self._run(f"add {len(bindings)} ACLs", self._add, adding)

    def _add(self, client: Any, adding: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        try:
            _security.add_entries(client, adding)
        finally:
            self._refresh_quietly(client, adding)  # what was written, even if a later pattern failed

    async def remove_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove every stored binding ``acl_filter`` matches, pattern by pattern with compare-and-set,
        and notify; returns the removed bindings, sorted. ValueError (``AclError``) for a filter
        holding UNKNOWN values."""
        validate_filter(acl_filter)
        return await self._run(f"remove the ACLs matching {acl_filter}", self._remove, acl_filter)

    def _remove(self, client: Any, acl_filter: AclBindingFilter) -> list[AclBinding]:
        removed: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        try:
            removed = _security.remove_entries(client, acl_filter.pattern.matches, acl_filter.entry.matches)
        finally:
            self._refresh_quietly(client, removed)
        return sorted(AclBinding(pattern, entry) for pattern, entries in removed.items() for entry in entries)

    def _refresh_quietly(self, client: Any, patterns: Iterable[ResourcePattern]) -> None:
        """Read our own writes back into the authorizer; on failure the notifications bring them."""
        try:
            self._acls.refresh(client, patterns)
        except Exception as exc:
            logger.warning("reading back the ACLs just written failed: %r", exc)

    # -- the way to ZooKeeper -------------------------------------------------------------------

    async def _run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise SecurityStoreError(f"the security store is closed; cannot {what}")
        try:
            return await self._session.run(what, fn, *args)
        except CoordinationError as exc:
            raise SecurityStoreError(str(exc)) from exc

    # -- kazoo's threads and the hand-over to trio ----------------------------------------------

    def _is_closed(self) -> bool:
        return self._closed

    def _on_state(self, state: str) -> None:
        """Connection listener (kazoo's connection thread): never blocks."""
        if state == KazooState.CONNECTED and not self._closed:
            self._client.handler.spawn(self._after_connect, self._client)

    def _after_connect(self, client: Any) -> None:
        """A kazoo-spawned thread: after a session expiry (or a failed refresh), read every ACL again."""
        expired = self._note_session(client)
        if self._closed or not (expired or self._acls.stale):
            return
        try:
            self._acls.load(client)
        except Exception as exc:
            logger.warning("reading every ACL again after reconnecting failed (%r); retrying on the next", exc)

    def _note_session(self, client: Any) -> bool:
        """Note the client's session; True when it replaced one seen before (that one expired)."""
        session = session_of(client)
        if session is None:
            return False
        with self._session_lock:
            expired = self._zk_session is not None and session != self._zk_session
            self._zk_session = session
        return expired

    def _post(self, update: PatternUpdate, complete: bool) -> None:
        """Any thread: have the trio thread apply ``update`` to the authorizer (never blocks)."""
        token = self._token
        if token is None or self._closed:
            return
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(self._apply, update, complete)

    def _apply(self, update: PatternUpdate, complete: bool) -> None:
        """Trio thread. ``complete``: ``update`` is every stored pattern; a None keeps what is held."""
        try:
            if complete:
                bindings: list[AclBinding] = []
                for pattern, read in update.items():
                    entries = self._authorizer.entries(pattern) if read is None else read
                    bindings.extend(AclBinding(pattern, entry) for entry in entries)
                self._authorizer.set_all(bindings)
            else:
                for pattern, read in update.items():
                    if read is not None:
                        self._authorizer.replace(pattern, read)
        except Exception:  # a run_sync_soon callback must not raise into trio's run loop
            logger.exception("applying ACLs read from ZooKeeper failed")
