"""The ledger job and chaos/'s checkers agree on real chaos runs, clean and lossy, record for record.

One ``strait chaos run`` for the session runs two scenarios with a fixed seed: ``kill-leader``
(idempotent acks=all: nothing may be lost) and the positive control ``control-acks1-unclean``
(acks=1 with unclean elections: acknowledged writes are lost). The ledger then audits each
history against east's log files with ``strait audit ledger`` (in this process, on the session's
SparkSession; tests/spark_jobs/test_ledger_cli.py runs it as its own process too).

*One input*: east's files (read with strait-segments) must hold exactly what the history's
final read of east (the primary) read; the checkers then judge the history's sends and that
read (every record listed: :func:`unsampled`), the ledger the same sends and the files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from chaos.history import load
from strait.cli import main
from tests.spark_jobs.ledger_agreement import (
    checker_found,
    final_read,
    ledger_found,
    only_what_the_ledger_reads,
    unsampled,
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SEED = 1
CLEAN, LOSSY = "kill-leader", "control-acks1-unclean"
CHAOS_TIMEOUT_S = 1500


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="session")
def chaos_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Both scenarios, run once for the session: (the run's directory, results.json by scenario)."""
    directory = tmp_path_factory.mktemp("ledger-chaos")
    argv = [sys.executable, "-m", "strait.cli", "chaos", "run", "--seed", str(SEED), "--dir", str(directory)]
    argv += ["--scenario", CLEAN, "--scenario", LOSSY]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CHAOS_TIMEOUT_S, env=_env(), check=False)
    output = done.stdout + done.stderr
    results = json.loads((directory / "results.json").read_text())
    scenarios = {s["name"]: s for s in results["scenarios"]}
    for name in (CLEAN, LOSSY):
        assert scenarios[name]["error"] is None, (name, scenarios[name]["error"], output[-3000:])
        assert scenarios[name]["verdict"] == "pass", (name, output[-3000:])
    yield directory, scenarios


def ledger(*args: str) -> tuple[int, str, dict[str, Any] | None]:
    result = CliRunner().invoke(main, ["audit", "ledger", *args])
    out = Path(args[args.index("--out") + 1])
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    return result.exit_code, result.output, summary


def nodes(run: Path) -> list[Path]:
    """East's node dirs (each holding its log dirs d1/ and d2/)."""
    return sorted((run / "appliance" / "east").glob("node-*"))


def checker_count(scenario: dict[str, Any], checker: str) -> int:
    (result,) = [c for c in scenario["checkers"] if c["name"] == checker]
    return int(result["count"])


@pytest.mark.timeout(CHAOS_TIMEOUT_S + 600)
@pytest.mark.parametrize("name", [CLEAN, LOSSY])
def test_the_ledger_agrees_with_the_checkers_on_a_real_run(
    chaos_runs: tuple[Path, dict[str, Any]], name: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_jobs.sources.segments import SegmentSource

    directory, scenarios = chaos_runs
    history, east = directory / name / "history.jsonl", nodes(directory / name)
    segments = [arg for node in east for arg in ("--segments", str(node))]
    code, output, summary = ledger("--history", str(history), *segments, "--out", str(tmp_path / "out"))
    assert code == (1 if name == LOSSY else 0), output[-3000:]
    assert summary is not None
    rows = pq.read_table(tmp_path / "out" / "discrepancies").to_pylist()

    ops = load(history).ops
    site, records, _ = final_read(ops)
    assert site == "east"
    spark.dataSource.register(SegmentSource)
    topic = f"chaos-{name}"
    held = spark.read.format("strait-segments").option("topics", topic).load([str(node) for node in east])
    assert held.where("NOT valid").count() == 0
    on_disk = {(r["topic"], r["partition"], r["offset"], r["value"].decode()) for r in held.collect()}
    assert on_disk == {(r["topic"], r["partition"], r["offset"], r["value"]) for r in records}, "one input"

    unsampled(monkeypatch)
    theirs, ours = checker_found(only_what_the_ledger_reads(ops)), ledger_found(rows)
    assert ours == theirs
    found = {kind: n for kind, (n, _) in ours.items() if n}
    assert summary["discrepancies"]["by_kind"] == found
    assert summary["totals"]["acknowledged"] == sum(1 for op in ops if op["type"] == "ok" and op["f"] == "send")
    assert summary["totals"]["site_records"] == len(records)
    # The run's own verdicts (every checker, polls included) on what concerns the acknowledgements.
    assert checker_count(scenarios[name], "lost-write") == found.get("lost", 0)
    assert checker_count(scenarios[name], "moved") == found.get("moved", 0)
    if name == LOSSY:
        assert found.get("lost", 0) > 0
    else:
        assert found == {}


@pytest.mark.timeout(CHAOS_TIMEOUT_S + 600)
def test_a_run_directory_and_bad_history_lines(
    chaos_runs: tuple[Path, dict[str, Any]], spark: Any, tmp_path: Path
) -> None:
    """A run directory is every scenario's history; a malformed line is bad input (exit 2, no result)."""
    directory, _ = chaos_runs
    segments = [arg for node in nodes(directory / LOSSY) for arg in ("--segments", str(node))]
    code, output, summary = ledger(
        "--history", str(directory), *segments, "--topics", f"chaos-{LOSSY}", "--out", str(tmp_path / "a")
    )
    assert code == 1, output[-3000:]
    assert summary is not None and summary["inputs"]["history"] == [
        str(directory / n / "history.jsonl") for n in sorted((CLEAN, LOSSY))
    ]
    broken = tmp_path / "broken.jsonl"
    lines = (directory / LOSSY / "history.jsonl").read_text().splitlines()
    lines[3:3] = ["{not json", '{"index": 5, "type": "ok", "process": "producer-0", "f": "send", "value": "v"}']
    broken.write_text("\n".join(lines) + "\n")
    out = tmp_path / "b"
    code, output, summary = ledger("--history", str(broken), *segments, "--out", str(out))
    assert (code, summary) == (2, None), output[-3000:]
    assert f"--history: 2 malformed lines ({broken}: 2)" in output
    assert f"{broken}:4: not a JSON object" in output and f"{broken}:5: an acknowledged send needs" in output
    assert not (out / "summary.json").exists() and not list(out.glob(".incomplete-*"))
