"""The mirror process's admin HTTP API (starlette, served by hypercorn on trio), and a client for it.

Routes::

    GET    /health                    200 {"status": "ok", ...}; 503 while starting or when a link failed
    GET    /metrics                   Prometheus text (mirror._metrics)
    GET    /v1/links                  {"links": [link status, ...], "deleted": [name, ...], "member_id": str}
    GET    /v1/links/{name}           one link's status (LinkRunner.status() plus "name", "paused",
                                      "membership"); 404 naming an unknown or deleted link
    POST   /v1/links/{name}/pause     stop the link's copiers (persisted)          [token]
    POST   /v1/links/{name}/resume    restart them (persisted)                     [token]
    DELETE /v1/links/{name}           stop the link and keep it stopped (persisted) [token]
    GET    /openapi.json              the OpenAPI 3.1 document of all of this

Every response but ``/metrics`` is JSON; errors are ``{"error": <code>, "detail": <message>}``.
The three state-changing routes require ``Authorization: Bearer <token>`` (compared in constant
time); without it, or with another token, they answer 401 with a ``WWW-Authenticate`` header.
The token check comes before the link lookup. No route takes a request body: one announced
(``Content-Length`` above 0 or ``Transfer-Encoding``) gets 413 without being read, and
hypercorn bounds request heads (``node.adminkit.serve_admin``).

:class:`MirrorAdminClient` speaks this API from blocking code (the ``strait mirror`` commands,
failover tooling); from trio, call it through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import hmac
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from node import adminkit
from node.adminkit import error_response, json_content, json_error, schema_ref

from ._config import MirrorError
from ._metrics import MirrorMetrics

__all__ = [
    "AdminApiError",
    "MirrorAdminClient",
    "MirrorAdminView",
    "UnknownLink",
    "check_token",
    "create_app",
    "openapi_document",
]

_REALM = 'Bearer realm="strait-mirror"'
_HEALTH_STATUSES = ("ok", "starting", "degraded")
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


class MirrorAdminView(Protocol):
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
        """Stop the link, mark it deleted and persist; returns ``{"name", "state": "deleted"}``."""
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

    async def pause(request: Request) -> Response:
        return await _change(request, view.pause)

    async def resume(request: Request) -> Response:
        return await _change(request, view.resume)

    async def delete(request: Request) -> Response:
        return await _change(request, view.delete)

    async def _change(request: Request, action: Callable[[str], Awaitable[dict[str, Any]]]) -> Response:
        refused = _refuse_unauthorized(request, expected)
        if refused is not None:
            return refused
        try:
            return JSONResponse(await action(request.path_params["name"]))
        except UnknownLink as exc:
            return json_error(HTTPStatus.NOT_FOUND, "link_not_found", str(exc))

    routes = [
        Route("/v1/links", links, methods=["GET"]),
        Route("/v1/links/{name}", link, methods=["GET"]),
        Route("/v1/links/{name}", delete, methods=["DELETE"]),
        Route("/v1/links/{name}/pause", pause, methods=["POST"]),
        Route("/v1/links/{name}/resume", resume, methods=["POST"]),
    ]
    return adminkit.admin_app(routes, health=view.health, metrics=metrics, openapi=openapi_document)


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


class MirrorAdminClient:
    """Blocking client of one mirror process's admin API at ``url`` (``http://host:port``).

    ``token`` is needed for pause, resume and delete. The constructor raises AdminApiError for a
    bad URL and MirrorError for a malformed token; every method raises AdminApiError whose
    message names the URL and, for an error answer, the server's detail.
    """

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0) -> None:
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

    def metrics(self) -> str:
        return self._request("GET", "/metrics")[1].decode()

    def _json(
        self, method: str, path: str, *, auth: bool = False, accept: tuple[int, ...] = (HTTPStatus.OK,)
    ) -> dict[str, Any]:
        _, body = self._request(method, path, auth=auth, accept=accept)
        try:
            data = json.loads(body)
        except ValueError:
            raise AdminApiError(f"{method} {self.url}{path}: the answer is not JSON: {body[:200]!r}") from None
        if not isinstance(data, dict):
            raise AdminApiError(f"{method} {self.url}{path}: expected a JSON object, got {type(data).__name__}")
        return data

    def _request(
        self, method: str, path: str, *, auth: bool = False, accept: tuple[int, ...] = (HTTPStatus.OK,)
    ) -> tuple[int, bytes]:
        headers = {"Accept": "application/json"}
        if auth:
            if not self.token:
                raise AdminApiError(f"{method} {path} changes state and needs the mirror's admin token")
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.url}{path}", method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
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


# -- the OpenAPI document -----------------------------------------------------------------------


def openapi_document() -> dict[str, object]:
    """The OpenAPI 3.1 description of every route ``create_app`` serves (a fresh dict each call)."""
    error = error_response()
    name_param = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    count = {"type": "integer", "minimum": 0}
    offset = {"type": "integer", "description": "-1 while not known."}
    partition = {
        "type": "object",
        "required": [
            "partition",
            "state",
            "mirrored_offset",
            "source_high_watermark",
            "source_log_start",
            "lag_records",
            "lag_bytes",
            "lag_seconds",
            "records_copied",
            "bytes_copied",
            "gaps",
            "gap_records",
            "errors",
            "last_error",
        ],
        "properties": {
            "partition": count,
            "state": {
                "type": "string",
                "description": "unassigned (another process owns it), starting, copying, paused, stopped, "
                "diverged, failed",
            },
            "mirrored_offset": offset | {"description": "The target's log end offset; -1 while not known."},
            "source_high_watermark": offset,
            "source_log_start": offset,
            "lag_records": offset,
            "lag_bytes": offset | {"description": "Estimated from the mean record size copied; -1 unknown."},
            "lag_seconds": {"type": "number", "description": "Age of the oldest unmirrored record; -1 unknown."},
            "records_copied": count,
            "bytes_copied": count,
            "gaps": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "gap_records": count,
            "errors": count,
            "last_error": {"type": ["string", "null"]},
        },
    }
    schemas: dict[str, object] = {
        "Error": adminkit.error_schema("link_not_found"),
        "Health": {
            "type": "object",
            "required": ["status", "member_id", "links"],
            "properties": {
                "status": {"enum": list(_HEALTH_STATUSES), "description": "Only ok answers 200."},
                "member_id": {"type": "string"},
                "links": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "Partition": partition,
        "LinkStatus": {
            "type": "object",
            "required": ["name", "state", "paused", "link", "topics", "totals", "latency", "membership"],
            "properties": {
                "name": {"type": "string"},
                "state": {"enum": ["starting", "running", "paused", "stopped", "failed"]},
                "paused": {"type": "boolean"},
                "error": {"type": ["string", "null"], "description": "Why the link failed to run (state failed)."},
                "link": {"type": "object", "description": "The link's configuration."},
                "syncs": count,
                "last_sync_ms": {"type": ["integer", "null"]},
                "last_sync_error": {"type": ["string", "null"]},
                "topics": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "source_partitions": count,
                            "target_partitions": count,
                            "problem": {"type": ["string", "null"]},
                            "partitions": {"type": "array", "items": schema_ref("Partition")},
                        },
                    },
                },
                "conflicts": {"type": "array", "items": {"type": "object"}},
                "totals": {"type": "object"},
                "latency": {
                    "type": "object",
                    "description": "Replication latency histogram: cumulative [upper bound s, count] buckets.",
                },
                "membership": {
                    "type": "object",
                    "description": "kind sole (this process owns every partition) or zookeeper (member_id, "
                    "members, leader, claimed partitions).",
                },
            },
            "additionalProperties": True,
        },
        "Links": {
            "type": "object",
            "required": ["links", "deleted", "member_id"],
            "properties": {
                "links": {"type": "array", "items": schema_ref("LinkStatus")},
                "deleted": {"type": "array", "items": {"type": "string"}},
                "member_id": {"type": "string"},
            },
        },
        "Action": {
            "type": "object",
            "required": ["name", "state"],
            "properties": {"name": {"type": "string"}, "state": {"type": "string"}},
        },
    }
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    unauthorized = json_content(schema_ref("Error"), "No token, or not this mirror's token.")
    not_found = json_content(
        schema_ref("Error"), "No link of that name runs here (or it was deleted); the detail names it."
    )

    def change(summary: str, operation: str) -> dict[str, object]:
        return {
            "summary": summary,
            "operationId": operation,
            "parameters": name_param,
            "security": secured,
            "responses": {
                "200": json_content(schema_ref("Action"), "Done, and persisted in the state dir."),
                "401": unauthorized,
                "404": not_found,
                "default": error,
            },
        }

    paths: dict[str, object] = {
        "/health": adminkit.health_path("Process health", "Starting, or a link failed to run."),
        "/metrics": adminkit.metrics_path("Prometheus text exposition format; names start with strait_mirror_."),
        "/v1/links": {
            "get": {
                "summary": "Every link of this process with its status",
                "operationId": "listLinks",
                "responses": {"200": json_content(schema_ref("Links"), "All links."), "default": error},
            }
        },
        "/v1/links/{name}": {
            "get": {
                "summary": "One link's status, per partition",
                "operationId": "getLink",
                "parameters": name_param,
                "responses": {
                    "200": json_content(schema_ref("LinkStatus"), "The link."),
                    "404": not_found,
                    "default": error,
                },
            },
            "delete": change("Stop the link and keep it stopped across restarts", "deleteLink"),
        },
        "/v1/links/{name}/pause": {"post": change("Pause the link's copiers (persisted)", "pauseLink")},
        "/v1/links/{name}/resume": {"post": change("Resume the link's copiers (persisted)", "resumeLink")},
        "/openapi.json": adminkit.openapi_path(),
    }
    return adminkit.openapi_document(
        title="strait mirror admin API",
        description=(
            "Health, metrics and link status of one strait mirror process, and pause / resume / delete of "
            "its links. State-changing routes require 'Authorization: Bearer <token>'."
        ),
        paths=paths,
        schemas=schemas,
        security_schemes={"bearer": {"type": "http", "scheme": "bearer"}},
    )
