"""ZooKeeper reachability, and whether the node's ports are free (or held by this very node).

**ZooKeeper** (``check``: ``zookeeper``, one finding per server of ``zookeeper.connect``): each
server is asked ``srvr``, the four-letter word ZooKeeper 3.5+ allows by default (``ruok`` is
not). A server that answers with its ``Mode:`` serves. One that cannot be reached, or says it
is "not currently serving requests" (it lost its quorum), is down: a **failure** unless a
majority of the listed servers serve, in which case the ensemble keeps its quorum and the node
keeps its session, and it only **warns** (one server down during a rolling restart of the
ensemble is normal). A server that accepts the connection but will not run ``srvr`` (removed
from ``4lw.commands.whitelist``) counts as up, with a warning that its state is unknown.

**Ports** (``check``: ``port``, one finding per listener and the admin listener): each
``host:port`` is bound as the node binds it (``SO_REUSEADDR``, so sockets in TIME_WAIT do not
count). Free: ok. Port 0: ok, the node picks a free port when it starts. In use: the admin API
at ``strait.admin.listener`` is asked for ``/health``; when it answers with this config's
``broker.id``, the ports are held by the running node itself: ok, and a ``node`` finding
reports its health (ok when "ok", a **warning** when "starting" or "degraded"). Otherwise a
port in use is a **failure**. Recognising a running node needs a fixed admin port (the broker
role sets one); with ``strait.admin.listener`` at port 0 a running node's ports fail as "in use
by another process".
"""

from __future__ import annotations

import errno
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from node.config import WILDCARD_HOSTS, Listener, parse_host_port

from ._findings import Finding, Status

__all__ = [
    "SrvrReply",
    "ask_srvr",
    "check_ports",
    "check_zookeeper",
    "node_health",
    "try_bind",
]

_MAX_REPLY = 64 * 1024  # a srvr answer is a few hundred bytes


@dataclass(frozen=True)
class SrvrReply:
    """What a ZooKeeper server did with ``srvr``: ``error`` when the connection failed, else its ``text``."""

    error: str | None
    text: str = ""


def ask_srvr(host: str, port: int, timeout: float) -> SrvrReply:
    """Connect to ``host:port`` within ``timeout`` seconds, send ``srvr`` and read the answer to EOF."""
    chunks: list[bytes] = []
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            while sum(map(len, chunks)) < _MAX_REPLY and (chunk := sock.recv(4096)):
                chunks.append(chunk)
    except TimeoutError:
        if not chunks:
            return SrvrReply(f"no answer within {timeout:g} s")
    except OSError as exc:
        if not chunks:
            return SrvrReply(exc.strerror or str(exc))
    return SrvrReply(None, b"".join(chunks).decode("utf-8", "replace"))


def check_zookeeper(connect: str, ask: Callable[[str, int], SrvrReply]) -> list[Finding]:
    """One finding per server of ``connect`` (``host:port,...[/chroot]``), asked with ``ask``. Never raises."""
    servers = [s.strip() for s in connect.partition("/")[0].split(",") if s.strip()]
    verdicts: list[tuple[str, bool, Finding]] = []  # (server, up, finding as if the ensemble had quorum)
    for server in servers:
        try:
            host, port = parse_host_port(server, what="zookeeper.connect server")
        except ValueError as exc:
            verdicts.append((server, False, Finding("zookeeper", server, Status.FAIL, str(exc), None, "serving")))
            continue
        verdicts.append((server, *_judge(server, ask(host, port))))
    up = sum(1 for _, alive, _ in verdicts if alive)
    quorum = 2 * up > len(servers)
    serving = f"; {up} of {len(servers)} servers serve"
    if quorum:
        down = (Status.WARN, f"{serving}, so the ensemble keeps its quorum")
    else:
        down = (Status.FAIL, f"{serving}: no quorum, the node cannot keep a session")
    return [
        finding if alive else replace(finding, status=down[0], detail=finding.detail + down[1])
        for _server, alive, finding in verdicts
    ]


