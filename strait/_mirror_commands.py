"""``strait mirror start|list|status|pause|resume|delete``: the mirror process and its admin API.

``start`` runs a mirror process in the foreground (see docs/mirror-service.md); the other
commands talk to a running one over its admin API (``--admin URL``, env
``STRAIT_MIRROR_ADMIN``). pause, resume and delete change state and need the admin token
(``--token-file``, env ``STRAIT_MIRROR_TOKEN_FILE``; by default the process writes it to
``<state-dir>/admin.token``).

``start`` gives the process its DR status source (``_dr_status``): the numbers of its DR page
are computed by ``failover.status``, as ``strait failover status`` computes them.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import trio

if TYPE_CHECKING:
    from failover.topology import Topology
    from mirror import LinkConfig
    from mirror._admin import MirrorAdminClient
    from mirror._service import MirrorService
    from node.adminkit import AdminTls

log = logging.getLogger("strait.cli")

T = TypeVar("T")

_admin_url_option = click.option(
    "--admin",
    "admin_url",
    required=True,
    envvar="STRAIT_MIRROR_ADMIN",
    help="The mirror process's admin API, http://host:port or https://host:port (env STRAIT_MIRROR_ADMIN).",
)


def _remember_ca(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    ctx.meta["strait.mirror.admin_ca"] = value


_admin_ca_option = click.option(
    "--admin-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="STRAIT_MIRROR_ADMIN_CA",
    expose_value=False,
    callback=_remember_ca,
    help="PEM bundle the https admin API's certificate is checked against (env STRAIT_MIRROR_ADMIN_CA; "
    "default: the system's CAs).",
)


def admin_option(fn: Callable[..., None]) -> Callable[..., None]:
    """``--admin URL`` and ``--admin-ca FILE`` (read by ``_client``)."""
    return _admin_url_option(_admin_ca_option(fn))


token_option = click.option(
    "--token-file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="STRAIT_MIRROR_TOKEN_FILE",
    help="File holding the admin token: <state-dir>/admin.token, or the --admin-token-file the mirror was "
    "started with (env STRAIT_MIRROR_TOKEN_FILE).",
)


@click.group("mirror", help="Run the cross-site mirror and manage its links through its admin API.")
def mirror_group() -> None:
    pass


# -- start --------------------------------------------------------------------------------------------


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{value!r} is not HOST:PORT (port 0..65535; 0: any free port)", param_hint="--admin")
    return host, int(port)


@mirror_group.command("start")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The link file (TOML, [[link]] tables; see docs/mirror.md).",
)
@click.option(
    "--admin",
    "admin",
    default="127.0.0.1:0",
    show_default=True,
    help="HOST:PORT of the admin API (port 0: any free port; the ready file and the log say which).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".strait/mirror"),
    show_default=True,
    help="Where paused/deleted links, the member id and the generated admin token are kept.",
)
@click.option("--member-id", help="This process's id among those sharing a link (default: generated once, kept).")
@click.option(
    "--admin-token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File holding the admin token (default: a random token written to <state-dir>/admin.token, mode 0600).",
)
@click.option(
    "--admin-tls-keystore",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve the admin API over HTTPS with this PEM file: the private key and the certificate chain "
    "(a node's ssl.keystore.location works).",
)
@click.option(
    "--admin-tls-password-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File holding the password of an encrypted key in --admin-tls-keystore.",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Write {"admin": url, "pid": ..., "token_file": ..., "member_id": ...} here once the admin API serves.',
)
@click.option(
    "--zk-session-timeout-ms",
    type=click.IntRange(min=1000),
    default=10000,
    show_default=True,
    help="ZooKeeper session timeout for links shared through the target's ZooKeeper: how long a dead "
    "process keeps its partitions.",
)
def start(
    config_path: Path,
    admin: str,
    state_dir: Path,
    member_id: str | None,
    admin_token_file: Path | None,
    admin_tls_keystore: Path | None,
    admin_tls_password_file: Path | None,
    ready_file: Path | None,
    zk_session_timeout_ms: int,
) -> None:
    """Run the links of the link file until SIGTERM or SIGINT, then stop them cleanly."""
    from mirror import ConfigError, MirrorError, load_links
    from mirror._service import MirrorService

    host, port = _host_port(admin)
    admin_tls = _admin_tls(admin_tls_keystore, admin_tls_password_file)
    if admin_tls is None and not _loopback(host):
        log.warning("the admin API listens on %s without TLS: its token crosses the network in clear", host)
    try:
        links = load_links(config_path)
        service = MirrorService(
            links,
            state_dir,
            admin_host=host,
            admin_port=port,
            admin_token_file=admin_token_file,
            admin_tls=admin_tls,
            member_id=member_id,
            zk_session_timeout_s=zk_session_timeout_ms / 1000,
            dr_status=lambda name: _dr_status(service, name),
        )
    except (ConfigError, MirrorError) as exc:
        raise click.ClickException(str(exc)) from None
    if not links:
        click.echo(f"{config_path}: no [[link]] in the file; serving the admin API only", err=True)
    # `strait` restores SIGPIPE's default for pipelines into `head`; a server must not die when
    # a peer goes away mid-write.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    root = logging.getLogger()
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        with contextlib.suppress(KeyboardInterrupt):  # a Ctrl-C before the signal handlers are set
            trio.run(_serve, service, ready_file)
    except BaseExceptionGroup as group:
        leaf = _single_leaf(group)
        if isinstance(leaf, MirrorError | OSError):
            raise click.ClickException(f"mirror stopped: {leaf}") from None
        raise
    except (MirrorError, OSError) as exc:
        raise click.ClickException(f"mirror stopped: {exc}") from None
    finally:
        if ready_file is not None:
            with contextlib.suppress(OSError):
                ready_file.unlink()


def _admin_tls(keystore: Path | None, password_file: Path | None) -> AdminTls | None:
    """The admin API's TLS settings, the key and chain loaded once here so that a bad file is
    refused before anything starts (naming the option and the file, never the password)."""
    import ssl

    from node.adminkit import AdminTls

    if keystore is None:
        if password_file is not None:
            raise click.BadParameter("needs --admin-tls-keystore", param_hint="--admin-tls-password-file")
        return None
    password = None
    if password_file is not None:
        try:
            password = password_file.read_text().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(
                f"cannot read {str(password_file)!r}: {exc}", param_hint="--admin-tls-password-file"
            ) from None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(keystore), password=password)
    except (OSError, ssl.SSLError) as exc:
        raise click.BadParameter(
            f"{str(keystore)!r} holds no usable private key and certificate chain (PEM): {exc}",
            param_hint="--admin-tls-keystore",
        ) from None
    return AdminTls(str(keystore), password)


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _single_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _serve(service: MirrorService, ready_file: Path | None) -> None:
    from mirror._service import write_ready_file

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            ready = await nursery.start(service.run)
            if ready_file is not None:
                write_ready_file(ready_file, ready)
            click.echo(f"mirror {ready.member_id}: admin API at {ready.admin_url} (admin token in {ready.token_file})")
            click.echo(f"mirror {ready.member_id}: DR status page at {ready.admin_url}/dr")
            async for signum in signals:
                log.info("received %s: stopping the links", signal.Signals(signum).name)
                break
            nursery.cancel_scope.cancel()


async def _dr_status(service: MirrorService, name: str) -> dict[str, Any]:
    """``strait failover status --json`` of running link ``name``, for the mirror's DR page: the
    same ``failover.status.link_status``, over a topology made of the link's config (its two
    sites; the target's ZooKeeper, which holds the DR state; this process as the link's mirror)
    and with this process's own status of the link in place of a call to its admin API.

    Raises:
        UnknownLink: the link no longer runs here.
        MirrorError: the link's target names no ZooKeeper (no DR state to read), or a site is
            reached over TLS (failover's topology has no TLS yet).
    """
    from failover.status import link_status
    from mirror import MirrorError

    config = service.link_config(name)
    target_zk = config.target.zookeeper
    if target_zk is None:
        raise MirrorError(
            f"link {name!r}: the link file names no zookeeper for the target {config.target.name!r}, where the DR "
            f'state lives: add zookeeper = "host:port/chroot" to its target (or use `strait failover status`)'
        )
    if config.source.tls is not None or config.target.tls is not None:
        raise MirrorError(f"link {name!r}: its sites are reached over TLS, which the DR status does not speak yet")
    topology = _dr_topology(config, target_zk, service.admin_url, service.token_file)

    async def mirror_status() -> dict[str, Any]:
        return service.link(name)

    return await link_status(topology, name, mirror_status=mirror_status)


def _dr_topology(config: LinkConfig, target_zk: str, admin_url: str, token_file: Path | None) -> Topology:
    """The topology of one link: its two sites and this mirror process as its mirror."""
    from failover.topology import Link, Site, Topology

    source = Site(config.source.name, config.source.bootstrap, zookeeper="")  # status never reads it
    digest_file = config.target.zookeeper_digest_file
    target = Site(
        config.target.name,
        config.target.bootstrap,
        zookeeper=target_zk,
        zookeeper_digest_file=None if digest_file is None else Path(digest_file),
    )
    link = Link(config.name, source.name, target.name, mirror_admin=admin_url, token_file=token_file)
    return Topology(
        sites={source.name: source, target.name: target},
        links={link.name: link},
        origin=f"the mirror's link {config.name!r}",
    )


# -- talking to a running mirror --------------------------------------------------------------------


def _client(admin_url: str, token_file: Path | None = None) -> MirrorAdminClient:
    from mirror import MirrorError
    from mirror._admin import AdminApiError, MirrorAdminClient, check_token

    token = None
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read {str(token_file)!r}: {exc.strerror or exc}", param_hint="--token-file"
            ) from None
    try:
        if token is not None:
            check_token(token, str(token_file))  # names the file
        ca = click.get_current_context().meta.get("strait.mirror.admin_ca")
        return MirrorAdminClient(admin_url, token=token, ca=None if ca is None else str(ca))
    except AdminApiError as exc:
        raise click.BadParameter(str(exc), param_hint="--admin") from None
    except MirrorError as exc:
        raise click.BadParameter(str(exc), param_hint="--token-file") from None


def _call(fn: Callable[[], T], token_file: Path | None = None) -> T:
    from mirror._admin import AdminApiError

    try:
        return fn()
    except AdminApiError as exc:
        if exc.status == 401 and token_file is not None:
            raise click.ClickException(f"{exc} (token from {token_file})") from None
        raise click.ClickException(str(exc)) from None


@mirror_group.command("list")
@admin_option
def list_(admin_url: str) -> None:
    """One line per link: state, sites, partitions, lag and what was copied."""
    from rich.console import Console
    from rich.table import Table

    client = _client(admin_url)
    data = _call(client.links)
    table = Table(title=f"mirror {data.get('member_id')} at {client.url}")
    for column, justify in (
        ("link", "left"),
        ("state", "left"),
        ("sites", "left"),
        ("partitions", "right"),
        ("lag records", "right"),
        ("lag s (max)", "right"),
        ("records copied", "right"),
        ("gap records", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for link in data["links"]:
        totals = link.get("totals", {})
        cfg = link.get("link", {})
        table.add_row(
            link["name"],
            link["state"],
            f"{cfg.get('source', {}).get('name')} → {cfg.get('target', {}).get('name')}",
            str(totals.get("partitions", 0)),
            str(totals.get("lag_records", 0)),
            _seconds(totals.get("lag_seconds")),
            str(totals.get("records_copied", 0)),
            str(totals.get("gap_records", 0)),
        )
    for name in data.get("deleted", []):
        table.add_row(name, "deleted", "", "", "", "", "", "")
    console = Console()
    console.print(table)
    for link in data["links"]:
        problem = link.get("error") or link.get("last_sync_error")
        if problem:
            console.print(f"  {link['name']}: {problem}", highlight=False)


@mirror_group.command("status")
@click.argument("link", required=False)
@admin_option
@click.option("--json", "as_json", is_flag=True, help="Print the status JSON as the admin API returns it.")
def status(link: str | None, admin_url: str, as_json: bool) -> None:
    """Per partition of LINK (default: every link): source high watermark, mirrored offset, lag, state, gaps."""
    import json

    client = _client(admin_url)
    statuses = [_call(lambda: client.link(link))] if link is not None else _call(client.links)["links"]
    if as_json:
        click.echo(json.dumps(statuses if link is None else statuses[0], indent=2))
        return
    from rich.console import Console

    console = Console()
    if not statuses:
        console.print(f"no links run in the mirror at {client.url}")
    for entry in statuses:
        _print_link(console, entry)


def _print_link(console: Any, link: dict[str, Any]) -> None:
    from rich.table import Table

    cfg = link.get("link", {})
    membership = link.get("membership") or {}
    title = (
        f"link {link['name']}: {cfg.get('source', {}).get('name')} → {cfg.get('target', {}).get('name')}, "
        f"{link['state']}"
    )
    table = Table(
        title=title,
        caption="lag: records behind the source HW; lag bytes: estimated; lag s: age of the oldest unmirrored "
        "record; gaps: records lost to source retention; ?: not known (yet, or another process owns it)",
    )
    # Short headers: the table has to fit 80 columns; the caption explains them.
    for column in (
        "topic",
        "p",
        "state",
        "source HW",
        "mirrored",
        "lag",
        "lag bytes",
        "lag s",
        "copied",
        "gaps",
        "err",
    ):
        table.add_column(column, justify="left" if column in ("topic", "state", "gaps") else "right")
    for topic, entry in sorted(link.get("topics", {}).items()):
        for p in entry.get("partitions", []):
            gaps = ", ".join(f"[{a}, {b})" for a, b in p.get("gaps", []))
            table.add_row(
                topic,
                str(p["partition"]),
                p["state"],
                _offset(p.get("source_high_watermark")),
                _offset(p.get("mirrored_offset")),
                _offset(p.get("lag_records")),
                _offset(p.get("lag_bytes")),
                _seconds(p.get("lag_seconds")),
                str(p.get("records_copied", 0)),
                f"{p.get('gap_records', 0)} {gaps}".strip() if p.get("gap_records") else "0",
                str(p.get("errors", 0)),
            )
    console.print(table)
    notes = []
    if link.get("error"):
        notes.append(f"error: {link['error']}")
    if link.get("last_sync_error"):
        notes.append(f"last sync error: {link['last_sync_error']}")
    for conflict in link.get("conflicts", []):
        notes.append(f"conflict: {conflict.get('reason')}")
    for topic, entry in sorted(link.get("topics", {}).items()):
        if entry.get("problem"):
            notes.append(f"{topic}: {entry['problem']}")
    if membership.get("kind") == "zookeeper":
        notes.append(
            f"member {membership.get('member_id')} of {membership.get('members')}"
            f"{' (leader)' if membership.get('leader') else ''}; claims {len(membership.get('claimed', []))} "
            "partition(s)"
        )
    latency = link.get("latency") or {}
    if latency.get("count"):
        notes.append(f"replication latency: mean {latency['sum'] / latency['count']:.3f} s over {latency['count']}")
    for note in notes:
        console.print(f"  {note}", highlight=False)


def _offset(value: object) -> str:
    return "?" if value is None or (isinstance(value, int) and value < 0) else str(value)


def _seconds(value: object) -> str:
    if not isinstance(value, int | float) or value < 0:
        return "?"
    return f"{value:.1f}"


def _change(action: str, link: str, admin_url: str, token_file: Path) -> None:
    client = _client(admin_url, token_file)
    fn: Callable[[str], dict[str, Any]] = getattr(client, action)
    result = _call(lambda: fn(link), token_file)
    click.echo(f"link {result.get('name', link)}: {result.get('state')}")


@mirror_group.command("pause")
@click.argument("link")
@admin_option
@token_option
def pause(link: str, admin_url: str, token_file: Path) -> None:
    """Stop LINK's copiers (topic sync goes on); kept across restarts of the mirror."""
    _change("pause", link, admin_url, token_file)


@mirror_group.command("resume")
@click.argument("link")
@admin_option
@token_option
def resume(link: str, admin_url: str, token_file: Path) -> None:
    """Restart LINK's copiers; each resumes from the target's end offset."""
    _change("resume", link, admin_url, token_file)


@mirror_group.command("delete")
@click.argument("link")
@admin_option
@token_option
def delete(link: str, admin_url: str, token_file: Path) -> None:
    """Stop LINK and keep it stopped across restarts (until removed from the link file); target data stays."""
    _change("delete", link, admin_url, token_file)
