"""node.client.write_txn_markers over a fake connection: the request it sends and how it reads the answer."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any, cast

import pytest
import trio

from node.client import ClientError, NodeConnection, TxnMarker, write_txn_markers
from node.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.unit


class FakeConnection:
    """Serves WriteTxnMarkers up to ``max_version`` and answers with ``answer``; records what was sent."""

    address = "127.0.0.1:9092"

    def __init__(self, answer: Any, max_version: int = 1) -> None:
        self.answer = answer
        self.max_version = max_version
        self.sent: list[tuple[int, int, dict[str, Any], float]] = []

    def version(self, api_key: int, highest: int) -> int:
        assert api_key == ApiKey.WRITE_TXN_MARKERS
        return min(highest, self.max_version)

    async def request(self, api_key: int, version: int, body: dict[str, Any], *, timeout: float) -> Any:
        self.sent.append((api_key, version, body, timeout))
        return self.answer


def answer(*entries: tuple[int, str, int, int]) -> NS:
    return NS(
        markers=[
            NS(producer_id=pid, topics=[NS(name=topic, partitions=[NS(partition_index=p, error_code=code)])])
            for pid, topic, p, code in entries
        ]
    )


def test_markers_are_grouped_by_topic_and_answered_per_partition() -> None:
    conn = FakeConnection(
        answer((7, "a", 0, 0), (7, "a", 2, 0), (7, "b", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER), (8, "a", 0, 0))
    )
    markers = [TxnMarker(7, 3, True, 5, [("a", 0), ("b", 1), ("a", 2)]), TxnMarker(8, 0, False, 5, [("a", 0)])]
    codes = trio.run(lambda: write_txn_markers(cast(NodeConnection, conn), markers, timeout=4))
    assert codes == {(7, "a", 0): 0, (7, "a", 2): 0, (7, "b", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER, (8, "a", 0): 0}
    ((api_key, version, body, timeout),) = conn.sent
    assert (api_key, version, timeout) == (ApiKey.WRITE_TXN_MARKERS, 1, 14)
    assert body["markers"][0] == {
        "producer_id": 7,
        "producer_epoch": 3,
        "transaction_result": True,
        "topics": [{"name": "a", "partition_indexes": [0, 2]}, {"name": "b", "partition_indexes": [1]}],
        "coordinator_epoch": 5,
    }
    assert body["markers"][1]["transaction_result"] is False


def test_an_answer_that_leaves_out_a_partition_is_an_error() -> None:
    conn = FakeConnection(answer((7, "a", 0, 0)))
    with pytest.raises(ClientError, match=r"without \[\(7, 'a', 1\)\]"):
        trio.run(
            lambda: write_txn_markers(cast(NodeConnection, conn), [TxnMarker(7, 0, True, 0, [("a", 0), ("a", 1)])])
        )
