"""The SCRAM and PLAIN clients against strait's own servers, in memory: RFC 7677's example byte for
byte, both mechanisms, user names that need escaping, and every server message the client refuses,
above all a server signature that does not verify."""

from __future__ import annotations

import base64

import pytest

from node.security._plain import PlainServer
from node.security._plain_client import PlainClient
from node.security._sasl import SaslFailure
from node.security._scram import MIN_ITERATIONS, ScramCredential, ScramMechanism, ScramServer, make_credential
from node.security._scram_client import ScramClient, ScramClientError, escape_saslname

pytestmark = pytest.mark.unit

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
BOTH = pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.mechanism_name)


def server_for(mechanism: ScramMechanism, users: dict[str, str]) -> ScramServer:
    credentials = {user: make_credential(mechanism, password) for user, password in users.items()}
    return ScramServer(mechanism, lambda _mechanism, user: credentials.get(user))


def run(client: ScramClient, server: ScramServer) -> None:
    """Drive both sides to the end; whichever refuses raises."""
    client_final = client.step(server.step(client.start()))
    assert client_final is not None
    assert client.step(server.step(client_final)) is None


def test_rfc_7677_example_byte_for_byte() -> None:
    # RFC 7677 section 3: user "user", password "pencil", both nonces and the salt as published.
    credential = make_credential(SHA256, "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), iterations=4096)
    server = ScramServer(
        SHA256, lambda _m, user: credential if user == "user" else None, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.mechanism == "SCRAM-SHA-256" and not client.complete
    client_first = client.start()
    assert client_first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.step(client_first)
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final = client.step(server_first)
    assert client_final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    server_final = server.step(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert client.step(server_final) is None
    assert client.complete and server.complete and server.authorization_id == "user"


@BOTH
def test_both_mechanisms_authenticate_against_strait_s_server(mechanism: ScramMechanism) -> None:
    server = server_for(mechanism, {"alice": "alice-secret"})
    client = ScramClient(mechanism, "alice", "alice-secret")
    run(client, server)
    assert client.complete and server.authorization_id == "alice"


def test_the_client_nonce_is_fresh_and_printable() -> None:
    firsts = {ScramClient(SHA512, "alice", "x").start() for _ in range(3)}
    assert len(firsts) == 3
    for first in firsts:
        nonce = first.decode().split(",r=", 1)[1]
        assert len(nonce) >= 24 and "," not in nonce and nonce.isprintable() and nonce.isascii()


def test_user_names_with_comma_and_equals_are_escaped() -> None:
    assert escape_saslname("a=b,c") == "a=3Db=2Cc"
    assert ScramClient(SHA256, "a=b,c", "secret", nonce="abc").start() == b"n,,n=a=3Db=2Cc,r=abc"
    server = server_for(SHA256, {"a=b,c": "secret"})
    run(ScramClient(SHA256, "a=b,c", "secret"), server)
    assert server.authorization_id == "a=b,c"
    other = server_for(SHA256, {"ü ser": "geheim"})
    run(ScramClient(SHA256, "ü ser", "geheim"), other)
    assert other.authorization_id == "ü ser"


@BOTH
def test_a_wrong_password_is_refused_by_the_server_and_the_client_never_completes(mechanism: ScramMechanism) -> None:
    server = server_for(mechanism, {"alice": "alice-secret"})
    client = ScramClient(mechanism, "alice", "wrong")
    client_final = client.step(server.step(client.start()))
    assert client_final is not None
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.step(client_final)
    assert not client.complete


@BOTH
def test_a_server_signature_that_does_not_verify_is_refused(mechanism: ScramMechanism) -> None:
    # A server that holds the user's StoredKey (enough to check the proof) but not the ServerKey,
    # e.g. one that copied half a credential: it accepts the client, then cannot sign.
    real = make_credential(mechanism, "alice-secret")
    forged = ScramCredential(
        salt=real.salt,
        stored_key=real.stored_key,
        server_key=bytes(mechanism.key_size),
        iterations=real.iterations,
    )
    server = ScramServer(mechanism, lambda _m, _user: forged)
    client = ScramClient(mechanism, "alice", "alice-secret")
    client_final = client.step(server.step(client.start()))
    assert client_final is not None
    server_final = server.step(client_final)  # the proof is accepted...
    assert server.complete
    with pytest.raises(ScramClientError, match="signature does not verify") as refused:
        client.step(server_final)  # ...but the server is not who it claims to be
    assert "alice-secret" not in str(refused.value)
    assert not client.complete
    with pytest.raises(RuntimeError, match="failed"):
        client.step(server_final)


def test_a_signature_off_by_one_bit_is_refused() -> None:
    server = server_for(SHA256, {"alice": "alice-secret"})
    client = ScramClient(SHA256, "alice", "alice-secret")
    client_final = client.step(server.step(client.start()))
    assert client_final is not None
    signature = bytearray(base64.b64decode(server.step(client_final)[2:]))
    signature[-1] ^= 1
    with pytest.raises(ScramClientError, match="does not verify"):
        client.step(b"v=" + base64.b64encode(bytes(signature)))


def started(nonce: str = "abc") -> ScramClient:
    client = ScramClient(SHA256, "alice", "alice-secret", nonce=nonce)
    client.start()
    return client


SALT = base64.b64encode(b"salt").decode()


@pytest.mark.parametrize(
    ("server_first", "problem"),
    [
        (f"r=xyzdef,s={SALT},i=4096", "does not extend the client's nonce"),
        (f"r=abc,s={SALT},i=4096", "does not extend the client's nonce"),  # no server part
        (f"r=abc\x7fdef,s={SALT},i=4096", "does not extend the client's nonce"),
        (f"r=abcdef,s={SALT},i={MIN_ITERATIONS - 1}", f"{MIN_ITERATIONS - 1} iterations, below the minimum"),
        (f"r=abcdef,s={SALT},i=4k", "not a decimal number"),
        ("r=abcdef,s=not base64!,i=4096", "salt is not valid base64"),
        ("r=abcdef,s=,i=4096", "salt is empty"),
        ("r=abcdef,i=4096", "expected 'r=<nonce>,s=<salt>,i=<iterations>'"),
        (f"s={SALT},r=abcdef,i=4096", "expected 'r=<nonce>,s=<salt>,i=<iterations>'"),
        (f"m=ext,r=abcdef,s={SALT},i=4096", "requires a SCRAM extension"),
        ("e=other-error", "expected 'r=<nonce>"),
    ],
)
def test_server_first_messages_the_client_refuses(server_first: str, problem: str) -> None:
    client = started()
    with pytest.raises(ScramClientError, match=problem):
        client.step(server_first.encode())
    assert not client.complete


def test_server_first_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(ScramClientError, match="not UTF-8"):
        started().step(b"r=abc\xff,s=c2FsdA==,i=4096")


def test_server_first_extensions_are_carried_into_the_auth_message() -> None:
    client_final = started().step(f"r=abcdef,s={SALT},i=4096,x=ext".encode())
    assert client_final is not None and client_final.startswith(b"c=biws,r=abcdef,p=")


@pytest.mark.parametrize(
    ("server_final", "problem"),
    [
        (b"e=invalid-proof", "the server refused the exchange: 'invalid-proof'"),
        (b"x=abc", "expected 'v=<signature>' or 'e=<error>'"),
        (b"v=***", "signature is not valid base64"),
        (b"v=", "does not verify"),
    ],
)
def test_server_final_messages_the_client_refuses(server_final: bytes, problem: str) -> None:
    client = started()
    client.step(f"r=abcdef,s={SALT},i=4096".encode())
    with pytest.raises(ScramClientError, match=problem):
        client.step(server_final)
    assert not client.complete


def test_steps_out_of_order_and_bad_nonces_are_programming_errors() -> None:
    client = ScramClient(SHA256, "alice", "x")
    with pytest.raises(RuntimeError, match="no server message is expected"):
        client.step(b"r=abc")
    client.start()
    with pytest.raises(RuntimeError, match="already started"):
        client.start()
    for nonce in ("", "a,b", "tab\t"):
        with pytest.raises(ValueError, match="printable"):
            ScramClient(SHA256, "alice", "x", nonce=nonce)


def test_plain_client_against_strait_s_server() -> None:
    client = PlainClient("alice", "alice-secret")
    assert client.mechanism == "PLAIN"
    server = PlainServer({"alice": "alice-secret"})
    message = client.start()
    assert message == b"\0alice\0alice-secret"
    assert client.step(server.step(message)) is None
    assert client.complete and server.authorization_id == "alice"
    with pytest.raises(RuntimeError):
        client.step(b"")
    with pytest.raises(SaslFailure, match="invalid credentials"):
        PlainServer({"alice": "alice-secret"}).step(PlainClient("alice", "wrong").start())
    with pytest.raises(ValueError, match="NUL"):
        PlainClient("al\0ice", "x")
