"""One Kafka connection from trio: requests in order, responses matched by correlation id."""

from __future__ import annotations

import itertools
import ssl
import struct
from collections.abc import Mapping
from typing import Any

import trio

from node.protocol import ApiKey, ErrorCode, RequestHeader, Struct, decode_response, encode_request, error_info

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


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


class NodeConnection:
    def __init__(self, stream: trio.abc.Stream, address: str, client_id: str) -> None:
        self.stream = stream
        self.address = address
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._lock = trio.Lock()
        self._buf = bytearray()
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def open(
        cls,
        address: str,
        *,
        client_id: str = "strait",
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> NodeConnection:
        """Connect (over TLS when ``ssl_context`` is given, checking the certificate against the
        host name of ``address`` as the context says) and ask ApiVersions."""
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
        conn = cls(stream, address, client_id)
        try:
            body = await conn.request(ApiKey.API_VERSIONS, 0, {}, timeout=timeout)
            if body.error_code:
                raise ClientError.from_code(body.error_code, f"ApiVersions from {address}")
            conn.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        except BaseException:
            await conn.aclose()
            raise
        return conn

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
        async with self._lock:
            correlation_id = next(self._ids)
            header = RequestHeader(int(api_key), version, correlation_id, self.client_id, 1)
            frame = encode_request(header, body)
            try:
                with trio.fail_after(timeout):
                    await self.stream.send_all(frame)
                    payload = await self._read_frame()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise ClientError(f"connection to {self.address} failed: {exc}") from None
            except trio.TooSlowError:
                raise ClientError(f"no answer from {self.address} within {timeout} s") from None
            got, response = decode_response(api_key, version, payload)
            if got != correlation_id:
                raise ClientError(f"{self.address} answered correlation id {got}, expected {correlation_id}")
            return response

    async def _read_frame(self) -> memoryview:
        while len(self._buf) < 4:
            await self._receive()
        (size,) = _SIZE.unpack_from(self._buf)
        if size < 0 or size > MAX_RESPONSE_BYTES:
            raise ClientError(f"{self.address} sent a response of {size} bytes")
        while len(self._buf) < 4 + size:
            await self._receive()
        frame = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return memoryview(frame)

    async def _receive(self) -> None:
        data = await self.stream.receive_some(256 * 1024)
        if not data:
            raise ClientError(f"{self.address} closed the connection")
        self._buf += data

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> NodeConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
