"""Several mirror processes sharing one link's partitions, through the target site's ZooKeeper.

:class:`ZkMembership` implements ``mirror._link.Membership``. Layout (under the chroot of the
target's ``zookeeper`` connect string, next to the target site's own znodes)::

    /strait/mirror/<link>/members/<member-id>             ephemeral, one per live process;
                                                          JSON {"member_id", "host", "pid", ...}
    /strait/mirror/<link>/owners/<topic>-<partition>      ephemeral, data = the owner's member id

The algorithm:

1. Every process registers its member znode (ephemeral: it dies with the process's session)
   and watches the children of ``members``.
2. A partition's **assigned owner** is chosen by rendezvous hashing over the live members:
   the member with the highest ``blake2b(member, topic, partition)``. Every member computes
   the same answer from the same member list, and a member joining or leaving moves only the
   partitions it wins or held (about 1/N of them).
3. ``claim(topic, partition)`` waits until this process is the assigned owner **and** has
   created the partition's owner znode. A previous owner's znode is never taken over: the
   claim waits (watching it) until its holder deletes it or the holder's session expires.
4. The body runs inside a cancel scope that is cancelled when a membership change assigns
   the partition to another member, or this process's session expires (its owner znodes are
   gone: someone else may take over). The owner znode is deleted after the body ends, by the
   membership's own task, so the next owner can take it.
5. ``leader`` is True on the live member with the lowest id (it runs group offset sync).

Ownership keeps work from being done twice; it is not what makes mirroring correct. The target
appends a batch only at the mirror's current end offset (MirrorAppend), so two processes
copying the same partition for a moment (a stale view during a handoff, a session expiring
under a paused process) can never duplicate or skip records.

When a member dies (``kill -9``, a crashed host) its ZooKeeper session expires after the
session timeout, its znodes vanish, and the others see the member list change and take its
partitions over.

Threads: kazoo is thread-based. Every blocking kazoo call runs in ``trio.to_thread.run_sync``
(with a small limiter of its own, so a ZooKeeper outage cannot use up trio's worker threads);
kazoo's threads (watches, session state) only schedule a wake-up in trio with the run's
``TrioToken`` and never wait for trio.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar, TypeVarTuple, Unpack

import trio
from kazoo.exceptions import KazooException, NoNodeError  # type: ignore[import-untyped]
from kazoo.protocol.states import KazooState  # type: ignore[import-untyped]

from node.zkkit import ZkDigest, create_or_find, kazoo_client, session_of, split_connect, stop_quietly, wall_clock_ms

from ._config import MirrorError

log = logging.getLogger("strait.mirror.members")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

ROOT = "/strait/mirror"
DEFAULT_SESSION_TIMEOUT_S = 10.0
DEFAULT_RECHECK_S = 5.0  # waits re-read ZooKeeper at least this often, in case a watch was lost
_CLOSE_TIMEOUT_S = 5.0  # closing the session at shutdown
_ZK_THREADS = 4  # worker threads one membership may hold (calls block while ZooKeeper is unreachable)
_COMMAND_TRIES = 3  # kazoo tries each call this often; a call that fails is tried again on the next pass
_HELD_WARNING_EVERY_S = 30.0
_MEMBER_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def check_member_id(member_id: str) -> str:
    """Return ``member_id`` if it can name a znode; raises MirrorError naming it otherwise."""
    if not _MEMBER_ID.fullmatch(member_id) or member_id in (".", ".."):
        raise MirrorError(
            f"member id {member_id!r}: use 1-128 ASCII letters, digits, '.', '_' or '-' (it names a znode)"
        )
    return member_id


def owner_of(members: tuple[str, ...] | list[str], topic: str, partition: int) -> str | None:
    """The member that rendezvous hashing assigns ``topic``-``partition`` to (None without members)."""
    if not members:
        return None
    return max(members, key=lambda member: (_score(member, topic, partition), member))


def _score(member: str, topic: str, partition: int) -> int:
    digest = hashlib.blake2b(f"{member}\0{topic}\0{partition}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass
class _Claim:
    """One entered claim: the scope of its body and the session its owner znode belongs to."""

    scope: trio.CancelScope
    session: int
    path: str


class ZkMembership:
    """Membership of one link's mirror processes in the ZooKeeper named by ``connect``.

    ``run`` keeps the session, the member znode and the member list; ``claim`` and ``leader``
    follow the module docstring. One trio run per instance; ``claim`` is used from tasks of the
    run that runs ``run``. Claims entered before ``run`` registered the member simply wait.
    """

    def __init__(
        self,
        connect: str,
        link: str,
        member_id: str,
        *,
        session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
        recheck_s: float = DEFAULT_RECHECK_S,
        info: dict[str, object] | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        digest: ZkDigest | None = None,
    ) -> None:
        """Nothing connects until ``run``. Raises MirrorError naming a bad ``connect`` or ``member_id``.

        ``clock_ms`` gives the ``registered_ms`` written into the member znode. With ``digest``
        (the target site's ZooKeeper credential) the session authenticates with it and creates
        its znodes as a node with ``zookeeper.set.acl`` does: the credential may do everything,
        the world may read.
        """
        try:
            self._hosts, chroot = split_connect(connect, "zookeeper")
        except ValueError as exc:
            raise MirrorError(str(exc)) from exc
        self.connect = connect
        self.link = link
        self.member_id = check_member_id(member_id)
        if session_timeout_s <= 0 or recheck_s <= 0:
            raise MirrorError(
                f"ZooKeeper session timeout {session_timeout_s} s and recheck {recheck_s} s must be positive"
            )
        self.session_timeout_s = session_timeout_s
        self.recheck_s = recheck_s
        base = f"{chroot}{ROOT}/{link}"
        self._members_path = f"{base}/members"
        self._owners_path = f"{base}/owners"
        self._member_path = f"{self._members_path}/{member_id}"
        self._info: dict[str, object] = {
            "member_id": member_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **(info or {}),
        }
        self._clock_ms = clock_ms
        self._digest = digest
        self._client: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._limiter = trio.CapacityLimiter(_ZK_THREADS)
        self._changed = trio.Event()  # replaced by a fresh one after each change (see _notify)
        self._connected = False
        self._session: int | None = None  # the session that holds our member znode
        self._members: tuple[str, ...] = ()
        self._claims: dict[tuple[str, int], _Claim] = {}
        self._releases: dict[str, int] = {}  # owner znodes of ended claims -> the session holding them
        self._owner_lock = trio.Lock()  # owner znodes are created and deleted one at a time
        self._closed = False

    # -- what the others read ---------------------------------------------------------------------

    @property
    def leader(self) -> bool:
        """True while this process is registered and has the lowest member id."""
        return self._session is not None and bool(self._members) and self._members[0] == self.member_id

    @property
    def members(self) -> tuple[str, ...]:
        """The live members as last read (sorted); empty while this process is not registered."""
        return self._members if self._session is not None else ()

    def owns(self, topic: str, partition: int) -> bool:
        """True when this process is registered and is the partition's assigned owner."""
        members = self.members
        return self.member_id in members and owner_of(members, topic, partition) == self.member_id

    def status(self) -> dict[str, Any]:
        """JSON-able: member id, live members, leader, session, and the partitions claimed now."""
        return {
            "kind": "zookeeper",
            "zookeeper": self.connect,
            "member_id": self.member_id,
            "connected": self._connected,
            "session": None if self._session is None else f"{self._session:#x}",
            "members": list(self.members),
            "leader": self.leader,
            "claimed": sorted(f"{topic}-{partition}" for topic, partition in self._claims),
        }

    # -- the service task ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the session, the member znode and the member list until cancelled.

        ``task_status.started()`` follows the first registration. ZooKeeper being unreachable is
        not an error: kazoo keeps reconnecting, claims wait, and this logs a warning now and
        then. On cancellation every claim body is cancelled and the session is closed (its
        ephemeral znodes vanish at once, so the others take over without waiting for a timeout).
        """
        if self._client is not None or self._closed:
            raise MirrorError(f"membership of {self.member_id!r} in link {self.link!r} was run before")
        self._token = trio.lowlevel.current_trio_token()
        client = kazoo_client(
            self._hosts,
            self.session_timeout_s,
            command_tries=_COMMAND_TRIES,
            digest=self._digest,
            secure_acl=self._digest is not None,
        )
        client.add_listener(self._on_state)
        self._client = client
        started = False
        held_warned = -_HELD_WARNING_EVERY_S
        waiting_since = trio.current_time()
        try:
            client.start_async()
            while True:
                changed = self._changed
                self._connected = client.state == KazooState.CONNECTED
                if self._connected:
                    waiting_since = trio.current_time()
                    holder = await self._register()
                    if holder is not None and trio.current_time() - held_warned >= _HELD_WARNING_EVERY_S:
                        held_warned = trio.current_time()
                        log.warning(
                            "link %s: member id %r is held by another ZooKeeper session (%#x): waiting for it to "
                            "expire; if another mirror process runs with the same --member-id, give each its own",
                            self.link,
                            self.member_id,
                            holder,
                        )
                    if self._session is not None:
                        await self._read_members()
                        await self._release_pending()
                        if not started:
                            started = True
                            task_status.started()
                elif trio.current_time() - waiting_since >= 2 * self.session_timeout_s:
                    waiting_since = trio.current_time()
                    log.warning("link %s: no ZooKeeper session at %s yet; retrying", self.link, self.connect)
                with trio.move_on_after(self.recheck_s):
                    await changed.wait()
        finally:
            self._closed = True
            self._session = None
            self._members = ()
            for claim in self._claims.values():
                claim.scope.cancel()
            with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT_S):
                await trio.to_thread.run_sync(stop_quietly, client, abandon_on_cancel=True)

    async def _register(self) -> int | None:
        """Make sure our member znode exists in the current session; returns the other session holding it."""
        client = self._client
        session = session_of(client)
        if session is None or session == self._session:
            return None
        try:
            holder = await self._call(self._register_sync, session)
        except KazooException as exc:
            log.warning("link %s: registering member %r failed: %r; retrying", self.link, self.member_id, exc)
            return None
        if holder is None:
            log.info(
                "link %s: member %r registered in ZooKeeper %s (session %#x)",
                self.link,
                self.member_id,
                self.connect,
                session,
            )
            self._session = session
            self._reevaluate()  # claims made in an older session lost their owner znodes
            self._notify()
        return holder

    def _register_sync(self, session: int) -> int | None:
        """Create our member znode; None when ``session`` holds it, else the session that does."""
        client = self._client
        data = json.dumps(self._info | {"registered_ms": self._clock_ms()}).encode()
        while True:
            found = create_or_find(client, self._member_path, data, makepath=True, watch=self._on_watch)
            if found is False:
                continue  # its session ended between the two calls: create it now
            if found is True or found.owner == session:
                return None
            return found.owner

    async def _read_members(self) -> None:
        try:
            children = await self._call(self._client.get_children, self._members_path, self._on_watch)
        except KazooException as exc:
            log.warning("link %s: reading the members failed: %r; retrying", self.link, exc)
            return
        members = tuple(sorted(children))
        if self.member_id not in members:
            # Our znode is gone though the session looked alive (deleted by hand, or the expiry
            # is not reported yet): register again before claiming anything.
            log.warning("link %s: member %r is missing from %s; registering again", self.link, self.member_id, members)
            self._session = None
            self._members = members
            self._reevaluate()
            self._notify()
            return
        if members != self._members:
            log.info("link %s: members %s (this process: %r)", self.link, list(members), self.member_id)
            self._members = members
            self._reevaluate()
            self._notify()

    async def _release_pending(self) -> None:
        """Delete the owner znodes of ended claims (retried on the next pass when ZooKeeper fails)."""
        if not self._releases:
            return
        async with self._owner_lock:
            for path, session in list(self._releases.items()):
                if session != self._session:
                    del self._releases[path]  # it died with that session
                    continue
                try:
                    await self._call(self._release_sync, path, session)
                except KazooException as exc:
                    log.warning("link %s: releasing %s failed: %r; retrying", self.link, path, exc)
                    continue
                self._releases.pop(path, None)
        self._notify()

    def _release_sync(self, path: str, session: int) -> None:
        client = self._client
        try:
            _, stat = client.get(path)
        except NoNodeError:
            return
        if stat.ephemeralOwner == session:
            with suppress(NoNodeError):
                client.delete(path, version=stat.version)

    # -- claims ---------------------------------------------------------------------------------------

    @asynccontextmanager
    async def claim(self, topic: str, partition: int) -> AsyncIterator[None]:
        """Wait until this process owns ``topic``-``partition``, then run the body until the partition
        moves away (the body is cancelled, and the ``async with`` ends normally) or it ends.

        May be cancelled while waiting. The owner znode is released after the body, by ``run``.
        """
        key = (topic, partition)
        path = f"{self._owners_path}/{topic}-{partition}"
        session = await self._acquire(key, path)
        claim = _Claim(trio.CancelScope(), session, path)
        self._claims[key] = claim
        log.info("link %s: %s-%d claimed by %r", self.link, topic, partition, self.member_id)
        try:
            with claim.scope:
                yield
        finally:
            if self._claims.get(key) is claim:
                del self._claims[key]
            if not self._closed:
                self._releases[path] = session
                self._notify()
            if claim.scope.cancelled_caught:
                log.info("link %s: %s-%d moved away from %r", self.link, topic, partition, self.member_id)

    async def _acquire(self, key: tuple[str, int], path: str) -> int:
        """Wait until we are the assigned owner and hold the owner znode; returns our session."""
        topic, partition = key
        while True:
            changed = self._changed
            session = self._session
            if session is not None and key not in self._claims and self.owns(topic, partition):
                async with self._owner_lock:
                    if self._releases.get(path) == session:
                        del self._releases[path]  # ours still: take it back as it is
                    try:
                        taken = await self._call(self._take_sync, path, session)
                    except KazooException as exc:
                        log.warning("link %s: claiming %s failed: %r; retrying", self.link, path, exc)
                        taken = ""
                if taken is True:
                    if self._session == session and self.owns(topic, partition) and key not in self._claims:
                        return session
                    self._releases[path] = session  # the view changed meanwhile: give it back
                    self._notify()
                    continue
                if taken is False:
                    continue
            with trio.move_on_after(self.recheck_s):
                await changed.wait()

    def _take_sync(self, path: str, session: int) -> bool | str:
        """Create the owner znode in ``session``: True when we hold it, False to try again at once,
        else the member id written in the znode held by someone else (watched: its deletion wakes us)."""
        client = self._client
        if session_of(client) != session:
            return ""  # the session changed under us: wait for run() to register again
        found = create_or_find(client, path, self.member_id.encode(), makepath=True, watch=self._on_watch)
        if isinstance(found, bool):
            return found  # True: created now; False: it vanished meanwhile
        if found.owner == session:
            return True
        return found.data.decode(errors="replace")

    def _reevaluate(self) -> None:
        """Cancel the bodies of claims this process should not hold any more."""
        for (topic, partition), claim in self._claims.items():
            if claim.session != self._session or not self.owns(topic, partition):
                claim.scope.cancel()

    # -- plumbing ---------------------------------------------------------------------------------------

    async def _call(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:  # noqa: UP044
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True, limiter=self._limiter)

    def _notify(self) -> None:
        """Trio thread: wake every waiter (run's loop and waiting claims) to look again."""
        self._changed.set()
        self._changed = trio.Event()

    def _post(self, fn: Callable[[], None]) -> None:
        """Any thread: run ``fn`` soon on the trio thread (dropped once the run is over)."""
        token = self._token
        if token is None or self._closed:
            return
        with suppress(trio.RunFinishedError):
            token.run_sync_soon(fn)

    def _on_watch(self, event: object) -> None:
        """Kazoo's thread: a watched znode changed."""
        self._post(self._notify)

    def _on_state(self, state: str) -> None:
        """Kazoo's connection thread: hand the new state to trio."""
        self._post(lambda: self._state_changed(state))

    def _state_changed(self, state: str) -> None:
        if self._closed:
            return
        if state == KazooState.LOST:
            if self._session is not None:
                log.warning(
                    "link %s: ZooKeeper session %#x of member %r expired: its partitions may move; "
                    "stopping its copies and registering again",
                    self.link,
                    self._session,
                    self.member_id,
                )
            self._session = None
            self._reevaluate()
        elif state == KazooState.SUSPENDED:
            log.warning("link %s: connection to ZooKeeper %s lost; reconnecting", self.link, self.connect)
        self._notify()
