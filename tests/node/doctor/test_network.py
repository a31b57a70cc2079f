"""ZooKeeper reachability and port checks: every verdict with fake probes, and the real probes
against sockets this test opens in-process (threads, no child processes)."""

from __future__ import annotations

import errno
import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from node.config import Listener
from node.doctor import SrvrReply, Status
from node.doctor._network import ask_srvr, check_ports, check_zookeeper, node_health, try_bind

SERVING = "Zookeeper version: 3.9.3-c26634f34490bb0ea7a09cc51e05ede3b4e320ee, built on 2024-10-17\nMode: follower\n"
NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"
NOT_WHITELISTED = "srvr is not executed because it is not in the whitelist.\n"


def asker(replies: dict[int, SrvrReply]) -> Callable[[str, int], SrvrReply]:
    return lambda host, port: replies[port]


# -- ZooKeeper -----------------------------------------------------------------------------------------


def test_a_serving_server_passes_and_names_its_mode_and_version() -> None:
    (finding,) = check_zookeeper("127.0.0.1:2181/strait/east", asker({2181: SrvrReply(None, SERVING)}))
    assert (finding.check, finding.subject, finding.status) == ("zookeeper", "127.0.0.1:2181", Status.OK)
    assert finding.measured == "follower" and "ZooKeeper 3.9.3" in finding.detail and finding.expected == "serving"


@pytest.mark.parametrize(
    ("reply", "status", "words"),
    [
        (SrvrReply("Connection refused"), Status.FAIL, "unreachable: Connection refused"),
        (SrvrReply("no answer within 3 s"), Status.FAIL, "unreachable: no answer"),
        (SrvrReply(None, NOT_SERVING), Status.FAIL, "not serving requests"),
        (SrvrReply(None, NOT_WHITELISTED), Status.WARN, "4lw.commands.whitelist"),
        (SrvrReply(None, ""), Status.WARN, "answered srvr with 'nothing'"),
    ],
)
def test_a_single_server_down_fails_and_an_unknown_state_warns(reply: SrvrReply, status: Status, words: str) -> None:
    (finding,) = check_zookeeper("zk1:2181", asker({2181: reply}))
    assert finding.status is status and words in finding.detail


def test_one_server_down_of_three_only_warns_while_the_quorum_holds() -> None:
    up, down = SrvrReply(None, SERVING), SrvrReply("Connection refused")
    findings = check_zookeeper("zk:1,zk:2,zk:3", asker({1: up, 2: down, 3: up}))
    assert [f.status for f in findings] == [Status.OK, Status.WARN, Status.OK]
    assert "2 of 3 servers serve, so the ensemble keeps its quorum" in findings[1].detail
    findings = check_zookeeper("zk:1,zk:2,zk:3", asker({1: up, 2: down, 3: SrvrReply(None, NOT_SERVING)}))
    assert [f.status for f in findings] == [Status.OK, Status.FAIL, Status.FAIL]
    assert "no quorum" in findings[2].detail


def test_a_server_that_is_not_host_port_fails() -> None:
    (finding,) = check_zookeeper("zk1:notaport", asker({}))
    assert finding.status is Status.FAIL and "notaport" in finding.detail


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock


def serve_once(sock: socket.socket, answer: bytes | None) -> threading.Thread:
    """Accept one connection; read the 4 command bytes, answer ``answer`` and close (None: stay silent)."""

    def run() -> None:
        conn, _ = sock.accept()
        with conn:
            assert conn.recv(4) == b"srvr"
            if answer is None:
                conn.recv(1)  # until the client gives up and closes
            else:
                conn.sendall(answer)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_ask_srvr_reads_the_whole_answer(listener: socket.socket) -> None:
    thread = serve_once(listener, SERVING.encode())
    reply = ask_srvr("127.0.0.1", listener.getsockname()[1], timeout=5)
    thread.join(5)
    assert reply == SrvrReply(None, SERVING)


def test_ask_srvr_reports_a_silent_server_and_a_closed_port(listener: socket.socket) -> None:
    thread = serve_once(listener, None)
    reply = ask_srvr("127.0.0.1", listener.getsockname()[1], timeout=0.3)
    thread.join(5)
    assert reply.error == "no answer within 0.3 s"
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        assert ask_srvr("127.0.0.1", bound.getsockname()[1], timeout=1).error == "Connection refused"


# -- ports and the running node ------------------------------------------------------------------------


def binder(results: dict[int, int]) -> Callable[[str, int], OSError | None]:
    """A fake bind: the errno for each port (0: free)."""

    def bind(host: str, port: int) -> OSError | None:
        code = results.get(port, 0)
        return OSError(code, "fake") if code else None

    return bind


PLAINTEXT = [Listener("PLAINTEXT", "127.0.0.1", 9092)]
ADMIN = ("0.0.0.0", 9700)


