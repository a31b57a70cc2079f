"""``strait chaos check DIR``: the checkers run again, offline, on a saved run; the verdict follows the history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.history import History
from strait.cli import main

pytestmark = pytest.mark.unit


def saved_run(directory: Path, *, lose: bool) -> None:
    """A run directory as ``strait chaos run`` leaves it: results.json and one scenario's history."""
    (directory / "s").mkdir(parents=True)
    history = History(directory / "s" / "history.jsonl")
    records = []
    for offset in range(3):
        invoked = history.invoke("producer-0", "send", topic="t", value=f"v{offset}")
        history.complete(invoked, "ok", topic="t", partition=0, offset=offset, value=f"v{offset}")
        if not (lose and offset == 2):
            records.append({"topic": "t", "partition": 0, "offset": offset, "value": f"v{offset}"})
    invoked = history.invoke("final-read", "read", site="east", topic="t")
    history.complete(invoked, "ok", site="east", role="primary", final=True, records=records, ends={"t/0": [0, 3]})
    history.close()
    results = {
        "format": 1,
        "command": "strait chaos run --scenario s --seed 1",
        "seed": 1,
        "started": 0,
        "finished": 1,
        "verdict": "pass",
        "machine": "test",
        "scenarios": [
            {"name": "s", "description": "d", "seed": 1, "replay": "r", "expect": "pass", "verdict": "pass",
             "error": None, "duration_s": 1.0, "history": "s/history.jsonl", "checkers": [], "findings": []}
        ],
    }  # fmt: skip
    (directory / "results.json").write_text(json.dumps(results))


def test_check_passes_a_clean_history_and_writes_the_report(tmp_path: Path) -> None:
    saved_run(tmp_path, lose=False)
    done = CliRunner().invoke(main, ["chaos", "check", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "PASS" in done.output and (tmp_path / "report.html").exists()
    results = json.loads((tmp_path / "results.json").read_text())
    verdicts = {c["name"]: c["verdict"] for c in results["scenarios"][0]["checkers"]}
    assert verdicts["lost-write"] == "pass" and verdicts["unseen"] == "skipped"


def test_check_finds_a_lost_write_in_the_saved_history_and_exits_1(tmp_path: Path) -> None:
    saved_run(tmp_path, lose=True)
    done = CliRunner().invoke(main, ["chaos", "check", str(tmp_path)])
    assert done.exit_code == 1, done.output
    assert "FAIL" in done.output and "lost" in done.output
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "fail"
    (lost,) = [a for c in results["scenarios"][0]["checkers"] for a in c["anomalies"]]
    assert lost["name"] == "lost" and lost["records"][0]["value"] == "v2"


def test_check_names_a_directory_without_results(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["chaos", "check", str(tmp_path)])
    assert done.exit_code == 1 and "results.json" in done.output


def test_run_refuses_bad_arguments_with_their_names() -> None:
    runner = CliRunner()
    assert "--scenario NAME" in runner.invoke(main, ["chaos", "run"]).output
    unknown = runner.invoke(main, ["chaos", "run", "--scenario", "nope"])
    assert unknown.exit_code == 2 and "unknown scenario 'nope'" in unknown.output
    both = runner.invoke(main, ["chaos", "run", "--scenario", "kills", "--matrix", "short"])
    assert both.exit_code == 2
    listed = runner.invoke(main, ["chaos", "list"])
    assert listed.exit_code == 0 and "kill-leader" in listed.output and "positive control" in listed.output
