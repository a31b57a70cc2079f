"""node.tls.ServerTls: the server context from the ssl.* keys, its reload when the files change, principals."""

from __future__ import annotations

import contextlib
import re
import ssl
from pathlib import Path

import pytest

from node.config import NodeConfig
from node.tls import ServerTls, TlsError, inter_broker_context
from tests.tls import TestCa, subject

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def config(**props: str) -> NodeConfig:
    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t", "listeners": "SSL://127.0.0.1:0"}
    return NodeConfig.from_properties(base | {k.replace("_", "."): v for k, v in props.items()})


def served_subject(context: ssl.SSLContext, ca: Path) -> str:
    """The CN of the certificate ``context`` serves, read through an in-memory handshake."""
    client = ssl.create_default_context(cafile=str(ca))
    client.check_hostname = False
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_side=False)
    s = context.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (c, s):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    cert = c.getpeercert()
    assert cert is not None
    return dict(attr for rdn in cert["subject"] for attr in rdn)["commonName"]


def test_the_context_serves_the_keystore_and_asks_for_client_certificates_as_configured(tmp_path: Path) -> None:
    ca = TestCa(tmp_path)
    server = ca.issue("node", subject(CN="node-1"), ip="127.0.0.1", key_password="k3y")
    tls = ServerTls(
        config(
            ssl_keystore_location=str(server.pem),
            ssl_key_password="k3y",
            ssl_truststore_location=str(ca.pem),
            ssl_client_auth="required",
            ssl_enabled_protocols="TLSv1.3",
        ),
        "SSL",
    )
    context = tls.context()
    assert context.verify_mode == ssl.CERT_REQUIRED and tls.client_auth == "required"
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
    requested = ServerTls(config(ssl_keystore_location=str(server.pem), ssl_key_password="k3y",
                                 ssl_truststore_location=str(ca.pem), ssl_client_auth="requested"), "SSL")  # fmt: skip
    assert requested.context().verify_mode == ssl.CERT_OPTIONAL
    assert requested.context().minimum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize("case", ["missing", "not pem", "wrong password", "bad truststore"])
def test_files_that_do_not_load_are_named(tmp_path: Path, case: str) -> None:
    ca = TestCa(tmp_path)
    server = ca.issue("node", subject(CN="node-1"), ip="127.0.0.1", key_password="k3y")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    props = {"ssl_keystore_location": str(server.pem), "ssl_key_password": "k3y"}
    if case == "missing":
        props["ssl_keystore_location"] = str(tmp_path / "nope.pem")
    elif case == "not pem":
        props["ssl_keystore_location"] = str(junk)
    elif case == "wrong password":
        props["ssl_key_password"] = "wrong"
    else:
        props["ssl_truststore_location"] = str(junk)
    key = "ssl.truststore.location" if case == "bad truststore" else "ssl.keystore.location"
    with pytest.raises(TlsError, match=key):
        ServerTls(config(**props), "SSL")


def test_changed_files_are_reloaded_for_new_connections_and_bad_ones_ignored(tmp_path: Path) -> None:
    ca = TestCa(tmp_path)
    first = ca.issue("node", subject(CN="first"), ip="127.0.0.1")
    clock = Clock()
    tls = ServerTls(config(ssl_keystore_location=str(first.pem)), "SSL", clock=clock)
    assert served_subject(tls.context(), ca.pem) == "first"
    ca.issue("node", subject(CN="second"), ip="127.0.0.1")  # the same path, new contents
    assert served_subject(tls.context(), ca.pem) == "first"  # not looked at again within a second
    clock.now += 1.5
    assert served_subject(tls.context(), ca.pem) == "second" and tls.reloads == 1
    first.pem.write_text("half a file")
    clock.now += 1.5
    assert served_subject(tls.context(), ca.pem) == "second" and tls.reloads == 1  # kept the working one
    ca.issue("node", subject(CN="third"), ip="127.0.0.1")
    clock.now += 1.5
    assert served_subject(tls.context(), ca.pem) == "third" and tls.reloads == 2


def test_the_principal_is_the_mapped_subject_or_anonymous(tmp_path: Path) -> None:
    ca = TestCa(tmp_path)
    server = ca.issue("node", subject(CN="node-1"), ip="127.0.0.1")
    tls = ServerTls(
        config(ssl_keystore_location=str(server.pem), ssl_principal_mapping_rules="RULE:^CN=([^,]*),OU=ops,.*$/$1/L"),
        "SSL",
    )
    alice = {"subject": ((("countryName", "US"),), (("organizationName", "Acme"),),
                         (("organizationalUnitName", "ops"),), (("commonName", "Alice"),))}  # fmt: skip
    assert tls.principal(alice) == "User:alice"
    assert tls.principal(None) == tls.principal({}) == "User:ANONYMOUS"
    with pytest.raises(TlsError, match=re.escape("no rule of ssl.principal.mapping.rules matches 'CN=eve,O=Evil'")):
        tls.principal({"subject": ((("organizationName", "Evil"),), (("commonName", "eve"),))})


