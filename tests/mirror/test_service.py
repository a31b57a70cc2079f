"""The mirror service: in-process against its admin API (unit), and ``strait mirror start`` as a real
process between two real sites, driven through its admin API and CLI (integration).

Every mirror process is a :class:`node.proc.Child` (its own session, killed with the test
process) and is stopped in a ``finally``; chaos's nemeses kill it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from chaos.nemesis import Kill
from mirror import LatencyHistogram, MirrorError
from mirror._metrics import MirrorMetrics
from mirror._service import MirrorService, ServiceReady
from node.proc import Child, log_tail, spawn_ready
from tests.mirror.conftest import Site
from tests.node.harness import STRAIT, wait_for

LINK = "east-to-west"
TOPIC = "orders"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
ZK_SESSION_TIMEOUT_MS = 4000  # ZooKeeper's minimum with the embedded server's 2 s tick

# -- in process: the admin API's edges, the state dir, the metrics (unit) ----------------------------------


def serve(service: MirrorService, check: Callable[[ServiceReady], None]) -> None:
    """Run ``service`` in trio and ``check`` (blocking HTTP calls) in a worker thread, then stop it."""

    async def main() -> None:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                ready = await nursery.start(service.run)
                await trio.to_thread.run_sync(check, ready)
                nursery.cancel_scope.cancel()

    trio.run(main)


def call(url: str, method: str, *, headers: dict[str, str] | None = None, data: bytes | None = None) -> Any:
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_the_admin_api_refuses_what_it_does_not_serve_and_describes_what_it_does(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-0123456789\n")
    token_file.chmod(0o600)
    service = MirrorService([], tmp_path / "state", admin_token_file=token_file, member_id="m1")

    def check(ready: ServiceReady) -> None:
        url = ready.admin_url
        assert ready.token_file == token_file and ready.member_id == "m1"
        assert not (tmp_path / "state" / "admin.token").exists()  # the given token is used, none generated
        assert call(f"{url}/health", "GET")[0::2] == (200, {"status": "ok", "member_id": "m1", "links": {}})
        assert call(f"{url}/v1/links", "GET")[2] == {"links": [], "deleted": [], "member_id": "m1"}
        status, headers, body = call(f"{url}/v1/links/x/pause", "POST", headers={"Authorization": "Basic eDp5"})
        assert (status, body["error"]) == (401, "bad_authorization")
        assert headers["www-authenticate"].startswith("Bearer")
        bearer = {"Authorization": "Bearer s3cret-token-0123456789"}
        status, _, body = call(f"{url}/v1/links/x/pause", "POST", headers=bearer)
        assert status == 404 and body["detail"] == "no link named 'x' runs in this mirror (links: none)"
        status, _, body = call(f"{url}/v1/links/x/pause", "POST", headers=bearer, data=b"{}")
        assert (status, body["error"]) == (413, "body_not_accepted")
        status, headers, body = call(f"{url}/v1/links", "POST", headers=bearer)
        assert (status, body["error"], headers["allow"]) == (405, "method_not_allowed", "GET, HEAD")
        assert call(f"{url}/v2/anything", "GET")[0] == 404
        document = call(f"{url}/openapi.json", "GET")[2]
        assert set(document["paths"]) == {
            "/health",
            "/metrics",
            "/v1/links",
            "/v1/links/{name}",
            "/v1/links/{name}/pause",
            "/v1/links/{name}/resume",
            "/v1/links/{name}/failover",
            "/v1/links/{name}/restore",
            "/v1/links/{name}/sync-groups",
            "/v1/links/{name}/lag-history",
            "/v1/dr",
            "/dr",
            "/openapi.json",
        }
        secured = {
            (path, method)
            for path, item in document["paths"].items()
            for method, operation in item.items()
            if operation.get("security")
        }
        assert secured == {
            ("/v1/links/{name}", "put"),
            ("/v1/links/{name}", "delete"),
            ("/v1/links/{name}/pause", "post"),
            ("/v1/links/{name}/resume", "post"),
            ("/v1/links/{name}/failover", "post"),
            ("/v1/links/{name}/restore", "post"),
            ("/v1/links/{name}/sync-groups", "post"),
        }

    serve(service, check)


def test_one_process_per_state_dir_and_a_bad_state_file_is_named(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = MirrorService([], state)

    def second_is_refused(ready: ServiceReady) -> None:
        assert ready.token_file == state / "admin.token"
        assert ready.token_file.stat().st_mode & 0o777 == 0o600
        with pytest.raises(MirrorError, match=r"is in use by another mirror process \(pid \d+\)"):
            trio.run(MirrorService([], state).run)

    serve(first, second_is_refused)
    member_id = json.loads((state / "state.json").read_text())["member_id"]
    serve(MirrorService([], state), lambda ready: None)  # the lock went with the first process
    assert json.loads((state / "state.json").read_text())["member_id"] == member_id  # kept across restarts
    (state / "state.json").write_text('{"links": []}')
    with pytest.raises(MirrorError, match=r"state\.json: not a version 1 or 2 mirror state file"):
        trio.run(MirrorService([], state).run)


def test_metrics_come_from_the_status_and_leave_unknown_values_out() -> None:
    histogram = LatencyHistogram()
    histogram.observe(0.02, 3)
    histogram.observe(2.0)
    status = {
        "link": {"name": "l"},
        "state": "running",
        "syncs": 7,
        "last_sync_error": None,
        "conflicts": [{"topic": "x", "reason": "..."}],
        "topics": {
            "t": {
                "partitions": [
                    {
                        "partition": 0,
                        "state": "copying",
                        "source_high_watermark": 120,
                        "source_log_start": 0,
                        "mirrored_offset": 100,
                        "lag_records": 20,
                        "lag_bytes": 2000,
                        "lag_seconds": 1.5,
                        "records_copied": 100,
                        "bytes_copied": 10000,
                        "gap_records": 0,
                        "errors": 2,
                    },
                    {  # copied here once, then moved to another process: what it shows is stale
                        "partition": 1,
                        "state": "unassigned",
                        "source_high_watermark": 60,
                        "source_log_start": 0,
                        "mirrored_offset": 50,
                        "lag_records": 10,
                        "lag_bytes": 1000,
                        "lag_seconds": 3.0,
                        "records_copied": 50,
                        "bytes_copied": 5000,
                        "gap_records": 0,
                        "errors": 0,
                    },
                    {  # not fetched yet: nothing known
                        "partition": 2,
                        "state": "starting",
                        "source_high_watermark": -1,
                        "source_log_start": -1,
                        "mirrored_offset": -1,
                        "lag_records": -1,
                        "lag_bytes": -1,
                        "lag_seconds": -1.0,
                        "records_copied": 0,
                        "bytes_copied": 0,
                        "gap_records": 0,
                        "errors": 0,
                    },
                ]
            }
        },
        "latency": histogram.to_dict(),
    }
    text = MirrorMetrics(lambda: [status]).render().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    p0 = (("link", "l"), ("partition", "0"), ("topic", "t"))
    assert values[("strait_mirror_lag_records", p0)] == 20
    assert values[("strait_mirror_lag_seconds", p0)] == 1.5
    assert values[("strait_mirror_errors_total", p0)] == 2
    assert values[("strait_mirror_link_conflicts", (("link", "l"),))] == 1
    assert values[("strait_mirror_link_state", (("link", "l"), ("state", "running")))] == 1
    assert values[("strait_mirror_link_state", (("link", "l"), ("state", "paused")))] == 0
    # Partition 1 is another process's now and partition 2 has no offsets yet: no lag for either;
    # their states and what this process copied are exported.
    for name in ("strait_mirror_lag_records", "strait_mirror_mirrored_offset", "strait_mirror_lag_seconds"):
        assert [s.labels["partition"] for s in families[name].samples] == ["0"], name
    p1 = (("link", "l"), ("partition", "1"), ("state", "unassigned"), ("topic", "t"))
    assert values[("strait_mirror_partition_state", p1)] == 1
    assert values[("strait_mirror_records_copied_total", (("link", "l"), ("partition", "1"), ("topic", "t")))] == 50
    latency = {s.labels.get("le"): s.value for s in families["strait_mirror_replication_latency_seconds"].samples}
    assert (latency["0.025"], latency["2.5"], latency["+Inf"], latency[None]) == (3, 4, 4, 3 * 0.02 + 2.0)


# -- the mirror process ------------------------------------------------------------------------------


@dataclass
class MirrorProcess:
    workdir: Path
    config: Path
    args: list[str] = field(default_factory=list)
    child: Child | None = None
    url: str = ""

    @property
    def name(self) -> str:
        return f"mirror {self.workdir.name}"

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    @property
    def token_file(self) -> Path:
        return self.state_dir / "admin.token"

    @property
    def ready_path(self) -> Path:
        return self.workdir / "ready.json"

    @property
    def log_path(self) -> Path:
        return self.workdir / "mirror.log"

    def start(self) -> MirrorProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [
            *STRAIT,
            "mirror",
            "start",
            "--config",
            str(self.config),
            "--state-dir",
            str(self.state_dir),
            "--ready-file",
            str(self.ready_path),
            *self.args,
        ]
        self.child, ready = spawn_ready(command, self.log_path, self.ready_path, READY_TIMEOUT_S, name=self.name)
        assert ready["pid"] == self.child.pid and Path(ready["token_file"]) == self.token_file
        self.url = ready["admin"]
        return self

    def stop(self) -> int | None:
        """SIGTERM and wait; kill -9 after the timeout. Returns the exit code; None if it had to be
        killed or was never started."""
        if self.child is None:
            return None
        stopped = self.child.stop(STOP_TIMEOUT_S)
        return None if stopped.killed else stopped.returncode

    def restart(self) -> MirrorProcess:
        assert self.stop() == 0, self.log_tail()
        return self.start()

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def http(self, method: str, path: str, token: str | None = None) -> tuple[int, Any]:
        """(status, parsed JSON body, or the text for /metrics)."""
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        request = urllib.request.Request(self.url + path, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        return status, body.decode() if path == "/metrics" else json.loads(body)

    def get(self, path: str) -> Any:
        status, body = self.http("GET", path)
        assert status == 200, (path, status, body)
        return body

    def link(self) -> dict[str, Any]:
        result: dict[str, Any] = self.get(f"/v1/links/{LINK}")
        return result

    def cli(self, *args: str, token_file: Path | None = None) -> subprocess.CompletedProcess[str]:
        extra = [] if token_file is None else ["--token-file", str(token_file)]
        return subprocess.run(
            [*STRAIT, "mirror", *args, "--admin", self.url, *extra],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )


def write_links(path: Path, east: Site, west: Site, *, zookeeper: str | None = None, link: bool = True) -> Path:
    target_zk = "" if zookeeper is None else f', zookeeper = "{zookeeper}"'
    text = "# the link of these tests\n"
    if link:
        text += f"""
