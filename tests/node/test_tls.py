"""SSL listeners: the four real clients over TLS, refusals, client certificates, a certificate renewed in place.

One node serves PLAINTEXT and SSL on two listeners (certificates made in the test by
``tests.tls.TestCa``). Every client that is refused leaves the node serving the others.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.clients import CLIENTS, Rec, Security
from tests.node.harness import STRAIT, NodeProcess, wait_for
from tests.node.raw import closed_within
from tests.tls import Issued, TestCa, subject

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]


def listener(node: NodeProcess, name: str) -> str:
    info = json.loads(node.ready_path.read_text())
    return str(info["listeners"][name])


def start_tls_node(node_factory: NodeFactory, ca: TestCa, server: Issued, client_auth: str) -> tuple[str, str]:
    """A node with PLAINTEXT and SSL listeners; returns (plaintext bootstrap, SSL bootstrap)."""
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        ssl_keystore_location=str(server.pem),
        ssl_key_password="k3y",
        ssl_truststore_location=str(ca.pem),
        ssl_client_auth=client_auth,
        ssl_principal_mapping_rules="RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
    )
    return node.bootstrap, listener(node, "SSL")


@pytest.fixture
def ca(tmp_path: Path) -> TestCa:
    return TestCa(tmp_path / "pki")


@pytest.fixture
def server(ca: TestCa) -> Issued:
    return ca.issue("node", subject(O="strait", CN="node-1"), ip="127.0.0.1", key_password="k3y")


def create(bootstrap: str, topic: str, security: Security) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **security.librdkafka()})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def can_list_topics(bootstrap: str, security: Security, timeout: float = 5.0) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, **security.librdkafka()})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def peer_subject(address: str, ca: Path) -> str:
    """The CN of the certificate a TLS endpoint serves now."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cert = tls.getpeercert()
    assert cert is not None
    return str(dict(attr for rdn in cert["subject"] for attr in rdn)["commonName"])


@pytest.mark.parametrize("client_name", sorted(CLIENTS))
def test_each_client_produces_and_consumes_over_ssl(
    node_factory: NodeFactory, ca: TestCa, server: Issued, client_name: str
) -> None:
    _, bootstrap = start_tls_node(node_factory, ca, server, "none")
    security = Security("SSL", ca=str(ca.pem))
    topic = f"tls-{client_name}"
    create(bootstrap, topic, security)
    client = CLIENTS[client_name](security)
    recs = [Rec(0, f"k{i}".encode(), f"v{i}-{uuid.uuid4().hex[:6]}".encode()) for i in range(50)]
    client.produce(bootstrap, topic, recs, codec="none", acks="all", idempotent=False)
    got = client.consume(bootstrap, topic, [0], len(recs))
    assert [(r.offset, r.value) for r in got] == [(i, r.value) for i, r in enumerate(recs)]


