"""The Kafka listener: one trio task per connection, requests answered strictly in order.

Each connection reads size-prefixed frames, decodes them with ``node.protocol`` and hands
them to the broker's ``RequestHandler`` one at a time, as Kafka does (it mutes a connection
while a request is in flight), except that an acks=all Produce waiting for its high watermark
lets the next Produce in (``_Answers``): responses leave in request order, and a pipelining
client is served from the bytes already buffered. A connection holds at most one request's
bytes (bounded by ``socket.request.max.bytes``) plus a read buffer.

What closes a connection (logged, counted, never fatal to the node): a size prefix that is
negative or above the limit, a frame that does not parse, an API key or version we do not
serve (except ApiVersions, which is answered with error 35 in v0 format so the client can
retry lower), an idle timeout, and an error in a request that expects no response (acks=0).
Fetch data goes out with ``os.sendfile`` from the log's files.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import trio

from node.client import send_all_nonblocking
from node.metrics import NodeMetrics
from node.protocol import (
    ApiKey,
    EncodedFrame,
    ErrorCode,
    MalformedRequest,
    ProtocolError,
    Region,
    RequestHeader,
    Struct,
    UnknownApi,
    UnsupportedVersion,
    api_versions_fallback,
    decode_request,
    encode_response,
    read_request_header,
    schema,
)
from node.quotas import QuotaManager, Usage
from node.request import ANONYMOUS, CloseConnection, ConnectionInfo, Deferred, Request, RequestTiming
from node.sasl import ServerSasl
from node.security._sasl import SaslFailure, SaslServer
from node.tls import ServerTls, TlsError

__all__ = [
    "CloseConnection",
    "ConnectionInfo",
    "KafkaServer",
    "PlainTransport",
    "RequestHandler",
    "ServerLimits",
    "TlsTransport",
    "Transport",
    "api_name",
    "bind_listener",
    "write_frame",
]

log = logging.getLogger("strait.node.server")

_SIZE = struct.Struct(">i")
_READ_CHUNK = 256 * 1024
#: Seconds a TLS client has to finish its handshake.
TLS_HANDSHAKE_S = 10.0
_API_NAMES: dict[int, str] = {}


def api_name(api_key: int) -> str:
    name = _API_NAMES.get(api_key)
    if name is None:
        try:
            name = schema(api_key).name
        except ProtocolError:
            name = f"api-{api_key}"
        _API_NAMES[api_key] = name
    return name


class RequestHandler(Protocol):
    """What the server needs from the broker."""

    @property
    def api_ranges(self) -> Mapping[int, tuple[int, int]]:
        """The (min, max) version served for each API key."""
        ...

    async def handle(self, request: Request) -> Any:
        """The response body (Struct or mapping), or None to send nothing (acks=0 produce)."""
        ...


@dataclass(frozen=True, slots=True)
class ServerLimits:
    max_request_bytes: int = 104_857_600  # socket.request.max.bytes
    idle_timeout_s: float = 600.0  # connections.max.idle.ms
    send_buffer_bytes: int = -1  # socket.send.buffer.bytes; -1 = the OS default (autotuned)
    receive_buffer_bytes: int = -1  # socket.receive.buffer.bytes


class Transport(Protocol):
    """A connection's byte stream: the plain socket, or TLS over it.

    ``last_stamp`` is the kernel's receive time (``time.time()`` seconds) of the latest bytes the
    last ``recv``/``recv_into`` returned, or None where the transport cannot tell (TLS).
    """

    last_stamp: float | None
    #: Whether a call waited for the socket (and so let other tasks run) since this was last
    #: set to False: the connection's loop yields once a request only if none did.
    waited: bool

    async def recv(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes``; b"" at the end of the stream."""
        ...

    async def recv_into(self, view: memoryview, max_bytes: int) -> int: ...

    async def send_all(self, data: bytes | memoryview) -> None: ...

    async def send_region(self, region: Region) -> None:
        """Send ``region.length`` bytes of a log file from ``region.position``."""
        ...


