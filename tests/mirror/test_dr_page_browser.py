"""The DR status page in a real browser: headless Debian chromium against ``/dr`` of a real
``strait mirror start`` process between two real sites (integration, slow).

The link is paused and N records are produced on the source, so the "RPO if you fail over now"
holds still; the page's numbers (read from the DOM chromium dumps after running the page's
script) must equal what ``strait failover status --json`` prints for the same link, and N. A
screenshot is taken and its path printed (it stays in the test's tmp dir).

Chromium runs with every host name but 127.0.0.1 unresolvable: the page needs no network but
the admin API. Installed by ``.ci/ensure-chromium`` (``make setup``); the test is skipped,
saying so, only where it is not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import trio

from failover.state import open_store
from tests.chromium import headless_argv
from tests.mirror.conftest import Site
from tests.mirror.test_service import LINK, TOPIC, MirrorProcess, create, ends, produce, wait_mirrored, write_links
from tests.node.harness import wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_TIMEOUT_S = 90.0
VIRTUAL_TIME_MS = 12_000  # the page's first load and two refreshes (every 5 s), in the browser's virtual time
PAUSED_RECORDS = 250  # produced while the link is paused: the RPO
PARTITION_FIELDS = ("state", "source_end", "mirrored_end", "lag_records", "rpo_records", "rpo_bytes", "rpo_exact")
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (.ci/ensure-chromium installs Debian's; make setup runs it)"
    ),
]


class DrPage(HTMLParser):
    """What the DR page shows, read from its DOM by the ``data-*`` attributes it documents
    (``mirror._dr_page``): per link its fields, per partition row its cells, the journal rows."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.links: dict[str, dict[str, str]] = {}
        self.texts: dict[str, str] = {}  # data-field of the link, or an element id -> its text
        self.partitions: dict[str, dict[tuple[str, int], dict[str, str]]] = {}
        self.journal: dict[str, list[int]] = {}
        self.banners: dict[str, list[str]] = {}
        self.chart_points: dict[str, int] = {}
        self.hidden: dict[str, bool] = {}  # element id -> hidden
        self._link: str | None = None
        self._row: tuple[str, int] | None = None
        self._stack: list[tuple[str, str | None]] = []  # (tag, key whose text is collected)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        key: str | None = None
        if tag == "body":
            self.body = a
        if "id" in a:
            key = f"#{a['id']}"
            self.hidden[str(a["id"])] = "hidden" in a
        if tag == "section" and "data-link" in a:
            self._link = str(a["data-link"])
            self.links[self._link], self.partitions[self._link] = {}, {}
            self.journal[self._link], self.banners[self._link] = [], []
        link = self._link
        if link is not None:
            if tag == "tr" and "data-topic" in a:
                self._row = (str(a["data-topic"]), int(str(a["data-partition"])))
                self.partitions[link][self._row] = {}
            if tag == "tr" and "data-journal-seq" in a:
                self.journal[link].append(int(str(a["data-journal-seq"])))
            if "data-banner" in a:
                self.banners[link].append(str(a["data-banner"]))
            if tag == "svg":
                self.chart_points[link] = int(str(a.get("data-points") or 0))
            if "data-field" in a:
                field, value = str(a["data-field"]), str(a.get("data-value") or "")
                if self._row is not None:
                    self.partitions[link][self._row][field] = value
                else:
                    self.links[link][field] = value
                    key = f"{link}/{field}"
        if tag not in VOID:
            self._stack.append((tag, key))

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            open_tag, _ = self._stack.pop()
            if open_tag == "tr":
                self._row = None
            if open_tag == "section":
                self._link = None
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, key in self._stack:
            if key is not None:
                self.texts[key] = self.texts.get(key, "") + data


def chromium(tmp_path: Path, name: str, *args: str) -> tuple[str, str]:
    """Run headless chromium with ``args``, in its own process group, ended (the whole group)
    when it returns or after ``CHROMIUM_TIMEOUT_S``; its (stdout, stderr)."""
    assert CHROMIUM is not None
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    argv = [
        *headless_argv(tmp_path),
        "--enable-logging=stderr",
        "--v=0",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # no network but the admin API
        f"--virtual-time-budget={VIRTUAL_TIME_MS}",
        *args,
    ]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            code = proc.wait(CHROMIUM_TIMEOUT_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its helpers (zygote, renderer) too
            proc.wait()
    text, log = out.read_text(errors="replace"), err.read_text(errors="replace")
    assert code == 0, f"chromium exited with {code}:\n{log[-3000:]}"
    return text, log


def screenshot(tmp_path: Path, mirror: MirrorProcess, name: str) -> Path:
    """A PNG of the page as a 1280x1000 window shows it, in ``tmp_path`` (its path is printed)."""
    shot = tmp_path / name
    chromium(tmp_path, name, f"--screenshot={shot}", "--window-size=1280,1000", f"{mirror.url}/dr")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"DR page screenshot: {shot}")
    return shot


