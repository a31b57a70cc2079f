"""pytest plugin: record which API versions each real client sent to the nodes the tests started.

With ``--client-usage PATH`` every ``NodeProcess`` the harness stops is first asked for its
``/metrics`` (``strait_client_requests_total{client,api,version}``, ``node.metrics``); the
requests of the clients ``strait.compat.CLIENTS`` knows are recorded under the test that was
running (its node id). At the end of the session (the xdist controller, after every worker has
handed in what it saw) PATH is rewritten: the entries of the tests that ran are replaced, the
others kept (``strait.compat.merge_usage``), so a run of a few tests updates only theirs.
``python -m strait.compat`` then makes docs/compatibility.md.

A node killed with SIGKILL, or stopped by something else than the harness, is not read: the
record is a lower bound of what the clients did.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from node.protocol import all_schemas
from strait.compat import Usage, dump_usage, family_of, load_usage, merge_usage

SCRAPE_TIMEOUT_S = 5.0
_API_KEYS = {api.name: api.api_key for api in all_schemas()}


class _Recorder:
    def __init__(self) -> None:
        self.enabled = False
        self.current: str | None = None  # the running test's node id
        self.observed: Usage = {}
        self.ran: set[str] = set()

    def add(self, family: str, test: str, api_key: int, version: int) -> None:
        versions = self.observed.setdefault(family, {}).setdefault(test, {}).setdefault(api_key, [])
        if version not in versions:
            versions.append(version)

    def merge_from(self, observed: Usage, ran: list[str]) -> None:
        for family, tests in observed.items():
            for test, apis in tests.items():
                for key, versions in apis.items():
                    for v in versions:
                        self.add(family, test, key, v)
        self.ran.update(ran)


RECORDER = _Recorder()


def record_node(admin_url: str) -> None:
    """Read one node's client request counts into the record (nothing unless --client-usage is on).

    Called by the harness before it stops a node; a node that does not answer within
    SCRAPE_TIMEOUT_S is skipped (it is being stopped anyway)."""
    if not RECORDER.enabled or RECORDER.current is None or not admin_url:
        return
    try:
        with urllib.request.urlopen(f"{admin_url}/metrics", timeout=SCRAPE_TIMEOUT_S) as answer:
            text = answer.read().decode("utf-8")
    except OSError:
        return
    for family in text_string_to_metric_families(text):
        if family.name != "strait_client_requests":
            continue
        for sample in family.samples:
            if sample.name != "strait_client_requests_total" or sample.value <= 0:
                continue
            client = family_of(sample.labels["client"])
            key = _API_KEYS.get(sample.labels["api"])
            if client is not None and key is not None:
                RECORDER.add(client, RECORDER.current, key, int(sample.labels["version"]))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--client-usage",
        metavar="PATH",
        default=None,
        help="record which API versions each real client sent to the test nodes into PATH "
        "(docs/client-usage.json; see strait/compat.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    RECORDER.enabled = config.getoption("--client-usage") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Note the running test (a module-scoped node stops in the teardown of the module's last test,
    which is then credited with all the module's requests to it)."""
    RECORDER.current = item.nodeid
    RECORDER.ran.add(RECORDER.current)
    try:
        return (yield)
    finally:
        RECORDER.current = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not RECORDER.enabled:
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the record to the controller
        observed = {
            f: {t: {str(k): v for k, v in apis.items()} for t, apis in tests.items()}
            for f, tests in RECORDER.observed.items()
        }
        workeroutput["client_usage"] = json.dumps({"observed": observed, "ran": sorted(RECORDER.ran)})
        return
    path = Path(session.config.getoption("--client-usage"))
    path.write_text(dump_usage(merge_usage(load_usage(path), RECORDER.observed, RECORDER.ran)))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: a worker ended; take its record."""
    handed = getattr(node, "workeroutput", {}).get("client_usage")
    if handed:
        data = json.loads(handed)
        observed: Usage = {
            f: {t: {int(k): v for k, v in apis.items()} for t, apis in tests.items()}
            for f, tests in data["observed"].items()
        }
        RECORDER.merge_from(observed, data["ran"])