def test_clients_that_cannot_speak_tls_with_the_node_are_refused_and_the_node_serves_on(
    node_factory: NodeFactory, ca: TestCa, server: Issued, tmp_path: Path
) -> None:
    plaintext, bootstrap = start_tls_node(node_factory, ca, server, "none")
    other = TestCa(tmp_path / "other", name="another CA")
    # A client that trusts another CA; a plaintext client on the TLS port; TLS on the plaintext port.
    assert not can_list_topics(bootstrap, Security("SSL", ca=str(other.pem)))
    assert not can_list_topics(bootstrap, Security("PLAINTEXT"))
    assert not can_list_topics(plaintext, Security("SSL", ca=str(ca.pem)))
    kcat = subprocess.run(
        ["kcat", "-L", "-b", bootstrap, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={other.pem}",
         "-m", "5"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert kcat.returncode != 0 and b"certificate verify failed" in kcat.stderr, kcat.stderr
    # Garbage where a ClientHello belongs: the node answers (at most a TLS alert) and closes.
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"\x00\x00\x00\x10garbage-garbage!" * 4)
        assert closed_within(sock, 10)
    assert can_list_topics(bootstrap, Security("SSL", ca=str(ca.pem)), timeout=30)
    assert can_list_topics(plaintext, Security("PLAINTEXT"), timeout=30)


def test_required_client_certificates(node_factory: NodeFactory, ca: TestCa, server: Issued, tmp_path: Path) -> None:
    plaintext, bootstrap = start_tls_node(node_factory, ca, server, "required")
    alice = ca.issue("alice", subject(O="Acme", OU="ops", CN="Alice"), client=True)
    old = ca.issue("old", subject(O="Acme", CN="old"), client=True, expired=True)
    stranger = TestCa(tmp_path / "other", name="another CA").issue("eve", subject(CN="eve"), client=True)
    trusted = Security("SSL", ca=str(ca.pem), cert=str(alice.cert), key=str(alice.key))
    assert can_list_topics(bootstrap, trusted, timeout=30)
    refused = {
        "no certificate": Security("SSL", ca=str(ca.pem)),
        "expired": Security("SSL", ca=str(ca.pem), cert=str(old.cert), key=str(old.key)),
        "another CA's": Security("SSL", ca=str(ca.pem), cert=str(stranger.cert), key=str(stranger.key)),
    }
    for why, security in refused.items():
        assert not can_list_topics(bootstrap, security), f"a client with {why} certificate got in"
    topic = "with-certificates"
    create(bootstrap, topic, trusted)
    client = CLIENTS["kafka-python"](trusted)
    client.produce(bootstrap, topic, [Rec(0, None, b"hello")], codec="none", acks="all", idempotent=False)
    assert [r.value for r in client.consume(bootstrap, topic, [0], 1)] == [b"hello"]
    assert can_list_topics(plaintext, Security("PLAINTEXT"), timeout=30)


def test_a_renewed_certificate_is_served_to_new_connections_without_a_restart(
    node_factory: NodeFactory, ca: TestCa, server: Issued
) -> None:
    _, bootstrap = start_tls_node(node_factory, ca, server, "none")
    assert peer_subject(bootstrap, ca.pem) == "node-1"
    renewed = ca.issue("renewed", subject(O="strait", CN="node-1-renewed"), ip="127.0.0.1", key_password="k3y")
    # Written beside it and renamed over it, as certificate tools do.
    tmp = server.pem.with_suffix(".new")
    tmp.write_bytes(renewed.pem.read_bytes())
    tmp.replace(server.pem)
    wait_for("the renewed certificate", lambda: peer_subject(bootstrap, ca.pem) == "node-1-renewed", timeout=10)
    assert can_list_topics(bootstrap, Security("SSL", ca=str(ca.pem)), timeout=30)
    # A broken file does not take the listener down: the renewed certificate stays.
    server.pem.write_text("-----BEGIN PRIVATE KEY-----\ntruncated")
    time.sleep(2.5)
    assert peer_subject(bootstrap, ca.pem) == "node-1-renewed"


def test_a_node_whose_keystore_does_not_load_stops_naming_it(tmp_path: Path, zk_connect: str, ca: TestCa) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key\n")
    node = NodeProcess(
        1,
        tmp_path / "node",
        zk_connect,
        {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(junk)},
    )
    node.workdir.mkdir(parents=True)
    node.write_config()
    done = subprocess.run(
        [*STRAIT, "node", "start", "--config", str(node.config_path)],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"ssl.keystore.location {junk}: cannot load a private key" in done.stderr.decode(), done.stderr


@pytest.mark.slow
def test_replication_over_ssl_with_client_certificates_keeps_every_record_through_a_leader_kill(
    site: Callable[..., list[NodeProcess]], ca: TestCa, server: Issued, tmp_path: Path
) -> None:
    """Three nodes whose inter-broker listener is SSL with ``ssl.client.auth=required``: the
    replica fetchers, the controller's requests and controlled shutdown all present the node's
    certificate. An idempotent acks=all producer (on each node's PLAINTEXT listener) loses nothing
    when the leader is killed."""
    from chaos.ledger import Ledger, check
    from chaos.nemesis import Kill
    from chaos.workload import ProducerWorkload, read_back
    from tests.node.test_replication import leader_of, partition_states

    nodes = site(
        3,
        listeners="BROKER://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        listener_security_protocol_map="BROKER:SSL,PLAINTEXT:PLAINTEXT",
        inter_broker_listener_name="BROKER",
        ssl_keystore_location=str(server.pem),
        ssl_key_password="k3y",
        ssl_truststore_location=str(ca.pem),
        ssl_client_auth="required",
    )
    plain = ",".join(listener(n, "PLAINTEXT") for n in nodes)
    admin = AdminClient({"bootstrap.servers": plain})
    admin.create_topics([NewTopic("ledger", 1, 3, config={"min.insync.replicas": "2"})])["ledger"].result(30)
    wait_for("all three in the ISR", lambda: sorted(partition_states(nodes[0], "ledger")[0]["isr"]) == [1, 2, 3])
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(plain, "ledger", ledger, rate=300) as workload:
            workload.wait_for_acks(200, timeout=60)
            victim = leader_of(nodes, "ledger")
            Kill([victim]).start()
            workload.wait_for_acks(workload.acked + 200, timeout=120)
            victim.start()
            wait_for(
                "the old leader back in the ISR over SSL",
                lambda: sorted(partition_states(nodes[0], "ledger")[0]["isr"]) == [1, 2, 3],
                timeout=60,
            )
            workload.wait_for_acks(workload.acked + 100, timeout=60)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(",".join(listener(n, "PLAINTEXT") for n in nodes), "ledger", timeout=60))
    assert result.ok, result.summary()
    assert result.acknowledged >= 500


def test_the_admin_api_is_served_over_https_with_the_nodes_certificate(
    node_factory: NodeFactory, ca: TestCa, server: Issued
) -> None:
    import urllib.error
    import urllib.request

    node = node_factory(
        1, ssl_keystore_location=str(server.pem), ssl_key_password="k3y", strait_admin_ssl_enabled="true"
    )
    assert node.admin_url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=str(ca.pem))
    with urllib.request.urlopen(f"{node.admin_url}/v1/cluster", timeout=10, context=context) as response:
        assert response.status == 200 and json.loads(response.read())["broker_id"] == 1
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"{node.admin_url}/v1/cluster", timeout=10)  # the system CAs do not know ours
    plain = node.admin_url.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(f"{plain}/v1/cluster", timeout=10)
