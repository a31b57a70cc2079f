"""skipped-read, commit-regression and unseen: a consumer group, judged as a whole."""

from __future__ import annotations

import pytest

from tests.chaos.checkers.builder import Builder, brief, log, rec, run

pytestmark = pytest.mark.unit

LOG = ["a", "b", "c", "d", "e", "f", "g"]


def test_skipped_read_fires_on_a_consumer_jumping_over_records_within_one_assignment() -> None:
    b = Builder()
    b.sends("producer-0", LOG)
    b.assign("c-0", [("t", 0)])
    b.poll("c-0", log(LOG[:2]))
    b.poll("c-0", log(LOG[4:], start=4))
    b.read("east", log(LOG))
    result = run("skipped-read", b)
    assert (result.verdict, result.checked) == ("fail", 5)
    assert brief(result) == [
        ("poll-skip", 2, [("t", 0, 1, "b"), ("t", 0, 2, "c"), ("t", 0, 3, "d"), ("t", 0, 4, "e")]),
    ]
    assert result.anomalies[0].description == (
        "c-0 (group g) polled t/0 on east at offset 1 (#16) then 4 (#18) in one assignment, "
        "jumping over 2 records its log holds (offsets 2..3)"
    )


def test_skipped_read_fires_when_the_next_consumer_starts_past_what_the_group_polled() -> None:
    b = Builder()
    b.sends("producer-0", LOG)
    b.assign("c-0", [("t", 0)])
    b.poll("c-0", log(LOG[:3]))
    b.commit("c-0", 5)  # committed before processing 3 and 4
    b.assign("c-0", [])
    b.assign("c-1", [("t", 0)])
    b.poll("c-1", log(LOG[5:], start=5))
    b.read("east", log(LOG))
    result = run("skipped-read", b)
    assert brief(result) == [
        ("poll-skip", 2, [("t", 0, 2, "c"), ("t", 0, 3, "d"), ("t", 0, 4, "e"), ("t", 0, 5, "f")]),
    ]
    assert result.anomalies[0].description == (
        "no consumer of group g polled 2 records of t/0 that east's final read holds (offsets 3..4), "
        "though the group polled offset 2 (c-0, #16) and 5 (c-1, #22)"
    )


def test_skipped_read_passes_on_overlapping_rebalances_and_offsets_that_hold_no_record() -> None:
    b = Builder()
    b.sends("producer-0", LOG[:3])
    b.send("producer-0", "e", 4)  # offset 3 holds no record (a transaction marker, say)
    b.assign("c-0", [("t", 0)])
    b.poll("c-0", log(LOG[:3]))
    b.assign("c-1", [("t", 0)])
    b.poll("c-1", [*log(["c"], start=2), rec(4, "e")])  # resumes below what c-0 polled, jumps the empty 3
    b.poll("c-2", log(["a"]), group="other")
    b.read("east", [*log(LOG[:3]), rec(4, "e")])
    result = run("skipped-read", b)
    assert (result.verdict, result.checked) == ("pass", 6)


def test_skipped_read_follows_a_group_across_a_failover() -> None:
    def history(resume_at: int) -> Builder:
        b = Builder()
        b.sends("producer-0", LOG[:5])
        b.poll("c-0", log(LOG[:5]))  # east, 3 and 4 beyond the cut
        b.promote()
        b.sends("producer-0", ["x", "y", "z"], start=3)
        b.poll("c-0", log(["a", "b", "c", "x", "y", "z"][resume_at:], start=resume_at))  # west
        b.export(log(LOG[3:5], start=3))
        b.read("west", log(["a", "b", "c", "x", "y", "z"]))
        return b

    assert run("skipped-read", history(resume_at=2)).verdict == "pass"
    result = run("skipped-read", history(resume_at=4))
    assert brief(result) == [("poll-skip", 1, [("t", 0, 2, "c"), ("t", 0, 3, "x"), ("t", 0, 4, "y")])]


