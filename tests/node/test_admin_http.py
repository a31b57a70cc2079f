"""The admin HTTP API, served for real by hypercorn on trio on 127.0.0.1 and spoken to over HTTP.

Every test runs its own server on a port-0 socket inside ``trio.run`` and stops it before returning.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from chaos.nemesis import Kill
from node.admin_http import create_app, openapi_document, serve_admin
from node.broker_view import BrokerView
from node.cluster import ClusterState
from node.coordination import PartitionState
from node.metrics import NodeMetrics
from node.partition import FollowerState
from storage import TopicPartition
from tests.node.harness import NodeProcess, wait_for

if TYPE_CHECKING:
    from node.config import NodeConfig
    from node.groups import GroupCoordinator

DEADLINE = 10.0  # seconds any one test may take before it fails instead of hanging


def partition(index: int, **changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "partition": index,
        "leader": 1,
        "leader_epoch": 4,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "role": "leader",
        "under_replicated": True,
        "offline": False,
        "followers": [
            {"broker_id": 2, "log_end_offset": 12 + index, "caught_up_ms_ago": 15},
            {"broker_id": 3, "log_end_offset": None, "caught_up_ms_ago": None},
        ],
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
        self.health_body: dict[str, object] = {
            "status": "ok",
            "broker_id": 1,
            "controller_id": 2,
            "is_controller": False,
            "cluster_id": "c-1",
        }
        self.cluster_body: dict[str, object] = {
            "broker_id": 1,
            "controller": {"broker_id": 2, "epoch": 7},
            "is_controller": False,
            "live_brokers": [1, 2],
            "partitions": 3,
            "leaders": 2,
            "under_replicated": 3,
            "under_replicated_led": 2,
            "offline": 1,
            "replica_fetch_errors": 0,
        }
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
                        leader=-1,
                        role="none",
                        offline=True,
                        followers=[],
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

    def cluster(self) -> dict[str, object]:
        self._check()
        return self.cluster_body

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

    bad_partition = partition(0, role="boss", followers=[{"broker_id": 2}])
    del bad_partition["under_replicated"]
    problems = schema_problems(
        {**FakeView().topic_list[0], "partitions": [bad_partition]}, response_schema("/v1/topics", 200)["items"]
    )
    assert "$.partitions[0]: missing 'under_replicated'" in problems
    assert "$.partitions[0].role: 'boss' not in ['leader', 'follower', 'none', None]" in problems
    assert "$.partitions[0].followers[0]: missing 'log_end_offset'" in problems


# -- routes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "code"), [("ok", 200), ("degraded", 503), ("starting", 503)])
def test_health_answers_200_only_when_ok(status: str, code: int) -> None:
    view = FakeView()
    view.health_body = {"status": status, "broker_id": 7, "controller_id": -1, "is_controller": False, "detail": "x"}

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
        # Replication state from the view: per partition, per follower, and from cluster().
        assert samples[("strait_partition_leader_epoch", (("partition", "1"), ("topic", "orders")))] == 4
        assert samples[("strait_partition_isr_size", (("partition", "1"), ("topic", "orders")))] == 2
        assert (
            samples[("strait_follower_lag_records", (("follower", "2"), ("partition", "0"), ("topic", "orders")))] == 0
        )
        assert samples[("strait_under_replicated_partitions", ())] == 2
        assert samples[("strait_offline_partitions", ())] == 1
        assert samples[("strait_controller_active", ())] == 0
        assert samples[("strait_controller_epoch", ())] == 7

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


def test_cluster_returns_the_view_as_documented() -> None:
    view = FakeView()

    async def test(port: int) -> None:
        reply = await fetch(port, "/v1/cluster")
        assert reply.status == 200
        assert reply.json() == view.cluster_body
        assert schema_problems(reply.json(), response_schema("/v1/cluster", 200)) == []

        # Before any controller is elected.
        view.cluster_body.update(controller=None, live_brokers=[1], partitions=0, leaders=0, under_replicated=0)
        view.cluster_body.update(under_replicated_led=0, offline=0)
        reply = await fetch(port, "/v1/cluster")
        assert reply.status == 200
        assert reply.json() == view.cluster_body
        assert schema_problems(reply.json(), response_schema("/v1/cluster", 200)) == []

    run_server(test, view)


def test_the_cluster_schema_requires_every_count_and_a_well_formed_controller() -> None:
    schema = response_schema("/v1/cluster", 200)
    body = dict(FakeView().cluster_body)
    del body["under_replicated_led"]
    body["controller"] = {"broker_id": 2}
    body["offline"] = -1
    problems = schema_problems(body, schema)
    assert "$: missing 'under_replicated_led'" in problems
    assert "$.controller: missing 'epoch'" in problems
    assert "$.offline: -1 < 0" in problems


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


def served_paths() -> list[str]:
    """Every route the app serves, with its path parameters filled in."""
    app = create_app(FakeView(), NodeMetrics())
    paths = []
    for route in app.routes:
        assert isinstance(route, Route), route
        paths.append(re.sub(r"{\w+}", "x", route.path))
    return paths


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_other_methods_get_405_with_allow_on_every_route(method: str) -> None:
    paths = served_paths()
    assert "/v1/cluster" in paths and "/v1/topics/x" in paths

    async def test(port: int) -> None:
        for path in paths:
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


# -- the broker's view (node.broker_view) over a stand-in broker ---------------------------------

NOW_MS = 1_700_000_000_000


class StubLog:
    """The PartitionLog attributes BrokerView reads."""

    def __init__(self, directory: Path, start: int, hw: int, end: int, *, offline: bool = False) -> None:
        self.dir = directory
        self.log_start_offset = start
        self.high_watermark = hw
        self.log_end_offset = end
        self.size_bytes = 100 * (end - start)
        self.is_offline = offline


class StubReplica:
    """The Partition attributes BrokerView reads."""

    def __init__(self, role: str, state: PartitionState, log: StubLog, followers: dict[int, FollowerState]) -> None:
        self.role = role
        self.leader_epoch = state.leader_epoch
        self.state_version = state.version
        self.isr = state.isr
        self.log = log
        self.followers = followers


class StubCluster:
    """The ClusterState attributes BrokerView reads; ``leader_of`` is the real one."""

    leader_of = ClusterState.leader_of

    def __init__(self) -> None:
        self.topics: dict[str, SimpleNamespace] = {}
        self.partitions: dict[TopicPartition, StubReplica] = {}
        self.brokers: dict[int, object] = {1: object(), 2: object()}  # broker 3 is not registered
        self.controller: tuple[int, int] | None = (2, 7)
        self.offline_replicas: dict[int, frozenset[tuple[str, int]]] = {}
        self.logs = SimpleNamespace(offline_dirs=lambda: [], dirs=[], moves=lambda: [])

    def add(self, name: str, assignment: dict[int, tuple[int, ...]], states: dict[int, PartitionState]) -> None:
        self.topics[name] = SimpleNamespace(
            name=name, topic_id=f"id-{name}", assignment=assignment, overrides={}, states=states
        )


def three_node_cluster(tmp_path: Path) -> StubCluster:
    """Broker 1's picture: it leads orders-0 (3 out of the ISR) and follows orders-1; orders-2 lost
    its leader; audit-0 is not on broker 1 and names unregistered broker 3 as leader."""
    cluster = StubCluster()
    led = PartitionState(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=7, version=11)
    followed = PartitionState(leader=2, leader_epoch=2, isr=(2, 3, 1), controller_epoch=7, version=3)
    leaderless = PartitionState(leader=-1, leader_epoch=9, isr=(3,), controller_epoch=7, version=8)
    cluster.add("orders", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}, {0: led, 1: followed, 2: leaderless})
    cluster.add("audit", {0: (3, 2)}, {0: PartitionState(3, 0, (3, 2), 7, 0)})
    followers = {
        2: FollowerState(leo=40, last_fetch_ms=NOW_MS - 5, last_caught_up_ms=NOW_MS - 250),
        3: FollowerState(leo=-1, last_caught_up_ms=0),  # never fetched since broker 1 became leader
    }
    cluster.partitions[TopicPartition("orders", 0)] = StubReplica(
        "leader", led, StubLog(tmp_path / "d1" / "orders-0", 0, 40, 42), followers
    )
    cluster.partitions[TopicPartition("orders", 1)] = StubReplica(
        "follower", followed, StubLog(tmp_path / "d2" / "orders-1", 5, 7, 7), {}
    )
    cluster.partitions[TopicPartition("orders", 2)] = StubReplica(
        "none", leaderless, StubLog(tmp_path / "d1" / "orders-2", 0, 3, 3), {}
    )
    return cluster


def view_of(cluster: StubCluster | None, *, active: bool = False, fetch_errors: int = 0) -> BrokerView:
    """BrokerView over stand-ins with what it reads of the node's parts."""
    return BrokerView(
        config=cast("NodeConfig", SimpleNamespace(broker_id=1)),
        cluster_id="c-1",
        cluster=cast("ClusterState", cluster),
        controller=SimpleNamespace(active=active),
        replicas=SimpleNamespace(fetch_errors=fetch_errors),
        groups=cast("GroupCoordinator", SimpleNamespace(group_ids=lambda: [])),
        status=lambda: "ok",
        clock=lambda: NOW_MS,
    )


