"""failover._txns over a fake site: which open transactions a promote aborts (only those the
mirror copied, below the cut), idempotence, refused markers, and the status's per-topic view."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any, cast

import pytest
import trio
import trio.testing

from failover import _txns
from failover.errors import FailoverError
from failover.status import render
from node.client import SiteClient
from node.protocol import ApiKey, ErrorCode
from tests.failover.test_pieces import _status

pytestmark = pytest.mark.unit


class FakeSite:
    """One leader for everything: producer state per (topic, partition) that ABORT markers end."""

    name = "west"
    where = " on site west"
    timeout = 5.0

    def __init__(self, producers: dict[tuple[str, int], list[tuple[int, int, int, int]]]) -> None:
        self.producers = producers  # (topic, p) -> [(producer id, epoch, coordinator epoch, txn start)]
        self.refuse: dict[tuple[str, int, int], int] = {}  # (topic, p, pid) -> error code for its marker
        self.markers: list[dict[str, Any]] = []
        self.missing_partition: tuple[str, int] | None = None
        self.refuse_times = -1  # how many markers ``refuse`` refuses (-1: every one)

    async def refresh(self, topics: list[str] | None = None) -> None:
        pass

    async def on_leaders(self, topic: str, partitions: list[int], api_key: ApiKey, highest: int, body: Any) -> Any:
        request = body(highest, partitions)
        if api_key == ApiKey.DESCRIBE_PRODUCERS:
            entries = []
            for p in partitions:
                if (topic, p) == self.missing_partition:
                    entries.append(
                        NS(partition_index=p, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, error_message="moved")
                    )
                    continue
                states = [
                    NS(
                        producer_id=pid,
                        producer_epoch=epoch,
                        last_sequence=0,
                        last_timestamp=-1,
                        coordinator_epoch=ce,
                        current_txn_start_offset=start,
                    )
                    for pid, epoch, ce, start in self.producers.get((topic, p), [])
                ]
                entries.append(NS(partition_index=p, error_code=0, error_message=None, active_producers=states))
            return [NS(topics=[NS(name=topic, partitions=entries)])]
        assert api_key == ApiKey.WRITE_TXN_MARKERS
        answers = []
        for marker in request["markers"]:
            self.markers.append(marker)
            (p,) = marker["topics"][0]["partition_indexes"]
            code = self.refuse.get((topic, p, marker["producer_id"]), 0) if self.refuse_times else 0
            self.refuse_times -= 1 if code else 0
            if not code:
                self.producers[topic, p] = [
                    (pid, epoch, ce, -1 if pid == marker["producer_id"] else start)
                    for pid, epoch, ce, start in self.producers[topic, p]
                ]
            partitions = [NS(partition_index=p, error_code=code)]
            answers.append(NS(producer_id=marker["producer_id"], topics=[NS(name=topic, partitions=partitions)]))
        return [NS(markers=answers)]


def site(fake: FakeSite) -> SiteClient:
    return cast(SiteClient, fake)


def test_a_promote_aborts_the_transactions_below_the_cut_once() -> None:
    fake = FakeSite(
        {
            ("orders", 0): [(7, 3, 2, 120), (8, 0, -1, -1), (9, 1, -1, 150)],  # 9 began past the cut: west's own
            ("orders", 1): [(7, 3, 2, 40)],
            ("payments", 0): [],
        }
    )
    cut = {("orders", 0): 140, ("orders", 1): 90, ("payments", 0): 10}
    topics = {"orders": 2, "payments": 1}
    done = trio.run(lambda: _txns.abort_mirrored(site(fake), topics, cut))
    assert (done["aborted"], done["left_open"]) == (2, 1)
    assert [(t["partition"], t["producer_id"], t["first_offset"]) for t in done["transactions"]] == [
        (0, 7, 120),
        (1, 7, 40),
    ]
    assert fake.markers[0] == {
        "producer_id": 7,
        "producer_epoch": 3,
        "transaction_result": False,
        "topics": [{"name": "orders", "partition_indexes": [0]}],
        "coordinator_epoch": 2,
    }
    # Run again (a promote resumed after a kill): nothing open below the cut, nothing written.
    again = trio.run(lambda: _txns.abort_mirrored(site(fake), topics, cut))
    assert (again["aborted"], again["left_open"], len(fake.markers)) == (0, 1, 2)


def test_a_refusal_that_passes_is_tried_again_and_one_that_does_not_fails_the_step() -> None:
    cut = {("orders", 0): 200}
    # The leader has not seen the unmirror yet: POLICY_VIOLATION once, then the marker is taken.
    fake = FakeSite({("orders", 0): [(7, 3, 2, 120)]})
    fake.refuse[("orders", 0, 7)] = ErrorCode.POLICY_VIOLATION
    fake.refuse_times = 1
    done = trio.run(lambda: _txns.abort_mirrored(site(fake), {"orders": 1}, cut))
    assert done["aborted"] == 1 and len(fake.markers) == 2
    # Still refused after retry_s: the step fails, naming the partition and why.
    fake = FakeSite({("orders", 0): [(7, 3, 2, 120)]})
    fake.refuse[("orders", 0, 7)] = ErrorCode.NOT_ENOUGH_REPLICAS
    with pytest.raises(FailoverError, match=r"1 ABORT markers refused \(orders-0 producer 7: NOT_ENOUGH_REPLICAS\)"):
        trio.run(
            lambda: _txns.abort_mirrored(site(fake), {"orders": 1}, cut, retry_s=5),
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
    assert len(fake.markers) > 2
    # A refusal that cannot pass (a newer producer epoch there) fails at once.
    fake = FakeSite({("orders", 0): [(7, 3, 2, 120)]})
    fake.refuse[("orders", 0, 7)] = ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(FailoverError, match="INVALID_PRODUCER_EPOCH"):
        trio.run(lambda: _txns.abort_mirrored(site(fake), {"orders": 1}, cut))
    assert len(fake.markers) == 1
    fake.missing_partition = ("orders", 0)
    with pytest.raises(FailoverError, match=r"site west: reading the producers of orders-0: .*moved"):
        trio.run(lambda: _txns.open_transactions(site(fake), {"orders": 1}))


def test_the_status_shows_per_topic_how_many_are_open_and_the_oldest() -> None:
    a = _txns.OpenTxn("orders", 0, 7, 3, 2, 120)
    b = _txns.OpenTxn("orders", 1, 8, 0, -1, 40)
    c = _txns.OpenTxn("orders", 1, 9, 0, -1, 60)
    view = _txns.by_topic([a, b, c], {a: 5_000, b: 7_000}, now_ms=10_000)
    assert view["orders"]["count"] == 3 and view["orders"]["partitions"] == [0, 1]
    # The oldest by its first batch's time, not by offset (offsets of two partitions do not compare).
    assert view["orders"]["oldest"] == {
        "partition": 0,
        "first_offset": 120,
        "producer_id": 7,
        "producer_epoch": 3,
        "opened_ms": 5_000,
        "age_s": 5.0,
    }
    text = render(_status(open_transactions={"total": 3, "topics": view, "error": None}))
    assert "open transactions on west: 3 (a promote now would abort them" in text
    assert "orders: 3 open; oldest at partition 0 offset 120 (producer 7, 5.0 s old)" in text
    assert "open transactions on west: none" in render(
        _status(open_transactions={"total": 0, "topics": {}, "error": None})
    )
    unknown = render(_status(open_transactions={"total": None, "topics": {}, "error": "timed out"}))
    assert "open transactions on west: unknown (timed out)" in unknown
