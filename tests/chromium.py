"""Headless Debian chromium driven over the DevTools protocol on a pipe, for the reports' browser tests.

``--remote-debugging-pipe`` and the stdlib only: no chromedriver, no websocket client. This
gives what a DOM dump cannot: the laid-out size of each element, the console's messages, every
request the page made, a full-page screenshot. Chromium runs in its own process group, ended
(the whole group) when the page is closed, with every host name unresolvable (a report needs
no network). Installed by ``.ci/ensure-chromium``; a test module skips itself with
:data:`SKIP_WITHOUT_CHROMIUM` where it is not installed.

Used by tests/chaos/report/test_report_browser.py and tests/spark_jobs/report/test_report_browser.py.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "SKIP_WITHOUT_CHROMIUM", "WINDOW", "Chromium", "open_page", "problems"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DEADLINE_S = 60.0
WINDOW = (1280, 1000)

SKIP_WITHOUT_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (.ci/ensure-chromium installs Debian's; make setup runs it)"
)


def headless_argv(tmp_path: Path) -> list[str]:
    """Headless chromium with a private profile under ``tmp_path`` and nothing running in the
    background; a test adds its own network rules and mode."""
    assert CHROMIUM is not None
    return [
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
    ]


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
            *headless_argv(tmp_path),
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


@contextlib.contextmanager
def open_page(tmp_path: Path) -> Iterator[Chromium]:
    """A chromium with one page of :data:`WINDOW`'s size, its Page, Runtime, Log and Network events on; closed after."""
    chromium = Chromium(tmp_path)
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            chromium.call(f"{domain}.enable", page=True)
        metrics = {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False}
        chromium.call("Emulation.setDeviceMetricsOverride", metrics, page=True)
        yield chromium
    finally:
        chromium.close()
