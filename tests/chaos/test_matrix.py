"""The chaos suite end to end: the short matrix passes, and every positive control finds its anomaly.

These run ``strait chaos run`` as an operator would (a subprocess, its own appliances, a fixed
seed so a failure replays) and then read what it wrote: the exit status, ``results.json``
and the report. Both runs start together when the module starts and run side by side (each is
mostly waiting on its fault schedule): the second test finds its run nearly done. They are the
session's runs (``tests/chaos_runs.py``), which the ledger's agreement test reads too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chaos.scenarios import MATRICES, SCENARIOS
from tests.chaos_runs import ChaosMatrices, ChaosRun

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(chaos_matrices: ChaosMatrices) -> dict[str, ChaosRun]:
    return {matrix: chaos_matrices[matrix] for matrix in ("short", "controls")}  # both start now


def _anomalies(scenario: dict[str, Any]) -> dict[str, int]:
    found: dict[str, int] = {}
    for checker in scenario["checkers"]:
        for anomaly in checker["anomalies"]:
            found[anomaly["name"]] = found.get(anomaly["name"], 0) + 1
    return found


@pytest.mark.timeout(900)
def test_the_short_matrix_passes(runs: dict[str, ChaosRun]) -> None:
    code, results, output = runs["short"].result()
    tmp_path = runs["short"].directory
    assert [s["name"] for s in results["scenarios"]] == list(MATRICES["short"])
    summary = {s["name"]: (s["verdict"], s["error"], _anomalies(s), s["findings"]) for s in results["scenarios"]}
    assert code == 0 and results["verdict"] == "pass", f"{summary}\n{output[-4000:]}"
    for scenario in results["scenarios"]:
        verdicts = {c["name"]: c["verdict"] for c in scenario["checkers"]}
        # The checkers that must have had something to check on every scenario of this matrix:
        for name in ("lost-write", "duplicate", "inconsistent-offsets", "mirror-divergence", "unseen"):
            assert verdicts.get(name) == "pass", (scenario["name"], verdicts)
        if SCENARIOS[scenario["name"]].transactions:  # 0 duplicates, 0 aborted records visible, offsets agree
            assert verdicts.get("exactly-once") == "pass", (scenario["name"], verdicts)
        history = tmp_path / scenario["history"]
        nemesis = [json.loads(line) for line in history.read_text().splitlines() if '"process":"nemesis"' in line]
        started = {op["nemesis"] for op in nemesis if op["f"] == "start" and "failed" not in op["target"]}
        expected = set(SCENARIOS[scenario["name"]].faults) or {"site-loss"}
        assert expected <= started, (scenario["name"], started)
    assert "report.html" in output and (tmp_path / "report.html").stat().st_size > 10_000


@pytest.mark.timeout(1200)
def test_every_positive_control_finds_its_anomaly_and_every_checker_fires_somewhere(runs: dict[str, ChaosRun]) -> None:
    """A checker that cannot fail proves nothing: across the controls, each one must fire."""
    from chaos.checkers import CHECKERS

    code, results, output = runs["controls"].result()
    fired: set[str] = set()
    for scenario in results["scenarios"]:
        expected = SCENARIOS[scenario["name"]].expect
        found = _anomalies(scenario)
        assert scenario["error"] is None, (scenario["name"], scenario["error"], output[-3000:])
        assert found.get(expected, 0) >= 1, (scenario["name"], found, output[-3000:])
        assert scenario["verdict"] == "pass", scenario["name"]
        fired |= {c["name"] for c in scenario["checkers"] if c["anomalies"]}
    assert fired == set(CHECKERS), f"checkers no control made fire: {sorted(set(CHECKERS) - fired)}"
    assert code == 0 and results["verdict"] == "pass"