def by_partition(view: BrokerView, topic: str) -> dict[int, dict[str, object]]:
    (entry,) = [t for t in view.topics() if t["name"] == topic]
    partitions = entry["partitions"]
    assert isinstance(partitions, list)
    return {p["partition"]: p for p in partitions}


def test_broker_view_reports_roles_epochs_and_followers_of_each_partition(tmp_path: Path) -> None:
    view = view_of(three_node_cluster(tmp_path))
    orders = by_partition(view, "orders")
    assert orders[0] == {
        "partition": 0,
        "leader": 1,
        "leader_epoch": 4,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "role": "leader",
        "under_replicated": True,
        "offline": False,
        "followers": [
            {"broker_id": 2, "log_end_offset": 40, "caught_up_ms_ago": 250},
            {"broker_id": 3, "log_end_offset": None, "caught_up_ms_ago": None},
        ],
        "log_start_offset": 0,
        "high_watermark": 40,
        "log_end_offset": 42,
        "size_bytes": 4200,
        "log_dir": str(tmp_path / "d1"),
        "online": True,
    }
    follower = orders[1]
    assert (follower["role"], follower["leader"], follower["leader_epoch"]) == ("follower", 2, 2)
    assert (follower["under_replicated"], follower["offline"], follower["followers"]) == (False, False, [])
    assert follower["log_end_offset"] == 7
    leaderless = orders[2]
    assert (leaderless["role"], leaderless["leader"], leaderless["leader_epoch"]) == ("none", -1, 9)
    assert (leaderless["offline"], leaderless["online"], leaderless["under_replicated"]) == (True, False, True)
    # Not on this node: no role and no offsets; its leader is not registered, so it is offline.
    (audit,) = by_partition(view, "audit").values()
    assert (audit["role"], audit["leader"], audit["offline"], audit["online"]) == (None, 3, True, False)
    assert [audit[k] for k in ("log_start_offset", "high_watermark", "log_end_offset", "size_bytes")] == [None] * 4
    assert audit["log_dir"] is None
    assert audit["followers"] == []
    for entry in view.topics():
        assert schema_problems(entry, response_schema("/v1/topics/{name}", 200)) == []


