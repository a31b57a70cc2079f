"""How node.client reads answers and writes requests (unit, over socket pairs): a large answer is
read straight into a buffer of its size, a request's large records go out as parts of their own."""

from __future__ import annotations

import os
import socket
import struct

import trio

from node.client import NodeConnection
from node.client._connection import send_parts_nonblocking
from node.protocol import ApiKey, RequestHeader, encode_request, encode_request_parts

BIG = os.urandom(3 * 1024 * 1024 + 17)


def frame(correlation_id: int, payload: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(payload), correlation_id) + payload


async def read_frames(chunks: list[bytes], count: int) -> list[memoryview]:
    a, b = trio.socket.socketpair()
    conn = NodeConnection(trio.SocketStream(a), "pair", "test")
    frames: list[memoryview] = []
    async with trio.open_nursery() as nursery:

        async def write() -> None:
            with b:
                for chunk in chunks:
                    await _send(b, chunk)

        nursery.start_soon(write)
        for _ in range(count):
            frames.append(await conn._read_frame())
    a.close()
    return frames


async def _send(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        sent = await sock.send(view)
        view = view[sent:]


def test_a_large_answer_arrives_whole_and_read_only_and_small_ones_after_it_too() -> None:
    first, second, third = frame(1, BIG), frame(2, b"small"), frame(3, b"x" * 100)
    stream = first + second + third
    chunks = [stream[:100], stream[100:300_000], stream[300_000:]]  # the big one split over reads
    got = trio.run(read_frames, chunks, 3)
    assert [bytes(f) for f in got] == [first[4:], second[4:], third[4:]]
    assert got[0].readonly


def test_two_answers_in_one_read_are_split_where_they_end() -> None:
    stream = frame(1, b"a" * 10) + frame(2, b"b" * 20)
    got = trio.run(read_frames, [stream], 2)
    assert [bytes(f) for f in got] == [frame(1, b"a" * 10)[4:], frame(2, b"b" * 20)[4:]]


def test_records_are_their_own_part_of_a_request_never_copied() -> None:
    records = memoryview(BIG)[5:]
    header = RequestHeader(int(ApiKey.MIRROR_APPEND), 0, 7, "test", 1)
    body = {
        "link": "l",
        "timeout_ms": 1000,
        "topics": [
            {
                "name": "t",
                "partitions": [{"index": 0, "expected_end_offset": 0, "start_offset": -1, "records": records}],
            }
        ],
    }
    parts = encode_request_parts(header, body)
    assert any(p is records for p in parts)  # the very memoryview: no copy
    assert b"".join(parts) == encode_request(header, body)
    (size,) = struct.unpack_from(">i", parts[0])
    assert size == sum(len(p) for p in parts) - 4


def test_parts_go_out_in_order_with_gathering_sends_through_a_full_socket_buffer() -> None:
    parts = [bytearray(b"head"), memoryview(BIG), b"", b"tail"]

    async def main() -> bytes:
        a, b = socket.socketpair()
        a.setblocking(False)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # many partial sends
        received = bytearray()
        tb = trio.socket.from_stdlib_socket(b)
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                while len(received) < 8 + len(BIG):
                    received.extend(await tb.recv(65536))

            nursery.start_soon(drain)
            waited = await send_parts_nonblocking(a, parts)
        assert waited
        a.close()
        tb.close()
        return bytes(received)

    assert trio.run(main) == b"head" + BIG + b"tail"
