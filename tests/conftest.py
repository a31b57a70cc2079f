"""Test tiers: a test without a tier marker is a unit test (no processes, milliseconds)."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.zk_fixtures"]

TIERS = ("unit", "integration", "chaos", "spark", "ansible")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.unit)
