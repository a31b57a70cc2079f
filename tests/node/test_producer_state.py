"""Kafka's idempotent producer rules, one by one, and the transactions of KIP-98."""

from __future__ import annotations

import pytest

from node.producer_state import (
    INT32_MAX,
    CompletedTxn,
    InvalidProducerEpoch,
    InvalidProducerRecord,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerStateManager,
    TransactionCoordinatorFenced,
)
from storage.records import BatchHeader, ControlMarker

TXN, CONTROL = 0x10, 0x20
COMMIT, ABORT = ControlMarker(True, 0), ControlMarker(False, 0)


def hdr(pid: int, epoch: int, seq: int, count: int = 1, base_offset: int = 0, *, attributes: int = 0) -> BatchHeader:
    return BatchHeader(base_offset, 100, -1, 2, 0, attributes, count - 1, 0, 0, pid, epoch, seq, count)


def marker_hdr(pid: int, epoch: int, offset: int) -> BatchHeader:
    return hdr(pid, epoch, -1, 1, offset, attributes=TXN | CONTROL)


def appended(m: ProducerStateManager, h: BatchHeader, offset: int) -> None:
    assert m.check(h) is None
    m.update(h, offset)


def test_non_idempotent_batches_are_never_checked() -> None:
    m = ProducerStateManager()
    assert m.check(hdr(-1, -1, -1)) is None
    m.update(hdr(-1, -1, -1), 0)
    assert len(m) == 0


def test_unknown_producer_is_accepted_at_any_sequence() -> None:
    m = ProducerStateManager()
    assert m.check(hdr(7, 0, 42)) is None


def test_negative_sequence_with_producer_id_is_invalid() -> None:
    with pytest.raises(InvalidProducerRecord) as info:
        ProducerStateManager().check(hdr(7, 0, -1))
    assert info.value.error_code == 87


def test_in_order_batches_and_a_gap() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 0, 0, 3), 0)
    appended(m, hdr(7, 0, 3, 2), 3)
    with pytest.raises(OutOfOrderSequence) as info:
        m.check(hdr(7, 0, 6))
    assert info.value.error_code == 45
    assert "expected 5" in str(info.value)


def test_duplicate_of_any_of_last_five_returns_its_offsets() -> None:
    m = ProducerStateManager()
    for i in range(7):
        appended(m, hdr(7, 0, i * 2, 2), 100 + i * 2)
    # The last five batches (i = 2..6) are remembered.
    for i in range(2, 7):
        dup = m.check(hdr(7, 0, i * 2, 2))
        assert dup is not None and dup.first_offset == 100 + i * 2 and dup.last_offset == 101 + i * 2
    # Older ones are out of order now, as in Kafka.
    with pytest.raises(OutOfOrderSequence):
        m.check(hdr(7, 0, 0, 2))


def test_stale_epoch_is_fenced_and_new_epoch_starts_at_zero() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 3, 0), 0)
    with pytest.raises(InvalidProducerEpoch) as info:
        m.check(hdr(7, 2, 1))
    assert info.value.error_code == 47
    with pytest.raises(OutOfOrderSequence):
        m.check(hdr(7, 4, 5))
    appended(m, hdr(7, 4, 0), 1)
    entry = m.entry(7)
    assert entry is not None and entry.epoch == 4 and entry.last_seq == 0


def test_sequence_wraps_at_int32_max() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 0, INT32_MAX), 0)
    appended(m, hdr(7, 0, 0, 5), 1)
    with pytest.raises(OutOfOrderSequence):
        m.check(hdr(7, 0, 6))


def test_rebuild_from_log_headers_and_bound_on_ids() -> None:
    m = ProducerStateManager(max_ids=2)
    headers = [hdr(1, 0, 0, 2, 0), hdr(2, 0, 0, 1, 2), hdr(1, 0, 2, 1, 3), hdr(3, 0, 0, 1, 4)]
    m.rebuild((h, None) for h in headers)
    assert len(m) == 2  # producer 2 was least recently used
    assert m.entry(2) is None
    dup = m.check(hdr(1, 0, 2, 1))
    assert dup is not None and dup.first_offset == 3
    with pytest.raises(ValueError, match="max_ids=0"):
        ProducerStateManager(0)


# -- transactions ------------------------------------------------------------------------------


def test_a_transaction_opens_at_its_first_batch_and_a_marker_ends_it() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 0, 0, 2, 10, attributes=TXN), 10)
    appended(m, hdr(7, 0, 2, 1, 15, attributes=TXN), 15)
    assert m.ongoing == {7: 10}
    assert m.first_unstable_offset(high_watermark=20) == 10
    m.check_marker(7, 0, coordinator_epoch=0)
    done = m.complete(7, 0, ABORT, 16)
    assert done == CompletedTxn(7, 10, 16, aborted=True)
    assert m.ongoing == {}
    assert m.last_stable_offset_after(done) == 17
    # The marker is not replicated yet: the LSO stays at the transaction's start until it is.
    assert m.first_unstable_offset(high_watermark=16) == 10
    assert m.first_unstable_offset(high_watermark=17) is None
    assert m.complete(7, 0, COMMIT, 17) is None  # a retried marker ends nothing