class PlainTransport:
    """The socket itself; log file ranges go out with ``os.sendfile`` (zero copy). On Linux every
    receive carries the kernel's receive time (``SO_TIMESTAMPNS``) for ``last_stamp``."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.last_stamp: float | None = None
        self._stamped = _enable_receive_stamps(sock)
        # The non-blocking stdlib socket under trio's: trio yields to its scheduler after every
        # socket call that succeeds, which puts each step of a request behind every other ready
        # task. These calls yield only when they must wait; the connection's loop yields once per
        # request (KafkaServer._requests).
        self._raw: socket.socket = sock._sock  # type: ignore[attr-defined]
        self.waited = False  # a call waited (and so yielded) since the connection's loop reset it

    async def recv(self, max_bytes: int) -> bytes:
        raw = self._raw
        while True:
            try:
                if not self._stamped:
                    return raw.recv(max_bytes)
                data, ancdata, _flags, _address = raw.recvmsg(max_bytes, _STAMP_SPACE)
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_readable(raw)
                continue
            self.last_stamp = _receive_stamp(ancdata)
            return data

    async def recv_into(self, view: memoryview, max_bytes: int) -> int:
        raw = self._raw
        while True:
            try:
                if not self._stamped:
                    return raw.recv_into(view, max_bytes)
                count, ancdata, _flags, _address = raw.recvmsg_into([view[:max_bytes]], _STAMP_SPACE)
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_readable(raw)
                continue
            self.last_stamp = _receive_stamp(ancdata)
            return count

    async def send_all(self, data: bytes | memoryview) -> None:
        if await send_all_nonblocking(self._raw, data):
            self.waited = True

    async def send_region(self, region: Region) -> None:
        await _sendfile(self.sock, region)


class TlsTransport:
    """TLS over the socket (``trio.SSLStream``). Log file ranges are read (in a worker thread, so a
    cold read never stalls the node) and encrypted: TLS cannot use ``os.sendfile``."""

    last_stamp: float | None = None  # records are decrypted from data read earlier: no stamp means anything

    @property
    def waited(self) -> bool:
        return True  # trio's stream yields on every call

    @waited.setter
    def waited(self, value: bool) -> None:
        pass

    def __init__(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        self.stream = stream

    async def recv(self, max_bytes: int) -> bytes:
        return bytes(await self.stream.receive_some(max_bytes))

    async def recv_into(self, view: memoryview, max_bytes: int) -> int:
        data = await self.stream.receive_some(max_bytes)
        view[: len(data)] = data
        return len(data)

    async def send_all(self, data: bytes | memoryview) -> None:
        await self.stream.send_all(data)

    async def send_region(self, region: Region) -> None:
        offset, remaining = region.position, region.length
        while remaining > 0:
            chunk = await trio.to_thread.run_sync(os.pread, region.fd, min(remaining, _READ_CHUNK), offset)
            if not chunk:
                raise CloseConnection(f"log file ended {remaining} bytes early while sending a fetch response")
            await self.stream.send_all(chunk)
            offset += len(chunk)
            remaining -= len(chunk)


class _FrameReader:
    """Size-prefixed frames from a connection, with one reusable read buffer.

    ``arrived`` is the kernel's receive stamp of the read that completed the last frame returned
    (None on TLS): a frame is only read once the one before it has been answered, so the time
    from it to the frame's handling is the time the frame waited unread.
    """

    def __init__(self, sock: Transport, max_bytes: int, limit_name: str = "socket.request.max.bytes") -> None:
        self._sock = sock
        self.max_bytes = max_bytes  # changes once a SASL connection has authenticated
        self.limit_name = limit_name
        self._buf = bytearray()
        self._pos = 0
        self.arrived: float | None = None
        self._filled: float | None = None  # the stamp of the latest fill: it completed every frame buffered

    async def _fill(self) -> bool:
        chunk = await self._sock.recv(_READ_CHUNK)
        self._filled = self._sock.last_stamp
        if not chunk:
            return False
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += chunk
        return True

    async def next_frame(self) -> memoryview | None:
        """The next frame without its size prefix; None at a clean end of stream."""
        while len(self._buf) - self._pos < 4:
            if not await self._fill():
                if len(self._buf) - self._pos:
                    raise CloseConnection("connection closed in the middle of a size prefix")
                return None
        (size,) = _SIZE.unpack_from(self._buf, self._pos)
        if size < 0 or size > self.max_bytes:
            raise CloseConnection(f"request size {size} outside 0..{self.max_bytes} ({self.limit_name})")
        start = self._pos + 4
        have = len(self._buf) - start
        if have >= size:
            self._pos = start + size
            self.arrived = self._filled
            return memoryview(bytes(self._buf[start : start + size]))
        # A large request: read it straight into its own buffer.
        frame = bytearray(size)
        frame[:have] = self._buf[start:]
        self._buf.clear()
        self._pos = 0
        view = memoryview(frame)
        while have < size:
            n = await self._sock.recv_into(view[have:], size - have)
            if n == 0:
                raise CloseConnection(f"connection closed after {have} of {size} request bytes")
            have += n
        self.arrived = self._sock.last_stamp  # the loop ran: its last read completed the frame
        return view


#: Linux's SO_TIMESTAMPNS (asm-generic SO_TIMESTAMPNS_OLD; Python has no name for it): each receive
#: carries, as ancillary data, a struct timespec of when the kernel received its latest bytes.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
_STAMP_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


def _enable_receive_stamps(sock: trio.socket.SocketType) -> bool:
    if not sys.platform.startswith("linux") or not _STAMP_SPACE:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def _receive_stamp(ancdata: list[tuple[int, int, bytes]]) -> float | None:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            return float(seconds + nanoseconds / 1e9)
    return None


async def _sendfile(sock: trio.socket.SocketType, region: Region) -> None:
    out_fd = sock.fileno()
    offset, remaining = region.position, region.length
    while remaining > 0:
        try:
            sent = os.sendfile(out_fd, region.fd, offset, remaining)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:
            # The file shrank under us (truncation or deletion): the response size is
            # already on the wire, so the only honest thing left is to close.
            raise CloseConnection(f"log file ended {remaining} bytes early while sending a fetch response")
        offset += sent
        remaining -= sent


async def write_frame(sock: Transport, frame: EncodedFrame) -> None:
    pending: list[bytes] = []
    for part in frame.parts:
        if isinstance(part, bytes | bytearray | memoryview):
            pending.append(bytes(part))
            continue
        if pending:
            await sock.send_all(b"".join(pending))
            pending = []
        await sock.send_region(part)
    if pending:
        await sock.send_all(b"".join(pending) if len(pending) > 1 else pending[0])


class KafkaServer:
    """Accepts connections on one listening socket and serves each in its own task.

    A node runs one per listener (``listeners=LOCAL://...,WAN://...``); each connection carries
    the listener's name, security protocol and principal to the handlers (``ConnectionInfo``).
    An SSL listener (``tls``, the listener's own) finishes the TLS handshake within
    ``TLS_HANDSHAKE_S`` before the first request is read; the principal is the client
    certificate's (``node.tls``). A SASL listener (``sasl``, the listener's own) authenticates
    first; the principal is the SASL user.
    """

    def __init__(
        self,
        handler: RequestHandler,
        metrics: NodeMetrics,
        limits: ServerLimits,
        *,
        listener_name: str = "PLAINTEXT",
        security_protocol: str = "PLAINTEXT",
        tls: ServerTls | None = None,
        sasl: ServerSasl | None = None,
        clock: Callable[[], float] = time.perf_counter,
        quotas: QuotaManager | None = None,
    ) -> None:
        if security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"listener {listener_name}: unknown security protocol {security_protocol}")
        if security_protocol.endswith("SSL") != (tls is not None):
            raise ValueError(f"listener {listener_name}: TLS settings are for SSL listeners, and SSL needs them")
        if security_protocol.startswith("SASL_") != (sasl is not None):
            raise ValueError(f"listener {listener_name}: SASL settings are for SASL listeners, and SASL needs them")
        self.tls = tls
        self.sasl = sasl
        self.handler = handler
        self.metrics = metrics
        self.limits = limits
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self._clock = clock
        self.quotas = quotas
        self.connections = 0

    async def serve(
        self, listener: trio.socket.SocketType, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Accept until cancelled; every connection task ends with the nursery."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                try:
                    sock, addr = await listener.accept()
                except OSError as exc:
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        log.error("accept failed (%s); pausing 100 ms", exc)
                        await trio.sleep(0.1)
                        continue
                    raise
                sock.setsockopt(trio.socket.IPPROTO_TCP, trio.socket.TCP_NODELAY, 1)
                if self.limits.send_buffer_bytes > 0:
                    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_SNDBUF, self.limits.send_buffer_bytes)
                if self.limits.receive_buffer_bytes > 0:
                    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, self.limits.receive_buffer_bytes)
                nursery.start_soon(self._serve_connection, sock, f"{addr[0]}:{addr[1]}")

    async def _serve_connection(self, sock: trio.socket.SocketType, peer: str) -> None:
        self.connections += 1
        self.metrics.connection_opened()
        reason = "eof"
        try:
            with sock:
                transport, principal = await self._secure(sock, peer)
                conn = ConnectionInfo(
                    peer, self.listener_name, principal=principal, security_protocol=self.security_protocol
                )
                reason = await self._loop(transport, conn)
        except _HandshakeFailed as exc:
            reason = "tls"
            log.info("closing connection from %s: TLS handshake failed: %s", peer, exc)
        except _AuthenticationFailed as exc:
            reason = "authentication"
            log.info("closing connection from %s: SASL authentication failed: %s", peer, exc)
        except CloseConnection as exc:
            reason = "protocol"
            log.warning("closing connection from %s: %s", peer, exc.reason)
        except (ConnectionError, OSError, trio.BrokenResourceError) as exc:
            reason = "io"
            log.debug("connection from %s failed: %s", peer, exc)
        except Exception:
            # A bug must cost one connection, never the node.
            reason = "internal"
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            self.connections -= 1
            self.metrics.connection_closed(reason)

    async def _secure(self, sock: trio.socket.SocketType, peer: str) -> tuple[Transport, str]:
        """The connection's transport and principal: the socket as it is, or TLS after a handshake."""
        if self.tls is None:
            return PlainTransport(sock), ANONYMOUS
        stream = trio.SSLStream(trio.SocketStream(sock), self.tls.context(), server_side=True)
        try:
            with trio.fail_after(TLS_HANDSHAKE_S):
                await stream.do_handshake()
            principal = self.tls.principal(stream.getpeercert())
        except trio.TooSlowError:
            raise _HandshakeFailed(f"not finished within {TLS_HANDSHAKE_S:g} s") from None
        except trio.BrokenResourceError as exc:
            raise _HandshakeFailed(str(exc.__cause__ or exc)) from None
        except TlsError as exc:
            raise _HandshakeFailed(f"the client certificate names no principal: {exc}") from None
        return TlsTransport(stream), principal

    async def _loop(self, sock: Transport, conn: ConnectionInfo) -> str:
        """Serve the connection's requests; how it ended ("eof", "idle", ...). Raises what the
        reading or the writing of answers raised, as itself (never in an exception group)."""
        failure: Exception | None = None
        ended = "eof"
        async with trio.open_nursery() as nursery:
            answers = _Answers(self, sock, conn, nursery)
            try:
                ended = await self._requests(sock, conn, answers)
            except Exception as exc:  # Cancelled (a BaseException) goes to the nursery as it should
                failure = exc
            nursery.cancel_scope.cancel()  # every answer is written before a clean end; else drop them
        answers.raise_failure()  # the writer's error first: the reader only saw the Cancelled it caused
        if failure is not None:
            raise failure
        return ended

    async def _requests(self, sock: Transport, conn: ConnectionInfo, answers: _Answers) -> str:
        reader = _FrameReader(sock, self.limits.max_request_bytes)
        ranges = self.handler.api_ranges
        session: _Session | None = None
        client = _ClientLabel(self.metrics)
        if self.sasl is not None:
            reader.max_bytes, reader.limit_name = self.sasl.max_receive_size, "sasl.server.max.receive.size"
            session = await self._authenticate(reader, sock, conn, None, None, client)
            if session is None:
                return "eof"
            reader.max_bytes, reader.limit_name = self.limits.max_request_bytes, "socket.request.max.bytes"
            conn = replace(conn, principal=session.principal)
        while True:
            with trio.move_on_after(self.limits.idle_timeout_s) as idle:
                frame = await reader.next_frame()
            if idle.cancelled_caught:
                if answers.pending:
                    continue  # not idle: an answer is still waiting (acks=all), bounded by its request's timeout
                log.info("closing connection from %s: idle for %.0f s", conn.peer, self.limits.idle_timeout_s)
                return "idle"
            if frame is None:
                await answers.drained()
                return "eof"
            await answers.room_for(_api_key_of(frame))
            if session is not None:
                if _api_key_of(frame) == ApiKey.SASL_HANDSHAKE:  # KIP-368 re-authentication
                    again = await self._authenticate(reader, sock, conn, session, frame, client)
                    if again is None:
                        return "eof"
                    session = again
                    continue
                if session.expired(trio.current_time()):
                    await answers.drained()
                    log.info("closing connection from %s: its SASL session expired", conn.peer)
                    return "reauth"
            started, taken_at = self._clock(), time.time()
            try:
                header, body_at = read_request_header(frame)
            except UnsupportedVersion as exc:
                if exc.header is not None and exc.header.api_key == ApiKey.API_VERSIONS:
                    await write_frame(sock, api_versions_fallback(exc.header.correlation_id, ranges))
                    continue
                raise CloseConnection(str(exc)) from None
            except UnknownApi as exc:
                raise CloseConnection(f"unknown API: {exc}") from None
            except MalformedRequest as exc:
                raise CloseConnection(f"malformed request header: {exc}") from None
            served = ranges.get(header.api_key)
            if served is None or not served[0] <= header.api_version <= served[1]:
                if header.api_key == ApiKey.API_VERSIONS:
                    await write_frame(sock, api_versions_fallback(header.correlation_id, ranges))
                    continue
                raise CloseConnection(f"{api_name(header.api_key)} v{header.api_version} is not served")
            try:
                body = decode_request(header, frame, body_at)
            except ProtocolError as exc:
                raise CloseConnection(
                    f"malformed {api_name(header.api_key)} v{header.api_version} request "
                    f"(correlation id {header.correlation_id}): {exc}"
                ) from None
            client.count(header, body)
            throttled = None
            if self.quotas is not None and self.quotas.active:
                await answers.muted()
                throttled = _throttled(self.quotas, header, body, conn)
            request = Request(header, body, conn)
            response = await self.handler.handle(request)
            unread = None if reader.arrived is None else taken_at - reader.arrived
            answer = _Answer(
                header, len(frame) + 4, started, unread, self._clock(), request.timing, response, throttled
            )
            del request, body, frame  # a pipelined answer must not hold its request's bytes
            if isinstance(response, Deferred) or answers.pending:
                answers.add(answer)
            else:
                await answers.write(answer, response, queued=False)
            if not sock.waited:
                await trio.lowlevel.checkpoint()  # at least once a request: the socket calls need not yield
            sock.waited = False

    # -- SASL -------------------------------------------------------------------------------------

    async def _authenticate(
        self,
        reader: _FrameReader,
        sock: Transport,
        conn: ConnectionInfo,
        current: _Session | None,
        first: memoryview | None,
        client: _ClientLabel,
    ) -> _Session | None:
        """Run one SASL exchange (SaslHandshake, then SaslAuthenticate until the mechanism is
        done); only ApiVersions is answered besides. Returns the session, or None at a clean end
        of stream. ``current`` is the session being re-authenticated: the mechanism and the
        principal must stay the same (KIP-368). Raises _AuthenticationFailed after answering a
        failure and waiting ``connection.failed.authentication.delay.ms``; CloseConnection for
        anything else out of place. Every request with a Kafka header is counted for ``client``.
        """
        sasl = self.sasl
        assert sasl is not None
        ranges = self.handler.api_ranges
        exchange: SaslServer | None = None
        legacy = False  # SaslHandshake v0: raw tokens follow, without Kafka headers
        while True:
            if first is not None:
                frame, first = first, None
            else:
                got: memoryview | None = None
                with trio.move_on_after(self.limits.idle_timeout_s) as idle:
                    got = await reader.next_frame()
                if idle.cancelled_caught:
                    raise CloseConnection(f"idle for {self.limits.idle_timeout_s:.0f} s during SASL authentication")
                if got is None:
                    return None
                frame = got
            if legacy:
                assert exchange is not None
                token = await self._sasl_step(exchange, bytes(frame), None, sock, conn)
                await sock.send_all(_SIZE.pack(len(token)) + token)
                if exchange.complete:
                    return self._session_of(exchange, conn, current)
                continue
            try:
                header, body = self._decode_sasl_phase(frame, ranges)
            except _AskLower as lower:  # an ApiVersions newer than ours: our ranges, in v0
                await write_frame(sock, api_versions_fallback(lower.correlation_id, ranges))
                continue
            client.count(header, body)
            if header.api_key == ApiKey.API_VERSIONS:
                response = await self.handler.handle(Request(header, body, conn))
                await write_frame(sock, encode_response(header, response))
            elif header.api_key == ApiKey.SASL_HANDSHAKE:
                if exchange is not None:
                    raise CloseConnection("a second SaslHandshake in one SASL exchange")
                mechanism = str(body.mechanism)
                if current is not None and mechanism != current.mechanism:
                    await write_frame(sock, encode_response(header, _handshake(ErrorCode.ILLEGAL_SASL_STATE, sasl)))
                    raise _AuthenticationFailed(
                        f"re-authentication with {mechanism}, not the connection's {current.mechanism}"
                    )
                exchange = sasl.exchange(mechanism)
                if exchange is None:
                    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
                    await write_frame(sock, encode_response(header, _handshake(code, sasl)))
                    enabled = ", ".join(sasl.mechanisms)
                    raise _AuthenticationFailed(f"mechanism {mechanism!r} is not enabled ({enabled})")
                await write_frame(sock, encode_response(header, _handshake(ErrorCode.NONE, sasl)))
                legacy = header.api_version == 0
            elif header.api_key == ApiKey.SASL_AUTHENTICATE:
                if exchange is None:
                    failed = {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b""}
                    failed["error_message"] = "SaslAuthenticate before SaslHandshake"
                    await write_frame(sock, encode_response(header, failed))
                    raise _AuthenticationFailed("SaslAuthenticate before SaslHandshake")
                token = await self._sasl_step(exchange, bytes(body.auth_bytes), header, sock, conn)
                answer: dict[str, Any] = {"error_code": ErrorCode.NONE, "auth_bytes": token}
                if exchange.complete:
                    session = self._session_of(exchange, conn, current)
                    answer["session_lifetime_ms"] = sasl.reauth_ms(exchange.mechanism)
                    await write_frame(sock, encode_response(header, answer))
                    return session
                await write_frame(sock, encode_response(header, answer))
            else:
                raise CloseConnection(f"{api_name(header.api_key)} before SASL authentication")

    def _decode_sasl_phase(self, frame: memoryview, ranges: Mapping[int, tuple[int, int]]) -> tuple[Any, Any]:
        try:
            header, body_at = read_request_header(frame)
        except UnsupportedVersion as exc:
            if exc.header is not None and exc.header.api_key == ApiKey.API_VERSIONS:
                raise _AskLower(exc.header.correlation_id) from None
            raise CloseConnection(f"before SASL authentication: {exc}") from None
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request before SASL authentication: {exc}") from None
        served = ranges.get(header.api_key)
        if served is None or not served[0] <= header.api_version <= served[1]:
            if header.api_key == ApiKey.API_VERSIONS:
                raise _AskLower(header.correlation_id)
            raise CloseConnection(f"{api_name(header.api_key)} v{header.api_version} before SASL authentication")
        try:
            return header, decode_request(header, frame, body_at)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed {api_name(header.api_key)} before SASL authentication: {exc}") from None

    async def _sasl_step(
        self, exchange: SaslServer, token: bytes, header: Any, sock: Transport, conn: ConnectionInfo
    ) -> bytes:
        """The mechanism's answer to ``token``; on failure, the failure is answered (SaslAuthenticate)
        or not (a v0 raw token), the delay waited, and _AuthenticationFailed raised."""
        sasl = self.sasl
        assert sasl is not None
        try:
            return exchange.step(token)
        except SaslFailure as exc:
            if header is not None:
                failed = {
                    "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                    "error_message": str(exc),
                    "auth_bytes": b"",
                }
                await write_frame(sock, encode_response(header, failed))
            await trio.sleep(sasl.failure_delay_s)
            raise _AuthenticationFailed(f"{exchange.mechanism}: {exc}") from None

    def _session_of(self, exchange: SaslServer, conn: ConnectionInfo, current: _Session | None) -> _Session:
        sasl = self.sasl
        assert sasl is not None
        principal = f"User:{exchange.authorization_id}"
        if current is not None and principal != current.principal:
            raise _AuthenticationFailed(f"re-authentication as {principal}, not the connection's {current.principal}")
        reauth_ms = sasl.reauth_ms(exchange.mechanism)
        expires = trio.current_time() + reauth_ms / 1000 if reauth_ms > 0 else None
        log.debug("connection from %s authenticated as %s (%s)", conn.peer, principal, exchange.mechanism)
        return _Session(principal, exchange.mechanism, expires)


#: The client label of a connection whose client sent neither a software name nor a client.id.
UNNAMED_CLIENT = "unnamed"


class _ClientLabel:
    """Counts a connection's requests by client (``strait_client_requests_total``): the client
    software name of its latest ApiVersions v3+, else the client.id of its first request."""

    __slots__ = ("label", "metrics")

    def __init__(self, metrics: NodeMetrics) -> None:
        self.metrics = metrics
        self.label: str | None = None

    def count(self, header: RequestHeader, body: Struct) -> None:
        """Count one decoded request (ApiVersions v3+ names the client first, itself included)."""
        if header.api_key == ApiKey.API_VERSIONS and header.api_version >= 3 and body.client_software_name:
            self.label = self.metrics.client_label(str(body.client_software_name))
        elif self.label is None:
            self.label = self.metrics.client_label(header.client_id or UNNAMED_CLIENT)
        self.metrics.record_client_request(self.label, api_name(header.api_key), header.api_version)


#: Produce requests of one connection whose answers may wait at once (acks=all waiting for the
#: high watermark) while the next is read. A non-idempotent client pipelines many small requests
#: over many partitions (librdkafka sends a partition's batch when its linger ends): with 5, a
#: producer over 5,000 partitions of a 3-node site waited 121 s for one record to each, with 256
#: 10 s (bench/scale_bench.py). A waiting answer keeps only its per-partition results, not the
#: request's records.
MAX_PIPELINED = 256
#: ... and while the requests whose answers wait came to less than this many bytes in all: an
#: answer's results grow with its request's partitions, so this bounds a connection's share.
MAX_PIPELINED_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class _Answer:
    """A request's answer, from its handling until it is written."""

    header: RequestHeader
    request_bytes: int
    started: float
    unread: float | None
    handled: float
    timing: RequestTiming
    response: Any
    throttled: _Throttled | None = None  # whose quotas the request counts against; None: nobody's


@dataclass(frozen=True, slots=True)
class _Throttled:
    """What a request counts against: the user and client id whose quotas apply, and which rates."""

    user: str
    client_id: str
    produce: bool  # its bytes count against producer_byte_rate
    fetch: bool  # its response's bytes count against consumer_byte_rate
    handler_time: bool  # its time counts against request_percentage


#: APIs whose time never counts against request_percentage (Kafka exempts the SASL exchange,
#: ApiVersions, and requests between brokers; strait's own APIs are between nodes and mirrors).
_REQUEST_QUOTA_EXEMPT = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.MIRROR_APPEND,
        ApiKey.TRUNCATE_PARTITIONS,
        ApiKey.PARTITION_STATES,
    }
)


