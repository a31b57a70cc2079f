"""The mirror process: the links of a link file, run together in one trio run, with an admin API.

:class:`MirrorService` runs one ``LinkRunner`` per link of the file (and per link added at
runtime), serves the admin API (``mirror._admin``) and keeps what operators changed through it
in a state dir::

    <state-dir>/state.json     paused, deleted and failed-over links, links added at runtime and
                               the member id (``mirror._state`` gives the format)
    <state-dir>/admin.token    the admin token generated at start (mode 0600), unless
                               --admin-token-file names one
    <state-dir>/mirror.lock    held (flock) while the process runs: one process per state dir

Every change is written to ``state.json`` (atomically) before it takes effect, so a restarted
process keeps it:

- a **paused** link runs its topic sync but copies nothing until resumed;
- a **deleted** link is stopped and stays stopped while the link file still names it; the
  target's mirror topics and their data are left as they are. Removing the link from the file
  (and restarting) forgets the deletion; adding it back later starts it afresh;
- a **failed-over** link copies and syncs nothing until restored; its fencer (``auto_fence``)
  runs again after a restart, and its cut, once measured, is answered again as it was;
- a link **added at runtime** (``PUT``) runs again after a restart; deleting it forgets it.

State entries of links neither the file nor the runtime links name are dropped at start, and a
runtime link the file now names gives way to the file's. The state is this process's: with
several processes sharing a link (scale-out), send every change to each.

The DR page (``GET /dr``, ``GET /v1/dr``) shows what the ``dr_status`` source the process was
given computes (``mirror._dr``; ``strait mirror start`` gives ``failover.status``'s), and a lag
chart from the samples the process takes of every link (``mirror._lag_history``).

Links whose target names a ``zookeeper`` share their partitions with the other processes
running the same link (``mirror._members.ZkMembership``, keyed by ``--member-id``); the others
are run by this process alone (``SoleMember``).
"""

from __future__ import annotations

import fcntl
import functools
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

from node.adminkit import AdminTls, serve_admin
from node.proc import atomic_write

from ._admin import LinkConflict, LinkNotRunning, UnknownLink, check_token, create_app
from ._config import ConfigError, LinkConfig, MirrorError, parse_link
from ._dr import DrStatuses, DrStatusSource, DrUnavailable
from ._failover import CutUnavailable, FailoverRecord
from ._fencer import default_fence_text
from ._lag_history import DEFAULT_CAPACITY, DEFAULT_INTERVAL_S, LagHistories
from ._link import FAILED_OVER, LinkRunner, SoleMember
from ._members import DEFAULT_SESSION_TIMEOUT_S, ZkMembership, check_member_id
from ._security_sync import FileLedger
from ._state import MirrorState, load_state, save_state

log = logging.getLogger("strait.mirror.service")

STATE_FILE = "state.json"
TOKEN_FILE = "admin.token"
LOCK_FILE = "mirror.lock"
DELETE_WAIT_S = 10.0  # DELETE answers once the link stopped, or after this long
FAILOVER_STOP_S = 10.0  # a failover waits this long for its copiers to stop between appends
CUT_TIMEOUT_S = 30.0  # and this long for the target to tell where its mirror partitions end


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
    runtime: bool = False  # added through the admin API (PUT), not by the link file
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    stopped: trio.Event = field(default_factory=trio.Event)
    error: str | None = None  # why the runner refused to run (state "failed")