def test_a_non_transactional_batch_inside_an_open_transaction_is_refused() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 0, 0, 1, 0, attributes=TXN), 0)
    with pytest.raises(InvalidTxnState) as info:
        m.check(hdr(7, 0, 1))
    assert info.value.error_code == 48
    m.complete(7, 0, COMMIT, 1)
    assert m.check(hdr(7, 0, 1)) is None


def test_a_markers_epoch_fences_the_older_epoch_and_the_new_one_starts_at_zero() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 3, 0, 2, 0, attributes=TXN), 0)
    with pytest.raises(InvalidProducerEpoch):
        m.check_marker(7, 2, coordinator_epoch=0)
    m.check_marker(7, 4, coordinator_epoch=0)
    m.complete(7, 4, ABORT, 2)  # the coordinator fenced a zombie: abort with a bumped epoch
    with pytest.raises(InvalidProducerEpoch) as info:
        m.check(hdr(7, 3, 2, attributes=TXN))
    assert info.value.error_code == 47
    with pytest.raises(OutOfOrderSequence):
        m.check(hdr(7, 4, 2, attributes=TXN))
    appended(m, hdr(7, 4, 0, 1, 3, attributes=TXN), 3)
    assert m.ongoing == {7: 3}


def test_a_marker_from_an_older_coordinator_epoch_is_fenced() -> None:
    m = ProducerStateManager()
    appended(m, hdr(7, 0, 0, 1, 0, attributes=TXN), 0)
    m.complete(7, 0, ControlMarker(True, 5), 1)
    with pytest.raises(TransactionCoordinatorFenced) as info:
        m.check_marker(7, 0, coordinator_epoch=4)
    assert info.value.error_code == 52
    m.check_marker(7, 0, coordinator_epoch=5)
    m.check_marker(8, 0, coordinator_epoch=0)  # another producer: its own coordinator epoch


def test_the_first_unstable_offset_is_the_earliest_of_open_and_unreplicated_transactions() -> None:
    m = ProducerStateManager()
    appended(m, hdr(1, 0, 0, 1, 0, attributes=TXN), 0)
    appended(m, hdr(2, 0, 0, 1, 1, attributes=TXN), 1)
    done = m.complete(1, 0, ABORT, 2)
    assert done is not None and m.last_stable_offset_after(done) == 1  # producer 2's is still open
    assert m.first_unstable_offset(high_watermark=2) == 0
    assert m.first_unstable_offset(high_watermark=3) == 1
    m.complete(2, 0, COMMIT, 3)
    assert m.first_unstable_offset(high_watermark=3) == 1
    assert m.first_unstable_offset(high_watermark=4) is None


def test_a_producer_with_an_open_transaction_is_never_evicted() -> None:
    m = ProducerStateManager(max_ids=1)
    appended(m, hdr(1, 0, 0, 1, 0, attributes=TXN), 0)
    appended(m, hdr(2, 0, 0, 1, 1), 1)
    appended(m, hdr(3, 0, 0, 1, 2), 2)
    assert m.entry(1) is not None and m.entry(2) is None
    assert m.ongoing == {1: 0}


def test_rebuild_replays_transactions_markers_and_their_epochs() -> None:
    log = [
        (hdr(1, 0, 0, 2, 0, attributes=TXN), None),
        (hdr(2, 0, 0, 1, 2, attributes=TXN), None),
        (marker_hdr(1, 1, 3), ControlMarker(False, 6)),  # producer 1 aborted with a bumped epoch
        (hdr(3, 0, 0, 1, 4, attributes=TXN), None),
        (marker_hdr(3, 0, 5), ControlMarker(True, 2)),
        (marker_hdr(9, 0, 6), None),  # a control batch that is no marker
    ]
    m = ProducerStateManager()
    m.rebuild(log, high_watermark=5)
    assert m.ongoing == {2: 2}
    entry = m.entry(1)
    assert entry is not None and (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset) == (1, 6, -1)
    with pytest.raises(InvalidProducerEpoch):
        m.check(hdr(1, 0, 2, attributes=TXN))
    with pytest.raises(TransactionCoordinatorFenced):
        m.check_marker(1, 1, coordinator_epoch=5)
    assert m.entry(9) is None
    # Producer 1's marker is below the high watermark, producer 3's (offset 5) is not; 2's is open.
    assert m.first_unstable_offset(high_watermark=5) == 2
    m.complete(2, 0, COMMIT, 7)
    assert m.first_unstable_offset(high_watermark=6) == 2
    assert m.first_unstable_offset(high_watermark=8) is None