def _throttled(quotas: QuotaManager, header: RequestHeader, body: Struct, conn: ConnectionInfo) -> _Throttled | None:
    """Whose quotas a request counts against, or None (a follower's fetch, an exempt API). A consumer's
    Fetch asks for at most one quota window of bytes (Kafka caps ``max_bytes`` the same way), so one
    response does not ask for a long throttle."""
    api_key = header.api_key
    replica_fetch = api_key == ApiKey.FETCH and body.replica_id >= 0
    if replica_fetch or api_key in _REQUEST_QUOTA_EXEMPT:
        return None
    user = conn.principal.partition(":")[2]
    client_id = header.client_id or ""
    fetch = api_key == ApiKey.FETCH
    if fetch and header.api_version >= 3:
        cap = quotas.fetch_cap(user, client_id)
        if cap is not None and body.max_bytes > cap:
            body.max_bytes = cap
    return _Throttled(user, client_id, api_key == ApiKey.PRODUCE, fetch, True)


_THROTTLE_FIELDS: dict[tuple[int, int], bool] = {}


def _has_throttle_field(header: RequestHeader) -> bool:
    """Whether the response to ``header``'s API and version carries ``throttle_time_ms``."""
    key = (header.api_key, header.api_version)
    found = _THROTTLE_FIELDS.get(key)
    if found is None:
        fields = schema(header.api_key).response.fields
        found = any(f.name == "throttle_time_ms" and header.api_version in f.versions for f in fields)
        _THROTTLE_FIELDS[key] = found
    return found


