"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them, and Kafka's credential formats.

The exchange, two client messages and two server replies (all UTF-8 text)::

    client-first   n,[a=<authzid>],n=<user>,r=<client nonce>[,<ext>=<value>...]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<combined nonce>[,<ext>=<value>...],p=<base64 proof>
    server-final   v=<base64 server signature>

The gs2 header is the client-first prefix up to and including the second comma. The proof
and signatures are computed over AuthMessage = client-first-bare "," server-first ","
client-final-without-proof, exactly as the bytes were sent. A credential stores what the
server needs and nothing that lets anyone log in::

    SaltedPassword = Hi(password, salt, iterations)     (PBKDF2-HMAC; no SASLprep, as in Kafka)
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Kafka keeps a user's credentials in the ZooKeeper znode ``/config/users/<sanitized user>`` as
``{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"}}``
(``ScramCredentialUtils``, ``ConfigEntityZNode``); the znode name is the user name URL-encoded
by Kafka's ``Sanitizer.sanitize``. This module reads and writes the same bytes, so an existing
cluster's users keep working.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
import re
import secrets
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from node.security._sasl import SaslFailure, invalid_credentials

# Kafka's ScramMechanism.minIterations is 4096 for both mechanisms, and its broker refuses to
# authenticate with a credential below it. The upper bound 16384 is ScramMechanism.maxIterations,
# which KRaft's AlterUserScramCredentials ("Too many iterations", UNACCEPTABLE_CREDENTIAL) and
# kafka-storage's add-scram enforce. The ZooKeeper-era `kafka-configs --zookeeper` checked only the
# minimum, so existing znodes may hold more: credentials are refused above the maximum when made,
# never when read back.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_SIZE = 32  # bytes of a salt this module draws

_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # RFC 5802 `printable`: visible ASCII except ","
_SASLNAME = re.compile(r"(?:[^=,]|=2C|=3D)+")  # RFC 5802 `saslname`: "," and "=" appear only escaped
_EXTENSION = re.compile(r"([A-Za-z]+)=([^,]+)")  # Kafka's extension attributes, e.g. tokenauth=true
_SHOWN = 40  # at most this many characters of a client's value are quoted back in an error


class ScramMechanism(enum.Enum):
    """A SCRAM mechanism: its registered name, hashlib's name for its hash, and the hash's size in bytes."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 32)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 64)

    def __init__(self, mechanism_name: str, hash_name: str, key_size: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.key_size = key_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """The mechanism registered as ``name`` (e.g. ``SCRAM-SHA-512``); raises ValueError for any other name."""
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        known = ", ".join(m.mechanism_name for m in cls)
        raise ValueError(f"unknown SCRAM mechanism {name!r}; known mechanisms are {known}")

    def digest(self, data: bytes) -> bytes:
        """H(data)."""
        return hashlib.new(self.hash_name, data).digest()

    def mac(self, key: bytes, data: bytes) -> bytes:
        """HMAC(key, data)."""
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, iterations): PBKDF2-HMAC over the UTF-8 password, ``key_size`` bytes."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What the server stores for one user and mechanism (RFC 5802's "authentication information").

    Raises ValueError when the salt or keys are empty, the two keys differ in length, or the
    iterations are below MIN_ITERATIONS.
    """

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def __post_init__(self) -> None:
        if not self.salt:
            raise ValueError("a SCRAM credential needs a non-empty salt")
        if not self.stored_key or len(self.stored_key) != len(self.server_key):
            raise ValueError(
                f"a SCRAM credential's stored_key ({len(self.stored_key)} bytes) and server_key "
                f"({len(self.server_key)} bytes) must be non-empty and of the same length"
            )
        if self.iterations < MIN_ITERATIONS:
            raise ValueError(f"SCRAM iterations {self.iterations} is below Kafka's minimum of {MIN_ITERATIONS}")


ScramLookup = Callable[[str, str], ScramCredential | None]  # (mechanism name, user name) -> credential or None


def _check_new_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"SCRAM iterations {iterations} is outside Kafka's range {MIN_ITERATIONS}..{MAX_ITERATIONS}")


