"""An idempotent producer's retry across a leader change, as the chaos ``kills`` run that found a
duplicate saw it (chaos-kills/2, offsets 1068..1069 again at 1070..1071).

The old leader appended a batch and was killed before it answered; the follower that had fetched
the batch became leader. The retry under the same producer epoch is answered from the first
append (its offset, nothing appended), whether the new leader's producer state came from the
fetched batches or from its log on load. The same records sent again under a *new* producer
epoch at sequence 0 (what librdkafka does after it bumps its epoch locally: it re-sequences
every unacknowledged message, also those a dead leader may have written) are new records by
Kafka's rules and are appended: that second copy is the duplicate the chaos run found, and the
broker cannot and must not refuse it. Real logs in a temporary directory, no processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from node.coordination import PartitionState
from node.errors import BrokerError
from node.partition import Partition
from node.protocol import ErrorCode
from storage import FaultPoints, LogConfig, TopicPartition, create_log, load_log
from storage.records import build_batch
from tests.node.handlers.fakes import NOW_MS, policy

TP = TopicPartition("chaos-kills", 2)
OLD_LEADER, NEW_LEADER = 3, 1
REPLICAS = (OLD_LEADER, NEW_LEADER)
PID = 1097142180218142720


def _replica(path: Path, broker_id: int, *, load: bool = False) -> Partition:
    if load:  # after a kill -9: an unclean stop, recovered
        log, _report = load_log(path, TP, LogConfig(), clean_shutdown=False, faults=FaultPoints(), clock=lambda: NOW_MS)
    else:
        log = create_log(path, TP, LogConfig(), faults=FaultPoints(), clock=lambda: NOW_MS)
    return Partition(TP, log, policy(), broker_id=broker_id, leader_epoch=-1, clock=lambda: NOW_MS)


def _batch(values: list[bytes], *, epoch: int, seq: int) -> memoryview:
    records = [(NOW_MS, None, v) for v in values]
    return memoryview(build_batch(records, producer_id=PID, producer_epoch=epoch, base_sequence=seq))


@pytest.mark.parametrize("state_from", ["fetched batches", "log on load"])
def test_a_retry_at_the_new_leader_is_answered_from_the_first_append_and_a_new_epoch_is_new(
    tmp_path: Path, state_from: str
) -> None:
    old = _replica(tmp_path / "old" / "chaos-kills-2", OLD_LEADER)
    old.apply_state(PartitionState(OLD_LEADER, 1, REPLICAS, 1, version=0), REPLICAS)
    assert old.append_produced(_batch([b"p-3206", b"p-3207"], epoch=0, seq=0)).base_offset == 0
    assert old.append_produced(_batch([b"p-3223", b"p-3224"], epoch=0, seq=2)).base_offset == 2

    new_dir = tmp_path / "new" / "chaos-kills-2"
    new = _replica(new_dir, NEW_LEADER)
    new.apply_state(PartitionState(OLD_LEADER, 1, REPLICAS, 1, version=0), REPLICAS)
    assert new.append_replica(old.log.read_bytes(0, 1 << 20)) == 2
    if state_from == "log on load":
        new.log.close()
        new = _replica(new_dir, NEW_LEADER, load=True)
    # The old leader dies unanswered; the follower leads in epoch 2.
    new.apply_state(PartitionState(NEW_LEADER, 2, (NEW_LEADER,), 1, version=1), REPLICAS)
    assert new.is_leader

    retry = new.append_produced(_batch([b"p-3223", b"p-3224"], epoch=0, seq=2))
    assert (retry.duplicate, retry.base_offset, retry.last_offset) == (True, 2, 3)
    assert new.log.log_end_offset == 4

    # After a local epoch bump the client sends the same records as epoch 1, sequence 0: Kafka
    # keeps no sequences across epochs, so they are new records (the second copy in the chaos run).
    bumped = new.append_produced(_batch([b"p-3223", b"p-3224"], epoch=1, seq=0))
    assert (bumped.duplicate, bumped.base_offset) == (False, 4)
    # The old epoch is fenced from now on, and the new one continues from its own sequence.
    with pytest.raises(BrokerError) as fenced:
        new.append_produced(_batch([b"p-3225"], epoch=0, seq=4))
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(BrokerError) as gap:
        new.append_produced(_batch([b"p-3226"], epoch=1, seq=3))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert new.append_produced(_batch([b"p-3225"], epoch=1, seq=2)).base_offset == 6
