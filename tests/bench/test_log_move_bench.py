"""The log dir move benchmark (bench/log_move_bench.py) runs end to end on a tiny log."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import log_move_bench


def test_a_tiny_run_prints_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_move_bench.main(["--log-mib", "1", "--repeats", "1", "--idle-seconds", "0.05", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    for figure in ("move_s", "move_mib_s", "move_max_us", "idle_p99_us"):
        assert f"| {figure} |" in out
    assert not list(tmp_path.iterdir())  # its log dirs are removed