def test_free_ports_pass_and_port_0_needs_no_check() -> None:
    listeners = [*PLAINTEXT, Listener("WAN", "", 0)]
    findings = check_ports(listeners, ADMIN, 1, bind=binder({}), health=lambda h, p: None)
    assert [(f.check, f.subject, f.status) for f in findings] == [
        ("port", "listener PLAINTEXT 127.0.0.1:9092", Status.OK),
        ("port", "listener WAN *:0", Status.OK),
        ("port", "admin listener 0.0.0.0:9700", Status.OK),
    ]
    assert findings[1].measured == "any"


def test_ports_held_by_this_running_node_pass_and_its_health_is_reported() -> None:
    asked: list[tuple[str, int]] = []

    def health(host: str, port: int) -> dict[str, object]:
        asked.append((host, port))
        return {"status": "ok", "broker_id": 1}

    in_use = binder({9092: errno.EADDRINUSE, 9700: errno.EADDRINUSE})
    findings = check_ports(PLAINTEXT, ADMIN, 1, bind=in_use, health=health)
    assert asked == [("127.0.0.1", 9700)]  # a wildcard admin host is asked on loopback
    assert [f.status for f in findings] == [Status.OK, Status.OK, Status.OK]
    assert "in use by the running node (broker 1)" in findings[0].detail
    assert (findings[2].check, findings[2].subject, findings[2].measured) == (
        "node",
        "broker 1 at 127.0.0.1:9700",
        "ok",
    )
    degraded = {"status": "degraded", "broker_id": 1, "offline_log_dirs": ["/data/d2"]}
    findings = check_ports(PLAINTEXT, ADMIN, 1, bind=in_use, health=lambda h, p: degraded)
    assert findings[2].status is Status.WARN and "/data/d2" in findings[2].detail


def test_ports_held_by_anything_else_fail() -> None:
    in_use = binder({9092: errno.EADDRINUSE, 9700: errno.EADDRINUSE})
    other = check_ports(PLAINTEXT, ADMIN, 2, bind=in_use, health=lambda h, p: {"broker_id": 1})
    assert [f.status for f in other] == [Status.FAIL, Status.FAIL]  # and no node finding
    assert "answers for broker 1, not 2" in other[0].detail
    silent = check_ports(PLAINTEXT, ADMIN, 1, bind=in_use, health=lambda h, p: None)
    assert "in use by another process" in silent[0].detail and silent[0].measured == "in use"
    unknown = check_ports(PLAINTEXT, ("127.0.0.1", 0), 1, bind=in_use, health=lambda h, p: pytest.fail("asked"))
    assert unknown[0].status is Status.FAIL and "port 0" in unknown[0].detail


@pytest.mark.parametrize(
    ("code", "words"), [(errno.EACCES, "CAP_NET_BIND_SERVICE"), (errno.EADDRNOTAVAIL, "not an address of this host")]
)
def test_other_bind_errors_fail_saying_why(code: int, words: str) -> None:
    finding, admin = check_ports(PLAINTEXT, ("127.0.0.1", 0), 1, bind=binder({9092: code}), health=lambda h, p: None)
    assert finding.status is Status.FAIL and words in finding.detail
    assert admin.status is Status.OK and admin.subject == "admin listener 127.0.0.1:0"


def test_try_bind_sees_a_listening_socket_and_foreign_addresses(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_use = try_bind("127.0.0.1", listener.getsockname()[1])
    assert in_use is not None and in_use.errno == errno.EADDRINUSE
    assert try_bind("127.0.0.1", 0) is None
    foreign = try_bind("192.0.2.1", 9092)  # TEST-NET-1: never an address of this host
    assert foreign is not None and foreign.errno == errno.EADDRNOTAVAIL

    def no_such_host(*args: object, **kwargs: object) -> object:  # no resolver is asked: it may be slow here
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    unknown = try_bind("broker.example", 9092)
    assert unknown is not None and unknown.errno == errno.EADDRNOTAVAIL and "broker.example" in str(unknown)


@pytest.fixture
def admin_api() -> Iterator[Callable[[int, bytes], int]]:
    """``serve(status, body)``: an HTTP server answering every GET with them; returns its port."""
    servers: list[HTTPServer] = []

    def serve(status: int, body: bytes) -> int:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = HTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server.server_address[1]

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_node_health_reads_200_and_503_bodies_and_nothing_else(admin_api: Callable[[int, bytes], int]) -> None:
    ok = {"status": "ok", "broker_id": 3}
    assert node_health("127.0.0.1", admin_api(200, json.dumps(ok).encode()), 5) == ok
    starting = {"status": "starting", "broker_id": 3}
    assert node_health("127.0.0.1", admin_api(503, json.dumps(starting).encode()), 5) == starting
    assert node_health("127.0.0.1", admin_api(200, b"<html>"), 5) is None
    assert node_health("127.0.0.1", admin_api(200, b"[1, 2]"), 5) is None
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        assert node_health("127.0.0.1", bound.getsockname()[1], 1) is None
