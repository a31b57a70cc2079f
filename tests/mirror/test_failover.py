"""Failover, restore, group sync on demand and runtime links of the mirror's admin API.

In process against unreachable sites (unit): request bodies, credentials, validation, and what
``state.json`` keeps across a restart. Between two real sites with ``strait mirror start`` as a
real process (integration): the cut, restore without gap or duplicate, sync-groups, PUT, the
fencer against real nodes.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from prometheus_client.parser import text_string_to_metric_families

from mirror import MirrorAdminClient, MirrorError, parse_links
from mirror._metrics import LINK_STATES
from mirror._service import MirrorService, ServiceReady
from tests.mirror.conftest import Site
from tests.mirror.test_groups import committed, consume_and_commit
from tests.mirror.test_link import alter, overrides
from tests.mirror.test_service import (
    LINK,
    TOPIC,
    MirrorProcess,
    call,
    create,
    ends,
    partitions,
    produce,
    serve,
    wait_mirrored,
    write_links,
)
from tests.node.harness import wait_for

TOKEN = "s3cret-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
UNREACHABLE = "127.0.0.1:9"  # discard: nothing listens, connections are refused at once


def link_table(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "source": {"name": "east", "bootstrap": UNREACHABLE},
        "target": {"name": "west", "bootstrap": UNREACHABLE},
        "sync_interval_s": 1,
        **extra,
    }


def service(tmp_path: Path, *tables: dict[str, Any]) -> MirrorService:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    links = parse_links({"link": list(tables)})
    return MirrorService(links, tmp_path / "state", admin_token_file=token_file, member_id="m1")


def raw(url: str, method: str, path: str, headers: dict[str, str], body: bytes | Iterator[bytes] | None = None) -> Any:
    """(status, headers, JSON) of a request sent with http.client: headers exactly as given."""
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=10)
    try:
        if isinstance(body, Iterator):
            conn.request(method, path, body=body, headers=headers, encode_chunked=True)
        else:
            conn.putrequest(method, path)
            for key, value in headers.items():
                conn.putheader(key, value)
            conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.headers), json.loads(response.read())
    finally:
        conn.close()


def post(url: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    status, _, answer = call(f"{url}{path}", "POST", headers=BEARER if headers is None else headers, data=data)
    return status, answer


def put(url: str, name: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, answer = call(f"{url}/v1/links/{name}", "PUT", headers=BEARER, data=data)
    return status, answer


def test_bodies_are_json_objects_of_at_most_64_kib_and_only_two_routes_take_one(tmp_path: Path) -> None:
    svc = service(tmp_path, link_table("l"))

    def check(ready: ServiceReady) -> None:
        url = ready.admin_url
        failover = "/v1/links/l/failover"
        # The token comes first: nothing is read or changed without it.
        status, answer = post(url, failover, {"fence": "x"}, headers={})
        assert (status, answer["error"]) == (401, "missing_token")
        # Above 64 KiB: 413 from the announced length, before the body is read (none is sent).
        status, headers, answer = raw(url, "POST", failover, {**BEARER, "Content-Length": str(64 * 1024 + 1)})
        assert (status, answer["error"], headers["connection"]) == (413, "body_too_large", "close")
        assert answer["detail"] == (
            "POST '/v1/links/l/failover' takes a JSON object of at most 65536 bytes; got Content-Length: 65537"
        )
        status, _, answer = raw(url, "PUT", "/v1/links/x", {**BEARER, "Content-Length": "1000000"})
        assert (status, answer["error"]) == (413, "body_too_large")
        # A chunked body is cut off as soon as it passes the limit.
        chunks = iter([b'{"fence": "', b"x" * 40_000, b"y" * 40_000, b'"}'])
        status, _, answer = raw(url, "POST", failover, dict(BEARER), chunks)
        assert (status, answer["error"]) == (413, "body_too_large")
        assert "got more than 65536 bytes" in answer["detail"]
        # Not a JSON object, unknown keys and bad values: 400 naming them.
        for body, detail in (
            (b"[1, 2]", "POST /v1/links/l/failover: the body must be a JSON object, not list"),
            (b"{", "POST /v1/links/l/failover: the body is not JSON: Expecting property name enclosed in double"),
            ({"fence": "x", "auto_fenc": True}, "failover: unknown key 'auto_fenc' (did you mean 'auto_fence'?)"),
            ({"auto_fence": "yes"}, "failover: auto_fence: must be true or false, not 'yes'"),
            ({"fence": "a\nb"}, "failover: fence: control character '\\n' at position 1: the text must be one line"),
            ({"fence": "x" * 1025}, "failover: fence: must be 1-1024 characters, got 1025"),
            ({"fence": 7}, "failover: fence: must be a string (the reason, and where to produce instead), not 7"),
        ):
            status, answer = post(url, failover, body)
            assert status == 400 and answer["detail"].startswith(detail), (body, answer)
        # Routes without a body refuse one unread, as before.
        for path in ("/v1/links/l/restore", "/v1/links/l/sync-groups", "/v1/links/l/pause"):
            status, answer = post(url, path, {})
            assert (status, answer["error"]) == (413, "body_not_accepted"), path
        status, _, answer = call(f"{url}/v1/links/l", "DELETE", headers=BEARER, data=b"{}")
        assert (status, answer["error"]) == (413, "body_not_accepted")
        # An unknown link is named once the body is good.
        status, answer = post(url, "/v1/links/nope/failover", {"auto_fence": False})
        assert status == 404 and answer["detail"].startswith("no link named 'nope' runs in this mirror")
        # None of that failed the link over.
        assert call(f"{url}/v1/links/l", "GET")[2]["failed_over"] is None

    serve(svc, check)
    assert "failed_over" not in json.loads((tmp_path / "state" / "state.json").read_text())["links"].get("l", {})


def test_a_runtime_link_is_checked_like_a_file_link_and_conflicts_are_refused(tmp_path: Path) -> None:
    svc = service(tmp_path, link_table("filed"))

    def check(ready: ServiceReady) -> None:
        url = ready.admin_url
        status, _, answer = call(f"{url}/v1/links/r", "PUT", headers={}, data=b"{}")
        assert (status, answer["error"]) == (401, "missing_token")
        status, _, answer = call(f"{url}/v1/links/r", "PUT", headers=BEARER)
        assert (status, answer["detail"]) == (400, "PUT /v1/links/r needs a JSON object body")
        # The same messages as a link file's, with the request in place of the file.
        bad = link_table("r", topics={"includ": ["x"]})
        with pytest.raises(MirrorError) as from_file:
            parse_links({"link": [bad]}, origin="links.toml")
        status, answer = put(url, "r", bad)
        assert status == 400 and answer["error"] == "bad_link_definition"
        assert answer["detail"] == str(from_file.value).replace("links.toml", "PUT /v1/links/r")
        assert (
            answer["detail"]
            == "PUT /v1/links/r: link 'r': unknown key 'topics.includ' (did you mean 'topics.include'?)"
        )
        status, answer = put(url, "r", {**link_table("r"), "sync_interval_s": 60})
        assert (status, answer["detail"]) == (
            400,
            "PUT /v1/links/r: link 'r': sync_interval_s: 60.0 is above 10 "
            "(new source topics must be mirrored within 10 s)",
        )
        status, answer = put(url, "r", link_table("other"))
        assert (status, answer["detail"]) == (400, "PUT /v1/links/r: name: 'other' in the body is not the path's 'r'")
        status, answer = put(url, "filed", link_table("filed"))
        assert (status, answer["error"]) == (409, "link_conflict")
        assert answer["detail"] == "link 'filed' is defined in the link file; change it there (and restart the mirror)"
        # Added (name from the path); the same again changes nothing; another definition conflicts.
        table = link_table("r")
        del table["name"]
        status, answer = put(url, "r", table)
        assert (status, answer["name"], answer["created"]) == (201, "r", True)
        status, answer = put(url, "r", link_table("r"))
        assert (status, answer["created"]) == (200, False)
        status, answer = put(url, "r", {**table, "sync_interval_s": 2})
        assert (status, answer["error"]) == (409, "link_conflict")
        assert "DELETE /v1/links/r first" in answer["detail"]
        listed = call(f"{url}/v1/links", "GET")[2]
        assert {(link["name"], link["runtime"]) for link in listed["links"]} == {("filed", False), ("r", True)}

    serve(svc, check)


def test_failover_and_runtime_links_are_kept_across_a_restart_and_restore_and_delete_forget_them(
    tmp_path: Path,
) -> None:
    # The file's link cannot reach its target, so its cut cannot be read: 503, failed over all the same.
    # The runtime link is in MM2 mode, whose cut is what its copiers knew (nothing here): 200.
    runtime = link_table("r", mode="mm2")
    state_file = tmp_path / "state" / "state.json"

    def first(ready: ServiceReady) -> None:
        url = ready.admin_url
        status, answer = post(url, "/v1/links/l/failover", {"fence": "east is fenced; produce to west"})
        assert (status, answer["error"]) == (503, "cut_unavailable")
        assert answer["detail"].startswith("cannot list the mirror topics of link 'l': ")
        link = call(f"{url}/v1/links/l", "GET")[2]
        assert link["state"] == "failed-over"
        assert link["failed_over"]["fence"] == "east is fenced; produce to west" and link["failed_over"]["auto_fence"]
        assert put(url, "r", runtime)[0] == 201
        status, answer = post(url, "/v1/links/r/failover", {"auto_fence": False})
        assert status == 200, answer
        assert answer == {"name": "r", "state": "failed-over", "partitions": [], "stopped": True}
        assert call(f"{url}/v1/links/r", "GET")[2]["fence"]["state"] == "off"

    serve(service(tmp_path, link_table("l")), first)
    saved = json.loads(state_file.read_text())
    assert saved["version"] == 2
    assert set(saved["links"]["l"]["failed_over"]) == {"fence", "auto_fence", "at_ms"}  # no cut yet
    assert saved["links"]["r"]["failed_over"]["cut"] == []
    assert saved["runtime_links"]["r"] == parse_links({"link": [runtime]})[0].to_dict()

    def after_restart(ready: ServiceReady) -> None:
        url = ready.admin_url
        link = call(f"{url}/v1/links/l", "GET")[2]
        assert link["state"] == "failed-over" and link["failed_over"]["fence"] == "east is fenced; produce to west"
        # The fencer runs again, and says why it cannot fence yet.
        assert link["fence"]["state"] == "pending" and "old source" in (link["fence"]["last_error"] or "")
        assert link["source_reachable"] is False
        r = call(f"{url}/v1/links/r", "GET")[2]
        assert (r["state"], r["runtime"], r["link"]["mode"]) == ("failed-over", True, "mm2")
        # Failover again: the same answer; restore: running again, persisted.
        status, answer = post(url, "/v1/links/r/failover", {"auto_fence": False})
        assert (status, answer["partitions"]) == (200, [])
        status, answer = post(url, "/v1/links/r/restore")
        assert (status, answer["restored"]) == (200, True)
        assert answer["state"] in ("starting", "running")
        status, answer = post(url, "/v1/links/r/restore")
        assert (status, answer["restored"]) == (200, False)
        assert "failed_over" not in json.loads(state_file.read_text())["links"].get("r", {})
        # Delete forgets a runtime link.
        status, _, answer = call(f"{url}/v1/links/r", "DELETE", headers=BEARER)
        assert (status, answer["forgotten"]) == (200, True)
        assert call(f"{url}/v1/links/r", "GET")[0] == 404
        assert call(f"{url}/v1/links", "GET")[2]["deleted"] == []
        assert "r" not in json.loads(state_file.read_text())["runtime_links"]
        status, answer = post(url, "/v1/links/l/restore")
        assert (status, answer["restored"]) == (200, True)
        assert call(f"{url}/v1/links/l", "GET")[2]["fence"]["state"] == "off"

    serve(service(tmp_path, link_table("l")), after_restart)
    saved = json.loads(state_file.read_text())
    assert saved["links"] == {} and saved["runtime_links"] == {}


# -- between two real sites, with a real mirror process (integration) -----------------------------------


class Producing:
    """A producer writing to ``site``'s topic in the background until stopped (acks=all)."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.stopped = threading.Event()
        self.sent = 0
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, name="producing", daemon=True)

    def __enter__(self) -> Producing:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(60)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.site.bootstrap, "acks": "all", "linger.ms": 2})

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))

        while not self.stopped.is_set():
            for _ in range(20):
                producer.produce(TOPIC, value=f"live-{self.sent}".encode(), on_delivery=delivered)
                self.sent += 1
            producer.flush(30)
            time.sleep(0.02)
        producer.flush(30)


