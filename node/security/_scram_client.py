"""The client side of SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), sans-IO.

The client sends two messages and checks two replies (the server side and the message grammar
are in ``_scram``)::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>[,<ext>...]
    client-final   c=biws,r=<client nonce><server nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>   or   e=<server error>

``biws`` is base64 of the gs2 header ``n,,`` (no channel binding, no authorization id). With
AuthMessage = client-first-bare "," server-first "," client-final-without-proof::

    SaltedPassword  = Hi(password, salt, iterations)   (no SASLprep, as in Kafka)
    ClientKey       = HMAC(SaltedPassword, "Client Key")
    ClientProof     = ClientKey XOR HMAC(H(ClientKey), AuthMessage)
    ServerSignature = HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage)

The client authenticates the server too: the exchange completes only when ``v=`` is the
signature only a holder of the user's ServerKey can compute (RFC 5802 section 9).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets

from node.security._scram import MIN_ITERATIONS, ScramMechanism, _b64, _shown

_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # RFC 5802 `printable`: visible ASCII except ","
_GS2_HEADER = "n,,"  # no channel binding, no authorization id

_START, _RECEIVE_SERVER_FIRST, _RECEIVE_SERVER_FINAL, _COMPLETE, _FAILED = (
    "start",
    "server-first",
    "server-final",
    "complete",
    "failed",
)


class ScramClientError(Exception):
    """The server's SCRAM message cannot be accepted: malformed, an ``e=`` error, a nonce that does
    not extend the client's, too few iterations, or a server signature that does not verify.

    The message never contains the password or anything derived from it.
    """


class ScramClient:
    """The client side of one SCRAM exchange for ``username`` and ``password``.

    ``start`` gives the client-first message; ``step`` takes each server message and gives the
    next client message, or None once the server's signature has verified (``complete``).
    ``nonce`` pins the client nonce, for reproducing published examples; by default it is drawn
    at random. A failed exchange stays failed.
    """

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, *, nonce: str | None = None) -> None:
        if nonce is not None and not _PRINTABLE.fullmatch(nonce):
            raise ValueError(f"client nonce {nonce!r} must be non-empty printable ASCII without ','")
        self._mechanism = mechanism
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={escape_saslname(username)},r={self._nonce}"
        self._server_signature = b""  # expected in server-final, computed at client-final
        self._state = _START

    @property
    def mechanism(self) -> str:
        return self._mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        """True once the server has proved it knows the user's ServerKey."""
        return self._state == _COMPLETE

    def start(self) -> bytes:
        """The client-first message; raises RuntimeError when the exchange has already started."""
        if self._state != _START:
            raise RuntimeError(f"the SASL/{self.mechanism} exchange has already started")
        self._state = _RECEIVE_SERVER_FIRST
        return (_GS2_HEADER + self._client_first_bare).encode()

    def step(self, server_message: bytes) -> bytes | None:
        """Answer server-first with client-final; check server-final and return None.

        Raises ScramClientError when the server's message is refused (the exchange is then
        failed), RuntimeError when called before ``start`` or after the exchange ended.
        """
        if self._state not in (_RECEIVE_SERVER_FIRST, _RECEIVE_SERVER_FINAL):
            raise RuntimeError(f"the SASL/{self.mechanism} exchange is {self._state}: no server message is expected")
        state, self._state = self._state, _FAILED  # until this step succeeds
        if state == _RECEIVE_SERVER_FIRST:
            reply = self._client_final(_decode(server_message, "server-first"))
            self._state = _RECEIVE_SERVER_FINAL
            return reply
        self._check_server_final(_decode(server_message, "server-final"))
        self._state = _COMPLETE
        return None

    def _client_final(self, server_first: str) -> bytes:
        attributes = server_first.split(",")
        if attributes[0].startswith("m="):
            raise ScramClientError("the server requires a SCRAM extension (m=), which this client does not support")
        if len(attributes) < 3 or [a[:2] for a in attributes[:3]] != ["r=", "s=", "i="]:
            raise _malformed("server-first", "expected 'r=<nonce>,s=<salt>,i=<iterations>'")
        nonce, salt_b64, iterations_text = (a[2:] for a in attributes[:3])
        if not _PRINTABLE.fullmatch(nonce) or not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramClientError(f"the server's nonce {_shown(nonce)} does not extend the client's nonce")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except binascii.Error:
            raise _malformed("server-first", "the salt is not valid base64") from None
        if not salt:
            raise _malformed("server-first", "the salt is empty")
        if not iterations_text.isascii() or not iterations_text.isdigit():
            raise _malformed("server-first", f"iterations {_shown(iterations_text)} is not a decimal number")
        iterations = int(iterations_text)
        if iterations < MIN_ITERATIONS:
            # Fewer rounds would make a password captured from this exchange cheap to guess (Kafka refuses too).
            raise ScramClientError(
                f"the server asks for {iterations} iterations, below the minimum of {MIN_ITERATIONS}"
            )

        mechanism = self._mechanism
        salted_password = mechanism.salted_password(self._password, salt, iterations)
        client_key = mechanism.mac(salted_password, b"Client Key")
        without_proof = f"c={_b64(_GS2_HEADER.encode())},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_signature = mechanism.mac(mechanism.digest(client_key), auth_message)
        proof = bytes(k ^ s for k, s in zip(client_key, client_signature, strict=True))
        self._server_signature = mechanism.mac(mechanism.mac(salted_password, b"Server Key"), auth_message)
        self._password = ""  # not needed any more
        return f"{without_proof},p={_b64(proof)}".encode()

    def _check_server_final(self, server_final: str) -> None:
        first = server_final.split(",", 1)[0]
        if first.startswith("e="):
            raise ScramClientError(f"the server refused the exchange: {_shown(first[2:])}")
        if not first.startswith("v="):
            raise _malformed("server-final", "expected 'v=<signature>' or 'e=<error>'")
        try:
            signature = base64.b64decode(first[2:], validate=True)
        except binascii.Error:
            raise _malformed("server-final", "the signature is not valid base64") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramClientError(
                f"the server's {self.mechanism} signature does not verify: it does not hold this user's credential"
            )


def escape_saslname(name: str) -> str:
    """RFC 5802 ``saslname``: "=" as "=3D" and "," as "=2C"."""
    return name.replace("=", "=3D").replace(",", "=2C")


def _malformed(which: str, problem: str) -> ScramClientError:
    return ScramClientError(f"invalid SCRAM {which} message: {problem}")


def _decode(message: bytes, which: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _malformed(which, f"not UTF-8 (bad byte at offset {e.start})") from None
