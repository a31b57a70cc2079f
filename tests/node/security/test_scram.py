"""SCRAM-SHA-256/512: RFC 7677's example byte for byte, a client written from RFC 5802, kafka-python's client,
Kafka's credential text and znode formats, and every way a client message can be refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable

import pytest

from node.security._sasl import SaslFailure, SaslServer
from node.security._scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_salted_password,
    credential_from_text,
    credential_to_text,
    decode_user_config,
    encode_user_config,
    make_credential,
    user_from_znode_name,
    user_znode_name,
)
from node.security._servers import new_server

pytestmark = pytest.mark.unit

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
BOTH = pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.mechanism_name)


def bad_credentials(mechanism: ScramMechanism) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        + mechanism.mechanism_name
    )


class ScramClient:
    """The client side of RFC 5802, written from the RFC, to drive the server (tests only)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        user: str,
        password: str,
        *,
        nonce: str = "fyko+d2lbbFgONRv9qkxdawL",
        authzid: str = "",
        flag: str = "n",
        extensions: str = "",
    ) -> None:
        self.mechanism = mechanism
        self.password = password
        self.nonce = nonce
        self.gs2_header = f"{flag},{'a=' + escape(authzid) if authzid else ''},"
        self.first_bare = f"n={escape(user)},r={nonce}{extensions}"
        self.server_signature = b""

    def first(self) -> bytes:
        return (self.gs2_header + self.first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        attributes = dict(a.split("=", 1) for a in server_first.decode().split(","))
        combined_nonce, salt, iterations = attributes["r"], base64.b64decode(attributes["s"]), int(attributes["i"])
        assert combined_nonce.startswith(self.nonce) and len(combined_nonce) > len(self.nonce)
        name = self.mechanism.hash_name
        salted = hashlib.pbkdf2_hmac(name, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", name).digest()
        stored_key = hashlib.new(name, client_key).digest()
        without_proof = f"c={base64.b64encode(self.gs2_header.encode()).decode()},r={combined_nonce}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        client_signature = hmac.new(stored_key, auth_message, name).digest()
        proof = bytes(k ^ s for k, s in zip(client_key, client_signature, strict=True))
        self.server_signature = hmac.new(hmac.new(salted, b"Server Key", name).digest(), auth_message, name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        assert server_final == b"v=" + base64.b64encode(self.server_signature)


def escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def store(mechanism: ScramMechanism, users: dict[str, str]) -> Callable[[str, str], ScramCredential | None]:
    credentials = {user: make_credential(mechanism, password) for user, password in users.items()}

    def lookup(mechanism_name: str, user: str) -> ScramCredential | None:
        assert mechanism_name == mechanism.mechanism_name
        return credentials.get(user)

    return lookup


def authenticate(server: SaslServer, client: ScramClient) -> None:
    server_first = server.step(client.first())
    client.verify(server.step(client.final(server_first)))


# -- RFC 7677 and the round trip ------------------------------------------------------------------


def test_rfc_7677_example_byte_for_byte() -> None:
    # RFC 7677 section 3: user "user", password "pencil".
    credential = make_credential(SHA256, "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), iterations=4096)
    server = ScramServer(
        SHA256, lambda _m, user: credential if user == "user" else None, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.step(client.first())
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final = client.final(server_first)
    assert client_final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server.step(client_final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user" and server.mechanism == "SCRAM-SHA-256"


@BOTH
def test_a_client_written_from_the_rfc_authenticates(mechanism: ScramMechanism) -> None:
    server = ScramServer(mechanism, store(mechanism, {"alice": "alice-secret"}))
    assert not server.complete
    with pytest.raises(RuntimeError, match="has not completed"):
        _ = server.authorization_id
    authenticate(server, ScramClient(mechanism, "alice", "alice-secret"))
    assert server.complete and server.authorization_id == "alice" and server.mechanism == mechanism.mechanism_name


def test_the_server_nonce_is_fresh_for_each_exchange() -> None:
    lookup = store(SHA512, {"alice": "alice-secret"})
    nonces = {ScramServer(SHA512, lookup).step(b"n,,n=alice,r=abc").split(b",")[0] for _ in range(3)}
    assert len(nonces) == 3 and all(n.startswith(b"r=abc") and len(n) > 20 for n in nonces)


@BOTH
def test_a_wrong_password_fails_at_the_proof(mechanism: ScramMechanism) -> None:
    server = ScramServer(mechanism, store(mechanism, {"alice": "alice-secret"}))
    client = ScramClient(mechanism, "alice", "not-the-secret")
    server_first = server.step(client.first())
    with pytest.raises(SaslFailure) as failure:
        server.step(client.final(server_first))
    assert str(failure.value) == bad_credentials(mechanism)
    assert not server.complete


@BOTH
def test_an_unknown_user_looks_like_a_known_one_until_the_proof(mechanism: ScramMechanism) -> None:
    lookup = store(mechanism, {"alice": "alice-secret"})
    shape = re.compile(rb"r=abc[!-+\--~]+,s=[A-Za-z0-9+/]{43}=,i=4096")
    known = ScramServer(mechanism, lookup).step(b"n,,n=alice,r=abc")
    unknown = ScramServer(mechanism, lookup).step(b"n,,n=mallory,r=abc")
    assert shape.fullmatch(known) and shape.fullmatch(unknown)

    def salt(user: str) -> bytes:
        return ScramServer(mechanism, lookup).step(f"n,,n={user},r=abc".encode()).split(b",")[1]

    assert salt("mallory") == salt("mallory") != salt("eve")  # stable, like a stored salt, and per user

    server = ScramServer(mechanism, lookup)
    client = ScramClient(mechanism, "mallory", "any-password")
    server_first = server.step(client.first())
    with pytest.raises(SaslFailure) as failure:
        server.step(client.final(server_first))
    assert str(failure.value) == bad_credentials(mechanism)


def test_a_shared_unknown_user_secret_gives_the_same_fake_salt_on_every_broker() -> None:
    lookup = store(SHA256, {})
    first, second = (ScramServer(SHA256, lookup, unknown_user_secret=b"cluster secret") for _ in range(2))
    assert first.step(b"n,,n=mallory,r=abc").split(b",")[1] == second.step(b"n,,n=mallory,r=abc").split(b",")[1]


def test_a_credential_of_the_other_mechanism_never_authenticates() -> None:
    sha512_credential = make_credential(SHA512, "alice-secret")
    server = ScramServer(SHA256, lambda _m, _u: sha512_credential)
    with pytest.raises(SaslFailure, match=re.escape(bad_credentials(SHA256))):
        server.step(b"n,,n=alice,r=abc")


# -- What the client may say ----------------------------------------------------------------------


def test_user_names_with_escaped_commas_and_equals_signs() -> None:
    asked: list[str] = []
    credential = make_credential(SHA256, "pw")

    def lookup(_mechanism: str, user: str) -> ScramCredential:
        asked.append(user)
        return credential

    server = ScramServer(SHA256, lookup)
    client = ScramClient(SHA256, "CN=Bob,O=Org", "pw", authzid="CN=Bob,O=Org")
    assert client.first().startswith(b"n,a=CN=3DBob=2CO=3DOrg,n=CN=3DBob=2CO=3DOrg,r=")
    authenticate(server, client)
    assert asked == ["CN=Bob,O=Org"] and server.authorization_id == "CN=Bob,O=Org"


def test_a_unicode_user_name() -> None:
    server = ScramServer(SHA256, store(SHA256, {"jürgen": "pässword"}))
    authenticate(server, ScramClient(SHA256, "jürgen", "pässword"))
    assert server.authorization_id == "jürgen"


@pytest.mark.parametrize("user", ["a=2Db", "a=", "=3", "a=2c"])
def test_an_equals_sign_must_start_an_escape(user: str) -> None:
    server = ScramServer(SHA256, store(SHA256, {}))
    with pytest.raises(SaslFailure, match="has '=' not followed by 2C or 3D"):
        server.step(f"n,,n={user},r=abc".encode())


def test_an_authzid_must_name_the_user() -> None:
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw", "admin": "pw"}))
    with pytest.raises(SaslFailure, match="authorization id that is different from username"):
        server.step(ScramClient(SHA256, "alice", "pw", authzid="admin").first())
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    authenticate(server, ScramClient(SHA256, "alice", "pw", authzid="alice"))
    assert server.authorization_id == "alice"


def test_a_client_that_supports_channel_binding_but_was_not_offered_it_is_accepted() -> None:
    # RFC 5802 section 6: "y" means the client could bind but believes the server cannot; we cannot.
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    client = ScramClient(SHA256, "alice", "pw", flag="y")
    server_first = server.step(client.first())
    final = client.final(server_first)
    assert final.startswith(b"c=eSws,")  # base64("y,,")
    client.verify(server.step(final))


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (b"p=tls-unique,,n=alice,r=abc", "Channel binding 'tls-unique' is not supported"),
        (b"x,,n=alice,r=abc", "gs2 channel binding flag 'x'"),
        (b"n,alice,n=alice,r=abc", "gs2 authzid 'alice' does not start with 'a='"),
        (b"n,a=,n=alice,r=abc", "authzid '' is empty"),
        (b"n=alice,r=abc", "expected a gs2 header"),
        (b"n,,m=ext,n=alice,r=abc", "Mandatory SCRAM extension"),
        (b"n,,r=abc,n=alice", "expected 'n=<user>,r=<nonce>'"),
        (b"n,,n=alice", "expected 'n=<user>,r=<nonce>'"),
        (b"n,,n=alice,r=", "nonce '' is empty or not printable"),
        (b"n,,n=alice,r=a b", "nonce 'a b' is empty or not printable"),
        (b"n,,n=alice,r=abc,1x=y", "attribute '1x=y' is not name=value"),
        (b"n,,n=alice,r=abc,tokenauth=true", "Delegation token authentication"),
        (b"n,,n=alice,r=abc,tokenauth=TRUE", "Delegation token authentication"),
        (b"n,,n=al\xffice,r=abc", "not UTF-8 (bad byte at offset 7)"),
        (b"n,,n=al\x00ice,r=abc", "contains a NUL"),
    ],
)
def test_a_bad_client_first_message_is_refused(message: bytes, problem: str) -> None:
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    with pytest.raises(SaslFailure, match=re.escape(problem)):
        server.step(message)
    with pytest.raises(SaslFailure, match="already failed"):  # a failed exchange stays failed
        server.step(message)
    assert not server.complete


def test_extensions_other_than_a_delegation_token_are_ignored() -> None:
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    authenticate(server, ScramClient(SHA256, "alice", "pw", extensions=",tokenauth=false,traceid=42"))
    assert server.authorization_id == "alice"


def final_message_tampered(edit: Callable[[bytes], bytes]) -> SaslFailure:
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    client = ScramClient(SHA256, "alice", "pw")
    final = client.final(server.step(client.first()))
    with pytest.raises(SaslFailure) as failure:
        server.step(edit(final))
    assert not server.complete
    return failure.value


def test_a_tampered_nonce_is_refused() -> None:
    failure = final_message_tampered(
        lambda m: m.replace(b",r=fyko+d2lbbFgONRv9qkxdawL", b",r=fyko+d2lbbFgONRv9qkxdawM")
    )
    assert str(failure) == "Invalid client nonce in the final client message"


def test_a_final_message_with_only_the_client_nonce_is_refused() -> None:
    failure = final_message_tampered(lambda m: re.sub(rb",r=[^,]+", b",r=fyko+d2lbbFgONRv9qkxdawL", m))
    assert str(failure) == "Invalid client nonce in the final client message"


def test_tampered_channel_binding_is_refused() -> None:
    failure = final_message_tampered(lambda m: m.replace(b"c=biws", b"c=eSws"))
    assert str(failure) == "Channel binding data 'y,,' does not match the gs2 header 'n,,' of the client-first message"


def test_a_tampered_proof_is_refused() -> None:
    def flip_a_bit(message: bytes) -> bytes:
        head, proof = message.split(b",p=")
        raw = bytearray(base64.b64decode(proof))
        raw[0] ^= 1
        return head + b",p=" + base64.b64encode(bytes(raw))

    assert str(final_message_tampered(flip_a_bit)) == bad_credentials(SHA256)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda m: m.split(b",p=")[0], "no proof (',p=') at the end"),
        (lambda m: m.split(b",p=")[0] + b",p=AAAA", "proof is 3 bytes, SCRAM-SHA-256 proofs are 32"),
        (lambda m: m.split(b",p=")[0] + b",p=not base64!", "channel binding or proof is not valid base64"),
        (lambda m: m.replace(b"c=biws", b"c=biw"), "channel binding or proof is not valid base64"),
        (lambda m: m.replace(b"c=biws,", b""), "expected 'c=<channel binding>,r=<nonce>'"),
        (lambda m: m.replace(b",p=", b",x y,p="), "attribute 'x y' is not name=value"),
        (lambda m: b"\xff" + m, "not UTF-8"),
    ],
)
def test_a_bad_client_final_message_is_refused(edit: Callable[[bytes], bytes], problem: str) -> None:
    assert str(final_message_tampered(edit)).startswith(f"Invalid SCRAM client-final message: {problem}")


def test_messages_out_of_order_or_after_the_end_are_refused() -> None:
    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    client = ScramClient(SHA256, "alice", "pw")
    with pytest.raises(SaslFailure, match="Invalid SCRAM client-first message"):
        server.step(b"c=biws,r=abc,p=AAAA")  # a final message first

    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    server_first = server.step(client.first())
    with pytest.raises(SaslFailure, match="Invalid SCRAM client-final message"):
        server.step(client.first())  # the first message again
    assert not server.complete

    server = ScramServer(SHA256, store(SHA256, {"alice": "pw"}))
    client = ScramClient(SHA256, "alice", "pw")
    server_first = server.step(client.first())
    server.step(client.final(server_first))
    with pytest.raises(SaslFailure, match="SCRAM-SHA-256 exchange already complete"):
        server.step(client.first())
    assert server.complete and server.authorization_id == "alice"  # a stray message does not undo the login


def test_a_server_nonce_must_be_printable() -> None:
    with pytest.raises(ValueError, match="server nonce 'a,b'"):
        ScramServer(SHA256, store(SHA256, {}), server_nonce="a,b")


# -- kafka-python's own SCRAM client --------------------------------------------------------------


@BOTH
def test_kafka_pythons_scram_client_authenticates(mechanism: ScramMechanism) -> None:
    from kafka.net.sasl.scram import SaslMechanismScram

    server = ScramServer(mechanism, store(mechanism, {"alice": "alice-secret"}))
    client = SaslMechanismScram(
        sasl_plain_username="alice", sasl_plain_password="alice-secret", sasl_mechanism=mechanism.mechanism_name
    )
    client.receive(server.step(client.auth_bytes()))
    client.receive(server.step(client.auth_bytes()))  # raises ValueError if our signature were wrong
    assert client.is_done() and client.is_authenticated()
    assert server.complete and server.authorization_id == "alice"


@BOTH
def test_kafka_pythons_scram_client_with_a_wrong_password_is_refused(mechanism: ScramMechanism) -> None:
    from kafka.net.sasl.scram import SaslMechanismScram

    server = ScramServer(mechanism, store(mechanism, {"alice": "alice-secret"}))
    client = SaslMechanismScram(
        sasl_plain_username="alice", sasl_plain_password="guess", sasl_mechanism=mechanism.mechanism_name
    )
    client.receive(server.step(client.auth_bytes()))
    with pytest.raises(SaslFailure, match=re.escape(bad_credentials(mechanism))):
        server.step(client.auth_bytes())


# -- The factory ----------------------------------------------------------------------------------


def test_the_factory_makes_scram_servers_and_names_refused_mechanisms() -> None:
    lookup = store(SHA512, {"alice": "alice-secret"})
    server = new_server("SCRAM-SHA-512", plain_users=None, scram_lookup=lookup)
    assert server.mechanism == "SCRAM-SHA-512"
    authenticate(server, ScramClient(SHA512, "alice", "alice-secret"))
    assert server.complete and server.authorization_id == "alice"
    with pytest.raises(ValueError, match="'SCRAM-SHA-256' is not enabled"):
        new_server("SCRAM-SHA-256", plain_users={"a": "b"}, scram_lookup=None)
    with pytest.raises(ValueError, match="unknown SASL mechanism 'GSSAPI'"):
        new_server("GSSAPI", plain_users={"a": "b"}, scram_lookup=lookup)


def test_mechanisms_by_name() -> None:
    assert ScramMechanism.from_name("SCRAM-SHA-256") is SHA256 and SHA256.key_size == 32
    assert ScramMechanism.from_name("SCRAM-SHA-512") is SHA512 and SHA512.key_size == 64
    with pytest.raises(ValueError, match="unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        ScramMechanism.from_name("SCRAM-SHA-1")


# -- Credentials ----------------------------------------------------------------------------------


@BOTH
def test_a_credential_from_the_salted_password_equals_one_from_the_password(mechanism: ScramMechanism) -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, b"alice-secret", salt, 8192)
    from_password = make_credential(mechanism, "alice-secret", salt=salt, iterations=8192)
    assert credential_from_salted_password(mechanism, salt, salted, 8192) == from_password
    assert len(from_password.stored_key) == len(from_password.server_key) == mechanism.key_size
    with pytest.raises(ValueError, match=f"salted password is {mechanism.key_size} bytes, got 20"):
        credential_from_salted_password(mechanism, salt, salted[:20], 8192)


def test_a_new_credential_has_a_random_32_byte_salt() -> None:
    first, second = make_credential(SHA256, "pw"), make_credential(SHA256, "pw")
    assert len(first.salt) == 32 and first.salt != second.salt and first.iterations == 4096
    assert "stored_key" not in repr(first) and "server_key" not in repr(first)


@pytest.mark.parametrize("iterations", [MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 0])
def test_new_credentials_keep_to_kafkas_iteration_bounds(iterations: int) -> None:
    with pytest.raises(ValueError, match=f"SCRAM iterations {iterations} is outside Kafka's range 4096..16384"):
        make_credential(SHA256, "pw", iterations=iterations)
    with pytest.raises(ValueError, match=f"SCRAM iterations {iterations} is outside"):
        credential_from_salted_password(SHA256, b"salt", bytes(32), iterations)


def test_the_iteration_bounds_themselves_are_allowed() -> None:
    assert make_credential(SHA256, "pw", iterations=MAX_ITERATIONS).iterations == 16384
    assert make_credential(SHA256, "pw", iterations=MIN_ITERATIONS).iterations == 4096


def test_a_credential_needs_a_salt_and_matching_keys() -> None:
    with pytest.raises(ValueError, match="non-empty salt"):
        make_credential(SHA256, "pw", salt=b"")
    with pytest.raises(ValueError, match=r"stored_key \(32 bytes\) and server_key \(64 bytes\)"):
        ScramCredential(salt=b"s", stored_key=bytes(32), server_key=bytes(64), iterations=4096)


# KIP-84's example: what `kafka-configs --zookeeper` stored for alice, password alice-secret.
KAFKA_ALICE_SHA512 = (
    "salt=djR5dXdtZGNqamVpeml6NGhiZmMwY3hrbg==,"
    "stored_key=sb5jkqStV9RwPVTGxG1ZJHxF89bqjsD1jT4SFDK4An2goSnWpbNdY0nkq0fNV8xFcZqb7MVMJ1tyEgif5OXKDQ==,"
    "server_key=3EfuHB4LPOcjDH0O5AysSSPiLskQfM5K9+mOzGmkixasmWEGJWZv7svtgkP+acO2Q9ms9WQQ9EndAJCvKHmjjg==,"
    "iterations=4096"
)


def test_a_credential_kafka_wrote_authenticates_its_user() -> None:
    credential = credential_from_text(KAFKA_ALICE_SHA512)
    assert credential.salt == b"v4yuwmdcjjeiziz4hbfc0cxkn" and credential.iterations == 4096
    assert credential == make_credential(SHA512, "alice-secret", salt=credential.salt)
    assert credential_to_text(credential) == KAFKA_ALICE_SHA512
    server = ScramServer(SHA512, lambda _m, user: credential if user == "alice" else None)
    authenticate(server, ScramClient(SHA512, "alice", "alice-secret"))


def test_credential_text_round_trips_and_takes_fields_in_any_order() -> None:
    credential = make_credential(SHA256, "pw")
    text = credential_to_text(credential)
    assert re.fullmatch(
        r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,server_key=[A-Za-z0-9+/=]+,iterations=4096", text
    )
    assert credential_from_text(text) == credential
    assert credential_from_text(",".join(reversed(text.split(",")))) == credential


def test_credentials_kafka_stored_above_the_new_credential_maximum_are_still_read() -> None:
    salt, key = base64.b64encode(b"salt").decode(), base64.b64encode(bytes(32)).decode()
    text = f"salt={salt},stored_key={key},server_key={key},iterations=20000"
    assert credential_from_text(text).iterations == 20000


SALT, KEY, KEY64 = (
    base64.b64encode(b"salt").decode(),
    base64.b64encode(b"k" * 32).decode(),
    base64.b64encode(bytes(64)).decode(),
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"salt={SALT},stored_key={KEY},server_key={KEY}", "lacks iterations"),
        (f"stored_key={KEY},iterations=4096", "lacks salt, server_key"),
        (f"salt={SALT},salt={SALT},stored_key={KEY},server_key={KEY},iterations=4096", "has field 'salt' twice"),
        (f"salt={SALT},stored_key={KEY},server_key={KEY},iterations=4096,pepper=x", "field 5 is unknown ('pepper')"),
        (f"salt={SALT},{KEY},server_key={KEY},iterations=4096", "field 2 is unknown (with a name that is not a word)"),
        (f"salt={SALT},stored_key={KEY},server_key={KEY},iterations=many", "iterations is not a decimal number"),
        (f"salt={SALT},stored_key={KEY},server_key={KEY},iterations=-4096", "iterations is not a decimal number"),
        (f"salt={SALT},stored_key=%%%,server_key={KEY},iterations=4096", "stored_key is not valid base64"),
        (f"salt={SALT},stored_key={KEY},server_key={KEY},iterations=4095", "4095 is below Kafka's minimum of 4096"),
        (f"salt=,stored_key={KEY},server_key={KEY},iterations=4096", "non-empty salt"),
        (
            f"salt={SALT},stored_key={KEY},server_key={KEY64},iterations=4096",
            "must be non-empty and of the same length",
        ),
        ("", "field 1 is not name=value"),
    ],
)
def test_a_malformed_credential_text_is_refused_without_quoting_keys(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)) as failure:
        credential_from_text(text)
    assert KEY not in str(failure.value)


# -- The /config/users/<user> znode ----------------------------------------------------------------


def test_the_user_config_znode_is_kafkas_json() -> None:
    config = {"SCRAM-SHA-512": KAFKA_ALICE_SHA512}
    data = encode_user_config(config)
    assert data == b'{"version":1,"config":{"SCRAM-SHA-512":"' + KAFKA_ALICE_SHA512.encode() + b'"}}'
    assert decode_user_config(data) == config
    spaced = b'{\n  "version" : 1,\n  "config" : { "SCRAM-SHA-512" : "' + KAFKA_ALICE_SHA512.encode() + b'" }\n}'
    assert decode_user_config(spaced) == config
    assert decode_user_config(b"") == {}  # a znode without data
    assert decode_user_config(b'{"version":1}') == {}  # as Kafka reads it: no config


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"{not json", "is not JSON"),
        (b'["version", 1]', "is a JSON list, not an object"),
        (b'{"version":1,"config":"SCRAM-SHA-256"}', "'config' is a JSON str, not an object"),
        (b'{"version":1,"config":{"SCRAM-SHA-256":4096}}', "user config 'SCRAM-SHA-256' is a JSON int, not a string"),
        (b'{"version":1,"config":{"a":"\xff"}}', "is not JSON"),
    ],
)
def test_malformed_user_config_is_refused(data: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        decode_user_config(data)


@pytest.mark.parametrize(
    ("user", "znode"),
    [
        ("alice", "alice"),
        ("a.b-c_d", "a.b-c_d"),
        ("CN=Bob, O=Org", "CN%3DBob%2C%20O%3DOrg"),
        ("jürgen", "j%C3%BCrgen"),
        # Kafka's SanitizerTest principal: every character outside [A-Za-z0-9._-] is percent-encoded.
        (
            "CN=Some characters !@#$%&*()_-+=';:,/~",
            "CN%3DSome%20characters%20%21%40%23%24%25%26%2A%28%29_-%2B%3D%27%3B%3A%2C%2F%7E",
        ),
    ],
)
def test_user_znode_names_are_kafkas_url_encoding(user: str, znode: str) -> None:
    assert user_znode_name(user) == znode
    assert user_from_znode_name(znode) == user


def test_znode_names_decode_as_javas_url_decoder_does() -> None:
    assert user_from_znode_name("Bob+Smith") == "Bob Smith"
    assert user_from_znode_name("cn%3dbob") == "cn=bob"  # lower-case hex too
    for bad, problem in [("100%", "'%' that is not followed"), ("%zz", "'%' that is not followed"), ("%C3", "UTF-8")]:
        with pytest.raises(ValueError, match=re.escape(problem)):
            user_from_znode_name(bad)
