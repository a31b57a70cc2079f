"""The ledger and its checker on hand-built histories: each anomaly found and named, allowed cases accepted."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from chaos.errors import LedgerError
from chaos.ledger import Ledger, Position, Read, check, load


def acked(*writes: tuple[str, int, int, bytes]) -> Ledger:
    ledger = Ledger()
    for topic, partition, offset, value in writes:
        ledger.invoke(value)
        ledger.ack(topic, partition, offset, value)
    return ledger


def test_every_ack_read_back_once_is_ok() -> None:
    ledger = acked(("t", 0, 0, b"a"), ("t", 0, 1, b"b"), ("t", 1, 0, b"c"))
    result = check(ledger, [("t", 0, 0, b"a"), ("t", 0, 1, b"b"), ("t", 1, 0, b"c")])
    assert result.ok
    assert (result.acknowledged, result.records_read, result.unacknowledged_read) == (3, 3, 0)
    assert result.summary().startswith("ledger check OK")


def test_lost_write() -> None:
    ledger = acked(("t", 0, 0, b"a"), ("t", 0, 1, b"b"))
    result = check(ledger, [("t", 0, 0, b"a")])
    assert not result.ok
    assert [(a.position, a.value) for a in result.lost] == [(Position("t", 0, 1), b"b")]
    assert not (result.moved or result.duplicates or result.conflicts)
    assert "1 lost" in result.summary() and "b'b' acked at t[0]@1" in result.summary()


def test_moved_write() -> None:
    ledger = acked(("t", 0, 5, b"a"))
    result = check(ledger, [("t", 0, 6, b"a")])
    assert [(a.value, where) for a, where in result.moved] == [(b"a", [Position("t", 0, 6)])]
    assert not (result.lost or result.duplicates or result.conflicts)
    assert "acked at t[0]@5, read at t[0]@6" in result.summary()


def test_duplicate_value() -> None:
    ledger = acked(("t", 0, 0, b"a"))
    result = check(ledger, [("t", 0, 0, b"a"), ("t", 0, 1, b"a")])
    assert result.duplicates == [(b"a", [Position("t", 0, 0), Position("t", 0, 1)])]
    assert not (result.lost or result.moved or result.conflicts)
    assert "1 duplicated" in result.summary()


def test_unacknowledged_value_twice_is_a_duplicate() -> None:
    ledger = Ledger()
    ledger.invoke(b"x")
    result = check(ledger, [("t", 0, 0, b"x"), ("t", 1, 0, b"x")])
    assert [v for v, _ in result.duplicates] == [b"x"]


def test_conflicting_values_at_one_offset() -> None:
    ledger = acked(("t", 0, 0, b"a"))
    result = check(ledger, [("t", 0, 0, b"a"), ("t", 0, 0, b"z")])
    assert result.conflicts == [(Position("t", 0, 0), [b"a", b"z"])]
    assert "t[0]@0 read as b'a', b'z'" in result.summary()


def test_unacknowledged_values_may_appear_once() -> None:
    ledger = acked(("t", 0, 0, b"a"))
    ledger.invoke(b"pending")
    ledger.invoke(b"failed")
    ledger.fail(b"failed", "_MSG_TIMED_OUT: Local: Message timed out")
    read = [("t", 0, 0, b"a"), ("t", 0, 1, b"pending"), ("t", 0, 2, b"failed"), ("t", 0, 3, b"never-recorded")]
    result = check(ledger, read)
    assert result.ok, result.summary()
    assert (result.unacknowledged_read, result.failed_read, result.pending) == (3, 1, 1)


def test_reading_the_same_record_twice_is_not_a_duplicate() -> None:
    ledger = acked(("t", 0, 0, b"a"))
    result = check(ledger, [Read("t", 0, 0, b"a"), Read("t", 0, 0, b"a")])
    assert result.ok and result.records_read == 1


def test_summary_names_only_the_first_few() -> None:
    ledger = acked(*[("t", 0, i, f"v{i}".encode()) for i in range(20)])
    summary = check(ledger, []).summary(examples=3)
    assert "20 lost" in summary and "b'v0'" in summary and "b'v3'" not in summary and "17 more" in summary


def test_counts_and_pending() -> None:
    ledger = Ledger()
    for value in (b"a", b"b", b"c"):
        ledger.invoke(value)
    assert ledger.pending == 3
    ledger.ack("t", 0, 0, b"a")
    ledger.fail(b"b", "boom")
    assert (ledger.acked, ledger.failed, ledger.pending) == (1, 1, 1)
    assert ledger.pending_values() == [b"c"]


def test_thread_safe_recording() -> None:
    ledger = Ledger()

    def write(worker: int) -> None:
        for i in range(500):
            value = f"{worker}-{i}".encode()
            ledger.invoke(value)
            ledger.ack("t", worker, i, value)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (ledger.acked, ledger.pending) == (2000, 0)


def test_persisted_jsonl_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as ledger:
        ledger.invoke(b"a")
        ledger.ack("t", 2, 7, b"a")
        ledger.invoke(b"\x00\xff")
        ledger.fail(b"\x00\xff", "boom")
        ledger.invoke(b"c")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [entry["op"] for entry in lines] == ["invoke", "ok", "invoke", "fail", "invoke"]
    assert lines[1] | {"time": 0} == {"op": "ok", "value": "YQ==", "topic": "t", "partition": 2, "offset": 7, "time": 0}

    loaded = load(path)
    assert [(a.position, a.value) for a in loaded.acks()] == [(Position("t", 2, 7), b"a")]
    assert [(f.value, f.error) for f in loaded.failures()] == [(b"\x00\xff", "boom")]
    assert loaded.pending_values() == [b"c"]


def test_load_skips_a_torn_last_line_and_names_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as ledger:
        ledger.invoke(b"a")
    with path.open("a") as out:
        out.write('{"op": "ok", "val')
    assert Ledger.load(path).pending == 1

    path.write_text('{"op": "invoke", "value": "YQ=="}\n{"op": "teleport", "value": "YQ=="}\n')
    with pytest.raises(LedgerError, match=r"ledger\.jsonl:2: .*teleport"):
        load(path)
    with pytest.raises(LedgerError, match=r"missing\.jsonl"):
        load(tmp_path / "missing.jsonl")
