"""The local two-site appliance (``strait up``): sites ``east`` and ``west`` and a mirror east -> west.

Layout of the appliance directory (reused on the next start: the sites come back with their
data, the mirror with its paused/deleted links and admin token)::

    DIR/east/, DIR/west/      one LocalSite each (see strait/_site.py)
    DIR/mirror/links.toml     the link east-to-west, rewritten at every start with the sites' addresses
    DIR/mirror/               the mirror process's state dir: state.json, admin.token, mirror.log, ready.json
    DIR/appliance.json        every address and each site's state ("up" or "lost"), written once
                              everything is ready and again when a site is lost or back; removed on stop
    DIR/control/              requests to the running ``strait up`` (see strait/_control.py)
    DIR/secrets/              a secured appliance's CA, keystores, passwords and ZooKeeper digests
                              (``strait up --secure``; see strait/_appliance_security.py)
    DIR/client.properties     a secured appliance's client settings (user app, librdkafka's keys)
    DIR/admin.properties      and its admin's (Java client keys), both written once ready

The mirror is a ``strait mirror start`` process in its own session, stopped with SIGTERM after
the sites' clients are done and before the sites stop (so it never sees its sites vanish).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from node.proc import Child, Deadline, NotReady, atomic_write, http_ok, log_tail, read_ready_file, wait_until

from ._control import Inbox, Request
from ._processes import spawn_cli, stop_child
from ._site import LocalSite, NothingToRevive, SiteError, SiteInterrupted

if TYPE_CHECKING:
    from ._appliance_security import ApplianceSecurity

APPLIANCE_FILE = "appliance.json"
LINK_NAME = "east-to-west"
MIRROR_READY_TIMEOUT_S = 60.0
MIRROR_STOP_TIMEOUT_S = 30.0
_HEALTH_TIMEOUT_S = 2.0


class LocalMirror:
    """One ``strait mirror start`` process running the link ``source`` -> ``target``."""

    def __init__(
        self, directory: Path, source: LocalSite, target: LocalSite, security: ApplianceSecurity | None = None
    ) -> None:
        """``security``: the link authenticates to both sites (TLS, SASL) and to the target's ZooKeeper."""
        self.directory = directory.absolute()
        self.source = source
        self.target = target
        self.security = security
        self.name = "mirror"
        self.admin_url = ""
        self.child: Child | None = None
        self._exit_reported = False

    @property
    def links_path(self) -> Path:
        return self.directory / "links.toml"

    @property
    def ready_path(self) -> Path:
        return self.directory / "ready.json"

    @property
    def log_path(self) -> Path:
        return self.directory / "mirror.log"

    @property
    def token_path(self) -> Path:
        return self.directory / "admin.token"

    def links_toml(self) -> str:
        """Every non-internal topic and every group of the source, offset-preserving; several
        mirror processes could share the link through the target's ZooKeeper. Secured: TLS and
        SASL to both sites as the user ``mirror``, and the target's ZooKeeper digest."""
        security = self.security
        source_options = "" if security is None else security.link_site_options(self.source.name)
        target_options = "" if security is None else security.link_site_options(self.target.name)
        # Secured: the link also copies the SCRAM users from east's ZooKeeper to west's.
        source_zookeeper = "" if security is None else f', zookeeper = "{self.source.zookeeper_connect}"'
        return (
            "# Written by `strait up` at every start from the sites' addresses.\n"
            "[[link]]\n"
            f'name = "{LINK_NAME}"\n'
            'mode = "offset-preserving"\n'
            + ("" if security is None else "sync_users = true\n")
            + f'source = {{ name = "{self.source.name}", bootstrap = "{self.source.bootstrap}"'
            f"{source_zookeeper}{source_options} }}\n"
            f'target = {{ name = "{self.target.name}", bootstrap = "{self.target.bootstrap}", '
            f'zookeeper = "{self.target.zookeeper_connect}"{target_options} }}\n'
            'topics = { include = [".*"] }\n'
            'groups = { include = [".*"] }\n'
        )

    def start(self, stop_requested: Callable[[], bool] = lambda: False) -> list[str]:
        """Write the link file, start the process and wait until its admin API answers /health."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.links_path, self.links_toml())
            self.ready_path.unlink(missing_ok=True)
            self.admin_url = ""
            self._exit_reported = False
            self.child = spawn_cli(
                [
                    "mirror",
                    "start",
                    "--config",
                    str(self.links_path),
                    "--admin",
                    "127.0.0.1:0",
                    "--state-dir",
                    str(self.directory),
                    "--ready-file",
                    str(self.ready_path),
                ],
                self.log_path,
                name="mirror",
            )
            self._wait_ready(stop_requested)
        except OSError as exc:
            self.stop()
            raise SiteError(f"mirror: {exc}") from None
        except BaseException:
            self.stop()
            raise
        return []

    def _wait_ready(self, stop_requested: Callable[[], bool]) -> None:
        child = self.child
        assert child is not None

        def serving() -> bool:
            if stop_requested():
                raise SiteInterrupted("mirror: stop requested while starting")
            code = child.poll()
            if code is not None:
                raise SiteError(
                    f"mirror: exited with code {code} while starting; {self.log_path} ends with:\n{self.log_tail()}"
                )
            info = None if self.admin_url else read_ready_file(self.ready_path)
            if info is not None:
                self.admin_url = str(info["admin"])
            return bool(self.admin_url) and http_ok(f"{self.admin_url}/health", _HEALTH_TIMEOUT_S)

        try:
            wait_until(serving, Deadline(MIRROR_READY_TIMEOUT_S, "the mirror to be ready"))
        except NotReady:
            raise SiteError(
                f"mirror: not ready within {MIRROR_READY_TIMEOUT_S:g} s; {self.log_path} ends with:\n{self.log_tail()}"
            ) from None

    def poll(self) -> list[str]:
        code = None if self.child is None or self._exit_reported else self.child.poll()
        if code is not None:
            self._exit_reported = True
            return [f"mirror: exited on its own with code {code}; see {self.log_path}"]
        return []

    def stop(self, hurry: Callable[[], bool] = lambda: False) -> list[str]:
        """Stop the mirror process (see :func:`~strait._processes.stop_child`); an exit :meth:`poll`
        reported already is not reported again."""
        child, self.child = self.child, None
        if child is None:
            return []
        reported = self._exit_reported and child.poll() is not None
        problem = stop_child(child, "mirror", MIRROR_STOP_TIMEOUT_S, hurry)
        return [] if problem is None or reported else [problem]

    def log_tail(self) -> str:
        """The end of this run's output (of the whole log before the mirror was started)."""
        return self.child.log_tail() if self.child is not None else log_tail(self.log_path)

    def announce(self) -> str:
        return "\n".join(
            [
                f"mirror: link {LINK_NAME} ({self.source.name} -> {self.target.name}, every topic and group)",
                f"  admin API  {self.admin_url}  (token for pause/resume/delete: {self.token_path})",
                f"  status     strait mirror status --admin {self.admin_url}",
                f"  log        {self.log_path}",
            ]
        )