class _Answers:
    """A connection's answers not yet written, in request order (Kafka's rule: responses leave in
    the order the requests came).

    Kafka mutes a connection while a request is in flight. strait does too, but for one case: a
    Produce whose handler has appended and only waits for the high watermark (it returns a
    ``Deferred``) lets the next Produce of the connection be read and appended meanwhile, up to
    ``MAX_PIPELINED`` waiting at once (and ``MAX_PIPELINED_BYTES`` of their requests), so a
    client with several partitions on one leader is not held up by the replication of each in
    turn. Any other request is read only once every answer before it has been written, exactly
    as with muting. The answers are written by a task of the
    connection, in order; its failure (CloseConnection, a socket error) ends the connection.
    """

    def __init__(self, server: KafkaServer, sock: Transport, conn: ConnectionInfo, nursery: trio.Nursery) -> None:
        self._server = server
        self._sock = sock
        self._conn = conn
        self._nursery = nursery
        self._queue: collections.deque[_Answer] = collections.deque()
        self._waiting_bytes = 0  # the request bytes of the answers in the queue
        self._moved = trio.Event()  # set whenever an answer is written
        self._writing = False
        self._failure: BaseException | None = None
        self._muted_until = 0.0  # trio time: no request is handled before it (a quota's throttle)

    @property
    def pending(self) -> bool:
        return bool(self._queue)

    async def room_for(self, api_key: int) -> None:
        """Wait until a request of ``api_key`` may be handled: at once with nothing waiting, a Produce
        while fewer than MAX_PIPELINED answers wait for requests of fewer than MAX_PIPELINED_BYTES in
        all, anything else once all are written."""
        if api_key != ApiKey.PRODUCE:
            while self._queue:
                await self._next_move()
            return
        while self._queue and (len(self._queue) >= MAX_PIPELINED or self._waiting_bytes >= MAX_PIPELINED_BYTES):
            await self._next_move()

    async def muted(self) -> None:
        """Wait out the connection's throttle (KIP-219: the connection is muted for the throttle time
        its last answer carried); at once when not throttled."""
        if self._muted_until > trio.current_time():
            await trio.sleep_until(self._muted_until)

    async def drained(self) -> None:
        while self._queue:
            await self._next_move()

    async def _next_move(self) -> None:
        self._moved = trio.Event()
        await self._moved.wait()

    def add(self, answer: _Answer) -> None:
        self._queue.append(answer)
        self._waiting_bytes += answer.request_bytes
        if not self._writing:
            self._writing = True
            self._nursery.start_soon(self._write_in_order)

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def _write_in_order(self) -> None:
        try:
            while self._queue:
                answer = self._queue[0]
                response = answer.response
                if isinstance(response, Deferred):
                    response = await self._finish(answer, response)
                await self.write(answer, response)
                self._queue.popleft()
                self._waiting_bytes -= answer.request_bytes
                self._moved.set()
        except Exception as exc:
            self._failure = exc
            self._nursery.cancel_scope.cancel()
        finally:
            self._writing = False

    async def _finish(self, answer: _Answer, deferred: Deferred) -> Any:
        try:
            return await deferred.result()
        except (CloseConnection, trio.Cancelled):
            raise
        except Exception:
            header = answer.header
            log.exception(
                "%s v%d from %s (correlation id %d) failed",
                api_name(header.api_key),
                header.api_version,
                self._conn.peer,
                header.correlation_id,
            )
            raise CloseConnection("internal error while handling the request") from None

    async def write(self, answer: _Answer, response: Any, *, queued: bool = True) -> None:
        """Encode and write ``response`` (None: nothing, acks=0) and record the request's metrics;
        ``queued``: it waited in the queue (else it is written as its handler returned it)."""
        server = self._server
        header = answer.header
        written = server._clock() if queued else answer.handled
        local = answer.handled - answer.started - answer.timing.remote
        out = 0
        encoded = None if response is None else encode_response(header, response)
        if encoded is not None:
            out = encoded.size
        if answer.throttled is not None and server.quotas is not None:
            encoded = self._throttle(answer, answer.throttled, response, encoded, out, local)
        if encoded is not None:
            await write_frame(self._sock, encoded)
        done = server._clock()
        api = api_name(header.api_key)
        server.metrics.record_request(api, answer.request_bytes, out, done - answer.started)
        # Remote: what the handler waited on, plus, for an answer that waited to be written, that
        # wait (acks=all's high watermark, or the answers before it).
        remote = answer.timing.remote + (written - answer.handled)
        server.metrics.record_phases(api, answer.unread, local, remote, done - written)

    def _throttle(
        self,
        answer: _Answer,
        throttled: _Throttled,
        response: Any,
        encoded: EncodedFrame | None,
        out: int,
        local_s: float,
    ) -> EncodedFrame | None:
        """Record the request on its quotas (produce: the request's bytes; fetch: the response's; the
        handler's own time); over a quota, mute the connection and put the throttle time in the
        response (re-encoded: same size, so the fetch bytes recorded stay right), as Kafka does
        since KIP-219. The response still goes out at once, and its data with it."""
        quotas = self._server.quotas
        assert quotas is not None
        usage = Usage(
            produce_bytes=answer.request_bytes if throttled.produce else 0,
            fetch_bytes=out if throttled.fetch else 0,
            handler_s=local_s if throttled.handler_time else 0.0,
        )
        throttle_s = quotas.record(throttled.user, throttled.client_id, usage)
        if throttle_s <= 0:
            return encoded
        self._muted_until = max(self._muted_until, trio.current_time() + throttle_s)
        header = answer.header
        if encoded is None or not _has_throttle_field(header):
            return encoded
        throttle_ms = max(1, round(throttle_s * 1000))
        if isinstance(response, dict):
            response["throttle_time_ms"] = throttle_ms
        else:
            response.throttle_time_ms = throttle_ms
        return encode_response(header, response)


