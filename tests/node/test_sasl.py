"""SASL listeners: the four real clients with PLAIN and SCRAM, refusals, and what is answered before authentication.

One node serves PLAINTEXT (for the test's own admin), SASL_PLAINTEXT and SASL_SSL. PLAIN users
come from ``sasl.jaas.config``; SCRAM users are created through AlterUserScramCredentials with
confluent-kafka's admin client (stored in the site's ZooKeeper).
"""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from node.protocol import ApiKey, ErrorCode, decode_response, encode_request, request_header
from tests.node.clients import CLIENTS, Rec, Security
from tests.node.harness import NodeProcess
from tests.node.raw import closed_within, read_frame
from tests.tls import Issued, TestCa, subject

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
)


class SaslNode:
    def __init__(self, node: NodeProcess, ca: TestCa) -> None:
        listeners = json.loads(node.ready_path.read_text())["listeners"]
        self.node = node
        self.ca = ca
        self.plaintext = node.bootstrap
        self.sasl_plaintext = str(listeners["SASL_PLAINTEXT"])
        self.sasl_ssl = str(listeners["SASL_SSL"])

    def security(self, protocol: str, mechanism: str, user: str, password: str) -> Security:
        ca = str(self.ca.pem) if protocol == "SASL_SSL" else None
        return Security(protocol, ca=ca, mechanism=mechanism, username=user, password=password)

    def bootstrap(self, protocol: str) -> str:
        return self.sasl_ssl if protocol == "SASL_SSL" else self.sasl_plaintext


@pytest.fixture
def sasl_node(node_factory: NodeFactory, tmp_path: Path) -> SaslNode:
    ca = TestCa(tmp_path / "pki")
    server: Issued = ca.issue("node", subject(CN="node-1"), ip="127.0.0.1")
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        ssl_keystore_location=str(server.pem),
        sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        sasl_jaas_config=JAAS,
        connection_failed_authentication_delay_ms="50",
    )
    return SaslNode(node, ca)


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def add_scram_user(bootstrap: str, user: str, password: str, mechanism: ScramMechanism) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def can_list_topics(bootstrap: str, security: Security, timeout: float = 5.0) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, **security.librdkafka()})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def round_trip(client_name: str, bootstrap: str, security: Security, topic: str) -> None:
    client = CLIENTS[client_name](security)
    recs = [Rec(0, f"k{i}".encode(), f"v{i}-{uuid.uuid4().hex[:6]}".encode()) for i in range(20)]
    client.produce(bootstrap, topic, recs, codec="none", acks="all", idempotent=False)
    got = client.consume(bootstrap, topic, [0], len(recs))
    assert [(r.offset, r.value) for r in got] == [(i, r.value) for i, r in enumerate(recs)]


@pytest.mark.parametrize("client_name", sorted(CLIENTS))
def test_each_client_authenticates_with_plain_and_both_scram_mechanisms(sasl_node: SaslNode, client_name: str) -> None:
    add_scram_user(sasl_node.plaintext, "carol", "carol-secret-256", ScramMechanism.SCRAM_SHA_256)
    add_scram_user(sasl_node.plaintext, "dave", "dave-secret-512", ScramMechanism.SCRAM_SHA_512)
    cases = [
        ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
        ("SASL_SSL", "SCRAM-SHA-256", "carol", "carol-secret-256"),
        ("SASL_SSL", "SCRAM-SHA-512", "dave", "dave-secret-512"),
    ]
    for protocol, mechanism, user, password in cases:
        topic = f"sasl-{client_name}-{mechanism.lower()}"
        create(sasl_node.plaintext, topic)
        round_trip(
            client_name, sasl_node.bootstrap(protocol), sasl_node.security(protocol, mechanism, user, password), topic
        )


