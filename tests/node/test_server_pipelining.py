"""The listener's answers in order while acks=all waits: a Produce whose handler returns a
``Deferred`` lets the connection's next Produce be read and handled, any other request waits for
every answer before it, and the answers leave in request order (node.server._Answers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
import trio

import node.server
from node.metrics import NodeMetrics
from node.protocol import ApiKey, decode_response, encode_request, request_header
from node.request import Deferred, Request
from node.server import MAX_PIPELINED, KafkaServer, ServerLimits, bind_listener
from tests.node.test_metrics import scrape, value

pytestmark = pytest.mark.unit

PRODUCE_V = 8


class GatedHandler:
    """Produce to partition p waits for ``gates[p]`` (a Deferred) when p is gated; else it answers at once."""

    api_ranges: ClassVar[dict[int, tuple[int, int]]] = {ApiKey.API_VERSIONS: (0, 3), ApiKey.PRODUCE: (3, 9)}

    def __init__(self, gated: set[int], failing: frozenset[int] = frozenset()) -> None:
        self.gates = {p: trio.Event() for p in gated}
        self.failing = failing
        self.seen: list[tuple[int, int]] = []  # (api key, partition or -1), in handling order

    async def handle(self, request: Request) -> Any:
        if request.header.api_key != ApiKey.PRODUCE:
            self.seen.append((request.header.api_key, -1))
            return {"error_code": 0, "api_keys": []}
        index = request.body.topic_data[0].partition_data[0].index
        self.seen.append((ApiKey.PRODUCE, index))
        body = {
            "responses": [{"name": "t", "partition_responses": [_entry(index)]}],
            "throttle_time_ms": 0,
        }
        if index not in self.gates:
            return body
        gate = self.gates[index]

        async def finish() -> dict[str, Any]:
            await gate.wait()
            if index in self.failing:
                raise RuntimeError("a bug after the append")
            return body

        return Deferred(finish)


def _entry(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": 0,
        "base_offset": index,
        "log_append_time_ms": -1,
        "log_start_offset": 0,
        "record_errors": [],
        "error_message": None,
    }


def produce(correlation_id: int, partition: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": partition, "records": None}]}],
    }
    return encode_request(request_header(ApiKey.PRODUCE, PRODUCE_V, correlation_id, "t"), body)


def api_versions(correlation_id: int) -> bytes:
    return encode_request(request_header(ApiKey.API_VERSIONS, 0, correlation_id, "t"), {})


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def answer(self, api_key: int, version: int) -> tuple[int, Any] | None:
        """The next response (correlation id, body); None if the server closed the connection."""
        with trio.fail_after(5):
            while len(self.buf) < 4 or len(self.buf) < 4 + int.from_bytes(self.buf[:4], "big"):
                chunk = await self.stream.receive_some()
                if not chunk:
                    return None
                self.buf += chunk
        size = int.from_bytes(self.buf[:4], "big")
        frame, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        return decode_response(api_key, version, memoryview(frame))


@asynccontextmanager
async def served(handler: GatedHandler, metrics: NodeMetrics | None = None) -> AsyncIterator[Client]:
    server = KafkaServer(handler, metrics or NodeMetrics(), ServerLimits())
    listener = await bind_listener("127.0.0.1", 0)
    with listener:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve, listener)
            stream = await trio.open_tcp_stream("127.0.0.1", listener.getsockname()[1])
            async with stream:
                yield Client(stream)
            nursery.cancel_scope.cancel()


async def settle() -> None:
    """Let the server read and handle whatever it may."""
    await trio.sleep(0.2)


def test_a_produce_waiting_for_replication_lets_the_next_produce_in_and_answers_stay_in_order() -> None:
    async def main() -> None:
        handler = GatedHandler(gated={0})
        metrics = NodeMetrics()
        async with served(handler, metrics) as client:
            await client.stream.send_all(produce(1, 0) + produce(2, 1) + api_versions(3) + produce(4, 2))
            await settle()
            # The second Produce was handled while the first waits; ApiVersions was not read (muted),
            # nor, behind it, the last Produce.
            assert handler.seen == [(ApiKey.PRODUCE, 0), (ApiKey.PRODUCE, 1)]
            handler.gates[0].set()
            first = await client.answer(ApiKey.PRODUCE, PRODUCE_V)
            second = await client.answer(ApiKey.PRODUCE, PRODUCE_V)
            third = await client.answer(ApiKey.API_VERSIONS, 0)
            fourth = await client.answer(ApiKey.PRODUCE, PRODUCE_V)
            assert [a[0] for a in (first, second, third, fourth) if a is not None] == [1, 2, 3, 4]
            assert first is not None and first[1].responses[0].partition_responses[0].base_offset == 0
            assert second is not None and second[1].responses[0].partition_responses[0].base_offset == 1
            assert handler.seen == [
                (ApiKey.PRODUCE, 0),
                (ApiKey.PRODUCE, 1),
                (ApiKey.API_VERSIONS, -1),
                (ApiKey.PRODUCE, 2),
            ]
        s = scrape(metrics)
        # The first Produce waited ~0.2 s for its gate: that is its remote phase; the second waited
        # behind it: remote too. Neither counts it as the handler's own (local) work.
        remote = value(s, "strait_request_phase_seconds_sum", api="Produce", phase="remote")
        local = value(s, "strait_request_phase_seconds_sum", api="Produce", phase="local")
        assert remote is not None and remote >= 0.3 and local is not None and local < 0.1

    trio.run(main)


def test_at_most_max_pipelined_answers_wait_at_once() -> None:
    async def main() -> None:
        count = MAX_PIPELINED + 2
        handler = GatedHandler(gated=set(range(count)))
        async with served(handler) as client:
            await client.stream.send_all(b"".join(produce(i + 1, i) for i in range(count)))
            await settle()
            assert len(handler.seen) == MAX_PIPELINED  # the rest stay unread in the socket
            handler.gates[0].set()
            assert (await client.answer(ApiKey.PRODUCE, PRODUCE_V) or (None,))[0] == 1
            await settle()
            assert len(handler.seen) == MAX_PIPELINED + 1
            for gate in handler.gates.values():
                gate.set()
            ids = [(await client.answer(ApiKey.PRODUCE, PRODUCE_V) or (None,))[0] for _ in range(count - 1)]
            assert ids == list(range(2, count + 1))

    trio.run(main)


def test_answers_wait_for_requests_of_at_most_max_pipelined_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte bound: once the waiting answers' requests reach MAX_PIPELINED_BYTES the next Produce
    stays unread, however few answers wait; one request is always read when none waits."""
    frames = [produce(i + 1, i) for i in range(4)]
    monkeypatch.setattr(node.server, "MAX_PIPELINED_BYTES", 2 * len(frames[0]) - 1)

    async def main() -> None:
        handler = GatedHandler(gated=set(range(4)))
        async with served(handler) as client:
            await client.stream.send_all(b"".join(frames))
            await settle()
            assert len(handler.seen) == 2  # the second took the waiting requests past the bound
            handler.gates[0].set()
            assert (await client.answer(ApiKey.PRODUCE, PRODUCE_V) or (None,))[0] == 1
            await settle()
            assert len(handler.seen) == 3
            for gate in handler.gates.values():
                gate.set()
            ids = [(await client.answer(ApiKey.PRODUCE, PRODUCE_V) or (None,))[0] for _ in range(3)]
            assert ids == [2, 3, 4]

    trio.run(main)


