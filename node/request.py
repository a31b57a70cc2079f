"""What one Kafka request is to a handler: the header, the decoded body, the connection it came on.

The server (``node.server``) owns sockets and frames; handlers (``node.handlers``) see only a
``Request``. Nothing here does I/O. ``listener`` is the name of the listener the connection
came in on (``LOCAL``, ``WAN``): Metadata and FindCoordinator answer with that listener's
addresses. ``principal`` is the authenticated identity of the connection once listeners
authenticate (SASL/TLS, by ``security_protocol``); until then every request is anonymous.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from node.protocol import RequestHeader, Struct

ANONYMOUS = "User:ANONYMOUS"  # Kafka's principal for unauthenticated connections


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """The client end of a connection, as the listener accepted it."""

    peer: str  # host:port
    listener: str  # the listener's name, as in listeners=NAME://host:port
    principal: str = ANONYMOUS
    security_protocol: str = "PLAINTEXT"  # of the listener (listener.security.protocol.map)

    @property
    def host(self) -> str:
        return self.peer.rsplit(":", 1)[0]


class RequestTiming:
    """What a handler tells the server about its time: ``remote`` is the seconds it spent waiting
    on other nodes or on data (acks=all waiting for the high watermark, a fetch's long poll), as
    opposed to working (Kafka's RemoteTimeMs against LocalTimeMs)."""

    __slots__ = ("remote",)

    def __init__(self) -> None:
        self.remote = 0.0


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request and where it came from; handlers take this, never the server."""

    header: RequestHeader
    body: Struct
    connection: ConnectionInfo
    timing: RequestTiming = field(default_factory=RequestTiming, compare=False, repr=False)

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def principal(self) -> str:
        return self.connection.principal


class Deferred:
    """What a handler returns once its own work is done and only waiting is left (acks=all
    waiting for the high watermark): the server calls ``result`` for the response when the
    answers before it have been written, and may read the connection's next Produce meanwhile
    (``node.server``). ``result`` must not hold the request's bytes."""

    __slots__ = ("_finish",)

    def __init__(self, finish: Callable[[], Awaitable[Any]]) -> None:
        self._finish = finish

    async def result(self) -> Any:
        return await self._finish()


class CloseConnection(Exception):
    """Raised by a handler (or the server) to drop the connection after logging ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
