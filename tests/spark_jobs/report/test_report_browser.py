"""The audit report in a real browser: headless Debian chromium opens ``report.html`` over file://
(integration, slow; no Spark).

The report is rendered from a realistic made-up reconcile (``summaries.found``: seven
partitions, three kinds of discrepancy, invalid rows, samples). Chromium is driven over the
DevTools pipe (tests/chromium.py, shared with the chaos report's browser test), which gives
what a DOM dump cannot: the laid-out size of each bar and strip, the console's messages and
the page's requests. The test also shows that the page's Content-Security-Policy is in force:
a style the page did not ship is refused, and the refusal is heard. A full-page screenshot is
taken and its path printed (it stays in the test's tmp dir).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.report import render
from tests.chromium import SKIP_WITHOUT_CHROMIUM, Chromium, open_page, problems
from tests.spark_jobs.report import summaries

pytestmark = [pytest.mark.integration, pytest.mark.slow, SKIP_WITHOUT_CHROMIUM]

# Run in the page by the test (the report itself has no script): what a person would see.
PROBE = """(() => {
  const shown = e => { const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    return {w: r.width, h: r.height, visible: r.width > 0 && r.height > 0 && s.visibility !== "hidden"
      && s.display !== "none"}; };
  const verdict = document.getElementById("verdict");
  return {
    verdict: document.body.dataset.verdict,
    verdictText: verdict.innerText.replace(/\\s+/g, " ").trim(),
    verdictColours: [getComputedStyle(verdict).color, getComputedStyle(verdict).backgroundColor],
    background: getComputedStyle(document.body).backgroundColor,
    scripts: document.scripts.length,
    styled: [...document.querySelectorAll("[style]")].length,
    text: document.body.innerText,
    bars: [...document.querySelectorAll("svg.bars g.bar")].map(g =>
      ({kind: g.dataset.kind, count: g.dataset.count, ...shown(g.querySelector("rect"))})),
    partitions: [...document.querySelectorAll("tr.partition")].map(tr => ({
      topic: tr.dataset.topic, partition: tr.dataset.partition, ...shown(tr),
      strip: tr.querySelector("svg.strip") ? shown(tr.querySelector("svg.strip")) : null,
      lanes: [...tr.querySelectorAll("svg.strip rect[class^='lane-']")].map(shown),
      ticks: [...tr.querySelectorAll("svg.strip line.tick")].map(shown),
    })),
    samples: [...document.querySelectorAll("tr.sample")].map(tr => ({kind: tr.dataset.kind, ...shown(tr)})),
  };
})()"""


def test_the_report_opens_offline_shows_the_verdict_and_partitions_and_refuses_other_styles(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(summaries.found()))
    report = render(out)
    url = report.resolve().as_uri()
    with open_page(tmp_path) as browser:
        look_at(browser, url, tmp_path)


def look_at(browser: Chromium, url: str, tmp_path: Path) -> None:
    browser.call("Page.navigate", {"url": url}, page=True)
    browser.wait_event("Page.loadEventFired")
    seen = browser.evaluate(PROBE)

    # Nothing went wrong loading it: no console error, no CSP refusal, no dialog; the file was the
    # only request; the style block applied (the CSP let it through) and there is no script.
    assert problems(browser.events) == []
    requests = [params["request"]["url"] for method, params in browser.events if method == "Network.requestWillBeSent"]
    assert requests == [url]
    assert seen["background"] == "rgb(238, 242, 246)"
    assert seen["scripts"] == 0 and seen["styled"] == 0

    # The verdict, in words and colour (white on dark red: it reads in grey scale too).
    assert seen["verdict"] == "found"
    assert seen["verdictText"] == "✗ FOUND 1,254 discrepancies 3 invalid rows"
    assert seen["verdictColours"] == ["rgb(255, 255, 255)", "rgb(153, 27, 27)"]
    assert "Found 1,254 discrepancies in 3 of 7 partitions" in seen["text"]
    assert summaries.COMMAND in seen["text"]

    # Bars are laid out, the longest for the most frequent kind.
    bars = {bar["kind"]: bar for bar in seen["bars"]}
    assert list(bars) == ["missing", "different", "extra"]
    assert all(bar["visible"] for bar in bars.values())
    assert bars["missing"]["w"] > 300 > bars["different"]["w"] >= bars["extra"]["w"] > 0

    # Every partition is a visible row with its strip: a lane per known side, a tick per sample.
    rows = {(p["topic"], p["partition"]): p for p in seen["partitions"]}
    assert len(rows) == 7 and all(p["visible"] and p["strip"]["visible"] for p in rows.values())
    assert rows[("orders", "2")]["strip"]["w"] >= 300
    assert [len(rows[("orders", n)]["ticks"]) for n in "20513"] == [25, 3, 1, 0, 0]
    assert all(tick["h"] > 20 for tick in rows[("orders", "2")]["ticks"])  # a vertical line: no width
    assert [lane["w"] > 200 for lane in rows[("orders", "2")]["lanes"]] == [True, True]
    assert len(rows[("payments", "0")]["lanes"]) == 1  # its target's range is unknown
    assert "payments" in seen["text"] and "[0, 16,750)" in seen["text"]
    assert [s["kind"] for s in seen["samples"]] == ["missing"] * 25 + ["different"] * 3 + ["extra"]
    assert all(s["visible"] for s in seen["samples"])

    shot = browser.screenshot(tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    print(f"audit report screenshot: {shot}")

    # The policy is in force, and a refusal would have been heard: a style the page did not ship
    # is refused (the text keeps its colour) and the refusal arrives as a problem.
    colour = browser.evaluate("getComputedStyle(document.body).color")
    browser.evaluate(
        "document.head.append(Object.assign(document.createElement('style'), {textContent: 'body {color: red}'}))"
    )
    browser.wait_event("Log.entryAdded")
    refused = problems(browser.events)
    assert len(refused) == 1 and "Content Security Policy" in refused[0], refused
    assert browser.evaluate("getComputedStyle(document.body).color") == colour != "rgb(255, 0, 0)"