def admin_client(mirror: MirrorProcess) -> MirrorAdminClient:
    """A client with the process's current token (a restart generates a new one)."""
    return MirrorAdminClient(mirror.url, token=mirror.token_file.read_text().strip())


def stays(what: str, check: Callable[[], bool], seconds: float) -> None:
    """``check`` holds for ``seconds`` (asked every 0.3 s); fails naming ``what`` at once when it does not."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what
        time.sleep(0.3)


@contextlib.contextmanager
def mirroring(east: Site, west: Site, tmp_path: Path, records: int) -> Iterator[MirrorProcess]:
    """A mirror process running the test link, once west holds the ``records`` written to east."""
    create(east, TOPIC, 2)
    produce(east, records, "a-")
    mirror = MirrorProcess(tmp_path / "mirror", write_links(tmp_path / "links.toml", east, west))
    try:
        mirror.start()
        wait_mirrored(east, west)
        yield mirror
    finally:
        mirror.stop()


def link_state_gauges(mirror: MirrorProcess) -> dict[str, float]:
    families = {f.name: f for f in text_string_to_metric_families(mirror.get("/metrics"))}
    return {s.labels["state"]: s.value for s in families["strait_mirror_link_state"].samples}


@pytest.mark.integration
def test_failover_stops_copying_answers_the_cut_and_restore_resumes_without_gap_or_duplicate(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    with mirroring(east, west, tmp_path, 200) as mirror:
        client = admin_client(mirror)

        # Fail over while a producer keeps writing to east: the answer is where west ends.
        with Producing(east) as producing:
            wait_for("live records on west", lambda: sum(ends(west).values()) > 300, timeout=30)
            before = int(time.time() * 1000)
            answer = client.failover(LINK, auto_fence=False)
            west_at_cut = ends(west)
            wait_for("more records on east", lambda: producing.sent > 200 + sum(west_at_cut.values()), timeout=30)
        assert producing.errors == []
        assert (answer["name"], answer["state"], answer["stopped"]) == (LINK, "failed-over", True)
        cut = {c["partition"]: c for c in answer["partitions"]}
        assert [c["topic"] for c in answer["partitions"]] == [TOPIC, TOPIC] and set(cut) == {0, 1}
        for p, entry in cut.items():
            assert entry["mirrored_offset"] == west_at_cut[p], (entry, west_at_cut)
            assert entry["mirrored_offset"] <= entry["source_high_watermark"] <= ends(east)[p]
            assert before - 5000 <= entry["source_seen_ms"] <= int(time.time() * 1000)
        assert sum(ends(east).values()) > sum(west_at_cut.values())  # the source went on without the link

        # Nothing is copied while failed over: west stays at the cut as east grows.
        produce(east, 100, "b-")
        stays("west at the cut", lambda: ends(west) == west_at_cut, seconds=4)
        status = mirror.link()
        assert status["state"] == "failed-over" and status["failed_over"]["auto_fence"] is False
        assert {p["state"] for p in partitions(status)} == {"failed-over"}
        assert status["fence"]["state"] == "off"
        assert status["source_reachable"] is True and status["last_source_contact_ms"] >= before
        assert all(p["last_fetch_ms"] is not None for p in partitions(status))
        assert link_state_gauges(mirror)["failed-over"] == 1
        assert client.failover(LINK, auto_fence=False)["partitions"] == answer["partitions"]  # idempotent

        # A restart keeps the failover, and the cut it answered.
        mirror.restart()
        assert mirror.link()["state"] == "failed-over"
        stays("west at the cut after the restart", lambda: ends(west) == west_at_cut, seconds=3)
        saved = json.loads((mirror.state_dir / "state.json").read_text())["links"][LINK]["failed_over"]
        assert saved["cut"] == answer["partitions"] and saved["auto_fence"] is False
        client = admin_client(mirror)
        assert client.failover(LINK, auto_fence=False)["partitions"] == answer["partitions"]

        # Restore: copying resumes from west's end; west ends up with east's records, none twice or missing.
        restored = client.restore(LINK)
        assert restored["restored"] is True
        wait_mirrored(east, west)
        status = mirror.link()
        assert status["state"] == "running" and status["failed_over"] is None
        assert status["totals"]["gap_records"] == 0
        assert "failed_over" not in json.loads((mirror.state_dir / "state.json").read_text())["links"].get(LINK, {})
        assert link_state_gauges(mirror) == {**dict.fromkeys(LINK_STATES, 0.0), "running": 1.0}
        assert mirror.stop() == 0, mirror.log_tail()


@pytest.mark.integration
def test_a_link_put_at_runtime_copies_syncs_groups_on_demand_and_survives_a_restart(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    create(east, TOPIC, 2)
    produce(east, 100, "a-")
    group = f"billing-{uuid.uuid4().hex[:6]}"
    mirror = MirrorProcess(tmp_path / "mirror", write_links(tmp_path / "links.toml", east, west, link=False))
    definition = {
        "source": {"name": "east", "bootstrap": east.bootstrap},
        "target": {"name": "west", "bootstrap": west.bootstrap},
        "topics": {"include": [TOPIC]},
        "sync_interval_s": 1,
        "group_sync_interval_s": 3600,  # only sync-groups syncs the group in this test
    }
    try:
        mirror.start()
        client = admin_client(mirror)
        assert client.links()["links"] == []
        added = client.put_link(LINK, definition)
        assert (added["name"], added["created"]) == (LINK, True)
        wait_mirrored(east, west)
        assert client.put_link(LINK, {**definition, "name": LINK})["created"] is False
        assert mirror.link()["runtime"] is True

        # sync-groups: the group's commits on east reach west now, and the answer says so.
        wait_for("the group's commit on east", lambda: consume_and_commit(east, TOPIC, group, {0: 7, 1: 13}) or True)
        result = client.sync_groups(LINK)
        assert result["name"] == LINK and result["last_error"] is None
        (synced,) = [g for g in result["groups"] if g["group"] == group]
        assert synced["state"] == "synced"
        assert synced["offsets"] == [
            {"topic": TOPIC, "partition": 0, "offset": 7},
            {"topic": TOPIC, "partition": 1, "offset": 13},
        ]
        wait_for("the offsets on west", lambda: committed(west, TOPIC, group, 2) == {0: 7, 1: 13}, timeout=20)

        # A restart runs the runtime link again.
        mirror.restart()
        assert mirror.link()["runtime"] is True
        produce(east, 50, "b-")
        wait_mirrored(east, west)

        # Deleting it forgets it: after a restart it is gone.
        answer = admin_client(mirror).delete(LINK)
        assert (answer["state"], answer["stopped"], answer["forgotten"]) == ("deleted", True, True)
        mirror.restart()
        assert mirror.get("/v1/links")["links"] == [] and mirror.get("/v1/links")["deleted"] == []
        assert mirror.stop() == 0, mirror.log_tail()
    finally:
        mirror.stop()


FENCE = "site east was failed over to west (test); produce to west"


def produce_error(site: Site) -> tuple[int, str] | None:
    """(code, text) of the error one produce to ``site`` gets; None when it is accepted."""
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "message.timeout.ms": 10000})
    reports: list[tuple[int, str] | None] = []

    def delivered(err: Any, _msg: Any) -> None:
        reports.append(None if err is None else (err.code(), str(err)))

    producer.produce(TOPIC, value=b"after the fence", on_delivery=delivered)
    assert producer.flush(30) == 0
    (report,) = reports
    return report


@pytest.mark.integration
def test_auto_fence_fences_the_old_sources_topics_and_keeps_them_fenced(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    with mirroring(east, west, tmp_path, 50) as mirror:
        answer = admin_client(mirror).failover(LINK, fence=FENCE)
        assert answer["state"] == "failed-over"

        def settled() -> dict[str, Any] | None:
            fence: dict[str, Any] = mirror.link()["fence"]
            return fence if fence["state"] == "fenced" else None

        fence = wait_for("the fence on east", settled, timeout=20)
        assert fence["topics"] == [TOPIC] and fence["last_error"] is None and fence["fenced_ms"] > 0
        assert overrides(east, TOPIC)["strait.fenced"] == FENCE
        assert "strait.fenced" not in overrides(west, TOPIC)  # a fence is its site's own
        error = produce_error(east)
        assert error is not None and error[0] == KafkaError.POLICY_VIOLATION, error

        # A fence someone lifts is put back; a restart keeps the fencer running.
        alter(east, TOPIC, {}, ("strait.fenced",))  # an operator lifts it
        wait_for("the fence put back", lambda: overrides(east, TOPIC).get("strait.fenced") == FENCE, timeout=20)
        mirror.restart()
        wait_for("the fencer after the restart", lambda: mirror.link()["fence"]["state"] == "fenced", timeout=20)

        # Restore stops the fencer and leaves the fence where it is (lifting it is a deliberate act).
        assert admin_client(mirror).restore(LINK)["restored"] is True
        assert mirror.link()["fence"]["state"] == "off"
        assert overrides(east, TOPIC)["strait.fenced"] == FENCE
        assert mirror.stop() == 0, mirror.log_tail()
