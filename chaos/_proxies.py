"""The fault proxy's model: named proxies, each a TCP listener that forwards connections to an upstream.

A :class:`ProxyServer` owns the proxies and runs their tasks; its methods are the in-process API
(the HTTP API and the thread handle both call them). They run on the server's trio thread, while
:meth:`ProxyServer.run` is running, and they either succeed or raise a ``ChaosError`` that names
the bad value, leaving the state as it was.

A proxy is *enabled* when its listener is bound and accepting. Disabling it closes the listener
(new connections are refused) and every connection it carries, and returns only once they are
closed. Enabling binds the same address again: a proxy created on port 0 keeps the port it got,
and ``listen`` always shows the bound address. Changing ``listen`` or ``upstream`` restarts the
proxy, dropping its connections, as toxiproxy does.
"""

from __future__ import annotations

import errno
import logging
import random
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import trio

from chaos._link import Link
from chaos._toxic import Toxic
from chaos.errors import (
    ChaosError,
    InvalidRequestError,
    ProxyExistsError,
    ProxyNotFoundError,
    ToxicExistsError,
    ToxicNotFoundError,
)

__all__ = ["DEFAULT_LISTEN", "ProxyInfo", "ProxyServer", "parse_address", "proxy_fields"]

_log = logging.getLogger(__name__)

#: Where a proxy listens when no address is given: loopback, any free port.
DEFAULT_LISTEN = "127.0.0.1:0"
#: Seconds a new connection waits for its upstream before it is closed.
DEFAULT_CONNECT_TIMEOUT = 10.0

_MAX_NAME_CHARS = 200
#: accept() errors that mean "out of resources for now": wait and retry instead of stopping the proxy.
_ACCEPT_RETRY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_ACCEPT_RETRY_SECONDS = 0.1


def parse_address(text: object, what: str, *, allow_port_zero: bool) -> tuple[str, int]:
    """``"host:port"`` (IPv6 as ``"[::1]:port"``) as ``(host, port)``. Raises InvalidRequestError naming ``what``."""
    if not isinstance(text, str) or ":" not in text:
        raise InvalidRequestError(f"invalid {what} address: {text!r}; expected 'host:port'")
    host, _, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    lowest = 0 if allow_port_zero else 1
    if not host or not port_text.isdigit() or not lowest <= int(port_text) <= 65535:
        raise InvalidRequestError(
            f"invalid {what} address: {text!r}; expected 'host:port' with a port from {lowest} to 65535"
        )
    return host, int(port_text)


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class ProxyInfo:
    """A snapshot of one proxy, as the API shows it. ``listen`` is the bound address once enabled."""

    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[Toxic, ...]

    @property
    def host(self) -> str:
        return parse_address(self.listen, "listen", allow_port_zero=True)[0]

    @property
    def port(self) -> int:
        return parse_address(self.listen, "listen", allow_port_zero=True)[1]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [t.to_json() for t in self.toxics],
        }