def test_broker_view_counts_cluster_wide_and_what_this_node_leads(tmp_path: Path) -> None:
    cluster = three_node_cluster(tmp_path)
    body = view_of(cluster, active=True, fetch_errors=3).cluster()
    assert body == {
        "broker_id": 1,
        "controller": {"broker_id": 2, "epoch": 7},
        "is_controller": True,
        "live_brokers": [1, 2],
        "partitions": 4,
        "leaders": 1,
        "under_replicated": 2,  # orders-0 and orders-2
        "under_replicated_led": 1,  # orders-0
        "offline": 2,  # orders-2 (no leader) and audit-0 (leader 3 is not registered)
        "replica_fetch_errors": 3,
    }
    assert schema_problems(body, response_schema("/v1/cluster", 200)) == []
    health = view_of(cluster, active=True).health()
    assert (health["controller_id"], health["is_controller"]) == (2, True)
    assert schema_problems(health, response_schema("/health", 200)) == []

    # Broker 3 registers: audit-0 has a live leader again. The leader's replica on a failed log dir
    # makes the partition offline just the same.
    cluster.brokers[3] = object()
    assert view_of(cluster).cluster()["offline"] == 1
    cluster.offline_replicas[3] = frozenset({("audit", 0)})
    assert view_of(cluster).cluster()["offline"] == 2


def test_broker_view_prefers_the_leaders_own_newer_isr_write(tmp_path: Path) -> None:
    cluster = three_node_cluster(tmp_path)
    replica = cluster.partitions[TopicPartition("orders", 0)]
    # The leader's compare-and-set moved the state to version 12 with the ISR shrunk to itself;
    # the watch has not brought it back into ClusterState.topics yet.
    replica.isr, replica.state_version = (1,), 12
    entry = by_partition(view_of(cluster), "orders")[0]
    assert entry["isr"] == [1]
    # A ZooKeeper state at least as new wins.
    replica.state_version = 11
    assert by_partition(view_of(cluster), "orders")[0]["isr"] == [1, 2]


