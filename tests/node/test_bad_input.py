"""Bad input gets the Kafka error or a closed connection, and the node keeps serving everyone else."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator

import pytest

from node.protocol import ApiKey, encode_request, request_header
from storage.records import build_batch
from tests.node.harness import NodeProcess
from tests.node.raw import closed_by_server, connect, produce_body, produce_raw, read_frame, request

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[NodeProcess]:
    node = NodeProcess(1, tmp_path_factory.mktemp("bad") / "node1", f"{zookeeper}/t-bad-{time.time_ns()}")
    node.start()
    yield node
    node.stop()


def create_topic(node: NodeProcess, name: str, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
    with connect(node.bootstrap) as sock:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 10_000,
            "validate_only": False,
        }
        result = request(sock, ApiKey.CREATE_TOPICS, 4, body).topics[0]
    assert result.error_code == 0, result.error_message


def still_serving(node: NodeProcess) -> None:
    with connect(node.bootstrap) as sock:
        response = request(sock, ApiKey.METADATA, 8, {"topics": None})
    assert [b.node_id for b in response.brokers] == [1]


def high_watermark(node: NodeProcess, topic: str) -> int:
    with connect(node.bootstrap) as sock:
        body = {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
        return int(request(sock, ApiKey.LIST_OFFSETS, 1, body).topics[0].partitions[0].offset)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(os.urandom(4096), id="random-bytes"),
        pytest.param(struct.pack(">i", 2**31 - 1) + b"\0" * 64, id="2GB-length-prefix"),
        pytest.param(struct.pack(">i", -5) + b"\0" * 16, id="negative-length"),
        pytest.param(struct.pack(">ihhih", 10, 99, 0, 1, -1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhih", 10, ApiKey.PRODUCE, 0, 1, 1000), id="header-string-past-frame"),
        pytest.param(struct.pack(">ihhih", 10, ApiKey.METADATA, 50, 7, -1), id="unsupported-version"),
    ],
)
def test_garbage_closes_only_that_connection(node: NodeProcess, payload: bytes) -> None:
    with connect(node.bootstrap) as bystander, connect(node.bootstrap) as sock:
        sock.sendall(payload)
        assert closed_by_server(sock)
        # A connection opened before the garbage still works, and so do new ones.
        assert request(bystander, ApiKey.API_VERSIONS, 0, {}).error_code == 0
    still_serving(node)


def test_truncated_frame_then_disconnect(node: NodeProcess) -> None:
    with connect(node.bootstrap) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\0" * 10)
    still_serving(node)


def test_api_versions_unknown_version_answers_error_35_in_v0(node: NodeProcess) -> None:
    with connect(node.bootstrap) as sock:
        header = struct.pack(">hhih", ApiKey.API_VERSIONS, 77, 42, 4) + b"test"
        sock.sendall(struct.pack(">i", len(header)) + header)
        frame = read_frame(sock)
    assert frame is not None
    correlation_id, error_code = struct.unpack_from(">ih", frame)
    assert (correlation_id, error_code) == (42, 35)
    (count,) = struct.unpack_from(">i", frame, 6)
    ranges = {
        struct.unpack_from(">hhh", frame, 10 + 6 * i)[0]: struct.unpack_from(">hhh", frame, 10 + 6 * i)[1:]
        for i in range(count)
    }
    assert ranges[ApiKey.API_VERSIONS] == (0, 4)
    assert ranges[ApiKey.PRODUCE] == (0, 11)
    assert ranges[ApiKey.FETCH] == (0, 17)


def test_bad_crc_is_corrupt_message_and_nothing_is_stored(node: NodeProcess) -> None:
    create_topic(node, "crc")
    batch = bytearray(build_batch([(int(time.time() * 1000), b"k", b"v" * 100)]))
    batch[-1] ^= 0xFF  # a flipped bit in the record, under the CRC
    response = produce_raw(node.bootstrap, "crc", 0, [], batch=bytes(batch))
    assert response.error_code == 2  # CORRUPT_MESSAGE
    assert "CRC" in response.error_message
    assert high_watermark(node, "crc") == 0
    good = produce_raw(node.bootstrap, "crc", 0, [b"fine"])
    assert (good.error_code, good.base_offset) == (0, 0)


def test_oversized_batch_is_message_too_large(node: NodeProcess) -> None:
    create_topic(node, "small", {"max.message.bytes": "2000"})
    response = produce_raw(node.bootstrap, "small", 0, [b"x" * 5000])
    assert response.error_code == 10  # MESSAGE_TOO_LARGE
    assert "max.message.bytes=2000" in response.error_message
    assert produce_raw(node.bootstrap, "small", 0, [b"x" * 500]).error_code == 0
    assert high_watermark(node, "small") == 1


def test_old_timestamp_is_invalid_timestamp(node: NodeProcess) -> None:
    create_topic(node, "fresh", {"message.timestamp.before.max.ms": "60000"})
    old = build_batch([(int(time.time() * 1000) - 3_600_000, None, b"stale")])
    response = produce_raw(node.bootstrap, "fresh", 0, [], batch=old)
    assert response.error_code == 32  # INVALID_TIMESTAMP
    assert high_watermark(node, "fresh") == 0


def test_unknown_partition_and_invalid_topic(node: NodeProcess) -> None:
    create_topic(node, "two", partitions=2)
    assert produce_raw(node.bootstrap, "two", 5, [b"x"]).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert produce_raw(node.bootstrap, "no-such-topic", 0, [b"x"]).error_code == 3
    with connect(node.bootstrap) as sock:
        topics = request(sock, ApiKey.METADATA, 8, {"topics": [{"name": "bad name!"}]}).topics
    assert topics[0].error_code == 17  # INVALID_TOPIC_EXCEPTION


def test_two_batches_in_one_partition_is_invalid_record(node: NodeProcess) -> None:
    create_topic(node, "one-batch")
    now = int(time.time() * 1000)
    double = build_batch([(now, None, b"a")]) + build_batch([(now, None, b"b")])
    assert produce_raw(node.bootstrap, "one-batch", 0, [], batch=double).error_code == 87  # INVALID_RECORD


def test_acks_zero_error_closes_the_connection(node: NodeProcess) -> None:
    create_topic(node, "acks0")
    batch = bytearray(build_batch([(int(time.time() * 1000), None, b"v")]))
    batch[-1] ^= 1
    with connect(node.bootstrap) as sock:
        header = request_header(ApiKey.PRODUCE, 7, 9, "raw")
        sock.sendall(encode_request(header, produce_body("acks0", 0, bytes(batch), acks=0)))
        assert closed_by_server(sock)
    still_serving(node)


def test_pipelined_requests_are_answered_in_order(node: NodeProcess) -> None:
    create_topic(node, "pipe")
    now = int(time.time() * 1000)
    frames = b""
    for i in range(20):
        api = (ApiKey.PRODUCE, 7) if i % 2 else (ApiKey.METADATA, 8)
        body = produce_body("pipe", 0, build_batch([(now, None, b"%d" % i)])) if i % 2 else {"topics": None}
        frames += encode_request(request_header(api[0], api[1], 100 + i, "pipe"), body)
    with connect(node.bootstrap) as sock:
        sock.sendall(frames)
        ids = []
        for _ in range(20):
            frame = read_frame(sock)
            assert frame is not None
            ids.append(struct.unpack_from(">i", frame)[0])
    assert ids == list(range(100, 120))
    assert high_watermark(node, "pipe") == 10


def test_client_vanishing_mid_response_does_not_hurt_the_node(node: NodeProcess) -> None:
    """A client that resets the connection while the node writes (EPIPE/ECONNRESET, never SIGPIPE)."""
    create_topic(node, "vanish")
    big = build_batch([(int(time.time() * 1000), None, b"x" * 900_000)])
    assert produce_raw(node.bootstrap, "vanish", 0, [], batch=big).error_code == 0
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 50 * 2**20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": [],
        "rack_id": "",
        "topics": [
            {
                "topic": "vanish",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 2**20,
                    }
                ],
            }
        ],
    }
    for _ in range(20):
        sock = connect(node.bootstrap)
        for i in range(5):  # pipelined: the node is still writing when the reset arrives
            sock.sendall(encode_request(request_header(ApiKey.FETCH, 11, i, "vanish"), fetch))
        sock.close()  # FIN with unread data: the node's next writes meet a reset, then EPIPE
    still_serving(node)
