"""Test tiers: a test without a tier marker is a unit test (no processes, milliseconds)."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.zk_fixtures"]

TIERS = ("unit", "integration", "chaos", "spark", "ansible")


# Fixtures that start two sites (two ZooKeeper chroots, six or more nodes): their tests are slow.
TWO_SITE_FIXTURES = frozenset({"two_sites"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)  # the session-wide SparkSession (tests/spark_jobs/conftest.py)
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.unit)
        if TWO_SITE_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
