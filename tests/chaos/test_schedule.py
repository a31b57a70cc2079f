"""The schedule a seed fixes: replayable, every fault of a scenario at least once, within the duration."""

from __future__ import annotations

import itertools

import click
import pytest

from chaos.faults import FAULTS
from chaos.scenarios import MATRICES, SCENARIOS, matrix, scenario_seed, schedule
from strait._chaos_commands import parse_duration

pytestmark = pytest.mark.unit


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    kills = SCENARIOS["kills"]
    assert schedule(kills, 42) == schedule(kills, 42)
    assert schedule(kills, 42) != schedule(kills, 43)


def test_every_fault_of_a_scenario_runs_at_least_once_and_faults_do_not_overlap() -> None:
    for name in MATRICES["short"]:
        scenario = SCENARIOS[name]
        steps = schedule(scenario, 7)
        assert set(scenario.faults) <= {s.fault for s in steps}, name
        for before, after in itertools.pairwise(steps):
            assert after.at >= before.at + before.hold, (name, before, after)


def test_a_longer_duration_draws_more_faults() -> None:
    kills = SCENARIOS["kills"]
    assert len(schedule(kills, 1, duration=600)) > len(schedule(kills, 1, duration=10))
    assert schedule(kills, 1, duration=600)[-1].at >= 600 - 20


def test_zookeeper_expiry_is_held_past_the_session_timeout() -> None:
    steps = schedule(SCENARIOS["zookeeper"], 3)
    assert all(s.hold >= 9 for s in steps if s.fault == "zk-expire")


def test_scenario_seeds_are_stable_and_differ_by_name_and_repetition() -> None:
    assert scenario_seed(42, "kills") == scenario_seed(42, "kills")  # no hash(): the same across processes
    assert scenario_seed(42, "kills") == 1532279230
    assert len({scenario_seed(42, "kills", r) for r in range(5)} | {scenario_seed(42, "pauses")}) == 6


def test_every_scenario_names_known_faults_and_the_short_matrix_covers_every_fault() -> None:
    for scenario in SCENARIOS.values():
        assert set(scenario.faults) <= set(FAULTS), scenario.name
    controls_only = {f for s in SCENARIOS.values() if s.control for f in s.faults}
    short = {f for name in MATRICES["short"] for f in SCENARIOS[name].faults}
    assert short | controls_only == set(FAULTS)
    assert not any(SCENARIOS[name].control for name in (*MATRICES["short"], *MATRICES["full"]))


def test_the_full_matrix_repeats_every_single_fault_scenario_on_each_topology() -> None:
    runs = matrix("full")
    assert len(runs) == len(MATRICES["full"]) * 2 * 2
    assert {s.nodes for s, _ in runs} == {3, 4}
    with pytest.raises(KeyError, match="unknown matrix 'long'"):
        matrix("long")


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "1d", "2", "-5m"])
def test_bad_durations_are_named(text: str) -> None:
    with pytest.raises(click.BadParameter, match=repr(text)):
        parse_duration(text)


def test_a_full_matrix_variant_is_found_by_the_name_its_replay_command_gives() -> None:
    from chaos.scenarios import SCENARIOS, lookup, matrix, scenario_seed

    variants = {s.name: s for s, _ in matrix("full")}
    assert lookup("disk-failing@4") == variants["disk-failing@4"]
    assert lookup("kill-site") is SCENARIOS["kill-site"]
    assert scenario_seed(7, lookup("disk-failing@4").name, 1) == scenario_seed(7, "disk-failing@4", 1)
    for bad in ("no-such", "kill-site@", "kill-site@x", "kill-site@1", "kill-site@4@4"):
        with pytest.raises(KeyError):
            lookup(bad)
