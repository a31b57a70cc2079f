"""The listener on its own: a failing handler costs one connection, never the server."""

from __future__ import annotations

from typing import Any, ClassVar

import trio
from prometheus_client.parser import text_string_to_metric_families

from node.config import NodeConfig
from node.metrics import NodeMetrics
from node.protocol import ApiKey, Struct, decode_response, encode_request, request_header
from node.request import Request
from node.sasl import ServerSasl
from node.server import UNNAMED_CLIENT, KafkaServer, ServerLimits, bind_listener


class FlakyHandler:
    api_ranges: ClassVar[dict[int, tuple[int, int]]] = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 8)}

    async def handle(self, request: Request) -> Any:
        if request.header.api_key == ApiKey.METADATA:
            raise RuntimeError("a bug in a handler")
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}


async def _roundtrip(port: int, api_key: int, version: int) -> Struct | None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(encode_request(request_header(api_key, version, 5, "t"), {}))
        data = b""
        with trio.fail_after(5):
            while True:
                chunk = await stream.receive_some()
                if not chunk:
                    return None
                data += chunk
                if len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "big"):
                    return decode_response(api_key, version, memoryview(data[4:]))[1]


def test_handler_exception_closes_only_that_connection() -> None:
    async def main() -> None:
        server = KafkaServer(FlakyHandler(), NodeMetrics(), ServerLimits())
        listener = await bind_listener("127.0.0.1", 0)
        port = listener.getsockname()[1]
        with listener:
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve, listener)
                assert await _roundtrip(port, ApiKey.METADATA, 8) is None  # closed, no response
                ok = await _roundtrip(port, ApiKey.API_VERSIONS, 0)
                assert ok is not None and ok.error_code == 0
                nursery.cancel_scope.cancel()

    trio.run(main)


class AnsweringHandler:
    """Answers ApiVersions and ListGroups (empty)."""

    api_ranges: ClassVar[dict[int, tuple[int, int]]] = {ApiKey.API_VERSIONS: (0, 4), ApiKey.LIST_GROUPS: (0, 2)}

    async def handle(self, request: Request) -> Any:
        if request.header.api_key == ApiKey.LIST_GROUPS:
            return {"error_code": 0, "groups": [], "throttle_time_ms": 0}
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}


async def _requests(port: int, client_id: str | None, requests: list[tuple[int, int, dict[str, Any]]]) -> None:
    """Send ``requests`` (api key, version, body) on one connection, each after the answer before it."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        for i, (api_key, version, body) in enumerate(requests):
            await stream.send_all(encode_request(request_header(api_key, version, i, client_id), body))
            data = b""
            with trio.fail_after(5):
                while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                    chunk = await stream.receive_some()
                    assert chunk, f"connection closed after request {i}"
                    data += chunk


def _serve_connections(
    server: KafkaServer, connections: list[tuple[str | None, list[tuple[int, int, dict[str, Any]]]]]
) -> None:
    """Run ``server`` on a loopback port; open each connection (client id, requests) in turn and send its requests."""

    async def main() -> None:
        listener = await bind_listener("127.0.0.1", 0)
        port = listener.getsockname()[1]
        with listener:
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve, listener)
                for client_id, requests in connections:
                    await _requests(port, client_id, requests)
                nursery.cancel_scope.cancel()

    trio.run(main)


def _client_counts(metrics: NodeMetrics) -> dict[tuple[str, str, str], float]:
    """``strait_client_requests_total`` by (client, api, version), as a scrape shows it."""
    return {
        (s.labels["client"], s.labels["api"], s.labels["version"]): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        if family.name == "strait_client_requests"
        for s in family.samples
        if s.name == "strait_client_requests_total"
    }


def test_requests_are_counted_by_client_software_or_client_id_and_version() -> None:
    """ApiVersions v3+'s client_software_name names the client of every request of its connection
    (the ApiVersions too); without one, the connection's client.id does."""
    metrics = NodeMetrics()
    software = {"client_software_name": "apache-kafka-java", "client_software_version": "4.3.0"}
    _serve_connections(
        KafkaServer(AnsweringHandler(), metrics, ServerLimits()),
        [
            ("app-1", [(ApiKey.API_VERSIONS, 3, software), (ApiKey.LIST_GROUPS, 2, {}), (ApiKey.LIST_GROUPS, 2, {})]),
            ("aiokafka-0.14.0", [(ApiKey.API_VERSIONS, 0, {}), (ApiKey.LIST_GROUPS, 1, {})]),
            (None, [(ApiKey.LIST_GROUPS, 0, {})]),
        ],
    )
    counted = _client_counts(metrics)
    assert counted == {
        ("apache-kafka-java", "ApiVersions", "3"): 1,
        ("apache-kafka-java", "ListGroups", "2"): 2,
        ("aiokafka-0.14.0", "ApiVersions", "0"): 1,
        ("aiokafka-0.14.0", "ListGroups", "1"): 1,
        (UNNAMED_CLIENT, "ListGroups", "0"): 1,
    }


class SaslAnsweringHandler(AnsweringHandler):
    api_ranges: ClassVar[dict[int, tuple[int, int]]] = {
        **AnsweringHandler.api_ranges,
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
    }


def test_requests_before_sasl_authentication_are_counted_for_the_client_too() -> None:
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    config = NodeConfig.from_properties(
        {
            "broker.id": "1",
            "zookeeper.connect": "127.0.0.1:2181/t",
            "listeners": "A://127.0.0.1:0,LOCAL://127.0.0.1:0",
            "listener.security.protocol.map": "A:SASL_PLAINTEXT,LOCAL:PLAINTEXT",
            "inter.broker.listener.name": "LOCAL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": f'{plain} required user_carol="carol-pw";',
        }
    )
    metrics = NodeMetrics()
    sasl = ServerSasl(config, "A", scram_lookup=None)
    software = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
    _serve_connections(
        KafkaServer(SaslAnsweringHandler(), metrics, ServerLimits(), security_protocol="SASL_PLAINTEXT", sasl=sasl),
        [
            (
                "kafka-python-3.0.12",
                [
                    (ApiKey.API_VERSIONS, 3, software),
                    (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
                    (ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0carol\0carol-pw"}),
                    (ApiKey.LIST_GROUPS, 2, {}),
                ],
            )
        ],
    )
    assert _client_counts(metrics) == {
        ("kafka-python", "ApiVersions", "3"): 1,
        ("kafka-python", "SaslHandshake", "1"): 1,
        ("kafka-python", "SaslAuthenticate", "2"): 1,
        ("kafka-python", "ListGroups", "2"): 1,
    }
