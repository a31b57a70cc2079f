"""The mirror process's admin HTTP API (starlette, served by hypercorn on trio), and a client for it.

Routes::

    GET    /health                    200 {"status": "ok", ...}; 503 while starting or when a link failed
    GET    /metrics                   Prometheus text (mirror._metrics)
    GET    /v1/links                  {"links": [link status, ...], "deleted": [name, ...], "member_id": str}
    GET    /v1/links/{name}           one link's status (LinkRunner.status() plus "name", "paused",
                                      "membership"); 404 naming an unknown or deleted link
    POST   /v1/links/{name}/pause     stop the link's copiers (persisted)          [token]
    POST   /v1/links/{name}/resume    restart them (persisted)                     [token]
    POST   /v1/links/{name}/failover  stop everything, answer the cut, fence       [token, body]
    POST   /v1/links/{name}/restore   undo a failover (persisted)                  [token]
    POST   /v1/links/{name}/sync-groups  one group offset sync pass now           [token]
    PUT    /v1/links/{name}           add a link at runtime (persisted)            [token, body]
    DELETE /v1/links/{name}           stop the link and keep it stopped (persisted); a runtime
                                      link is stopped and forgotten                [token]
    GET    /dr                        the DR status page (HTML; ``mirror._dr_page``)
    GET    /v1/dr                     {"links": [the failover status of each link], "member_id"}: the
                                      numbers of ``strait failover status --json``; 501 without a DR
                                      status source (``mirror._dr``)
    GET    /v1/links/{name}/lag-history  the link's lag over time (``mirror._lag_history``)
    GET    /openapi.json              the OpenAPI 3.1 document of all of this

Every response but ``/metrics`` and ``/dr`` is JSON; errors are ``{"error": <code>, "detail": <message>}``.
The state-changing routes require ``Authorization: Bearer <token>`` (compared in constant time);
without it, or with another token, they answer 401 with a ``WWW-Authenticate`` header. The
token check comes before the body is read and before the link lookup.

Bodies: only ``failover`` and ``PUT`` take one, a JSON object of at most 64 KiB: a larger
``Content-Length`` gets 413 before anything is read, a chunked body 413 as soon as it passes
the limit; anything but a JSON object, an unknown key or a bad value gets 400 naming it. Every
other route answers 413 to a request announcing a body, without reading it; hypercorn bounds
request heads (``node.adminkit.serve_admin``). Other answers: 409 for a name the link file has
(``PUT``) or a link that is not running (``sync-groups``), 503 when a failover could not read
the cut from the target (the link stays failed over: call again).

:class:`MirrorAdminClient` speaks this API from blocking code (the ``strait mirror`` commands,
failover tooling); from trio, call it through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import difflib
import hmac
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from node import adminkit
from node.adminkit import RefuseBodies, json_error

from ._config import ConfigError, MirrorError
from ._dr import PAGE_HEADERS, DrUnavailable, DrView
from ._dr_page import PAGE
from ._failover import CutUnavailable
from ._fencer import check_fence_text
from ._metrics import MirrorMetrics
from ._openapi import openapi_document

__all__ = [
    "MAX_BODY_BYTES",
    "AdminApiError",
    "LinkConflict",
    "LinkNotRunning",
    "MirrorAdminClient",
    "MirrorAdminView",
    "UnknownLink",
    "check_token",
    "create_app",
    "openapi_document",
]

_REALM = 'Bearer realm="strait-mirror"'
MAX_BODY_BYTES = 64 * 1024
# (method, path) of the routes that take a body; every other request announcing one gets 413 unread.
_BODY_ROUTES = (("POST", re.compile(r"/v1/links/[^/]+/failover")), ("PUT", re.compile(r"/v1/links/[^/]+")))
_FAILOVER_KEYS = ("fence", "auto_fence")
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,1024}")  # RFC 6750's b64token, at least 16 characters


def check_token(token: str, origin: str) -> str:
    """Return ``token`` if it can be sent as a bearer token; raises MirrorError naming ``origin`` otherwise."""
    if not _TOKEN.fullmatch(token):
        raise MirrorError(
            f"the admin token from {origin} must be one line of 16-1024 characters of A-Z a-z 0-9 . _ ~ + / = -"
        )
    return token


class UnknownLink(MirrorError):
    """No link of that name runs in this process (never configured, or deleted)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(detail)
        self.name = name