def failover_status(topology: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "strait.cli", "failover", "status", "--json", "--topology", str(topology)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def write_topology(path: Path, east: Site, west: Site, mirror: MirrorProcess) -> Path:
    path.write_text(
        f"""# the two sites and the mirror of this test, for `strait failover status`
[sites.east]
bootstrap = "{east.bootstrap}"
zookeeper = "{east.zk_connect}"

[sites.west]
bootstrap = "{west.bootstrap}"
zookeeper = "{west.zk_connect}"

[[link]]
name = "{LINK}"
source = "east"
target = "west"
mirror_admin = "{mirror.url}"
token_file = "{mirror.token_file}"
"""
    )
    return path


def journal_some_steps(west: Site) -> None:
    """Three journal entries in the DR state (west's ZooKeeper), written as every failover command
    writes them (``DrStore``): an operation that looks and changes nothing, so the page has a
    journal to show while the state stays ``mirroring`` at epoch 0."""

    async def main() -> None:
        async with open_store(west.zk_connect, LINK, "east", "west", timeout_s=10) as store:
            state = await store.begin(await store.state(), "page-test", {"by": "test_dr_page_browser"})
            state = await store.record(state, "look", {"rpo_records": PAUSED_RECORDS})
            await store.finish(state)

    trio.run(main)


def assert_partitions_shown(page: DrPage, status: dict[str, Any]) -> None:
    """The page's partition rows are the status's, cell by cell."""
    rows = {(r["topic"], r["partition"]): r for r in status["partitions"]}
    assert set(page.partitions[LINK]) == set(rows)
    for key, row in rows.items():
        cells = page.partitions[LINK][key]
        for field in PARTITION_FIELDS:
            assert cells[field.replace("_", "-")] == as_value(row[field]), (key, field, cells, row)


def as_value(value: Any) -> str:
    """A JSON value as the page writes it into ``data-value`` (JavaScript's ``String``; null: "")."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def test_the_dr_page_shows_in_a_browser_what_failover_status_says(two_sites: tuple[Site, Site], tmp_path: Path) -> None:
    east, west = two_sites
    create(east, TOPIC, 3)
    produce(east, 300, "a-")
    links = write_links(tmp_path / "links.toml", east, west, zookeeper=west.zk_connect)
    mirror = MirrorProcess(tmp_path / "mirror", links)
    try:
        mirror.start()
        token = mirror.token_file.read_text().strip()
        wait_mirrored(east, west)
        mirrored = ends(west)
        status, body = mirror.http("POST", f"/v1/links/{LINK}/pause", token=token)
        assert status == 200 and body["paused"] is True, body
        produce(east, PAUSED_RECORDS, "b-")
        source_ends = ends(east)
        assert sum(source_ends.values()) - sum(mirrored.values()) == PAUSED_RECORDS
        journal_some_steps(west)
        topology = write_topology(tmp_path / "topology.toml", east, west, mirror)

        # The lag chart has something to draw: samples (one every 5 s) since the pause. A paused
        # link's copiers fetch nothing, so its own status does not see the new records: a sample
        # has them once the DR status measured them (GET /v1/dr, as the page does).
        mirror.get("/v1/dr")

        def lag_sampled() -> bool:
            points = mirror.get(f"/v1/links/{LINK}/lag-history")["points"]
            return len(points) >= 2 and points[-1][1] == PAUSED_RECORDS

        wait_for("the lag history to show the paused records", lag_sampled, timeout=30)

        before = failover_status(topology)
        dom, log = chromium(tmp_path, "dump-dom", "--dump-dom", f"{mirror.url}/dr")
        after = failover_status(topology)
        (cli,) = before["links"]
        assert ends(west) == mirrored and ends(east) == source_ends  # nothing moved meanwhile
        for stable in ("rpo", "partitions"):
            assert _numbers(after["links"][0][stable]) == _numbers(cli[stable]), stable

        # The page ran: loaded, no error of its own, none in the browser's console, no CSP refusal.
        page = DrPage()
        page.feed(dom)
        assert "data-loaded" in page.body, dom[-2000:]
        assert page.hidden["page-error"] and not page.texts.get("#page-error", "").strip(), page.texts
        assert page.hidden["problem"], page.texts.get("#problem")
        for bad in ("Uncaught", "Content Security Policy", "Refused to"):
            assert bad not in log, log[-3000:]
        assert page.texts["#updated"].startswith("updated "), page.texts["#updated"]
        assert list(page.links) == [LINK]

        # Its numbers are failover status's (and the sites' own).
        shown = page.links[LINK]
        assert shown["link-state"] == cli["link_state"] == "paused"
        assert page.texts[f"{LINK}/link-state"] == "PAUSED"
        assert shown["rpo-records"] == as_value(cli["rpo"]["records"]) == str(PAUSED_RECORDS)
        assert shown["rpo-bytes"] == as_value(cli["rpo"]["bytes"]) and cli["rpo"]["bytes"] > PAUSED_RECORDS
        assert shown["rpo-exact"] == as_value(cli["rpo"]["exact"]) == "true"
        assert shown["lag-records"] == str(PAUSED_RECORDS)
        dr = cli["dr"]
        assert (shown["dr-state"], shown["dr-epoch"], shown["dr-primary"]) == (
            as_value(dr["state"]),
            as_value(dr["epoch"]),
            as_value(dr["primary"]),
        )
        assert (dr["state"], dr["epoch"], dr["primary"]) == ("mirroring", 0, "east")
        assert_partitions_shown(page, cli)
        assert {(r["topic"], r["partition"]) for r in cli["partitions"]} == {(TOPIC, p) for p in range(3)}
        for row in cli["partitions"]:
            p = row["partition"]
            assert (row["source_end"], row["mirrored_end"]) == (source_ends[p], mirrored[p])
            assert row["rpo_records"] == source_ends[p] - mirrored[p] and row["rpo_exact"] is True
        assert page.journal[LINK] == sorted((e["seq"] for e in dr["journal"]), reverse=True)
        assert len(page.journal[LINK]) == 3
        assert page.banners[LINK] == []  # both sites answer and nothing is failed over
        assert page.chart_points[LINK] >= 2

        # The JSON the page reads says the same (the same computation, in the mirror process).
        served = mirror.get("/v1/dr")
        (link,) = served["links"]
        assert _numbers(link["partitions"]) == _numbers(cli["partitions"])
        assert _numbers(link["rpo"]) == _numbers(cli["rpo"])
        (tmp_path / "dr.json").write_text(json.dumps(served, indent=1))

        # A screenshot for people (and for the docs); kept in this test's tmp dir.
        screenshot(tmp_path, mirror, "dr-page.png")

        # The source site is lost: a banner says so, and the page still shows what status says.
        for node in east.nodes:
            node.stop()
        (cli,) = failover_status(topology)["links"]
        assert cli["source"]["reachable"] is False and cli["rpo"]["exact"] is False
        dom, log = chromium(tmp_path, "dump-dom-source-down", "--dump-dom", f"{mirror.url}/dr")
        page = DrPage()
        page.feed(dom)
        assert "data-loaded" in page.body and page.hidden["page-error"], page.texts.get("#page-error")
        assert page.banners[LINK][0] == "source-unreachable"
        assert set(page.banners[LINK]) <= {"source-unreachable", "sync-error"}  # the mirror's topic sync fails too
        shown = page.links[LINK]
        assert shown["link-state"] == cli["link_state"]
        for field in ("records", "bytes", "exact"):
            assert shown[f"rpo-{field}"] == as_value(cli["rpo"][field]), field
        assert shown["rpo-exact"] == "false"
        assert_partitions_shown(page, cli)
        (tmp_path / "dr-source-down.json").write_text(json.dumps(mirror.get("/v1/dr"), indent=1))
        screenshot(tmp_path, mirror, "dr-page-source-down.png")
    finally:
        mirror.stop()


def _numbers(value: Any) -> Any:
    """``value`` without what moves with the clock (ages, lag in seconds, fetch times)."""
    moving = ("lag_seconds", "last_fetch_ms", "source_end_seen_ms", "at_ms")
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items() if k not in moving}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value
