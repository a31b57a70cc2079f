"""The DR state of one link, kept in the ZooKeeper of the link's original *target* site.

The target is where it must live: an unplanned failover happens exactly when the source and
its ZooKeeper are gone. One DR pair is named after its original link (``east-to-west``) for
its whole life, also while the reverse link runs. Layout (under the target site's chroot)::

    /strait/dr/<link>/state            JSON below; every write is a compare-and-set on its version
    /strait/dr/<link>/journal/e-NNNN   one persistent sequential znode per step (JSON below)
    /strait/dr/<link>/cuts/<epoch>/<topic>   the cut of the promote that started <epoch>
    /strait/dr/<link>/lock             ephemeral: held by the one command working on the link

``state``::

    {"version": 1, "link": "east-to-west", "state": "mirroring", "epoch": 0,
     "primary": "east", "standby": "west",
     "operation": null | {"name": "promote", "args": {...}, "started_ms": ..., "by": "host pid 42",
                          "done": ["stop-link", ...], "results": {"stop-link": {...}}},
     "cut_epoch": null | 1, "facts": {"rpo_at_promote": {...}, "divergence": {...}}, "updated_ms": ...}

``state`` is ``mirroring`` (``primary`` takes writes, the link copies it to ``standby``),
``promoted`` (the standby took over: it is now ``primary``; the old one is fenced or will be)
or ``reversed`` (the old primary is a mirror of the new one through the reverse link).
``epoch`` goes up by one at every promote and failback. An operation in progress is kept in
``operation``: its completed steps (``done``) are never run again, so a command killed at any
point and run again finishes the job. A step and its journal entry are written in one
ZooKeeper transaction.

Journal entry: ``{"at_ms", "epoch", "operation", "step", "by", "detail": {...}}``.

Every function here blocks (kazoo calls) and takes the kazoo client first: run them through
:meth:`node.coordination.ZkSession.run`; :class:`DrStore` does.

A secured target site (its nodes set ``zookeeper.set.acl``) lets the world only read: the store
then needs the site's credential (:func:`open_store`'s ``digest``), and creates its znodes with
the site's secured ACL. Without it (or with another one) a write is refused with
:class:`~failover.errors.ZooKeeperSecured`, naming the topology key that supplies it.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import trio
from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.coordination import CoordinationError, ZkSession
from node.zkkit import ZkDigest

from .errors import FailoverError, LinkBusy, ZooKeeperSecured

MIRRORING = "mirroring"
PROMOTED = "promoted"
REVERSED = "reversed"
STATES = (MIRRORING, PROMOTED, REVERSED)
ROOT = "/strait/dr"
_STATE_FORMAT = 1
_JOURNAL_PREFIX = "e-"
SESSION_TIMEOUT_MS = 6000  # how long a killed command on another host holds the lock


T = TypeVar("T")


def link_path(link: str) -> str:
    return f"{ROOT}/{link}"


@dataclass(frozen=True)
class Operation:
    """A command in progress on the link: its arguments and the steps it completed."""

    name: str
    args: Mapping[str, Any]
    started_ms: int
    by: str
    done: tuple[str, ...] = ()
    results: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "args": dict(self.args),
            "started_ms": self.started_ms,
            "by": self.by,
            "done": list(self.done),
            "results": dict(self.results),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Operation:
        return cls(
            name=str(data["name"]),
            args=dict(data.get("args") or {}),
            started_ms=int(data["started_ms"]),
            by=str(data.get("by", "")),
            done=tuple(str(s) for s in data.get("done", [])),
            results=dict(data.get("results") or {}),
        )


@dataclass(frozen=True)
class DrState:
    """The state znode, and the version it was read at (-1: it does not exist yet)."""

    link: str
    state: str
    epoch: int
    primary: str
    standby: str
    operation: Operation | None = None
    cut_epoch: int | None = None
    facts: Mapping[str, Any] = field(
        default_factory=dict
    )  # outcomes kept across operations (RPO at promote, divergence)
    updated_ms: int = 0
    version: int = -1

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _STATE_FORMAT,
            "link": self.link,
            "state": self.state,
            "epoch": self.epoch,
            "primary": self.primary,
            "standby": self.standby,
            "operation": None if self.operation is None else self.operation.to_dict(),
            "cut_epoch": self.cut_epoch,
            "facts": dict(self.facts),
            "updated_ms": self.updated_ms,
        }

    @classmethod
    def from_bytes(cls, raw: bytes, path: str, version: int) -> DrState:
        try:
            data = json.loads(raw)
            state = str(data["state"])
            if state not in STATES:
                raise ValueError(f"state {state!r} is not one of {', '.join(STATES)}")
            operation = data.get("operation")
            return cls(
                link=str(data["link"]),
                state=state,
                epoch=int(data["epoch"]),
                primary=str(data["primary"]),
                standby=str(data["standby"]),
                operation=None if operation is None else Operation.from_dict(operation),
                cut_epoch=None if data.get("cut_epoch") is None else int(data["cut_epoch"]),
                facts=dict(data.get("facts") or {}),
                updated_ms=int(data.get("updated_ms", 0)),
                version=version,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise FailoverError(f"ZooKeeper {path}: not a DR state this version of strait reads: {exc}") from None


def initial_state(link: str, source: str, target: str) -> DrState:
    """A link nobody failed over yet: mirroring ``source`` to ``target``, epoch 0."""
    return DrState(link=link, state=MIRRORING, epoch=0, primary=source, standby=target)


# -- blocking operations (fn(client, ...)) ---------------------------------------------------------


def read_state(client: Any, link: str) -> DrState | None:
    """The link's state, None if no failover command ever wrote it."""
    path = f"{link_path(link)}/state"
    try:
        raw, stat = client.get(path)
    except NoNodeError:
        return None
    return DrState.from_bytes(raw, path, stat.version)