class LinkConflict(MirrorError):
    """A link of that name exists with another definition, or in the link file (409)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(detail)
        self.name = name


class LinkNotRunning(MirrorError):
    """The link's runner is not running, so it cannot do what was asked (409)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(detail)
        self.name = name


class _BadBody(Exception):
    """The request body cannot be used: the answer to send instead."""

    def __init__(self, response: Response) -> None:
        super().__init__(response)
        self.response = response


class MirrorAdminView(DrView, Protocol):
    """What the admin API shows and changes; implemented by ``MirrorService``.

    Called on the trio thread; the sync methods must not block. ``UnknownLink`` from any method
    taking a name becomes a 404.
    """

    def health(self) -> dict[str, Any]:
        """``{"status": "ok" | "starting" | "degraded", "member_id": str, "links": {name: state}}``."""
        ...

    def links(self) -> dict[str, Any]:
        """``{"links": [status, ...], "deleted": [name, ...], "member_id": str}``."""
        ...

    def link(self, name: str) -> dict[str, Any]:
        """One link's status; raises UnknownLink."""
        ...

    def statuses(self) -> list[dict[str, Any]]:
        """The status of every running link, for the metrics."""
        ...

    async def pause(self, name: str) -> dict[str, Any]:
        """Pause and persist; returns ``{"name", "state"}``. Raises UnknownLink."""
        ...

    async def resume(self, name: str) -> dict[str, Any]:
        """Resume and persist; returns ``{"name", "state"}``. Raises UnknownLink."""
        ...

    async def delete(self, name: str) -> dict[str, Any]:
        """Stop the link, mark it deleted and persist (forget a runtime link); returns
        ``{"name", "state": "deleted", "stopped"}``."""
        ...

    async def failover(self, name: str, fence: str | None, auto_fence: bool) -> dict[str, Any]:
        """Fail over and persist; returns ``{"name", "state": "failed-over", "partitions", "stopped"}``.
        Raises UnknownLink, CutUnavailable."""
        ...

    async def restore(self, name: str) -> dict[str, Any]:
        """Undo a failover and persist; returns ``{"name", "state", "restored"}``. Raises UnknownLink."""
        ...

    async def sync_groups(self, name: str) -> dict[str, Any]:
        """One group offset sync pass; returns ``{"name", "passes", "last_error", "groups"}``.
        Raises UnknownLink, LinkNotRunning."""
        ...

    async def put_link(self, name: str, definition: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Add a link at runtime; returns (created, ``{"name", "state", "created"}``). Raises
        ConfigError (400) and LinkConflict (409)."""
        ...


# -- the app ------------------------------------------------------------------------------------


def create_app(view: MirrorAdminView, token: str) -> Starlette:
    """The admin API over ``view``; state-changing routes require ``token`` (non-empty)."""
    check_token(token, "create_app")
    metrics = MirrorMetrics(view.statuses)
    expected = token.encode()

    async def links(request: Request) -> Response:
        return JSONResponse(view.links())

    async def link(request: Request) -> Response:
        try:
            return JSONResponse(view.link(request.path_params["name"]))
        except UnknownLink as exc:
            return json_error(HTTPStatus.NOT_FOUND, "link_not_found", str(exc))

    async def lag_history(request: Request) -> Response:
        try:
            return JSONResponse(view.lag_history(request.path_params["name"]), headers={"Cache-Control": "no-store"})
        except UnknownLink as exc:
            return json_error(HTTPStatus.NOT_FOUND, "link_not_found", str(exc))

    async def dr_status(request: Request) -> Response:
        try:
            return JSONResponse(await view.dr_status(), headers={"Cache-Control": "no-store"})
        except DrUnavailable as exc:
            return json_error(HTTPStatus.NOT_IMPLEMENTED, "dr_status_unavailable", str(exc))

    async def dr_page(request: Request) -> Response:
        return HTMLResponse(PAGE, headers=PAGE_HEADERS)

    async def pause(request: Request) -> Response:
        return await _change(request, view.pause)

    async def resume(request: Request) -> Response:
        return await _change(request, view.resume)

    async def delete(request: Request) -> Response:
        return await _change(request, view.delete)

    async def restore(request: Request) -> Response:
        return await _change(request, view.restore)

    async def sync_groups(request: Request) -> Response:
        return await _change(request, view.sync_groups)

    async def failover(request: Request) -> Response:
        async def action(name: str) -> dict[str, Any]:
            fence, auto_fence = _failover_request(await _json_body(request, required=False))
            return await view.failover(name, fence, auto_fence)

        return await _change(request, action)

    async def put_link(request: Request) -> Response:
        created = False

        async def action(name: str) -> dict[str, Any]:
            nonlocal created
            created, answer = await view.put_link(name, await _json_body(request, required=True))
            return answer

        response = await _change(request, action)
        if created:
            response.status_code = HTTPStatus.CREATED
        return response

    async def _change(request: Request, action: Callable[[str], Awaitable[dict[str, Any]]]) -> Response:
        refused = _refuse_unauthorized(request, expected)
        if refused is not None:
            return refused
        try:
            return JSONResponse(await action(request.path_params["name"]))
        except _BadBody as exc:
            return exc.response
        except UnknownLink as exc:
            return json_error(HTTPStatus.NOT_FOUND, "link_not_found", str(exc))
        except ConfigError as exc:
            return json_error(HTTPStatus.BAD_REQUEST, "bad_link_definition", str(exc))
        except LinkConflict as exc:
            return json_error(HTTPStatus.CONFLICT, "link_conflict", str(exc))
        except LinkNotRunning as exc:
            return json_error(HTTPStatus.CONFLICT, "link_not_running", str(exc))
        except CutUnavailable as exc:
            return json_error(HTTPStatus.SERVICE_UNAVAILABLE, "cut_unavailable", str(exc))

    routes = [
        Route("/v1/links", links, methods=["GET"]),
        Route("/v1/links/{name}", link, methods=["GET"]),
        Route("/v1/links/{name}", put_link, methods=["PUT"]),
        Route("/v1/links/{name}", delete, methods=["DELETE"]),
        Route("/v1/links/{name}/pause", pause, methods=["POST"]),
        Route("/v1/links/{name}/resume", resume, methods=["POST"]),
        Route("/v1/links/{name}/failover", failover, methods=["POST"]),
        Route("/v1/links/{name}/restore", restore, methods=["POST"]),
        Route("/v1/links/{name}/sync-groups", sync_groups, methods=["POST"]),
        Route("/v1/links/{name}/lag-history", lag_history, methods=["GET"]),
        Route("/v1/dr", dr_status, methods=["GET"]),
        Route("/dr", dr_page, methods=["GET"]),
    ]
    app = adminkit.admin_app(routes, health=view.health, metrics=metrics, openapi=openapi_document, refuse_bodies_on=())
    app.add_middleware(_BodyPolicy)  # in place of admin_app's RefuseBodies: two routes take a body
    return app


class _BodyPolicy:
    """ASGI middleware: the routes of ``_BODY_ROUTES`` take a body of at most ``MAX_BODY_BYTES``
    (a larger ``Content-Length`` gets 413 unread); every other request announcing a body gets
    413 unread (``node.adminkit.RefuseBodies``)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._refuse = RefuseBodies(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if not any(scope["method"] == m and p.fullmatch(scope["path"]) for m, p in _BODY_ROUTES):
            await self._refuse(scope, receive, send)
            return
        for key, value in scope["headers"]:
            if key == b"content-length":
                length = value.strip()
                if not length.isdigit():
                    response = json_error(
                        HTTPStatus.BAD_REQUEST, "bad_content_length", f"Content-Length {value.decode('latin-1')!r}"
                    )
                elif int(length) > MAX_BODY_BYTES:
                    response = _too_large(scope["method"], scope["path"], f"Content-Length: {int(length)}")
                else:
                    continue
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _too_large(method: str, path: str, what: str) -> JSONResponse:
    return json_error(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        "body_too_large",
        f"{method} {path!r} takes a JSON object of at most {MAX_BODY_BYTES} bytes; got {what}",
        {"Connection": "close"},
    )


async def _json_body(request: Request, *, required: bool) -> dict[str, Any]:
    """The request's JSON object body, read up to ``MAX_BODY_BYTES``; raises _BadBody (413, 400).
    No body at all is ``{}`` unless ``required``."""
    data = bytearray()
    async with contextlib.aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            data += chunk
            if len(data) > MAX_BODY_BYTES:
                raise _BadBody(_too_large(request.method, request.url.path, f"more than {MAX_BODY_BYTES} bytes"))
    where = f"{request.method} {request.url.path}"
    if not data.strip():
        if required:
            raise _BadBody(json_error(HTTPStatus.BAD_REQUEST, "body_required", f"{where} needs a JSON object body"))
        return {}
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _BadBody(
            json_error(HTTPStatus.BAD_REQUEST, "bad_json", f"{where}: the body is not JSON: {exc}")
        ) from None
    if not isinstance(value, dict):
        raise _BadBody(
            json_error(
                HTTPStatus.BAD_REQUEST,
                "bad_json",
                f"{where}: the body must be a JSON object, not {type(value).__name__}",
            )
        )
    return value


def _failover_request(body: dict[str, Any]) -> tuple[str | None, bool]:
    """(fence text or None, auto_fence) from a failover body; raises _BadBody naming the bad key."""

    def bad(detail: str) -> _BadBody:
        return _BadBody(json_error(HTTPStatus.BAD_REQUEST, "bad_failover_request", f"failover: {detail}"))

    for key in body:
        if key not in _FAILOVER_KEYS:
            close = difflib.get_close_matches(key, _FAILOVER_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(_FAILOVER_KEYS)})"
            raise bad(f"unknown key {key!r}{hint}")
    auto_fence = body.get("auto_fence", True)
    if not isinstance(auto_fence, bool):
        raise bad(f"auto_fence: must be true or false, not {auto_fence!r}")
    fence = body.get("fence")
    if fence is not None:
        try:
            check_fence_text(fence)
        except MirrorError as exc:
            raise bad(str(exc)) from None
    return fence, auto_fence


def _refuse_unauthorized(request: Request, expected: bytes) -> Response | None:
    header = request.headers.get("authorization")
    if header is None:
        return _unauthorized(
            "missing_token",
            f"{request.method} {request.url.path} changes state: send 'Authorization: Bearer <token>' with the "
            "mirror's admin token (--admin-token-file, or <state-dir>/admin.token)",
        )
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return _unauthorized(
            "bad_authorization", f"expected 'Authorization: Bearer <token>', got an {scheme!r} authorization"
        )
    if not hmac.compare_digest(value.strip().encode(), expected):
        return _unauthorized("wrong_token", "the bearer token is not this mirror's admin token")
    return None


def _unauthorized(code: str, detail: str) -> JSONResponse:
    return json_error(HTTPStatus.UNAUTHORIZED, code, detail, {"WWW-Authenticate": _REALM})


# -- the client -----------------------------------------------------------------------------------


class AdminApiError(MirrorError):
    """A call to a mirror's admin API failed; ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


ADMIN_CA_ENV = "STRAIT_MIRROR_ADMIN_CA"


class MirrorAdminClient:
    """Blocking client of one mirror process's admin API at ``url`` (``http://host:port``, or
    ``https://`` when the mirror serves it over TLS: the certificate is checked against ``ca``, a
    PEM bundle, else the file named by ``$STRAIT_MIRROR_ADMIN_CA``, else the system's CAs).

    ``token`` is needed for the state-changing verbs (pause, resume, delete, failover, restore,
    sync_groups, put_link). The constructor raises AdminApiError for a bad URL and MirrorError for
    a malformed token; every method raises AdminApiError whose message names the URL and, for an
    error answer, the server's detail.
    """

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0, ca: str | None = None) -> None:
        parsed = urllib.parse.urlsplit(url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise AdminApiError(f"admin URL {url!r} is not an http://host:port URL")
        try:
            parsed.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError as exc:
            raise AdminApiError(f"admin URL {url!r}: {exc}") from None
        self.url = f"{parsed.scheme}://{parsed.netloc}{parsed.path.rstrip('/')}"
        self.token = check_token(token, "the admin client's caller") if token is not None else None
        self.timeout = timeout
        self._context: ssl.SSLContext | None = None
        if parsed.scheme == "https":
            ca = ca or os.environ.get(ADMIN_CA_ENV) or None
            try:
                self._context = ssl.create_default_context(cafile=ca)
            except (OSError, ssl.SSLError) as exc:
                raise AdminApiError(f"cannot read the admin API's CA bundle {ca}: {exc}") from None

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/health", accept=(HTTPStatus.OK, HTTPStatus.SERVICE_UNAVAILABLE))

    def links(self) -> dict[str, Any]:
        return self._json("GET", "/v1/links")

    def link(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/links/{_quote(name)}")

    def pause(self, name: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/links/{_quote(name)}/pause", auth=True)

    def resume(self, name: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/links/{_quote(name)}/resume", auth=True)

    def delete(self, name: str) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/links/{_quote(name)}", auth=True)

    def failover(self, name: str, *, fence: str | None = None, auto_fence: bool = True) -> dict[str, Any]:
        """Fail ``name`` over; answers the cut (``{"name", "state", "partitions", "stopped"}``).
        ``fence`` None: the text given before, or one the mirror makes up naming both sites.
        Waits at least 60 s (stopping the copiers and reading the cut are bounded by the mirror)."""
        body: dict[str, Any] = {"auto_fence": auto_fence}
        if fence is not None:
            body["fence"] = fence
        return self._json(
            "POST", f"/v1/links/{_quote(name)}/failover", auth=True, payload=body, timeout=max(self.timeout, 60.0)
        )

    def restore(self, name: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/links/{_quote(name)}/restore", auth=True)

    def sync_groups(self, name: str) -> dict[str, Any]:
        """One group offset sync pass now: ``{"name", "passes", "last_error", "groups": [...]}``."""
        return self._json("POST", f"/v1/links/{_quote(name)}/sync-groups", auth=True, timeout=max(self.timeout, 60.0))

    def put_link(self, name: str, definition: dict[str, Any]) -> dict[str, Any]:
        """Add link ``name`` (the keys of a ``[[link]]`` table) at runtime; ``created`` says
        whether it is new (False: the same definition ran already)."""
        return self._json(
            "PUT",
            f"/v1/links/{_quote(name)}",
            auth=True,
            payload=definition,
            accept=(HTTPStatus.OK, HTTPStatus.CREATED),
        )

    def metrics(self) -> str:
        return self._request("GET", "/metrics")[1].decode()

    def _json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        """``_request`` (``options`` are its keywords), its answer parsed as a JSON object."""
        _, body = self._request(method, path, **options)
        try:
            data = json.loads(body)
        except ValueError:
            raise AdminApiError(f"{method} {self.url}{path}: the answer is not JSON: {body[:200]!r}") from None
        if not isinstance(data, dict):
            raise AdminApiError(f"{method} {self.url}{path}: expected a JSON object, got {type(data).__name__}")
        return data

    def _request(
        self,
        method: str,
        path: str,
        *,
        auth: bool = False,
        accept: tuple[int, ...] = (HTTPStatus.OK,),
        payload: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        headers = {"Accept": "application/json"}
        if auth:
            if not self.token:
                raise AdminApiError(f"{method} {path} changes state and needs the mirror's admin token")
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if payload is not None:
            data = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(f"{self.url}{path}", method=method, headers=headers, data=data)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout, context=self._context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            if exc.code in accept:
                return exc.code, body
            code, detail = _error_of(body)
            raise AdminApiError(
                f"{method} {self.url}{path}: {exc.code} {detail or exc.reason}", exc.code, code
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AdminApiError(f"cannot reach the mirror admin API at {self.url}: {reason}") from None


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _error_of(body: bytes) -> tuple[str | None, str | None]:
    try:
        data = json.loads(body)
    except ValueError:
        return None, body.decode(errors="replace")[:200] or None
    if isinstance(data, dict):
        return data.get("error"), data.get("detail")
    return None, None
