"""What every admin API serves alike, and the OpenAPI pieces that describe it.

``admin_app`` builds the Starlette app around a service's own routes: ``/health`` (200 when the
view's status is "ok", else 503), ``/metrics`` (Prometheus text), ``/openapi.json``, errors as
JSON, request bodies refused unread. The ``*_path`` and schema helpers build the matching
parts of the service's OpenAPI 3.1 document; ``openapi_document`` puts it together.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from http import HTTPStatus
from typing import Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ._errors import RefuseBodies, json_http_error, json_internal_error

OPENAPI_VERSION = "3.1.0"


class Exposition(Protocol):
    """Metrics as Prometheus text (``node.metrics.NodeMetrics``, ``mirror._metrics.MirrorMetrics``)."""

    @property
    def content_type(self) -> str: ...

    def render(self) -> bytes: ...


def admin_app(
    routes: Sequence[BaseRoute],
    *,
    health: Callable[[], Mapping[str, object]],
    metrics: Exposition,
    openapi: Callable[[], dict[str, object]],
    refuse_bodies_on: Collection[str] | None = None,
) -> Starlette:
    """``routes`` plus ``GET /health`` (``health()``; 200 when its "status" is "ok", else 503),
    ``GET /metrics`` (``metrics.render()``) and ``GET /openapi.json`` (``openapi()``).

    Unknown paths and methods answer JSON 404/405, an exception from a route answers JSON 500
    (and is re-raised for the server to log), and a request announcing a body answers 413 without
    being read (only for the ``refuse_bodies_on`` methods; None: every method).
    """

    async def health_route(request: Request) -> Response:
        body = health()
        status = HTTPStatus.OK if body.get("status") == "ok" else HTTPStatus.SERVICE_UNAVAILABLE
        return JSONResponse(body, status_code=status)

    async def metrics_route(request: Request) -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    async def openapi_route(request: Request) -> Response:
        return JSONResponse(openapi())

    return Starlette(
        routes=[
            Route("/health", health_route, methods=["GET"]),
            Route("/metrics", metrics_route, methods=["GET"]),
            *routes,
            Route("/openapi.json", openapi_route, methods=["GET"]),
        ],
        middleware=[Middleware(RefuseBodies, methods=refuse_bodies_on)],
        exception_handlers={HTTPException: json_http_error, Exception: json_internal_error},
    )


# -- OpenAPI pieces ----------------------------------------------------------------------------------


def json_content(schema: dict[str, object], description: str) -> dict[str, object]:
    """A response (or body) of JSON described by ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def schema_ref(name: str) -> dict[str, object]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def error_schema(example_code: str) -> dict[str, object]:
    """The ``Error`` component: ``{"error": <code>, "detail": <message>}`` (``json_error``)."""
    return {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {
            "error": {"type": "string", "description": f"Machine-readable code, e.g. {example_code}."},
            "detail": {"type": "string", "description": "What went wrong, naming the value involved."},
        },
    }


def error_response() -> dict[str, object]:
    """The ``default`` response of every operation: an ``Error``."""
    return json_content(
        schema_ref("Error"), "An error: unknown path (404), method (405), request body (413), failure (500)."
    )


def health_path(summary: str, unhealthy: str) -> dict[str, object]:
    """``/health``: a ``Health`` component, 200 when ok, 503 (described by ``unhealthy``) when not."""
    return {
        "get": {
            "summary": summary,
            "operationId": "getHealth",
            "responses": {
                "200": json_content(schema_ref("Health"), "Status ok."),
                "503": json_content(schema_ref("Health"), unhealthy),
                "default": error_response(),
            },
        }
    }


def metrics_path(description: str) -> dict[str, object]:
    """``/metrics``: Prometheus text, ``description`` saying what the metric names start with."""
    return {
        "get": {
            "summary": "Prometheus metrics",
            "operationId": "getMetrics",
            "responses": {
                "200": {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}},
                "default": error_response(),
            },
        }
    }


def openapi_path() -> dict[str, object]:
    """``/openapi.json``: the document itself."""
    return {
        "get": {
            "summary": "This document",
            "operationId": "getOpenApi",
            "responses": {
                "200": json_content({"type": "object"}, "The OpenAPI 3.1 document."),
                "default": error_response(),
            },
        }
    }


def openapi_document(
    *,
    title: str,
    description: str,
    paths: dict[str, object],
    schemas: dict[str, object],
    security_schemes: dict[str, object] | None = None,
) -> dict[str, object]:
    """An OpenAPI 3.1 document (version "1" of the API) of ``paths`` and component ``schemas``."""
    components: dict[str, object] = {"schemas": schemas}
    if security_schemes is not None:
        components["securitySchemes"] = security_schemes
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": "1", "description": description},
        "paths": paths,
        "components": components,
    }