def write_state(client: Any, state: DrState, journal: Mapping[str, Any] | None = None) -> DrState:
    """Write ``state`` if the znode is still at ``state.version`` (creating it at -1), together
    with one journal entry when given (one transaction). Returns the state at its new version.

    Raises:
        FailoverError: another command changed the state meanwhile (re-read and decide again).
    """
    path = f"{link_path(state.link)}/state"
    client.ensure_path(f"{link_path(state.link)}/journal")
    data = json.dumps(state.to_dict(), sort_keys=True).encode()
    tx = client.transaction()
    if state.version == -1:
        tx.create(path, data)
    else:
        tx.set_data(path, data, version=state.version)
    if journal is not None:
        entry = json.dumps(dict(journal), sort_keys=True).encode()
        tx.create(f"{link_path(state.link)}/journal/{_JOURNAL_PREFIX}", entry, sequence=True)
    results = tx.commit()
    for result in results:
        if isinstance(result, NoAuthError):
            raise result  # the caller tells the operator the site is secured
        if isinstance(result, (BadVersionError, NodeExistsError, NoNodeError)):
            raise FailoverError(
                f"ZooKeeper {path} changed while this command worked on it (another strait failover "
                f"command?): re-run to continue from what it holds now"
            )
        if isinstance(result, Exception):
            raise FailoverError(f"ZooKeeper {path}: writing the DR state failed: {result!r}")
    return replace(state, version=0 if state.version == -1 else state.version + 1)


def read_journal(client: Any, link: str, limit: int = 200) -> list[dict[str, Any]]:
    """The last ``limit`` journal entries, oldest first (each with its ``seq``)."""
    path = f"{link_path(link)}/journal"
    try:
        names = sorted(n for n in client.get_children(path) if n.startswith(_JOURNAL_PREFIX))
    except NoNodeError:
        return []
    entries = []
    for name in names[-limit:]:
        try:
            raw, _ = client.get(f"{path}/{name}")
        except NoNodeError:
            continue
        entry = json.loads(raw)
        entry["seq"] = int(name[len(_JOURNAL_PREFIX) :])
        entries.append(entry)
    return entries