def two_listener_config(tmp_path: Path, **extra: str) -> tuple[NodeConfig, TestCa, TestCa]:
    """INTERNAL and CLIENTS, both SSL, each with its own CA and certificate through listener.name.* keys."""
    internal_ca, public_ca = TestCa(tmp_path / "internal", "internal CA"), TestCa(tmp_path / "public", "public CA")
    internal = internal_ca.issue("internal", subject(CN="node-internal"), ip="127.0.0.1")
    public = public_ca.issue("public", subject(CN="node-public"), ip="127.0.0.1", key_password="k3y")
    props = {
        "broker.id": "1",
        "zookeeper.connect": "127.0.0.1:2181/t",
        "listeners": "INTERNAL://127.0.0.1:0,CLIENTS://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:SSL,CLIENTS:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.ssl.keystore.location": str(internal.pem),
        "listener.name.internal.ssl.truststore.location": str(internal_ca.pem),
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.clients.ssl.keystore.location": str(public.pem),
        "listener.name.clients.ssl.key.password": "k3y",
    }
    return NodeConfig.from_properties(props | extra), internal_ca, public_ca


def test_each_listener_serves_its_own_certificate_and_asks_for_client_certificates_its_own_way(
    tmp_path: Path,
) -> None:
    cfg, internal_ca, public_ca = two_listener_config(tmp_path)
    internal, clients = ServerTls(cfg, "INTERNAL"), ServerTls(cfg, "CLIENTS")
    assert served_subject(clients.context(), public_ca.pem) == "node-public"
    assert (internal.client_auth, clients.client_auth) == ("required", "none")
    with pytest.raises(ssl.SSLCertVerificationError):  # CLIENTS' certificate is not from the internal CA
        served_subject(clients.context(), internal_ca.pem)
    assert internal.context().get_ca_certs()[0]["subject"] == ((("commonName", "internal CA"),),)
    assert clients.context().get_ca_certs() == []


def test_each_listener_reloads_its_own_files(tmp_path: Path) -> None:
    cfg, _, public_ca = two_listener_config(tmp_path)
    clock = Clock()
    internal, clients = ServerTls(cfg, "INTERNAL", clock=clock), ServerTls(cfg, "CLIENTS", clock=clock)
    public_ca.issue("public", subject(CN="node-public-renewed"), ip="127.0.0.1", key_password="k3y")
    clock.now += 1.5
    assert served_subject(clients.context(), public_ca.pem) == "node-public-renewed"
    internal.context()
    assert (clients.reloads, internal.reloads) == (1, 0)


def test_errors_name_the_listeners_own_key(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    cfg, _, _ = two_listener_config(tmp_path, **{"listener.name.clients.ssl.keystore.location": missing})
    with pytest.raises(TlsError, match=re.escape(f"listener.name.clients.ssl.keystore.location {missing}: no such")):
        ServerTls(cfg, "CLIENTS")
    cfg, _, _ = two_listener_config(tmp_path, **{"listener.name.clients.ssl.key.password": "wrong-secret"})
    with pytest.raises(TlsError, match=re.escape("listener.name.clients.ssl.keystore.location")) as err:
        ServerTls(cfg, "CLIENTS")
    assert "wrong-secret" not in str(err.value)


def test_the_inter_broker_client_uses_the_inter_broker_listeners_certificate_and_cas(tmp_path: Path) -> None:
    cfg, _, _ = two_listener_config(tmp_path)
    client = inter_broker_context(cfg)
    assert client is not None and client.check_hostname
    assert [c["subject"] for c in client.get_ca_certs()] == [((("commonName", "internal CA"),),)]
    # It passes the INTERNAL listener's client-certificate check, and fails CLIENTS' server check.
    assert handshake(client, ServerTls(cfg, "INTERNAL").context()) == "node-internal"
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(client, ServerTls(cfg, "CLIENTS").context())
    other, _, _ = two_listener_config(tmp_path / "other", **{"inter.broker.listener.name": "CLIENTS"})
    over_clients = inter_broker_context(other)  # CLIENTS has no truststore: the system CAs
    assert over_clients is not None
    assert ((("commonName", "internal CA"),),) not in [c["subject"] for c in over_clients.get_ca_certs()]


def handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> str:
    """An in-memory handshake; the CN of the client certificate the server saw (raises on a failure)."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_side=False, server_hostname="127.0.0.1")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(10):
        for i, side in enumerate((c, s)):
            try:
                side.do_handshake()
                done[i] = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    assert all(done)
    cert = s.getpeercert()
    assert cert, "the server saw no client certificate"
    return dict(attr for rdn in cert["subject"] for attr in rdn)["commonName"]
