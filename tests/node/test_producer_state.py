"""Kafka's idempotent producer rules, one by one."""

from __future__ import annotations

import pytest

from node.producer_state import (
    INT32_MAX,
    InvalidProducerEpoch,
    InvalidProducerRecord,
    OutOfOrderSequence,
    ProducerStateManager,
)
from storage.records import BatchHeader


def hdr(pid: int, epoch: int, seq: int, count: int = 1, base_offset: int = 0) -> BatchHeader:
    return BatchHeader(base_offset, 100, -1, 2, 0, 0, count - 1, 0, 0, pid, epoch, seq, count)


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
    m.rebuild(headers)
    assert len(m) == 2  # producer 2 was least recently used
    assert m.entry(2) is None
    dup = m.check(hdr(1, 0, 2, 1))
    assert dup is not None and dup.first_offset == 3
    with pytest.raises(ValueError, match="max_ids=0"):
        ProducerStateManager(0)