def test_a_deferred_answer_that_fails_closes_its_connection_after_the_answers_before_it() -> None:
    async def main() -> None:
        handler = GatedHandler(gated={0, 1}, failing=frozenset({1}))
        async with served(handler) as client:
            await client.stream.send_all(produce(1, 0) + produce(2, 1) + produce(3, 2))
            await settle()
            handler.gates[0].set()
            handler.gates[1].set()
            first = await client.answer(ApiKey.PRODUCE, PRODUCE_V)
            assert first is not None and first[0] == 1
            assert await client.answer(ApiKey.PRODUCE, PRODUCE_V) is None  # closed: no answer 2, nor 3
        # The server serves on: a new connection is answered.
        handler = GatedHandler(gated=set())
        async with served(handler) as client:
            await client.stream.send_all(api_versions(7))
            answered = await client.answer(ApiKey.API_VERSIONS, 0)
            assert answered is not None and answered[0] == 7

    trio.run(main)


def test_the_client_closing_while_answers_wait_writes_them_then_ends() -> None:
    async def main() -> None:
        handler = GatedHandler(gated={0})
        async with served(handler) as client:
            await client.stream.send_all(produce(1, 0) + produce(2, 1))
            await client.stream.send_eof()  # half-close: the client still reads
            await settle()
            handler.gates[0].set()
            ids = [(await client.answer(ApiKey.PRODUCE, PRODUCE_V) or (None,))[0] for _ in range(2)]
            assert ids == [1, 2]
            assert await client.answer(ApiKey.PRODUCE, PRODUCE_V) is None

    trio.run(main)
