"""A trio TCP proxy a test can cut: ``freeze()`` drops every connection and refuses new ones
until ``thaw()``. Used to take one ZooKeeper client offline while the server stays up."""

from __future__ import annotations

import trio


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``upstream``; run with ``port = await nursery.start(proxy.run)``."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.frozen = False
        self.accepted = 0  # connections forwarded so far (refused ones not counted)
        self._scopes: set[trio.CancelScope] = set()

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._handle, listeners)

    def freeze(self) -> None:
        self.frozen = True
        for scope in self._scopes:
            scope.cancel()

    def thaw(self) -> None:
        self.frozen = False

    async def _handle(self, client: trio.SocketStream) -> None:
        async with client:
            if self.frozen:
                return
            with trio.CancelScope() as scope:
                self._scopes.add(scope)
                try:
                    upstream = await trio.open_tcp_stream(*self.upstream)
                    self.accepted += 1
                    async with upstream, trio.open_nursery() as nursery:
                        nursery.start_soon(_pump, client, upstream, scope)
                        nursery.start_soon(_pump, upstream, client, scope)
                except OSError:
                    pass
                finally:
                    self._scopes.discard(scope)


async def _pump(source: trio.SocketStream, sink: trio.SocketStream, scope: trio.CancelScope) -> None:
    try:
        async for chunk in source:
            await sink.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()  # either side closing ends the whole connection
