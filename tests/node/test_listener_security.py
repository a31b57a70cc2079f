"""Per-listener security keys (``listener.name.<listener>.<key>``) on real nodes with real clients.

Each listener serves its own certificate from its own CA, asks for client certificates or not,
offers its own SASL mechanisms and PLAIN users; replication runs over an inter-broker listener
whose TLS material exists only as overrides (the node-wide keys name a decoy CA that would
fail). Certificates are made in the test (``tests.tls.TestCa``).
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ScramMechanism
from confluent_kafka.admin import ConfigSource as KafkaConfigSource

from node.protocol import ApiKey, ErrorCode
from tests.node.clients import CLIENTS, Rec, Security
from tests.node.harness import NodeProcess, wait_for
from tests.node.test_replication import partition_states
from tests.node.test_sasl import add_scram_user, raw_request
from tests.node.test_tls import can_list_topics, create, listener
from tests.tls import TestCa, subject

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
PLAINTEXT = Security("PLAINTEXT")


def round_trip(client_name: str, bootstrap: str, security: Security, topic: str, count: int = 20) -> None:
    """``count`` records produced with acks=all and read back from the start by ``client_name``."""
    client = CLIENTS[client_name](security)
    recs = [Rec(0, f"k{i}".encode(), f"v{i}-{uuid.uuid4().hex[:6]}".encode()) for i in range(count)]
    client.produce(bootstrap, topic, recs, codec="none", acks="all", idempotent=False)
    got = client.consume(bootstrap, topic, [0], len(recs))
    assert [(r.offset, r.value) for r in got] == [(i, r.value) for i, r in enumerate(recs)]


def kcat_refused_by_verification(bootstrap: str, ca: Path) -> bool:
    done = subprocess.run(
        ["kcat", "-L", "-b", bootstrap, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={ca}", "-m", "5"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode != 0 and b"certificate verify failed" in done.stderr


@pytest.fixture
def two_cas(tmp_path: Path) -> tuple[TestCa, TestCa]:
    return TestCa(tmp_path / "ca-one", name="CA one"), TestCa(tmp_path / "ca-two", name="CA two")


def start_two_tls_listeners(node_factory: NodeFactory, one_ca: TestCa, two_ca: TestCa, **extra: str) -> NodeProcess:
    """A node with PLAINTEXT (the test's admin) and two SSL listeners, ONE and TWO, each serving a
    certificate of its own CA through its listener.name.* keys (TWO's key is encrypted)."""
    one = one_ca.issue("one", subject(O="strait", CN="node-one"), ip="127.0.0.1")
    two = two_ca.issue("two", subject(O="strait", CN="node-two"), ip="127.0.0.1", key_password="two-key-secret")
    return node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,ONE://127.0.0.1:0,TWO://127.0.0.1:0",
        listener_security_protocol_map="ONE:SSL,TWO:SSL",
        listener_name_one_ssl_keystore_location=str(one.pem),
        listener_name_two_ssl_keystore_location=str(two.pem),
        listener_name_two_ssl_key_password="two-key-secret",
        **extra,
    )


def test_two_tls_listeners_serve_the_certificates_of_two_cas(
    node_factory: NodeFactory, two_cas: tuple[TestCa, TestCa]
) -> None:
    one_ca, two_ca = two_cas
    node = start_two_tls_listeners(node_factory, one_ca, two_ca)
    one, two = listener(node, "ONE"), listener(node, "TWO")
    trusts_one, trusts_two = Security("SSL", ca=str(one_ca.pem)), Security("SSL", ca=str(two_ca.pem))
    assert can_list_topics(one, trusts_one, timeout=30)
    assert can_list_topics(two, trusts_two, timeout=30)
    # Each CA's client fails verification on the other listener (confluent-kafka and kcat).
    assert not can_list_topics(two, trusts_one)
    assert not can_list_topics(one, trusts_two)
    assert kcat_refused_by_verification(two, one_ca.pem)
    assert kcat_refused_by_verification(one, two_ca.pem)
    # Both listeners carry records end to end, each with its own client.
    for name, address, security in (("kcat", one, trusts_one), ("confluent-kafka", two, trusts_two)):
        topic = f"own-ca-{name}"
        create(node.bootstrap, topic, PLAINTEXT)
        round_trip(name, address, security, topic)
    # DescribeConfigs lists the overrides under their full names; the key password stays hidden.
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(30)
    keystore = entries["listener.name.one.ssl.keystore.location"]
    assert keystore.value == str(one_ca.directory / "one.pem")
    assert keystore.source == KafkaConfigSource.STATIC_BROKER_CONFIG.value
    password = entries["listener.name.two.ssl.key.password"]
    assert password.is_sensitive and password.value is None
    assert "two-key-secret" not in node.log_path.read_text()


def test_client_certificates_are_required_only_where_a_listener_asks_for_them(
    node_factory: NodeFactory, two_cas: tuple[TestCa, TestCa]
) -> None:
    """ONE requires client certificates by its own key; TWO has CAs (node-wide) but asks for none."""
    one_ca, two_ca = two_cas
    node = start_two_tls_listeners(
        node_factory,
        one_ca,
        two_ca,
        ssl_truststore_location=str(two_ca.pem),
        listener_name_one_ssl_truststore_location=str(one_ca.pem),
        listener_name_one_ssl_client_auth="required",
    )
    one, two = listener(node, "ONE"), listener(node, "TWO")
    alice = one_ca.issue("alice", subject(O="Acme", CN="alice"), client=True)
    with_certificate = Security("SSL", ca=str(one_ca.pem), cert=str(alice.cert), key=str(alice.key))
    assert can_list_topics(one, with_certificate, timeout=30)
    assert not can_list_topics(one, Security("SSL", ca=str(one_ca.pem)))  # no certificate: refused on ONE
    assert can_list_topics(two, Security("SSL", ca=str(two_ca.pem)), timeout=30)  # accepted on TWO
    create(node.bootstrap, "certified", PLAINTEXT)
    round_trip("confluent-kafka", one, with_certificate, "certified")
    round_trip("kcat", two, Security("SSL", ca=str(two_ca.pem)), "certified-too")


def offered_mechanisms(address: str) -> list[str]:
    """What a SASL listener answers a SaslHandshake for a mechanism it cannot offer: its own list."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        answer = raw_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM  # type: ignore[attr-defined]
    return list(answer.mechanisms)  # type: ignore[attr-defined]


def test_each_sasl_listener_offers_its_own_mechanisms_and_plain_users(node_factory: NodeFactory) -> None:
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,A://127.0.0.1:0,B://127.0.0.1:0",
        listener_security_protocol_map="A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
        listener_name_a_sasl_enabled_mechanisms="PLAIN",
        listener_name_b_sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-512",
        connection_failed_authentication_delay_ms="50",
        **{
            "listener_name_a_plain_sasl_jaas_config": f'{PLAIN} required user_alice="alice-secret";',
            "listener_name_b_plain_sasl_jaas_config": f'{PLAIN} required user_bob="bob-secret";',
        },
    )
    a, b = listener(node, "A"), listener(node, "B")
    assert (offered_mechanisms(a), offered_mechanisms(b)) == (["PLAIN"], ["PLAIN", "SCRAM-SHA-512"])
    add_scram_user(node.bootstrap, "dave", "dave-secret", ScramMechanism.SCRAM_SHA_512)

    def sasl(mechanism: str, user: str, password: str) -> Security:
        return Security("SASL_PLAINTEXT", mechanism=mechanism, username=user, password=password)

    alice, bob = sasl("PLAIN", "alice", "alice-secret"), sasl("PLAIN", "bob", "bob-secret")
    dave = sasl("SCRAM-SHA-512", "dave", "dave-secret")
    assert can_list_topics(a, alice, timeout=30) and can_list_topics(b, bob, timeout=30)
    assert can_list_topics(b, dave, timeout=30)
    assert not can_list_topics(b, alice)  # A's PLAIN user is not B's
    assert not can_list_topics(a, bob)  # nor B's A's
    assert not can_list_topics(a, dave)  # A offers no SCRAM
    create(node.bootstrap, "per-listener-sasl", PLAINTEXT)
    round_trip("confluent-kafka", a, alice, "per-listener-sasl")
    create(node.bootstrap, "per-listener-sasl-b", PLAINTEXT)
    round_trip("kcat", b, bob, "per-listener-sasl-b")
    log = node.log_path.read_text()
    assert "alice-secret" not in log and "bob-secret" not in log


def test_replication_runs_over_an_inter_broker_listener_whose_tls_material_is_only_in_overrides(
    site: Callable[..., list[NodeProcess]], tmp_path: Path
) -> None:
    """Two nodes whose inter-broker listener BROKER requires client certificates, with its keystore,
    key password and truststore only in listener.name.broker.* keys. The node-wide keys name a decoy
    CA's certificate and CAs: a node that presented or trusted them could not replicate, so the
    acks=all writes below (min.insync.replicas=2) would fail."""
    ca = TestCa(tmp_path / "internal", name="internal CA")
    decoy = TestCa(tmp_path / "decoy", name="decoy CA")
    own = ca.issue("node", subject(O="strait", CN="node"), ip="127.0.0.1", key_password="internal-key-secret")
    wrong = decoy.issue("decoy", subject(O="strait", CN="decoy"), ip="127.0.0.1")
    nodes = site(
        2,
        listeners="BROKER://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        listener_security_protocol_map="BROKER:SSL,PLAINTEXT:PLAINTEXT",
        inter_broker_listener_name="BROKER",
        default_replication_factor="2",
        offsets_topic_replication_factor="2",
        ssl_keystore_location=str(wrong.pem),
        ssl_truststore_location=str(decoy.pem),
        listener_name_broker_ssl_keystore_location=str(own.pem),
        listener_name_broker_ssl_key_password="internal-key-secret",
        listener_name_broker_ssl_truststore_location=str(ca.pem),
        listener_name_broker_ssl_client_auth="required",
    )
    plain = ",".join(listener(n, "PLAINTEXT") for n in nodes)
    admin = AdminClient({"bootstrap.servers": plain})
    admin.create_topics([NewTopic("replicated", 1, 2, config={"min.insync.replicas": "2"})])["replicated"].result(30)
    in_sync = lambda: sorted(partition_states(nodes[0], "replicated")[0]["isr"]) == [1, 2]  # noqa: E731
    wait_for("both nodes in the ISR", in_sync, timeout=60)
    round_trip("confluent-kafka", plain, PLAINTEXT, "replicated", count=200)
    leader = partition_states(nodes[0], "replicated")[0]["leader"]
    follower = next(n for n in nodes if n.broker_id != leader)
    wait_for(
        "the follower's copy of all 200 records",
        lambda: partition_states(follower, "replicated")[0]["log_end_offset"] == 200,
        timeout=30,
    )
    assert in_sync()
    for node in nodes:
        assert "internal-key-secret" not in node.log_path.read_text()
