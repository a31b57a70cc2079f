"""The admin HTTP API, served for real by hypercorn on trio on 127.0.0.1 and spoken to over HTTP.

Every test runs its own server on a port-0 socket inside ``trio.run`` and stops it before returning.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import pytest
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from node.admin_http import create_app, openapi_document, serve_admin
from node.metrics import NodeMetrics

DEADLINE = 10.0  # seconds any one test may take before it fails instead of hanging


def partition(index: int, **changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "partition": index,
        "leader": 1,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "log_start_offset": 0,
        "high_watermark": 10 + index,
        "log_end_offset": 12 + index,
        "size_bytes": 2048,
        "log_dir": "/data/d1",
        "online": True,
    }
    entry.update(changes)
    return entry


class FakeView:
    """An AdminView over data the test sets; ``fail`` makes every method raise."""

    def __init__(self) -> None:
        self.health_body: dict[str, object] = {"status": "ok", "broker_id": 1, "cluster_id": "c-1"}
        self.group_list: list[dict[str, object]] = [
            {
                "group_id": "billing",
                "state": "Stable",
                "protocol_type": "consumer",
                "protocol": "range",
                "generation": 3,
                "members": [
                    {
                        "member_id": "m-1",
                        "group_instance_id": None,
                        "client_id": "c",
                        "client_host": "/127.0.0.1",
                        "assignment": ["orders-0"],
                    }
                ],
                "offsets": [{"topic": "orders", "partition": 0, "committed": 5, "log_end": 9, "lag": 4}],
            }
        ]
        self.topic_list: list[dict[str, object]] = [
            {
                "name": "orders",
                "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                "partitions": [partition(0), partition(1)],
                "configs": {"retention.ms": "604800000", "sasl.jaas.config": None},
            },
            {
                "name": "audit.log-v2",
                "topic_id": "AAAAAAAAAAAAAAAAAAAAAg",
                "partitions": [
                    partition(
                        0,
                        online=False,
                        log_start_offset=None,
                        high_watermark=None,
                        log_end_offset=None,
                        size_bytes=None,
                        log_dir="/data/d2",
                    )
                ],
                "configs": {},
            },
        ]
        self.dir_list: list[dict[str, object]] = [
            {"path": "/data/d1", "online": True, "bytes": 4096, "partitions": 2},
            {"path": "/data/d2", "online": False, "bytes": None, "partitions": 1},
        ]
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise RuntimeError("view exploded")

    def health(self) -> dict[str, object]:
        self._check()
        return self.health_body

    def topics(self) -> list[dict[str, object]]:
        self._check()
        return self.topic_list

    def groups(self) -> list[dict[str, object]]:
        self._check()
        return self.group_list

    def log_dirs(self) -> list[dict[str, object]]:
        self._check()
        return self.dir_list


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        assert self.headers["content-type"] == "application/json", self.headers
        return json.loads(self.body)


def _request(port: int, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Reply:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


async def fetch(port: int, path: str, method: str = "GET", body: bytes | None = None, **headers: str) -> Reply:
    """One HTTP request on a fresh connection, made from a worker thread so trio keeps serving."""
    return await trio.to_thread.run_sync(_request, port, method, path, body, headers)


def run_server(
    test: Callable[[int], Awaitable[None]],
    view: FakeView | None = None,
    metrics: NodeMetrics | None = None,
) -> None:
    """Serve create_app(view, metrics) on a port-0 socket, run ``test(port)``, then stop the server."""

    async def main() -> None:
        app = create_app(view or FakeView(), metrics or NodeMetrics())
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(serve_admin, app, "127.0.0.1", 0)
                await test(port)
                nursery.cancel_scope.cancel()

    trio.run(main)


# -- a JSON Schema checker for the subset openapi_document() uses ------------------------------

_JSON_TYPES: dict[str, Callable[[object], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def schema_problems(value: object, schema: dict[str, object], where: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema`` (type, enum, required, properties, items, minimum, $ref)."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        components = openapi_document()["components"]
        assert isinstance(components, dict)
        return schema_problems(value, components["schemas"][ref.rsplit("/", 1)[1]], where)
    problems: list[str] = []
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else types
        assert isinstance(allowed, list)
        if not any(_JSON_TYPES[t](value) for t in allowed):
            return [f"{where}: {value!r} is not of type {types}"]
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        problems.append(f"{where}: {value!r} not in {enum}")
    minimum = schema.get("minimum")
    if isinstance(minimum, int) and isinstance(value, int) and value < minimum:
        problems.append(f"{where}: {value} < {minimum}")
    if isinstance(value, dict):
        required = schema.get("required", [])
        assert isinstance(required, list)
        problems += [f"{where}: missing {key!r}" for key in required if key not in value]
        properties = schema.get("properties", {})
        assert isinstance(properties, dict)
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                problems += schema_problems(item, properties[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                problems += schema_problems(item, extra, f"{where}.{key}")
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        for i, item in enumerate(value):
            problems += schema_problems(item, items, f"{where}[{i}]")
    return problems


def response_schema(path: str, status: int) -> dict[str, object]:
    operation = openapi_document()["paths"][path]["get"]  # type: ignore[index]
    responses = operation["responses"]
    response = responses.get(str(status), responses["default"])
    schema = response["content"]["application/json"]["schema"]
    assert isinstance(schema, dict)
    return schema


def test_the_schema_checker_finds_problems() -> None:
    broken = FakeView().topic_list[0]
    del broken["partitions"]
    broken["configs"] = {"retention.ms": 5}
    problems = schema_problems(broken, response_schema("/v1/topics/{name}", 200))
    assert "$: missing 'partitions'" in problems
    assert "$.configs.retention.ms: 5 is not of type ['string', 'null']" in problems


# -- routes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "code"), [("ok", 200), ("degraded", 503), ("starting", 503)])
def test_health_answers_200_only_when_ok(status: str, code: int) -> None:
    view = FakeView()
    view.health_body = {"status": status, "broker_id": 7, "detail": "x"}

    async def test(port: int) -> None:
        reply = await fetch(port, "/health")
        assert reply.status == code
        assert reply.json() == view.health_body
        assert schema_problems(reply.json(), response_schema("/health", code)) == []

    run_server(test, view)


def test_metrics_serves_parseable_text_with_recorded_and_view_values() -> None:
    metrics = NodeMetrics()
    metrics.record_request("Produce", 100, 20, 0.004)
    metrics.record_error("Produce", "NOT_LEADER_OR_FOLLOWER")

    async def test(port: int) -> None:
        reply = await fetch(port, "/metrics")
        assert reply.status == 200
        assert reply.headers["content-type"] == metrics.content_type
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(reply.body.decode("utf-8"))
            for sample in family.samples
        }
        assert samples[("strait_requests_total", (("api", "Produce"),))] == 1
        assert samples[("strait_request_bytes_total", (("api", "Produce"),))] == 100
        assert samples[("strait_request_errors_total", (("api", "Produce"), ("error", "NOT_LEADER_OR_FOLLOWER")))] == 1
        # create_app attached the view: state gauges come from it at scrape time.
        assert samples[("strait_high_watermark", (("partition", "1"), ("topic", "orders")))] == 11
        assert samples[("strait_partitions_offline", ())] == 1
        assert samples[("strait_log_dir_online", (("dir", "/data/d2"),))] == 0

    run_server(test, metrics=metrics)


def test_topics_list_and_log_dirs_return_the_view_as_documented() -> None:
    view = FakeView()

    async def test(port: int) -> None:
        topics = await fetch(port, "/v1/topics")
        assert topics.status == 200
        assert topics.json() == view.topic_list
        assert schema_problems(topics.json(), response_schema("/v1/topics", 200)) == []

        dirs = await fetch(port, "/v1/log-dirs")
        assert dirs.status == 200
        assert dirs.json() == view.dir_list
        assert schema_problems(dirs.json(), response_schema("/v1/log-dirs", 200)) == []

        groups = await fetch(port, "/v1/groups")
        assert groups.status == 200
        assert groups.json() == view.group_list
        assert schema_problems(groups.json(), response_schema("/v1/groups", 200)) == []
        one = await fetch(port, "/v1/groups/billing")
        assert one.status == 200 and one.json() == view.group_list[0]
        assert schema_problems(one.json(), response_schema("/v1/groups/{group_id}", 200)) == []
        missing = await fetch(port, "/v1/groups/nope")
        assert missing.status == 404 and "'nope'" in missing.json()["detail"]

    run_server(test, view)


def test_one_topic_by_name_or_404_naming_it() -> None:
    view = FakeView()

    async def test(port: int) -> None:
        found = await fetch(port, "/v1/topics/audit.log-v2")
        assert found.status == 200
        assert found.json() == view.topic_list[1]
        assert schema_problems(found.json(), response_schema("/v1/topics/{name}", 200)) == []

        missing = await fetch(port, "/v1/topics/no-such-topic")
        assert missing.status == 404
        body = missing.json()
        assert isinstance(body, dict)
        assert body["error"] == "topic_not_found"
        assert "'no-such-topic'" in body["detail"]
        assert schema_problems(body, response_schema("/v1/topics/{name}", 404)) == []

    run_server(test, view)


def test_unknown_paths_get_a_json_404_naming_the_path() -> None:
    async def test(port: int) -> None:
        for path in ("/", "/v2/topics", "/v1/topics/orders/partitions", "/healthz"):
            reply = await fetch(port, path)
            assert reply.status == 404, path
            body = reply.json()
            assert isinstance(body, dict)
            assert body["error"] == "not_found"
            assert repr(path) in body["detail"]

    run_server(test)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_other_methods_get_405_with_allow_on_every_route(method: str) -> None:
    async def test(port: int) -> None:
        for path in ("/health", "/metrics", "/v1/topics", "/v1/topics/orders", "/v1/log-dirs", "/openapi.json"):
            reply = await fetch(port, path, method, body=b"{}")
            assert reply.status == 405, (method, path)
            assert reply.headers["allow"] == "GET, HEAD"
            body = reply.json()
            assert isinstance(body, dict)
            assert body["error"] == "method_not_allowed"
            assert method in body["detail"]

    run_server(test)


def test_head_is_answered_without_a_body() -> None:
    async def test(port: int) -> None:
        reply = await fetch(port, "/health", "HEAD")
        assert reply.status == 200
        assert reply.body == b""

    run_server(test)


def test_a_get_with_a_body_is_refused_and_the_connection_closed() -> None:
    async def test(port: int) -> None:
        reply = await fetch(port, "/v1/topics", body=b"x" * 100_000)
        assert reply.status == 413
        assert reply.headers["connection"] == "close"
        body = reply.json()
        assert isinstance(body, dict)
        assert body["error"] == "body_not_accepted"
        assert "content-length: 100000" in body["detail"]

    run_server(test)


def test_an_oversized_request_head_is_refused_without_buffering_it() -> None:
    async def test(port: int) -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        # 20 KiB of headers that never end: the server must give up rather than buffer forever.
        await stream.send_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 20_000)
        received = b""
        while chunk := await stream.receive_some():
            received += chunk
        await stream.aclose()
        assert received.startswith(b"HTTP/1.1 431")

    run_server(test)


def test_a_failing_view_gives_a_json_500(caplog: pytest.LogCaptureFixture) -> None:
    view = FakeView()
    view.fail = True

    async def test(port: int) -> None:
        for path in ("/health", "/v1/topics", "/metrics"):
            reply = await fetch(port, path)
            assert reply.status == 500, path
            body = reply.json()
            assert isinstance(body, dict)
            assert body["error"] == "internal_error"
            assert "view exploded" in body["detail"]

    caplog.set_level(logging.ERROR, logger="node.admin_http")
    run_server(test, view)
    # The failure is logged with its traceback for the operator, through logging (not printed).
    logged = [r for r in caplog.records if r.name == "node.admin_http" and r.exc_info]
    assert logged
    assert all(isinstance(r.exc_info[1], RuntimeError) for r in logged if r.exc_info)


def test_openapi_document_describes_every_served_route_and_nothing_else() -> None:
    app = create_app(FakeView(), NodeMetrics())
    served: dict[str, set[str]] = {}
    for route in app.routes:
        assert isinstance(route, Route), route
        assert route.methods is not None
        served[route.path] = {method.lower() for method in route.methods} - {"head"}

    async def test(port: int) -> None:
        reply = await fetch(port, "/openapi.json")
        assert reply.status == 200
        document = reply.json()
        assert isinstance(document, dict)
        assert re.fullmatch(r"3\.1\.\d+", document["openapi"])
        assert document["info"]["title"]
        assert "credentials" in document["info"]["description"]
        paths = document["paths"]
        assert set(paths) == set(served)
        schemas = document["components"]["schemas"]
        for path, methods in served.items():
            assert set(paths[path]) == methods, path
            for operation in paths[path].values():
                assert "200" in operation["responses"], path
                for parameter in re.findall(r"{(\w+)}", path):
                    assert parameter in [p["name"] for p in operation["parameters"]], (path, parameter)
        refs = re.findall(r'"\$ref": "#/components/schemas/(\w+)"', json.dumps(document))
        assert refs
        assert set(refs) <= set(schemas)

    run_server(test)


# -- serving ------------------------------------------------------------------------------------


def test_port_zero_reports_the_port_actually_bound() -> None:
    async def test(port: int) -> None:
        assert 0 < port < 65536
        reply = await fetch(port, "/health")
        assert reply.status == 200

    run_server(test)


def test_binding_a_busy_port_fails_naming_host_and_port() -> None:
    async def main() -> None:
        app = create_app(FakeView(), NodeMetrics())
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(serve_admin, app, "127.0.0.1", 0)
                with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
                    await nursery.start(serve_admin, app, "127.0.0.1", port)
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.parametrize(
    ("port", "timeout", "message"), [(-1, 1.0, "got -1"), (70000, 1.0, "got 70000"), (0, 0, "got 0")]
)
def test_bad_port_or_timeout_is_refused_naming_it(port: int, timeout: float, message: str) -> None:
    app = create_app(FakeView(), NodeMetrics())
    with pytest.raises(ValueError, match=message):
        trio.run(partial(serve_admin, app, "127.0.0.1", port, graceful_timeout=timeout))


def test_an_unresolvable_host_is_named() -> None:
    app = create_app(FakeView(), NodeMetrics())
    with pytest.raises(OSError, match=re.escape("'no-such-host.invalid'")):
        trio.run(serve_admin, app, "no-such-host.invalid", 0)


def test_cancellation_stops_the_server_promptly_and_propagates() -> None:
    returned_normally = False

    async def serve(app: Starlette, *, task_status: trio.TaskStatus[int]) -> None:
        nonlocal returned_normally
        await serve_admin(app, "127.0.0.1", 0, task_status=task_status)
        returned_normally = True

    async def main() -> int:
        app = create_app(FakeView(), NodeMetrics())
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                port: int = await nursery.start(serve, app)
                # A kept-alive idle connection must not hold the shutdown up.
                idle = await trio.open_tcp_stream("127.0.0.1", port)
                await idle.send_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                received = b""
                while not received.endswith(b'"cluster_id":"c-1"}'):
                    received += await idle.receive_some()
                assert received.startswith(b"HTTP/1.1 200")
                stopping = trio.current_time()
                nursery.cancel_scope.cancel()
            assert trio.current_time() - stopping < 1.0
            assert await idle.receive_some() == b""  # the server closed it
            await idle.aclose()
        return port

    port = trio.run(main)
    assert not returned_normally
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=DEADLINE):
        pass


def test_a_request_in_flight_completes_during_graceful_shutdown() -> None:
    async def main() -> None:
        entered, release = trio.Event(), trio.Event()

        async def slow(request: Request) -> Response:
            entered.set()
            await release.wait()
            return PlainTextResponse("finished")

        app = Starlette(routes=[Route("/slow", slow)])
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as outer:
                server_scope = trio.CancelScope()

                async def server(*, task_status: trio.TaskStatus[int]) -> None:
                    with server_scope:
                        await serve_admin(app, "127.0.0.1", 0, graceful_timeout=5.0, task_status=task_status)

                port: int = await outer.start(server)
                replies: list[Reply] = []

                async def client() -> None:
                    replies.append(await fetch(port, "/slow"))

                outer.start_soon(client)
                await entered.wait()
                server_scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                # The listener is closed by now, but the request in flight is still being served.
                with pytest.raises(OSError):
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    await stream.aclose()
                release.set()
        assert [(r.status, r.body) for r in replies] == [(200, b"finished")]

    trio.run(main)


def test_a_request_in_flight_is_cut_off_once_the_graceful_timeout_passes() -> None:
    async def main() -> None:
        entered = trio.Event()

        async def stuck(request: Request) -> Response:
            entered.set()
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        app = Starlette(routes=[Route("/stuck", stuck)])
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as outer:
                port: int = await outer.start(partial(serve_admin, app, "127.0.0.1", 0, graceful_timeout=0.2))
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(b"GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
                await entered.wait()
                stopping = trio.current_time()
                outer.cancel_scope.cancel()
            elapsed = trio.current_time() - stopping
            assert 0.2 <= elapsed < 0.2 + 1.0 + 0.5
            assert await stream.receive_some() == b""  # cut off, no response
            await stream.aclose()

    trio.run(main)


def test_access_log_goes_to_a_logger_not_to_stdout(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="node.admin_http")

    async def test(port: int) -> None:
        assert (await fetch(port, "/v1/log-dirs")).status == 200

    run_server(test)
    # The server has stopped, so every log record it meant to write is written.
    access = [r.getMessage() for r in caplog.records if r.name == "node.admin_http.access"]
    assert any("GET /v1/log-dirs" in message and " 200 " in message for message in access), access
    out, err = capfd.readouterr()
    assert out == ""
    assert err == ""
