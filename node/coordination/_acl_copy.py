"""This node's copy of the site's ACLs, kept current from Kafka's ACL change notifications.

Every writer of an ACL znode (this node, another node, Kafka's tools) then creates a change
notification naming the pattern it changed (see :mod:`._security`). A ``ChildrenWatch`` on each
of the two notification parents sees the new ones; they are read, and only the patterns they
name are read again. Everything is read again at start and after a session expiry (whatever
happened meanwhile), and after a failed refresh once the connection is back.

Notifications older than :data:`NOTIFICATION_EXPIRY_MS` (Kafka's 15 minutes) are deleted when
they are seen, as Kafka's brokers do; any node may delete them (a lost race is harmless).

Threads. The ``Authorizer`` is not thread-safe and belongs to the trio thread: this module
only reads ZooKeeper (in worker threads: trio's for the start and our own writes, threads
spawned by kazoo for the watches, which never block kazoo's callback thread) and hands what it
read to the trio thread through ``post`` (``TrioToken.run_sync_soon``, which never blocks).
Reads and hand-overs happen under one lock, and ``run_sync_soon`` runs callbacks in order, so
the trio thread applies the states in the order they were read: a later read (which sees every
earlier write) is never overtaken by an older one. And since ``trio.to_thread.run_sync`` hands
its result back the same way, a trio caller whose worker thread refreshed some patterns finds
them applied when it resumes.

A malformed pattern znode is logged and the node keeps the entries it had for that pattern
(none at start); a malformed notification is logged and skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError  # type: ignore[import-untyped]
from kazoo.recipe.watchers import ChildrenWatch  # type: ignore[import-untyped]

from node.security._acl import AccessControlEntry, ResourcePattern
from node.security._acl_zk import CHANGE_PREFIX, EXTENDED_CHANGES, LITERAL_CHANGES, parse_change_notification

from ._reads import read_many, retried
from ._security import list_patterns, read_patterns

logger = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener.changeExpirationMs

Entries = frozenset[AccessControlEntry]
# What the trio thread is handed: each pattern's entries as read, or None to keep what it has (malformed).
PatternUpdate = dict[ResourcePattern, Entries | None]
# post(apply, update, complete): call apply(update, complete) on the trio thread; complete means
# that ``update`` holds every stored pattern (the others have none).
Post = Callable[[PatternUpdate, bool], None]


class AclCopy:
    """Reads ACLs and hands them to the trio thread through ``post``; :meth:`watch` keeps them coming."""

    def __init__(
        self,
        post: Post,
        closed: Callable[[], bool],
        clock_ms: Callable[[], int],
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
    ) -> None:
        self._post = post
        self._closed = closed
        self._clock_ms = clock_ms
        self._expiry_ms = expiry_ms
        self._lock = threading.Lock()  # held over each read-and-post, so posts keep the order of reads
        self._last_seq = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}  # the newest notification seen, per parent
        self._ctimes: dict[str, int] = {}  # path -> ctime (ms) of each notification seen and not deleted
        self.stale = False  # a refresh failed: load everything again once connected

    # -- reading (blocking: worker threads only) ----------------------------------------------

    def load(self, client: Any) -> None:
        """Read every pattern and hand the whole set over."""
        with self._lock:
            if self._closed():
                return
            self.stale = False
            try:
                self._post(read_patterns(client, list_patterns(client)), True)
            except BaseException:
                self.stale = True
                raise

    def refresh(self, client: Any, patterns: Iterable[ResourcePattern]) -> None:
        """Read ``patterns`` again and hand them over."""
        wanted = set(patterns)
        if not wanted:
            return
        with self._lock:
            if self._closed():
                return
            try:
                self._post(read_patterns(client, wanted), False)
            except BaseException:
                self.stale = True
                raise

    # -- notifications --------------------------------------------------------------------------

    def watch(self, client: Any) -> None:
        """Watch both notification parents (which must exist), noting the notifications there now
        as seen, and delete the expired ones (blocking: run it in a worker thread)."""
        for parent in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._watch(client, parent)
        self.purge(client)

    def _watch(self, client: Any, parent: str) -> None:
        calls = 0

        def on_children(children: list[str]) -> bool | None:
            nonlocal calls
            initial, calls = calls == 0, calls + 1
            if self._closed():
                return False
            seqs = {name: seq for name in children if (seq := _sequence(name)) is not None}
            last = self._last_seq[parent]
            self._last_seq[parent] = max([last, *seqs.values()])
            new = sorted(name for name, seq in seqs.items() if seq > last)
            if initial:
                self._note_ctimes(client, [f"{parent}/{name}" for name in new])  # this worker thread
            elif new:
                client.handler.spawn(self._process, client, parent, new)  # off kazoo's callback thread
            return None

        ChildrenWatch(client, parent, on_children)

    def _note_ctimes(self, client: Any, paths: list[str]) -> None:
        def stats() -> list[tuple[str, Any]]:
            pending = [(path, client.exists_async(path)) for path in paths]
            return [(path, stat) for path, result in pending if (stat := result.get()) is not None]

        found = retried(stats)
        with self._lock:
            self._ctimes.update((path, stat.ctime) for path, stat in found)

    def _process(self, client: Any, parent: str, names: list[str]) -> None:
        """A kazoo-spawned thread: read the new notifications, refresh the patterns they name, purge."""
        try:
            found = retried(read_many, client, [(f"{parent}/{name}", f"{parent}/{name}") for name in names])
            patterns = set()
            with self._lock:
                for path, data, stat in found:
                    self._ctimes[path] = stat.ctime
                    try:
                        patterns.add(parse_change_notification(path, data))
                    except ValueError as exc:
                        logger.warning("ignoring the ACL change notification %s: %s", path, exc)
            self.refresh(client, patterns)
            self.purge(client)
        except Exception as exc:
            self.stale = True
            logger.warning(
                "reading the ACL changes %s failed (%r); reading every ACL again once reconnected", names, exc
            )

    def purge(self, client: Any) -> None:
        """Delete the notifications seen that are older than the expiry (blocking)."""
        cutoff = self._clock_ms() - self._expiry_ms
        with self._lock:
            expired = sorted(path for path, ctime in self._ctimes.items() if ctime < cutoff)
        if not expired:
            return
        pending = [(path, client.delete_async(path)) for path in expired]
        for path, result in pending:
            try:
                result.get()
            except NoNodeError:
                pass  # another node deleted it
            except KazooException as exc:
                logger.warning("deleting the old ACL change notification %s failed: %r", path, exc)
                continue  # tried again next time
            with self._lock:
                self._ctimes.pop(path, None)
        logger.info("deleted %d ACL change notifications older than %d s", len(expired), self._expiry_ms // 1000)


def _sequence(name: str) -> int | None:
    """The counter ZooKeeper appended to a notification's name; None for a node that is not one."""
    if not name.startswith(CHANGE_PREFIX):
        return None
    digits = name[len(CHANGE_PREFIX) :]
    return int(digits) if digits.isascii() and digits.isdigit() else None
