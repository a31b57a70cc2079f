"""The chaos report in a real browser: headless Debian chromium opens ``report.html`` over file://
(integration, slow).

The report is rendered from a realistic synthetic run (``synthetic.write_run``: two scenarios,
faults, a failover, a planted lost write whose value is markup). Chromium is driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``, stdlib only: no chromedriver, no
websocket client; tests/chromium.py, shared with the audit report's browser test), which gives
what a DOM dump cannot: the laid-out size of each plot, the console's messages, every request
the page made. A full-page screenshot is taken and its path printed (it stays in the test's tmp dir).

As in tests/mirror/test_dr_page_browser.py, chromium runs in its own process group, ended
(the whole group) when the test ends, with every host name unresolvable; installed by
``.ci/ensure-chromium``, the test is skipped, saying so, only where it is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.report import render
from tests.chaos.report.synthetic import PLANTED_VALUE, write_run
from tests.chromium import SKIP_WITHOUT_CHROMIUM, Chromium, open_page, problems

pytestmark = [pytest.mark.integration, pytest.mark.slow, SKIP_WITHOUT_CHROMIUM]

# Run in the page by the test (the report itself has no script): what a person would see.
PROBE = """(() => {
  const shown = e => { const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    return {w: r.width, h: r.height, visible: r.width > 0 && r.height > 0 && s.visibility !== "hidden"
      && s.display !== "none"}; };
  const bbox = e => { const b = e.getBBox(); return {w: b.width, h: b.height}; };
  return {
    verdict: document.body.dataset.verdict,
    background: getComputedStyle(document.body).backgroundColor,
    scripts: document.scripts.length,
    charts: [...document.querySelectorAll("svg.chart")].map(svg => ({
      id: svg.id, ...shown(svg),
      faults: [...svg.querySelectorAll("rect.fault")].map(r => ({n: r.dataset.fault, ...shown(r)})),
      markers: [...svg.querySelectorAll("line.marker")].map(m => m.dataset.marker),
      data: [...svg.querySelectorAll("path[class^='s-']")].map(p => ({cls: p.getAttribute("class"), ...bbox(p)})),
      labels: [...svg.querySelectorAll("text.fault-label")].map(t => t.textContent),
    })),
    cells: [...document.querySelectorAll("td[data-checker]")].map(td =>
      [td.closest("tr").dataset.scenario, td.dataset.checker, td.dataset.verdict, td.textContent]),
    anomalies: [...document.querySelectorAll("tr.anomaly")].map(tr =>
      ({checker: tr.dataset.checker, name: tr.dataset.name, text: tr.textContent, ...shown(tr)})),
    cuts: [...document.querySelectorAll("[data-cut]")].map(e => [e.dataset.cut, e.textContent]),
    command: document.getElementById("command").textContent,
  };
})()"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    with open_page(tmp_path) as chromium:
        yield chromium


def test_the_report_opens_offline_and_shows_its_plots_and_the_planted_anomaly(
    browser: Chromium, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    results = write_run(run)
    report = render(run)
    assert report.stat().st_size < 1_000_000

    url = report.resolve().as_uri()
    browser.call("Page.navigate", {"url": url}, page=True)
    browser.wait_event("Page.loadEventFired")
    seen = browser.evaluate(PROBE)

    # The channel that would carry an error works: a console.error of our own arrives.
    browser.evaluate('console.error("probe: the console is heard")')
    browser.wait_event("Runtime.consoleAPICalled")
    heard = problems(browser.events)
    assert heard[-1] == "console.error: ['probe: the console is heard']", heard
    assert heard[:-1] == [], heard  # nothing else: no error, no CSP refusal, no dialog

    # Self-contained: the file itself was the only request; the style block applied (CSP allowed it).
    requests = [params["request"]["url"] for method, params in browser.events if method == "Network.requestWillBeSent"]
    assert requests == [url]
    assert seen["background"] == "rgb(243, 244, 246)"
    assert seen["scripts"] == 0
    assert seen["verdict"] == "fail" and seen["command"] == results["command"]

    # The plots are there, laid out, with their data and the faults shaded and labelled.
    charts = {chart["id"]: chart for chart in seen["charts"]}
    assert set(charts) == {f"s{n}-{kind}" for n in (0, 1) for kind in ("throughput", "latency", "lag")}
    for name, chart in charts.items():
        assert chart["visible"] and chart["w"] > 900 and chart["h"] > 150, (name, chart)
        assert chart["data"] and all(path["w"] > 0 for path in chart["data"]), (name, chart["data"])
        faults = chart["faults"]
        assert faults and all(f["visible"] and f["w"] > 10 for f in faults), (name, faults)
    for kind in ("throughput", "latency", "lag"):
        assert [f["n"] for f in charts[f"s0-{kind}"]["faults"]] == ["1", "2"]
        assert charts[f"s0-{kind}"]["labels"] == ["1 kill-leader", "2 partition-node"]
        assert [f["n"] for f in charts[f"s1-{kind}"]["faults"]] == ["1"]
        assert charts[f"s1-{kind}"]["markers"] == ["promote"]
        assert charts[f"s1-{kind}"]["labels"] == ["1 site-loss", "promote east→west (unplanned)"]
    assert {path["cls"] for path in charts["s0-latency"]["data"]} == {"s-dots", "s-p50", "s-p99"}

    # The verdicts table, and the anomaly table with the planted lost write, its value as text.
    cells = {(scenario, checker): (verdict, text) for scenario, checker, verdict, text in seen["cells"]}
    assert cells[("kill-leader", "lost-write")] == ("fail", "✗ FAIL · 1")
    assert cells[("kill-leader", "duplicate")] == ("fail", "✗ FAIL · 40")
    assert cells[("site-loss", "unseen")][0] == "skipped"
    lost = [row for row in seen["anomalies"] if row["checker"] == "lost-write"]
    assert len(lost) == 1 and lost[0]["name"] == "lost" and lost[0]["visible"]
    assert PLANTED_VALUE in lost[0]["text"] and "start kill-leader on east node 2" in lost[0]["text"]
    assert len([row for row in seen["anomalies"] if row["checker"] == "duplicate"]) == 25
    assert seen["cuts"] == [["40", "(showing the first 25 of 40; results.json has them all)"]]

    shot = browser.screenshot(tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    print(f"chaos report screenshot: {shot}")
