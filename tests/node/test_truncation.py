"""Truncation to a cut (``node.truncation`` and ``Partition.apply_state``), without processes:
the leader's check of a cut, the controller's decision, the ZooKeeper record, and what each
replica does with it. Real logs in a temporary directory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from node.controller import Controller
from node.coordination import BrokerRegistration, MalformedZnode, PartitionState, Truncation
from node.coordination._layout import decode_partition_state, encode_partition_state
from node.errors import BrokerError
from node.handlers.truncate import TruncateServices, handle_truncate_partitions
from node.partition import Partition
from node.protocol import ApiKey, ErrorCode
from node.truncation import Again, LeaderAnswer, Outcome, Record, between_batches, check_cut, decide
from storage import FaultPoints, LogConfig, TopicPartition, create_log
from storage.records import build_batch
from tests.node.handlers.fakes import (
    NOW_MS,
    FakeCluster,
    FakeMetrics,
    FakePartitions,
    node_config,
    policy,
    request,
    topic_state,
)

pytestmark = pytest.mark.unit

TP = TopicPartition("orders", 0)
FENCE = "failed over to west"


def replica(tmp_path: Path, broker_id: int = 1, *, fence: str | None = FENCE, name: str = "r") -> Partition:
    log = create_log(tmp_path / name / "orders-0", TP, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)
    return Partition(TP, log, policy(fence=fence), broker_id=broker_id, leader_epoch=-1, clock=lambda: NOW_MS)


def produce(partition: Partition, batches: int, records: int = 5) -> None:
    for b in range(batches):
        batch = build_batch([(NOW_MS, None, b"%d-%d" % (b, i)) for i in range(records)])
        partition.append_produced(memoryview(batch))


def lead(tmp_path: Path, *, epoch: int = 3, isr: tuple[int, ...] = (1,)) -> Partition:
    leader = replica(tmp_path)
    leader.apply_state(PartitionState(1, epoch, isr, 1, version=0), (1, 2, 3))
    assert leader.is_leader
    return leader


# -- the record in ZooKeeper ---------------------------------------------------------------------------


def test_the_truncation_rides_in_the_partition_state_json() -> None:
    state = PartitionState(2, 8, (2,), 4, version=3, truncation=Truncation(8, 1200))
    data = encode_partition_state(state)
    assert b'"strait_truncation":{"leader_epoch":8,"offset":1200}' in data
    assert decode_partition_state("t", 0, data, 3) == state
    plain = PartitionState(2, 8, (2,), 4, version=3)
    assert b"strait_truncation" not in encode_partition_state(plain)
    assert decode_partition_state("t", 0, encode_partition_state(plain), 3) == plain


@pytest.mark.parametrize(
    "raw", [b"[1]", b'{"leader_epoch":-1,"offset":3}', b'{"leader_epoch":2}', b'{"leader_epoch":2,"offset":"3"}']
)
def test_a_malformed_truncation_names_the_path(raw: bytes) -> None:
    data = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":2,"isr":[1],"strait_truncation":' + raw + b"}"
    with pytest.raises(MalformedZnode, match="/brokers/topics/t/partitions/0/state"):
        decode_partition_state("t", 0, data, 0)


# -- the leader's check --------------------------------------------------------------------------------


def test_check_cut_accepts_batch_boundaries_only(tmp_path: Path) -> None:
    leader = lead(tmp_path)
    produce(leader, 4)  # batches [0..4] [5..9] [10..14] [15..19]
    for offset in (0, 5, 10, 15, 20):
        check_cut(leader, offset)
        assert between_batches(leader, offset)
    for offset in (1, 7, 19):
        assert not between_batches(leader, offset)
        with pytest.raises(BrokerError) as inside:
            check_cut(leader, offset)
        assert inside.value.code == ErrorCode.INVALID_REQUEST
        assert f"offset {offset} is not between two batches (the batch at offsets" in inside.value.message


def test_check_cut_names_the_log_start_and_end(tmp_path: Path) -> None:
    leader = lead(tmp_path)
    produce(leader, 4)
    leader.maybe_advance_hw()
    leader.log.delete_records_before(10)
    for offset in (5, 21):
        with pytest.raises(BrokerError) as out:
            check_cut(leader, offset)
        assert out.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert out.value.message == (
            f"orders-0: cannot truncate to offset {offset}: it is outside the log, which starts at 10 and ends at 20"
        )


def test_check_cut_refuses_a_topic_clients_still_write(tmp_path: Path) -> None:
    leader = replica(tmp_path, fence=None)
    leader.apply_state(PartitionState(1, 0, (1,), 1, version=0), (1,))
    with pytest.raises(BrokerError) as open_topic:
        check_cut(leader, 0)
    assert open_topic.value.code == ErrorCode.POLICY_VIOLATION
    assert "fence topic 'orders' first" in open_topic.value.message
    mirror = replica(tmp_path, fence=None, name="m")
    mirror.policy = policy(mirror_link="west-to-east")
    mirror.apply_state(PartitionState(1, 0, (1,), 1, version=0), (1,))
    check_cut(mirror, 0)  # a mirror takes no client writes: it may be truncated


def test_check_cut_on_a_follower_is_not_leader(tmp_path: Path) -> None:
    follower = replica(tmp_path, broker_id=2)
    follower.apply_state(PartitionState(1, 0, (1, 2), 1, version=0), (1, 2))
    with pytest.raises(BrokerError) as refused:
        check_cut(follower, 0)
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- the controller's decision -------------------------------------------------------------------------

STATE = PartitionState(1, 5, (1, 2, 3), 7, version=11)


def answer(epoch: int = 5, end: int = 20, code: int = 0) -> LeaderAnswer:
    return LeaderAnswer(code, "m" if code else None, epoch, 0, end, end)


def test_decide_records_an_epoch_bump_that_shrinks_the_isr_to_the_leader() -> None:
    decision = decide(STATE, 10, answer(), 9)
    assert isinstance(decision, Record)
    assert decision.state == PartitionState(1, 6, (1,), 9, version=11, truncation=Truncation(6, 10))


def test_decide_is_idempotent_at_the_cut_and_while_a_recorded_truncation_is_pending() -> None:
    assert decide(STATE, 20, answer(end=20), 9) == Outcome(0, None, 5, answer=answer(end=20))
    pending = PartitionState(1, 6, (1,), 9, version=12, truncation=Truncation(6, 10))
    behind = answer(epoch=5, end=20)  # the leader has not taken epoch 6 yet
    assert decide(pending, 10, behind, 9) == Outcome(0, None, 6, answer=behind)
    moving = answer(epoch=-1, end=-1, code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert decide(pending, 10, moving, 9) == Outcome(0, None, 6, answer=moving)
    # Another cut, or new records after the truncation was carried out: a new bump.
    assert isinstance(decide(pending, 5, behind, 9), Again)
    carried_out_then_written = decide(pending, 10, answer(epoch=6, end=14), 9)
    assert isinstance(carried_out_then_written, Record)
    assert carried_out_then_written.state.truncation == Truncation(7, 10)


def test_decide_passes_refusals_on_and_retries_a_moving_leader() -> None:
    refused = answer(code=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert decide(STATE, 30, refused, 9) == Outcome(ErrorCode.OFFSET_OUT_OF_RANGE, "m", answer=refused)
    assert isinstance(decide(STATE, 10, answer(code=ErrorCode.NOT_LEADER_OR_FOLLOWER), 9), Again)
    assert isinstance(decide(STATE, 10, answer(epoch=4), 9), Again)  # the leader is behind the state
    assert isinstance(decide(STATE, 10, answer(epoch=6), 9), Again)  # the controller's view is behind


# -- what a replica does with the record ---------------------------------------------------------------


async def _waiting_producer(partition: Partition, offset: int, answers: list[int]) -> None:
    try:
        await partition.wait_for_hw(offset, trio.current_time() + 5)
    except BrokerError as exc:
        answers.append(exc.code)
    else:
        answers.append(0)


def test_the_leader_truncates_below_its_high_watermark_before_serving_the_new_epoch(tmp_path: Path) -> None:
    leader = lead(tmp_path, isr=(1, 2))
    produce(leader, 4)
    leader.record_follower_fetch(2, 20)
    assert leader.log.high_watermark == 20
    produce(leader, 1)  # 20..24, not replicated yet: an acks=all producer waits for it
    answers: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_waiting_producer, leader, 24, answers)
            await trio.testing.wait_all_tasks_blocked()
            new = PartitionState(1, 4, (1,), 2, version=1, truncation=Truncation(4, 10))
            assert leader.apply_state(new, (1, 2, 3)) == "leader"

    trio.run(main)
    plog = leader.log
    assert (plog.log_end_offset, plog.high_watermark, leader.leader_epoch) == (10, 10, 4)
    assert plog.epochs.entries[-1] == (4, 10)
    assert answers == [ErrorCode.NOT_LEADER_OR_FOLLOWER]  # its record is gone: never acknowledged
    assert leader.followers[2].leo < 0  # what it knew of the follower is void
    # A follower rejoins the ISR only from the cut, in the new epoch.
    assert leader.record_follower_fetch(2, 9) is False
    assert leader.record_follower_fetch(2, 10) is True


def test_a_follower_that_was_down_truncates_when_it_learns_of_the_epoch(tmp_path: Path) -> None:
    old_leader = lead(tmp_path, isr=(1,))
    produce(old_leader, 4)
    # The follower's copy, written by the old leader at epoch 3, reaches offset 20.
    follower = replica(tmp_path, broker_id=2, name="f")
    follower.append_replica(old_leader.log.read_bytes(0, 1 << 20))
    follower.log.high_watermark = 20
    # It comes back to a state two elections after the truncation.
    state = PartitionState(1, 6, (1,), 2, version=5, truncation=Truncation(4, 10))
    assert follower.apply_state(state, (1, 2)) == "follower"
    assert (follower.log.log_end_offset, follower.log.high_watermark) == (10, 10)
    assert follower.truncation == Truncation(4, 10) and follower.needs_truncation


def test_a_log_with_records_of_the_truncation_epoch_is_left_alone(tmp_path: Path) -> None:
    leader = lead(tmp_path)
    produce(leader, 4)
    leader.apply_state(PartitionState(1, 4, (1,), 2, version=1, truncation=Truncation(4, 10)), (1,))
    produce(leader, 2)  # new records at the cut, in epoch 4: the partition's history now
    assert leader.log.log_end_offset == 20
    # A later election keeps the record in the state; it must not cut these records again.
    leader.apply_state(PartitionState(1, 5, (1,), 2, version=2, truncation=Truncation(4, 10)), (1,))
    assert leader.log.log_end_offset == 20 and leader.truncation == Truncation(4, 10)


def test_isr_writes_keep_the_truncation_record(tmp_path: Path) -> None:
    leader = lead(tmp_path)
    leader.apply_state(PartitionState(1, 4, (1,), 2, version=1, truncation=Truncation(4, 0)), (1, 2))
    assert leader.truncation == Truncation(4, 0)
    # Same epoch, newer version (an ISR change the leader wrote): the record is still there.
    leader.apply_state(PartitionState(1, 4, (1, 2), 2, version=2, truncation=Truncation(4, 0)), (1, 2))
    assert leader.isr == (1, 2) and leader.truncation == Truncation(4, 0)


# -- the handler ----------------------------------------------------------------------------------------


class FakeController:
    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.asked: list[tuple[dict[tuple[str, int], int], float]] = []

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        raise AssertionError("not used")

    async def truncate_partitions(self, cuts: dict[tuple[str, int], int], timeout: float) -> dict[Any, Outcome]:
        self.asked.append((cuts, timeout))
        return {key: Outcome(0, None, 9, truncated=True, answer=answer(end=30)) for key in cuts}


def truncate_body(cuts: list[tuple[str, int, int]], *, validate_only: bool, timeout_ms: int = 5000) -> dict[str, Any]:
    topics: dict[str, list[dict[str, int]]] = {}
    for topic, index, offset in cuts:
        topics.setdefault(topic, []).append({"index": index, "offset": offset})
    return {
        "timeout_ms": timeout_ms,
        "validate_only": validate_only,
        "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
    }


def entries(body: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(t["name"], p["index"]): p for t in body["topics"] for p in t["partitions"]}


def test_the_leader_check_answers_offsets_and_rereads_zookeeper_before_refusing(tmp_path: Path) -> None:
    leader = lead(tmp_path)
    produce(leader, 2)
    cluster = FakeCluster()
    services = TruncateServices(FakePartitions(leader), cluster, FakeController(), FakeMetrics())
    body = truncate_body([("orders", 0, 5), ("orders", 1, 0)], validate_only=True)
    got = entries(trio.run(handle_truncate_partitions, services, request(ApiKey.TRUNCATE_PARTITIONS, 0, body)))
    ok, unknown = got["orders", 0], got["orders", 1]
    assert (ok["error_code"], ok["leader_epoch"], ok["log_start_offset"], ok["log_end_offset"]) == (0, 3, 0, 10)
    assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.calls == []
    leader.policy = policy()  # not fenced in this node's view
    got = entries(trio.run(handle_truncate_partitions, services, request(ApiKey.TRUNCATE_PARTITIONS, 0, body)))
    assert got["orders", 0]["error_code"] == ErrorCode.POLICY_VIOLATION
    assert got["orders", 0]["log_end_offset"] == 10
    assert cluster.calls == [("refresh", None)]


def test_the_controller_path_needs_the_controller_and_refuses_a_partition_named_twice(tmp_path: Path) -> None:
    metrics = FakeMetrics()
    body = truncate_body([("orders", 0, 5), ("orders", 0, 6), ("orders", 1, 7)], validate_only=False, timeout_ms=900)
    inactive = TruncateServices(FakePartitions(), FakeCluster(), FakeController(active=False), metrics)
    got = entries(trio.run(handle_truncate_partitions, inactive, request(ApiKey.TRUNCATE_PARTITIONS, 0, body)))
    assert {e["error_code"] for e in got.values()} == {ErrorCode.NOT_CONTROLLER}
    controller = FakeController()
    services = TruncateServices(FakePartitions(), FakeCluster(), controller, metrics)
    got = entries(trio.run(handle_truncate_partitions, services, request(ApiKey.TRUNCATE_PARTITIONS, 0, body)))
    assert controller.asked == [({("orders", 1): 7}, 0.9)]
    twice, once = got["orders", 0], got["orders", 1]
    assert (twice["error_code"], twice["error_message"]) == (ErrorCode.INVALID_REQUEST, "orders-0 is named twice")
    assert (once["error_code"], once["leader_epoch"], once["truncated"], once["log_end_offset"]) == (0, 9, True, 30)


# -- the record outlives elections ---------------------------------------------------------------------


def test_elections_keep_the_truncation_record(tmp_path: Path) -> None:
    """The leader that took the truncation's epoch dies before carrying it out: the partition goes
    offline (its ISR is that leader alone) and the record stays; when it returns and leads again,
    the record is still in the state it is elected with."""
    recorded = PartitionState(1, 6, (1,), 2, version=4, truncation=Truncation(6, 40))
    topic = topic_state("orders")
    topic.assignment = {0: (1, 2, 3)}
    topic.states = {0: recorded}
    controller = Controller(node_config(), SimpleNamespace(), None)  # type: ignore[arg-type]
    reg = {b: BrokerRegistration(b, "127.0.0.1", 9090 + b) for b in (1, 2, 3)}
    without_1 = SimpleNamespace(brokers={2: reg[2], 3: reg[3]}, offline_replicas={})
    offline = controller._decide(without_1, topic, 0, (1, 2, 3), 3)  # type: ignore[arg-type]
    assert offline == PartitionState(-1, 7, (1,), 3, version=4, truncation=Truncation(6, 40))
    topic.states = {0: replace(offline, version=5)}
    back = SimpleNamespace(brokers=reg, offline_replicas={})
    again = controller._decide(back, topic, 0, (1, 2, 3), 3)  # type: ignore[arg-type]
    assert again == PartitionState(1, 8, (1,), 3, version=5, truncation=Truncation(6, 40))
    # The returning leader's log predates epoch 6: it truncates before it serves epoch 8.
    leader = lead(tmp_path, epoch=5)
    produce(leader, 10)
    assert leader.apply_state(again, (1, 2, 3)) == "leader"
    assert (leader.log.log_end_offset, leader.log.high_watermark, leader.leader_epoch) == (40, 40, 8)
