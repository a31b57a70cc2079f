"""Echo servers for the proxy tests: one on trio (for trio tests), one in a thread (for plain tests).

Both send back every byte they receive and close their side once the client has closed its own.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import trio


async def _echo(stream: trio.SocketStream) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        async with stream:
            async for data in stream:
                await stream.send_all(data)


async def serve_echo(*, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """A trio echo server on 127.0.0.1; reports "127.0.0.1:PORT" and serves until cancelled."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, _echo, listeners)
        task_status.started(f"127.0.0.1:{port}")


@contextlib.contextmanager
def echo_in_thread() -> Iterator[str]:
    """A blocking echo server in daemon threads; yields "127.0.0.1:PORT" and stops on exit."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()
    clients: list[socket.socket] = []

    def handle(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            clients.append(conn)
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join(5)
        server.close()
        for conn in clients:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
