"""mirror-divergence and rpo-accuracy: a mirror holds the primary's records; a failover reports its loss exactly."""

from __future__ import annotations

import pytest

from tests.chaos.checkers.builder import Builder, brief, log, rec, run

pytestmark = pytest.mark.unit


def test_mirror_divergence_fires_on_another_value_a_hole_and_a_record_the_primary_lacks() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c", "d"])
    b.read("east", log(["a", "b", "c", "d"]), ends={"t/0": [0, 4]})
    b.read("west", [rec(0, "a"), rec(1, "X"), rec(3, "d"), rec(4, "Y")], role="mirror", ends={"t/0": [0, 5]})
    result = run("mirror-divergence", b)
    assert (result.verdict, result.checked) == ("fail", 5)
    assert brief(result) == [
        ("divergent", 1, [("t", 0, 1, "X"), ("t", 0, 1, "b")]),
        ("divergent", 1, [("t", 0, 4, "Y")]),
        ("missing", 1, [("t", 0, 2, "c")]),
    ]
    assert [a.description for a in result.anomalies] == [
        "1 position of t/0 offset 1 on west (a mirror) holds other values than on east (the primary): "
        "at offset 1, 'X' on the mirror, 'b' on the primary",
        "1 position of t/0 offset 4 on west (a mirror) holds other values than on east (the primary): "
        "at offset 4, 'Y' on the mirror, nothing on the primary",
        "1 record east (the primary) holds at t/0 offset 2 is missing from west (a mirror), below its end 5",
    ]


def test_mirror_divergence_passes_on_a_lagging_mirror_and_one_whose_log_starts_later() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c"])
    b.read("east", log(["a", "b", "c"]), ends={"t/0": [0, 3]})
    b.read("west", log(["a", "b"]), role="mirror", ends={"t/0": [0, 2]})
    b.read("south", log(["b", "c"], start=1), role="mirror", ends={"t/0": [1, 3]})
    result = run("mirror-divergence", b)
    assert (result.verdict, result.checked) == ("pass", 4)


def test_mirror_divergence_is_skipped_without_a_mirror_read() -> None:
    b = Builder()
    b.read("east", log(["a"]))
    b.read("west", log(["a"]), role="mirror", final=False)
    assert run("mirror-divergence", b).verdict == "skipped"


def _failover(exported: list[str], start: int) -> Builder:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c", "d", "e"])
    b.nemesis("start", "lose-site", "east")
    b.unacked("producer-0", "u")  # east wrote it at 5, the producer never heard back
    b.promote()
    b.sends("producer-0", ["v", "w"], start=3)
    b.nemesis("stop", "lose-site", "east")
    b.export(log(exported, start=start))
    b.read("west", log(["a", "b", "c", "v", "w"]))
    return b


def test_rpo_accuracy_passes_when_the_export_is_exactly_the_acknowledged_loss() -> None:
    result = run("rpo-accuracy", _failover(["d", "e", "u"], start=3))
    assert (result.verdict, result.checked) == ("pass", 10)  # 7 acknowledgements, 3 exported records


def test_rpo_accuracy_fires_on_an_unexported_loss_and_on_an_exported_record_the_new_primary_holds() -> None:
    result = run("rpo-accuracy", _failover(["c", "e"], start=2))
    assert brief(result) == [
        ("unexported-loss", 1, [("t", 0, 3, "d")]),
        ("exported-present", 1, [("t", 0, 2, "c"), ("t", 0, 2, "c")]),
    ]
    unexported, present = result.anomalies
    assert unexported.description == (
        "1 acknowledged write to t/0 at offset 3 is missing from west (the new primary), yet in no divergence "
        "exported after the unplanned promote of east-to-west (#13): the failover under-reported what it lost"
    )
    assert present.description == (
        "1 record of t/0 (offset 2) exported as divergence after the unplanned promote of east-to-west (#13) "
        "is on west (the new primary) nonetheless: the export over-reports"
    )
    assert [r["op"] for r in present.records] == ["export", "read"]
    assert {e["f"] for e in unexported.near} == {"start", "stop", "promote", "export"}


def test_rpo_accuracy_fires_on_a_planned_promote_that_exported_an_acknowledged_write() -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.promote(planned=True)
    b.export(log(["b"], start=1))
    b.read("west", log(["a"]))
    assert brief(run("rpo-accuracy", b)) == [("planned-loss", 1, [("t", 0, 1, "b")])]


def test_rpo_accuracy_is_skipped_without_a_promote_or_after_a_clean_planned_one() -> None:
    b = Builder()
    b.sends("producer-0", ["a"])
    b.read("east", log(["a"]))
    assert run("rpo-accuracy", b).verdict == "skipped"
    b.promote(planned=True)
    assert run("rpo-accuracy", b).verdict == "skipped"
