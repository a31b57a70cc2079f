"""The ansible tier: fixtures its modules share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible.harness import PLAY_TIMES, build_wheelhouse


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The strait wheel of this checkout and its runtime dependencies, built once per session."""
    root = tmp_path_factory.mktemp("wheelhouse")
    return build_wheelhouse(root / "wheels", root / "scratch")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report the measured play times (the tier's budget is watched in CI's log)."""
    if PLAY_TIMES:
        terminalreporter.write_sep("-", "ansible play times")
        for play, seconds in PLAY_TIMES.items():
            terminalreporter.write_line(f"{play}: {seconds:.1f} s")
