"""SASL/PLAIN (RFC 4616): the client sends its user name and password in one message.

The message is ``authzid NUL authcid NUL passwd`` in UTF-8. Like Kafka, the server accepts an
authorization id only when it is empty or equal to the authentication id (a client may not ask
to act as someone else), and answers a successful exchange with an empty token.

Users come from a users file (:func:`load_plain_users`), one ``name=password`` per line.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from pathlib import Path

from node.security._sasl import SaslFailure, invalid_credentials

MECHANISM = "PLAIN"


def _digest(password: str) -> bytes:
    # Comparing fixed-length digests keeps the comparison's time independent of both passwords' lengths.
    return hashlib.sha256(password.encode("utf-8")).digest()


# What an unknown user's password is compared with, so that an unknown user costs the same work as a known one.
_NO_PASSWORD = _digest("")


class PlainServer:
    """The server side of one PLAIN exchange against a fixed table of users and passwords."""

    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._state = "waiting"  # then "complete" or "failed"
        self._authorization_id = ""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        if not self.complete:
            raise RuntimeError("the SASL/PLAIN exchange has not completed")
        return self._authorization_id

    def step(self, client_message: bytes) -> bytes:
        """Check the client's one message; returns the empty reply or raises SaslFailure."""
        if self._state != "waiting":
            raise SaslFailure("SASL/PLAIN exchange already ended: no further messages are accepted")
        self._state = "failed"  # until proven otherwise
        authzid, user, password = _parse(client_message)
        expected = self._users.get(user)
        matches = hmac.compare_digest(_digest(password), _NO_PASSWORD if expected is None else _digest(expected))
        if expected is None or not matches:
            raise invalid_credentials(MECHANISM)
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self._authorization_id = user
        self._state = "complete"
        return b""


def _parse(message: bytes) -> tuple[str, str, str]:
    """Split a PLAIN message into (authzid, authcid, passwd); raises SaslFailure when it is malformed.

    The errors describe the shape only: the message holds a password, so none of it is echoed.
    """
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SaslFailure(f"Invalid SASL/PLAIN message: not UTF-8 (bad byte at offset {e.start})") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise SaslFailure(
            f"Invalid SASL/PLAIN message: expected 3 NUL-separated fields (authzid, user, password), got {len(parts)}"
        )
    authzid, user, password = parts
    if not user:
        raise SaslFailure("Invalid SASL/PLAIN message: the user name is empty")
    if not password:
        raise SaslFailure("Invalid SASL/PLAIN message: the password is empty")
    return authzid, user, password


def load_plain_users(path: str | Path) -> dict[str, str]:
    """Read a PLAIN users file: one ``name=password`` a line, ``#`` comments and blank lines ignored.

    The name is everything before the first ``=`` (so it cannot contain one) and the password
    everything after it, spaces included. Raises ValueError naming the file and line for an
    empty name, a name with surrounding spaces or a NUL, an empty password, a line without
    ``=``, a name defined twice, or a file that is not UTF-8; OSError if it cannot be read.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 (bad byte at offset {e.start})") from None
    users: dict[str, str] = {}
    defined_on: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, password = line.partition("=")
        where = f"{path}:{number}"
        if not sep:
            raise ValueError(f"{where}: expected name=password, found no '='")
        if not name:
            raise ValueError(f"{where}: the user name before '=' is empty")
        if name != name.strip():
            raise ValueError(f"{where}: user name {name!r} has leading or trailing spaces")
        if "\0" in name or "\0" in password:
            raise ValueError(f"{where}: user {name!r}: names and passwords may not contain NUL")
        if not password:
            raise ValueError(f"{where}: user {name!r} has an empty password")
        if name in users:
            raise ValueError(f"{where}: user {name!r} is already defined on line {defined_on[name]}")
        users[name] = password
        defined_on[name] = number
    return users