def test_broker_view_of_a_replica_on_a_failed_log_dir(tmp_path: Path) -> None:
    cluster = three_node_cluster(tmp_path)
    cluster.partitions[TopicPartition("orders", 1)].log.is_offline = True
    entry = by_partition(view_of(cluster), "orders")[1]
    assert entry["online"] is False
    assert entry["log_dir"] == str(tmp_path / "d2")
    assert [entry[k] for k in ("log_start_offset", "high_watermark", "log_end_offset", "size_bytes")] == [None] * 4
    assert entry["offline"] is False  # the partition itself still has a live leader elsewhere


def test_broker_view_reports_no_size_for_a_failed_log_dir(tmp_path: Path) -> None:
    cluster = three_node_cluster(tmp_path)
    sized = SimpleNamespace(size_bytes=300)
    cluster.logs.dirs = [
        SimpleNamespace(path=tmp_path / "d1", online=True, logs={"a": sized, "b": sized}),
        SimpleNamespace(path=tmp_path / "d2", online=False, logs={"c": sized}),
    ]
    move = SimpleNamespace(target=tmp_path / "d1", tp=SimpleNamespace(topic="t", partition=3), offset_lag=12)
    cluster.logs.moves = lambda: [move]
    dirs = view_of(cluster).log_dirs()
    moves_in = [{"topic": "t", "partition": 3, "offset_lag": 12}]
    assert dirs == [
        {"path": str(tmp_path / "d1"), "online": True, "bytes": 600, "partitions": 2, "moves_in": moves_in},
        {"path": str(tmp_path / "d2"), "online": False, "bytes": None, "partitions": 1, "moves_in": []},
    ]
    assert schema_problems(dirs, response_schema("/v1/log-dirs", 200)) == []


def test_broker_view_before_the_broker_has_started() -> None:
    view = view_of(None)
    assert view.topics() == []
    body = view.cluster()
    assert body["controller"] is None and body["live_brokers"] == [] and body["partitions"] == 0
    assert schema_problems(body, response_schema("/v1/cluster", 200)) == []
    health = view.health()
    assert (health["controller_id"], health["is_controller"]) == (-1, False)


def test_broker_view_feeds_the_replication_metrics(tmp_path: Path) -> None:
    metrics = NodeMetrics()
    metrics.attach_view(view_of(three_node_cluster(tmp_path), fetch_errors=2))
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.render().decode("utf-8"))
        for sample in family.samples
    }
    orders0 = (("partition", "0"), ("topic", "orders"))
    assert samples[("strait_partition_leader", orders0)] == 1
    assert samples[("strait_partition_leader_epoch", orders0)] == 4
    assert samples[("strait_partition_isr_size", orders0)] == 2
    assert samples[("strait_partition_replicas", orders0)] == 3
    assert samples[("strait_partition_log_end_offset", orders0)] == 42
    assert samples[("strait_follower_lag_records", (("follower", "2"), *orders0))] == 2
    assert ("strait_follower_lag_records", (("follower", "3"), *orders0)) not in samples
    assert samples[("strait_under_replicated_partitions", ())] == 1
    assert samples[("strait_offline_partitions", ())] == 2
    assert samples[("strait_controller_active", ())] == 0
    assert samples[("strait_controller_epoch", ())] == 7
    assert samples[("strait_replica_fetch_errors_total", ())] == 2


# -- three real nodes ------------------------------------------------------------------------------

REPLICATION_DEADLINE_S = 30.0  # ISR shrink: replica.lag.time.max.ms=5000 (+ half of it), ZK session 6 s


