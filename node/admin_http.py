"""The node's admin HTTP API: health, Prometheus metrics and read-only JSON state, with its OpenAPI document.

Routes (``GET``, and ``HEAD`` as HTTP requires; any other method gets 405 with an ``Allow`` header)::

    /health             200 when the view reports status "ok", else 503; JSON body from AdminView.health()
    /metrics            Prometheus text format from NodeMetrics.render()
    /v1/cluster         JSON object from AdminView.cluster(): controller, live brokers, partition counts
    /v1/topics          JSON list from AdminView.topics()
    /v1/topics/{name}   one topic, or 404 naming it
    /v1/log-dirs        JSON list from AdminView.log_dirs()
    /v1/groups          JSON list from AdminView.groups()
    /v1/groups/{id}     one group, or 404 naming it
    /openapi.json       the OpenAPI 3.1 document below, describing every route and schema

Every response except ``/metrics`` is JSON; errors are ``{"error": <code>, "detail": <message>}``.
Unknown paths get 404, a ``GET`` carrying a body gets 413 (the body is never read) and a failing
view gets 500. Nothing here changes state, so no credentials are asked for; endpoints that change
state will require them.

``create_app`` builds the ASGI app; ``serve_admin`` binds the listening socket itself (so port 0
works and the real port is reported through ``task_status``) and runs the app under hypercorn on
trio until cancelled, then shuts down gracefully within a deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from node import adminkit
from node.adminkit import error_response, json_content, json_error, schema_ref, serve_admin
from node.metrics import MetricsView, NodeMetrics

__all__ = ["AdminView", "create_app", "openapi_document", "serve_admin"]


_HEALTH_STATUSES = ("ok", "degraded", "starting")


class AdminView(MetricsView, Protocol):
    """The broker state the admin API shows. Implemented by the node; a fake in tests.

    Methods are called on the trio thread, must not block, and return JSON-serialisable data
    (str, int, float, bool, None, lists and dicts). Keys beyond those listed are passed through.
    """

    def health(self) -> dict[str, object]:
        """``{"status": "ok" | "degraded" | "starting", "broker_id": int, "controller_id": int (-1: none),
        "is_controller": bool, ...}``; only "ok" is healthy."""
        ...

    def topics(self) -> list[dict[str, object]]:
        """The topics this node knows, each::

            {"name": str, "topic_id": str, "configs": {key: str | None},
             "partitions": [{"partition": int, "leader": int (-1: none), "leader_epoch": int,
                             "replicas": [int], "isr": [int],
                             "role": "leader" | "follower" | "none" | None,
                             "under_replicated": bool, "offline": bool,
                             "followers": [{"broker_id": int, "log_end_offset": int | None,
                                            "caught_up_ms_ago": int | None}],
                             "log_start_offset": int | None, "high_watermark": int | None,
                             "log_end_offset": int | None, "size_bytes": int | None,
                             "log_dir": str | None, "online": bool}]}

        ``role`` is that of this node's replica, None when it has none. ``under_replicated``: the
        ISR is smaller than the replicas; ``offline``: the partition has no live leader.
        ``followers`` is filled only where this node leads. Offsets, size and log dir are None
        when this node holds no readable replica of the partition; ``online`` is false when the
        partition cannot be served (no live leader, or this node's replica sits on an offline log dir).
        """
        ...

    def log_dirs(self) -> list[dict[str, object]]:
        """This node's log dirs, each ``{"path": str, "online": bool, "bytes": int | None, "partitions": int}``.

        ``bytes`` is None when the dir is offline; ``partitions`` counts the partitions placed in it.
        """
        ...


# -- the app ------------------------------------------------------------------------------------


def create_app(view: AdminView, metrics: NodeMetrics) -> Starlette:
    """The admin API as an ASGI app over ``view`` and ``metrics``.

    Attaches ``view`` to ``metrics`` so that scrapes of ``/metrics`` include the state gauges.
    The app holds no state of its own; every request reads the view afresh.
    """
    metrics.attach_view(view)

    def listing(read: Callable[[], object]) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            return JSONResponse(read())

        return handle

    def one_of(
        read: Callable[[], list[dict[str, object]]], key: str, param: str, code: str, missing: str
    ) -> Callable[[Request], Awaitable[Response]]:
        """The entry of ``read()`` whose ``key`` is the path parameter, or 404 ``code`` (``missing`` names it)."""

        async def handle(request: Request) -> Response:
            wanted = request.path_params[param]
            for entry in read():
                if entry.get(key) == wanted:
                    return JSONResponse(entry)
            return json_error(HTTPStatus.NOT_FOUND, code, missing.format(wanted))

        return handle

    cluster = listing(view.cluster)
    topics = listing(view.topics)
    topic = one_of(view.topics, "name", "name", "topic_not_found", "no topic named {!r} on this node")
    log_dirs = listing(view.log_dirs)
    groups = listing(view.groups)
    group = one_of(view.groups, "group_id", "group_id", "group_not_found", "no group {!r} is coordinated by this node")

    routes = [
        Route("/v1/cluster", cluster, methods=["GET"]),
        Route("/v1/topics", topics, methods=["GET"]),
        Route("/v1/topics/{name}", topic, methods=["GET"]),
        Route("/v1/log-dirs", log_dirs, methods=["GET"]),
        Route("/v1/groups", groups, methods=["GET"]),
        Route("/v1/groups/{group_id}", group, methods=["GET"]),
    ]
    return adminkit.admin_app(
        routes, health=view.health, metrics=metrics, openapi=openapi_document, refuse_bodies_on=("GET", "HEAD")
    )


# -- the OpenAPI document -----------------------------------------------------------------------


def openapi_document() -> dict[str, object]:
    """The OpenAPI 3.1 description of every route ``create_app`` serves (a fresh dict each call)."""
    nullable_int: dict[str, object] = {"type": ["integer", "null"]}
    schemas: dict[str, object] = {
        "Group": {
            "type": "object",
            "required": ["group_id", "state", "protocol_type", "protocol", "generation", "members", "offsets"],
            "properties": {
                "group_id": {"type": "string"},
                "state": {"type": "string", "description": "Empty, PreparingRebalance, CompletingRebalance, Stable"},
                "protocol_type": {"type": ["string", "null"]},
                "protocol": {"type": ["string", "null"], "description": "The chosen assignor, e.g. range."},
                "generation": {"type": "integer"},
                "members": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["member_id", "group_instance_id", "client_id", "client_host", "assignment"],
                        "properties": {
                            "member_id": {"type": "string"},
                            "group_instance_id": {"type": ["string", "null"]},
                            "client_id": {"type": "string"},
                            "client_host": {"type": "string"},
                            "assignment": {
                                "type": ["array", "null"],
                                "items": {"type": "string", "description": "topic-partition"},
                            },
                        },
                    },
                },
                "offsets": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["topic", "partition", "committed", "log_end", "lag"],
                        "properties": {
                            "topic": {"type": "string"},
                            "partition": {"type": "integer"},
                            "committed": {"type": "integer"},
                            "log_end": {"type": ["integer", "null"], "description": "High watermark, if local."},
                            "lag": {"type": ["integer", "null"]},
                        },
                    },
                },
            },
        },
        "Error": adminkit.error_schema("not_found"),
        "Health": {
            "type": "object",
            "required": ["status", "broker_id", "controller_id", "is_controller"],
            "properties": {
                "status": {"enum": list(_HEALTH_STATUSES), "description": "Only ok answers 200."},
                "broker_id": {"type": "integer"},
                "controller_id": {
                    "type": "integer",
                    "description": "Broker id of the controller in ZooKeeper; -1 when there is none.",
                },
                "is_controller": {"type": "boolean", "description": "True while this node is the active controller."},
                "cluster_id": {"type": "string"},
                "offline_log_dirs": {"type": "array", "items": {"type": "string"}},
                "bootstrap": {
                    "type": ["string", "null"],
                    "description": "host:port the first listener advertises; null before the node serves.",
                },
                "listeners": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Each listener's name with the host:port it advertises, in listeners order.",
                },
            },
            "additionalProperties": True,
        },
        "Cluster": {
            "type": "object",
            "required": [
                "broker_id",
                "controller",
                "is_controller",
                "live_brokers",
                "partitions",
                "leaders",
                "under_replicated",
                "under_replicated_led",
                "offline",
                "replica_fetch_errors",
            ],
            "properties": {
                "broker_id": {"type": "integer", "description": "This node."},
                "controller": {
                    "type": ["object", "null"],
                    "required": ["broker_id", "epoch"],
                    "properties": {"broker_id": {"type": "integer"}, "epoch": {"type": "integer", "minimum": 0}},
                    "description": "The controller ZooKeeper names, with its controller epoch; null when none.",
                },
                "is_controller": {"type": "boolean", "description": "True while this node is the active controller."},
                "live_brokers": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Broker ids registered in ZooKeeper, ascending.",
                },
                "partitions": {"type": "integer", "minimum": 0, "description": "Partitions of all topics."},
                "leaders": {"type": "integer", "minimum": 0, "description": "Partitions this node leads."},
                "under_replicated": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Partitions of the whole cluster whose ISR is smaller than their replicas.",
                },
                "under_replicated_led": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Of those, the ones this node leads (Kafka's UnderReplicatedPartitions).",
                },
                "offline": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Partitions of the whole cluster without a live leader.",
                },
                "replica_fetch_errors": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Times a replica fetcher's session with a leader failed and was restarted.",
                },
            },
        },
        "Follower": {
            "type": "object",
            "required": ["broker_id", "log_end_offset", "caught_up_ms_ago"],
            "properties": {
                "broker_id": {"type": "integer"},
                "log_end_offset": {
                    "type": ["integer", "null"],
                    "description": "The follower's log end offset as its last fetch said; null before it fetched.",
                },
                "caught_up_ms_ago": {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "description": "Milliseconds since the follower last reached the leader's log end "
                    "(ISR members count from when this node became leader); null if never.",
                },
            },
        },
        "Partition": {
            "type": "object",
            "required": [
                "partition",
                "leader",
                "leader_epoch",
                "replicas",
                "isr",
                "role",
                "under_replicated",
                "offline",
                "followers",
                "log_start_offset",
                "high_watermark",
                "log_end_offset",
                "size_bytes",
                "log_dir",
                "online",
            ],
            "properties": {
                "partition": {"type": "integer", "minimum": 0},
                "leader": {"type": "integer", "description": "Broker id of the leader; -1 when there is none."},
                "replicas": {"type": "array", "items": {"type": "integer"}},
                "leader_epoch": {"type": "integer", "description": "Leader epoch in ZooKeeper; -1 when not known."},
                "isr": {"type": "array", "items": {"type": "integer"}, "description": "In-sync replicas."},
                "role": {
                    "type": ["string", "null"],
                    "enum": ["leader", "follower", "none", None],
                    "description": "What this node's replica acts as; none: no leader known; null: no replica here.",
                },
                "under_replicated": {"type": "boolean", "description": "The ISR is smaller than the replicas."},
                "offline": {
                    "type": "boolean",
                    "description": "No live leader: none elected, or the leader is not registered or its replica "
                    "is on a failed log dir.",
                },
                "followers": {
                    "type": "array",
                    "items": schema_ref("Follower"),
                    "description": "Where this node leads: what it knows of each follower; empty otherwise.",
                },
                "log_start_offset": nullable_int,
                "high_watermark": nullable_int,
                "log_end_offset": nullable_int,
                "size_bytes": nullable_int,
                "log_dir": {"type": ["string", "null"], "description": "Null when no replica is on this node."},
                "online": {
                    "type": "boolean",
                    "description": "False when the partition cannot be served: offline, or this node's replica "
                    "is on a failed log dir.",
                },
            },
        },
        "Topic": {
            "type": "object",
            "required": ["name", "topic_id", "partitions", "configs"],
            "properties": {
                "name": {"type": "string"},
                "topic_id": {"type": "string"},
                "partitions": {"type": "array", "items": schema_ref("Partition")},
                "configs": {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "null"]},
                    "description": "Topic configs by Kafka key; null for sensitive values.",
                },
            },
        },
        "LogDir": {
            "type": "object",
            "required": ["path", "online", "bytes", "partitions"],
            "properties": {
                "path": {"type": "string"},
                "online": {"type": "boolean"},
                "bytes": {"type": ["integer", "null"], "description": "Bytes of segments; null while offline."},
                "partitions": {"type": "integer", "minimum": 0, "description": "Partitions placed in this dir."},
                "moves_in": {
                    "type": "array",
                    "description": "Replicas being moved into this dir (AlterReplicaLogDirs), with how many "
                    "offsets their copies are behind.",
                    "items": {
                        "type": "object",
                        "required": ["topic", "partition", "offset_lag"],
                        "properties": {
                            "topic": {"type": "string"},
                            "partition": {"type": "integer", "minimum": 0},
                            "offset_lag": {"type": "integer", "minimum": 0},
                        },
                    },
                },
            },
        },
    }
    paths: dict[str, object] = {
        "/health": adminkit.health_path("Node health", "Status degraded or starting."),
        "/metrics": adminkit.metrics_path("Prometheus text exposition format; metric names start with strait_."),
        "/v1/cluster": {
            "get": {
                "summary": "The cluster as this node sees it in ZooKeeper: controller, live brokers, partition counts",
                "operationId": "getCluster",
                "responses": {
                    "200": json_content(schema_ref("Cluster"), "The cluster."),
                    "default": error_response(),
                },
            }
        },
        "/v1/topics": {
            "get": {
                "summary": "Topics this node knows",
                "operationId": "listTopics",
                "responses": {
                    "200": json_content({"type": "array", "items": schema_ref("Topic")}, "All topics."),
                    "default": error_response(),
                },
            }
        },
        "/v1/topics/{name}": {
            "get": {
                "summary": "One topic",
                "operationId": "getTopic",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": json_content(schema_ref("Topic"), "The topic."),
                    "404": json_content(schema_ref("Error"), "No topic of that name; the detail names it."),
                    "default": error_response(),
                },
            }
        },
        "/v1/log-dirs": {
            "get": {
                "summary": "This node's log dirs",
                "operationId": "listLogDirs",
                "responses": {
                    "200": json_content({"type": "array", "items": schema_ref("LogDir")}, "All log dirs."),
                    "default": error_response(),
                },
            }
        },
        "/v1/groups": {
            "get": {
                "summary": "Consumer groups this node coordinates, with committed offsets and lag",
                "operationId": "listGroups",
                "responses": {
                    "200": json_content(
                        {"type": "array", "items": schema_ref("Group")}, "All groups coordinated here."
                    ),
                    "default": error_response(),
                },
            }
        },
        "/v1/groups/{group_id}": {
            "get": {
                "summary": "One consumer group",
                "operationId": "getGroup",
                "parameters": [{"name": "group_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": json_content(schema_ref("Group"), "The group."),
                    "404": json_content(schema_ref("Error"), "Not a group this node coordinates; the detail names it."),
                    "default": error_response(),
                },
            }
        },
        "/openapi.json": adminkit.openapi_path(),
    }
    return adminkit.openapi_document(
        title="strait node admin API",
        description=(
            "Read-only health, metrics and state of one strait broker node. Nothing here changes "
            "state, so no credentials are required; endpoints that change state will require them."
        ),
        paths=paths,
        schemas=schemas,
    )
