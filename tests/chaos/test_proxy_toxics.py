"""The fault proxy's forwarding and each toxic, on real loopback sockets through a trio echo server.

Each test runs one trio loop holding a ProxyServer and an echo server, under a deadline. Timing
checks assert lower bounds (a delay is at least what was asked for) with generous upper bounds,
never exact durations.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable

import pytest
import trio

from chaos.errors import InvalidRequestError, ProxyExistsError, ProxyNotFoundError, ToxicExistsError
from chaos.proxy import ProxyInfo, ProxyServer, make_toxic
from tests.chaos.echo import serve_echo

DEADLINE_S = 20.0

Body = Callable[[ProxyServer, str], Awaitable[None]]


def run_with_proxy(body: Body, *, seed: int = 1) -> None:
    """Run ``body(server, echo_address)`` in a fresh trio loop; everything stops when it returns."""

    async def main() -> None:
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                server = ProxyServer(seed=seed)
                await nursery.start(server.run)
                upstream = await nursery.start(serve_echo)
                await body(server, upstream)
                nursery.cancel_scope.cancel()

    trio.run(main)


async def connect(info: ProxyInfo) -> trio.SocketStream:
    return await trio.open_tcp_stream(info.host, info.port)


async def receive_exactly(stream: trio.SocketStream, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = await stream.receive_some(n - len(data))
        if not chunk:
            raise AssertionError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


async def round_trip(stream: trio.SocketStream, data: bytes = b"ping") -> float:
    """Seconds to send ``data`` and read the echo back (asserting it is the same)."""
    start = trio.current_time()
    await stream.send_all(data)
    assert await receive_exactly(stream, len(data)) == data
    return trio.current_time() - start


async def read_until_closed(stream: trio.SocketStream) -> tuple[bytes, str]:
    """Everything readable, and how the stream ended: "eof" or "reset"."""
    data = bytearray()
    try:
        while chunk := await stream.receive_some(65536):
            data += chunk
    except trio.BrokenResourceError:
        return bytes(data), "reset"
    return bytes(data), "eof"


# -- forwarding -----------------------------------------------------------------------------------


def test_forwards_bytes_both_ways_and_half_close() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        assert info.enabled and info.port > 0 and info.host == "127.0.0.1"
        payload = os.urandom(1_000_000)
        async with await connect(info) as stream:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream.send_all, payload)
                assert await receive_exactly(stream, len(payload)) == payload
            await stream.send_eof()  # the echo server closes when it sees our FIN, the proxy passes both on
            assert await read_until_closed(stream) == (b"", "eof")

    run_with_proxy(body)


def test_unreachable_upstream_closes_the_client() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = listener.getsockname()[1]
        info = await server.create_proxy("dead", f"127.0.0.1:{port}")
        async with await connect(info) as stream:
            assert (await read_until_closed(stream))[0] == b""
        listener.close()

    run_with_proxy(body)


# -- latency and bandwidth ------------------------------------------------------------------------


def test_latency_delays_each_direction_by_at_least_the_latency() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as stream:
            # The best of three: the first round trip also opens the proxy's upstream connection,
            # and a loaded machine may stall any one of them.
            baseline = min([await round_trip(stream) for _ in range(3)])
            server.add_toxic("echo", make_toxic("latency", attributes={"latency": 150}))
            down = await round_trip(stream)
            server.add_toxic("echo", make_toxic("latency", stream="upstream", attributes={"latency": 100}))
            both = await round_trip(stream)
            server.remove_toxic("echo", "latency_downstream")
            server.remove_toxic("echo", "latency_upstream")
            after = min([await round_trip(stream) for _ in range(3)])
        assert down >= 0.15 and both >= 0.25, (down, both)
        assert down < 1.5 and both < 2.5, (down, both)
        assert baseline < 0.1 and after < 0.1, (baseline, after)

    run_with_proxy(body)


def test_latency_keeps_order_and_does_not_accumulate() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("latency", attributes={"latency": 200, "jitter": 50}))
        pieces = [f"<{i:03d}>".encode() for i in range(40)]
        async with await connect(info) as stream:
            start = trio.current_time()
            for piece in pieces:  # 40 small writes, 5 ms apart: separate chunks, each delayed 150..250 ms
                await stream.send_all(piece)
                await trio.sleep(0.005)
            received = await receive_exactly(stream, sum(len(p) for p in pieces))
            elapsed = trio.current_time() - start
        assert received == b"".join(pieces)
        # Delays overlap: 40 chunks * 200 ms would be 8 s if they added up.
        assert 0.15 <= elapsed < 2.5, elapsed

    run_with_proxy(body)


def test_jitter_stays_within_latency_plus_minus_jitter() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("latency", attributes={"latency": 100, "jitter": 40}))
        async with await connect(info) as stream:
            delays = [await round_trip(stream) for _ in range(8)]
        assert min(delays) >= 0.06, delays
        assert max(delays) < 1.4, delays

    run_with_proxy(body)


def test_bandwidth_limits_throughput() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("bandwidth", attributes={"rate": 200}))  # 200 KB/s downstream
        payload = os.urandom(100_000)
        async with await connect(info) as stream:
            elapsed = await round_trip(stream, payload)
        # 100 KB at 200 KB/s: 0.5 s, less the first 100 ms slice that goes at once.
        assert 0.35 <= elapsed < 5.0, elapsed

    run_with_proxy(body)


def test_bandwidth_zero_means_unlimited() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("bandwidth", attributes={"rate": 0}))
        async with await connect(info) as stream:
            assert await round_trip(stream, os.urandom(200_000)) < 2.0

    run_with_proxy(body)


# -- timeout, the black hole ----------------------------------------------------------------------


def test_timeout_zero_blackholes_until_removed() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as old:
            await round_trip(old)
            server.add_toxic("echo", make_toxic("timeout", stream="upstream", attributes={"timeout": 0}))
            await old.send_all(b"into the void")
            with trio.move_on_after(0.5) as waited:
                data = await old.receive_some(100)
                raise AssertionError(f"data passed a black hole: {data!r}")
            assert waited.cancelled_caught
            async with await connect(info) as new:  # new connections are accepted, and blackholed too
                await new.send_all(b"hello?")
                with trio.move_on_after(0.3) as waited_new:
                    await new.receive_some(100)
                assert waited_new.cancelled_caught
            server.remove_toxic("echo", "timeout_upstream")
            # The old connection stayed open: what was sent meanwhile is gone, new bytes flow again.
            assert await round_trip(old, b"back") < 1.0
        async with await connect(info) as fresh:
            assert await round_trip(fresh) < 1.0

    run_with_proxy(body)


def test_timeout_closes_the_connection_after_the_timeout() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as stream:
            await round_trip(stream)
            server.add_toxic("echo", make_toxic("timeout", attributes={"timeout": 300}))
            start = trio.current_time()
            await stream.send_all(b"dropped")
            data, _ = await read_until_closed(stream)
            elapsed = trio.current_time() - start
        assert data == b""
        assert 0.25 <= elapsed < 3.0, elapsed

    run_with_proxy(body)


# -- closing toxics -------------------------------------------------------------------------------


def test_slow_close_delays_the_fin() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("slow_close", attributes={"delay": 300}))
        async with await connect(info) as stream:
            assert await round_trip(stream) < 0.25  # data is not delayed
            start = trio.current_time()
            await stream.send_eof()
            assert await read_until_closed(stream) == (b"", "eof")
            elapsed = trio.current_time() - start
        assert 0.3 <= elapsed < 3.0, elapsed

    run_with_proxy(body)


def test_reset_peer_resets_the_client_after_the_timeout() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("reset_peer", attributes={"timeout": 200}))
        async with await connect(info) as stream:
            start = trio.current_time()
            await round_trip(stream)  # data flows until the reset
            _, how = await read_until_closed(stream)
            elapsed = trio.current_time() - start
        assert how == "reset"
        assert 0.2 <= elapsed < 3.0, elapsed

    run_with_proxy(body)


def test_limit_data_closes_after_the_limit() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("limit_data", attributes={"bytes": 10}))
        async with await connect(info) as stream:
            await stream.send_all(b"0123456789abcdefghij")
            data, _ = await read_until_closed(stream)
        assert data == b"0123456789"

    run_with_proxy(body)


# -- toxicity, live changes, enable/disable -------------------------------------------------------


def test_toxicity_zero_never_applies() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("timeout", toxicity=0.0, attributes={"timeout": 0}))
        for _ in range(10):
            async with await connect(info) as stream:
                assert await round_trip(stream) < 1.0

    run_with_proxy(body)


def test_toxicity_is_drawn_per_connection() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("latency", toxicity=0.5, attributes={"latency": 100}))
        slow = 0
        for _ in range(10):
            async with await connect(info) as stream:
                first = await round_trip(stream)
                second = await round_trip(stream)
            assert (first >= 0.1) == (second >= 0.1), f"the draw is fixed for a connection's life: {first}, {second}"
            slow += first >= 0.1
        assert 0 < slow < 10, slow  # the seed is fixed, so this is deterministic

    run_with_proxy(body, seed=7)


def test_toxics_apply_to_live_connections() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as stream:
            assert await round_trip(stream) < 0.2
            server.add_toxic("echo", make_toxic("latency", name="slow", attributes={"latency": 250}))
            assert await round_trip(stream) >= 0.25
            server.update_toxic("echo", "slow", {"attributes": {"latency": 0}})
            assert await round_trip(stream) < 0.2

    run_with_proxy(body)


def test_disable_closes_connections_and_refuses_new_ones_until_enabled() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as stream:
            await round_trip(stream)
            disabled = await server.update_proxy("echo", enabled=False)
            assert not disabled.enabled
            assert (await read_until_closed(stream))[0] == b""
        with pytest.raises(OSError):
            await connect(info)
        enabled = await server.update_proxy("echo", enabled=True)
        assert enabled.listen == info.listen  # same port again
        async with await connect(info) as stream:
            assert await round_trip(stream) < 1.0

    run_with_proxy(body)


def test_created_disabled_then_reset_enables_and_clears() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream, enabled=False)
        assert not info.enabled and info.listen == "127.0.0.1:0"
        server.add_toxic("echo", make_toxic("latency", attributes={"latency": 500}))
        await server.reset()
        after = server.proxy("echo")
        assert after.enabled and after.toxics == () and after.port > 0
        async with await connect(after) as stream:
            assert await round_trip(stream) < 0.4

    run_with_proxy(body)


def test_changing_upstream_moves_new_connections() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", "127.0.0.1:9")  # discard port: nothing listens in tests
        await server.update_proxy("echo", upstream=upstream)
        async with await connect(server.proxy("echo")) as stream:
            assert await round_trip(stream) < 1.0
        assert server.proxy("echo").listen == info.listen

    run_with_proxy(body)


def test_model_errors_name_the_value() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        await server.create_proxy("echo", upstream)
        with pytest.raises(ProxyExistsError, match="'echo'"):
            await server.create_proxy("echo", upstream)
        with pytest.raises(InvalidRequestError, match="'nowhere'"):
            await server.create_proxy("other", "nowhere")
        with pytest.raises(InvalidRequestError, match="70000"):
            await server.create_proxy("other", upstream, listen="127.0.0.1:70000")
        with pytest.raises(ProxyNotFoundError, match="'ghost'"):
            server.add_toxic("ghost", make_toxic("latency"))
        server.add_toxic("echo", make_toxic("latency"))
        with pytest.raises(ToxicExistsError, match="latency_downstream"):
            server.add_toxic("echo", make_toxic("latency"))
        taken = server.proxy("echo").listen
        with pytest.raises(InvalidRequestError, match=re.escape(taken)):
            await server.create_proxy("clash", upstream, listen=taken)
        assert set(server.proxies()) == {"echo"}

    run_with_proxy(body)


# -- slicer and packet_loss -----------------------------------------------------------------------


async def read_sizes(stream: trio.SocketStream, n: int) -> tuple[bytes, list[int]]:
    """``n`` bytes from ``stream`` and the size of each read that returned them."""
    data = bytearray()
    sizes: list[int] = []
    while len(data) < n:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise AssertionError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
        sizes.append(len(chunk))
    return bytes(data), sizes


async def echoes_intact(info: ProxyInfo, payload: bytes) -> None:
    """Send ``payload`` through the proxy while reading the echo; it must come back byte for byte."""
    async with await connect(info) as stream, trio.open_nursery() as nursery:
        nursery.start_soon(stream.send_all, payload)
        assert await receive_exactly(stream, len(payload)) == payload


def test_slicer_splits_writes_into_delayed_slices_keeping_every_byte_in_order() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as stream:
            payload = os.urandom(4000)
            await stream.send_all(payload)
            unsliced, unsliced_sizes = await read_sizes(stream, len(payload))
            assert unsliced == payload and len(unsliced_sizes) <= 3, unsliced_sizes  # loopback: one write, one read
            server.add_toxic(
                "echo", make_toxic("slicer", attributes={"average_size": 64, "size_variation": 32, "delay": 5000})
            )
            start = trio.current_time()
            await stream.send_all(payload)
            data, sizes = await read_sizes(stream, len(payload))
            elapsed = trio.current_time() - start
        assert data == payload
        # At most 96 bytes a slice: at least 42 slices, 5 ms apart. A read returns more than one
        # slice only when the reader was late (a busy machine), so most reads are single slices.
        assert len(sizes) >= 21, sizes
        assert sum(size <= 96 for size in sizes) >= len(sizes) * 3 // 4, sizes
        assert 41 * 0.005 <= elapsed < 10.0, elapsed

    run_with_proxy(body)


def test_slicer_on_both_streams_keeps_a_large_stream_intact() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        for stream_name in ("upstream", "downstream"):
            attributes = {"average_size": 1500, "size_variation": 1000, "delay": 0}
            server.add_toxic("echo", make_toxic("slicer", stream=stream_name, attributes=attributes))
        await echoes_intact(info, os.urandom(1_000_000))

    run_with_proxy(body)


def test_packet_loss_delays_lost_pieces_by_the_rto_and_never_drops_or_reorders() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        server.add_toxic("echo", make_toxic("packet_loss", attributes={"probability": 30, "rto_ms": 250}))
        async with await connect(info) as stream:
            # round_trip asserts each echo is exactly what was sent: nothing lost, nothing reordered.
            delays = [await round_trip(stream, f"<{i:02d}>".encode()) for i in range(16)]
        lost = [d for d in delays if d >= 0.25]
        assert 0 < len(lost) < len(delays), delays  # the seed is fixed, so this is deterministic
        # A lost piece waits 250 ms, 250 + 500 after two losses, ...: never between 0.15 and 0.25 s.
        assert not [d for d in delays if 0.15 < d < 0.25], delays

    run_with_proxy(body)


def test_packet_loss_of_every_transmission_holds_the_stream_until_removed() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        async with await connect(info) as stream:
            await round_trip(stream)
            server.add_toxic("echo", make_toxic("packet_loss", stream="upstream", attributes={"probability": 100}))
            await stream.send_all(b"held ")
            await stream.send_all(b"in order")
            with trio.move_on_after(0.6) as waited:
                data = await stream.receive_some(100)
                raise AssertionError(f"data passed a 100% loss: {data!r}")
            assert waited.cancelled_caught
            server.remove_toxic("echo", "packet_loss_upstream")
            # Unlike a timeout toxic, nothing was dropped: the held bytes arrive, in order.
            assert await receive_exactly(stream, len(b"held in order")) == b"held in order"
            assert await round_trip(stream) < 1.0

    run_with_proxy(body)


def test_packet_loss_with_a_slicer_keeps_a_large_stream_intact() -> None:
    async def body(server: ProxyServer, upstream: str) -> None:
        info = await server.create_proxy("echo", upstream)
        for stream_name in ("upstream", "downstream"):
            loss = {"probability": 20, "rto_ms": 1}
            server.add_toxic("echo", make_toxic("packet_loss", stream=stream_name, attributes=loss))
        slices = {"average_size": 8000, "size_variation": 4000, "delay": 100}
        server.add_toxic("echo", make_toxic("slicer", attributes=slices))
        await echoes_intact(info, os.urandom(500_000))

    run_with_proxy(body)
