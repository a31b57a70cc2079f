"""The broker's ephemeral registration (``/brokers/ids/<id>``), kept across ZooKeeper sessions.

An ephemeral znode dies with the session that created it. kazoo replaces an expired session
by itself; :meth:`BrokerRegistrar.after_connect` then re-creates the registration in the new
session. All methods block (kazoo calls): run them in worker threads or kazoo's own threads.
One lock serialises them, since trio's worker threads and kazoo's threads both get here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from ._errors import BrokerIdInUse, CoordinationError
from ._layout import BrokerRegistration, broker_path, encode_broker

logger = logging.getLogger(__name__)

_ATTEMPTS = 5  # the znode may vanish or change between our create and our read
_CLOSE_LOCK_TIMEOUT = 5.0  # deregister() waits this long for a re-registration in flight


def session_of(client: Any) -> int | None:
    """The id of the client's current ZooKeeper session, None while it has none."""
    client_id = client.client_id
    return int(client_id[0]) if client_id else None


class BrokerRegistrar:
    """Holds this node's registration (at most one broker id) and the session it was made in."""

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._closed = False
        self._registration: BrokerRegistration | None = None
        self._registered_session: int | None = None  # the session that holds our znode
        self._session: int | None = None  # the last session we saw connected

    def register(self, client: Any, reg: BrokerRegistration) -> None:
        """Create (or, in our own session, update) the registration and keep it from now on.

        Raises:
            BrokerIdInUse: another session holds the id.
            ValueError: a different broker id is registered already.
        """
        with self._lock:
            current = self._registration
            if current is not None and current.broker_id != reg.broker_id:
                raise ValueError(
                    f"this ZkState already registered broker {current.broker_id}; cannot also register {reg.broker_id}"
                )
            self._registered_session = self._create(client, reg)
            self._registration = reg

    def after_connect(self, client: Any) -> bool:
        """After any (re)connect: restore the registration if this session lacks it.

        Returns True when the session is a new one (the previous one expired). Never raises for
        ZooKeeper errors: they are logged and the next reconnect tries again.
        """
        session = session_of(client)
        if session is None:
            return False
        with self._lock:
            if self._closed:
                return False
            new_session = self._session is not None and session != self._session
            self._session = session
            reg = self._registration
            if reg is not None and self._registered_session != session:
                try:
                    self._registered_session = self._create(client, reg)
                    logger.info("re-registered broker %d in ZooKeeper session %#x", reg.broker_id, session)
                except BrokerIdInUse as exc:
                    logger.error("lost the broker registration with the expired session: %s", exc)
                except (KazooException, CoordinationError) as exc:
                    logger.warning("re-registering broker %d failed (%r); retrying on reconnect", reg.broker_id, exc)
        return new_session

    def deregister(self, client: Any) -> None:
        """Stop keeping the registration and delete our znode if our session holds it. Never raises."""
        got_lock = self._lock.acquire(timeout=_CLOSE_LOCK_TIMEOUT)
        try:
            self._closed = True
            reg, self._registration = self._registration, None
        finally:
            if got_lock:
                self._lock.release()
        if reg is None or not client.connected:
            return
        path = broker_path(reg.broker_id)
        try:
            _, stat = client.get(path)
            if stat.ephemeralOwner == session_of(client):
                client.delete(path, version=stat.version)
        except KazooException as exc:
            logger.info("leaving %s to expire with the session: %r", path, exc)

    def _create(self, client: Any, reg: BrokerRegistration) -> int | None:
        """Create the ephemeral znode, or update it if our session holds it; returns the session."""
        path = broker_path(reg.broker_id)
        data = encode_broker(reg, self._clock_ms())
        for _ in range(_ATTEMPTS):
            session = session_of(client)
            try:
                client.create(path, data, ephemeral=True)
                return session
            except NodeExistsError:
                pass
            try:
                _, stat = client.get(path)
                if stat.ephemeralOwner != session:
                    raise BrokerIdInUse(reg.broker_id, stat.ephemeralOwner)
                client.set(path, data, version=stat.version)
                return session
            except (NoNodeError, BadVersionError):
                continue
        raise CoordinationError(f"could not register broker {reg.broker_id}: {path} kept changing")
