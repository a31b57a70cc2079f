"""Test tiers: a test without a tier marker is a unit test (no processes, milliseconds)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from tests.ansible.harness import PLAY_TIMES

pytest_plugins = ["tests.zk_fixtures", "tests.chaos_runs", "tests.client_usage"]

# No Hypothesis deadline: speed lives in bench/, never in a timed test, and an example that took
# 480 ms on a loaded machine (200 ms is Hypothesis's default) failed a test of behaviour.
settings.register_profile("strait", deadline=None)
settings.load_profile("strait")

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


#: Tests after which this process had many file descriptors open: test -> (open, highest). A
#: process whose descriptors pass 1023 breaks select()-based libraries (py4j, PySpark's bridge),
#: so the report names the tests that left many open.
FD_NOTES: dict[str, tuple[int, int]] = {}
FD_NOTE_AT = 256
_FD_LAST = [0]  # the open count after the previous test of this process


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    grew, _FD_LAST[0] = len(fds) - _FD_LAST[0], len(fds)
    if len(fds) >= FD_NOTE_AT or max(fds) >= FD_NOTE_AT or grew >= 50:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        FD_NOTES[f"{worker} {nodeid}"] = (len(fds), max(fds))


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the notes to the controller
        workeroutput["fd_notes"] = json.dumps(FD_NOTES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: a worker ended; keep the ansible play times and fd notes it made."""
    output = getattr(node, "workeroutput", {})
    PLAY_TIMES.update(json.loads(output.get("ansible_play_times", "{}")))
    FD_NOTES.update({k: tuple(v) for k, v in json.loads(output.get("fd_notes", "{}")).items()})


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report the ansible tier's measured play times (its budget is watched in CI's log), and the
    tests after which a test process held many file descriptors."""
    if PLAY_TIMES:
        terminalreporter.write_sep("-", "ansible play times")
        for play, seconds in PLAY_TIMES.items():
            terminalreporter.write_line(f"{play}: {seconds:.1f} s")
    if FD_NOTES:
        # In run order per worker: the first lines name the tests after which the count jumped.
        terminalreporter.write_sep(
            "-", f"tests after which a process held >= {FD_NOTE_AT} descriptors or 50 more (open, highest)"
        )
        for test, (count, highest) in sorted(FD_NOTES.items(), key=lambda kv: kv[0].split(" ")[0])[:40]:
            terminalreporter.write_line(f"{count:5d} {highest:5d}  {test}")
