"""Toxiproxy's HTTP API over a :class:`ProxyServer`, as an ASGI app served by hypercorn on trio.

Routes (all JSON; bodies as toxiproxy defines them, so its clients work unchanged)::

    GET    /version                          200 {"version": "2.12.0", "server": ...}
    GET    /proxies                          200 {name: proxy, ...}
    POST   /proxies                          201 proxy          (name, upstream required; listen, enabled)
    POST   /populate                         201 {"proxies": [proxy, ...]}
    GET    /proxies/{proxy}                  200 proxy
    POST   /proxies/{proxy}  (or PATCH)      200 proxy          (enabled, listen, upstream)
    DELETE /proxies/{proxy}                  204
    GET    /proxies/{proxy}/toxics           200 [toxic, ...]
    POST   /proxies/{proxy}/toxics           200 toxic
    GET    /proxies/{proxy}/toxics/{toxic}   200 toxic
    POST   /proxies/{proxy}/toxics/{toxic}   200 toxic          (toxicity, attributes; or PATCH)
    DELETE /proxies/{proxy}/toxics/{toxic}   204
    POST   /reset                            204                (enable every proxy, remove every toxic)

where ``proxy`` is ``{"name", "listen", "upstream", "enabled", "toxics": [toxic, ...]}`` and ``toxic``
is ``{"name", "type", "stream", "toxicity", "attributes"}``. Errors are toxiproxy's
``{"error": <message naming the bad value>, "status": <code>}``: 400 invalid input, 403 a browser
(any ``User-Agent: Mozilla/...``, as toxiproxy refuses them: the API has no credentials, so a web page
must not drive it), 404 unknown proxy, toxic or route, 405 method, 409 name already taken, 413 body
over :data:`MAX_BODY_BYTES`.
"""

from __future__ import annotations

import json
import logging
import socket
from http import HTTPStatus
from typing import cast

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.typing import ASGIFramework
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from chaos._proxies import DEFAULT_LISTEN, ProxyServer, parse_address, proxy_fields
from chaos._toxic import toxic_from_json
from chaos.errors import (
    ChaosError,
    InvalidRequestError,
    ProxyExistsError,
    ProxyNotFoundError,
    ToxicExistsError,
    ToxicNotFoundError,
)

__all__ = ["MAX_BODY_BYTES", "TOXIPROXY_API_VERSION", "create_api", "serve_api"]

_log = logging.getLogger(__name__)

#: The toxiproxy API version whose routes and shapes this server implements.
TOXIPROXY_API_VERSION = "2.12.0"
#: The largest request body read; larger ones get 413 without being read further.
MAX_BODY_BYTES = 64 * 1024
#: Bytes of an incomplete request head hypercorn buffers before it answers 431.
_MAX_HEAD_BYTES = 16 * 1024
#: Seconds beyond the graceful timeout before the API's remaining connections are cut.
_SHUTDOWN_MARGIN = 1.0


class _BodyTooLargeError(ChaosError):
    pass


def _status_of(exc: ChaosError) -> HTTPStatus:
    if isinstance(exc, ProxyNotFoundError | ToxicNotFoundError):
        return HTTPStatus.NOT_FOUND
    if isinstance(exc, ProxyExistsError | ToxicExistsError):
        return HTTPStatus.CONFLICT
    if isinstance(exc, _BodyTooLargeError):
        return HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    if isinstance(exc, InvalidRequestError):
        return HTTPStatus.BAD_REQUEST
    return HTTPStatus.INTERNAL_SERVER_ERROR


def _error(status: HTTPStatus, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "status": int(status)}, status_code=status, headers=headers)


