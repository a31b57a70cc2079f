"""The follower side of ``node.replica_manager`` without processes: one fetcher against a fake
leader, on trio's mock clock.

Broker 2 follows broker 1 for two partitions it led until now (each holds three records of
epoch 0; ZooKeeper moved the leadership to broker 1 in epoch 1), so each must first ask the
leader OffsetForLeaderEpoch where its log diverges. The partitions are real ``Partition``
objects over real logs in a temporary directory; the leader is a fake connection that decodes
each request and encodes each answer with the real codec. Issue 15's lead: the leader answers
NOT_LEADER_OR_FOLLOWER for one partition (it handed its leadership away; this follower's view
is older), and the fetcher asked again at once, forever, and never fetched the other one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

import node.replica_manager
from node.coordination import BrokerRegistration, PartitionState
from node.partition import Partition
from node.protocol import ApiKey, ErrorCode, Struct
from node.replica_manager import ReplicaManager
from storage import FaultPoints, LogConfig, TopicPartition, create_log
from storage.records import build_batch
from tests.node.groups.helpers import request as wire_request
from tests.node.groups.helpers import response as wire_response
from tests.node.handlers.fakes import NOW_MS, node_config, policy

pytestmark = pytest.mark.unit

FOLLOWER_ID = 2
LEADER_ID = 1
STUCK = TopicPartition("stuck", 0)  # the leader answers NOT_LEADER_OR_FOLLOWER for it
HEALTHY = TopicPartition("healthy", 0)
RECORDS = 3
RTT_S = 0.002
BACKOFF_MS = 1000  # replica.fetch.backoff.ms (the default)
WINDOW_S = 10.0


class FakeLeader:
    """Broker 1 as one fetcher connection sees it; records what it was asked, and when.

    OffsetForLeaderEpoch: ``refused`` partitions get NOT_LEADER_OR_FOLLOWER, the others the end
    of epoch 0 (``ends``, by default ``RECORDS``: the follower's log is the leader's);
    ``on_epoch_request`` runs while such a request is in flight. Fetch: nothing new, after the
    long poll of ``max_wait_ms``, as a caught-up leader answers.
    """

    def __init__(self, refused: set[TopicPartition], ends: dict[TopicPartition, int] | None = None) -> None:
        self.refused = refused
        self.ends = ends or {}
        self.on_epoch_request: Callable[[], None] = lambda: None
        self.epoch_asks: list[tuple[float, TopicPartition]] = []
        self.fetches: list[tuple[float, frozenset[TopicPartition]]] = []
        self.connections = 0

    async def open(self, address: str, **_: Any) -> FakeLeader:
        self.connections += 1
        return self

    async def __aenter__(self) -> FakeLeader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def request(self, api_key: int, version: int, body: dict[str, Any], *, timeout: float) -> Struct:
        asked = wire_request(ApiKey(api_key), version, **body)
        await trio.sleep(RTT_S)
        now = trio.current_time()
        if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            self.on_epoch_request()
            answer = self._epochs(asked, now)
        elif api_key == ApiKey.FETCH:
            self.fetches.append((now, frozenset(_asked_partitions(asked))))
            await trio.sleep(asked.max_wait_ms / 1000)
            answer = _caught_up(asked)
        else:
            raise AssertionError(f"a replica fetcher sent API {api_key}")
        return wire_response(ApiKey(api_key), version, answer)

    def _epochs(self, asked: Struct, now: float) -> dict[str, Any]:
        topics = []
        for topic in asked.topics:
            parts = []
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                self.epoch_asks.append((now, tp))
                if tp in self.refused:
                    parts.append({"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "partition": p.partition})
                else:
                    end = self.ends.get(tp, RECORDS)
                    parts.append({"error_code": 0, "partition": p.partition, "leader_epoch": 0, "end_offset": end})
            topics.append({"topic": topic.topic, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def asks_for(self, tp: TopicPartition) -> list[float]:
        return [at for at, asked in self.epoch_asks if asked == tp]

    def fetches_of(self, tp: TopicPartition) -> list[float]:
        return [at for at, fetched in self.fetches if tp in fetched]


def _asked_partitions(asked: Struct) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p.partition) for t in asked.topics for p in t.partitions]


def _caught_up(asked: Struct) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": 0,
                        "high_watermark": p.fetch_offset,
                        "log_start_offset": 0,
                        "records": None,
                    }
                    for p in t.partitions
                ],
            }
            for t in asked.topics
        ],
    }


def _following(tmp_path: Path, tp: TopicPartition) -> Partition:
    """Broker 2's replica of ``tp``: it led epoch 0 (``RECORDS`` records), now follows broker 1 in epoch 1."""
    log = create_log(tmp_path / tp.dir_name, tp, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)
    partition = Partition(tp, log, policy(), broker_id=FOLLOWER_ID, leader_epoch=-1, clock=lambda: NOW_MS)
    replicas = (FOLLOWER_ID, LEADER_ID)
    partition.apply_state(PartitionState(FOLLOWER_ID, 0, replicas, 1, version=0), replicas)
    partition.append_produced(memoryview(build_batch([(NOW_MS, None, b"v%d" % i) for i in range(RECORDS)])))
    partition.apply_state(PartitionState(LEADER_ID, 1, replicas, 1, version=1), replicas)
    assert partition.role == "follower" and partition.needs_truncation
    return partition