def write_cut(client: Any, link: str, epoch: int, cut: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> None:
    """Store the cut of ``epoch``, one znode per topic (rewritten when present: the same cut
    written again by a resumed command is a no-op)."""
    base = f"{link_path(link)}/cuts/{epoch}"
    client.ensure_path(base)
    for topic, partitions in cut.items():
        data = json.dumps({str(p): dict(v) for p, v in sorted(partitions.items())}, sort_keys=True).encode()
        try:
            client.create(f"{base}/{topic}", data)
        except NodeExistsError:
            client.set(f"{base}/{topic}", data)


def read_cut(client: Any, link: str, epoch: int) -> dict[str, dict[int, dict[str, Any]]]:
    """The cut of ``epoch`` by topic and partition; empty if none was written."""
    base = f"{link_path(link)}/cuts/{epoch}"
    try:
        topics = client.get_children(base)
    except NoNodeError:
        return {}
    cut: dict[str, dict[int, dict[str, Any]]] = {}
    for topic in sorted(topics):
        raw, _ = client.get(f"{base}/{topic}")
        cut[topic] = {int(p): dict(v) for p, v in json.loads(raw).items()}
    return cut


def take_lock(client: Any, link: str, holder: Mapping[str, Any], alive: Callable[[Mapping[str, Any]], bool]) -> bool:
    """Create the link's ephemeral lock; True when this session holds it now.

    A lock left by a command that died on this host (``alive(holder)`` false) is removed and
    taken; one held elsewhere is left alone (it vanishes when its session expires).
    """
    path = f"{link_path(link)}/lock"
    client.ensure_path(link_path(link))
    data = json.dumps(dict(holder), sort_keys=True).encode()
    for _ in range(3):
        try:
            client.create(path, data, ephemeral=True)
            return True
        except NodeExistsError:
            pass
        try:
            raw, stat = client.get(path)
        except NoNodeError:
            continue
        if stat.ephemeralOwner == client.client_id[0]:
            return True
        if alive(json.loads(raw)):
            return False
        with suppress(NoNodeError, BadVersionError):
            client.delete(path, version=stat.version)
    return False


def lock_holder(client: Any, link: str) -> dict[str, Any] | None:
    try:
        raw, _ = client.get(f"{link_path(link)}/lock")
    except NoNodeError:
        return None
    holder: dict[str, Any] = json.loads(raw)
    return holder


def release_lock(client: Any, link: str) -> None:
    path = f"{link_path(link)}/lock"
    try:
        _, stat = client.get(path)
        if stat.ephemeralOwner == client.client_id[0]:
            client.delete(path, version=stat.version)
    except NoNodeError:
        pass


def this_process() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def holder_alive(holder: Mapping[str, Any]) -> bool:
    """False only when the holder ran on this host and its process is gone."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, ValueError, TypeError):
        return True
    return True


# -- the async store ---------------------------------------------------------------------------------


class DrStore:
    """The DR state of one link through one ZooKeeper session (see :func:`open_store`).

    Every method raises :class:`~failover.errors.ZooKeeperSecured` when the target's ZooKeeper
    refuses the session (NoAuth), and :class:`~failover.errors.FailoverError` for any other
    ZooKeeper failure (connection loss, ...: run the command again).
    """

    def __init__(self, session: ZkSession, link: str, source: str, target: str, *, authenticated: bool = False) -> None:
        self.session = session
        self.link = link
        self.target = target
        self.authenticated = authenticated  # whether the session carries a credential
        self._initial = initial_state(link, source, target)
        self.by = f"{socket.gethostname()} pid {os.getpid()}"

    def _now(self) -> int:
        return self.session.clock_ms()

    async def _run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await self.session.run(what, fn, *args)
        except CoordinationError as exc:
            raise store_error(exc, self.target, self.session.connect, what, self.authenticated) from None

    async def state(self) -> DrState:
        """The state as ZooKeeper holds it now (the initial ``mirroring`` one if none yet)."""
        found = await self._run(f"read the DR state of link {self.link!r}", read_state, self.link)
        return self._initial if found is None else found

    async def journal(self, limit: int = 200) -> list[dict[str, Any]]:
        return await self._run(f"read the journal of link {self.link!r}", read_journal, self.link, limit)

    async def write(
        self, state: DrState, step: str, detail: Mapping[str, Any] | None = None, *, operation: str | None = None
    ) -> DrState:
        """Write ``state`` (compare-and-set) with a journal entry for ``step`` of ``operation``
        (default: the state's operation in progress)."""
        state = replace(state, updated_ms=self._now())
        entry = {
            "at_ms": state.updated_ms,
            "epoch": state.epoch,
            "operation": operation or (None if state.operation is None else state.operation.name),
            "step": step,
            "by": self.by,
            "detail": dict(detail or {}),
        }
        return await self._run(f"write the DR state of link {self.link!r}", write_state, state, entry)

    async def begin(self, state: DrState, name: str, args: Mapping[str, Any]) -> DrState:
        """Start operation ``name`` unless the same one is in progress (then resume it)."""
        if state.operation is not None:
            if state.operation.name != name:
                raise FailoverError(
                    f"link {self.link!r}: a {state.operation.name!r} started at {state.operation.started_ms} ms "
                    f"by {state.operation.by} is not finished: run `strait failover {state.operation.name} "
                    f"{self.link}` again to finish it first"
                )
            return state
        operation = Operation(name=name, args=dict(args), started_ms=self._now(), by=self.by)
        return await self.write(replace(state, operation=operation), "begin", {"operation": name, "args": dict(args)})

    async def record(self, state: DrState, step: str, result: Mapping[str, Any] | None = None) -> DrState:
        """Mark ``step`` of the current operation done (with its small result)."""
        operation = state.operation
        assert operation is not None, "record() outside an operation"
        results = dict(operation.results)
        results[step] = dict(result or {})
        done = replace(operation, done=(*operation.done, step), results=results)
        return await self.write(replace(state, operation=done), step, result)

    async def finish(self, current: DrState, **changes: Any) -> DrState:
        """End the current operation, applying ``changes`` (new state, epoch, primary, ...)."""
        name = current.operation.name if current.operation is not None else None
        return await self.write(replace(current, operation=None, **changes), "end", changes, operation=name)

    async def write_cut(self, epoch: int, cut: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> None:
        await self._run(f"write the cut of link {self.link!r}", write_cut, self.link, epoch, cut)

    async def read_cut(self, epoch: int) -> dict[str, dict[int, dict[str, Any]]]:
        return await self._run(f"read the cut of link {self.link!r}", read_cut, self.link, epoch)

    async def lock(self, command: str, wait_s: float) -> None:
        """Take the link's lock, waiting up to ``wait_s`` for another holder's session to end.

        Raises:
            LinkBusy: still held after ``wait_s`` (the holder's host, pid and command named).
        """
        holder = {**this_process(), "command": command, "since_ms": self._now()}
        with trio.move_on_after(wait_s):
            while True:
                taken = await self._run(f"lock link {self.link!r}", take_lock, self.link, holder, holder_alive)
                if taken:
                    return
                await trio.sleep(0.25)
        other = await self._run(f"read the lock of link {self.link!r}", lock_holder, self.link)
        who = (
            "another command"
            if other is None
            else (f"`{other.get('command')}` (host {other.get('host')}, pid {other.get('pid')})")
        )
        raise LinkBusy(f"link {self.link!r} is held by {who}; it is released when that command ends")

    async def unlock(self) -> None:
        await self._run(f"unlock link {self.link!r}", release_lock, self.link)


def store_error(exc: CoordinationError, site: str, connect: str, action: str, authenticated: bool) -> FailoverError:
    """The failover error for a ZooKeeper failure of the store: :class:`ZooKeeperSecured` when
    ZooKeeper answered NoAuth, else a :class:`FailoverError` with the failure's message."""
    if isinstance(exc.__cause__, NoAuthError):
        return ZooKeeperSecured(site, connect, action, with_credential=authenticated)
    return FailoverError(str(exc))


@asynccontextmanager
async def open_store(
    zookeeper: str,
    link: str,
    source: str,
    target: str,
    *,
    timeout_s: float = 10.0,
    digest: ZkDigest | None = None,
) -> AsyncIterator[DrStore]:
    """A :class:`DrStore` over a new session with ``zookeeper`` (the link's original target).

    With ``digest`` (the target site's ``zookeeper_digest_file``) the session authenticates with
    it and every znode the store creates gets the secured ACL (the credential: all; the world:
    read), as the site's nodes create theirs with ``zookeeper.set.acl``; the mirror's membership
    decides the same way.

    Raises:
        FailoverError: no ZooKeeper session within ``timeout_s`` (naming the connect string).
        ZooKeeperSecured: the session could not set up its paths (NoAuth).
    """
    session = ZkSession(
        zookeeper,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        connection_timeout_ms=int(timeout_s * 1000),
        digest=digest,
        set_acl=digest is not None,
    )
    try:
        await session.start()
    except CoordinationError as exc:
        if isinstance(exc.__cause__, NoAuthError):
            raise store_error(exc, target, zookeeper, "create the paths a session needs", digest is not None) from None
        raise FailoverError(f"cannot reach the ZooKeeper of the link's target site ({zookeeper}): {exc}") from None
    try:
        yield DrStore(session, link, source, target, authenticated=digest is not None)
    finally:
        await session.close()
