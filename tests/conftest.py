"""Test tiers: a test without a tier marker is a unit test (no processes, milliseconds)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ansible.harness import PLAY_TIMES

pytest_plugins = ["tests.zk_fixtures", "tests.chaos_runs"]

TIERS = ("unit", "integration", "chaos", "spark", "ansible")


# Fixtures that start two sites (two ZooKeeper chroots, six or more nodes): their tests are slow.
TWO_SITE_FIXTURES = frozenset({"two_sites"})


def _run_order(item: pytest.Item) -> int:
    """Where a test runs: the ansible tier first (its module takes minutes: started first, it does
    not hold up the end of a run on two workers), then most, while the chaos matrices run in the
    background (tests/chaos_runs.py), last the tests that read the matrices' results."""
    if "chaos_matrices" in getattr(item, "fixturenames", ()):
        return 2
    return 0 if item.get_closest_marker("ansible") else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_run_order)  # stable: the order within each group is pytest's
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)  # the session-wide SparkSession (tests/spark_jobs/conftest.py)
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.unit)
        if TWO_SITE_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _sigpipe_stays_ignored() -> Iterator[None]:
    """A test must not leave SIGPIPE at its default: the next write to a closed socket kills pytest.

    Python ignores SIGPIPE; ``strait``'s executable restores the default (for pipes into ``head``).
    CI once died with exit 141 in the middle of a run because an in-process CLI call had done so.
    """
    before = signal.getsignal(signal.SIGPIPE)
    yield
    after = signal.getsignal(signal.SIGPIPE)
    if after != before:
        signal.signal(signal.SIGPIPE, before)
        pytest.fail(f"the test changed SIGPIPE's handler from {before!r} to {after!r}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: a worker ended; keep the ansible play times it measured."""
    PLAY_TIMES.update(json.loads(getattr(node, "workeroutput", {}).get("ansible_play_times", "{}")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report the ansible tier's measured play times (its budget is watched in CI's log)."""
    if PLAY_TIMES:
        terminalreporter.write_sep("-", "ansible play times")
        for play, seconds in PLAY_TIMES.items():
            terminalreporter.write_line(f"{play}: {seconds:.1f} s")