async def _json_body(request: Request) -> object:
    """The request body as JSON; an empty body is ``{}``. Reads at most MAX_BODY_BYTES."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise _BodyTooLargeError(f"request body too large: content-length {declared}; at most {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _BodyTooLargeError(f"request body too large: over {MAX_BODY_BYTES} bytes")
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except ValueError as exc:
        raise InvalidRequestError(f"bad request body: not JSON: {exc}") from exc


def create_api(server: ProxyServer) -> Starlette:
    """Toxiproxy's HTTP API as an ASGI app over ``server`` (which must be running on the same trio loop)."""

    async def version(request: Request) -> Response:
        return JSONResponse({"version": TOXIPROXY_API_VERSION, "server": "strait chaos proxy"})

    async def list_proxies(request: Request) -> Response:
        return JSONResponse({name: info.to_json() for name, info in server.proxies().items()})

    async def create_proxy(request: Request) -> Response:
        fields = proxy_fields(await _json_body(request), creating=True)
        info = await server.create_proxy(
            cast(str, fields["name"]),
            cast(str, fields["upstream"]),
            listen=cast(str, fields.get("listen") or DEFAULT_LISTEN),
            enabled=cast(bool, fields.get("enabled", True)),
        )
        return JSONResponse(info.to_json(), status_code=HTTPStatus.CREATED)

    async def populate(request: Request) -> Response:
        body = await _json_body(request)
        if not isinstance(body, list):
            raise InvalidRequestError(f"populate takes a JSON array of proxies, got {type(body).__name__}")
        infos = await server.populate(body)
        return JSONResponse({"proxies": [info.to_json() for info in infos]}, status_code=HTTPStatus.CREATED)

    async def show_proxy(request: Request) -> Response:
        return JSONResponse(server.proxy(request.path_params["proxy"]).to_json())

    async def update_proxy(request: Request) -> Response:
        name = request.path_params["proxy"]
        server.proxy(name)  # 404 before a body error
        fields = proxy_fields(await _json_body(request), creating=False)
        if fields.get("name", name) != name:
            raise InvalidRequestError(
                f"a proxy cannot be renamed: {name!r} -> {fields['name']!r}; delete it and create the new one"
            )
        info = await server.update_proxy(
            name,
            enabled=cast(bool | None, fields.get("enabled")),
            listen=cast(str | None, fields.get("listen")),
            upstream=cast(str | None, fields.get("upstream")),
        )
        return JSONResponse(info.to_json())

    async def delete_proxy(request: Request) -> Response:
        await server.delete_proxy(request.path_params["proxy"])
        return Response(status_code=HTTPStatus.NO_CONTENT)

    async def list_toxics(request: Request) -> Response:
        return JSONResponse([t.to_json() for t in server.toxics(request.path_params["proxy"])])

    async def create_toxic(request: Request) -> Response:
        proxy = request.path_params["proxy"]
        server.proxy(proxy)
        toxic = server.add_toxic(proxy, toxic_from_json(await _json_body(request)))
        return JSONResponse(toxic.to_json())

    async def show_toxic(request: Request) -> Response:
        return JSONResponse(server.toxic(request.path_params["proxy"], request.path_params["toxic"]).to_json())

    async def update_toxic(request: Request) -> Response:
        proxy, name = request.path_params["proxy"], request.path_params["toxic"]
        server.toxic(proxy, name)
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise InvalidRequestError(f"toxic must be a JSON object, got {type(body).__name__}")
        return JSONResponse(server.update_toxic(proxy, name, body).to_json())

    async def delete_toxic(request: Request) -> Response:
        server.remove_toxic(request.path_params["proxy"], request.path_params["toxic"])
        return Response(status_code=HTTPStatus.NO_CONTENT)

    async def reset(request: Request) -> Response:
        await server.reset()
        return Response(status_code=HTTPStatus.NO_CONTENT)

    routes = [
        Route("/version", version, methods=["GET"]),
        Route("/reset", reset, methods=["POST"]),
        Route("/populate", populate, methods=["POST"]),
        Route("/proxies", list_proxies, methods=["GET"]),
        Route("/proxies", create_proxy, methods=["POST"]),
        Route("/proxies/{proxy}", show_proxy, methods=["GET"]),
        Route("/proxies/{proxy}", update_proxy, methods=["POST", "PATCH"]),
        Route("/proxies/{proxy}", delete_proxy, methods=["DELETE"]),
        Route("/proxies/{proxy}/toxics", list_toxics, methods=["GET"]),
        Route("/proxies/{proxy}/toxics", create_toxic, methods=["POST"]),
        Route("/proxies/{proxy}/toxics/{toxic}", show_toxic, methods=["GET"]),
        Route("/proxies/{proxy}/toxics/{toxic}", update_toxic, methods=["POST", "PATCH"]),
        Route("/proxies/{proxy}/toxics/{toxic}", delete_toxic, methods=["DELETE"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(_RefuseBrowsers)],
        exception_handlers={ChaosError: _chaos_error, HTTPException: _http_error},
    )


async def _chaos_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, ChaosError):
        raise TypeError(f"_chaos_error handles ChaosError only, got {exc!r}")
    status = _status_of(exc)
    if status == HTTPStatus.INTERNAL_SERVER_ERROR:
        _log.error("%s %s failed: %s", request.method, request.url.path, exc)
    return _error(status, str(exc), {"Connection": "close"} if status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE else None)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Routing errors as toxiproxy-style JSON. Starlette routes a known path with the wrong method to 405."""
    if not isinstance(exc, HTTPException):
        raise TypeError(f"_http_error handles HTTPException only, got {exc!r}")
    status = HTTPStatus(exc.status_code)
    headers = dict(exc.headers) if exc.headers else None
    if status == HTTPStatus.NOT_FOUND:
        return _error(status, f"not found: no route for {request.url.path!r}")
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        return _error(status, f"method {request.method} not allowed on {request.url.path!r}", headers)
    return _error(status, str(exc.detail), headers)


class _RefuseBrowsers:
    """403 for browsers (User-Agent ``Mozilla/...``): a web page must not be able to reach this unauthenticated API."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == b"user-agent" and value.startswith(b"Mozilla/"):
                    await _error(HTTPStatus.FORBIDDEN, "browsers may not use the proxy API (User-Agent Mozilla/...)")(
                        scope, receive, send
                    )
                    return
        await self._app(scope, receive, send)


