"""The ansible tier: fixtures its modules share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible.harness import build_wheelhouse


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The strait wheel of this checkout and its runtime dependencies, built once per session."""
    root = tmp_path_factory.mktemp("wheelhouse")
    return build_wheelhouse(root / "wheels", root / "scratch")