def make_credential(
    mechanism: ScramMechanism, password: str, *, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """The credential for ``password``, salted with ``salt`` (default: SALT_SIZE random bytes).

    Raises ValueError when iterations is outside MIN_ITERATIONS..MAX_ITERATIONS or the salt is empty.
    """
    _check_new_iterations(iterations)
    if salt is None:
        salt = secrets.token_bytes(SALT_SIZE)
    if not salt:
        raise ValueError("a SCRAM credential needs a non-empty salt")
    return credential_from_salted_password(
        mechanism, salt, mechanism.salted_password(password, salt, iterations), iterations
    )


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential for a salted password, as AlterUserScramCredentials sends it (the client runs Hi()).

    Raises ValueError when the salted password is not the mechanism's key size, the salt is
    empty, or iterations is outside MIN_ITERATIONS..MAX_ITERATIONS.
    """
    _check_new_iterations(iterations)
    if len(salted_password) != mechanism.key_size:
        raise ValueError(
            f"a {mechanism.mechanism_name} salted password is {mechanism.key_size} bytes, got {len(salted_password)}"
        )
    client_key = mechanism.mac(salted_password, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.digest(client_key),
        server_key=mechanism.mac(salted_password, b"Server Key"),
        iterations=iterations,
    )


_CREDENTIAL_FIELDS = ("salt", "stored_key", "server_key", "iterations")


def credential_to_text(credential: ScramCredential) -> str:
    """Kafka's text form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
    return (
        f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
        f"server_key={_b64(credential.server_key)},iterations={credential.iterations}"
    )


def credential_from_text(text: str) -> ScramCredential:
    """Parse Kafka's text form of a credential (fields in any order, as Kafka accepts).

    Raises ValueError naming the field that is unknown, repeated, missing or malformed, or the
    credential rule that fails. Values are never quoted: the keys are secrets.
    """
    values: dict[str, str] = {}
    for position, token in enumerate(text.split(","), start=1):
        name, sep, value = token.partition("=")
        if not sep or not name:
            raise ValueError(f"SCRAM credential field {position} is not name=value")
        if name not in _CREDENTIAL_FIELDS:
            # A name that is not a word may be a piece of a key (base64 ends in "="): never quote it.
            shown = repr(name) if re.fullmatch(r"[a-z_]{1,20}", name) else "with a name that is not a word"
            raise ValueError(
                f"SCRAM credential field {position} is unknown ({shown}); expected {', '.join(_CREDENTIAL_FIELDS)}"
            )
        if name in values:
            raise ValueError(f"SCRAM credential has field {name!r} twice")
        values[name] = value
    missing = [name for name in _CREDENTIAL_FIELDS if name not in values]
    if missing:
        raise ValueError(f"SCRAM credential lacks {', '.join(missing)}")
    if not values["iterations"].isascii() or not values["iterations"].isdigit():
        raise ValueError("SCRAM credential field iterations is not a decimal number")
    decoded = {}
    for name in ("salt", "stored_key", "server_key"):
        try:
            decoded[name] = base64.b64decode(values[name], validate=True)
        except binascii.Error:
            raise ValueError(f"SCRAM credential field {name} is not valid base64") from None
    return ScramCredential(
        salt=decoded["salt"],
        stored_key=decoded["stored_key"],
        server_key=decoded["server_key"],
        iterations=int(values["iterations"]),
    )


def encode_user_config(config: Mapping[str, str]) -> bytes:
    """The ``/config/users/<user>`` znode data: ``{"version":1,"config":{...}}``, compact like Kafka's JSON."""
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":"), ensure_ascii=False).encode()


def decode_user_config(data: bytes) -> dict[str, str]:
    """The config map of a ``/config/users/<user>`` znode (empty for a znode without data, as in Kafka).

    The version is not checked (Kafka does not either). Raises ValueError when the data is not
    JSON, not an object, or its ``config`` is not an object of strings.
    """
    if not data:
        return {}
    try:
        document = json.loads(data)
    except ValueError as e:
        raise ValueError(f"user config znode data is not JSON: {e}") from None
    if not isinstance(document, dict):
        raise ValueError(f"user config znode data is a JSON {type(document).__name__}, not an object")
    config = document.get("config", {})
    if not isinstance(config, dict):
        raise ValueError(f"user config znode's 'config' is a JSON {type(config).__name__}, not an object")
    for key, value in config.items():
        if not isinstance(value, str):
            raise ValueError(f"user config {key!r} is a JSON {type(value).__name__}, not a string")
    return dict(config)


# Kafka's Sanitizer.sanitize is Java's URLEncoder with "*" and " " then percent-encoded too:
# ASCII letters, digits, ".", "-" and "_" stay, every other character becomes its UTF-8 bytes as %XX.
_ZNODE_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def user_znode_name(user: str) -> str:
    """The znode name Kafka gives ``user`` under ``/config/users`` (``Sanitizer.sanitize``)."""
    return "".join(ch if ch in _ZNODE_SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in user)