def test_wrong_credentials_are_refused_and_the_node_serves_on(sasl_node: SaslNode) -> None:
    add_scram_user(sasl_node.plaintext, "carol", "carol-secret", ScramMechanism.SCRAM_SHA_512)
    refused = [
        ("SASL_PLAINTEXT", "PLAIN", "alice", "wrong"),
        ("SASL_PLAINTEXT", "PLAIN", "mallory", "alice-secret"),
        ("SASL_SSL", "SCRAM-SHA-512", "carol", "wrong"),
        ("SASL_SSL", "SCRAM-SHA-512", "nobody", "carol-secret"),
        ("SASL_SSL", "SCRAM-SHA-256", "carol", "carol-secret"),  # carol has only a SHA-512 credential
    ]
    for protocol, mechanism, user, password in refused:
        security = sasl_node.security(protocol, mechanism, user, password)
        assert not can_list_topics(sasl_node.bootstrap(protocol), security), (mechanism, user, password)
    # librdkafka reports the broker's answer as an authentication error, with the broker's reason.
    errors: list[KafkaError] = []
    wrong = sasl_node.security("SASL_PLAINTEXT", "PLAIN", "alice", "wrong").librdkafka()
    producer = Producer({"bootstrap.servers": sasl_node.sasl_plaintext, **wrong, "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION and "invalid credentials" in e.str() for e in errors), errors
    good = sasl_node.security("SASL_SSL", "SCRAM-SHA-512", "carol", "carol-secret")
    assert can_list_topics(sasl_node.sasl_ssl, good, timeout=30)


def raw_request(
    sock: socket.socket, api_key: int, version: int, body: dict[str, object], correlation_id: int = 1
) -> object:
    sock.sendall(encode_request(request_header(api_key, version, correlation_id, "raw-test"), body))
    frame = read_frame(sock)
    assert frame is not None, "the node closed the connection"
    got, response = decode_response(api_key, version, frame)
    assert got == correlation_id
    return response


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def test_before_authentication_only_api_versions_and_sasl_are_answered(sasl_node: SaslNode) -> None:
    address = sasl_node.sasl_plaintext
    with connect(address) as sock:  # ApiVersions is answered and advertises the SASL APIs
        versions = raw_request(
            sock, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        keys = {k.api_key for k in versions.api_keys}  # type: ignore[attr-defined]
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= keys
        # Anything else closes the connection unanswered.
        sock.sendall(
            encode_request(
                request_header(ApiKey.METADATA, 8, 2, "raw-test"),
                {
                    "topics": None,
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                },
            )
        )
        assert closed_within(sock, 10)
    with connect(address) as sock:  # an ApiVersions newer than the node's: its ranges in v0, error 35
        header = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 5, 4) + b"test" + b"\x00"
        sock.sendall(struct.pack(">i", len(header) + 3) + header + b"\x01\x01\x00")
        frame = read_frame(sock)
        assert frame is not None
        _, fallback = decode_response(ApiKey.API_VERSIONS, 0, frame)
        assert fallback.error_code == ErrorCode.UNSUPPORTED_VERSION  # type: ignore[attr-defined]
        assert ApiKey.SASL_HANDSHAKE in {k.api_key for k in fallback.api_keys}  # type: ignore[attr-defined]
        assert plain_login(sock, "alice", "alice-secret", 6).error_code == 0  # type: ignore[attr-defined]
    with connect(address) as sock:  # a size the node will not read before authentication
        sock.sendall(struct.pack(">i", 10 * 1024 * 1024) + b"x" * 1024)
        assert closed_within(sock, 10)
    with connect(address) as sock:  # garbage
        sock.sendall(b"\xff" * 64)
        assert closed_within(sock, 10)
    with connect(address) as sock:  # SaslAuthenticate without a handshake
        answer = raw_request(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE  # type: ignore[attr-defined]
        assert closed_within(sock, 10)
    with connect(address) as sock:  # a mechanism the node does not offer
        answer = raw_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM  # type: ignore[attr-defined]
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]  # type: ignore[attr-defined]
        assert closed_within(sock, 10)
    with connect(address) as sock:  # a wrong password: the error, then the connection closes
        assert raw_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0  # type: ignore[attr-defined]
        started = time.monotonic()
        answer = raw_request(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0nope"})
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
        assert "invalid credentials" in (answer.error_message or "")  # type: ignore[attr-defined]
        assert (
            closed_within(sock, 10) and time.monotonic() - started >= 0.04
        )  # after connection.failed.authentication.delay.ms
    with connect(address) as sock:  # and the right one: then every API is served
        assert raw_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0  # type: ignore[attr-defined]
        answer = raw_request(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert answer.error_code == 0  # type: ignore[attr-defined]
        meta = raw_request(
            sock,
            ApiKey.METADATA,
            8,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
            3,
        )
        assert meta.brokers  # type: ignore[attr-defined]
    assert sasl_node.node.running


METADATA_ALL = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


def plain_login(sock: socket.socket, user: str, password: str, correlation_id: int = 1) -> object:
    handshake = raw_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, correlation_id)
    assert handshake.error_code == 0  # type: ignore[attr-defined]
    token = b"\0" + user.encode() + b"\0" + password.encode()
    return raw_request(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token}, correlation_id + 1)


def test_sessions_expire_and_clients_reauthenticate_on_the_same_connection(
    node_factory: NodeFactory, tmp_path: Path
) -> None:
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="PLAIN",
        sasl_jaas_config=JAAS,
        connections_max_reauth_ms="2000",
    )
    address = str(json.loads(node.ready_path.read_text())["listeners"]["SASL_PLAINTEXT"])
    with connect(address) as sock:  # a client that never re-authenticates is closed after its session
        assert plain_login(sock, "alice", "alice-secret").session_lifetime_ms == 2000  # type: ignore[attr-defined]
        assert raw_request(sock, ApiKey.METADATA, 8, METADATA_ALL, 3).brokers  # type: ignore[attr-defined]
        time.sleep(2.3)
        sock.sendall(encode_request(request_header(ApiKey.METADATA, 8, 4, "raw-test"), METADATA_ALL))
        assert closed_within(sock, 10)
    with connect(address) as sock:  # one that does goes on
        assert plain_login(sock, "alice", "alice-secret").error_code == 0  # type: ignore[attr-defined]
        time.sleep(1.2)
        assert plain_login(sock, "alice", "alice-secret", 5).error_code == 0  # type: ignore[attr-defined]
        time.sleep(1.2)  # 2.4 s after the first login, 1.2 s after the second
        assert raw_request(sock, ApiKey.METADATA, 8, METADATA_ALL, 7).brokers  # type: ignore[attr-defined]
    with connect(address) as sock:  # re-authentication may not change the principal
        assert plain_login(sock, "alice", "alice-secret").error_code == 0  # type: ignore[attr-defined]
        raw_request(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 3)
        sock.sendall(
            encode_request(
                request_header(ApiKey.SASL_AUTHENTICATE, 1, 4, "raw-test"), {"auth_bytes": b"\0bob\0bob-secret"}
            )
        )
        assert closed_within(sock, 10)
    # A real client writing for three sessions' time loses nothing (librdkafka re-authenticates, or
    # reconnects where a connection was closed).
    security = Security("SASL_PLAINTEXT", mechanism="PLAIN", username="alice", password="alice-secret")
    create(node.bootstrap, "reauth")
    producer = Producer({"bootstrap.servers": address, **security.librdkafka(), "linger.ms": 5})
    delivered: list[KafkaError | None] = []
    deadline = time.monotonic() + 6
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"v%d" % sent, on_delivery=lambda err, _m: delivered.append(err))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0
    assert len(delivered) == sent and not [e for e in delivered if e is not None]