def admin_get(node: NodeProcess, path: str) -> Any:
    with urllib.request.urlopen(f"{node.admin_url}{path}", timeout=10) as response:
        if path == "/metrics":
            return {
                (sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(response.read().decode("utf-8"))
                for sample in family.samples
            }
        return json.loads(response.read())


def wait_until(what: str, check: Callable[[], Any], timeout: float = REPLICATION_DEADLINE_S) -> Any:
    return wait_for(what, check, timeout, interval=0.2)


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_three_nodes_report_replication_and_a_killed_follower(site: Callable[..., list[NodeProcess]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    nodes = site(3)
    by_id = {n.broker_id: n for n in nodes}
    admin = AdminClient({"bootstrap.servers": ",".join(n.bootstrap for n in nodes)})
    admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)

    # One controller that every node names, exactly one node acting as it, three live brokers,
    # and the new topic in every node's view (each learns of it through its ZooKeeper watch).
    def one_controller() -> list[dict[str, Any]] | None:
        bodies = [admin_get(n, "/v1/cluster") for n in nodes]
        controllers = {json.dumps(b["controller"], sort_keys=True) for b in bodies}
        acting = [b["broker_id"] for b in bodies if b["is_controller"]]
        if len(controllers) != 1 or bodies[0]["controller"] is None or len(acting) != 1:
            return None
        if acting[0] != bodies[0]["controller"]["broker_id"]:
            return None
        if any(b["live_brokers"] != [1, 2, 3] or b["partitions"] != 1 for b in bodies):
            return None
        return bodies

    clusters = wait_until("one agreed controller, three live brokers and the topic everywhere", one_controller)
    controller = clusters[0]["controller"]["broker_id"]
    for body in clusters:
        assert schema_problems(body, response_schema("/v1/cluster", 200)) == []
        assert (body["under_replicated"], body["offline"]) == (0, 0), body
        health = admin_get(by_id[body["broker_id"]], "/health")
        assert (health["controller_id"], health["is_controller"]) == (controller, body["broker_id"] == controller)

    # Everyone agrees on the leader; the ISR is complete; the leader lists both followers' log ends.
    def replicated() -> dict[int, dict[str, Any]] | None:
        states = {n.broker_id: admin_get(n, "/v1/topics/replicated")["partitions"][0] for n in nodes}
        leaders = {s["leader"] for s in states.values()}
        if len(leaders) != 1 or -1 in leaders:
            return None
        lead = states[leaders.pop()]
        if lead["role"] != "leader" or sorted(lead["isr"]) != [1, 2, 3]:
            return None
        if len(lead["followers"]) != 2 or any(f["log_end_offset"] is None for f in lead["followers"]):
            return None
        return states

    states = wait_until("a full ISR with the followers known to the leader", replicated)
    leader_id = next(b for b, s in states.items() if s["role"] == "leader")
    leader = by_id[leader_id]
    assert {b: s["role"] for b, s in states.items()} == {b: "leader" if b == leader_id else "follower" for b in by_id}
    assert len({s["leader_epoch"] for s in states.values()}) == 1
    assert not any(s["under_replicated"] or s["offline"] for s in states.values())
    assert sorted(f["broker_id"] for f in states[leader_id]["followers"]) == sorted(set(by_id) - {leader_id})
    for state in states.values():
        assert schema_problems(state, {"$ref": "#/components/schemas/Partition"}) == []
    samples = admin_get(leader, "/metrics")
    labels = (("partition", "0"), ("topic", "replicated"))
    assert samples[("strait_partition_leader", labels)] == leader_id
    assert samples[("strait_partition_isr_size", labels)] == 3
    assert samples[("strait_under_replicated_partitions", ())] == 0
    assert sum(admin_get(n, "/metrics")[("strait_controller_active", ())] for n in nodes) == 1

    # kill -9 a follower: the leader drops it from the ISR and reports the partition under-replicated.
    victim = next(n for n in nodes if n.broker_id != leader_id)
    Kill([victim]).start()

    def under_replicated() -> dict[str, Any] | None:
        entry: dict[str, Any] = admin_get(leader, "/v1/topics/replicated")["partitions"][0]
        metrics = admin_get(leader, "/metrics")
        if entry["under_replicated"] and metrics[("strait_under_replicated_partitions", ())] == 1:
            return entry
        return None

    entry = wait_until(f"leader {leader_id} to report the partition under-replicated", under_replicated)
    assert victim.broker_id not in entry["isr"]
    assert (entry["role"], entry["leader"], entry["offline"]) == ("leader", leader_id, False)
    assert victim.broker_id in [f["broker_id"] for f in entry["followers"]]  # still a replica, out of sync
    survivors = [n for n in nodes if n is not victim]
    wait_until(
        f"the survivors to see broker {victim.broker_id} gone and one under-replicated partition",
        lambda: all(
            (b := admin_get(n, "/v1/cluster"))["live_brokers"] == sorted(x.broker_id for x in survivors)
            and b["under_replicated"] == 1
            and b["offline"] == 0
            for n in survivors
        ),
    )
    assert admin_get(leader, "/v1/cluster")["under_replicated_led"] == 1