# -- serving ------------------------------------------------------------------------------------


async def serve_api(
    server: ProxyServer,
    address: str = "127.0.0.1:8474",
    *,
    graceful_timeout: float = 1.0,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the API for ``server`` on ``address`` ("host:port", port 0 for any) until cancelled.

    ``task_status.started`` reports the bound address ("host:port") once the socket listens. On
    cancellation the listener closes, requests in flight get ``graceful_timeout`` seconds, then
    the rest are cut off and the cancellation propagates. Raises InvalidRequestError naming the
    address if it is malformed or cannot be bound.
    """
    host, port = parse_address(address, "API", allow_port_zero=True)
    listener = await _bind(host, port)
    with listener:  # hypercorn closes it too when it stops; a second close is a no-op
        bound_host, bound_port = listener.getsockname()[:2]
        config = Config()
        config.accesslog = logging.getLogger(f"{__name__}.access")
        config.errorlog = _log
        config.graceful_timeout = graceful_timeout
        config.h11_max_incomplete_size = _MAX_HEAD_BYTES
        config.include_server_header = False
        stopping = trio.Event()
        # hypercorn drains in-flight requests after the trigger fires, while this task is being
        # cancelled, so it runs shielded and the shield gets a deadline when the drain starts.
        drain = trio.CancelScope(shield=True)

        async def hypercorn(*, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
            with drain:
                await worker_serve(
                    ASGIWrapper(cast(ASGIFramework, create_api(server))),
                    config,
                    sockets=Sockets(secure_sockets=[], insecure_sockets=[listener], quic_sockets=[]),
                    shutdown_trigger=stopping.wait,
                    task_status=task_status,
                )

        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(hypercorn)
                task_status.started(
                    f"[{bound_host}]:{bound_port}" if ":" in bound_host else f"{bound_host}:{bound_port}"
                )
                await trio.sleep_forever()
            finally:
                stopping.set()
                drain.deadline = trio.current_time() + graceful_timeout + _SHUTDOWN_MARGIN


async def _bind(host: str, port: int) -> socket.socket:
    """A listening, non-blocking stdlib socket (hypercorn wants one). InvalidRequestError names the address."""
    try:
        addresses = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = addresses[0]
    except OSError as exc:
        raise InvalidRequestError(f"invalid API address {host}:{port}: cannot resolve {host!r}: {exc}") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise InvalidRequestError(f"invalid API address {host}:{port}: cannot listen there: {exc}") from exc
    return sock
