"""node.client.describe_producers and abort_transactions over a fake route: the requests each
leader gets and how the answers are read (per-partition errors, partitions left out)."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any, cast

import pytest
import trio

from node.client import ClientError, ProducerState, Route, TxnAbort, abort_transactions, describe_producers
from node.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.unit


class FakeRoute:
    """Partitions 0 and 1 led by one node, 2 by another; ``answer`` builds each leader's answer."""

    where = " on site west"
    timeout = 5.0

    def __init__(self, answer: Any) -> None:
        self.leaders = {0: 1, 1: 1, 2: 2}
        self.answer = answer
        self.sent: list[tuple[int, int, dict[str, Any]]] = []

    async def on_leaders(self, topic: str, partitions: list[int], api_key: ApiKey, highest: int, make_body: Any) -> Any:
        out = []
        for leader in sorted({self.leaders[p] for p in partitions}):
            parts = [p for p in partitions if self.leaders[p] == leader]
            body = make_body(highest, parts)
            self.sent.append((api_key, highest, body))
            out.append(self.answer(body))
        return out


def producer(pid: int, start: int, coordinator: int = -1) -> NS:
    return NS(
        producer_id=pid,
        producer_epoch=4,
        last_sequence=9,
        last_timestamp=-1,
        coordinator_epoch=coordinator,
        current_txn_start_offset=start,
    )


def test_describe_producers_reads_each_leaders_answer() -> None:
    def answer(body: dict[str, Any]) -> NS:
        parts = body["topics"][0]["partition_indexes"]
        entries = {
            0: NS(partition_index=0, error_code=0, error_message=None, active_producers=[producer(7, 120)]),
            1: NS(
                partition_index=1,
                error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                error_message="moved",
                active_producers=[],
            ),
        }
        return NS(topics=[NS(name="orders", partitions=[entries[p] for p in parts if p in entries])])

    route = FakeRoute(answer)
    found = trio.run(lambda: describe_producers(cast(Route, route), "orders", [0, 1, 2]))
    assert found[0] == [ProducerState(7, 4, 9, -1, -1, 120)]
    assert cast(list[ProducerState], found[0])[0].in_transaction
    assert isinstance(found[1], ClientError) and found[1].code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert isinstance(found[2], ClientError) and "no leader answered" in str(found[2])  # left out of the answer
    assert [(key, version, body["topics"][0]["partition_indexes"]) for key, version, body in route.sent] == [
        (ApiKey.DESCRIBE_PRODUCERS, 0, [0, 1]),
        (ApiKey.DESCRIBE_PRODUCERS, 0, [2]),
    ]


def test_abort_transactions_sends_abort_markers_to_each_leader() -> None:
    def answer(body: dict[str, Any]) -> NS:
        markers = []
        for m in body["markers"]:
            (topic,) = m["topics"]
            (p,) = topic["partition_indexes"]
            code = ErrorCode.INVALID_PRODUCER_EPOCH if m["producer_id"] == 8 else 0
            markers.append(
                NS(
                    producer_id=m["producer_id"],
                    topics=[NS(name="orders", partitions=[NS(partition_index=p, error_code=code)])],
                )
            )
        return NS(markers=markers)

    route = FakeRoute(answer)
    aborts = [TxnAbort.of(0, ProducerState(7, 4, 9, -1, -1, 120)), TxnAbort(0, 8, 1, 3), TxnAbort(2, 7, 4, 0)]
    codes = trio.run(lambda: abort_transactions(cast(Route, route), "orders", aborts))
    assert codes == {(0, 7): 0, (0, 8): ErrorCode.INVALID_PRODUCER_EPOCH, (2, 7): 0}
    first = route.sent[0][2]["markers"][0]
    assert first == {
        "producer_id": 7,
        "producer_epoch": 4,
        "transaction_result": False,
        "topics": [{"name": "orders", "partition_indexes": [0]}],
        "coordinator_epoch": 0,  # no marker before: 0, which any partition takes
    }
    assert [key for key, _, _ in route.sent] == [ApiKey.WRITE_TXN_MARKERS] * 2
    assert trio.run(lambda: abort_transactions(cast(Route, route), "orders", [])) == {}
