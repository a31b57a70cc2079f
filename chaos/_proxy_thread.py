"""The fault proxy for synchronous code: a ProxyServer (and its HTTP API) on trio in a background thread.

Plain pytest tests drive it through :class:`ProxyHandle`, whose methods block until the server
thread has done the change and raise the same ``ChaosError`` subclasses as the server::

    with run_in_thread() as chaos:
        zk = chaos.add_proxy("zk", upstream=zookeeper_address)
        ...                                     # point the broker at zk.listen
        with chaos.blackhole("zk"):             # nothing passes; connections stay open
            ...                                 # wait past the session timeout
        # the toxics are gone again: new connections flow

Leaving the ``with`` block (or :meth:`ProxyHandle.close`) stops the thread, closing every
listener and connection.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import TypeVar

import trio

from chaos._proxies import DEFAULT_CONNECT_TIMEOUT, DEFAULT_LISTEN, ProxyInfo, ProxyServer
from chaos._proxy_http import serve_api
from chaos._toxic import STREAMS, Toxic, make_toxic
from chaos.errors import ChaosError

__all__ = ["ProxyHandle", "run_in_thread"]

_T = TypeVar("_T")

#: Seconds to wait for the server thread to come up, and to go away.
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


def _innermost(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (trio wraps nursery errors)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class ProxyHandle:
    """A running proxy server, driven from any thread. Create it with :func:`run_in_thread`."""

    def __init__(self, *, api: str | None, seed: int | None, connect_timeout: float) -> None:
        self._api = api
        self._server = ProxyServer(seed=seed, connect_timeout=connect_timeout)
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        #: "host:port" of the HTTP API, or None when it was not asked for.
        self.api_address: str | None = None
        self._thread = threading.Thread(target=self._main, name="chaos-proxy", daemon=True)

    @property
    def api_url(self) -> str:
        """``http://host:port`` of the toxiproxy-compatible API. Raises ChaosError if it is not served."""
        if self.api_address is None:
            raise ChaosError("this proxy server has no HTTP API (run_in_thread(api=None))")
        return f"http://{self.api_address}"

    # -- lifecycle ---------------------------------------------------------------------------------

    def _start(self, timeout: float) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            with contextlib.suppress(ChaosError):
                self.close()
            raise ChaosError(f"proxy server thread not ready after {timeout} s")
        if self._failure is not None:
            self._thread.join(timeout)
            failure = _innermost(self._failure)
            if isinstance(failure, ChaosError):
                raise failure
            raise ChaosError(f"proxy server thread failed to start: {failure!r}") from failure

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # handed to the caller of _start, or of the next method
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            await nursery.start(self._server.run)
            if self._api is not None:
                self.api_address = await nursery.start(serve_api, self._server, self._api)
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()

    def close(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server: every listener and connection closes. Idempotent. Raises ChaosError if it hangs."""
        if self._token is not None and self._cancel is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise ChaosError(f"proxy server thread did not stop within {timeout} s")

    def __enter__(self) -> ProxyHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _token_or_raise(self) -> trio.lowlevel.TrioToken:
        if self._token is None:
            raise ChaosError("the proxy server is not running")
        return self._token

    def _stopped(self) -> ChaosError:
        detail = f": {_innermost(self._failure)!r}" if self._failure is not None else ""
        return ChaosError(f"the proxy server has stopped{detail}")

    def _sync(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the server's trio thread and return its result (or raise its exception)."""
        try:
            return trio.from_thread.run_sync(fn, trio_token=self._token_or_raise())
        except trio.RunFinishedError as exc:
            raise self._stopped() from exc

    def _async(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``fn()`` on the server's trio thread and return its result (or raise its exception)."""
        try:
            return trio.from_thread.run(fn, trio_token=self._token_or_raise())
        except trio.RunFinishedError as exc:
            raise self._stopped() from exc

    # -- proxies -----------------------------------------------------------------------------------

    def add_proxy(self, name: str, upstream: str, *, listen: str = DEFAULT_LISTEN, enabled: bool = True) -> ProxyInfo:
        """Create a proxy; ``listen`` of the result is the bound address (the port is real even for port 0)."""

        return self._async(lambda: self._server.create_proxy(name, upstream, listen=listen, enabled=enabled))

    def proxy(self, name: str) -> ProxyInfo:
        return self._sync(lambda: self._server.proxy(name))

    def proxies(self) -> dict[str, ProxyInfo]:
        return self._sync(self._server.proxies)

    def remove_proxy(self, name: str) -> None:
        self._async(lambda: self._server.delete_proxy(name))

    def set_enabled(self, name: str, enabled: bool) -> ProxyInfo:
        """Enable (listen again, same address) or disable (close every connection, refuse new ones) a proxy."""

        return self._async(lambda: self._server.update_proxy(name, enabled=enabled))

    def set_upstream(self, name: str, upstream: str) -> ProxyInfo:
        """Point a proxy somewhere else (its connections are dropped, as toxiproxy does)."""

        return self._async(lambda: self._server.update_proxy(name, upstream=upstream))

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._async(self._server.reset)

    # -- toxics ------------------------------------------------------------------------------------

    def add_toxic(
        self,
        proxy: str,
        type: str,
        *,
        name: str | None = None,
        stream: str = "downstream",
        toxicity: float = 1.0,
        **attributes: int,
    ) -> Toxic:
        """Attach a toxic (e.g. ``add_toxic("zk", "latency", latency=200, jitter=20)``); it hits live connections too.

        Raises InvalidRequestError for a bad type, stream, toxicity or attribute, ToxicExistsError
        if ``name`` (default ``<type>_<stream>``) is taken, ProxyNotFoundError for an unknown proxy.
        """
        toxic = make_toxic(type, name=name, stream=stream, toxicity=toxicity, attributes=attributes)
        return self._sync(lambda: self._server.add_toxic(proxy, toxic))

    def update_toxic(self, proxy: str, name: str, *, toxicity: float | None = None, **attributes: int) -> Toxic:
        changes: dict[str, object] = {"attributes": attributes}
        if toxicity is not None:
            changes["toxicity"] = toxicity
        return self._sync(lambda: self._server.update_toxic(proxy, name, changes))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._sync(lambda: self._server.remove_toxic(proxy, name))

    def toxics(self, proxy: str) -> list[Toxic]:
        return self._sync(lambda: self._server.toxics(proxy))

    @contextlib.contextmanager
    def blackhole(self, proxy: str, *, streams: tuple[str, ...] = STREAMS) -> Iterator[None]:
        """While inside: no byte passes ``proxy`` in ``streams`` and connections stay open (``timeout`` 0).

        The toxics are named ``blackhole_<stream>`` and removed on exit, whatever happened inside.
        """
        added: list[str] = []
        try:
            for stream in streams:
                added.append(self.add_toxic(proxy, "timeout", name=f"blackhole_{stream}", stream=stream).name)
            yield
        finally:
            for name in added:
                with contextlib.suppress(ChaosError):
                    self.remove_toxic(proxy, name)


def run_in_thread(
    *,
    api: str | None = "127.0.0.1:0",
    seed: int | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    start_timeout: float = START_TIMEOUT,
) -> ProxyHandle:
    """Start a proxy server in a background thread; returns once it (and its API, unless ``api`` is None) serves.

    Use the result as a context manager, or call :meth:`ProxyHandle.close`. Raises ChaosError
    (InvalidRequestError for a bad ``api`` address) if it cannot start.
    """
    handle = ProxyHandle(api=api, seed=seed, connect_timeout=connect_timeout)
    handle._start(start_timeout)
    return handle
