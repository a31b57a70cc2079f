"""This node's copy of the site's SCRAM credentials, kept current by kazoo watches.

A ``ChildrenWatch`` on ``/config/users`` and a ``DataWatch`` on each user's znode (see
:mod:`._security` for the format) report every change; kazoo re-arms both after reconnects and
session expiry, and a ``DataWatch`` reads its znode again then, so the copy catches up with
anything missed. The node's own writes are applied as soon as they are made
(:meth:`ScramCopy.wrote`), so a caller reads its own writes.

Ordering. Reports from the watches and from our own writes arrive on different threads, so
each user's state carries the zxid it reflects (:class:`._security.UserWrite`): a report older
than what is applied is dropped. A watch reporting a deletion carries no zxid; it marks the user
absent without moving the zxid, so the next report of the znode (which kazoo delivers when it
is re-created) is applied even when our own write of it was applied first.

Threads. The watch callbacks run on kazoo's threads and never wait for trio; the one lock
guards every update and is never held across a ZooKeeper call. Look-ups are plain dict reads
(the per-user mappings are replaced, never changed in place), safe from the trio thread.

A malformed user znode (not JSON, a credential that does not parse) is logged and leaves that
user with no credentials at all (never some of them): refusing to authenticate is the safe
reading of a znode nobody can vouch for. So are znode names that are not Kafka's sanitized form
of a user name (they are skipped: Kafka would read and write such a user elsewhere).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.recipe.watchers import ChildrenWatch, DataWatch  # type: ignore[import-untyped]

from node.security._scram import ScramCredential, user_from_znode_name, user_znode_name

from ._security import CONFIG_USERS, UserWrite, decode_credentials

logger = logging.getLogger(__name__)


@dataclass
class _Seen:
    """What is applied for one user znode: the zxid it reflects, and whether the znode was there."""

    zxid: int
    present: bool


class ScramCopy:
    """The credentials of every user, by user name and mechanism; :meth:`watch` keeps them current."""

    def __init__(self, closed: Callable[[], bool]) -> None:
        """The watches end once ``closed()`` turns true."""
        self._closed = closed
        self._lock = threading.Lock()
        # user -> mechanism -> credential; each inner mapping is replaced whole, never changed.
        self._credentials: dict[str, Mapping[str, ScramCredential]] = {}
        self._seen: dict[str, _Seen] = {}  # by znode name; kept after a deletion, to order late reports
        self._watches: dict[str, threading.Event] = {}  # znode name -> the event that stops its DataWatch
        self._skipped: set[str] = set()  # znode names that are not a sanitized user name (warned once)

    # -- look-ups (any thread) --------------------------------------------------------------------

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, int]]:
        with self._lock:
            credentials = list(self._credentials.items())
        return {user: {m: c.iterations for m, c in sorted(by.items())} for user, by in sorted(credentials)}

    # -- watching -------------------------------------------------------------------------------

    def watch(self, client: Any) -> None:
        """Set the watches and read every user (blocking: one read per user; run it in a worker thread).
        ``/config/users`` must exist."""
        calls = 0

        def on_children(children: list[str]) -> bool | None:
            nonlocal calls
            initial, calls = calls == 0, calls + 1
            if self._closed():
                return False
            added = self._sync(children)
            if initial:
                self._watch_users(client, added)  # this worker thread, so watch() returns with everything read
            elif added:
                client.handler.spawn(self._watch_users, client, added)  # off kazoo's callback thread
            return None

        ChildrenWatch(client, CONFIG_USERS, on_children)

    def _sync(self, children: list[str]) -> list[tuple[str, str, threading.Event]]:
        """Stop watching (and forget the credentials of) the znodes gone; returns the new ones to watch."""
        current = set(children)
        added = []
        with self._lock:
            for name in [name for name in self._watches if name not in current]:
                self._watches.pop(name).set()
                self._forget(name)
            for name in sorted(current - self._watches.keys() - self._skipped):
                user = _user_of(name)
                if user is None:
                    self._skipped.add(name)
                    continue
                stop = self._watches[name] = threading.Event()
                added.append((name, user, stop))
        return added

    def _watch_users(self, client: Any, added: list[tuple[str, str, threading.Event]]) -> None:
        for name, user, stop in added:
            if self._closed():
                return
            DataWatch(client, f"{CONFIG_USERS}/{name}", self._watcher(name, user, stop))

    def _watcher(self, name: str, user: str, stop: threading.Event) -> Callable[[bytes | None, Any], bool]:
        def on_data(data: bytes | None, stat: Any) -> bool:  # two parameters: kazoo passes no event then
            return self._observe(name, user, stop, data, stat)

        return on_data

    def _observe(self, name: str, user: str, stop: threading.Event, data: bytes | None, stat: Any) -> bool:
        """A DataWatch report (kazoo's thread); False ends the watch."""
        with self._lock:
            if self._closed() or stop.is_set():
                return False
            if stat is None:
                self._forget(name)
            else:
                self._apply(name, user, data or b"", stat.mzxid)
        return True

    # -- our own writes -------------------------------------------------------------------------

    def wrote(self, write: UserWrite) -> None:
        """Apply what this node just wrote (any thread), unless a later state is applied already."""
        user = _user_of(write.name)
        if user is None:
            return
        with self._lock:
            if write.data is not None:
                self._apply(write.name, user, write.data, write.zxid)
                return
            seen = self._seen.get(write.name)
            if seen is None or seen.zxid < write.zxid:
                self._seen[write.name] = _Seen(write.zxid, present=False)
                self._credentials.pop(user, None)

    # -- under the lock -------------------------------------------------------------------------

    def _apply(self, name: str, user: str, data: bytes, zxid: int) -> None:
        seen = self._seen.get(name)
        if seen is not None and (zxid < seen.zxid or (zxid == seen.zxid and seen.present)):
            return  # older than (or the same as) what is applied
        self._seen[name] = _Seen(zxid, present=True)
        try:
            credentials = decode_credentials(data)
        except ValueError as exc:
            logger.error(
                "the user znode %s/%s is malformed, user %r gets no credentials: %s", CONFIG_USERS, name, user, exc
            )
            credentials = {}
        if credentials:
            self._credentials[user] = credentials
        else:
            self._credentials.pop(user, None)

    def _forget(self, name: str) -> None:
        seen = self._seen.get(name)
        if seen is not None:
            seen.present = False
        user = _user_of(name)
        if user is not None:
            self._credentials.pop(user, None)


def _user_of(name: str) -> str | None:
    """The user a ``/config/users`` znode name stands for; None (logged) unless it is Kafka's sanitized form."""
    try:
        user = user_from_znode_name(name)
    except ValueError as exc:
        logger.warning("ignoring the user znode %s/%s: %s", CONFIG_USERS, name, exc)
        return None
    if user_znode_name(user) != name:
        logger.warning(
            "ignoring the user znode %s/%s: Kafka names user %r's znode %r",
            CONFIG_USERS,
            name,
            user,
            user_znode_name(user),
        )
        return None
    return user
