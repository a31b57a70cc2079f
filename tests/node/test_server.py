"""The listener on its own: a failing handler costs one connection, never the server."""

from __future__ import annotations

from typing import Any, ClassVar

import trio

from node.metrics import NodeMetrics
from node.protocol import ApiKey, Struct, decode_response, encode_request, request_header
from node.request import Request
from node.server import KafkaServer, ServerLimits, bind_listener


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
