"""chaos.report.render: one self-contained report.html from results.json and the histories (no browser)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from chaos.report import ReportError, render
from tests.chaos.report.synthetic import PLANTED_VALUE, Fault, history, scenario, write_history, write_run

pytestmark = pytest.mark.unit

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&\x00\x1b"
# Every element the report itself writes; a value that became markup would add another.
OWN_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2", "h3", "div", "span", "strong",
    "b", "code", "pre", "p", "q", "section", "table", "thead", "tbody", "tr", "th", "td", "a", "wbr", "dl", "dt",
    "dd", "ul", "li", "figure", "figcaption", "svg", "defs", "pattern", "rect", "line", "path", "text",
}  # fmt: skip


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Tags:
    tags = Tags()
    tags.feed(html)
    return tags


def results(*scenarios: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "format": 1,
        "command": "strait chaos run --seed 5",
        "seed": 5,
        "verdict": "fail",
        "scenarios": list(scenarios),
        **top,
    }


def write(directory: Path, data: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "results.json").write_text(json.dumps(data))
    return directory


def test_a_realistic_run_renders_one_self_contained_file(tmp_path: Path) -> None:
    written = write_run(tmp_path, rate=40.0)
    report = render(tmp_path)
    assert report == tmp_path / "report.html"
    html = report.read_text()
    assert not (tmp_path / ".report.html.partial").exists()
    tags = parse(html)
    assert tags.tags <= OWN_TAGS and "script" not in tags.tags and "img" not in tags.tags
    assert "src" not in tags.attributes
    assert re.findall(r'href="([^"]*)"', html) == ["#s0", "#s1"]  # only links within the page
    assert set(re.findall(r"https?://[^\s\"')]+", html)) == {
        "http://www.w3.org/2000/svg"
    }  # the SVG namespace, never fetched
    assert "Content-Security-Policy" in html and "default-src &#x27;none&#x27;; " in html
    assert 'data-verdict="fail"' in html and written["command"] in html
    for n in (0, 1):
        for kind in ("throughput", "latency", "lag"):
            assert f'id="s{n}-{kind}"' in html
    assert html.count('class="fault"') == 3 * 2 + 3 * 1
    assert html.count('data-marker="promote"') == 3
    assert "(showing the first 25 of 40; results.json has them all)" in html
    assert "✓ found (expected)" not in html
    assert PLANTED_VALUE in "".join(tags.text)  # the lost write's value, as text


def test_everything_from_the_history_and_results_is_escaped(tmp_path: Path) -> None:
    run = history(seed=3, duration_s=5.0, rate=20.0, producers=1, faults=[Fault(HOSTILE, HOSTILE, 1.0, 2.0)])
    victim = run.acked[0]
    victim["value"] = HOSTILE
    promote = {"source": HOSTILE, "target": HOSTILE, "planned": False}
    last = run.ops[-1]
    run.ops.append(
        {**last, "index": len(run.ops), "type": "info", "process": "failover", "f": "promote", "value": promote}
    )
    write_history(tmp_path / "h.jsonl", run)
    record = {k: victim[k] for k in ("topic", "partition", "offset", "value", "index")} | {"process": HOSTILE}
    near = [{"process": "nemesis", "f": "start", "nemesis": HOSTILE, "target": HOSTILE, "time": 1.0}]
    anomaly = {"checker": HOSTILE, "name": HOSTILE, "description": HOSTILE, "records": [record], "near": near}
    entry = scenario(HOSTILE, HOSTILE, 1, 5.0, "fail", {HOSTILE: [anomaly], "lost-write": []})
    entry |= {"history": "h.jsonl", "replay": HOSTILE, "error": HOSTILE, "expect": HOSTILE}
    write(tmp_path, results(entry, command=HOSTILE, machine=HOSTILE))
    html = render(tmp_path).read_text()
    tags = parse(html)
    assert tags.tags <= OWN_TAGS, tags.tags - OWN_TAGS
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert not [name for name in tags.attributes if name.startswith("on")]
    assert "\x00" not in html and "\x1b" not in html
    shown = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&quot;&#x27;&amp;\\x00\\x1b"
    assert html.count(shown) >= 10  # names, descriptions, commands, values, fault labels, tooltips, markers
    text = "".join(tags.text)
    assert "<script>alert(1)</script>" in text  # a reader sees the value as it is


def test_a_history_without_lag_samples_says_so_instead_of_a_lag_plot(tmp_path: Path) -> None:
    run = history(seed=4, duration_s=10.0, rate=30.0, producers=1, faults=[], lag_site=None)
    write_history(tmp_path / "quiet" / "history.jsonl", run)
    write(tmp_path, results(scenario("quiet", "nothing happens", 1, 10.0, "pass", {"lost-write": []})))
    html = render(tmp_path).read_text()
    assert 'id="s0-throughput"' in html and 'id="s0-latency"' in html and 'id="s0-lag"' not in html
    assert "No mirror lag samples in this history: no lag plot." in html
    assert "No nemesis or failover events in this history." in html
    assert 'class="fault"' not in html
    assert "No anomalies: every checker that ran passed." in html


def test_a_history_without_sends_plots_only_the_lag(tmp_path: Path) -> None:
    run = history(seed=5, duration_s=6.0, rate=30.0, producers=0, faults=[Fault("kill", "node 1", 1.0, 3.0)])
    write_history(tmp_path / "idle" / "history.jsonl", run)
    write(tmp_path, results(scenario("idle", "no producers", 1, 6.0, "pass", {})))
    html = render(tmp_path).read_text()
    assert 'id="s0-throughput"' not in html and 'id="s0-latency"' not in html and 'id="s0-lag"' in html
    assert "No sends in this history: no throughput or latency to plot." in html
    assert "No checker ran, so there are no anomalies to list." in html


def test_a_scenario_that_errored_gets_its_section_with_the_error_and_no_plots(tmp_path: Path) -> None:
    crashed = scenario("crashed", "the appliance did not start", 8, 3.2, "error", {})
    crashed |= {
        "error": "Traceback (most recent call last):\n  ...\nNodeError: node 2 never became ready",
        "history": None,
    }
    missing = scenario(
        "missing", "its history was never written", 9, 1.0, "error", {"lost-write": []}, skipped=("lost-write",)
    )
    torn = scenario("torn", "a history with a broken middle line", 10, 1.0, "error", {})
    (tmp_path / "torn").mkdir(parents=True)
    (tmp_path / "torn" / "history.jsonl").write_text('{"index": 0, "ty\n{"index": 1}\n')
    empty = scenario("empty", "an empty history", 11, 0.0, "error", {})
    (tmp_path / "empty").mkdir(parents=True)
    (tmp_path / "empty" / "history.jsonl").write_text("")
    write(tmp_path, results(crashed, missing, torn, empty, {"name": "bare"}))
    html = render(tmp_path).read_text()
    assert html.count('class="v v-error"') >= 5
    assert "NodeError: node 2 never became ready" in html
    assert "No plots: results.json names no history for this scenario." in html
    assert "No plots: its history missing/history.jsonl does not exist." in html
    assert re.search(r"No plots: its history could not be read: .*torn/history.jsonl:1: not JSON", html)
    assert "No plots: its history is empty." in html
    assert 'class="chart"' not in html
    assert 'data-verdict="not-run"' in html  # the bare scenario ran no checker the others ran
    assert "5 scenarios: 0 passed, 0 failed, 5 errored" in html


def test_findings_and_skipped_faults_are_shown_with_the_scenario(tmp_path: Path) -> None:
    behind = scenario("behind", "a mirror that never caught up", 12, 60.0, "fail", {})
    behind |= {
        "history": None,
        "findings": ["the mirror did not catch up within 90 s of the heal <east>"],
        "skipped_faults": ["wan-latency: it needs the fault proxy"],
    }
    write(tmp_path, results(behind))
    html = render(tmp_path).read_text()
    assert "Findings besides the checkers:" in html
    assert "the mirror did not catch up within 90 s of the heal &lt;east&gt;" in html
    assert "wan-latency: it needs the fault proxy" in html


def test_a_positive_control_that_found_its_anomaly_shows_it_as_expected(tmp_path: Path) -> None:
    anomaly = {"checker": "lost-write", "name": "lost", "description": "acks=1 lost it", "records": [], "near": []}
    control = scenario(
        "acks1-kill-leader", "acks=1 and a leader SIGKILL", 3, 20.0, "pass", {"lost-write": [anomaly], "duplicate": []}
    )
    control |= {"expect": "lost", "history": None}
    write(tmp_path, results(control, verdict="pass"))
    html = render(tmp_path).read_text()
    assert '<span class="v v-expected">✓ found (expected) · 1</span>' in html
    assert "expects lost" in html and "(a positive control)" in html
    assert '<div class="word">✓ PASS</div>' in html


def test_long_anomaly_lists_and_long_values_are_cut_saying_the_exact_total(tmp_path: Path) -> None:
    records = [{"topic": "t", "partition": 0, "offset": n, "value": "v" * 500} for n in range(20)]
    near = [{"f": "start", "nemesis": "kill", "target": "n", "time": 1.0}] * 9
    anomalies = [
        {"checker": "lost-write", "name": "lost", "description": f"lost {n}", "records": records, "near": near}
        for n in range(1234)
    ]
    write(
        tmp_path,
        results(scenario("big", "many anomalies", 1, 1.0, "fail", {"lost-write": anomalies}) | {"history": None}),
    )
    html = render(tmp_path).read_text()
    assert html.count('class="anomaly"') == 25
    assert '<span class="cut" data-cut="1234">(showing the first 25 of 1,234; results.json has them all)</span>' in html
    assert html.count("… and 12 more (20 records)") == 25
    assert html.count("… and 3 more (9 events)") == 25
    assert html.count("v" * 120 + "… (500 characters)") == 25 * 8
    assert 'data-total="1234"' in html and "1,234 anomalies" in html


@pytest.mark.slow  # about 3 s: making up the history takes most of it
def test_a_hundred_thousand_op_history_makes_a_report_of_a_few_hundred_kilobytes(tmp_path: Path) -> None:
    run = history(seed=9, duration_s=600.0, rate=85.0, producers=1, faults=[Fault("kill", "node 1", 100.0, 110.0)])
    assert len(run.ops) > 100_000
    write_history(tmp_path / "soak" / "history.jsonl", run)
    write(tmp_path, results(scenario("soak", "ten minutes", 1, 600.0, "pass", {"lost-write": []})))
    size = render(tmp_path).stat().st_size
    assert size < 300_000, size


def test_results_that_cannot_make_a_report_raise_report_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no results file at .*results.json"):
        render(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"cannot read results file .*results.json"):
        render(tmp_path)
    for data, message in (
        ([], "must be a JSON object, not list"),
        ({"format": 2, "scenarios": []}, "results format 2; this report reads format 1"),
        ({"format": 1}, "'scenarios' must be a list, not NoneType"),
        ({"format": 1, "scenarios": [{"seed": 1}]}, r"scenarios\[0\] must be an object with a 'name' string"),
    ):
        (tmp_path / "results.json").write_text(json.dumps(data))
        with pytest.raises(ReportError, match=message):
            render(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_a_run_with_no_scenarios_still_renders(tmp_path: Path) -> None:
    write(tmp_path, {"format": 1, "scenarios": []})
    html = render(tmp_path).read_text()
    assert "The run has no scenarios." in html and '<div class="word">✗ FAIL</div>' in html
    assert "(the runner recorded no command)" in html
