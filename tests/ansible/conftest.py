"""The ansible tier: fixtures its modules share; a worker hands its play times on (tests/conftest.py reports them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.harness import PLAY_TIMES, build_wheelhouse


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The strait wheel of this checkout and its runtime dependencies, built once per session."""
    root = tmp_path_factory.mktemp("wheelhouse")
    return build_wheelhouse(root / "wheels", root / "scratch")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its play times to the controller, which reports them."""
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if output is not None and PLAY_TIMES:
        output["ansible_play_times"] = json.dumps(PLAY_TIMES)
