"""A broker's offline replicas (``/strait/offline_replicas/<id>``), kept across ZooKeeper sessions.

When a log dir fails (JBOD), the broker publishes which of its replicas were on it, so that
leaders drop it from those ISRs and the controller moves leadership away. The znode is
ephemeral: a dead broker's offline replicas do not matter (the broker is gone from
``/brokers/ids`` too). Like the broker registration (:mod:`._registration`), it is re-created
in the new session after a session expiry by :meth:`OfflineReplicas.after_connect`.

All methods block (kazoo calls): run them in worker threads or kazoo's own threads. One lock
serialises them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from ._errors import BrokerIdInUse, CoordinationError
from ._layout import encode_offline_replicas, offline_replicas_path
from ._registration import session_of

logger = logging.getLogger(__name__)

_ATTEMPTS = 5  # the znode may vanish or change between our create and our read
_CLOSE_LOCK_TIMEOUT = 5.0


class OfflineReplicas:
    """The offline replicas this node published, by broker id, and the session holding each znode."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._wanted: dict[int, frozenset[tuple[str, int]]] = {}
        self._held_by: dict[int, int | None] = {}  # broker id -> session that holds its znode

    def publish(self, client: Any, broker_id: int, partitions: frozenset[tuple[str, int]]) -> None:
        """Create or replace the znode; an empty set deletes it. Kept from now on.

        Raises:
            BrokerIdInUse: another session holds the znode of ``broker_id``.
            CoordinationError: after :meth:`close`, or the znode kept changing.
        """
        with self._lock:
            if self._closed:
                raise CoordinationError(f"cannot publish offline replicas of broker {broker_id}: closing")
            if partitions:
                self._held_by[broker_id] = self._write(client, broker_id, partitions)
                self._wanted[broker_id] = partitions
            else:
                self._delete(client, broker_id)
                self._wanted.pop(broker_id, None)
                self._held_by.pop(broker_id, None)

    def after_connect(self, client: Any) -> None:
        """After any (re)connect: re-create the znodes this session lacks. Never raises for
        ZooKeeper errors: they are logged and the next reconnect tries again."""
        session = session_of(client)
        if session is None:
            return
        with self._lock:
            if self._closed:
                return
            for broker_id, partitions in self._wanted.items():
                if self._held_by.get(broker_id) == session:
                    continue
                try:
                    self._held_by[broker_id] = self._write(client, broker_id, partitions)
                    logger.info("re-published %d offline replicas of broker %d", len(partitions), broker_id)
                except BrokerIdInUse as exc:
                    logger.error("lost the offline replicas znode with the expired session: %s", exc)
                except (KazooException, CoordinationError) as exc:
                    logger.warning("re-publishing offline replicas failed (%r); retrying on reconnect", exc)

    def close(self) -> None:
        """Stop keeping the znodes (they end with the session). Never raises."""
        got_lock = self._lock.acquire(timeout=_CLOSE_LOCK_TIMEOUT)
        try:
            self._closed = True
            self._wanted.clear()
        finally:
            if got_lock:
                self._lock.release()

    def _write(self, client: Any, broker_id: int, partitions: frozenset[tuple[str, int]]) -> int | None:
        path = offline_replicas_path(broker_id)
        data = encode_offline_replicas(partitions)
        for _ in range(_ATTEMPTS):
            session = session_of(client)
            try:
                client.create(path, data, ephemeral=True, makepath=True)
                return session
            except NodeExistsError:
                pass
            try:
                _, stat = client.get(path)
                if stat.ephemeralOwner != session:
                    raise BrokerIdInUse(broker_id, stat.ephemeralOwner)
                client.set(path, data, version=stat.version)
                return session
            except (NoNodeError, BadVersionError):
                continue
        raise CoordinationError(f"could not publish offline replicas of broker {broker_id}: {path} kept changing")

    def _delete(self, client: Any, broker_id: int) -> None:
        path = offline_replicas_path(broker_id)
        for _ in range(_ATTEMPTS):
            try:
                _, stat = client.get(path)
            except NoNodeError:
                return
            if stat.ephemeralOwner != session_of(client):
                raise BrokerIdInUse(broker_id, stat.ephemeralOwner)
            try:
                client.delete(path, version=stat.version)
                return
            except (NoNodeError, BadVersionError):
                continue
        raise CoordinationError(f"could not clear offline replicas of broker {broker_id}: {path} kept changing")