def _judge(server: str, reply: SrvrReply) -> tuple[bool, Finding]:
    """(whether the server is up, its finding)."""
    if reply.error is not None:
        return False, Finding("zookeeper", server, Status.FAIL, f"unreachable: {reply.error}", "unreachable", "serving")
    pairs = (line.partition(":") for line in reply.text.splitlines())
    fields = {key.strip(): value.strip() for key, sep, value in pairs if sep}
    if "Mode" in fields:
        version = fields.get("Zookeeper version", "?").split(",")[0].split("-")[0]
        detail = f"serving: mode {fields['Mode']}, ZooKeeper {version}"
        return True, Finding("zookeeper", server, Status.OK, detail, fields["Mode"], "serving")
    if "not currently serving" in reply.text:
        detail = "reachable, but not serving requests (it has no quorum)"
        return False, Finding("zookeeper", server, Status.FAIL, detail, "not serving", "serving")
    first = reply.text.strip().splitlines()[0] if reply.text.strip() else "nothing"
    if "whitelist" in reply.text:
        detail = "reachable, but srvr is not in its 4lw.commands.whitelist: whether it serves is unknown"
    else:
        detail = f"reachable, but it answered srvr with {first!r}: whether it serves is unknown"
    return True, Finding("zookeeper", server, Status.WARN, detail, "reachable", "serving")


def try_bind(host: str, port: int) -> OSError | None:
    """None when ``host:port`` can be bound now (as a server binds it, with SO_REUSEADDR), else the error."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        return OSError(errno.EADDRNOTAVAIL, f"cannot resolve {host!r}: {exc.strerror}")
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


def node_health(host: str, port: int, timeout: float) -> dict[str, object] | None:
    """The JSON object a strait admin API at ``host:port`` answers ``GET /health`` with (200 or 503),
    or None when nothing there answers so. Proxies from the environment are not used."""
    url = f"http://{Listener('ADMIN', host, port).address}/health"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            body = exc.read()
    except (urllib.error.URLError, OSError, ValueError):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def check_ports(
    listeners: Sequence[Listener],
    admin: tuple[str, int],
    broker_id: int,
    *,
    bind: Callable[[str, int], OSError | None],
    health: Callable[[str, int], dict[str, object] | None],
) -> list[Finding]:
    """One ``port`` finding per listener and for the ``admin`` listener (host, port), and a ``node``
    finding when the running node answers at ``admin`` (see the module docstring). Never raises."""
    admin_host, admin_port = admin
    ask = Listener("ADMIN", "127.0.0.1" if admin_host in WILDCARD_HOSTS else admin_host, admin_port)
    answer = health(ask.host, ask.port) if admin_port else None
    answered_id = answer.get("broker_id") if answer is not None else None
    running = answered_id == broker_id
    bound = [(f"listener {x.name}", x) for x in listeners] + [("admin listener", Listener("ADMIN", *admin))]
    findings: list[Finding] = []
    for what, listener in bound:
        subject = f"{what} {listener.address if listener.host else f'*:{listener.port}'}"
        findings.append(_port(subject, listener, bind, broker_id, running, answered_id, admin_port))
    if answer is not None and running:
        status_text = str(answer.get("status"))
        offline = answer.get("offline_log_dirs") or []
        detail = f"running, health {status_text}" + (f", offline log dirs: {offline}" if offline else "")
        status = Status.OK if status_text == "ok" else Status.WARN
        findings.append(Finding("node", f"broker {broker_id} at {ask.address}", status, detail, status_text, "ok"))
    return findings


def _port(
    subject: str,
    listener: Listener,
    bind: Callable[[str, int], OSError | None],
    broker_id: int,
    running: bool,
    answered_id: object,
    admin_port: int,
) -> Finding:
    def finding(status: Status, detail: str, measured: str) -> Finding:
        return Finding("port", subject, status, detail, measured, "free")

    if listener.port == 0:
        return finding(Status.OK, "port 0: the node binds a free port when it starts", "any")
    error = bind(listener.host, listener.port)
    if error is None:
        return finding(Status.OK, "free to bind", "free")
    if error.errno == errno.EADDRINUSE:
        if running:
            return finding(Status.OK, f"in use by the running node (broker {broker_id})", "in use by this node")
        if answered_id is not None:
            detail = f"in use: the admin API there answers for broker {answered_id}, not {broker_id}"
        elif admin_port:
            detail = f"in use by another process (no node with broker.id {broker_id} answers /health on the admin port)"
        else:
            detail = "in use by another process (strait.admin.listener has port 0, so a running node is not recognised)"
        return finding(Status.FAIL, detail, "in use")
    if error.errno == errno.EACCES:
        return finding(Status.FAIL, "permission denied: ports below 1024 need CAP_NET_BIND_SERVICE", "denied")
    if error.errno == errno.EADDRNOTAVAIL:
        return finding(Status.FAIL, f"{listener.host} is not an address of this host: {error.strerror}", "unavailable")
    return finding(Status.FAIL, f"cannot bind: {error.strerror or error}", "error")
