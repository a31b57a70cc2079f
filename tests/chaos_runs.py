"""pytest plugin: the chaos matrices run once per test run, in the background, for whoever reads them.

``chaos_matrices`` (session) starts ``strait chaos run --matrix NAME --seed SEED`` on first
request of NAME, as an operator runs it (a subprocess; its own appliances). Its runs go on while
other tests run; :meth:`ChaosRun.result` waits for one. When a selected test uses it, both
matrices start with the session's first test, so that the tests before theirs run meanwhile.
``tests/chaos/test_matrix.py`` checks both; the ledger's agreement test
(``tests/spark_jobs/test_ledger_chaos.py``) reads their histories instead of making its own.

With pytest-xdist (``make test`` runs two workers) each worker is a session of its own, and
the readers may be on either. A matrix is still run once: its directory is made under the run's
shared base directory, and the worker that makes it (``mkdir`` is atomic) starts the run; the
others find it there. The run is wrapped so that its exit status lands in a file, which every
worker waits for; the starting worker, at its session's end, waits for the run (until its
deadline) and only then stops it.
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
#: The wrapper that writes the run's exit status to ``exit_status`` when it ends.
_WRAPPER = '"$@"; status=$?; echo $status > exit_status.tmp && mv exit_status.tmp exit_status; exit $status'


class ChaosRun:
    """``strait chaos run ARGS`` in ``directory``, running while the tests wait for it.

    ``start`` launches it (this process owns it); without, it is another worker's run, found by
    its directory: its ``started`` file gives its deadline.
    """

    def __init__(self, directory: Path, *args: str, timeout: float, start: bool) -> None:
        self.directory = directory
        self.output = directory / "output.txt"
        self.process: subprocess.Popen[bytes] | None = None
        started = directory / "started"
        if start:
            argv = [sys.executable, "-m", "strait.cli", "chaos", "run", "--seed", str(SEED), "--dir", str(directory)]
            with self.output.open("w") as out:
                self.process = subprocess.Popen(
                    ["sh", "-c", _WRAPPER, "sh", *argv, *args],
                    cwd=directory,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            started.write_text(json.dumps({"wall": time.time(), "timeout": timeout}))
        else:
            deadline = time.monotonic() + 60
            while not started.exists() and time.monotonic() < deadline:  # the owner is starting it
                time.sleep(0.2)
        given = json.loads(started.read_text())
        self.deadline = time.monotonic() + given["timeout"] - (time.time() - given["wall"])

    def result(self) -> tuple[int, dict[str, Any], str]:
        """Wait (until its deadline) for it to end: its exit status, results.json and output."""
        status = self.directory / "exit_status"
        while not status.exists():
            if time.monotonic() > self.deadline:
                self.kill()
                raise TimeoutError(f"the chaos run in {self.directory} did not end within its timeout")
            time.sleep(0.5)
        results = json.loads((self.directory / "results.json").read_text())
        return int(status.read_text()), results, self.output.read_text()

    def finish(self) -> None:
        """The owner, at its session's end: let the run end (until its deadline), then stop it."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # as Ctrl-C: it heals, unmounts and stops its appliances
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class ChaosMatrices:
    """The run's matrix runs, each started on first request (by whichever worker asks first)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        base = factory.getbasetemp()
        # A pytest-xdist worker's base directory is one per worker under the run's own.
        self.root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        self.runs: dict[str, ChaosRun] = {}

    def __getitem__(self, matrix: str) -> ChaosRun:
        return self.start(matrix)

    def start(self, matrix: str) -> ChaosRun:
        """The run of ``matrix``, started now unless it was before (here or by another worker)."""
        if matrix not in self.runs:
            directory = self.root / f"matrix-{matrix}"
            try:
                directory.mkdir()
                owner = True
            except FileExistsError:
                owner = False
            self.runs[matrix] = ChaosRun(directory, "--matrix", matrix, timeout=TIMEOUTS[matrix], start=owner)
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
            run.finish()
