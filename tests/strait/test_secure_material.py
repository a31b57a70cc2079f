"""The secrets of ``strait up --secure`` (strait/_secure_material.py) and what the secured
appliance makes of them (strait/_appliance_security.py, strait/_security_bootstrap.py): no
processes; TLS is checked with an in-memory handshake."""

from __future__ import annotations

import ipaddress
import json
import ssl
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from failover.topology import load_topology
from mirror import load_links
from node.config import NodeConfig
from node.security._acl import AclOperation, ResourceType
from node.security._scram import ScramMechanism, make_credential
from strait._appliance import Appliance
from strait._appliance_security import (
    SECURED_KEYS,
    USERS,
    ApplianceSecurity,
    check_mode,
)
from strait._audit_commands import resolve_link
from strait._command_config import load_command_config
from strait._secure_material import MaterialError, ensure_material
from strait._security_bootstrap import APP_ACLS, MIRROR_TARGET_ACLS, bindings, matches
from strait.cli import main

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


def test_an_appliance_directory_keeps_the_mode_it_was_made_in(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    check_mode(fresh, secure=True)
    check_mode(fresh, secure=False)
    plain = tmp_path / "plain"
    (plain / "east").mkdir(parents=True)
    check_mode(plain, secure=False)
    with pytest.raises(ValueError, match="made without --secure"):
        check_mode(plain, secure=True)
    secured = tmp_path / "secured"
    (secured / "secrets").mkdir(parents=True)
    check_mode(secured, secure=True)
    with pytest.raises(ValueError, match="made with --secure"):
        check_mode(secured, secure=False)

    for directory, flags, message in [(plain, ["--secure"], "made without --secure"), (secured, [], "made with")]:
        result = CliRunner().invoke(main, ["up", "--dir", str(directory), *flags])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output


def test_a_secured_key_cannot_be_set_and_nothing_is_made_before_the_settings_are_checked(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    for setting in ("super.users=User:bob", "num.partitions=zero"):
        result = CliRunner().invoke(main, ["up", "--secure", "--dir", str(directory), "--set", setting])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
    assert (
        "the secured appliance sets super.users itself"
        in CliRunner().invoke(main, ["up", "--secure", "--dir", str(directory), "--set", "super.users=User:bob"]).output
    )
    assert not directory.exists()


def test_the_secured_nodes_properties_load_and_the_link_file_parses(tmp_path: Path) -> None:
    security, _ = ApplianceSecurity.prepare(tmp_path, {"east": [1], "west": [1]})
    appliance = Appliance(tmp_path, nodes=1, security=security)
    for site in (appliance.east, appliance.west):
        node = site.nodes[0]
        node.bootstrap = "127.0.0.1:9093"
        props = site.node_properties(node) | {"zookeeper.connect": f"127.0.0.1:2181/{site.name}"}
        assert props["listeners"] == f"SASL_SSL://127.0.0.1:{node.port}"
        assert set(security.site(site.name).node_properties(1)) <= SECURED_KEYS
        config = NodeConfig.from_properties(props, source="test")
        assert config.authorizer_class_name and not config.allow_everyone_if_no_acl_found
        assert config.super_users == ("User:broker", "User:admin")
        assert config.zookeeper_set_acl and config.admin_ssl_enabled
    links = tmp_path / "links.toml"
    # The ZooKeepers have no address until they run: give them one, as a start would.
    text = appliance.mirror.links_toml()
    for site in ("east", "west"):
        text = text.replace(f'zookeeper = "/{site}"', f'zookeeper = "127.0.0.1:2181/{site}"')
    links.write_text(text)
    (link,) = load_links(links)
    for end in (link.source, link.target):
        assert end.tls is not None and end.tls.ca == str(security.material.ca_cert)
        assert end.sasl is not None and (end.sasl.mechanism, end.sasl.username) == ("SCRAM-SHA-512", "mirror")
        assert end.sasl.credentials().password == security.material.password("mirror")
    # The link copies the SCRAM users from east's ZooKeeper to west's, with each site's digest.
    assert link.sync_users and link.sync_acls
    assert link.source.zookeeper_digest() == security.material.zookeeper_digest("east")
    assert link.target.zookeeper_digest() == security.material.zookeeper_digest("west")


def test_the_client_files_work_as_kcat_and_strait_read_them(tmp_path: Path) -> None:
    security, _ = ApplianceSecurity.prepare(tmp_path, {"east": [1], "west": [1]})
    client, admin = security.write_properties(tmp_path, {"east": "127.0.0.1:1", "west": "127.0.0.1:2"})
    assert mode(client) == mode(admin) == 0o600
    lines = [line for line in client.read_text().splitlines() if not line.startswith("#")]
    assert dict(line.split("=", 1) for line in lines) == {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "app",
        "sasl.password": security.material.password("app"),
        "ssl.ca.location": str(security.material.ca_cert),
    }
    loaded = load_command_config(str(admin))
    assert (loaded.protocol, loaded.sasl_mechanism, loaded.sasl_username) == ("SASL_SSL", "SCRAM-SHA-512", "admin")
    assert loaded.sasl_password == security.material.password("admin")
    context = loaded.ssl_context()
    assert context is not None and context.check_hostname

    # appliance.json says a secured appliance is one; a plain one has no security object.
    assert "security" in Appliance(tmp_path, nodes=1, security=security).describe()
    assert "security" not in Appliance(tmp_path / "p", nodes=1).describe()


def test_the_acl_tables_and_credential_check() -> None:
    app = bindings({"app": APP_ACLS})
    assert {(b.pattern.resource_type, b.entry.operation) for b in app} == {
        (ResourceType.TOPIC, AclOperation.READ),
        (ResourceType.TOPIC, AclOperation.WRITE),
        (ResourceType.TOPIC, AclOperation.CREATE),
        (ResourceType.TOPIC, AclOperation.DESCRIBE),
        (ResourceType.GROUP, AclOperation.READ),
    }
    assert all(b.entry.principal == "User:app" and b.pattern.name == "*" for b in app)
    target = bindings({"mirror": MIRROR_TARGET_ACLS})
    assert any(
        b.pattern.resource_type is ResourceType.CLUSTER and b.entry.operation is AclOperation.CLUSTER_ACTION
        for b in target
    )
    mechanism = ScramMechanism.from_name("SCRAM-SHA-512")
    credential = make_credential(mechanism, "s3cret", iterations=4096)
    assert matches(credential, mechanism, "s3cret")
    assert not matches(credential, mechanism, "other")
    assert not matches(credential, ScramMechanism.from_name("SCRAM-SHA-256"), "s3cret")


def test_failover_and_the_audit_reach_a_secured_appliance_as_admin(tmp_path: Path) -> None:
    security, _ = ApplianceSecurity.prepare(tmp_path, {"east": [1], "west": [1]})
    described = tmp_path / "appliance.json"
    data = Appliance(tmp_path, nodes=1, security=security).describe()
    for entry in data["sites"].values():  # type: ignore[attr-defined]
        entry.update(zookeeper="127.0.0.1:2181", bootstrap="127.0.0.1:9093", admin=[])  # as when the sites run
    data["links"][0]["admin"] = "http://127.0.0.1:8090"  # type: ignore[index]
    described.write_text(json.dumps(data))
    topology = load_topology(described)
    for name in ("east", "west"):
        site = topology.site(name)
        assert site.tls is not None and site.tls.ca == str(security.material.ca_cert)
        assert site.sasl is not None and (site.sasl.mechanism, site.sasl.username) == ("SCRAM-SHA-512", "admin")
        assert site.zookeeper_digest() == security.material.zookeeper_digest(name)
        client = site.client_security()
        assert client["sasl"].password == security.material.password("admin")
        assert client["ssl_context"].check_hostname
    # The audit's sides: each site's CA and admin user, as Kafka client settings for strait-kafka.
    found = resolve_link(described, "east-to-west", set())
    for side in ("source", "target"):
        secured = found[f"{side}_command_config"]
        assert (secured.protocol, secured.truststore, secured.check_hostname) == (
            "SASL_SSL",
            str(security.material.ca_cert),
            True,
        )
        assert (secured.sasl_mechanism, secured.sasl_username) == ("SCRAM-SHA-512", "admin")
        assert secured.sasl_password == security.material.password("admin")
        assert security.material.password("admin") not in repr(secured)
    # A side named on the command line keeps the command line's security.
    assert "source_command_config" not in resolve_link(described, "east-to-west", {"source"})
    assert "target_command_config" not in resolve_link(described, "east-to-west", {"target_command_config"})