@pytest.mark.slow
def test_replication_over_sasl_ssl_keeps_every_record_through_a_leader_kill(
    site: Callable[..., list[NodeProcess]], tmp_path: Path
) -> None:
    """Three nodes whose inter-broker listener is SASL_SSL with SCRAM-SHA-512: replica fetchers,
    the controller and controlled shutdown authenticate as the user ``node`` (created through
    AlterUserScramCredentials once the nodes run: until then they retry). An idempotent acks=all
    producer on the PLAINTEXT listeners loses nothing when the leader is killed."""
    from chaos.ledger import Ledger, check
    from chaos.nemesis import Kill
    from chaos.workload import ProducerWorkload, read_back
    from tests.node.harness import wait_for
    from tests.node.test_replication import leader_of, partition_states

    ca = TestCa(tmp_path / "pki")
    server = ca.issue("node", subject(CN="node"), ip="127.0.0.1")
    own = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="node" password="node-secret";'
    nodes = site(
        3,
        listeners="BROKER://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        listener_security_protocol_map="BROKER:SASL_SSL,PLAINTEXT:PLAINTEXT",
        inter_broker_listener_name="BROKER",
        ssl_keystore_location=str(server.pem),
        ssl_truststore_location=str(ca.pem),
        sasl_enabled_mechanisms="SCRAM-SHA-512",
        sasl_mechanism_inter_broker_protocol="SCRAM-SHA-512",
        sasl_jaas_config=own,
    )

    def plaintext(node: NodeProcess) -> str:
        return str(json.loads(node.ready_path.read_text())["listeners"]["PLAINTEXT"])

    add_scram_user(plaintext(nodes[0]), "node", "node-secret", ScramMechanism.SCRAM_SHA_512)
    plain = ",".join(plaintext(n) for n in nodes)
    admin = AdminClient({"bootstrap.servers": plain})
    admin.create_topics([NewTopic("ledger", 1, 3, config={"min.insync.replicas": "2"})])["ledger"].result(30)
    in_sync = lambda: sorted(partition_states(nodes[0], "ledger")[0]["isr"]) == [1, 2, 3]  # noqa: E731
    wait_for("all three in the ISR over SASL_SSL", in_sync, timeout=60)
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(plain, "ledger", ledger, rate=300) as workload:
            workload.wait_for_acks(200, timeout=60)
            victim = leader_of(nodes, "ledger")
            Kill([victim]).start()
            workload.wait_for_acks(workload.acked + 200, timeout=120)
            victim.start()
            wait_for("the old leader back in the ISR over SASL_SSL", in_sync, timeout=60)
            workload.wait_for_acks(workload.acked + 100, timeout=60)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(",".join(plaintext(n) for n in nodes), "ledger", timeout=60))
    assert result.ok, result.summary()
    assert result.acknowledged >= 500
