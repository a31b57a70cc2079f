"""The stall watch, and the node refusing to lead after a stall until it has re-read ZooKeeper.

The end-to-end case (a leader paused past its session answers a request that waited in its
socket) is in ``tests/node/test_site_faults.py``
(``test_a_leader_paused_past_its_session_answers_no_stale_offsets_when_it_resumes``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from node.cluster import ClusterState
from node.config import NodeConfig
from node.coordination import ClusterSnapshot
from node.errors import BrokerError
from node.protocol import ErrorCode
from node.stall import StallWatch
from tests.node.handlers.fakes import leader_partition

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch(clock: Clock, stalls: list[float] | None = None) -> StallWatch:
    seen = stalls if stalls is not None else []
    return StallWatch(2.0, seen.append, beat_s=0.05, clock=clock)


def test_a_late_beat_is_a_stall_and_a_missing_beat_is_overdue() -> None:
    clock, stalls = Clock(), []
    w = watch(clock, stalls)
    clock.now += 1.9
    w.beat()
    assert (w.generation, w.overdue(), stalls) == (0, False, [])
    clock.now += 2.5  # stopped: the watch's thread has not run yet
    assert w.overdue() and w.generation == 0
    w.beat()
    assert (w.generation, w.overdue(), stalls, w.last_stall_s) == (1, False, [2.5], 2.5)


def test_the_threshold_must_exceed_the_beat() -> None:
    with pytest.raises(ValueError, match=r"threshold_s \(0.05\) must be longer than beat_s \(0.05\)"):
        StallWatch(0.05, lambda _s: None, beat_s=0.05)


def test_the_thread_beats_and_stops() -> None:
    w = StallWatch(5.0, lambda _s: None, beat_s=0.01)
    w.start()
    try:
        trio.run(trio.sleep, 0.1)
        assert not w.overdue() and w.generation == 0
    finally:
        w.stop()
    assert w._thread is not None and not w._thread.is_alive()


class FakeZk:
    """``snapshot`` of an empty site; ``during`` runs inside the read (a stall while it is under way)."""

    def __init__(self) -> None:
        self.during: Callable[[], None] = lambda: None

    async def snapshot(self, *, incremental: bool = False, full: bool = False) -> ClusterSnapshot:
        self.during()
        return ClusterSnapshot({}, {}, {}, {}, None, None, {})


def test_a_node_leads_nothing_after_a_stall_until_a_refresh_begun_after_it_completes(tmp_path: Path) -> None:
    config = NodeConfig.from_properties({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t"})
    zk = FakeZk()
    fake: Any = zk
    cluster = ClusterState(config, fake, fake)
    partition = leader_partition(tmp_path, "orders")
    cluster.partitions[partition.tp] = partition
    clock = Clock()
    cluster.stall = w = watch(clock)
    assert cluster.partition("orders", 0) is partition

    def refused() -> bool:
        try:
            cluster.partition("orders", 0)
        except BrokerError as e:
            assert e.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert "was stopped for a while" in str(e)
            return True
        return False

    clock.now += 3  # a request runs before the watch's thread does
    assert refused()
    assert cluster.partition("orders", 0, leader=False) is partition  # not a leader's answer: served
    w.beat()  # the thread runs: a stall
    assert refused()

    def stall_again() -> None:
        clock.now += 3
        w.beat()

    zk.during = stall_again  # a refresh begun before the second stall does not answer for it
    trio.run(cluster.refresh)
    assert w.generation == 2 and refused()
    zk.during = lambda: None
    trio.run(cluster.refresh)
    assert not refused()