@dataclass(frozen=True, slots=True)
class _Session:
    """An authenticated SASL connection: who, how, and until when (None: no expiry)."""

    principal: str
    mechanism: str
    expires_at: float | None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def _handshake(code: int, sasl: ServerSasl) -> dict[str, Any]:
    return {"error_code": code, "mechanisms": list(sasl.mechanisms)}


def _api_key_of(frame: memoryview) -> int:
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1


class _AskLower(Exception):
    """An ApiVersions request of a version above ours: answered in v0 with our ranges (error 35)."""

    def __init__(self, correlation_id: int) -> None:
        super().__init__(correlation_id)
        self.correlation_id = correlation_id


class _AuthenticationFailed(Exception):
    """A SASL client that failed to authenticate; the connection is closed."""


class _HandshakeFailed(Exception):
    """A TLS client that did not complete the handshake (wrong protocol, untrusted certificate, ...)."""


async def bind_listener(host: str, port: int, *, backlog: int = 1024) -> trio.socket.SocketType:
    """A listening TCP socket on host:port (port 0 = any free port)."""
    infos = await trio.socket.getaddrinfo(
        host or None, port, type=trio.socket.SOCK_STREAM, flags=trio.socket.AI_PASSIVE
    )
    family, type_, proto, _, addr = infos[0]
    sock = trio.socket.socket(family, type_, proto)
    try:
        sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
        await sock.bind(addr)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock
