"""SASL/PLAIN (RFC 4616): one message, Kafka's authzid rule, malformed messages, and the users file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from node.security._plain import PlainServer, load_plain_users
from node.security._sasl import MECHANISMS, SaslFailure
from node.security._servers import new_server

pytestmark = pytest.mark.unit

USERS = {"alice": "alice-secret", "bob": "pässword with spaces"}
FIELDS = "expected 3 NUL-separated fields (authzid, user, password), "
BAD_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"


@pytest.mark.parametrize(
    "message",
    [b"\0alice\0alice-secret", b"alice\0alice\0alice-secret", "\0bob\0pässword with spaces".encode()],
)
def test_a_good_password_authenticates(message: bytes) -> None:
    server = PlainServer(USERS)
    assert not server.complete and server.mechanism == "PLAIN"
    with pytest.raises(RuntimeError, match="has not completed"):
        _ = server.authorization_id
    assert server.step(message) == b""
    assert server.complete and server.authorization_id == message.split(b"\0")[1].decode()


@pytest.mark.parametrize("message", [b"\0alice\0wrong", b"\0mallory\0alice-secret", b"\0Alice\0alice-secret"])
def test_a_wrong_password_and_an_unknown_user_fail_alike(message: bytes) -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslFailure) as failure:
        server.step(message)
    assert str(failure.value) == BAD_CREDENTIALS
    assert not server.complete


def test_an_authzid_other_than_the_user_is_refused() -> None:
    with pytest.raises(SaslFailure, match="authorization id that is different from username"):
        PlainServer(USERS).step(b"bob\0alice\0alice-secret")


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (b"alice", FIELDS + "got 1"),
        (b"alice\0alice-secret", FIELDS + "got 2"),
        (b"\0alice\0alice-secret\0extra", FIELDS + "got 4"),
        (b"", FIELDS + "got 1"),
        (b"\0\0alice-secret", "the user name is empty"),
        (b"\0alice\0", "the password is empty"),
        (b"\0alice\0secr\xe9t", "not UTF-8 (bad byte at offset 11)"),
    ],
)
def test_a_malformed_message_is_refused_without_echoing_it(message: bytes, problem: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslFailure) as failure:
        server.step(message)
    assert str(failure.value) == f"Invalid SASL/PLAIN message: {problem}"
    assert "secret" not in str(failure.value)


def test_nothing_is_accepted_after_the_one_message() -> None:
    server = PlainServer(USERS)
    server.step(b"\0alice\0alice-secret")
    with pytest.raises(SaslFailure, match="already ended"):
        server.step("\0bob\0pässword with spaces".encode())
    assert server.complete and server.authorization_id == "alice"

    failed = PlainServer(USERS)
    with pytest.raises(SaslFailure):
        failed.step(b"\0alice\0wrong")
    with pytest.raises(SaslFailure, match="already ended"):  # no second guess on the same exchange
        failed.step(b"\0alice\0alice-secret")
    assert not failed.complete


def test_kafka_pythons_plain_client_authenticates() -> None:
    from kafka.net.sasl.plain import SaslMechanismPlain

    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    server = PlainServer(USERS)
    client.receive(server.step(client.auth_bytes()))  # it sends authzid = user
    assert client.is_done() and client.is_authenticated()
    assert server.authorization_id == "alice"


def test_the_factory_makes_plain_servers_only_when_users_are_configured() -> None:
    assert MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    server = new_server("PLAIN", plain_users=USERS, scram_lookup=None)
    assert server.step(b"\0alice\0alice-secret") == b"" and server.authorization_id == "alice"
    with pytest.raises(ValueError, match="'PLAIN' is not enabled"):
        new_server("PLAIN", plain_users=None, scram_lookup=lambda _m, _u: None)
    with pytest.raises(ValueError, match=re.escape("unknown SASL mechanism 'plain'")):
        new_server("plain", plain_users=USERS, scram_lookup=None)


# -- The users file -------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plain-users"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_users_file_is_read_with_comments_and_blank_lines_ignored(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# PLAIN users\n\nalice=alice-secret\n   # indented comment\n"
        "bob=pässword with spaces\ncarol=a=b=c\r\ndave= leading space \n  \n",
    )
    assert load_plain_users(path) == {
        "alice": "alice-secret",
        "bob": "pässword with spaces",
        "carol": "a=b=c",  # only the first '=' separates
        "dave": " leading space ",
    }
    assert load_plain_users(str(write(tmp_path, ""))) == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alice=pw\nbob\n", ":2: expected name=password, found no '='"),
        ("=pw\n", ":1: the user name before '=' is empty"),
        ("# users\n alice=pw\n", ":2: user name ' alice' has leading or trailing spaces"),
        ("alice =pw\n", ":1: user name 'alice ' has leading or trailing spaces"),
        ("alice=\n", ":1: user 'alice' has an empty password"),
        ("alice=p\0w\n", ":1: user 'alice': names and passwords may not contain NUL"),
        ("alice=one\n\n# again\nalice=two\n", ":4: user 'alice' is already defined on line 1"),
    ],
)
def test_a_bad_users_file_names_the_file_and_line(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as failure:
        load_plain_users(path)
    assert str(failure.value) == f"{path}{problem}"


def test_a_users_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain-users"
    path.write_bytes(b"alice=caf\xe9\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}: not UTF-8 (bad byte at offset 9)")):
        load_plain_users(path)
    with pytest.raises(FileNotFoundError):
        load_plain_users(tmp_path / "missing")
