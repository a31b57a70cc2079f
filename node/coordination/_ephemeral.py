"""Ephemeral znodes: who holds one, writing and deleting one, and keeping some across sessions.

An ephemeral znode belongs to the ZooKeeper session that created it (``stat.ephemeralOwner``)
and vanishes when that session ends. Every ephemeral of a broker goes through this module:

- :func:`put` creates one (:func:`node.zkkit.create_or_find`), or rewrites it when this
  session already holds it; another session's znode is never touched (the caller's ``in_use``
  error names its owner);
- :func:`remove` deletes one only if this session holds it;
- :func:`held_here` (and :func:`node.zkkit.session_of`) say whose it is (``/controller``,
  created inside the election's transaction, checks its ownership with them);
- :class:`KeptEphemerals` remembers the znodes that must outlive a session expiry (the broker
  registration ``/brokers/ids/<id>`` and ``/strait/offline_replicas/<id>``) and re-creates
  them in the new session (:meth:`KeptEphemerals.restore`). ``/controller`` is not kept: a new
  election decides who holds it after an expiry.

Every function blocks (kazoo calls): run it in a worker thread or on kazoo's own threads.
:class:`KeptEphemerals` serialises its methods with one lock, since trio's worker threads and
kazoo's threads both call it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, KazooException, NoNodeError  # type: ignore[import-untyped]

from node.zkkit import create_or_find, session_of

from ._errors import BrokerIdInUse, CoordinationError

logger = logging.getLogger(__name__)

InUse = Callable[[int], CoordinationError]  # owner session -> the error naming who holds the znode

_ATTEMPTS = 5  # the znode may vanish or change between our create and our read
_CLOSE_LOCK_TIMEOUT = 5.0  # close() waits this long for a re-creation in flight


def held_here(client: Any, stat: Any) -> bool:
    """True when the znode whose ``stat`` this is belongs to the client's current session."""
    return bool(stat.ephemeralOwner == session_of(client))


def put(client: Any, path: str, data: bytes, in_use: InUse, what: str, *, makepath: bool = False) -> int | None:
    """Create ephemeral ``path`` with ``data``, or replace its data if this session holds it.

    Returns the session that holds it now (None if the client has no session). ``what`` names
    the operation in errors (``"register broker 1"``).

    Raises:
        CoordinationError: ``in_use(owner)`` when another session holds ``path``; a plain one
            when the znode kept vanishing or changing.
    """
    for _ in range(_ATTEMPTS):
        session = session_of(client)
        found = create_or_find(client, path, data, makepath=makepath)
        if found is True:
            return session
        if found is False:
            continue  # vanished between our create and our read
        if found.owner != session:
            raise in_use(found.owner)
        try:
            client.set(path, data, version=found.version)
            return session
        except (NoNodeError, BadVersionError):
            continue
    raise CoordinationError(f"could not {what}: {path} kept changing")


def remove(
    client: Any,
    path: str,
    in_use: InUse | None,
    what: str,
    *,
    only_if: Callable[[bytes], bool] = lambda data: True,
) -> bool:
    """Delete ephemeral ``path`` if this session holds it and ``only_if(data)``; True if this call
    deleted it, False if it is absent.

    Without ``in_use``, a znode of another session (or failing ``only_if``) is left alone and
    False returned.

    Raises:
        CoordinationError: ``in_use(owner)`` when it is given and another session holds
            ``path``; a plain one when the znode kept changing.
    """
    for _ in range(_ATTEMPTS):
        try:
            data, stat = client.get(path)
        except NoNodeError:
            return False
        if not held_here(client, stat) or not only_if(data):
            if in_use is None:
                return False
            raise in_use(stat.ephemeralOwner)
        try:
            client.delete(path, version=stat.version)
            return True
        except (NoNodeError, BadVersionError):
            continue
    raise CoordinationError(f"could not {what}: {path} kept changing")


@dataclass(frozen=True)
class Ephemeral:
    """An ephemeral znode to keep in every session.

    ``data`` is called at each creation (a registration carries the time it was made);
    ``in_use`` makes the error for a znode held by another session; ``what`` names the write in
    errors; ``makepath`` creates missing parents.
    """

    path: str
    data: Callable[[], bytes]
    in_use: InUse
    what: str
    makepath: bool = False


class KeptEphemerals:
    """The ephemerals this process keeps, each with the session that holds it now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._kept: dict[str, tuple[Ephemeral, int | None]] = {}  # path -> (what, holding session)

    def keep(self, client: Any, ephemeral: Ephemeral, check: Callable[[Collection[str]], None] | None = None) -> None:
        """Write the znode now (:func:`put`) and keep it from now on, replacing what was kept at
        its path. ``check`` sees the paths kept already, under the lock, and may refuse by raising.

        Raises:
            CoordinationError: after :meth:`close`; or as :func:`put`.
            Whatever ``check`` raises; nothing is written then.
        """
        with self._lock:
            if self._closed:
                raise CoordinationError(f"cannot {ephemeral.what}: closing")
            if check is not None:
                check(self._kept.keys())
            self._kept[ephemeral.path] = (ephemeral, _put(client, ephemeral))

    def drop(self, client: Any, path: str, in_use: InUse, what: str) -> None:
        """Delete the znode if this session holds it (:func:`remove`) and stop keeping it.

        Raises:
            CoordinationError: after :meth:`close`; or as :func:`remove` (then it stays kept).
        """
        with self._lock:
            if self._closed:
                raise CoordinationError(f"cannot {what}: closing")
            remove(client, path, in_use, what)
            self._kept.pop(path, None)

    def restore(self, client: Any) -> None:
        """After any (re)connect: re-create the kept znodes this session lacks. Never raises for
        ZooKeeper errors: they are logged and the next reconnect tries again."""
        session = session_of(client)
        if session is None:
            return
        with self._lock:
            if self._closed:
                return
            for path, (ephemeral, held_by) in list(self._kept.items()):
                if held_by == session:
                    continue
                try:
                    self._kept[path] = (ephemeral, _put(client, ephemeral))
                    logger.info("re-created %s in ZooKeeper session %#x", path, session)
                except BrokerIdInUse as exc:
                    logger.error("lost %s with the expired session: %s", path, exc)
                except (KazooException, CoordinationError) as exc:
                    logger.warning("re-creating %s failed (%r); retrying on reconnect", path, exc)

    def close(self, client: Any) -> None:
        """Stop keeping every znode and delete those this session holds. Never raises."""
        got_lock = self._lock.acquire(timeout=_CLOSE_LOCK_TIMEOUT)
        try:
            self._closed = True
            paths = list(self._kept)
            self._kept.clear()
        finally:
            if got_lock:
                self._lock.release()
        if not client.connected:
            return
        for path in paths:
            try:
                remove(client, path, None, f"delete {path}")
            except (KazooException, CoordinationError) as exc:
                logger.info("leaving %s to expire with the session: %r", path, exc)


def _put(client: Any, ephemeral: Ephemeral) -> int | None:
    return put(client, ephemeral.path, ephemeral.data(), ephemeral.in_use, ephemeral.what, makepath=ephemeral.makepath)
