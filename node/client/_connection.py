"""One Kafka connection from trio: requests in order, responses matched by correlation id.

A connection to a SASL listener authenticates after ApiVersions: SaslHandshake v1 names the
mechanism, then SaslAuthenticate (v1, or v0 where that is all the node serves) carries the
mechanism's messages until it completes. When the answer gives a session lifetime (KIP-368,
the broker's ``connections.max.reauth.ms``), the connection re-authenticates on the same socket
before its next request once 85-95% of the lifetime has passed (a random point, so that many
connections do not re-authenticate at once; the margin covers latency), as Kafka's clients do.
Brokers accept that re-authentication even after an idle connection's session has ended:
they look for SaslHandshake before they check the session.
"""

from __future__ import annotations

import itertools
import random
import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from node.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    Struct,
    decode_response,
    encode_request_parts,
    error_info,
)
from node.security._plain_client import PlainClient
from node.security._sasl import MECHANISMS
from node.security._scram import ScramMechanism
from node.security._scram_client import ScramClient, ScramClientError

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
_RECEIVE_BYTES = 256 * 1024  # one read of a small answer (and of the start of a large one)
SASL_HANDSHAKE_VERSION = 1  # v0 is followed by raw SASL tokens without Kafka framing: not spoken here
SASL_AUTHENTICATE_VERSION = 1  # v1 adds session_lifetime_ms (KIP-368)
# Re-authenticate at a random point in this share of the session lifetime (Kafka's clients: 85% + up to 10% jitter).
REAUTH_WINDOW = (0.85, 0.95)


class ClientError(Exception):
    """A request failed: a Kafka error code (with the broker's message when it sent one) or I/O."""

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code

    @classmethod
    def from_code(cls, code: int, what: str, message: str | None = None) -> ClientError:
        info = error_info(code)
        detail = f": {message}" if message else f" ({info.description})"
        return cls(f"{what}: {info.name}{detail}", code)


@dataclass(frozen=True)
class SaslCredentials:
    """Who a connection to a SASL listener authenticates as, and with which mechanism (``PLAIN``,
    ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``). The password is left out of the repr.

    Raises ValueError for a mechanism this client does not speak.
    """

    mechanism: str
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism!r} is not one of {', '.join(MECHANISMS)}")

    def exchange(self) -> PlainClient | ScramClient:
        """The client side of a new exchange with these credentials."""
        if self.mechanism == PlainClient.mechanism:
            return PlainClient(self.username, self.password)
        return ScramClient(ScramMechanism.from_name(self.mechanism), self.username, self.password)


