"""Whole histories as a run records them: every checker at once, the anomalies planted and no others."""

from __future__ import annotations

import pytest

from chaos.checkers import CheckerResult, check
from tests.chaos.checkers.builder import Builder, brief, log, rec

pytestmark = pytest.mark.unit


def _verdicts(results: list[CheckerResult]) -> dict[str, str]:
    return {result.name: result.verdict for result in results}


def _one(results: list[CheckerResult], name: str) -> CheckerResult:
    (result,) = [r for r in results if r.name == name]
    return result


def test_a_leader_kill_with_acks_1_loses_a_tail_and_only_the_checkers_that_should_fire_do() -> None:
    b = Builder()
    p0 = [f"p0-{n}" for n in range(10)]
    p1 = [f"p1-{n}" for n in range(12)]
    b.assign("c-0", [("t", 0), ("t", 1)])
    for n in range(5):
        b.send("producer-0", p0[n], n)
        b.send("producer-1", p1[n], n, partition=1)
    b.poll("c-0", [*log(p0[:5]), *log(p1[:5], partition=1)])
    b.commit("c-0", 5)
    b.commit("c-0", 5, partition=1)
    b.read("west", log(p0[:3]), role="mirror", final=False, process="mirror-reader")
    b.add("info", "mirror-reader", "lag", site="west", value={"records": 7, "partitions": {"t/0": 2, "t/1": 5}})
    kill = b.nemesis("start", "kill-leader", "east node 2 (leader of t/1)")
    for n in range(5, 8):  # acknowledged by the old leader alone, then truncated away
        b.send("producer-1", p1[n], n, partition=1)
    healed = b.nemesis("stop", "kill-leader", "east node 2 (leader of t/1)")
    for n in range(8, 12):  # the new leader's log ended at 5
        b.send("producer-1", p1[n], n - 3, partition=1)
    for n in range(5, 10):
        b.send("producer-0", p0[n], n)
    b.assign("c-0", [("t", 0)])
    b.assign("c-1", [("t", 1)])
    b.poll("c-0", log(p0[5:], start=5))
    b.poll("c-1", log(p1[8:], start=5, partition=1))
    b.commit("c-0", 10)
    b.commit("c-1", 9, partition=1)
    b.drain("c-0", {"t/0": 10})
    b.drain("c-1", {"t/1": 9})
    b.wait(20)
    b.nemesis("start", "pause-follower", "east node 3")
    b.nemesis("stop", "pause-follower", "east node 3")
    b.wait(20)
    east = [*log(p0), *log(p1[:5], partition=1), *log(p1[8:], start=5, partition=1)]
    ends = {"t/0": [0, 10], "t/1": [0, 9]}
    b.read("east", east, ends=ends)
    b.read("west", east, role="mirror", ends=ends, process="mirror-reader")

    results = check(b.history())
    assert _verdicts(results) == {
        "lost-write": "fail",
        "duplicate": "pass",
        "inconsistent-offsets": "fail",
        "moved": "pass",
        "nonmonotonic-send": "fail",
        "nonmonotonic-poll": "pass",
        "skipped-read": "pass",
        "commit-regression": "pass",
        "unseen": "pass",
        "mirror-divergence": "pass",
        "rpo-accuracy": "skipped",
        "exactly-once": "skipped",  # no transactional workload
    }
    lost = _one(results, "lost-write")
    assert brief(lost) == [("lost", 3, [("t", 1, 5, "p1-5"), ("t", 1, 6, "p1-6"), ("t", 1, 7, "p1-7")])]
    assert lost.anomalies[0].near == (kill, healed)  # the pause, 20 s later, is not near
    inconsistent = _one(results, "inconsistent-offsets")
    assert [(a.count, [r["value"] for r in a.records]) for a in inconsistent.anomalies] == [
        (3, ["p1-5", "p1-8", "p1-6", "p1-9", "p1-7", "p1-10"])
    ]
    assert brief(_one(results, "nonmonotonic-send")) == [
        ("nonmonotonic-send", 1, [("t", 1, 7, "p1-7"), ("t", 1, 5, "p1-8")])
    ]
    assert _one(results, "unseen").checked == 19


def _site_loss(exported: list[tuple[int, str]]) -> Builder:
    """east is lost with a tail the mirror had not copied; west is promoted; east comes back and is reversed."""
    b = Builder()
    a = [f"a{n}" for n in range(6)]
    b.assign("c-0", [("t", 0)])
    b.sends("producer-0", a)
    b.read("west", log(a[:4]), role="mirror", final=False, process="mirror-reader")
    b.poll("c-0", log(a[:5]))
    b.commit("c-0", 5)
    b.nemesis("start", "lose-site", "east")
    b.promote()
    b.send("producer-1", "s0", 6)  # still pointed at east when it comes back: beyond the cut, exported
    b.sends("producer-0", ["b0", "b1", "b2"], start=4)  # west: its log goes on from the cut
    b.assign("c-0", [("t", 0)])
    b.poll("c-0", log(["b0", "b1", "b2"], start=4))  # the synced committed offset: 4
    b.nemesis("stop", "lose-site", "east")
    b.export([rec(offset, value) for offset, value in exported])
    b.commit("c-0", 7)
    b.drain("c-0", {"t/0": 7})
    final = log([*a[:4], "b0", "b1", "b2"])
    b.read("west", final, ends={"t/0": [0, 7]})
    b.read("east", final, role="mirror", ends={"t/0": [0, 7]}, process="mirror-reader")
    return b


def test_an_unplanned_failover_that_exports_exactly_its_loss_passes_every_checker() -> None:
    results = check(_site_loss([(4, "a4"), (5, "a5"), (6, "s0")]).history())
    assert _verdicts(results) == {**dict.fromkeys(_verdicts(results), "pass"), "exactly-once": "skipped"}
    assert _one(results, "rpo-accuracy").checked == 13  # 10 acknowledgements, 3 exported records


def test_an_unplanned_failover_that_under_reports_fails_the_checkers_that_see_the_unexported_record() -> None:
    results = check(_site_loss([(4, "a4"), (6, "s0")]).history())
    failed = {name for name, verdict in _verdicts(results).items() if verdict == "fail"}
    # a5 is lost; and east's offset 5 held a5, then (reversed) b1, with no export to account for the change.
    assert failed == {"lost-write", "inconsistent-offsets", "rpo-accuracy"}
    assert brief(_one(results, "rpo-accuracy")) == [("unexported-loss", 1, [("t", 0, 5, "a5")])]
    near = {(e["f"], e.get("nemesis")) for e in _one(results, "rpo-accuracy").anomalies[0].near}
    assert near == {("start", "lose-site"), ("stop", "lose-site"), ("promote", None), ("export", None)}