class _Proxy:
    """One proxy: its addresses, toxics, and (when enabled) the task serving its listener."""

    def __init__(self, name: str, listen: str, upstream: str, rng: random.Random, connect_timeout: float) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self._rng = rng
        self._connect_timeout = connect_timeout
        self._toxics: dict[str, Toxic] = {}
        self._changed = trio.Event()
        self._listener: trio.socket.SocketType | None = None
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    @property
    def enabled(self) -> bool:
        return self._scope is not None

    def info(self) -> ProxyInfo:
        return ProxyInfo(self.name, self.listen, self.upstream, self.enabled, tuple(self._toxics.values()))

    # -- ToxicSource, for the links --------------------------------------------------------------

    def active_toxics(self) -> Sequence[Toxic]:
        return list(self._toxics.values())

    def toxics_changed(self) -> trio.Event:
        return self._changed

    # -- toxics ------------------------------------------------------------------------------------

    def toxic(self, name: str) -> Toxic:
        try:
            return self._toxics[name]
        except KeyError:
            raise ToxicNotFoundError(self.name, name) from None

    def add_toxic(self, toxic: Toxic) -> None:
        if toxic.name in self._toxics:
            raise ToxicExistsError(self.name, toxic.name)
        self._toxics[toxic.name] = toxic
        self._notify()

    def replace_toxic(self, toxic: Toxic) -> None:
        self.toxic(toxic.name)
        self._toxics[toxic.name] = toxic
        self._notify()

    def remove_toxic(self, name: str) -> None:
        self.toxic(name)
        del self._toxics[name]
        self._notify()

    def clear_toxics(self) -> None:
        if self._toxics:
            self._toxics.clear()
            self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    # -- serving -----------------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Bind ``listen`` and serve it from a task in ``nursery``. Raises InvalidRequestError if it cannot bind."""
        if self.enabled:
            return
        listener = await _bind(self.listen)
        self.listen = _format_address(*listener.getsockname()[:2])
        self._stopped = trio.Event()
        await nursery.start(self._serve, listener)

    async def stop(self) -> None:
        """Close the listener and every connection; return once all of them are closed."""
        if self._scope is None:
            return
        if self._listener is not None:
            self._listener.close()  # refuse new connections from this moment
        self._scope.cancel()
        await self._stopped.wait()

    async def _serve(self, listener: trio.socket.SocketType, *, task_status: trio.TaskStatus[None]) -> None:
        self._listener = listener
        self._scope = trio.CancelScope()
        try:
            with self._scope:
                async with trio.open_nursery() as connections:
                    task_status.started()
                    await self._accept(trio.SocketListener(listener), connections)
        finally:
            listener.close()
            self._listener = None
            self._scope = None
            self._stopped.set()

    async def _accept(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                client = await listener.accept()
            except trio.ClosedResourceError:  # stop() closed the listener
                return
            except OSError as exc:
                if exc.errno in _ACCEPT_RETRY_ERRNOS:
                    _log.warning("proxy %r: accept failed, retrying: %s", self.name, exc)
                    await trio.sleep(_ACCEPT_RETRY_SECONDS)
                    continue
                _log.error("proxy %r: accept failed, proxy disabled: %s", self.name, exc)
                return
            connections.start_soon(self._forward, client)

    async def _forward(self, client: trio.SocketStream) -> None:
        host, port = parse_address(self.upstream, "upstream", allow_port_zero=False)
        upstream: trio.SocketStream | None = None
        try:
            with trio.fail_after(self._connect_timeout):
                upstream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            _log.info("proxy %r: cannot reach upstream %s, closing the client: %r", self.name, self.upstream, exc)
        finally:
            if upstream is None:  # also when cancelled while connecting
                client.socket.close()
        if upstream is not None:
            await Link(self, client, upstream, self._rng).run()


async def _bind(listen: str) -> trio.socket.SocketType:
    """A listening trio socket on ``listen``; InvalidRequestError naming the address if it cannot be had."""
    host, port = parse_address(listen, "listen", allow_port_zero=True)
    try:
        addresses = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise InvalidRequestError(f"invalid listen address: {listen!r}: cannot resolve {host!r}: {exc}") from exc
    family, kind, proto, _, address = addresses[0]
    sock = trio.socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        await sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise InvalidRequestError(f"invalid listen address: {listen!r}: cannot listen there: {exc}") from exc
    except BaseException:  # cancelled while binding
        sock.close()
        raise
    return sock


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME_CHARS or "/" in name:
        raise InvalidRequestError(
            f"invalid proxy name: {name!r}; it must be a non-empty string of at most {_MAX_NAME_CHARS} "
            "characters without '/'"
        )
    return name


class ProxyServer:
    """Many named proxies. Run :meth:`run` in a nursery; call the other methods from the same trio thread.

    ``seed`` makes toxicity draws and jitter repeatable; ``connect_timeout`` (seconds) bounds each
    connection's wait for its upstream.
    """

    def __init__(self, *, seed: int | None = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        if connect_timeout <= 0:
            raise ValueError(f"connect_timeout must be positive, got {connect_timeout}")
        self._rng = random.Random(seed)
        self._connect_timeout = connect_timeout
        self._proxies: dict[str, _Proxy] = {}
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()  # serialises the changes that wait (binding, stopping)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the proxies until cancelled; every listener and connection is closed on the way out."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def _serving(self) -> trio.Nursery:
        if self._nursery is None:
            raise ChaosError("the proxy server is not running: start ProxyServer.run first")
        return self._nursery

    def _get(self, name: str) -> _Proxy:
        try:
            return self._proxies[name]
        except KeyError:
            raise ProxyNotFoundError(name) from None

    # -- proxies -----------------------------------------------------------------------------------

    def proxies(self) -> dict[str, ProxyInfo]:
        return {name: proxy.info() for name, proxy in self._proxies.items()}

    def proxy(self, name: str) -> ProxyInfo:
        return self._get(name).info()

    async def create_proxy(
        self, name: str, upstream: str, *, listen: str = DEFAULT_LISTEN, enabled: bool = True
    ) -> ProxyInfo:
        """A new proxy, listening at once if ``enabled``. Raises ProxyExistsError or InvalidRequestError."""
        _check_name(name)
        parse_address(upstream, "upstream", allow_port_zero=False)
        parse_address(listen, "listen", allow_port_zero=True)
        async with self._lock:
            if name in self._proxies:
                raise ProxyExistsError(name)
            proxy = _Proxy(name, listen, upstream, self._rng, self._connect_timeout)
            if enabled:
                await proxy.start(self._serving())
            self._proxies[name] = proxy
            return proxy.info()

    async def update_proxy(
        self, name: str, *, enabled: bool | None = None, listen: str | None = None, upstream: str | None = None
    ) -> ProxyInfo:
        """Change a proxy's fields. A new ``listen`` or ``upstream`` restarts it; a bind failure leaves it disabled."""
        if listen is not None:
            parse_address(listen, "listen", allow_port_zero=True)
        if upstream is not None:
            parse_address(upstream, "upstream", allow_port_zero=False)
        async with self._lock:
            proxy = self._get(name)
            want_enabled = proxy.enabled if enabled is None else enabled
            moved = (listen is not None and listen != proxy.listen) or (
                upstream is not None and upstream != proxy.upstream
            )
            if moved or not want_enabled:
                await proxy.stop()
            proxy.listen = proxy.listen if listen is None else listen
            proxy.upstream = proxy.upstream if upstream is None else upstream
            if want_enabled:
                await proxy.start(self._serving())
            return proxy.info()

    async def delete_proxy(self, name: str) -> None:
        async with self._lock:
            proxy = self._get(name)
            await proxy.stop()
            del self._proxies[name]

    async def populate(self, wanted: Iterable[Mapping[str, object]]) -> list[ProxyInfo]:
        """Make each ``{"name", "upstream", "listen"?, "enabled"?}`` exist: a proxy with the same name and
        addresses is kept (its ``enabled`` set), one with other addresses is replaced. All entries are
        checked before anything changes."""
        entries = [proxy_fields(entry, creating=True) for entry in wanted]
        out: list[ProxyInfo] = []
        for fields in entries:
            name = str(fields["name"])
            existing = self._proxies.get(name)
            listen = str(fields.get("listen", DEFAULT_LISTEN))
            if existing is not None and (existing.upstream != fields["upstream"] or existing.listen != listen):
                await self.delete_proxy(name)
                existing = None
            enabled = bool(fields.get("enabled", True))
            if existing is None:
                out.append(await self.create_proxy(name, str(fields["upstream"]), listen=listen, enabled=enabled))
            else:
                out.append(await self.update_proxy(name, enabled=enabled))
        return out

    async def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        async with self._lock:
            for proxy in self._proxies.values():
                proxy.clear_toxics()
                await proxy.start(self._serving())

    # -- toxics ------------------------------------------------------------------------------------

    def toxics(self, proxy: str) -> list[Toxic]:
        return list(self._get(proxy).active_toxics())

    def toxic(self, proxy: str, name: str) -> Toxic:
        return self._get(proxy).toxic(name)

    def add_toxic(self, proxy: str, toxic: Toxic) -> Toxic:
        """Attach ``toxic``; it applies to live connections at once. Raises ToxicExistsError on a name clash."""
        self._get(proxy).add_toxic(toxic)
        return toxic

    def update_toxic(self, proxy: str, name: str, changes: Mapping[str, object]) -> Toxic:
        """Change ``toxicity`` and/or attributes (toxiproxy's update body); returns the new toxic."""
        target = self._get(proxy)
        toxic = target.toxic(name).updated(dict(changes))
        target.replace_toxic(toxic)
        return toxic

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._get(proxy).remove_toxic(name)


#: Fields of a proxy body. ``toxics`` is accepted and ignored: toxiproxy's Go client sends the
#: whole proxy, toxics included, when it saves one; toxics change only through their own routes.
_PROXY_FIELDS = ("name", "listen", "upstream", "enabled", "toxics")


def proxy_fields(body: object, *, creating: bool) -> dict[str, object]:
    """The fields of a proxy create/update body (toxiproxy's JSON), type-checked.

    Raises InvalidRequestError naming the first unknown, missing or malformed field.
    """
    if not isinstance(body, dict):
        raise InvalidRequestError(f"proxy must be a JSON object, got {type(body).__name__}: {body!r:.200}")
    for key in body:
        if key not in _PROXY_FIELDS:
            raise InvalidRequestError(f"unknown proxy field: {key!r}; known: {', '.join(_PROXY_FIELDS)}")
    if creating:
        for key in ("name", "upstream"):
            if key not in body or body[key] in ("", None):
                raise InvalidRequestError(f"missing required proxy field: {key!r}")
        _check_name(body["name"])
    if "listen" in body:
        parse_address(body["listen"], "listen", allow_port_zero=True)
    if "upstream" in body:
        parse_address(body["upstream"], "upstream", allow_port_zero=False)
    if "enabled" in body and not isinstance(body["enabled"], bool):
        raise InvalidRequestError(f"invalid proxy field enabled: {body['enabled']!r}; it must be true or false")
    return {key: value for key, value in body.items() if key != "toxics"}
