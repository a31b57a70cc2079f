"""duplicate and inconsistent-offsets: one value, one offset; one offset, one value; per site."""

from __future__ import annotations

import pytest

from tests.chaos.checkers.builder import Builder, brief, log, rec, run

pytestmark = pytest.mark.unit


def test_duplicate_fires_on_a_value_at_two_offsets_of_a_final_read() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.read("east", [*log(["a", "b"]), rec(2, "a")])
    result = run("duplicate", b)
    assert (result.verdict, result.checked) == ("fail", 2)
    assert brief(result) == [("duplicate", 1, [("t", 0, 0, "a"), ("t", 0, 2, "a")])]
    assert result.anomalies[0].description == "1 value at t/0 offset 0 on east is also at t/0 offset 2, in its reads"


def test_duplicate_fires_on_a_value_polled_at_two_offsets_and_groups_a_batch_written_twice() -> None:
    b = Builder()
    b.poll("c-0", log(["a", "b", "c"]))
    b.poll("c-1", log(["a", "b", "c"], start=5))
    result = run("duplicate", b)
    assert brief(result) == [
        (
            "duplicate",
            3,
            [
                ("t", 0, 0, "a"),
                ("t", 0, 5, "a"),
                ("t", 0, 1, "b"),
                ("t", 0, 6, "b"),
                ("t", 0, 2, "c"),
                ("t", 0, 7, "c"),
            ],
        )
    ]
    assert result.anomalies[0].description == (
        "3 values at t/0 offsets 0..2 on the site (not recorded) are also at t/0 offsets 5..7, in its polls"
    )


def test_duplicate_passes_on_the_same_record_read_twice_and_on_one_value_on_two_sites() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.poll("c-0", log(["a", "b"]))
    b.poll("c-1", log(["a", "b"]))  # redelivered to another consumer: same record
    b.read("east", [*log(["a", "b"]), rec(1, "b")])
    b.read("west", log(["b"], start=7), role="mirror")  # another site's offsets: mirror-divergence's business
    result = run("duplicate", b)
    assert (result.verdict, result.checked) == ("pass", 3)


def test_duplicate_is_skipped_without_reads_or_polls() -> None:
    b = Builder()
    b.sends("producer-0", ["a"])
    assert run("duplicate", b).verdict == "skipped"


def test_inconsistent_offsets_fires_on_an_acknowledged_value_and_a_read_disagreeing_at_one_offset() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c"])
    b.poll("c-0", [rec(2, "x")])
    b.read("east", log(["a", "B", "X"]))
    result = run("inconsistent-offsets", b)
    assert (result.verdict, result.checked) == ("fail", 3)
    assert brief(result) == [
        (
            "inconsistent-offsets",
            2,
            [("t", 0, 1, "b"), ("t", 0, 1, "B"), ("t", 0, 2, "c"), ("t", 0, 2, "x"), ("t", 0, 2, "X")],
        )
    ]
    assert result.anomalies[0].description == (
        "2 positions of t/0 on east (offsets 1..2) hold two or more different values: at offset 1, "
        "'b' (send by producer-0, #3), 'B' (read by reader, #9)"
    )


def test_inconsistent_offsets_passes_when_sites_differ_after_a_failover_and_the_old_tail_was_exported() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.poll("c-0", log(["a", "b"]))  # on east, before the promote
    b.promote()
    b.send("producer-0", "c", 1)  # west's offset 1 after the cut
    b.poll("c-0", log(["a", "c"]))  # on west
    b.export([rec(1, "b")])
    b.read("west", log(["a", "c"]))
    b.read("east", log(["a", "c"]), role="mirror")  # reversed: east's tail replaced by west's
    result = run("inconsistent-offsets", b)
    assert (result.verdict, result.checked) == ("pass", 4)


def test_inconsistent_offsets_is_skipped_on_an_empty_history() -> None:
    assert run("inconsistent-offsets", Builder()).verdict == "skipped"


def test_an_entry_that_names_its_site_is_taken_at_its_word() -> None:
    b = Builder()
    b.ack(b.invoke("producer-0", "t", "a"), 0, site="west")
    b.read("east", log(["A"]))  # another site: no conflict with the acknowledgement
    b.read("west", log(["B"]), role="mirror")
    result = run("inconsistent-offsets", b)
    assert brief(result) == [("inconsistent-offsets", 1, [("t", 0, 0, "a"), ("t", 0, 0, "B")])]
    assert "on west" in result.anomalies[0].description
