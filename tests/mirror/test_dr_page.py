"""The DR status page of the mirror's admin API (``GET /dr``, ``/v1/dr``, ``/v1/links/{name}/lag-history``).

In process (unit): a ``MirrorService`` with a fake DR status source (or none) and links to
unreachable sites: the routes, their shapes and headers, the lag history's bound, and how the
DR statuses are shared between callers. The page in a real browser against a real mirror
process is in ``test_dr_page_browser.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mirror import parse_links
from mirror._dr import DrStatuses
from mirror._lag_history import LagHistories, LagHistory, LagSample
from mirror._service import MirrorService, ServiceReady
from tests.mirror.test_failover import link_table, service
from tests.mirror.test_service import call, serve


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def fake_status(name: str, records: int) -> dict[str, Any]:
    """The shape of ``failover.status.link_status``'s answer, reduced to what these tests read."""
    return {
        "format": 1,
        "link": {"name": name, "source": "east", "target": "west"},
        "at_ms": int(time.time() * 1000),
        "link_state": "paused",
        "rpo": {"records": records, "bytes": records * 100, "exact": True, "partitions": 2},
        "partitions": [
            {"topic": "orders", "partition": 0, "lag_records": records + 1, "rpo_records": records},
            {"topic": "orders", "partition": 1, "lag_records": None, "rpo_records": None},
        ],
    }