class MirrorService:
    """Runs ``links`` with an admin API on ``admin_host:admin_port`` (port 0: any free port).

    ``state_dir`` is created if missing. ``admin_token_file`` names a file holding the admin
    token; without it a random token is generated at every start and written to
    ``<state_dir>/admin.token`` (mode 0600). ``member_id`` names this process among those sharing
    a link through ZooKeeper; by default an id generated once and kept in ``state.json``.
    ``dr_status`` computes a link's failover status for ``GET /v1/dr`` (None: 501 there); every
    ``lag_sample_interval_s`` the lag of every link is sampled, the last ``lag_history_points``
    samples of each kept.
    """

    def __init__(
        self,
        links: Sequence[LinkConfig],
        state_dir: Path,
        *,
        admin_host: str = "127.0.0.1",
        admin_port: int = 0,
        admin_token_file: Path | None = None,
        admin_tls: AdminTls | None = None,
        member_id: str | None = None,
        zk_session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
        fetch_max_wait_ms: int = 500,
        request_timeout_s: float = 10.0,
        dr_status: DrStatusSource | None = None,
        lag_sample_interval_s: float = DEFAULT_INTERVAL_S,
        lag_history_points: int = DEFAULT_CAPACITY,
    ) -> None:
        """Nothing starts until ``run``. Raises MirrorError naming a bad member id or duplicate link,
        ValueError for a lag sampling interval or history size that is not positive."""
        names = [link.name for link in links]
        if len(set(names)) != len(names):
            raise MirrorError(f"links {names}: a link name appears more than once")
        self.configs = list(links)
        self.state_dir = state_dir.absolute()
        self.admin_host = admin_host
        self.admin_port = admin_port
        self.admin_token_file = admin_token_file
        self.admin_tls = admin_tls
        self.member_id = check_member_id(member_id) if member_id is not None else None
        self.zk_session_timeout_s = zk_session_timeout_s
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.request_timeout_s = request_timeout_s
        self._state = MirrorState()
        self._links: dict[str, _Link] = {}
        self._deleted: set[str] = set()
        self._state_lock = trio.Lock()
        self._lock_file: IO[str] | None = None
        self._started = False
        self._nursery: trio.Nursery | None = None  # runs the links, once run() started them
        self._admin_url = ""
        self._token_file: Path | None = None
        self._lag = LagHistories(interval_s=lag_sample_interval_s, capacity=lag_history_points)
        self._dr = None if dr_status is None else DrStatuses(dr_status)

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    @property
    def admin_url(self) -> str:
        """``http://host:port`` of the admin API once ``run`` reported started; "" before."""
        return self._admin_url

    @property
    def token_file(self) -> Path | None:
        """The file holding the admin token once ``run`` reported started; None before."""
        return self._token_file

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
            self._token_file = token_file
            async with trio.open_nursery() as nursery:
                app = create_app(self, token)
                port = await nursery.start(
                    functools.partial(serve_admin, tls=self.admin_tls), app, self.admin_host, self.admin_port
                )
                host = f"[{self.admin_host}]" if ":" in self.admin_host else self.admin_host
                scheme = "http" if self.admin_tls is None else "https"
                url = self._admin_url = f"{scheme}://{host}:{port}"
                self._nursery = nursery
                for config in self.configs:
                    if self._state.link(config.name).deleted:
                        self._deleted.add(config.name)
                        log.info("link %s: deleted through the admin API earlier; not running it", config.name)
                        continue
                    self._start(self._build(config))
                for config in self._state.runtime_links.values():
                    self._start(self._build(config, runtime=True))
                nursery.start_soon(self._sample_lag, name="lag history")
                member_id = self._member_id()
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
            self._nursery = None
            if self._lock_file is not None:
                self._lock_file.close()  # releases the flock
                self._lock_file = None

    def _member_id(self) -> str:
        return self.member_id or self._state.member_id or ""

    def _start(self, link: _Link) -> None:
        assert self._nursery is not None
        self._links[link.config.name] = link
        self._nursery.start_soon(self._run_link, link, name=f"link {link.config.name}")

    def _build(self, config: LinkConfig, *, runtime: bool = False) -> _Link:
        membership: ZkMembership | None = None
        if config.target.zookeeper is not None:
            membership = ZkMembership(
                config.target.zookeeper,
                config.name,
                self._member_id(),
                session_timeout_s=self.zk_session_timeout_s,
                info={"admin": self._admin_url},
                digest=config.target.zookeeper_digest(),
            )
        runner = LinkRunner(
            config,
            fetch_max_wait_ms=self.fetch_max_wait_ms,
            request_timeout_s=self.request_timeout_s,
            membership=membership if membership is not None else SoleMember(),
            security_ledger=None
            if config.target.zookeeper is not None
            else FileLedger(self.state_dir / f"security-{config.name}.json"),
        )
        saved = self._state.link(config.name)
        if saved.paused:
            runner.pause()
            log.info("link %s: paused through the admin API earlier; starting paused", config.name)
        if saved.failed_over is not None:
            runner.start_failed_over(saved.failed_over)
            log.warning(
                "link %s: failed over through the admin API earlier; starting failed over (nothing is copied "
                "until a restore%s)",
                config.name,
                "; the fencer runs" if saved.failed_over.auto_fence else "",
            )
        return _Link(config, runner, membership, runtime)

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

    async def _sample_lag(self) -> None:
        """Sample every running link's lag for the DR page's chart, until cancelled."""
        while True:
            self._lag.sample(self.statuses(), int(time.time() * 1000))
            await trio.sleep(self._lag.interval_s)

    # -- the state dir ------------------------------------------------------------------------------

    def _prepare(self) -> tuple[str, Path]:
        """Worker thread: lock the state dir, load and prune the state, get the member id and token."""
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise MirrorError(f"cannot create the state dir {self.state_dir}: {exc.strerror or exc}") from None
        self._lock()
        state = load_state(self.state_file)
        in_file = {c.name for c in self.configs}
        for name in sorted(set(state.runtime_links) & in_file):
            log.warning("link %s: now in the link file; forgetting the definition added through the admin API", name)
            del state.runtime_links[name]
        configured = in_file | set(state.runtime_links)
        for name in sorted(set(state.links) - configured):
            log.info("link %s: no longer in the link file; forgetting its saved state %s", name, state.links[name])
            del state.links[name]
        if self.member_id is None and state.member_id is None:
            host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:100] or "mirror"
            state.member_id = f"{host}-{secrets.token_hex(3)}"
        save_state(self.state_file, state)
        self._state = state
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

    async def _persist(self, name: str, **changes: Any) -> None:
        """Write the link's changed state (``LinkState`` fields), then keep it (nothing changes
        when the write fails: MirrorError)."""
        await self._save(self._state.changed(name, **changes))

    async def _save(self, state: MirrorState) -> None:
        await trio.to_thread.run_sync(save_state, self.state_file, state)
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
            membership = {"kind": "sole", "member_id": self.member_id or self._state.member_id, "leader": True}
        out: dict[str, Any] = {"name": link.config.name, **status}
        out["paused"] = link.runner.paused
        out["runtime"] = link.runtime
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
        return {"status": status, "member_id": self.member_id or self._state.member_id, "links": states}

    def statuses(self) -> list[dict[str, Any]]:
        return [self._status(link) for name, link in sorted(self._links.items()) if name not in self._deleted]

    def links(self) -> dict[str, Any]:
        return {
            "links": self.statuses(),
            "deleted": sorted(self._deleted),
            "member_id": self.member_id or self._state.member_id,
        }

    def link(self, name: str) -> dict[str, Any]:
        return self._status(self._link(name))

    def link_config(self, name: str) -> LinkConfig:
        """The configuration of running link ``name``; raises UnknownLink."""
        return self._link(name).config

    def lag_history(self, name: str) -> dict[str, Any]:
        self._link(name)  # UnknownLink for a link not running here
        return self._lag.to_json(name)

    async def dr_status(self) -> dict[str, Any]:
        """The failover status of every running link, from the DR status source (computed
        concurrently, each at most once per ``mirror._dr.DEFAULT_MAX_AGE_S``); raises DrUnavailable."""
        dr = self._dr
        if dr is None:
            raise DrUnavailable(
                "this mirror process has no DR status source (MirrorService was made without dr_status; "
                "`strait mirror start` gives it one): use `strait failover status` instead"
            )
        names = [name for name in sorted(self._links) if name not in self._deleted]
        answers: dict[str, dict[str, Any]] = {}

        async def one(name: str) -> None:
            answer = answers[name] = await dr.of(name)
            rpo, rows = answer.get("rpo"), answer.get("partitions")
            if isinstance(rpo, dict) and isinstance(rpo.get("records"), int) and isinstance(rows, list):
                lag = sum(row.get("lag_records") or 0 for row in rows)
                self._lag.note_measured(name, int(answer.get("at_ms") or 0), lag, rpo["records"])

        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(one, name)
        return {"links": [answers[name] for name in names], "member_id": self._member_id()}

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
            if link.runtime:
                state = self._state.changed(name, paused=False, deleted=False, failed_over=None)
                del state.runtime_links[name]
                await self._save(state)
                del self._links[name]
                self._lag.forget(name)
                if self._dr is not None:
                    self._dr.forget(name)
            else:
                await self._persist(name, deleted=True, paused=False)
                self._deleted.add(name)
            link.scope.cancel()
        log.info(
            "link %s: deleted through the admin API%s; stopping it", name, " and forgotten" if link.runtime else ""
        )
        with trio.move_on_after(DELETE_WAIT_S):
            await link.stopped.wait()
        out = {"name": name, "state": "deleted", "stopped": link.stopped.is_set()}
        if link.runtime:
            out["forgotten"] = True
        return out

    async def failover(self, name: str, fence: str | None, auto_fence: bool) -> dict[str, Any]:
        """Fail the link over (persisted first): stop everything, measure and keep the cut, fence
        when ``auto_fence`` (``fence`` None: the text given before, or a generated one).

        Idempotent: a repeated call answers the same cut and takes the new fence settings.
        Raises UnknownLink, and CutUnavailable when the target cannot tell where its mirror
        partitions end (the link stays failed over: call again).
        """
        async with self._state_lock:
            link = self._link(name)
            runner = link.runner
            before = runner.failed_over
            now_ms = int(time.time() * 1000)
            text = fence or (before.fence if before is not None else default_fence_text(link.config, now_ms))
            record = FailoverRecord(
                text,
                auto_fence,
                before.at_ms if before is not None else now_ms,
                before.cut if before is not None else None,
            )
            if record != before:
                await self._persist(name, failed_over=record)
            stopped = await runner.fail_over(record, stop_timeout_s=FAILOVER_STOP_S)
            if record.cut is None:
                with trio.move_on_after(CUT_TIMEOUT_S):
                    record = record.with_cut(await runner.measure_cut(timeout=self.request_timeout_s))
                if record.cut is None:
                    raise CutUnavailable(
                        f"link {name!r} is failed over, but the target did not tell where its mirror partitions "
                        f"end within {CUT_TIMEOUT_S:g} s; call failover again"
                    )
                await self._persist(name, failed_over=record)
                await runner.fail_over(record, stop_timeout_s=FAILOVER_STOP_S)  # now with the cut
        assert record.cut is not None
        log.warning("link %s: failed over; cut %s", name, [c.to_json() for c in record.cut])
        return {
            "name": name,
            "state": FAILED_OVER,
            "partitions": [c.to_json() for c in record.cut],
            "stopped": stopped,
        }

    async def restore(self, name: str) -> dict[str, Any]:
        """Undo a failover (persisted first); a link not failed over is left as it is."""
        async with self._state_lock:
            link = self._link(name)
            restored = link.runner.failed_over is not None
            if restored:
                await self._persist(name, failed_over=None)
                link.runner.restore()
        return {"name": name, "state": self._status(link)["state"], "restored": restored}

    async def sync_groups(self, name: str) -> dict[str, Any]:
        """One group offset sync pass of the link now; raises UnknownLink, LinkNotRunning."""
        link = self._link(name)
        try:
            result = await link.runner.sync_groups()
        except MirrorError as exc:
            raise LinkNotRunning(name, str(exc)) from None
        return {"name": name, **result}

    async def put_link(self, name: str, definition: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Add a link at runtime (persisted first) and start it; returns (created, answer).

        The same definition again changes nothing (created False). Raises ConfigError for a bad
        definition (the messages of a link file's), LinkConflict when the name is the link file's
        or a runtime link's with another definition.
        """
        origin = f"PUT /v1/links/{name}"
        given = definition.get("name", name)
        if given != name:
            raise ConfigError(f"{origin}: name: {given!r} in the body is not the path's {name!r}")
        config = parse_link({**definition, "name": name}, origin=origin)
        async with self._state_lock:
            if any(c.name == name for c in self.configs):
                raise LinkConflict(
                    name, f"link {name!r} is defined in the link file; change it there (and restart the mirror)"
                )
            existing = self._state.runtime_links.get(name)
            if existing is not None and existing.to_dict() == config.to_dict():
                return False, {"name": name, "state": self._status(self._links[name])["state"], "created": False}
            if existing is not None:
                raise LinkConflict(
                    name,
                    f"link {name!r} was added with another definition; DELETE /v1/links/{name} first to replace it",
                )
            state = self._state.changed(name, paused=False, deleted=False, failed_over=None)
            state.runtime_links[name] = config
            await self._save(state)
            link = self._build(config, runtime=True)
            self._start(link)
        log.info("link %s: added through the admin API: %s", name, config.to_dict())
        return True, {"name": name, "state": self._status(link)["state"], "created": True}