class NodeConnection:
    """One connection to one node. ``request`` may be called from several tasks: requests (and
    re-authentications) take turns.

    ``ssl_context`` and ``sasl`` are what the connection was opened with (a caller opening a
    sibling connection reuses them); ``authentications`` counts the completed SASL exchanges
    (1 after ``open`` on a SASL listener, one more per re-authentication).
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        address: str,
        client_id: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.stream = stream
        self.address = address
        self.client_id = client_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._ids = itertools.count(1)
        self._lock = trio.Lock()
        # A plain TCP stream's non-blocking stdlib socket: trio yields to its scheduler after every
        # socket call that succeeds; a replica fetcher's request and answer need not wait behind
        # every other ready task at each call (see _send and _receive, and node.server).
        raw = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._raw: socket.socket | None = getattr(raw, "_sock", None)
        self._waited = False  # a call on _raw waited (and so yielded) since the exchange began
        self._buf = bytearray()
        self.versions: dict[int, tuple[int, int]] = {}
        self.authentications = 0
        self._reauthenticate_at: float | None = None  # trio time; None: the session does not expire

    @classmethod
    async def open(
        cls,
        address: str,
        *,
        client_id: str = "strait",
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> NodeConnection:
        """Connect (over TLS when ``ssl_context`` is given, checking the certificate against the
        host name of ``address`` as the context says), ask ApiVersions and, with ``sasl``,
        authenticate (see the module docstring).

        Raises ClientError: for I/O, TLS and timeouts with the default code; for a refused
        authentication with the broker's code (UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE,
        SASL_AUTHENTICATION_FAILED) and message; SASL_AUTHENTICATION_FAILED also when a SCRAM
        server's signature does not verify.
        """
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ClientError(f"bad broker address {address!r}: expected host:port")
        stream: trio.abc.Stream
        try:
            with trio.fail_after(timeout):
                stream = await trio.open_tcp_stream(host, int(port))
                if ssl_context is not None:
                    tls = trio.SSLStream(stream, ssl_context, server_hostname=host)
                    try:
                        await tls.do_handshake()
                    except BaseException:
                        await trio.aclose_forcefully(stream)
                        raise
                    stream = tls
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__ or exc
            raise ClientError(f"TLS handshake with {address} failed: {cause}") from None
        except (OSError, trio.TooSlowError) as exc:
            raise ClientError(f"cannot connect to {address}: {exc or 'timed out'}") from None
        conn = cls(stream, address, client_id, ssl_context=ssl_context, sasl=sasl)
        try:
            await conn.start(timeout=timeout)
        except BaseException:
            await conn.aclose()
            raise
        return conn

    async def start(self, *, timeout: float = 10.0) -> None:
        """Ask ApiVersions, then authenticate when the connection has SASL credentials: what
        ``open`` does once connected. Raises ClientError as ``open`` does."""
        async with self._lock:
            body = await self._exchange(ApiKey.API_VERSIONS, 0, {}, timeout)
            if body.error_code:
                raise ClientError.from_code(body.error_code, f"ApiVersions from {self.address}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
            if self.sasl is not None:
                await self._authenticate(self.sasl, timeout)

    def version(self, api_key: int, highest: int) -> int:
        """The highest version both sides speak, up to ``highest``."""
        lo, hi = self.versions.get(api_key, (0, -1))
        v = min(hi, highest)
        if v < lo:
            raise ClientError(f"{self.address} does not serve API {api_key} up to v{highest} (it serves {lo}..{hi})")
        return v

    async def request(
        self, api_key: int, version: int, body: Struct | Mapping[str, Any], *, timeout: float = 30.0
    ) -> Struct:
        """Send one request and return the answer's body; re-authenticate first when the SASL
        session is due (that exchange gets its own ``timeout``). Raises ClientError."""
        async with self._lock:
            due = self._reauthenticate_at
            if due is not None and trio.current_time() >= due:
                assert self.sasl is not None
                await self._authenticate(self.sasl, timeout)
            return await self._exchange(api_key, version, body, timeout)

    async def _exchange(self, api_key: int, version: int, body: Struct | Mapping[str, Any], timeout: float) -> Struct:
        """One request and its answer; the caller holds the lock."""
        correlation_id = next(self._ids)
        header = RequestHeader(int(api_key), version, correlation_id, self.client_id, 1)
        frame = encode_request_parts(header, body)
        self._waited = False
        try:
            with trio.fail_after(timeout):
                await self._send(frame)
                payload = await self._read_frame()
                if self._raw is not None and not self._waited:
                    await trio.lowlevel.checkpoint()  # an exchange yields at least once, as trio's calls would
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise ClientError(f"connection to {self.address} failed: {exc}") from None
        except trio.TooSlowError:
            # The answer may still come: a later request on this connection would read it as its
            # own. The connection is closed, so every later use fails and its owner reconnects.
            await trio.aclose_forcefully(self.stream)
            raise ClientError(f"no answer from {self.address} within {timeout} s") from None
        got, response = decode_response(api_key, version, payload)
        if got != correlation_id:
            await trio.aclose_forcefully(self.stream)
            raise ClientError(f"{self.address} answered correlation id {got}, expected {correlation_id}")
        return response

    # -- SASL ---------------------------------------------------------------------------------------

    async def _authenticate(self, sasl: SaslCredentials, timeout: float) -> None:
        """One SASL exchange (the first, or a KIP-368 re-authentication); the caller holds the lock.

        Each request gets ``timeout``. On any failure, cancellation included, the stream is
        closed (the node closes it too, and a half-done exchange leaves it unusable) and the
        error raised: ClientError with the broker's code, or SASL_AUTHENTICATION_FAILED for a
        server message the mechanism refuses.
        """
        try:
            await self._run_exchange(sasl, timeout)
        except BaseException:
            self._reauthenticate_at = None
            await trio.aclose_forcefully(self.stream)
            raise

    async def _run_exchange(self, sasl: SaslCredentials, timeout: float) -> None:
        handshake_version = self._sasl_version(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION)
        authenticate_version = self._sasl_version(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION)
        if handshake_version < SASL_HANDSHAKE_VERSION:
            raise ClientError(
                f"{self.address} serves SaslHandshake only at v0 (raw SASL tokens), which this client does not speak",
                ErrorCode.UNSUPPORTED_VERSION,
            )
        what = f"SASL/{sasl.mechanism} authentication of {sasl.username!r} with {self.address}"
        handshake = await self._exchange(
            ApiKey.SASL_HANDSHAKE, handshake_version, {"mechanism": sasl.mechanism}, timeout
        )
        if handshake.error_code:
            enabled = ", ".join(handshake.mechanisms or []) or "none"
            raise ClientError.from_code(handshake.error_code, what, f"the node's mechanisms are {enabled}")
        exchange = sasl.exchange()
        token = exchange.start()
        while True:
            sent_at = trio.current_time()
            answer = await self._exchange(
                ApiKey.SASL_AUTHENTICATE, authenticate_version, {"auth_bytes": token}, timeout
            )
            if answer.error_code:
                raise ClientError.from_code(answer.error_code, what, answer.error_message)
            try:
                reply = exchange.step(bytes(answer.auth_bytes))
            except ScramClientError as exc:
                raise ClientError.from_code(ErrorCode.SASL_AUTHENTICATION_FAILED, what, str(exc)) from None
            if reply is None:
                break
            token = reply
        self.authentications += 1
        # The session is counted from before the last request was sent: the broker's clock started later.
        lifetime_ms = int(getattr(answer, "session_lifetime_ms", 0) or 0)  # v0 answers carry no lifetime
        self._reauthenticate_at = (
            sent_at + lifetime_ms / 1000 * random.uniform(*REAUTH_WINDOW) if lifetime_ms > 0 else None
        )

    def _sasl_version(self, api_key: ApiKey, highest: int) -> int:
        if api_key not in self.versions:
            raise ClientError(
                f"{self.address} does not serve {api_key.name}, needed for SASL", ErrorCode.UNSUPPORTED_VERSION
            )
        return self.version(api_key, highest)

    async def _read_frame(self) -> memoryview:
        """The next answer, without its size prefix (read-only).

        A frame that arrived whole in one read is copied out of the read buffer once. A larger one
        (a fetch answer: megabytes of records) gets a buffer of its size that the socket reads into
        directly, so its bytes are copied only by the kernel (and the first read's by us, once).
        """
        while len(self._buf) < 4:
            await self._receive()
        (size,) = _SIZE.unpack_from(self._buf)
        if size < 0 or size > MAX_RESPONSE_BYTES:
            raise ClientError(f"{self.address} sent a response of {size} bytes")
        have = len(self._buf) - 4
        if have >= size:
            with memoryview(self._buf) as buffered:
                frame = bytes(buffered[4 : 4 + size])
            del self._buf[: 4 + size]
            return memoryview(frame)
        whole = bytearray(size)
        view = memoryview(whole)
        with memoryview(self._buf) as buffered:
            view[:have] = buffered[4:]
        self._buf.clear()
        await self._receive_into(view, have)
        return view.toreadonly()

    async def _receive(self) -> None:
        raw = self._raw
        if raw is None:
            data = await self.stream.receive_some(_RECEIVE_BYTES)
        else:
            while True:
                try:
                    data = raw.recv(_RECEIVE_BYTES)
                    break
                except BlockingIOError:
                    self._waited = True
                    await trio.lowlevel.wait_readable(raw)
        if not data:
            raise ClientError(f"{self.address} closed the connection")
        self._buf += data

    async def _receive_into(self, view: memoryview, filled: int) -> None:
        """Fill ``view`` from byte ``filled`` on: straight from the socket on plain TCP (a TLS stream
        hands out decrypted bytes, copied in)."""
        raw = self._raw
        while filled < len(view):
            if raw is None:
                data = await self.stream.receive_some(len(view) - filled)
                n = len(data)
                view[filled : filled + n] = data
            else:
                try:
                    n = raw.recv_into(view[filled:])
                except BlockingIOError:
                    self._waited = True
                    await trio.lowlevel.wait_readable(raw)
                    continue
            if not n:
                raise ClientError(f"{self.address} closed the connection")
            filled += n

    async def _send(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Write a request's parts in order: on plain TCP with gathering sends (sendmsg), never
        joining them; on TLS part by part (the stream encrypts, and so copies, anyway)."""
        raw = self._raw
        if raw is None:
            for part in parts:
                await self.stream.send_all(part)
            return
        if await send_parts_nonblocking(raw, parts):
            self._waited = True

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> NodeConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def send_parts_nonblocking(raw: socket.socket, parts: list[bytes | bytearray | memoryview]) -> bool:
    """Send ``parts`` in order on ``raw`` (as ``send_all_nonblocking``) with gathering sends: no part
    is joined to or copied into another; returns whether it waited."""
    if len(parts) == 1:
        return await send_all_nonblocking(raw, parts[0])
    views = [memoryview(p) for p in parts]
    waited = False
    while views:
        try:
            sent = raw.sendmsg(views[:_IOV_MAX])
        except BlockingIOError:
            waited = True
            await trio.lowlevel.wait_writable(raw)
            continue
        while views and sent >= views[0].nbytes:
            sent -= views[0].nbytes
            del views[0]
        if sent:
            views[0] = views[0][sent:]
    return waited


_IOV_MAX = 1024  # buffers one sendmsg takes on Linux


async def send_all_nonblocking(raw: socket.socket, data: bytes | bytearray | memoryview) -> bool:
    """Send all of ``data`` on ``raw``, the non-blocking stdlib socket under a trio socket, waiting
    (and so yielding to trio) only while its send buffer is full; returns whether it waited.

    trio's own calls yield after every call that succeeds; a caller of this one yields once a
    request itself when this did not (node.server, NodeConnection)."""
    view = memoryview(data)
    waited = False
    while view:
        try:
            sent = raw.send(view)
        except BlockingIOError:
            waited = True
            await trio.lowlevel.wait_writable(raw)
            continue
        view = view[sent:]
    return waited
