"""chaos.checkers.check: every checker in order, verdicts, JSON, limits, and errors that name the entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.checkers import ANOMALY_LIMIT, CHECKERS, CheckerError, check
from chaos.history import History, load
from tests.chaos.checkers.builder import Builder, log, rec

pytestmark = pytest.mark.unit

NAMES = [
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "moved",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "skipped-read",
    "commit-regression",
    "unseen",
    "mirror-divergence",
    "rpo-accuracy",
    "exactly-once",
]


def test_every_checker_is_registered_in_report_order_with_a_one_line_description() -> None:
    assert list(CHECKERS) == NAMES
    for name, checker in CHECKERS.items():
        assert checker.name == name and checker.description and "\n" not in checker.description


def test_an_empty_history_is_skipped_by_every_checker_never_passed() -> None:
    results = check(History())
    assert [(r.name, r.verdict, r.checked, r.anomalies) for r in results] == [(n, "skipped", 0, ()) for n in NAMES]


def test_check_runs_the_named_checkers_in_the_order_given_and_refuses_an_unknown_name() -> None:
    b = Builder()
    b.send("producer-0", "a", 0)
    b.read("east", log(["a"]))
    assert [(r.name, r.verdict) for r in check(b.history(), ["moved", "lost-write"])] == [
        ("moved", "pass"),
        ("lost-write", "pass"),
    ]
    with pytest.raises(CheckerError, match=r"unknown checker.*'lost'.*lost-write, duplicate"):
        check(b.history(), ["lost"])


def test_an_entry_the_checkers_cannot_read_is_an_error_naming_it() -> None:
    b = Builder()
    b.read("east", [{"topic": "t", "partition": 0, "offset": "7", "value": "a"}])
    with pytest.raises(CheckerError, match=r"a record of history entry #1 \(reader read\): 'offset' must be int"):
        check(b.history())


def test_results_are_json_and_survive_a_saved_history(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        invoked = history.invoke("producer-0", "send", topic="t", value="a")
        history.complete(invoked, "ok", topic="t", partition=0, offset=0, value="a")
        history.nemesis("start", "kill-leader", "east node 1")
        history.append("ok", "reader", "read", site="east", role="primary", final=True, records=[])
    (lost,) = [r for r in check(load(path)) if r.name == "lost-write"]
    assert lost.verdict == "fail"
    document = json.loads(json.dumps(lost.to_json()))
    assert document["anomalies"][0]["checker"] == "lost-write"
    assert document["anomalies"][0]["records"] == [
        {
            "topic": "t",
            "partition": 0,
            "offset": 0,
            "value": "a",
            "process": "producer-0",
            "index": 1,
            "op": "send",
            "site": "east",  # the primary, where producers wrote: no promote moved it
        }
    ]
    assert [entry["nemesis"] for entry in document["anomalies"][0]["near"]] == ["kill-leader"]
    assert set(document) == {"name", "description", "verdict", "checked", "count", "omitted", "anomalies"}


def test_a_result_lists_at_most_the_limit_of_anomalies_and_counts_them_all() -> None:
    b = Builder()
    values = [f"v{n}" for n in range(2 * (ANOMALY_LIMIT + 20))]
    b.sends("producer-0", values)
    b.read("east", [rec(n, value) for n, value in enumerate(values) if n % 2])  # every other write lost
    (result,) = check(b.history(), ["lost-write"])
    assert len(result.anomalies) == ANOMALY_LIMIT
    assert (result.count, result.omitted) == (ANOMALY_LIMIT + 20, 20)
