"""The listener's side of client quotas (node.server): each request recorded on the quotas that
apply, ``throttle_time_ms`` put in the answer when over one, the connection muted for that long,
a consumer's Fetch capped to one window of its quota, a follower's Fetch never counted.

Real sockets and real time, with windows of 0.1 s: a quota is chosen so that one request asks for
0.3 s of silence, and the tests check that a muted connection's next answer does not come sooner,
never how fast anything is.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
import trio

from node.metrics import NodeMetrics
from node.protocol import ApiKey, decode_response, encode_request, request_header
from node.quotas import QuotaManager, Quotas, QuotaSettings
from node.request import Request
from node.server import KafkaServer, ServerLimits, bind_listener
from tests.node import raw

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]

SETTINGS = QuotaSettings(window_num=2, window_s=0.1)
PRODUCE_V, FETCH_V = 8, 11
THROTTLE_S = 0.3


class Handler:
    """Answers ApiVersions, Produce and Fetch at once; keeps each Fetch's ``max_bytes``."""

    api_ranges: ClassVar[dict[int, tuple[int, int]]] = {
        ApiKey.API_VERSIONS: (0, 3),
        ApiKey.PRODUCE: (0, 9),
        ApiKey.FETCH: (0, 11),
    }

    def __init__(self) -> None:
        self.fetch_max_bytes: list[int] = []

    async def handle(self, request: Request) -> Any:
        api_key = request.header.api_key
        if api_key == ApiKey.PRODUCE:
            return {"responses": [], "throttle_time_ms": 0}
        if api_key == ApiKey.FETCH:
            self.fetch_max_bytes.append(request.body.max_bytes)
            return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}
        return {"error_code": 0, "api_keys": []}


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""
        self.correlation = 0

    async def ask(self, api_key: int, version: int, body: dict[str, Any]) -> tuple[Any, float]:
        """Send one request; its answer and the seconds it took."""
        self.correlation += 1
        started = time.monotonic()
        await self.stream.send_all(encode_request(request_header(api_key, version, self.correlation, "c1"), body))
        with trio.fail_after(5):
            while len(self.buf) < 4 or len(self.buf) < 4 + int.from_bytes(self.buf[:4], "big"):
                chunk = await self.stream.receive_some()
                assert chunk, "the server closed the connection"
                self.buf += chunk
        size = int.from_bytes(self.buf[:4], "big")
        frame, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        correlation, answer = decode_response(api_key, version, memoryview(frame))
        assert correlation == self.correlation
        return answer, time.monotonic() - started


@asynccontextmanager
async def served(handler: Handler, quotas: Quotas, manager: QuotaManager | None = None) -> AsyncIterator[Client]:
    manager = manager or QuotaManager(SETTINGS)
    manager.update(quotas)
    server = KafkaServer(handler, NodeMetrics(), ServerLimits(), quotas=manager)
    listener = await bind_listener("127.0.0.1", 0)
    with listener:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, listener)
            stream = await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1])
            async with stream:
                yield Client(stream)
            nursery.cancel_scope.cancel()


def produce_body() -> dict[str, Any]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []}


def producer_quota(version: int) -> float:
    """The producer_byte_rate one Produce of ``version`` is throttled THROTTLE_S under: its bytes over
    the span (one window, 0.1 s, at first) plus THROTTLE_S."""
    size = len(encode_request(request_header(ApiKey.PRODUCE, version, 1, "c1"), produce_body()))
    return size / (SETTINGS.window_s + THROTTLE_S)


def api_versions() -> tuple[int, int, dict[str, Any]]:
    return ApiKey.API_VERSIONS, 0, {}


def test_over_its_quota_a_producer_is_told_and_its_connection_muted() -> None:
    async def main() -> None:
        quotas = {(("client-id", "c1"),): {"producer_byte_rate": producer_quota(PRODUCE_V)}}
        async with served(Handler(), quotas) as client:
            answer, _ = await client.ask(ApiKey.PRODUCE, PRODUCE_V, produce_body())
            assert answer.throttle_time_ms == pytest.approx(THROTTLE_S * 1000, abs=2)
            _, waited = await client.ask(*api_versions())
            assert waited >= 0.9 * THROTTLE_S, "the next request was served while muted"

    trio.run(main)


def test_an_answer_without_the_field_still_mutes() -> None:
    async def main() -> None:
        quotas = {(("client-id", "c1"),): {"producer_byte_rate": producer_quota(0)}}
        async with served(Handler(), quotas) as client:
            answer, _ = await client.ask(ApiKey.PRODUCE, 0, produce_body())  # Produce v0: no throttle_time_ms
            assert answer.throttle_time_ms == 0  # not on the wire: the decoder's default
            _, waited = await client.ask(*api_versions())
            assert waited >= 0.9 * THROTTLE_S

    trio.run(main)


def test_without_a_quota_nothing_is_throttled() -> None:
    async def main() -> None:
        async with served(Handler(), {(("client-id", "someone-else"),): {"producer_byte_rate": 1.0}}) as client:
            for _ in range(3):
                answer, _ = await client.ask(ApiKey.PRODUCE, PRODUCE_V, produce_body())
                assert answer.throttle_time_ms == 0

    trio.run(main)


def test_a_consumer_fetch_is_capped_and_throttled_a_follower_fetch_never() -> None:
    async def main() -> None:
        handler = Handler()
        async with served(handler, {(("client-id", "c1"),): {"consumer_byte_rate": 10.0}}) as client:
            follower = raw.fetch_body("t", 0) | {"replica_id": 2}
            for _ in range(3):
                answer, _ = await client.ask(ApiKey.FETCH, FETCH_V, follower)
                assert answer.throttle_time_ms == 0
            assert handler.fetch_max_bytes == [50 * 2**20] * 3
            answer, _ = await client.ask(ApiKey.FETCH, FETCH_V, raw.fetch_body("t", 0))
            assert answer.throttle_time_ms > 0
            assert handler.fetch_max_bytes[-1] == 1  # one 0.1 s window of 10 B/s

    trio.run(main)


def test_request_percentage_counts_handler_time_but_not_api_versions() -> None:
    async def main() -> None:
        quotas = {(("client-id", "c1"),): {"request_percentage": 0.0001}}
        manager = QuotaManager(SETTINGS)
        async with served(Handler(), quotas, manager) as client:
            for _ in range(3):
                await client.ask(*api_versions())  # exempt, as in Kafka
            assert manager.rates() == []
            answer, _ = await client.ask(ApiKey.PRODUCE, PRODUCE_V, produce_body())
            assert answer.throttle_time_ms == SETTINGS.window_s * 1000  # a request quota's bound: one window

    trio.run(main)