def test_skipped_read_is_skipped_without_group_polls_or_a_log_to_judge_them_by() -> None:
    b = Builder()
    b.poll("reader", log(["a"]), group=None)
    b.read("east", log(["a"]))
    assert run("skipped-read", b).verdict == "skipped"
    b2 = Builder()
    b2.poll("c-0", log(["a"]))
    assert run("skipped-read", b2).verdict == "skipped"


def test_commit_regression_fires_on_a_committed_offset_going_back_without_a_reset() -> None:
    b = Builder()
    b.commit("c-0", 3)
    b.commit("c-0", 5)
    b.commit("c-1", 4)
    result = run("commit-regression", b)
    assert (result.verdict, result.checked) == ("fail", 3)
    assert brief(result) == [("commit-regression", 1, [("t", 0, 5, "commit"), ("t", 0, 4, "commit")])]
    assert result.anomalies[0].description == (
        "group g committed offset 4 of t/0 on the site (not recorded) (c-1, #5) after committing 5 (c-0, #3), "
        "with no reset between"
    )


def test_commit_regression_passes_after_a_reset_a_failed_commit_other_partitions_and_a_failover() -> None:
    b = Builder()
    b.commit("c-0", 3)
    b.commit("c-0", 5)
    b.reset("admin", 2)
    b.commit("c-0", 2)
    b.commit("c-0", 1, type="info")  # indeterminate: not a commit we know happened
    b.commit("c-0", 0, partition=1)
    b.commit("c-0", 4, group="other")
    b.commit("c-0", 9)
    b.promote()
    b.commit("c-0", 7)  # west's committed offset, synced from east, lags: a replay, not a loss
    result = run("commit-regression", b)
    assert (result.verdict, result.checked) == ("pass", 7)
    assert run("commit-regression", Builder()).verdict == "skipped"


def test_unseen_fires_on_an_acknowledged_record_a_drained_group_never_polled() -> None:
    b = Builder()
    b.sends("producer-0", LOG[:4])
    b.unacked("producer-0", "e")
    b.send("producer-0", "f", 5)
    b.poll("c-0", log(LOG[:2]))
    b.poll("c-1", log(["c"], start=2))
    b.drain("c-0", {"t/0": 5})
    b.read("east", [*log(LOG[:5]), rec(5, "f")])
    result = run("unseen", b)
    assert (result.verdict, result.checked) == ("fail", 4)  # e was never acknowledged, f is past the drain
    assert brief(result) == [("unseen", 1, [("t", 0, 3, "d")])]
    assert result.anomalies[0].description == (
        "group g never polled 1 acknowledged record of t/0 that east's final read holds (offset 3), "
        "though it drained that partition"
    )


def test_a_failed_drain_is_an_anomaly_of_its_own() -> None:
    b = Builder()
    b.sends("producer-0", LOG[:2])
    b.poll("c-0", log(LOG[:1]))
    b.drain("c-0", {"t/0": 2}, error="did not reach t/0 end 2 in 30 s")
    b.read("east", log(LOG[:2]))
    result = run("unseen", b)
    assert brief(result) == [("incomplete-drain", 1, []), ("unseen", 1, [("t", 0, 1, "b")])]
    assert result.anomalies[0].description == (
        "c-0 (group g) could not poll up to the ends it was asked to reach (#6): did not reach t/0 end 2 in 30 s"
    )


def test_unseen_passes_when_the_group_polled_everything_and_is_skipped_without_a_drain() -> None:
    b = Builder()
    b.sends("producer-0", LOG[:3])
    b.poll("c-0", log(LOG[:2]))
    b.poll("c-1", log(LOG[1:3], start=1))
    b.read("east", log(LOG[:3]))
    assert run("unseen", b).verdict == "skipped"
    b.drain("c-1", {"t/0": 3})
    result = run("unseen", b)
    assert (result.verdict, result.checked) == ("pass", 3)
