"""pytest plugin: the chaos matrices run once per session, in the background, for whoever reads them.

``chaos_matrices`` (session) starts ``strait chaos run --matrix NAME --seed SEED`` on first
request of NAME, as an operator runs it (a subprocess; its own appliances). Its runs go on while
other tests run; :meth:`ChaosRun.result` waits for one. When a selected test uses it, both
matrices start with the session's first test, so that the tests before theirs run meanwhile.
``tests/chaos/test_matrix.py`` checks both; the ledger's agreement test
(``tests/spark_jobs/test_ledger_chaos.py``) reads their histories instead of making its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SEED = 20261125
#: How long each matrix may take (its scenarios run one after the other).
TIMEOUTS = {"short": 840.0, "controls": 1140.0}


class ChaosRun:
    """``strait chaos run ARGS`` started in ``directory``, running while the tests wait for it."""

    def __init__(self, directory: Path, *args: str, timeout: float) -> None:
        self.directory = directory
        argv = [sys.executable, "-m", "strait.cli", "chaos", "run", "--seed", str(SEED), "--dir", str(directory), *args]
        self.output = directory / "output.txt"
        with self.output.open("w") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.deadline = time.monotonic() + timeout

    def result(self) -> tuple[int, dict[str, Any], str]:
        """Wait (until its deadline) for it to end: its exit status, results.json and output."""
        try:
            code = self.process.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        results = json.loads((self.directory / "results.json").read_text())
        return code, results, self.output.read_text()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # as Ctrl-C: it heals, unmounts and stops its appliances
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class ChaosMatrices:
    """The session's matrix runs, each started on first request."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.runs: dict[str, ChaosRun] = {}

    def __getitem__(self, matrix: str) -> ChaosRun:
        return self.start(matrix)

    def start(self, matrix: str) -> ChaosRun:
        """The run of ``matrix``, started now unless it was before."""
        if matrix not in self.runs:
            directory = self.factory.mktemp(f"matrix-{matrix}")
            self.runs[matrix] = ChaosRun(directory, "--matrix", matrix, timeout=TIMEOUTS[matrix])
        return self.runs[matrix]


@pytest.fixture(scope="session", autouse=True)
def _start_chaos_matrices(request: pytest.FixtureRequest) -> None:
    if any("chaos_matrices" in getattr(item, "fixturenames", ()) for item in request.session.items):
        matrices: ChaosMatrices = request.getfixturevalue("chaos_matrices")
        for matrix in TIMEOUTS:
            matrices.start(matrix)


@pytest.fixture(scope="session")
def chaos_matrices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosMatrices]:
    matrices = ChaosMatrices(tmp_path_factory)
    try:
        yield matrices
    finally:
        for run in matrices.runs.values():
            run.kill()
