"""nonmonotonic-send and nonmonotonic-poll: one client's offsets of one partition only go forward."""

from __future__ import annotations

import pytest

from tests.chaos.checkers.builder import Builder, brief, log, rec, run

pytestmark = pytest.mark.unit


def test_nonmonotonic_send_fires_when_a_later_invoke_gets_a_lower_offset() -> None:
    b = Builder()
    b.send("producer-0", "a", 0)
    first, second = b.invoke("producer-0", "t", "b"), b.invoke("producer-0", "t", "c")
    b.ack(second, 1)  # retried out of order by a non-idempotent producer
    b.ack(first, 2)
    b.send("producer-0", "d", 3)
    result = run("nonmonotonic-send", b)
    assert (result.verdict, result.checked) == ("fail", 4)
    assert brief(result) == [("nonmonotonic-send", 1, [("t", 0, 2, "b"), ("t", 0, 1, "c")])]
    assert result.anomalies[0].description == (
        "producer-0's send of 'c' to t/0 on the site (not recorded) was acknowledged at offset 1 (#4), "
        "not after its previous send's offset 2 ('b', #5)"
    )


def test_nonmonotonic_send_passes_for_interleaved_producers_partitions_and_a_failover_restarting_offsets() -> None:
    b = Builder()
    b.send("producer-0", "a", 0)
    b.send("producer-1", "b", 1)
    b.send("producer-0", "c", 0, partition=1)
    b.send("producer-0", "d", 2)
    b.promote()
    b.send("producer-0", "e", 1)  # west's log restarts at the cut, below east's acknowledged offsets
    b.read("west", [rec(0, "a"), rec(1, "e"), rec(0, "c", partition=1)])
    result = run("nonmonotonic-send", b)
    assert (result.verdict, result.checked) == ("pass", 5)
    assert run("nonmonotonic-send", Builder()).verdict == "skipped"


def test_nonmonotonic_poll_fires_on_a_consumer_going_back_or_polling_an_offset_again_in_one_assignment() -> None:
    b = Builder()
    b.assign("c-0", [("t", 0)])
    b.poll("c-0", log(["a", "b", "c"]))
    b.poll("c-0", log(["b"], start=1))
    b.poll("c-0", log(["d"], start=3))
    b.poll("c-0", log(["d"], start=3))
    result = run("nonmonotonic-poll", b)
    assert (result.verdict, result.checked) == ("fail", 6)
    assert brief(result) == [
        ("nonmonotonic-poll", 1, [("t", 0, 2, "c"), ("t", 0, 1, "b")]),
        ("nonmonotonic-poll", 1, [("t", 0, 3, "d"), ("t", 0, 3, "d")]),
    ]
    assert result.anomalies[0].description == (
        "c-0 polled t/0 on the site (not recorded) at offset 1 (#4) after offset 2 (#2), "
        "with no assignment or reset between"
    )


def test_nonmonotonic_poll_passes_when_a_new_assignment_or_a_reset_rewinds_and_for_other_consumers() -> None:
    b = Builder()
    b.assign("c-0", [("t", 0)])
    b.poll("c-0", log(["a", "b", "c"]))
    b.assign("c-0", [("t", 0)])  # a rebalance: resumes at the committed offset
    b.poll("c-0", log(["b", "c"], start=1))
    b.reset("admin", 0)
    b.poll("c-0", log(["a"]))
    b.poll("c-1", log(["a", "b"]))
    b.poll("c-0", [rec(0, "x", partition=1), *log(["b"], start=1)])
    result = run("nonmonotonic-poll", b)
    assert (result.verdict, result.checked) == ("pass", 10)
    assert run("nonmonotonic-poll", Builder()).verdict == "skipped"
