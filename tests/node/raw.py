"""A raw, blocking Kafka connection for tests that need exact bytes on the wire."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from node.protocol import ApiKey, Struct, decode_response, encode_request, request_header
from storage.records import build_batch

TIMEOUT_S = 10.0


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
    sock.settimeout(TIMEOUT_S)
    return sock


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None if the server closed the connection."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def request(sock: socket.socket, api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1) -> Struct:
    sock.sendall(encode_request(request_header(api_key, version, correlation_id, "raw-test"), body))
    frame = read_frame(sock)
    assert frame is not None, "the server closed the connection"
    got, response = decode_response(api_key, version, frame)
    assert got == correlation_id
    return response


def closed_by_server(sock: socket.socket) -> bool:
    """True if the server closes the connection (EOF or reset) before TIMEOUT_S."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True once the peer closes (EOF or reset) within ``seconds``, whatever it sent before (a TLS
    alert, an error response)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_body(
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 2**20,
    partition_max_bytes: int = 2**20,
) -> dict[str, Any]:
    """A consumer's Fetch of one partition (every field up to v11; older versions ignore the rest)."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def produce_raw(
    bootstrap: str,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    batch: bytes | None = None,
    version: int = 8,
    acks: int = -1,
) -> Struct:
    """Produce one batch (built here unless given) and return the partition's response."""
    if batch is None:
        now = int(time.time() * 1000)
        batch = build_batch([(now, None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    with connect(bootstrap) as sock:
        response = request(sock, ApiKey.PRODUCE, version, produce_body(topic, partition, batch, acks))
    return response.responses[0].partition_responses[0]


def auto_create(bootstrap: str, topic: str) -> None:
    """Create a topic the way many clients do: a Metadata request with auto-creation allowed."""
    with connect(bootstrap) as sock:
        meta = request(sock, ApiKey.METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
    assert meta.topics[0].error_code == 0, meta.topics[0]
