"""exactly-once: every input record moved once, nothing aborted visible, the group's offsets where the output is.

Each test plants one defect in the history of a clean run (an aborted record made visible, a
duplicate, a gap, offsets that disagree with the output) and checks the checker names it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checkers.builder import Builder, brief, log, rec, run

pytestmark = pytest.mark.unit

INPUT = ["a", "b", "c", "d", "e", "f"]


def out(offset: int, value: str, transaction: str, partition: int = 0) -> dict[str, Any]:
    """An output record: the input ``value`` moved by ``transaction`` (``"txn-0/3"``)."""
    return rec(offset, f"{value}|{transaction}", topic="o", partition=partition)


def clean() -> tuple[Builder, list[dict[str, Any]]]:
    """Six input records moved by three committed transactions, one aborted one in between."""
    b = Builder()
    b.sends("producer-0", INPUT)
    records = log(INPUT)
    b.txn("txn-0", 1, records[0:2])
    b.txn("txn-0", 2, records[2:4], "fail", abort=True, error="aborted on purpose")
    b.txn("txn-0", 3, records[2:4])
    b.txn("txn-0", 4, records[4:6])
    b.read("east", records, ends={"t/0": [0, 6]})
    # As read_committed reads them: the aborted transaction's records (2, 3) and the markers are skipped.
    output = [
        out(0, "a", "txn-0/1"),
        out(1, "b", "txn-0/1"),
        out(5, "c", "txn-0/3"),
        out(6, "d", "txn-0/3"),
        out(8, "e", "txn-0/4"),
        out(9, "f", "txn-0/4"),
    ]
    return b, output


def test_a_clean_run_passes_and_examines_every_output_and_input_record() -> None:
    b, output = clean()
    b.txn_read(output, {"t/0": 6})
    result = run("exactly-once", b)
    assert (result.verdict, result.checked, result.anomalies) == ("pass", 12, ())


def test_it_is_skipped_without_a_txn_read() -> None:
    b, _ = clean()
    assert run("exactly-once", b).verdict == "skipped"


def test_a_planted_aborted_record_made_visible_is_an_aborted_read_and_a_duplicate() -> None:
    b, output = clean()
    b.txn_read([*output, out(2, "c", "txn-0/2")], {"t/0": 6}, isolation="read_uncommitted")
    result = run("exactly-once", b)
    assert result.verdict == "fail"
    assert brief(result) == [
        ("aborted-read", 1, [("o", 0, 2, "c|txn-0/2")]),
        ("txn-duplicate", 1, [("o", 0, 5, "c|txn-0/3"), ("o", 0, 2, "c|txn-0/2")]),
    ]
    assert result.anomalies[0].description == (
        "1 output record of txn-0/2, a transaction that was aborted (aborted on purpose), "
        "is visible to a read_uncommitted reader of o"
    )


def test_a_planted_duplicate_is_found_whether_one_transaction_wrote_it_twice_or_two_did() -> None:
    b, output = clean()
    b.txn("txn-0", 5, log(["e"], start=4), "info", error="_TIMED_OUT: commit_transaction")
    b.txn_read([*output, out(10, "a", "txn-0/1"), out(11, "e", "txn-0/5")], {"t/0": 6})
    result = run("exactly-once", b)
    assert brief(result) == [
        ("txn-duplicate", 1, [("o", 0, 0, "a|txn-0/1"), ("o", 0, 10, "a|txn-0/1")]),
        ("txn-duplicate", 1, [("o", 0, 8, "e|txn-0/4"), ("o", 0, 11, "e|txn-0/5")]),
    ]
    assert "by transactions txn-0/4, txn-0/5" in result.anomalies[1].description


def test_a_planted_gap_is_a_gap_below_the_committed_offset_and_a_lost_committed_record() -> None:
    b, output = clean()
    b.txn_read([o for o in output if o["value"] != "d|txn-0/3"], {"t/0": 6})
    result = run("exactly-once", b)
    assert brief(result) == [
        ("txn-lost", 1, [("t", 0, 3, "d")]),
        ("txn-gap", 1, [("t", 0, 3, "d")]),
    ]
    assert result.anomalies[0].description == (
        "1 output record of txn-0/3, a committed transaction, is not visible in o (1 of its 2 are)"
    )
    assert result.anomalies[1].description == (
        "1 input record of t/0 at offset 3, below the group's committed offset 6, is in no visible output record"
    )


def test_committed_offsets_behind_the_output_or_short_of_the_end_or_past_it_are_a_mismatch() -> None:
    b, output = clean()
    b.txn_read(output, {"t/0": 4})  # e and f are in the output: a restart would move them again
    assert brief(run("exactly-once", b)) == [("offsets-mismatch", 2, [("t", 0, 4, "e"), ("t", 0, 5, "f")])]

    b, output = clean()
    b.txn_read(output, {"t/0": 7})
    result = run("exactly-once", b)
    assert [(a.name, a.count) for a in result.anomalies] == [("offsets-mismatch", 1)]
    assert result.anomalies[0].description == "the group tg's committed offset 7 of t/0 is past the partition's end 6"

    b = Builder()
    b.sends("producer-0", INPUT)
    b.txn("txn-0", 1, log(INPUT)[0:4])
    b.read("east", log(INPUT), ends={"t/0": [0, 6]})
    b.txn_read([out(n, v, "txn-0/1") for n, v in enumerate("abcd")], {"t/0": 4})
    result = run("exactly-once", b)
    assert brief(result) == [("offsets-mismatch", 2, [("t", 0, 4, "e"), ("t", 0, 5, "f")])]
    assert result.anomalies[0].description.endswith("is below the partition's end 6: 2 input records never moved")


def test_a_transaction_of_unknown_outcome_may_be_visible_whole_or_not_at_all_but_not_in_part() -> None:
    def history(visible: list[str]) -> Builder:
        b = Builder()
        b.sends("producer-0", INPUT[:4])
        records = log(INPUT[:4])
        b.txn("txn-0", 1, records[0:2])
        b.txn("txn-0", 2, records[2:4], "info", error="KafkaException: commit_transaction: _FATAL")
        b.read("east", records, ends={"t/0": [0, 4]})
        moved = [out(0, "a", "txn-0/1"), out(1, "b", "txn-0/1")]
        moved += [out(3 + n, v, "txn-0/2") for n, v in enumerate(visible)]
        if not visible:  # it did not commit: the group's offsets sent the loop back to c and d
            b.txn("txn-0", 3, records[2:4])
            moved += [out(6, "c", "txn-0/3"), out(7, "d", "txn-0/3")]
        b.txn_read(moved, {"t/0": 4})
        return b

    assert run("exactly-once", history(["c", "d"])).verdict == "pass"
    assert run("exactly-once", history([])).verdict == "pass"
    result = run("exactly-once", history(["c"]))
    assert brief(result) == [("txn-lost", 1, [("t", 0, 3, "d")]), ("txn-gap", 1, [("t", 0, 3, "d")])]
    assert "a transaction of unknown outcome, visible in part" in result.anomalies[0].description


def test_an_output_record_no_transaction_wrote_is_a_phantom() -> None:
    b, output = clean()
    b.txn_read([*output, rec(10, "stray", topic="o"), out(11, "a", "txn-0/4")], {"t/0": 6})
    assert brief(run("exactly-once", b)) == [
        ("phantom-output", 2, [("o", 0, 10, "stray"), ("o", 0, 11, "a|txn-0/4")]),
    ]


def test_an_aborted_read_names_the_fault_around_its_transaction() -> None:
    b = Builder()
    b.sends("producer-0", ["a"])
    b.nemesis("start", "kill-txn-coordinator", "east node 2")
    b.txn("txn-0", 1, log(["a"]), "fail", error="aborted after: _FENCED")
    b.nemesis("stop", "kill-txn-coordinator", "east node 2")
    b.wait(60)
    b.txn("txn-0", 2, log(["a"]))
    b.read("east", log(["a"]), ends={"t/0": [0, 1]})
    b.txn_read([out(0, "a", "txn-0/1"), out(2, "a", "txn-0/2")], {"t/0": 1})
    result = run("exactly-once", b)
    aborted = result.anomalies[0]
    assert aborted.name == "aborted-read"
    assert [entry["nemesis"] for entry in aborted.near] == ["kill-txn-coordinator", "kill-txn-coordinator"]
