"""Fetch semantics on the wire: long polling, whole batches for mid-batch offsets, byte limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from node.protocol import ApiKey, Struct
from storage.records import build_batch, iter_batches
from tests.node.harness import NodeProcess
from tests.node.raw import auto_create, connect, fetch_body, produce_raw, request

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[NodeProcess]:
    node = NodeProcess(1, tmp_path_factory.mktemp("fetch") / "node1", f"{zookeeper}/t-fetch-{time.time_ns()}")
    node.start()
    yield node
    node.stop()


def fetch(
    node: NodeProcess,
    topic: str,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 2**20,
    partition_max_bytes: int = 2**20,
) -> Struct:
    body = fetch_body(
        topic,
        offset,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        partition_max_bytes=partition_max_bytes,
    )
    with connect(node.bootstrap) as sock:
        return request(sock, ApiKey.FETCH, 11, body).responses[0].partitions[0]


def batches(records: bytes | memoryview | None) -> list[tuple[int, int]]:
    """(base offset, record count) of each batch in a fetch response's records."""
    return [(h.base_offset, h.records_count) for _, h in iter_batches(bytes(records or b""))]


def test_mid_batch_offset_returns_the_whole_batch(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "mid")
    now = int(time.time() * 1000)
    assert (
        produce_raw(
            node.bootstrap, "mid", 0, [], batch=build_batch([(now, None, b"%d" % i) for i in range(10)])
        ).error_code
        == 0
    )
    assert produce_raw(node.bootstrap, "mid", 0, [b"ten"]).base_offset == 10
    response = fetch(node, "mid", 5)
    assert response.error_code == 0 and response.high_watermark == 11
    assert batches(response.records) == [(0, 10), (10, 1)]


def test_first_batch_is_returned_even_above_the_limits(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "limits")
    big = [b"x" * 5000]
    produce_raw(node.bootstrap, "limits", 0, big)
    produce_raw(node.bootstrap, "limits", 0, big)
    response = fetch(node, "limits", 0, partition_max_bytes=100, max_bytes=100)
    assert batches(response.records) == [(0, 1)]  # one batch: progress, but no more than that
    response = fetch(node, "limits", 0, partition_max_bytes=2**20)
    assert batches(response.records) == [(0, 1), (1, 1)]


def test_out_of_range_offsets(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "range")
    produce_raw(node.bootstrap, "range", 0, [b"a"])
    assert fetch(node, "range", 5).error_code == 1  # OFFSET_OUT_OF_RANGE
    at_end = fetch(node, "range", 1)
    assert at_end.error_code == 0 and batches(at_end.records) == []


def test_long_poll_returns_when_data_arrives(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "poll")
    produce_raw(node.bootstrap, "poll", 0, [b"first"])
    result: dict[str, Any] = {}

    def waiter() -> None:
        started = time.monotonic()
        result["response"] = fetch(node, "poll", 1, max_wait_ms=20_000, min_bytes=1)
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)  # let the fetch park first: what is measured is that it wakes, not this pause
    assert "response" not in result, "the fetch returned before any data arrived"
    produce_raw(node.bootstrap, "poll", 0, [b"second"])
    thread.join(30)
    assert batches(result["response"].records) == [(1, 1)]
    assert result["seconds"] < 15  # woken by the append, long before max_wait_ms


def test_long_poll_times_out_empty(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "quiet")
    produce_raw(node.bootstrap, "quiet", 0, [b"only"])
    started = time.monotonic()
    response = fetch(node, "quiet", 1, max_wait_ms=300, min_bytes=1)
    assert response.error_code == 0 and batches(response.records) == []
    assert time.monotonic() - started >= 0.25
