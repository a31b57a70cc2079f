"""The mirror process: the links of a link file, run together in one trio run, with an admin API.

:class:`MirrorService` runs one ``LinkRunner`` per link of the file, serves the admin API
(``mirror._admin``) and keeps what operators changed through it in a state dir::

    <state-dir>/state.json     {"version": 1, "member_id": "<generated id>",
                                "links": {"<link>": {"paused": true} | {"deleted": true}}}
    <state-dir>/admin.token    the admin token generated at start (mode 0600), unless
                               --admin-token-file names one
    <state-dir>/mirror.lock    held (flock) while the process runs: one process per state dir

Pause, resume and delete are written to ``state.json`` (atomically) before they take effect,
so a restarted process keeps them:

- a **paused** link runs its topic sync but copies nothing until resumed;
- a **deleted** link is stopped and stays stopped while the link file still names it; the
  target's mirror topics and their data are left as they are. Removing the link from the file
  (and restarting) forgets the deletion; adding it back later starts it afresh.

State entries of links the file no longer names are dropped at start. The state is this
process's: with several processes sharing a link (scale-out), send pause/resume/delete to each.

Links whose target names a ``zookeeper`` share their partitions with the other processes
running the same link (``mirror._members.ZkMembership``, keyed by ``--member-id``); the others
are run by this process alone (``SoleMember``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import trio

from node.adminkit import serve_admin
from node.proc import atomic_write

from ._admin import UnknownLink, check_token, create_app
from ._config import LinkConfig, MirrorError
from ._link import LinkRunner, SoleMember
from ._members import DEFAULT_SESSION_TIMEOUT_S, ZkMembership, check_member_id

log = logging.getLogger("strait.mirror.service")

STATE_FILE = "state.json"
TOKEN_FILE = "admin.token"
LOCK_FILE = "mirror.lock"
STATE_VERSION = 1
DELETE_WAIT_S = 10.0  # DELETE answers once the link stopped, or after this long


@dataclass(frozen=True)
class ServiceReady:
    """What ``MirrorService.run`` reports once the admin API serves (also the ready file's content)."""

    admin_url: str
    token_file: Path
    member_id: str
    pid: int

    def to_json(self) -> dict[str, object]:
        return {
            "admin": self.admin_url,
            "pid": self.pid,
            "token_file": str(self.token_file),
            "member_id": self.member_id,
        }


def write_ready_file(path: Path, ready: ServiceReady) -> None:
    """Atomically publish ``{"admin": url, "pid": ..., "token_file": ..., "member_id": ...}``.

    Raises:
        OSError: the file cannot be written.
    """
    atomic_write(path, json.dumps(ready.to_json()) + "\n")


@dataclass
class _Link:
    """One configured link as the service runs it."""

    config: LinkConfig
    runner: LinkRunner
    membership: ZkMembership | None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    stopped: trio.Event = field(default_factory=trio.Event)
    error: str | None = None  # why the runner refused to run (state "failed")


class MirrorService:
    """Runs ``links`` with an admin API on ``admin_host:admin_port`` (port 0: any free port).

    ``state_dir`` is created if missing. ``admin_token_file`` names a file holding the admin
    token; without it a random token is generated at every start and written to
    ``<state_dir>/admin.token`` (mode 0600). ``member_id`` names this process among those sharing
    a link through ZooKeeper; by default an id generated once and kept in ``state.json``.
    """

    def __init__(
        self,
        links: Sequence[LinkConfig],
        state_dir: Path,
        *,
        admin_host: str = "127.0.0.1",
        admin_port: int = 0,
        admin_token_file: Path | None = None,
        member_id: str | None = None,
        zk_session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
        fetch_max_wait_ms: int = 500,
        request_timeout_s: float = 10.0,
    ) -> None:
        """Nothing starts until ``run``. Raises MirrorError naming a bad member id or duplicate link."""
        names = [link.name for link in links]
        if len(set(names)) != len(names):
            raise MirrorError(f"links {names}: a link name appears more than once")
        self.configs = list(links)
        self.state_dir = state_dir.absolute()
        self.admin_host = admin_host
        self.admin_port = admin_port
        self.admin_token_file = admin_token_file
        self.member_id = check_member_id(member_id) if member_id is not None else None
        self.zk_session_timeout_s = zk_session_timeout_s
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.request_timeout_s = request_timeout_s
        self._state: dict[str, dict[str, bool]] = {}
        self._stored_member_id: str | None = None
        self._links: dict[str, _Link] = {}
        self._deleted: set[str] = set()
        self._state_lock = trio.Lock()
        self._lock_file: IO[str] | None = None
        self._started = False

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    # -- running ------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[ServiceReady] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_status.started(ServiceReady)`` once the admin API listens.

        Raises MirrorError (state dir in use or unreadable, token file unreadable) and OSError
        (admin address cannot be bound) before reporting started. Link failures are not raised:
        a link whose runner refuses to run shows state ``failed`` with its ``error``. Cancellation
        stops every link (copiers, ZooKeeper sessions) and the admin API within a few seconds.
        """
        if self._started:
            raise MirrorError("this MirrorService was run before; make a new one")
        self._started = True
        try:
            token, token_file = await trio.to_thread.run_sync(self._prepare)
            async with trio.open_nursery() as nursery:
                app = create_app(self, token)
                port = await nursery.start(serve_admin, app, self.admin_host, self.admin_port)
                host = f"[{self.admin_host}]" if ":" in self.admin_host else self.admin_host
                url = f"http://{host}:{port}"
                member_id = self.member_id or self._stored_member_id or ""
                for config in self.configs:
                    if self._state.get(config.name, {}).get("deleted"):
                        self._deleted.add(config.name)
                        log.info("link %s: deleted through the admin API earlier; not running it", config.name)
                        continue
                    link = self._build(config, member_id, url)
                    self._links[config.name] = link
                    nursery.start_soon(self._run_link, link, name=f"link {config.name}")
                ready = ServiceReady(url, token_file, member_id, os.getpid())
                log.info(
                    "mirror %s: %d link(s) running, %d deleted; admin API at %s",
                    member_id,
                    len(self._links),
                    len(self._deleted),
                    url,
                )
                task_status.started(ready)
        finally:
            if self._lock_file is not None:
                self._lock_file.close()  # releases the flock
                self._lock_file = None

    def _build(self, config: LinkConfig, member_id: str, admin_url: str) -> _Link:
        membership: ZkMembership | None = None
        if config.target.zookeeper is not None:
            membership = ZkMembership(
                config.target.zookeeper,
                config.name,
                member_id,
                session_timeout_s=self.zk_session_timeout_s,
                info={"admin": admin_url},
            )
        runner = LinkRunner(
            config,
            fetch_max_wait_ms=self.fetch_max_wait_ms,
            request_timeout_s=self.request_timeout_s,
            membership=membership if membership is not None else SoleMember(),
        )
        if self._state.get(config.name, {}).get("paused"):
            runner.pause()
            log.info("link %s: paused through the admin API earlier; starting paused", config.name)
        return _Link(config, runner, membership)

    async def _run_link(self, link: _Link) -> None:
        try:
            with link.scope:
                async with trio.open_nursery() as nursery:
                    if link.membership is not None:
                        nursery.start_soon(link.membership.run)
                    try:
                        await link.runner.run()
                    except MirrorError as exc:
                        link.error = str(exc)
                        log.error("link %s cannot run: %s", link.config.name, exc)
                    nursery.cancel_scope.cancel()
        finally:
            link.stopped.set()

    # -- the state dir ------------------------------------------------------------------------------

    def _prepare(self) -> tuple[str, Path]:
        """Worker thread: lock the state dir, load and prune the state, get the member id and token."""
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise MirrorError(f"cannot create the state dir {self.state_dir}: {exc.strerror or exc}") from None
        self._lock()
        self._load_state()
        configured = {c.name for c in self.configs}
        for name in sorted(set(self._state) - configured):
            log.info("link %s: no longer in the link file; forgetting its saved state %s", name, self._state[name])
            del self._state[name]
        if self.member_id is None and self._stored_member_id is None:
            host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:100] or "mirror"
            self._stored_member_id = f"{host}-{secrets.token_hex(3)}"
        self._save_state(self._state)
        if self.admin_token_file is not None:
            return self._read_token(self.admin_token_file), self.admin_token_file
        token = secrets.token_urlsafe(32)
        path = self.state_dir / TOKEN_FILE
        atomic_write(path, token + "\n", mode=0o600)  # readable by its owner only
        return token, path

    def _lock(self) -> None:
        path = self.state_dir / LOCK_FILE
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise MirrorError(
                f"state dir {self.state_dir} is in use by another mirror process (pid {holder}); "
                "give each process its own --state-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock_file = handle

    def _load_state(self) -> None:
        path = self.state_file
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise MirrorError(f"{path}: cannot read the mirror's state: {exc}") from None
        links = data.get("links") if isinstance(data, dict) else None
        if not isinstance(links, dict) or data.get("version") != STATE_VERSION:
            raise MirrorError(f"{path}: not a version {STATE_VERSION} mirror state file")
        for name, entry in links.items():
            if not isinstance(entry, dict) or not all(isinstance(v, bool) for v in entry.values()):
                raise MirrorError(f"{path}: links.{name}: expected {{'paused': bool}} or {{'deleted': bool}}")
            self._state[str(name)] = {k: v for k, v in entry.items() if k in ("paused", "deleted") and v}
        member_id = data.get("member_id")
        if isinstance(member_id, str):
            self._stored_member_id = check_member_id(member_id)

    def _save_state(self, state: dict[str, dict[str, bool]]) -> None:
        """Worker thread: write ``state`` atomically (a crash leaves the old or the new file)."""
        body: dict[str, Any] = {
            "version": STATE_VERSION,
            "member_id": self._stored_member_id,
            "links": {name: entry for name, entry in sorted(state.items()) if entry},
            "updated_ms": int(time.time() * 1000),
        }
        try:
            atomic_write(self.state_file, json.dumps(body, indent=2) + "\n")
        except OSError as exc:
            raise MirrorError(f"cannot save the mirror's state to {self.state_file}: {exc.strerror or exc}") from None

    @staticmethod
    def _read_token(path: Path) -> str:
        try:
            token = path.read_text().strip()
            mode = path.stat().st_mode
        except OSError as exc:
            raise MirrorError(f"cannot read the admin token file {path}: {exc.strerror or exc}") from None
        check_token(token, str(path))
        if mode & 0o077:
            log.warning(
                "the admin token file %s is readable by other users (mode %o); chmod 600 it", path, mode & 0o777
            )
        return token

    async def _persist(self, name: str, **flags: bool) -> None:
        """Write the link's new flags, then keep them (nothing changes when the write fails)."""
        state = {k: dict(v) for k, v in self._state.items()}
        entry = state.setdefault(name, {})
        for key, value in flags.items():
            if value:
                entry[key] = True
            else:
                entry.pop(key, None)
        await trio.to_thread.run_sync(self._save_state, state)
        self._state = state

    # -- what the admin API calls (MirrorAdminView) -------------------------------------------------

    def _link(self, name: str) -> _Link:
        link = self._links.get(name)
        if link is not None and name not in self._deleted:
            return link
        if name in self._deleted:
            raise UnknownLink(
                name,
                f"link {name!r} was deleted (kept stopped in {self.state_file}); remove it from the link file and "
                "restart to forget the deletion",
            )
        known = ", ".join(sorted(self._links.keys() - self._deleted)) or "none"
        raise UnknownLink(name, f"no link named {name!r} runs in this mirror (links: {known})")

    def _status(self, link: _Link) -> dict[str, Any]:
        status = link.runner.status()
        if link.membership is not None:
            membership = link.membership.status()
        else:
            membership = {"kind": "sole", "member_id": self.member_id or self._stored_member_id, "leader": True}
        out: dict[str, Any] = {"name": link.config.name, **status}
        out["paused"] = link.runner.paused
        out["error"] = link.error
        out["membership"] = membership
        if link.error is not None:
            out["state"] = "failed"
        return out

    def health(self) -> dict[str, Any]:
        states = {name: self._status(link)["state"] for name, link in self._links.items() if name not in self._deleted}
        status = "ok"
        if any(s == "starting" for s in states.values()):
            status = "starting"
        if any(s == "failed" for s in states.values()):
            status = "degraded"
        return {"status": status, "member_id": self.member_id or self._stored_member_id, "links": states}

    def statuses(self) -> list[dict[str, Any]]:
        return [self._status(link) for name, link in sorted(self._links.items()) if name not in self._deleted]

    def links(self) -> dict[str, Any]:
        return {
            "links": self.statuses(),
            "deleted": sorted(self._deleted),
            "member_id": self.member_id or self._stored_member_id,
        }

    def link(self, name: str) -> dict[str, Any]:
        return self._status(self._link(name))

    async def pause(self, name: str) -> dict[str, Any]:
        async with self._state_lock:
            link = self._link(name)
            await self._persist(name, paused=True)
            link.runner.pause()
        return {"name": name, "state": self._status(link)["state"], "paused": True}

    async def resume(self, name: str) -> dict[str, Any]:
        async with self._state_lock:
            link = self._link(name)
            await self._persist(name, paused=False)
            link.runner.resume()
        return {"name": name, "state": self._status(link)["state"], "paused": False}

    async def delete(self, name: str) -> dict[str, Any]:
        async with self._state_lock:
            link = self._link(name)
            await self._persist(name, deleted=True, paused=False)
            self._deleted.add(name)
            link.scope.cancel()
        log.info("link %s: deleted through the admin API; stopping it", name)
        with trio.move_on_after(DELETE_WAIT_S):
            await link.stopped.wait()
        return {"name": name, "state": "deleted", "stopped": link.stopped.is_set()}
