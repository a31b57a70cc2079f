"""A link between two secured sites: TLS and SCRAM-SHA-512 to both the source and the target.

Each site is one real node with a SASL_SSL listener for the world (what the link uses) and a
PLAINTEXT one on loopback for the test's own setup and checks. The mirror's user exists on both
sites (AlterUserScramCredentials); its password is in a file the link names.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from chaos.workload import read_back
from mirror import LinkRunner, load_links
from tests.mirror.test_link import RunningLink
from tests.node.harness import NodeProcess, wait_for
from tests.tls import TestCa, subject

pytestmark = pytest.mark.integration


class SecuredSite:
    def __init__(self, node: NodeProcess) -> None:
        listeners = json.loads(node.ready_path.read_text())["listeners"]
        self.node = node
        self.plaintext = str(listeners["PLAINTEXT"])
        self.secured = str(listeners["CLIENTS"])


def add_user(bootstrap: str, user: str, password: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def secured_site_props(keystore: Path) -> dict[str, str]:
    """A one-node site's properties: SASL_SSL (SCRAM-SHA-512) for the world on listener CLIENTS,
    PLAINTEXT on loopback for the test's own setup, ``keystore`` its certificate."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "default.replication.factor": "1",
    }


@pytest.fixture
def secured_sites(tmp_path: Path, zookeeper: str) -> Iterator[tuple[SecuredSite, SecuredSite, TestCa]]:
    ca = TestCa(tmp_path / "pki")
    server = ca.issue("node", subject(CN="node"), ip="127.0.0.1")
    props = secured_site_props(server.pem)
    nodes = [
        NodeProcess(1, tmp_path / name, f"{zookeeper}/{name}-{uuid.uuid4().hex}", dict(props))
        for name in ("east", "west")
    ]
    try:
        for node in nodes:
            node.start()
        east, west = (SecuredSite(n) for n in nodes)
        for site in (east, west):
            add_user(site.plaintext, "mirror", "mirror-secret")
        yield east, west, ca
    finally:
        for node in nodes:
            node.stop()


def link_file(tmp_path: Path, east: SecuredSite, west: SecuredSite, ca: TestCa, password: str) -> Path:
    secret = tmp_path / f"mirror-{uuid.uuid4().hex[:6]}.pw"
    secret.write_text(password + "\n")
    sasl = f'{{ mechanism = "SCRAM-SHA-512", username = "mirror", password_file = "{secret}" }}'
    tls = f'{{ ca = "{ca.pem}" }}'
    path = tmp_path / f"links-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(
        f"""
[[link]]
name = "secured"
sync_interval_s = 0.5
source = {{ name = "east", bootstrap = "{east.secured}", tls = {tls}, sasl = {sasl} }}
target = {{ name = "west", bootstrap = "{west.secured}", tls = {tls}, sasl = {sasl} }}
"""
    )
    return path


def test_a_link_copies_between_two_tls_and_scram_sites_with_identical_offsets(
    secured_sites: tuple[SecuredSite, SecuredSite, TestCa], tmp_path: Path
) -> None:
    east, west, ca = secured_sites
    admin = AdminClient({"bootstrap.servers": east.plaintext})
    admin.create_topics([NewTopic("orders", 2, 1)])["orders"].result(30)
    producer = Producer({"bootstrap.servers": east.plaintext, "acks": "all"})
    for i in range(200):
        producer.produce("orders", key=f"k{i % 5}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    expected = sorted(read_back(east.plaintext, "orders"))

    # A wrong password: the link says why it cannot sync.
    (refused,) = load_links(link_file(tmp_path, east, west, ca, "wrong"))
    with RunningLink(LinkRunner(refused, request_timeout_s=3)) as link:
        wait_for("the link's sync error", lambda: link.status()["last_sync_error"] is not None, 20)
        error = link.status()["last_sync_error"]
        assert "SASL_AUTHENTICATION_FAILED" in error, error

    (good,) = load_links(link_file(tmp_path, east, west, ca, "mirror-secret"))
    with RunningLink(LinkRunner(good)):
        wait_for("orders on west", lambda: len(read_back(west.plaintext, "orders", timeout=10)) == 200, 60)
    assert sorted(read_back(west.plaintext, "orders")) == expected  # same partitions, offsets and values
