"""Network nemeses: cut the links that run through proxies of a :mod:`chaos.proxy` server.

A test routes a connection through a named proxy (``proxy.add_proxy("zk-node1", upstream)``
and the client connects to the proxy's address); :class:`Partition` then cuts it (from plain
code, through a :class:`~chaos.proxy.ProxyHandle`), or :func:`partitioned` (from trio code
that runs its own :class:`~chaos.proxy.ProxyServer`), in one of two ways a real network fails:

- ``blackhole``: no byte passes in either direction and connections stay open (a dropped
  route: the peers notice only through their own timeouts);
- ``refuse``: every connection is closed and new ones are refused (a host or port gone).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Literal

import trio

from chaos.errors import InvalidRequestError

if TYPE_CHECKING:  # only their methods are used: importing a nemesis does not import hypercorn
    from chaos.proxy import ProxyHandle, ProxyServer

from ._base import NemesisContext

PartitionMode = Literal["blackhole", "refuse"]


class Partition(NemesisContext):
    """Cuts the proxies ``names`` of ``proxy``; :meth:`heal` lets traffic through again.

    Raises InvalidRequestError for an unknown ``mode``; the proxy's own errors
    (ProxyNotFoundError, ...) from :meth:`start`.
    """

    def __init__(self, proxy: ProxyHandle, names: Sequence[str], *, mode: PartitionMode = "blackhole") -> None:
        if mode not in ("blackhole", "refuse"):
            raise InvalidRequestError(f"invalid partition mode: {mode!r}; it must be 'blackhole' or 'refuse'")
        self.proxy = proxy
        self.names = list(names)
        self.mode = mode
        self._cut = contextlib.ExitStack()

    def start(self) -> None:
        """Cut every named proxy; returns once the cut is in place (toxics hit live connections at once)."""
        for name in self.names:
            if self.mode == "blackhole":
                self._cut.enter_context(self.proxy.blackhole(name))
            else:
                self.proxy.set_enabled(name, False)
                self._cut.callback(self.proxy.set_enabled, name, True)

    def heal(self) -> None:
        """Undo every cut made, in reverse order; idempotent."""
        self._cut.close()

    def __repr__(self) -> str:
        return f"Partition({self.names}, mode={self.mode!r})"


@contextlib.asynccontextmanager
async def partitioned(server: ProxyServer, names: Sequence[str]) -> AsyncIterator[None]:
    """The trio form of ``Partition(..., mode="refuse")`` for a ProxyServer run in the caller's trio
    run: while inside, every connection through the proxies ``names`` is closed and new ones are
    refused; on the way out (also when cancelled) they listen again at the same addresses.

    Raises the proxy's own errors (ProxyNotFoundError, ...) on entry.
    """
    cut: list[str] = []
    try:
        for name in names:
            await server.update_proxy(name, enabled=False)
            cut.append(name)
        yield
    finally:
        with trio.CancelScope(shield=True):  # short: rebinding a loopback port
            for name in reversed(cut):
                await server.update_proxy(name, enabled=True)
