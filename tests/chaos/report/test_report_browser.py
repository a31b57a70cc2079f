"""The chaos report in a real browser: headless Debian chromium opens ``report.html`` over file://
(integration, slow).

The report is rendered from a realistic synthetic run (``synthetic.write_run``: two scenarios,
faults, a failover, a planted lost write whose value is markup). Chromium is driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``, stdlib only: no chromedriver, no
websocket client), which gives what a DOM dump cannot: the laid-out size of each plot, the
console's messages, every request the page made. A full-page screenshot is taken and its path
printed (it stays in the test's tmp dir).

As in tests/mirror/test_dr_page_browser.py, chromium runs in its own process group, ended
(the whole group) when the test ends, with every host name unresolvable; installed by
``.ci/ensure-chromium``, the test is skipped, saying so, only where it is not installed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from chaos.report import render
from tests.chaos.report.synthetic import PLANTED_VALUE, write_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DEADLINE_S = 60.0
WINDOW = (1280, 1000)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (.ci/ensure-chromium installs Debian's; make setup runs it)"
    ),
]

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


class Chromium:
    """Headless chromium and one page of it, driven over the DevTools protocol on fds 3 and 4.

    Every event chromium sends is kept in ``events`` (method, params), so a test can look for
    console errors, exceptions and requests after the fact.
    """

    def __init__(self, tmp_path: Path) -> None:
        assert CHROMIUM is not None
        to_browser, self._writer = os.pipe()
        self._reader, from_browser = os.pipe()

        def onto_3_and_4() -> None:  # in the child, before exec: chromium reads fd 3 and writes fd 4
            reads, writes = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        argv = [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",  # the test runs as root in CI's container
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # the report needs no network at all
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self._log = (tmp_path / "chromium.err").open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            pass_fds=(3, 4),
            preexec_fn=onto_3_and_4,  # noqa: PLW1509 - only dup(2) and dup2(2) run between fork and exec
            start_new_session=True,
        )
        os.close(to_browser)
        os.close(from_browser)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._buffer = b""
        self._next_id = 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None, *, page: bool = False) -> dict[str, Any]:
        """Send one command (to the page's session when ``page``) and return its result; raise on its error."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self.session
        os.write(self._writer, json.dumps(message).encode() + b"\0")
        answer = self._read_until(lambda m: m.get("id") == self._next_id, f"the answer to {method}")
        assert "error" not in answer, (method, answer["error"])
        result: dict[str, Any] = answer["result"]
        return result

    def wait_event(self, method: str) -> dict[str, Any]:
        """The params of the first ``method`` event, waiting for it if it did not come yet."""
        for name, params in self.events:
            if name == method:
                return params
        return self._read_until(lambda m: m.get("method") == method, method)["params"]

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page=True)
        assert "exceptionDetails" not in answer, answer["exceptionDetails"]
        return answer["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page (not only the window) at ``path``."""
        size = self.call("Page.getLayoutMetrics", page=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": WINDOW[0], "height": size["height"], "scale": 1}
        shot = self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, page=True
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        with contextlib.suppress(OSError, AssertionError):
            os.write(self._writer, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # its helpers (zygote, renderer) too
        self.proc.wait()
        os.close(self._writer)
        os.close(self._reader)
        self._log.close()

    def _read_until(self, wanted: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message: dict[str, Any] = json.loads(raw)
                if "method" in message:
                    self.events.append((message["method"], message.get("params", {})))
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            assert left > 0, f"chromium sent no {what} within {DEADLINE_S} s"
            ready, _, _ = select.select([self._reader], [], [], left)
            if ready:
                chunk = os.read(self._reader, 1 << 20)
                assert chunk, f"chromium closed its DevTools pipe while the test waited for {what}"
                self._buffer += chunk


def problems(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The console errors, uncaught exceptions, log errors (a CSP refusal is one) and dialogs of a page."""
    found = []
    for method, params in events:
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert", "warning"):
            found.append(f"console.{params['type']}: {[a.get('value') for a in params['args']]}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"exception: {params['exceptionDetails']}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            found.append(f"log {params['entry']['level']}: {params['entry']['text']}")
        elif method == "Page.javascriptDialogOpening":
            found.append(f"dialog: {params['message']}")
    return found


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    chromium = Chromium(tmp_path)
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            chromium.call(f"{domain}.enable", page=True)
        metrics = {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False}
        chromium.call("Emulation.setDeviceMetricsOverride", metrics, page=True)
        yield chromium
    finally:
        chromium.close()


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
