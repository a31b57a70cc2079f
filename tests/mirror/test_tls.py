"""A link that reaches its source site over TLS.

The source is one real node whose advertised listener is a TLS endpoint in front of it (a
small trio TLS terminator in this test: strait nodes serve PLAINTEXT only); certificates come
from the ``openssl`` command line.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.workload import read_back
from mirror import LinkRunner, load_links
from tests.mirror.conftest import Site
from tests.mirror.test_link import RunningLink
from tests.node.conftest import SITE_PROPS
from tests.node.harness import NodeProcess, wait_for

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 it signed: (ca.pem, server.pem, server.key)."""
    ca_key, ca, key, csr, cert = (directory / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    ext = directory / "san.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
        "-subj", "/CN=strait test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out", str(cert),
        "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


class TlsTerminator:
    """Accepts TLS on ``port`` and forwards the plaintext to ``upstream`` (in its own trio run)."""

    def __init__(self, port: int, upstream: int, cert: Path, key: Path) -> None:
        import ssl

        self.port, self.upstream = port, upstream
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(str(cert), str(key))
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as self._scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    partial(trio.serve_ssl_over_tcp, self._handle, self.port, self.context, host="127.0.0.1")
                )
                self._ready.set()

    async def _handle(self, client: trio.SSLStream[trio.SocketStream]) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream)
        except OSError:
            await client.aclose()
            return

        async def pump(src: trio.abc.Stream, dst: trio.abc.Stream) -> None:
            try:
                while data := await src.receive_some(65536):
                    await dst.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            nursery.cancel_scope.cancel()

        async with upstream, client, trio.open_nursery() as nursery:
            nursery.start_soon(pump, client, upstream)
            nursery.start_soon(pump, upstream, client)

    def __enter__(self) -> TlsTerminator:
        self._thread.start()
        assert self._ready.wait(10), "the TLS terminator did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._scope is not None and self._token is not None:
            trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(10)


@pytest.fixture
def tls_sites(tmp_path: Path, zookeeper: str) -> Iterator[tuple[Site, Site, Path]]:
    ca, cert, key = make_certificates(tmp_path)
    node_port, tls_port = free_port(), free_port()
    props = dict(SITE_PROPS) | {"default.replication.factor": "1", "min.insync.replicas": "1"}
    east_node = NodeProcess(
        1,
        tmp_path / "east",
        f"{zookeeper}/east-{uuid.uuid4().hex}",
        props | {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{tls_port}"},
        port=node_port,
    )
    west_node = NodeProcess(1, tmp_path / "west", f"{zookeeper}/west-{uuid.uuid4().hex}", props)
    try:
        with TlsTerminator(tls_port, node_port, cert, key):
            east_node.start()
            west_node.start()
            east = Site("east", east_node.zk_connect, [east_node])
            west = Site("west", west_node.zk_connect, [west_node])
            yield east, west, ca
    finally:
        east_node.stop()
        west_node.stop()


def link_file(tmp_path: Path, source_bootstrap: str, west: Site, tls: str) -> Path:
    path = tmp_path / "links.toml"
    path.write_text(
        f"""
[[link]]
name = "tls"
sync_interval_s = 0.5
source = {{ name = "east", bootstrap = "{source_bootstrap}", tls = {tls} }}
target = {{ name = "west", bootstrap = "{west.bootstrap}" }}
"""
    )
    return path


def test_a_link_reads_its_source_over_tls_and_refuses_an_unknown_certificate(
    tls_sites: tuple[Site, Site, Path], tmp_path: Path
) -> None:
    east, west, ca = tls_sites
    tls_bootstrap = east.nodes[0].extra["advertised.listeners"].removeprefix("PLAINTEXT://")
    # Real clients reach east only through its TLS endpoint (the address its metadata advertises).
    over_tls = {"bootstrap.servers": tls_bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca)}
    admin = AdminClient(over_tls)
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    producer = Producer(over_tls | {"acks": "all", "compression.type": "zstd"})
    for i in range(200):
        producer.produce("orders", key=f"k{i % 7}".encode(), value=f"v{i}".encode(), headers=[("i", b"%d" % i)])
    assert producer.flush(30) == 0
    expected = sorted(read_back(tls_bootstrap, "orders", config=over_tls))
    assert len(expected) == 200

    # Without the test CA (tls = true: the system's CAs) the certificate is refused, and the status says why.
    (untrusted,) = load_links(link_file(tmp_path, tls_bootstrap, west, "true"))
    with RunningLink(LinkRunner(untrusted, request_timeout_s=3)) as link:
        error = link.status()["last_sync_error"]
        assert error is not None and "CERTIFICATE_VERIFY_FAILED" in error, error

    (trusted,) = load_links(link_file(tmp_path, tls_bootstrap, west, f'{{ ca = "{ca}" }}'))
    with RunningLink(LinkRunner(trusted)):
        wait_for("orders on west", lambda: len(read_back(west.bootstrap, "orders", timeout=10)) == 200, 30)
    assert sorted(read_back(west.bootstrap, "orders")) == expected
