"""The admin APIs' JSON errors: one error shape, routing errors and failures as JSON, and a
middleware that refuses request bodies without reading them."""

from __future__ import annotations

from collections.abc import Collection
from http import HTTPStatus

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send


def json_error(status: HTTPStatus, code: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The admin APIs' error shape: ``{"error": <code>, "detail": <message>}``."""
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


async def json_http_error(request: Request, exc: Exception) -> Response:
    """Routing errors (404 unknown path, 405 method) as JSON, keeping headers such as ``Allow``."""
    if not isinstance(exc, HTTPException):
        raise TypeError(f"json_http_error handles HTTPException only, got {exc!r}")
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code == HTTPStatus.NOT_FOUND:
        return json_error(HTTPStatus.NOT_FOUND, "not_found", f"no route for path {request.url.path!r}", headers)
    if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
        # Starlette joins a set, so the order would change from run to run.
        allowed = ", ".join(sorted(m.strip() for m in (headers or {}).get("Allow", "").split(",") if m.strip()))
        headers = {**(headers or {}), "Allow": allowed}
        detail = f"method {request.method} not allowed on {request.url.path!r}; allowed: {allowed}"
        return json_error(HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed", detail, headers)
    status = HTTPStatus(exc.status_code)
    return json_error(status, status.phrase.lower().replace(" ", "_"), exc.detail, headers)


async def json_internal_error(request: Request, exc: Exception) -> Response:
    """An exception from a route: 500 as JSON naming the request and the exception (Starlette
    re-raises it afterwards for the server to log with its traceback)."""
    detail = f"{request.method} {request.url.path!r} failed: {type(exc).__name__}: {exc}"
    return json_error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error", detail)


class RefuseBodies:
    """ASGI middleware: answers 413 to a request that announces a body, without reading it.

    ``methods`` limits the check to those methods (None: every method).
    """

    def __init__(self, app: ASGIApp, methods: Collection[str] | None = None) -> None:
        self._app = app
        self._methods = methods

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (self._methods is None or scope["method"] in self._methods):
            for key, value in scope["headers"]:
                if (key == b"content-length" and value.strip() not in (b"0", b"")) or key == b"transfer-encoding":
                    response = json_error(
                        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        "body_not_accepted",
                        f"{scope['method']} {scope['path']!r} takes no request body; got {key.decode()}: "
                        f"{value.decode('latin-1')}",
                        {"Connection": "close"},
                    )
                    await response(scope, receive, send)
                    return
        await self._app(scope, receive, send)
