"""lost-write and moved: each acknowledged write is in the primary's final read, at its offset."""

from __future__ import annotations

import pytest

from tests.chaos.checkers.builder import Builder, brief, log, rec, run

pytestmark = pytest.mark.unit


def test_lost_write_fires_on_acknowledged_writes_the_primary_does_not_hold_with_the_fault_near_them() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    start = b.nemesis("start")
    b.sends("producer-0", ["c", "d"], start=2)
    stop = b.nemesis("stop")
    b.wait(30)
    b.read("east", log(["a", "b"]))
    result = run("lost-write", b)
    assert result.verdict == "fail" and result.checked == 4 and result.count == 2
    assert brief(result) == [("lost", 2, [("t", 0, 2, "c"), ("t", 0, 3, "d")])]
    (anomaly,) = result.anomalies
    assert anomaly.checker == "lost-write"
    assert anomaly.description == (
        "2 acknowledged writes to t/0 at offsets 2..3 (by producer-0) are in no final read of east, the primary"
    )
    assert [r["process"] for r in anomaly.records] == ["producer-0", "producer-0"]
    assert [r["index"] for r in anomaly.records] == [6, 8]  # the ok entries
    assert anomaly.near == (start, stop)


def test_lost_write_passes_when_every_acknowledged_write_is_read_back_and_unacknowledged_ones_may_appear() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.unacked("producer-0", "maybe")  # indeterminate: it may be in the log, once
    b.unacked("producer-0", "refused", type="fail")
    b.read("east", [*log(["a", "b", "maybe"]), rec(1, "b")])  # b read twice: one record
    result = run("lost-write", b)
    assert (result.verdict, result.checked, result.anomalies) == ("pass", 2, ())


def test_lost_write_leaves_exported_values_to_rpo_accuracy_and_reads_only_the_primary() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c"])
    b.promote()
    b.export(log(["c"], start=2))
    b.read("west", log(["a", "b"]))
    b.read("east", log(["a", "b", "c"]), role="old-primary")
    assert run("lost-write", b).verdict == "pass"
    b2 = Builder()
    b2.sends("producer-0", ["a", "b", "c"])
    b2.read("west", log(["a", "b"]))
    b2.read("east", log(["a", "b", "c"]), role="mirror")  # a mirror holding it does not save it
    assert brief(run("lost-write", b2)) == [("lost", 1, [("t", 0, 2, "c")])]


def test_lost_write_is_skipped_without_a_final_read_of_the_primary_or_without_acknowledgements() -> None:
    b = Builder()
    b.sends("producer-0", ["a"])
    b.read("east", log(["a"]), final=False)
    b.read("west", log(["a"]), role="mirror")
    assert run("lost-write", b).verdict == "skipped"
    b2 = Builder()
    b2.read("east", log(["a"]))
    assert (run("lost-write", b2).verdict, run("lost-write", b2).checked) == ("skipped", 0)


def test_acknowledgements_below_the_log_start_are_not_examined() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.read("east", log(["b"], start=1), ends={"t/0": [1, 2]})
    result = run("lost-write", b)
    assert (result.verdict, result.checked) == ("pass", 1)


def test_ten_thousand_lost_writes_in_a_row_are_one_anomaly_listing_ten_with_an_exact_count() -> None:
    b = Builder()
    values = [f"v{n}" for n in range(10_010)]
    b.sends("producer-0", values)
    b.read("east", log(values[:5]) + log(values[10_005:], start=10_005))
    result = run("lost-write", b)
    assert result.count == 10_000 and len(result.anomalies) == 1
    (anomaly,) = result.anomalies
    assert anomaly.count == 10_000 and "offsets 5..10004" in anomaly.description
    assert [r["offset"] for r in anomaly.records] == [5, 6, 7, 8, 9, 10_000, 10_001, 10_002, 10_003, 10_004]


def test_lost_runs_are_split_by_a_write_read_back_between_them_and_by_partition() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c", "d"])
    b.sends("producer-1", ["x", "y"], partition=1)
    b.read("east", [rec(1, "b"), rec(0, "x", partition=1)])
    assert brief(run("lost-write", b)) == [
        ("lost", 1, [("t", 0, 0, "a")]),
        ("lost", 2, [("t", 0, 2, "c"), ("t", 0, 3, "d")]),
        ("lost", 1, [("t", 1, 1, "y")]),
    ]


def test_a_fault_more_than_five_seconds_from_the_operations_is_not_near() -> None:
    b = Builder()
    b.nemesis("start", "pause-follower")
    b.nemesis("stop", "pause-follower")
    b.wait(6)
    b.sends("producer-0", ["a"])
    b.wait(4)
    near = b.nemesis("start", "kill-leader")  # within 5 s after the send, and never stopped
    b.wait(60)
    b.read("east", [])
    (anomaly,) = run("lost-write", b).anomalies
    assert anomaly.near == (near,)


def test_moved_fires_on_an_acknowledged_write_read_back_only_at_another_offset() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c", "d"])
    b.read("east", [rec(0, "a"), rec(5, "b"), rec(6, "c"), rec(3, "d")])
    result = run("moved", b)
    assert result.verdict == "fail" and result.checked == 4
    assert brief(result) == [("moved", 2, [("t", 0, 1, "b"), ("t", 0, 5, "b"), ("t", 0, 2, "c"), ("t", 0, 6, "c")])]
    assert result.anomalies[0].description == (
        "2 acknowledged writes to t/0 at offsets 1..2 (by producer-0) are read back from east, the primary, "
        "only at t/0 offsets 5..6"
    )
    assert [r["op"] for r in result.anomalies[0].records] == ["send", "read", "send", "read"]


def test_moved_passes_when_each_write_is_at_its_offset_even_if_also_elsewhere_and_ignores_lost_ones() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c"])
    b.read("east", [rec(0, "a"), rec(1, "b"), rec(4, "b")])  # b duplicated, c lost: other checkers' business
    result = run("moved", b)
    assert (result.verdict, result.checked) == ("pass", 2)
    assert run("moved", Builder()).verdict == "skipped"