class Inline(HTMLParser):
    """The inline <script> and <style> blocks of a page, and every src/href it names."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.blocks: dict[str, list[str]] = {"script": [], "style": []}
        self.references: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.references += [v or "" for k, v in attrs if k in ("src", "href")]
        if tag in self.blocks:
            self._open = tag
            self.blocks[tag].append("")

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.blocks[self._open][-1] += data


def wait_for_points(url: str) -> Any:
    """``call(url)`` once the lag history it answers has a point (bounded)."""
    deadline = time.monotonic() + 10
    while True:
        answer = call(url, "GET")
        if answer[2].get("points") or time.monotonic() > deadline:
            return answer
        time.sleep(0.02)


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_without_a_dr_source_the_page_is_served_and_v1_dr_answers_501(tmp_path: Path) -> None:
    svc = service(tmp_path, link_table("l"))

    def check(ready: ServiceReady) -> None:
        url = ready.admin_url
        status, _, answer = call(f"{url}/v1/dr", "GET")
        assert (status, answer["error"]) == (501, "dr_status_unavailable")
        assert answer["detail"].startswith("this mirror process has no DR status source")
        assert "strait failover status" in answer["detail"]
        status, headers, body = get(f"{url}/dr")
        assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
        assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-store"
        page = Inline()
        page.feed(body.decode())
        # Only this server: every reference is relative or data:, and the policy allows exactly the
        # page's own inline script and style, and fetches to its own origin.
        assert page.references == ["data:,", "v1/dr"], page.references
        assert not re.search(r"\b(src|href)=\"?(https?:)?//", body.decode())
        assert len(page.blocks["script"]) == 1 and len(page.blocks["style"]) == 1
        policy = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
        assert policy == {
            "default-src": "'none'",
            "connect-src": "'self'",
            "script-src": sha256_source(page.blocks["script"][0]),
            "style-src": sha256_source(page.blocks["style"][0]),
            "img-src": "'self' data:",
            "base-uri": "'none'",
            "form-action": "'none'",
            "frame-ancestors": "'none'",
        }
        assert "innerHTML" not in page.blocks["script"][0]  # API values are only ever text
        # The lag history of a running link (the sampler starts with the process), and 404 else.
        status, _, answer = wait_for_points(f"{url}/v1/links/l/lag-history")
        assert status == 200 and answer["name"] == "l" and answer["capacity"] == 720
        assert answer["columns"] == ["at_ms", "lag_records", "lag_seconds", "rpo_records"]
        assert answer["points"] and answer["points"][0][1:] == [0, 0.0, None]
        status, _, answer = call(f"{url}/v1/links/nope/lag-history", "GET")
        assert (status, answer["error"]) == (404, "link_not_found")
        assert answer["detail"] == "no link named 'nope' runs in this mirror (links: l)"
        status, _, answer = call(f"{url}/v1/dr", "GET", data=b"{}")
        assert (status, answer["error"]) == (413, "body_not_accepted")

    serve(svc, check)


def test_v1_dr_answers_the_sources_status_of_every_link_and_the_rpo_reaches_the_lag_history(tmp_path: Path) -> None:
    asked: list[str] = []

    async def source(name: str) -> dict[str, Any]:
        asked.append(name)
        if name == "broken":
            raise ExceptionGroup("a nursery", [ValueError("zookeeper.connect '' names no host")])
        return fake_status(name, 42)

    svc = MirrorService(
        parse_links({"link": [link_table("b"), link_table("a"), link_table("broken")]}),
        tmp_path / "state",
        member_id="m1",
        dr_status=source,
        lag_sample_interval_s=0.05,
        lag_history_points=4,
    )

    def check(ready: ServiceReady) -> None:
        url = ready.admin_url
        status, headers, answer = call(f"{url}/v1/dr", "GET")
        assert status == 200 and headers["cache-control"] == "no-store"
        assert answer["member_id"] == "m1"
        assert [s["link"]["name"] for s in answer["links"]] == ["a", "b", "broken"]
        assert answer["links"][0] == {**fake_status("a", 42), "at_ms": answer["links"][0]["at_ms"]}
        broken = answer["links"][2]
        assert broken["error"] == "the DR status of link 'broken' failed: zookeeper.connect '' names no host"
        assert broken["link"] == {"name": "broken"} and broken["format"] == 1
        # Asked again at once: answered from the one computation of each link.
        assert call(f"{url}/v1/dr", "GET")[2]["links"][:2] == answer["links"][:2]
        assert sorted(asked) == ["a", "b", "broken"]

        def rpo_sampled() -> list[Any]:
            points: list[Any] = call(f"{url}/v1/links/a/lag-history", "GET")[2]["points"]
            return [p for p in points if p[3] is not None]

        deadline = time.monotonic() + 10
        while not rpo_sampled() and time.monotonic() < deadline:
            time.sleep(0.05)
        # Carried by the one sample after it was measured, with the measured lag.
        assert [p[1::2] for p in rpo_sampled()] == [[43, 42]]
        # Four more samples push that one out: only the newest four are kept, oldest first.
        while rpo_sampled() and time.monotonic() < deadline:
            time.sleep(0.05)
        history = call(f"{url}/v1/links/a/lag-history", "GET")[2]
        assert (history["interval_s"], history["capacity"], len(history["points"])) == (0.05, 4, 4)
        times = [p[0] for p in history["points"]]
        assert times == sorted(times) and not rpo_sampled()

    serve(svc, check)


def test_a_lag_history_keeps_the_newest_samples_and_a_dr_measurement_goes_into_one_sample() -> None:
    history = LagHistory(capacity=3)
    for i in range(10):
        history.add(LagSample(at_ms=i, lag_records=i, lag_seconds=0.5, rpo_records=None))
    assert [s.at_ms for s in history.samples()] == [7, 8, 9] and len(history) == 3
    with pytest.raises(ValueError, match="at least one sample, not 0"):
        LagHistory(capacity=0)
    with pytest.raises(ValueError, match="must be positive, not 0"):
        LagHistories(interval_s=0)

    histories = LagHistories(interval_s=5, capacity=3)
    status = {"name": "l", "totals": {"lag_records": 12, "lag_seconds": 3.25}}
    unknown = {"name": "l", "totals": {"lag_records": -1, "lag_seconds": -1}}
    histories.sample([status], 1000)
    histories.note_measured("l", 900, 30, 29)
    histories.note_measured("l", 901, 31, 30)  # the latest one wins
    histories.sample([status], 1001)
    histories.note_measured("l", 901, 31, 30)  # the same measurement again (cached): not sampled twice
    histories.sample([unknown], 1002)
    assert histories.to_json("l")["points"] == [[1000, 12, 3.25, None], [1001, 31, 3.25, 30], [1002, 0, 0.0, None]]
    histories.forget("l")
    assert histories.to_json("l")["points"] == []


def test_dr_statuses_share_one_computation_per_link_and_bound_it() -> None:
    started: list[str] = []
    release = trio.Event()

    async def source(name: str) -> dict[str, Any]:
        started.append(name)
        if name == "slow":
            await trio.sleep_forever()
        await release.wait()
        return {"link": {"name": name}, "n": len(started)}

    async def main() -> None:
        statuses = DrStatuses(source, max_age_s=60, timeout_s=1, clock_ms=lambda: 7)
        answers: list[dict[str, Any]] = []

        async def ask(name: str) -> None:
            answers.append(await statuses.of(name))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(ask, "l")
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert started == ["l"] and answers == [{"link": {"name": "l"}, "n": 1}] * 5
        assert await statuses.of("l") == answers[0]  # younger than max_age_s
        statuses.forget("l")
        assert (await statuses.of("l"))["n"] == 2
        # A caller cancelled mid-way does not strand the others: the next one computes it.
        with trio.move_on_after(0.1):
            await statuses.of("slow")
        assert await statuses.of("slow") == {
            "format": 1,
            "link": {"name": "slow"},
            "at_ms": 7,
            "error": "the DR status of link 'slow' took longer than 1 s",
        }

    trio.run(main)


def test_the_openapi_document_describes_the_dr_routes(tmp_path: Path) -> None:
    svc = service(tmp_path)

    def check(ready: ServiceReady) -> None:
        document = call(f"{ready.admin_url}/openapi.json", "GET")[2]
        paths = document["paths"]
        assert set(paths["/dr"]["get"]["responses"]["200"]["content"]) == {"text/html"}
        assert set(paths["/v1/dr"]["get"]["responses"]) == {"200", "501", "default"}
        assert paths["/v1/links/{name}/lag-history"]["get"]["operationId"] == "getLinkLagHistory"
        assert not any(item["get"].get("security") for p, item in paths.items() if p in ("/dr", "/v1/dr"))
        json.dumps(document)

    serve(svc, check)
