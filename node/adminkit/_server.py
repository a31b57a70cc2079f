"""Serve an ASGI app over HTTP (or HTTPS, ``tls``) on trio with hypercorn, binding the socket ourselves.

Shared by every admin API (the node's, the mirror's): port 0 works (the bound port is reported
through ``task_status``), the listener closes at once on cancellation and requests in flight
get a bounded graceful shutdown. Request heads are bounded (16 KiB).
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from typing import cast

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.typing import ASGIFramework
from starlette.types import ASGIApp

#: Seconds added to the graceful timeout before the remaining connections are cut off: hypercorn
#: itself waits ``graceful_timeout`` for requests in flight, then runs the app's lifespan shutdown.
_SHUTDOWN_MARGIN = 1.0

#: Bytes of an incomplete request head hypercorn buffers before answering 431 and closing the connection.
_MAX_REQUEST_HEAD_BYTES = 16 * 1024


async def serve_admin(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    graceful_timeout: float = 3.0,
    logger: str = "node.admin_http",
    tls: AdminTls | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over plain HTTP (HTTP/1.1, or h2c) on ``host:port`` until cancelled.

    ``port`` 0 binds any free port; ``task_status.started`` reports the port actually bound, once
    the socket listens (so connections made after ``nursery.start`` returns are served).
    On cancellation the listener closes at once, requests in flight get ``graceful_timeout``
    seconds to finish, then everything is cut off; the cancellation then propagates.
    Access logs go to the ``<logger>.access`` logger, server messages to ``logger``.

    Raises ValueError naming ``port`` or ``graceful_timeout`` if out of range, and OSError naming
    ``host:port`` if it cannot be resolved or bound.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"admin HTTP port must be in 0..65535, got {port}")
    if graceful_timeout <= 0:
        raise ValueError(f"graceful_timeout must be positive, got {graceful_timeout}")
    listener = await _bind(host, port)
    # hypercorn wraps this very socket object and closes it when it stops; closing it again here
    # is a no-op, and closes it if hypercorn never got that far. (An ``fd://`` bind would give
    # hypercorn a second owner of the same descriptor.)
    with listener:
        bound_port: int = listener.getsockname()[1]
        config = _hypercorn_config(graceful_timeout, logger)
        if tls is not None:
            config.certfile, config.keyfile, config.keyfile_password = tls.pem, tls.pem, tls.password
        secure, insecure = ([listener], []) if tls is not None else ([], [listener])
        shutdown = trio.Event()
        # Hypercorn's graceful shutdown has to run while this task is being cancelled, so it runs
        # shielded; the shield gets a deadline the moment the shutdown starts.
        drain = trio.CancelScope(shield=True)

        async def run_hypercorn(*, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
            with drain:
                await worker_serve(
                    # Starlette types the ASGI scope as a mapping, hypercorn as TypedDicts: same protocol.
                    ASGIWrapper(cast(ASGIFramework, app)),
                    config,
                    sockets=Sockets(secure_sockets=secure, insecure_sockets=insecure, quic_sockets=[]),
                    shutdown_trigger=shutdown.wait,
                    task_status=task_status,
                )

        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(run_hypercorn)
                task_status.started(bound_port)
                await trio.sleep_forever()
            finally:
                shutdown.set()
                drain.deadline = trio.current_time() + graceful_timeout + _SHUTDOWN_MARGIN


@dataclass(frozen=True)
class AdminTls:
    """HTTPS for an admin API: one PEM file with the private key and the certificate chain (a
    node's ``ssl.keystore.location``), and the key's password if it is encrypted."""

    pem: str
    password: str | None = field(default=None, repr=False)


async def _bind(host: str, port: int) -> socket.socket:
    """A non-blocking TCP socket bound to ``host:port`` and listening. Raises OSError naming both."""
    try:
        addresses = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot resolve admin HTTP host {host!r}: {exc.strerror}") from exc
    family, kind, proto, _, address = addresses[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot bind admin HTTP server to {host}:{port}: {exc.strerror}") from exc
    return sock


def _hypercorn_config(graceful_timeout: float, logger: str) -> Config:
    config = Config()
    config.accesslog = logging.getLogger(f"{logger}.access")
    config.errorlog = logging.getLogger(logger)
    config.graceful_timeout = graceful_timeout
    config.h11_max_incomplete_size = _MAX_REQUEST_HEAD_BYTES
    config.include_server_header = False
    return config