[[link]]
name = "{LINK}"
sync_interval_s = 1
source = {{ name = "east", bootstrap = "{east.bootstrap}" }}
target = {{ name = "west", bootstrap = "{west.bootstrap}"{target_zk} }}
topics = {{ include = ["{TOPIC}"] }}
"""
    path.write_text(text)
    return path


# -- Kafka clients -----------------------------------------------------------------------------------------


def create(site: Site, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)


def produce(site: Site, n: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        producer.produce(TOPIC, key=f"k{i % 13}".encode(), value=f"{tag}{i}".encode())
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def ends(site: Site) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    meta = admin.list_topics(timeout=10).topics.get(TOPIC)
    if meta is None or meta.error is not None:
        return {}
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": f"ends-{time.monotonic_ns()}"})
    try:
        # The topic's metadata first: without it librdkafka may answer watermarks with
        # UNKNOWN_PARTITION at once (seen on a loaded machine) instead of asking for it.
        consumer.list_topics(TOPIC, timeout=10)
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in meta.partitions}
    finally:
        consumer.close()


def read(site: Site) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record of the topic on ``site``: (partition, offset, key, value), sorted."""
    want = ends(site)
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": f"read-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in want])
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 60
        while len(out) < sum(want.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        return sorted(out)
    finally:
        consumer.close()


def wait_mirrored(east: Site, west: Site, timeout: float = 60) -> None:
    """West holds exactly east's records, at the same partitions and offsets."""
    wait_for("west to catch up with east", lambda: ends(west) == ends(east) and sum(ends(east).values()), timeout)
    assert read(west) == read(east)


def partitions(status: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = status["topics"][TOPIC]["partitions"]
    return result


# -- one process: mirror, status, metrics, credentials, pause/resume/delete --------------------------------


@pytest.mark.integration
def test_a_mirror_process_is_run_and_managed_through_its_admin_api_and_cli(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    create(east, TOPIC, 2)
    produce(east, 200, "a-")
    links = write_links(tmp_path / "links.toml", east, west)
    mirror = MirrorProcess(tmp_path / "mirror", links)
    try:
        mirror.start()
        assert mirror.token_file.stat().st_mode & 0o777 == 0o600
        token = mirror.token_file.read_text().strip()
        wait_mirrored(east, west)
        assert mirror.get("/health")["status"] == "ok"

        # /v1/links: per partition, the source's high watermark, the mirrored offset and the lag.
        east_ends = ends(east)

        def caught_up() -> bool:
            (link,) = mirror.get("/v1/links")["links"]
            return all(p["lag_records"] == 0 and p["state"] == "copying" for p in partitions(link))

        wait_for("the status to show no lag", caught_up, timeout=10)
        listed = mirror.get("/v1/links")
        assert listed["deleted"] == [] and [link["name"] for link in listed["links"]] == [LINK]
        for p in partitions(listed["links"][0]):
            assert p["source_high_watermark"] == p["mirrored_offset"] == east_ends[p["partition"]]
            assert (p["lag_records"], p["lag_bytes"], p["lag_seconds"]) == (0, 0, 0.0)
            assert p["gap_records"] == 0 and p["records_copied"] == east_ends[p["partition"]]
        assert mirror.link()["state"] == "running" and mirror.link()["membership"]["kind"] == "sole"

        # /metrics in the Prometheus text format, with the lag and latency series.
        families = {f.name: f for f in text_string_to_metric_families(mirror.get("/metrics"))}
        lag = {s.labels["partition"]: s.value for s in families["strait_mirror_lag_records"].samples}
        assert lag == {"0": 0.0, "1": 0.0}
        assert {s.labels["link"] for s in families["strait_mirror_lag_seconds"].samples} == {LINK}
        mirrored = {int(s.labels["partition"]): s.value for s in families["strait_mirror_mirrored_offset"].samples}
        assert mirrored == east_ends
        latency = families["strait_mirror_replication_latency_seconds"]
        assert latency.type == "histogram"
        count = next(s.value for s in latency.samples if s.name.endswith("_count"))
        assert count >= 1
        copied = families["strait_mirror_records_copied"]
        assert sum(s.value for s in copied.samples if s.name.endswith("_total")) == 200

        # Credentials: none, a wrong one, a wrong token file; unknown links are named.
        status, body = mirror.http("POST", f"/v1/links/{LINK}/pause")
        assert (status, body["error"]) == (401, "missing_token")
        status, body = mirror.http("POST", f"/v1/links/{LINK}/pause", token="x" * 43)
        assert (status, body["error"]) == (401, "wrong_token")
        status, body = mirror.http("DELETE", f"/v1/links/{LINK}", token="x" * 43)
        assert status == 401
        wrong = tmp_path / "wrong.token"
        wrong.write_text("y" * 43)
        result = mirror.cli("pause", LINK, token_file=wrong)
        assert result.returncode != 0 and "401" in result.stderr and str(wrong) in result.stderr, result.stderr
        status, body = mirror.http("POST", "/v1/links/nope/pause", token=token)
        assert status == 404 and "'nope'" in body["detail"], body
        assert mirror.http("GET", "/v1/links/nope")[0] == 404
        result = mirror.cli("resume", "nope", token_file=mirror.token_file)
        assert result.returncode != 0 and "no link named 'nope'" in result.stderr, result.stderr
        assert mirror.link()["state"] == "running"  # none of that changed anything

        # Pause through the CLI: records produced meanwhile stay on east, also across a restart.
        result = mirror.cli("pause", LINK, token_file=mirror.token_file)
        assert result.returncode == 0 and "paused" in result.stdout, result.stderr
        assert mirror.link()["paused"] is True
        before = ends(west)
        produce(east, 100, "b-")
        passes = mirror.link()["syncs"]

        def three_passes_copying_nothing() -> bool:  # plenty of time to copy, were it running
            assert ends(west) == before, "records were mirrored while the link was paused"
            return bool(mirror.link()["syncs"] >= passes + 3)

        wait_for("three sync passes while paused", three_passes_copying_nothing, timeout=30, interval=0.5)
        assert all(p["state"] == "paused" for p in partitions(mirror.link()))
        mirror.restart()
        wait_for("the first sync pass after the restart", lambda: mirror.link()["syncs"] >= 2, timeout=20)
        assert mirror.link()["state"] == "paused" and ends(west) == before

        # Resume through the CLI: the records arrive. list and status show the link.
        result = mirror.cli("resume", LINK, token_file=mirror.token_file)
        assert result.returncode == 0 and "running" in result.stdout, result.stderr
        wait_mirrored(east, west)
        result = mirror.cli("list")
        assert result.returncode == 0 and LINK in result.stdout and "running" in result.stdout, result.stderr
        result = mirror.cli("status", LINK)
        assert result.returncode == 0, result.stderr
        assert "source HW" in result.stdout and "copying" in result.stdout and TOPIC in result.stdout
        result = mirror.cli("status", "--json")
        assert result.returncode == 0 and json.loads(result.stdout)[0]["name"] == LINK

        # Delete: the link stops and stays stopped across a restart; the target keeps its data.
        result = mirror.cli("delete", LINK, token_file=mirror.token_file)
        assert result.returncode == 0 and "deleted" in result.stdout, result.stderr
        status, body = mirror.http("GET", f"/v1/links/{LINK}")
        assert status == 404 and "was deleted" in body["detail"]
        before = ends(west)
        produce(east, 50, "c-")
        mirror.restart()
        listed = mirror.get("/v1/links")
        assert (listed["links"], listed["deleted"]) == ([], [LINK])
        assert json.loads((mirror.state_dir / "state.json").read_text())["links"] == {LINK: {"deleted": True}}
        assert ends(west) == before

        # Removed from the link file, the deletion is forgotten; added back, the link runs again.
        write_links(links, east, west, link=False)
        mirror.restart()
        assert mirror.get("/v1/links")["deleted"] == []
        write_links(links, east, west)
        mirror.restart()
        wait_mirrored(east, west)
        assert mirror.stop() == 0, mirror.log_tail()
        assert not mirror.ready_path.exists()
    finally:
        mirror.stop()


# -- two processes sharing the link through the target's ZooKeeper ------------------------------------------


def claimed(mirror: MirrorProcess) -> set[str]:
    return set(mirror.link()["membership"]["claimed"])


@pytest.mark.integration
@pytest.mark.chaos  # kill -9 of a mirror process
def test_two_mirror_processes_share_the_partitions_and_one_takes_over_after_a_kill(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    create(east, TOPIC, 6)
    links = write_links(tmp_path / "links.toml", east, west, zookeeper=west.zk_connect)
    session = ["--zk-session-timeout-ms", str(ZK_SESSION_TIMEOUT_MS)]
    a = MirrorProcess(tmp_path / "a", links, ["--member-id", "a", *session])
    b = MirrorProcess(tmp_path / "b", links, ["--member-id", "b", *session])
    try:
        a.start()
        b.start()

        def shared() -> bool:
            mine, theirs = claimed(a), claimed(b)
            members = [m.link()["membership"]["members"] for m in (a, b)]
            return members == [["a", "b"], ["a", "b"]] and bool(mine) and bool(theirs) and len(mine | theirs) == 6

        wait_for("a and b sharing the 6 partitions", shared, timeout=30)
        assert not claimed(a) & claimed(b)
        assert [a.link()["membership"]["leader"], b.link()["membership"]["leader"]] == [True, False]
        produce(east, 300, "a-")
        wait_mirrored(east, west)
        # Each process copied its own partitions, and only those.
        for mirror in (a, b):
            copied = {f"{TOPIC}-{p['partition']}" for p in partitions(mirror.link()) if p["records_copied"]}
            assert copied == claimed(mirror), (copied, claimed(mirror))

        # kill -9 of a: b takes its partitions once a's ZooKeeper session expires, and copies on
        # from where the mirror ends: no gap, no duplicate.
        Kill([a]).start()
        produce(east, 300, "b-")
        wait_for("b claiming every partition", lambda: len(claimed(b)) == 6, timeout=30)
        wait_mirrored(east, west)
        status = b.link()
        assert status["totals"]["gap_records"] == 0
        assert status["membership"]["members"] == ["b"] and status["membership"]["leader"] is True
        assert b.stop() == 0, b.log_tail()
    finally:
        a.stop()
        b.stop()
