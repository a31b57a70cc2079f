"""The ledger job and chaos/'s checkers agree on real chaos runs, clean and lossy, record for record.

The runs are the session's chaos matrices (``tests/chaos_runs.py``, which test_matrix checks):
the short matrix's ``kills`` (idempotent acks=all under kill -9 of the leader, a follower, the
controller, a random node and the whole site: nothing may be lost) and the controls'
``control-acks1-unclean`` (acks=1 with unclean elections: acknowledged writes are lost), each
with the matrices' fixed seed. The ledger then audits each
history against east's log files with ``strait audit ledger`` (in this process, on the session's
SparkSession; tests/spark_jobs/test_ledger_cli.py runs it as its own process too).

*One input*: east's files (read with strait-segments) must hold exactly what the history's
final read of east (the primary) read; the checkers then judge the history's sends and that
read (every record listed: :func:`unsampled`), the ledger the same sends and the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from chaos.history import load
from chaos.scenarios import MATRICES
from tests.chaos_runs import ChaosMatrices
from tests.spark_jobs.audit_run import audit
from tests.spark_jobs.ledger_agreement import (
    checker_found,
    final_read,
    ledger_found,
    only_what_the_ledger_reads,
    unsampled,
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.spark, pytest.mark.slow]

CLEAN, LOSSY = "kills", "control-acks1-unclean"
MATRIX = {CLEAN: "short", LOSSY: "controls"}
CHAOS_TIMEOUT_S = 1500


@dataclass(frozen=True)
class Run:
    directory: Path  # the matrix run's --dir
    scenario: dict[str, Any]  # its results.json entry

    @property
    def history(self) -> Path:
        return self.directory / self.scenario["history"]


@pytest.fixture(scope="session")
def chaos_runs(chaos_matrices: ChaosMatrices) -> dict[str, Run]:
    """Both scenarios, from the session's matrix runs (waited for here)."""
    found = {}
    matrices = {name: chaos_matrices[MATRIX[name]] for name in (CLEAN, LOSSY)}  # both start now
    for name, matrix in matrices.items():
        _, results, output = matrix.result()
        (scenario,) = [s for s in results["scenarios"] if s["name"] == name]
        assert scenario["error"] is None, (name, scenario["error"], output[-3000:])
        assert scenario["verdict"] == "pass", (name, output[-3000:])
        found[name] = Run(matrix.directory, scenario)
    return found


def ledger(*args: str, own_process: bool = False) -> tuple[int, str, dict[str, Any] | None]:
    return audit("ledger", *args, own_process=own_process)


def nodes(run: Path) -> list[Path]:
    """East's node dirs (each holding its log dirs d1/ and d2/)."""
    return sorted((run / "appliance" / "east").glob("node-*"))


def checker_count(scenario: dict[str, Any], checker: str) -> int:
    (result,) = [c for c in scenario["checkers"] if c["name"] == checker]
    return int(result["count"])


@pytest.mark.timeout(CHAOS_TIMEOUT_S + 600)
@pytest.mark.parametrize("name", [CLEAN, LOSSY])
def test_the_ledger_agrees_with_the_checkers_on_a_real_run(
    chaos_runs: dict[str, Run], name: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_jobs.sources.segments import SegmentSource

    run = chaos_runs[name]
    history, east = run.history, nodes(run.history.parent)
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
    assert checker_count(run.scenario, "lost-write") == found.get("lost", 0)
    assert checker_count(run.scenario, "moved") == found.get("moved", 0)
    if name == LOSSY:
        assert found.get("lost", 0) > 0
    else:
        assert found == {}


@pytest.mark.timeout(CHAOS_TIMEOUT_S + 600)
def test_a_run_directory_and_bad_history_lines(chaos_runs: dict[str, Run], spark: Any, tmp_path: Path) -> None:
    """A run directory is every scenario's history; a malformed line is bad input (exit 2, no result)."""
    run = chaos_runs[LOSSY]
    directory = run.directory  # the controls' run: one history per control
    segments = [arg for node in nodes(run.history.parent) for arg in ("--segments", str(node))]
    code, output, summary = ledger(
        "--history", str(directory), *segments, "--topics", f"chaos-{LOSSY}", "--out", str(tmp_path / "a")
    )
    assert code == 1, output[-3000:]
    assert summary is not None and summary["inputs"]["history"] == [
        str(path) for path in sorted(directory.glob("*/history.jsonl"))
    ]
    assert len(summary["inputs"]["history"]) == len(MATRICES["controls"])
    broken = tmp_path / "broken.jsonl"
    lines = run.history.read_text().splitlines()
    lines[3:3] = ["{not json", '{"index": 5, "type": "ok", "process": "producer-0", "f": "send", "value": "v"}']
    broken.write_text("\n".join(lines) + "\n")
    out = tmp_path / "b"
    code, output, summary = ledger("--history", str(broken), *segments, "--out", str(out))
    assert (code, summary) == (2, None), output[-3000:]
    assert f"--history: 2 malformed lines ({broken}: 2)" in output
    assert f"{broken}:4: not a JSON object" in output and f"{broken}:5: an acknowledged send needs" in output
    assert not (out / "summary.json").exists() and not list(out.glob(".incomplete-*"))