def user_from_znode_name(name: str) -> str:
    """The user a ``/config/users`` znode is named for (``Sanitizer.desanitize``: URL decoding, "+" is a space).

    Raises ValueError for a "%" not followed by two hex digits or escapes that are not UTF-8.
    """
    if "%" in _PERCENT.sub("", name):
        raise ValueError(f"znode name {name!r} has a '%' that is not followed by two hex digits")
    try:
        return urllib.parse.unquote_to_bytes(name.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"znode name {name!r} does not decode to UTF-8") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def _malformed(which: str, problem: str) -> SaslFailure:
    return SaslFailure(f"Invalid SCRAM {which} message: {problem}")


def _decode(message: bytes, which: str) -> str:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _malformed(which, f"not UTF-8 (bad byte at offset {e.start})") from None
    if "\0" in text:
        raise _malformed(which, "contains a NUL character")
    return text


def _unescape_saslname(value: str, what: str) -> str:
    """A saslname with "=2C" and "=3D" turned back into "," and "="; raises SaslFailure for any other "="."""
    if not _SASLNAME.fullmatch(value):
        raise _malformed("client-first", f"{what} {_shown(value)} is empty or has '=' not followed by 2C or 3D")
    return re.sub("=2C|=3D", lambda m: "," if m.group() == "=2C" else "=", value)


def _check_extensions(attributes: list[str], which: str) -> dict[str, str]:
    extensions: dict[str, str] = {}
    for attribute in attributes:
        match = _EXTENSION.fullmatch(attribute)
        if match is None:
            raise _malformed(which, f"attribute {_shown(attribute)} is not name=value")
        extensions[match.group(1)] = match.group(2)
    return extensions


# Derives the salts shown for unknown users; one per process, so a user's fake salt is stable
# across connections to this broker (ScramServer's unknown_user_secret lets a cluster share one).
_UNKNOWN_USER_SECRET = secrets.token_bytes(32)

_RECEIVE_CLIENT_FIRST, _RECEIVE_CLIENT_FINAL, _COMPLETE, _FAILED = "client-first", "client-final", "complete", "failed"


