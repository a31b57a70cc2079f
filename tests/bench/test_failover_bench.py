"""The failover benchmark (bench/failover_bench.py): its summaries and goal, and one ``--quick`` run end to end.

The end-to-end run proves that the benchmark starts an appliance, times every command of both
cycles and writes its report; it asserts nothing about speed beyond every RTO being a positive
number (performance is measured by the benchmark, not asserted by tests).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench import failover_bench as fb
from bench._cli import stepper
from bench._failover_appliance import REVERSE_LINK, Lag, reverse_topology
from bench._failover_clients import Probed
from bench._failover_report import (
    FAILBACK,
    GOAL_RTO_S,
    PLANNED,
    UNPLANNED,
    Results,
    Trial,
    steps_table,
    summary,
    summary_table,
    verdict,
)
from failover.topology import parse_appliance


def _lag(records: int | None, seconds: float | None = 0.0) -> Lag:
    return Lag(records, seconds, records or 0, 0, True, "active", 0.05, 0.0)


def _trial(operation: str, cycle: str, run: int, rto: float, lag: int | None = 0) -> Trial:
    probed = Probed(rto, rto / 2, {0: rto / 2, 1: rto}, 4, {"POLICY_VIOLATION": 2})
    steps = [("plan", 0.01), ("drain", rto - 0.1), ("unmirror-target", 0.02)]
    return Trial(operation, cycle, run, _lag(lag), probed, rto + 0.01, steps)


def test_quick_defaults_yield_to_explicit_flags() -> None:
    settings = fb.parse_args(["--quick", "--runs", "2"])
    assert (settings.runs, settings.nodes, settings.settle_s) == (2, fb.QUICK["nodes"], fb.QUICK["settle"])
    full = fb.parse_args([])
    assert (full.runs, full.nodes, full.partitions) == (5, 3, 3)
    assert (full.replication, full.min_insync) == (3, 2)
    assert (settings.replication, settings.min_insync) == (1, 1)


def test_the_summary_gives_median_min_and_max_and_the_goal_compares_the_unplanned_median() -> None:
    runs = [(1.0, 3), (3.0, 0), (2.0, 9)]  # (RTO, lag)
    results = Results(trials=[_trial(UNPLANNED, "unplanned", r, rto, lag) for r, (rto, lag) in enumerate(runs)])
    s = summary(results.trials)
    assert s["rto_s"] == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert s["lag_records"] == {"median": 3.0, "min": 0, "max": 9}
    found = verdict(results)
    assert found.met is True
    assert f"{2.0 / GOAL_RTO_S:.2f} of the goal" in found.figures

    slow = Results(trials=[_trial(UNPLANNED, "unplanned", 0, GOAL_RTO_S + 0.5)])
    assert verdict(slow).met is False
    assert verdict(Results(trials=[_trial(PLANNED, "planned", 0, 1.0)])).met is None


def test_failbacks_are_reported_by_the_cycle_they_end() -> None:
    results = Results(
        trials=[
            _trial(PLANNED, "planned", 0, 2.0),
            _trial(FAILBACK, "planned", 0, 2.5),
            _trial(UNPLANNED, "unplanned", 0, 1.0),
            _trial(FAILBACK, "unplanned", 0, 2.7, lag=None),
        ]
    )
    labels = [row[0] for row in summary_table(results)[1]]
    assert labels == [
        PLANNED,
        UNPLANNED,
        "failback (after the planned promote)",
        "failback (after the unplanned promote)",
    ]
    assert summary_table(results)[1][3][8] == "-"  # a lag unknown in every run


def test_the_steps_table_keeps_the_commands_order() -> None:
    _, rows = steps_table([_trial(PLANNED, "planned", 0, 2.0), _trial(PLANNED, "planned", 1, 4.0)])
    assert [row[0] for row in rows] == ["plan", "drain", "unmirror-target"]
    assert rows[1][1:] == ["2.90", "1.90", "3.90"]


def test_the_reverse_topology_adds_the_reverse_link_with_the_same_mirror() -> None:
    appliance = {
        "sites": {
            "east": {"bootstrap": "127.0.0.1:1", "zookeeper": "127.0.0.1:2", "zookeeper_chroot": "/east"},
            "west": {"bootstrap": "127.0.0.1:3", "zookeeper": "127.0.0.1:4", "zookeeper_chroot": "/west"},
        },
        "links": [{"name": "east-to-west", "source": "east", "target": "west", "admin": "http://127.0.0.1:5"}],
    }
    topology = parse_appliance(appliance, origin="appliance.json", directory=Path("/a"))
    back = reverse_topology(topology).link(REVERSE_LINK)
    assert (back.source, back.target, back.mirror_admin) == ("west", "east", "http://127.0.0.1:5")
    assert back.token_file == topology.link("east-to-west").token_file


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_quick_run_times_every_command_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "results"
    argv = ["--quick", "--dir", str(tmp_path / "data"), "--out", str(out)]

    assert fb.measure_and_report(fb.parse_args(argv), stepper(time.perf_counter())) == 0

    (md_path,) = out.glob("failover-*.md")
    (json_path,) = out.glob("failover-*.json")
    data = json.loads(json_path.read_text())
    assert data["failure"] is None
    operations = sorted((t["operation"], t["cycle"]) for t in data["trials"])
    assert operations == sorted(
        [(PLANNED, "planned"), (FAILBACK, "planned"), (UNPLANNED, "unplanned"), (FAILBACK, "unplanned")]
    )
    for trial in data["trials"]:
        assert isinstance(trial["rto_s"], float) and trial["rto_s"] > 0, trial
        assert 0 < trial["probe"]["first_s"] <= trial["rto_s"]
        assert set(trial["probe"]["partitions"]) == {"0", "1", "2"}
        assert trial["steps"] and trial["lag"]["link_state"] == "active"
    for figures in data["summary"].values():
        assert figures["rto_s"]["median"] > 0
    assert data["goal"]["unplanned_rto_s"] == GOAL_RTO_S and data["goal"]["verdict"]["met"] is not None
    assert {c["kind"] for c in data["cycles"]} == {"planned", "unplanned"}
    assert any(p["acked"] > 0 for p in data["load"])
    for key in ("cpu_model", "cores", "ram_gib", "kernel", "fs_type_mounts", "python"):
        assert data["machine"][key]
    assert data["command"].endswith("-m bench.failover_bench " + " ".join(argv))
    text = md_path.read_text()
    for heading in ("## Machine", "## Settings", "## Results", "### RTO", "### Where the time goes", "### Cycles"):
        assert heading in text
    assert "no peer comparison" in text
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())  # scratch removed
