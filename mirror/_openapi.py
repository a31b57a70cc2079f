"""The OpenAPI 3.1 document of the mirror's admin API (``mirror._admin``), served at ``/openapi.json``."""

from __future__ import annotations

from node import adminkit
from node.adminkit import error_response, json_content, schema_ref

__all__ = ["HEALTH_STATUSES", "openapi_document"]

HEALTH_STATUSES = ("ok", "starting", "degraded")


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
            "last_fetch_ms",
        ],
        "properties": {
            "partition": count,
            "state": {
                "type": "string",
                "description": "unassigned (another process owns it), starting, copying, paused, stopped, "
                "diverged, failed, failed-over",
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
            "last_fetch_ms": {
                "type": ["integer", "null"],
                "description": "When the source last answered a fetch of it without an error (ms); null before any.",
            },
        },
    }
    ms_or_null = {"type": ["integer", "null"]}
    cut_partition = {
        "type": "object",
        "required": ["topic", "partition", "mirrored_offset", "source_high_watermark", "source_seen_ms"],
        "properties": {
            "topic": {"type": "string", "description": "The source topic."},
            "partition": count,
            "mirrored_offset": offset
            | {"description": "Where the target's copy ends (its log end offset): everything below is there."},
            "source_high_watermark": offset | {"description": "The source's high watermark last seen."},
            "source_seen_ms": ms_or_null | {"description": "When it was seen (ms); null if never."},
        },
    }
    link_definition = {
        "type": "object",
        "description": "A link definition: the keys of a [[link]] table of the link file (docs/mirror.md), "
        "as JSON; name defaults to the path's.",
        "required": ["source", "target"],
        "properties": {
            "name": {"type": "string"},
            "mode": {"enum": ["offset-preserving", "mm2"]},
            "source": {"type": "object"},
            "target": {"type": "object"},
            "topics": {"type": "object"},
            "groups": {"type": "object"},
            "sync_interval_s": {"type": "number"},
            "group_sync_interval_s": {"type": "number"},
        },
        "additionalProperties": False,
    }
    schemas: dict[str, object] = {
        "Error": adminkit.error_schema("link_not_found"),
        "Health": {
            "type": "object",
            "required": ["status", "member_id", "links"],
            "properties": {
                "status": {"enum": list(HEALTH_STATUSES), "description": "Only ok answers 200."},
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
                "state": {"enum": ["starting", "running", "paused", "stopped", "failed", "failed-over"]},
                "paused": {"type": "boolean"},
                "runtime": {"type": "boolean", "description": "Added through PUT /v1/links/{name}."},
                "source_reachable": {"type": "boolean", "description": "Whether the source answered last time."},
                "last_source_contact_ms": ms_or_null
                | {"description": "When the source last answered (a sync pass, a fetch, the fencer); null never."},
                "failed_over": {
                    "type": ["object", "null"],
                    "description": "While failed over: {fence, auto_fence, at_ms}; else null.",
                },
                "fence": schema_ref("Fence"),
                "error": {"type": ["string", "null"], "description": "Why the link failed to run (state failed)."},
                "link": {"type": "object", "description": "The link's configuration."},
                "syncs": count,
                "last_sync_ms": {"type": ["integer", "null"]},
                "last_sync_error": {"type": ["string", "null"]},
                "security_sync": {
                    "type": "object",
                    "description": "The ACL and SCRAM credential sync: acls and users, each {enabled, owned, "
                    "passes, created, deleted, last_error, note, conflicts}; ledger (where the owned set "
                    "lives); last_pass_ms.",
                },
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
        "Fence": {
            "type": "object",
            "required": ["state", "topics", "last_error", "fenced_ms"],
            "properties": {
                "state": {
                    "enum": ["off", "pending", "fenced"],
                    "description": "off: no fencer runs; pending: some selected source topic is not fenced yet.",
                },
                "topics": {"type": "array", "items": {"type": "string"}, "description": "Source topics fenced."},
                "last_error": {"type": ["string", "null"]},
                "fenced_ms": ms_or_null | {"description": "When every selected topic was first fenced."},
            },
        },
        "FailoverRequest": {
            "type": "object",
            "properties": {
                "fence": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "description": "The strait.fenced text set on the source topics: the reason and where to "
                    "produce instead (one line). Default: the text given before, or one naming both sites.",
                },
                "auto_fence": {"type": "boolean", "default": True},
            },
            "additionalProperties": False,
        },
        "Failover": {
            "type": "object",
            "required": ["name", "state", "partitions", "stopped"],
            "properties": {
                "name": {"type": "string"},
                "state": {"const": "failed-over"},
                "partitions": {"type": "array", "items": schema_ref("CutPartition")},
                "stopped": {
                    "type": "boolean",
                    "description": "Every copier stopped between appends in time (false: some were cancelled).",
                },
            },
        },
        "CutPartition": cut_partition,
        "GroupSync": {
            "type": "object",
            "required": ["name", "passes", "last_error", "groups"],
            "properties": {
                "name": {"type": "string"},
                "passes": count,
                "last_error": {"type": ["string", "null"]},
                "groups": {"type": "array", "items": {"type": "object"}},
            },
        },
        "LinkDefinition": link_definition,
        "DrStatus": {
            "type": "object",
            "required": ["links", "member_id"],
            "properties": {
                "links": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "description": "What `strait failover status --json` answers for the link (the same "
                        "computation): format, link, at_ms, link_state, dr (state, epoch, primary, journal), "
                        "mirror, source, target, partitions (source_end, mirrored_end, lag, rpo_records, rpo_bytes, "
                        "rpo_exact, ...) and rpo (the totals); or {format, link: {name}, at_ms, error} when it could "
                        "not be computed.",
                        "required": ["format", "link", "at_ms"],
                        "additionalProperties": True,
                    },
                },
                "member_id": {"type": "string"},
            },
        },
        "LagHistory": {
            "type": "object",
            "required": ["name", "interval_s", "capacity", "columns", "points"],
            "properties": {
                "name": {"type": "string"},
                "interval_s": {"type": "number", "description": "Seconds between samples."},
                "capacity": {"type": "integer", "description": "At most this many points are kept (the newest)."},
                "columns": {"const": ["at_ms", "lag_records", "lag_seconds", "rpo_records"]},
                "points": {
                    "type": "array",
                    "description": "Oldest first: [at_ms, total lag records, largest lag seconds, RPO records "
                    "measured by GET /v1/dr since the previous sample or null].",
                    "items": {"type": "array", "minItems": 4, "maxItems": 4},
                },
            },
        },
    }
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    unauthorized = json_content(schema_ref("Error"), "No token, or not this mirror's token.")
    not_found = json_content(
        schema_ref("Error"), "No link of that name runs here (or it was deleted); the detail names it."
    )

    def change(
        summary: str,
        operation: str,
        answer: str = "Action",
        *,
        body: str | None = None,
        body_required: bool = False,
        ok: str = "Done, and persisted in the state dir.",
        extra: dict[str, object] | None = None,
    ) -> dict[str, object]:
        out: dict[str, object] = {
            "summary": summary,
            "operationId": operation,
            "parameters": name_param,
            "security": secured,
            "responses": {
                "200": json_content(schema_ref(answer), ok),
                "401": unauthorized,
                "404": not_found,
                **(extra or {}),
                "default": error,
            },
        }
        if body is not None:
            out["requestBody"] = {
                "required": body_required,
                "description": "A JSON object of at most 64 KiB (413 above).",
                "content": {"application/json": {"schema": schema_ref(body)}},
            }
        return out

    bad_body = json_content(schema_ref("Error"), "The body is not a JSON object, or a key or value is bad (named).")
    too_large = json_content(schema_ref("Error"), "The body is larger than 64 KiB.")
    body_errors = {"400": bad_body, "413": too_large}
    put = change(
        "Add a link at runtime (persisted; run again after a restart)",
        "putLink",
        body="LinkDefinition",
        body_required=True,
        ok="The same definition runs already: nothing changed.",
        extra={
            "201": json_content(schema_ref("Action"), "Added, persisted and started."),
            **body_errors,
            "409": json_content(
                schema_ref("Error"),
                "The link file defines that name, or a runtime link has it with another definition.",
            ),
        },
    )

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
            "put": put,
            "delete": change(
                "Stop the link and keep it stopped across restarts (a runtime link: stop and forget it)", "deleteLink"
            ),
        },
        "/v1/links/{name}/pause": {"post": change("Pause the link's copiers (persisted)", "pauseLink")},
        "/v1/links/{name}/resume": {"post": change("Resume the link's copiers (persisted)", "resumeLink")},
        "/v1/links/{name}/failover": {
            "post": change(
                "Fail the link over: stop copying and syncing, answer the cut, fence the source (persisted)",
                "failoverLink",
                "Failover",
                body="FailoverRequest",
                extra={
                    **body_errors,
                    "503": json_content(
                        schema_ref("Error"), "Failed over, but the target did not tell where it ends: call again."
                    ),
                },
            )
        },
        "/v1/links/{name}/restore": {
            "post": change(
                "Undo a failover: copy (from the target's end) and sync again; fences stay (persisted)", "restoreLink"
            )
        },
        "/v1/links/{name}/sync-groups": {
            "post": change(
                "Run one group offset sync pass now and answer its result",
                "syncLinkGroups",
                "GroupSync",
                extra={"409": json_content(schema_ref("Error"), "The link is not running.")},
            )
        },
        "/v1/links/{name}/lag-history": {
            "get": {
                "summary": "The link's lag over time (a sample every few seconds; the last hour by default)",
                "operationId": "getLinkLagHistory",
                "parameters": name_param,
                "responses": {
                    "200": json_content(schema_ref("LagHistory"), "The samples kept."),
                    "404": not_found,
                    "default": error,
                },
            }
        },
        "/v1/dr": {
            "get": {
                "summary": "The DR status of every link: the numbers of `strait failover status --json`",
                "operationId": "getDrStatus",
                "responses": {
                    "200": json_content(schema_ref("DrStatus"), "Every running link's failover status."),
                    "501": json_content(schema_ref("Error"), "This process was given no DR status source."),
                    "default": error,
                },
            }
        },
        "/dr": {
            "get": {
                "summary": "The DR status page for people (HTML; refreshes itself from /v1/dr)",
                "operationId": "getDrPage",
                "responses": {
                    "200": {
                        "description": "The page; inline CSS and JavaScript only, under a strict "
                        "Content-Security-Policy.",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    },
                    "default": error,
                },
            }
        },
        "/openapi.json": adminkit.openapi_path(),
    }
    return adminkit.openapi_document(
        title="strait mirror admin API",
        description=(
            "Health, metrics, link status and the DR status page of one strait mirror process; pause / resume / "
            "delete / failover / restore / sync-groups of its links, and links added at runtime. State-changing "
            "routes require 'Authorization: Bearer <token>'; only failover and PUT take a body (a JSON object, "
            "at most 64 KiB)."
        ),
        paths=paths,
        schemas=schemas,
        security_schemes={"bearer": {"type": "http", "scheme": "bearer"}},
    )
