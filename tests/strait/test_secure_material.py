"""The secrets of ``strait up --secure`` (strait/_secure_material.py): no processes; TLS is
checked with an in-memory handshake."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from strait._secure_material import MaterialError, ensure_material

USERS = ("admin", "broker", "mirror", "app")

pytestmark = pytest.mark.unit

NODES = {"east": [1, 2], "west": [1]}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def handshake(keystore: Path, ca: Path, host: str) -> x509.Certificate:
    """A TLS handshake in memory: a server with ``keystore``, a client trusting ``ca`` that checks
    ``host``; returns the certificate the client was shown. Raises ssl.SSLError when refused."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(keystore)
    client_context = ssl.create_default_context(cafile=str(ca))
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_context.wrap_bio(to_server, to_client, server_side=True)
    client = client_context.wrap_bio(to_client, to_server, server_hostname=host)
    for _ in range(10):
        done = 0
        for side in (client, server):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        if done == 2:
            der = client.getpeercert(binary_form=True)
            assert der is not None
            return x509.load_der_x509_certificate(der)
    raise AssertionError("the handshake did not finish")


def test_the_material_is_made_with_private_modes(tmp_path: Path) -> None:
    material, created = ensure_material(tmp_path / "secrets", NODES, USERS)
    assert mode(material.directory) == 0o700
    expected = {
        material.ca_cert,
        material.ca_key,
        *(material.keystore(site, i) for site, ids in NODES.items() for i in ids),
        *(material.password_file(user) for user in USERS),
        *(material.zookeeper_digest_file(site) for site in NODES),
    }
    assert set(created) == expected
    assert {p for p in material.directory.iterdir()} == expected  # no temp file left behind
    for path in expected - {material.ca_cert}:
        assert mode(path) == 0o600, path
    assert mode(material.ca_cert) == 0o644  # public: what clients trust
    passwords = {material.password(user) for user in USERS}
    assert len(passwords) == len(USERS) and all(len(p) >= 32 for p in passwords)
    east, west = material.zookeeper_digest("east"), material.zookeeper_digest("west")
    assert east.user == west.user == "strait" and east.password != west.password


def test_each_node_certificate_chains_to_the_ca_and_names_loopback(tmp_path: Path) -> None:
    material, _ = ensure_material(tmp_path / "secrets", NODES, USERS)
    ca = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for site, ids in NODES.items():
        for broker_id in ids:
            keystore = material.keystore(site, broker_id)
            data = keystore.read_bytes()
            leaf, chained_ca = x509.load_pem_x509_certificates(data)  # the chain, leaf first
            assert chained_ca == ca
            leaf.verify_directly_issued_by(ca)
            key = serialization.load_pem_private_key(data, password=None)
            assert key.public_key() == leaf.public_key()
            names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
            assert names.get_values_for_type(x509.DNSName) == ["localhost"]
            usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
            for host in ("127.0.0.1", "localhost"):
                assert handshake(keystore, material.ca_cert, host) == leaf
            with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
                handshake(keystore, material.ca_cert, "127.0.0.2")


def test_a_rerun_keeps_everything_and_makes_only_what_is_missing(tmp_path: Path) -> None:
    material, _ = ensure_material(tmp_path / "secrets", NODES, USERS)
    before = {p: (p.read_bytes(), p.stat().st_ino) for p in material.directory.iterdir()}
    again, created = ensure_material(tmp_path / "secrets", NODES, USERS)
    assert again == material and created == []
    assert {p: (p.read_bytes(), p.stat().st_ino) for p in material.directory.iterdir()} == before

    # A third node and a renewed (deleted) keystore: issued by the same CA, nothing else touched.
    material.keystore("east", 1).unlink()
    _, created = ensure_material(tmp_path / "secrets", {"east": [1, 2, 3], "west": [1]}, USERS)
    assert created == [material.keystore("east", 1), material.keystore("east", 3)]
    ca = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
    for broker_id in (1, 3):
        x509.load_pem_x509_certificates(material.keystore("east", broker_id).read_bytes())[0].verify_directly_issued_by(
            ca
        )
    for path, (data, _) in before.items():
        if path != material.keystore("east", 1):
            assert path.read_bytes() == data, path


def test_a_half_missing_ca_is_refused_not_replaced(tmp_path: Path) -> None:
    material, _ = ensure_material(tmp_path / "secrets", NODES, USERS)
    material.ca_key.unlink()
    with pytest.raises(MaterialError, match=r"ca\.pem exists but .*ca\.key does not"):
        ensure_material(tmp_path / "secrets", NODES, USERS)
    material.ca_cert.unlink()
    with pytest.raises(MaterialError, match=r"holds node keystores .* but not the CA"):
        ensure_material(tmp_path / "secrets", NODES, USERS)
    assert not material.ca_cert.exists() and not material.ca_key.exists()