def _replica_manager(partitions: list[Partition], leader: FakeLeader, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Broker 2's ReplicaManager over a stand-in cluster view that knows broker 1 and ``partitions``."""
    monkeypatch.setattr(node.replica_manager, "NodeConnection", leader)
    config = node_config(**{"broker.id": str(FOLLOWER_ID), "replica.fetch.backoff.ms": str(BACKOFF_MS)})
    cluster = SimpleNamespace(
        partitions={p.tp: p for p in partitions},
        brokers={LEADER_ID: BrokerRegistration(LEADER_ID, "127.0.0.1", 9092)},
        reassignment=None,
        topics={},
    )
    return ReplicaManager(config, cluster, zk=None)  # type: ignore[arg-type]


def _run(replicas: ReplicaManager, *steps: tuple[float, Any]) -> None:
    """Run ``replicas`` for WINDOW_S seconds of mock time, calling each ``(at, step)`` at its time."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(replicas.run)
            started = trio.current_time()
            for at, step in steps:
                await trio.sleep_until(started + at)
                step()
            await trio.sleep_until(started + WINDOW_S)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_partition_the_leader_refuses_is_asked_again_only_after_the_backoff_and_the_others_keep_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck, healthy = _following(tmp_path, STUCK), _following(tmp_path, HEALTHY)
    leader = FakeLeader(refused={STUCK})
    replicas = _replica_manager([stuck, healthy], leader, monkeypatch)
    _run(replicas)

    asks = leader.asks_for(STUCK)
    gaps = [later - earlier for earlier, later in itertools.pairwise(asks)]
    assert 2 <= len(asks) <= WINDOW_S / (BACKOFF_MS / 1000) + 1, f"{len(asks)} OffsetForLeaderEpoch requests"
    assert min(gaps) >= BACKOFF_MS / 1000, f"asked again after {min(gaps):.3f} s"
    assert stuck.needs_truncation and stuck.log.log_end_offset == RECORDS  # never cut on an error
    assert replicas.fetch_errors == len(asks)

    # The other partition checked its log once, then fetched all along; the refused one never did.
    assert len(leader.asks_for(HEALTHY)) == 1 and not healthy.needs_truncation
    fetched = leader.fetches_of(HEALTHY)
    assert fetched and fetched[0] < 0.1 and fetched[-1] > WINDOW_S - 1.0, f"fetched {HEALTHY} at {fetched}"
    assert not leader.fetches_of(STUCK)
    assert leader.connections == 1


def test_a_new_leader_epoch_ends_the_backoff_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait belongs to the epoch the error happened in: ZooKeeper's next state starts afresh."""
    stuck = _following(tmp_path, STUCK)
    leader = FakeLeader(refused={STUCK})
    replicas = _replica_manager([stuck], leader, monkeypatch)
    moved_at = 2.5

    def new_epoch() -> None:
        leader.refused.clear()  # the leader has taken epoch 2 as well
        stuck.apply_state(PartitionState(LEADER_ID, 2, (FOLLOWER_ID, LEADER_ID), 1, version=2), stuck.replicas)
        replicas.roles_changed([stuck])

    _run(replicas, (moved_at, new_epoch))

    after = [at for at in leader.asks_for(STUCK) if at >= moved_at]
    assert len(after) == 1 and after[0] - moved_at < 0.1, f"asked after the move at {after[:5]} ({len(after)} times)"
    assert not stuck.needs_truncation and stuck.log.log_end_offset == RECORDS
    assert leader.fetches_of(STUCK), "it fetches once its log is checked"


def test_a_partition_deleted_while_the_leader_is_asked_about_it_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This node's view drops a deleted topic while its OffsetForLeaderEpoch is in flight, and the
    leader (not there yet) answers that the log diverges: the answer is not applied to a log that
    is being deleted, and the partition is not asked about again; the other one goes on."""
    stuck, healthy = _following(tmp_path, STUCK), _following(tmp_path, HEALTHY)
    leader = FakeLeader(refused=set(), ends={STUCK: 1})
    replicas = _replica_manager([stuck, healthy], leader, monkeypatch)

    def deleted_meanwhile() -> None:
        if replicas.cluster.partitions.pop(STUCK, None) is not None:
            replicas.roles_changed([])

    leader.on_epoch_request = deleted_meanwhile
    _run(replicas)

    assert stuck.log.log_end_offset == RECORDS, "the answer about a deleted partition cut its log"
    assert len(leader.asks_for(STUCK)) == 1 and STUCK not in replicas._retry_at
    fetched = leader.fetches_of(HEALTHY)
    assert fetched and fetched[-1] > WINDOW_S - 1.0, f"fetched {HEALTHY} at {fetched[-5:]}"


def test_a_deleted_topic_leaves_the_fetcher_and_its_backoff_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader deleted the topic first (UNKNOWN_TOPIC_OR_PARTITION as NOT_LEADER_OR_FOLLOWER
    alike): once this node's view drops it too, it is never asked about again."""
    stuck, healthy = _following(tmp_path, STUCK), _following(tmp_path, HEALTHY)
    leader = FakeLeader(refused={STUCK})
    replicas = _replica_manager([stuck, healthy], leader, monkeypatch)
    deleted_at = 2.5

    def delete() -> None:
        del replicas.cluster.partitions[STUCK]
        replicas.roles_changed([])

    _run(replicas, (deleted_at, delete))

    late = [at for at in leader.asks_for(STUCK) if at > deleted_at + RTT_S]  # sent after the deletion
    assert leader.asks_for(STUCK) and not late, f"asked about the deleted partition {len(late)} times"
    assert STUCK not in replicas._retry_at  # nothing kept for a partition that is gone
    fetched = leader.fetches_of(HEALTHY)
    assert fetched and fetched[-1] > WINDOW_S - 1.0, f"fetched {HEALTHY} at {fetched[-5:]}"


def test_stop_following_ends_every_fetcher_at_once_and_starts_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Controlled shutdown starts: the stopping node sends nothing more to its leaders, even when
    a refresh after that names it a follower again."""
    stuck, healthy = _following(tmp_path, STUCK), _following(tmp_path, HEALTHY)
    leader = FakeLeader(refused={STUCK})
    replicas = _replica_manager([stuck, healthy], leader, monkeypatch)
    stopped_at = 2.5

    _run(replicas, (stopped_at, replicas.stop_following), (stopped_at + 1, lambda: replicas.roles_changed([])))

    sent = [at for at, _ in leader.epoch_asks] + [at for at, _ in leader.fetches]
    late = [at for at in sent if at > stopped_at + RTT_S]  # sent after the stop
    assert sent and not late, f"{len(late)} requests after stopping at {stopped_at}: {late[:3]}"
    assert not replicas._fetchers and leader.connections == 1
