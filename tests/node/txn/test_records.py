"""The ``__transaction_state`` records: Kafka's bytes, both ways, and where an id lives."""

from __future__ import annotations

import struct

import pytest

from node.groups import partition_for as group_partition_for
from node.txn import TxnLogValue, TxnRecordError, TxnState, decode_key, decode_value, encode_key, encode_value
from node.txn._records import TxnState as States

pytestmark = pytest.mark.unit


def test_the_key_is_version_0_and_the_id() -> None:
    assert encode_key("tx-1") == struct.pack(">hh", 0, 4) + b"tx-1"
    assert decode_key(encode_key("tx-1")) == "tx-1"
    assert decode_key(struct.pack(">hh", 1, 1) + b"x") is None  # a key version this format does not define


def test_an_ongoing_value_has_kafkas_layout_with_partitions_grouped_by_topic() -> None:
    value = TxnLogValue(7, 3, 60_000, TxnState.ONGOING, frozenset({("b", 1), ("a", 2), ("a", 0)}), 1000, 900)
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60_000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1000, 900)
    )  # fmt: skip
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_an_empty_value_writes_null_partitions_and_reads_back() -> None:
    value = TxnLogValue(7, 0, 60_000, TxnState.EMPTY, frozenset(), 1000, -1)
    data = encode_value(value)
    assert data[17:21] == struct.pack(">i", -1)
    assert decode_value(data) == value


def test_states_carry_kafkas_codes_and_names() -> None:
    assert [(s.title, s.code) for s in States] == [
        ("Empty", 0),
        ("Ongoing", 1),
        ("PrepareCommit", 2),
        ("PrepareAbort", 3),
        ("CompleteCommit", 4),
        ("CompleteAbort", 5),
        ("Dead", 6),
        ("PrepareEpochFence", 7),
    ]
    assert TxnState.from_title("Ongoing") is TxnState.ONGOING
    assert TxnState.from_title("ongoing") is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (struct.pack(">h", 1) + bytes(40), "version 1 is not supported"),
        (struct.pack(">hqhib", 0, 7, 3, 60_000, 9) + bytes(20), "state 9"),
        (struct.pack(">hqhib", 0, 7, 3, 60_000, 1) + struct.pack(">i", 1), "needs 2 bytes"),
    ],
)
def test_bad_values_raise_naming_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(TxnRecordError, match=message):
        decode_value(data)


def test_an_id_lives_where_a_group_of_that_name_would() -> None:
    from node.txn import TransactionCoordinator, TxnConfig

    coordinator = TransactionCoordinator(TxnConfig(state_partitions=50), None, None, None, wall_clock_ms=lambda: 0)  # type: ignore[arg-type]
    for name in ("tx", "producer-1", "ÿ-unicode", ""):
        assert coordinator.partition_for(name) == group_partition_for(name, 50)