class Appliance:
    """east, west and the mirror between them, under one directory.

    A site that is lost (its ZooKeeper or every node exited) is reported once and the rest keep
    running; ``strait site revive NAME --dir DIR`` asks (through :mod:`strait._control`) for it
    to be started again, which :meth:`tick` carries out from ``strait up``'s main loop so that
    the restarted processes are ``strait up``'s children like the others.
    """

    def __init__(
        self,
        directory: Path,
        *,
        nodes: int = 3,
        base_port: int = 0,
        properties: Mapping[str, str] | None = None,
        security: ApplianceSecurity | None = None,
    ) -> None:
        """``properties`` go into every node's ``server.properties`` on both sites (``strait up --set``);
        ``security`` secures the sites and the link (``strait up --secure``).

        Raises:
            ValueError: a property the sites refuse (see :class:`LocalSite`).
        """
        self.directory = directory.absolute()
        self.security = security
        west_base = base_port + 100 if base_port else 0

        def site(name: str, other: str, base: int) -> LocalSite:
            advice = (
                f"strait up keeps site {other} and the mirror running; bring it back with: {self.revive_command(name)}"
            )
            return LocalSite(
                self.directory / name,
                name=name,
                nodes=nodes,
                base_port=base,
                properties=properties,
                loss_advice=advice,
                security=None if security is None else security.site(name),
            )

        self.east = site("east", "west", base_port)
        self.west = site("west", "east", west_base)
        self.mirror = LocalMirror(self.directory / "mirror", self.east, self.west, security)
        self.inbox = Inbox(self.directory)
        self._written: dict[str, str] = {}  # each site's state as appliance.json last said it

    @property
    def sites(self) -> dict[str, LocalSite]:
        return {"east": self.east, "west": self.west}

    @property
    def appliance_file(self) -> Path:
        return self.directory / APPLIANCE_FILE

    def revive_command(self, site: str) -> str:
        return f"strait site revive {site} --dir {self.directory}"

    def describe(self) -> dict[str, object]:
        """What ``appliance.json`` holds. A lost site keeps its addresses: it comes back on them."""

        def site(s: LocalSite) -> dict[str, object]:
            described: dict[str, object] = {
                "state": s.state,
                "bootstrap": s.bootstrap,
                "zookeeper": s.zookeeper,
                "zookeeper_chroot": f"/{s.name}",
                "admin": [node.admin_url for node in s.nodes],
            }
            if self.security is not None:  # how strait failover reaches it: TLS, the admin user, the digest
                described |= self.security.operator_access(s.name)
            return described

        described: dict[str, object] = {
            "sites": {name: site(s) for name, s in self.sites.items()},
            "links": [
                {"name": LINK_NAME, "source": "east", "target": "west", "admin": self.mirror.admin_url},
            ],
        }
        if self.security is not None:
            described["security"] = self.security.describe(self.directory)
        return described

    def ready(self, echo: Callable[..., None]) -> None:
        """Everything is up: write appliance.json, take requests, and say it in words.

        Raises:
            SiteError: the directory cannot be written.
        """
        from ._secure_material import MaterialError

        bootstraps = {name: s.bootstrap for name, s in self.sites.items()}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.security is not None:  # before appliance.json: whoever waits for it finds them
                self.security.write_properties(self.directory, bootstraps)
            self._write()
            self.inbox.open()
        except OSError as exc:
            raise SiteError(f"appliance: cannot use {self.directory}: {exc}") from None
        except MaterialError as exc:
            raise SiteError(f"appliance: {exc}") from None
        lines = [
            "",
            "strait is up: two sites and a mirror."
            if self.security is None
            else "strait is up, secured: two sites and a mirror.",
            f"  east  bootstrap {self.east.bootstrap}",
            f"  west  bootstrap {self.west.bootstrap}",
            f"  every topic produced on east appears on west at the same offsets; committed group "
            f"offsets follow every 5 s (admin {self.mirror.admin_url})",
        ]
        if self.security is not None:
            lines.append(self.security.announce(self.directory, bootstraps))
        lines.append(f"  written to {self.appliance_file}")
        echo("\n".join(lines))

    def tick(self, stop_requested: Callable[[], bool], echo: Callable[..., None]) -> None:
        """From ``strait up``'s loop: carry out the requests waiting, and rewrite appliance.json
        when a site's state changed. Blocks while a site is being revived.

        Raises:
            SiteInterrupted: a stop was requested during a revive.
        """
        for request in self.inbox.take():
            self._carry_out(request, stop_requested, echo)
        if {name: s.state for name, s in self.sites.items()} != self._written:
            try:
                self._write()
            except OSError as exc:
                echo(f"warning: appliance: cannot write {self.appliance_file}: {exc}", err=True)

    def _carry_out(self, request: Request, stop_requested: Callable[[], bool], echo: Callable[..., None]) -> None:
        def answer(state: str, message: str) -> None:
            try:
                self.inbox.answer(request.id, state, message)
            except OSError as exc:  # the asker times out; strait up carries on
                echo(f"warning: appliance: cannot answer a request in {self.inbox.directory}: {exc}", err=True)

        site = self.sites.get(request.site)
        if request.action != "revive":
            answer("refused", f"unknown request {request.action!r}; strait up takes: revive")
            return
        if site is None:
            known = ", ".join(self.sites)
            answer("refused", f"unknown site {request.site!r}; this appliance's sites are {known}")
            return

        def begin(what: str) -> None:
            echo(what)
            answer("working", what)

        try:
            warnings = site.revive(stop_requested, begin)
        except NothingToRevive as exc:
            answer("refused", str(exc))
            return
        except SiteInterrupted:
            answer("failed", f"strait up is stopping; site {site.name} was not brought back")
            raise
        except SiteError as exc:
            echo(f"error: {exc}", err=True)
            answer("failed", f"{exc}\nsite {site.name} is still lost; see the output of strait up")
            return
        echo(site.announce())
        for warning in warnings:
            echo(f"warning: {warning}", err=True)
        try:
            self._write()
        except OSError as exc:
            echo(f"warning: appliance: cannot write {self.appliance_file}: {exc}", err=True)
        answer("done", f"site {site.name} is back on its data: bootstrap {site.bootstrap}, ZooKeeper {site.zookeeper}")
        echo(f"site {site.name} is back, on the same addresses")

    def _write(self) -> None:
        described = self.describe()
        atomic_write(self.appliance_file, json.dumps(described, indent=2) + "\n")
        self._written = {name: s.state for name, s in self.sites.items()}

    def removed(self) -> None:
        """Stopping: take no more requests and remove appliance.json."""
        self.inbox.close()
        self.appliance_file.unlink(missing_ok=True)