class ScramServer:
    """The server side of one SCRAM exchange; credentials come from ``lookup(mechanism name, user)``.

    An unknown user is not told apart from a wrong password: the server answers the first
    message with a salt derived from ``unknown_user_secret`` and the user name (the same salt
    every time) and fails at the proof with the same message. ``server_nonce`` pins the nonce
    suffix, for reproducing published examples; by default it is drawn at random. An exception
    raised by ``lookup`` propagates and leaves the exchange failed.

    Differences from Kafka's ScramSaslServer, each following RFC 5802: a client that supports
    channel binding but did not see it offered (gs2 flag ``y``) is accepted, where Kafka accepts
    only ``n``; a mandatory extension (``m=``) is refused, where Kafka ignores it; user names may
    be any UTF-8, where Kafka's parser takes ASCII only; and AuthMessage is built from the bytes
    received, where Kafka rebuilds it (the same bytes unless the client sent extensions).
    Delegation tokens (``tokenauth=true``) are not supported.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: ScramLookup,
        *,
        server_nonce: str | None = None,
        unknown_user_secret: bytes = _UNKNOWN_USER_SECRET,
    ) -> None:
        if server_nonce is not None and not _PRINTABLE.fullmatch(server_nonce):
            raise ValueError(f"server nonce {server_nonce!r} must be non-empty printable ASCII without ','")
        self._mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._unknown_user_secret = unknown_user_secret
        self._state = _RECEIVE_CLIENT_FIRST
        self._user = ""
        # Set by the client-first step, used by the client-final step.
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self._known_user = False

    @property
    def mechanism(self) -> str:
        return self._mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        return self._state == _COMPLETE

    @property
    def authorization_id(self) -> str:
        if not self.complete:
            raise RuntimeError(f"the SASL/{self.mechanism} exchange has not completed")
        return self._user

    def step(self, client_message: bytes) -> bytes:
        """Answer client-first with server-first, then client-final with server-final.

        Raises SaslFailure for bad credentials, a malformed message, or a message after the
        exchange completed or failed; a failed exchange stays failed.
        """
        if self._state in (_COMPLETE, _FAILED):
            raise SaslFailure(f"SASL/{self.mechanism} exchange already {self._state}: no further messages are accepted")
        state, self._state = self._state, _FAILED  # until this step succeeds
        if state == _RECEIVE_CLIENT_FIRST:
            reply = self._client_first(client_message)
            self._state = _RECEIVE_CLIENT_FINAL
        else:
            reply = self._client_final(client_message)
            self._state = _COMPLETE
            self._credential = None
        return reply

    def _client_first(self, message: bytes) -> bytes:
        text = _decode(message, "client-first")
        if text.count(",") < 2:
            raise _malformed("client-first", "expected a gs2 header 'n,,' or 'n,a=<authzid>,' before the user name")
        flag, authzid_attribute, bare = text.split(",", 2)
        if flag.startswith("p="):
            raise SaslFailure(
                f"Channel binding {flag[2:][:_SHOWN]!r} is not supported: use {self.mechanism} without channel binding"
            )
        if flag not in ("n", "y"):
            raise _malformed("client-first", f"gs2 channel binding flag {_shown(flag)} is not 'n', 'y' or 'p=<name>'")
        authzid = ""
        if authzid_attribute:
            if not authzid_attribute.startswith("a="):
                raise _malformed("client-first", f"gs2 authzid {_shown(authzid_attribute)} does not start with 'a='")
            authzid = _unescape_saslname(authzid_attribute[2:], "authzid")
        self._gs2_header = f"{flag},{authzid_attribute},"

        attributes = bare.split(",")
        if attributes[0].startswith("m="):
            raise SaslFailure("Mandatory SCRAM extension (m=) is not supported")
        if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
            raise _malformed("client-first", "expected 'n=<user>,r=<nonce>' after the gs2 header")
        user = _unescape_saslname(attributes[0][2:], "user name")
        client_nonce = attributes[1][2:]
        if not _PRINTABLE.fullmatch(client_nonce):
            raise _malformed("client-first", f"nonce {_shown(client_nonce)} is empty or not printable ASCII")
        extensions = _check_extensions(attributes[2:], "client-first")
        if extensions.get("tokenauth", "").lower() == "true":
            raise SaslFailure("Delegation token authentication (tokenauth) is not supported")
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username"
            )

        credential = self._lookup(self.mechanism, user)
        self._known_user = credential is not None
        if credential is None:
            credential = self._unknown_user_credential(user)
        elif len(credential.stored_key) != self._mechanism.key_size:
            raise invalid_credentials(self.mechanism)  # a credential stored for another mechanism cannot match
        server_nonce = self._server_nonce if self._server_nonce is not None else secrets.token_urlsafe(24)
        self._user = user
        self._client_first_bare = bare
        self._nonce = client_nonce + server_nonce
        self._credential = credential
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode("ascii")

    def _unknown_user_credential(self, user: str) -> ScramCredential:
        """A credential no password matches, whose salt is the same for every exchange naming ``user``."""
        # HMAC-SHA-256: 32 bytes, the size of the salts make_credential draws.
        salt = hmac.new(self._unknown_user_secret, f"{self.mechanism}\0{user}".encode(), hashlib.sha256).digest()
        keys = secrets.token_bytes(self._mechanism.key_size)
        return ScramCredential(salt=salt, stored_key=keys, server_key=keys, iterations=DEFAULT_ITERATIONS)

    def _client_final(self, message: bytes) -> bytes:
        text = _decode(message, "client-final")
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise _malformed("client-final", "no proof (',p=') at the end")
        attributes = without_proof.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("c=") or not attributes[1].startswith("r="):
            raise _malformed("client-final", "expected 'c=<channel binding>,r=<nonce>' before the proof")
        _check_extensions(attributes[2:], "client-final")
        try:
            channel_binding = base64.b64decode(attributes[0][2:], validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except binascii.Error:
            raise _malformed("client-final", "channel binding or proof is not valid base64") from None
        if channel_binding != self._gs2_header.encode():
            raise SaslFailure(
                f"Channel binding data {_shown(channel_binding.decode('utf-8', 'replace'))} does not match "
                f"the gs2 header {self._gs2_header!r} of the client-first message"
            )
        # RFC 5802 wants the nonce back exactly. Kafka only checks that it ends with the server-first
        # nonce, and librdkafka 2.0.x (Debian's kcat) relies on it: it sends its own nonce again in
        # front. The proof still covers the message as sent, so nothing is weakened.
        if not attributes[1][2:].endswith(self._nonce):
            raise SaslFailure("Invalid client nonce in the final client message")
        if len(proof) != self._mechanism.key_size:
            raise _malformed(
                "client-final", f"proof is {len(proof)} bytes, {self.mechanism} proofs are {self._mechanism.key_size}"
            )

        credential = self._credential
        assert credential is not None  # set by the client-first step
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = self._mechanism.mac(credential.stored_key, auth_message)
        client_key = bytes(p ^ s for p, s in zip(proof, client_signature, strict=True))
        proof_matches = hmac.compare_digest(self._mechanism.digest(client_key), credential.stored_key)
        if not (proof_matches and self._known_user):
            raise invalid_credentials(self.mechanism)
        return b"v=" + _b64(self._mechanism.mac(credential.server_key, auth_message)).encode("ascii")
