"""The replication benchmark (bench/replication_bench.py): its profile summary (bench/_profile.py), and one tiny
run end to end.

The end-to-end run proves that the benchmark starts a site, measures every case, profiles and
writes its report; it asserts nothing about speed (figures from a few thousand records mean
nothing, and performance is measured by the benchmark, not asserted by tests).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from bench import _clients
from bench import replication_bench as rb
from bench._profile import summarise_stacks, where
from bench._report import PERCENTILES, REPO_ROOT
from bench._site import REPLICATED

VENV = "/v/.venv/lib/python3.11/site-packages"
REPO = str(REPO_ROOT)

# py-spy record --idle --threads --full-filenames --format raw: "thread;frame;...;leaf count".
RAW = "\n".join(
    [
        # The main thread: 6 samples waiting in epoll, 3 appending, 1 in trio's socket send.
        f"thread (1): MainThread;run ({VENV}/trio/_core/_run.py:1);"
        f"EpollIOManager.get_events ({VENV}/trio/_core/_io_epoll.py:243) 6",
        f"thread (1): MainThread;run ({VENV}/trio/_core/_run.py:1);handle_produce ({REPO}/node/handlers/produce.py:9);"
        f"LogSegment.append ({REPO}/storage/_segment.py:157) 3",
        f"thread (1): MainThread;run ({VENV}/trio/_core/_run.py:1);"
        f"_SocketType._nonblocking_helper ({VENV}/trio/_socket.py:1050) 1",
        # Another thread: 5 idle samples, 2 busy ones (in % of the main thread's 10).
        "thread (2): Thread-6 (zk_loop);EpollSelector.select (/usr/lib/python3.11/selectors.py:468) 5",
        f"thread (2): Thread-6 (zk_loop);ConnectionHandler._write ({VENV}/kazoo/protocol/connection.py:346) 2",
        "",
        "not a stack line",
    ]
)


def test_summarise_stacks_splits_the_main_threads_idle_and_busy_samples() -> None:
    found = summarise_stacks(RAW)
    assert found["samples"] == 10
    assert found["idle_pct"] == pytest.approx(60.0)
    assert found["other_busy_pct"] == pytest.approx(20.0)
    assert found["places"] == [
        {"where": "storage/_segment.py", "self_pct": pytest.approx(75.0)},
        {"where": "trio", "self_pct": pytest.approx(25.0)},
    ]
    # Functions with samples of their own, each with its inclusive share (every frame above counts).
    assert [(f["function"], f["file"], f["self_pct"], f["total_pct"]) for f in found["functions"]] == [
        ("LogSegment.append", "storage/_segment.py", pytest.approx(75.0), pytest.approx(75.0)),
        ("_SocketType._nonblocking_helper", "trio/_socket.py", pytest.approx(25.0), pytest.approx(25.0)),
    ]


def test_where_names_repository_modules_packages_and_the_standard_library() -> None:
    assert where(f"{REPO}/node/server.py") == ("node/server.py", "node/server.py")
    assert where(f"{VENV}/trio/_core/_run.py") == ("trio", "trio/_core/_run.py")
    assert where("/usr/lib/python3.11/collections/__init__.py") == (
        "stdlib collections",
        "collections/__init__.py",
    )
    assert where("<strait.protocol read_struct>") == ("<strait.protocol read_struct>",) * 2


def test_thread_cpu_is_read_per_thread_group_and_a_busy_thread_shows() -> None:
    """The client's CPU by thread: the calling thread is the application's, a thread born in
    between counts from zero, and a spinning thread's CPU lands in its group."""
    start = _clients.thread_ticks()
    assert start[threading.get_native_id()][0] == _clients.APP_THREAD
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    helper = threading.Thread(target=spin, name="spinner")
    helper.start()
    try:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            pass
        end = _clients.thread_ticks()
    finally:
        stop.set()
        helper.join()
    used = _clients.threads_cpu_delta(start, end)
    assert used[_clients.APP_THREAD] > 0.05  # it spun too
    assert used[_clients.OTHER_THREADS] > 0.01  # the spinner, born after the first reading
    # A thread that ended between the readings is left out, not counted negative.
    gone = {1: (_clients.RDK_BROKER_THREADS, 500)}
    assert _clients.threads_cpu_delta(gone, {}) == {}


def test_the_cpu_table_gives_cores_per_group_and_case() -> None:
    base = rb.Throughput("strait", rb.BASE.key, 1, 0, 1000, 2.0, {"1": 1.0, "2": 0.0, "3": 0.0}, 2.0)
    base.client_threads_s = {_clients.APP_THREAD: 1.6, _clients.RDK_BROKER_THREADS: 0.4}
    repl = rb.Throughput("strait", REPLICATED.key, 1, 0, 1000, 4.0, {"1": 2.0, "2": 1.0, "3": 1.0}, 4.0)
    repl.client_threads_s = {_clients.APP_THREAD: 2.0, _clients.RDK_BROKER_THREADS: 2.0}
    headers, rows = rb.cpu_table([repl, base], [])
    assert headers[2] == "nodes" and headers[-1] == "all"
    assert rows[0] == ["1", rb.BASE.label, "0.50", "0.80", "0.20", "0.00", "0.00", "1.50"]
    assert rows[1] == ["1", REPLICATED.label, "1.00", "0.50", "0.50", "0.00", "0.00", "2.00"]


def test_the_latency_goal_is_judged_on_the_producers_linger_and_p99_9_too() -> None:
    settings = rb.parse_args(["--quick", "--partitions", "1"])
    assert rb.latency_lingers(settings) == (settings.linger_ms, 0)
    assert rb.latency_lingers(rb.parse_args(["--quick", "--linger-ms", "0"])) == (0,)

    def run(linger: int, p99: float, p999: float) -> rb.Latency:
        latency = dict.fromkeys((name for name, _ in PERCENTILES), 1.0) | {"p99": p99, "p99.9": p999}
        requests = {"produce_requests": 10.0, "produce_seconds": 0.01, "produce_within_10ms": 10.0}
        requests["produce_within_100ms"] = 10.0
        return rb.Latency(1, 0, 100.0, 100.0, 1000, latency, {}, requests, linger_ms=linger)

    found = rb.summarise_latencies(settings, [run(settings.linger_ms, 8.0, 30.0), run(0, 50.0, 60.0)])
    judged, diagnostic = found
    assert judged.judged and not judged.met  # p99 under 10 ms, but p99.9 over 25 ms
    assert not diagnostic.judged and diagnostic.linger_ms == 0
    summaries = [
        rb.Summary("strait", case.key, case.label, 1, 1, rate, rate / 1e4, 1.0, 1.0, None, None, rate / 1000.0)
        for case, rate in ((rb.BASE, 1000.0), (REPLICATED, 600.0))
    ]
    lines = rb.goal_lines(settings, summaries, found, [])
    assert any(line.startswith("latency goal") and "NOT met" in line and "p99.9 30.00 ms" in line for line in lines)
    assert any(line.startswith("latency with linger.ms=0 (diagnostic") for line in lines)
    ok = rb.summarise_latencies(settings, [run(settings.linger_ms, 8.0, 20.0)])
    assert ok[0].met


def test_quick_defaults_yield_to_explicit_flags() -> None:
    settings = rb.parse_args(["--quick", "--records", "1000"])
    assert (settings.records, settings.runs, settings.latency_seconds) == (1000, rb.QUICK["runs"], 1.0)
    assert rb.parse_args([]).records == rb.FULL["records"]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_tiny_run_measures_every_case_and_writes_its_report(tmp_path: Path, zookeeper: str) -> None:
    out = tmp_path / "results"
    argv = ["--quick", "--partitions", "1", "--records", "2000", "--latency-seconds", "0.5"]
    argv += ["--profile", "always", "--profile-seconds", "0.2", "--no-tansu"]
    argv += ["--zookeeper", zookeeper, "--dir", str(tmp_path / "data"), "--out", str(out)]
    settings = rb.parse_args(argv)

    assert rb.run(settings) == 0

    (md_path,) = out.glob("replication-*.md")
    (json_path,) = out.glob("replication-*.json")
    data = json.loads(json_path.read_text())
    assert {r["case"] for r in data["runs"]} == {c.key for c in settings.cases}
    assert all(r["target"] == "strait" and r["records"] == 2000 for r in data["runs"])
    assert all(r["records_per_request"] for r in data["runs"])  # the nodes' request counters were read
    # The phases of a replicated produce were read from the nodes' metrics: acks=all waited (remote).
    replicated = next(r for r in data["runs"] if r["case"] == REPLICATED.key)["requests"]
    for name in ("produce_local", "produce_remote", "produce_send", "replica_round_trip", "replica_turnaround"):
        assert rb.mean_ms(replicated, name) is not None, name
    assert rb.mean_ms(replicated, "produce_remote") > 0  # type: ignore[operator]
    # Latency with the producer's linger.ms (the goal's) and with 0 (a diagnostic), one row each.
    goal_row, diagnostic = data["latency_summary"]
    assert (goal_row["linger_ms"], goal_row["judged"]) == (settings.linger_ms, True) and settings.linger_ms > 0
    assert (diagnostic["linger_ms"], diagnostic["judged"]) == (0, False)
    assert set(goal_row["latency_ms"]) == {name for name, _ in PERCENTILES}
    assert {r["linger_ms"] for r in data["latency_runs"]} == {0, settings.linger_ms}
    assert {(p["case"], p["broker_id"]) for p in data["profiles"]} == {
        (case, node) for case in (rb.BASE.key, REPLICATED.key) for node in (1, 2, 3)
    }
    assert all(p["samples"] > 0 for p in data["profiles"])
    assert {c["case"] for c in data["profile_clients"]} == {rb.BASE.key, REPLICATED.key}
    for key in ("cpu_model", "cores", "ram_gib", "kernel", "fs_type_mounts", "python"):
        assert data["machine"][key]
    assert data["command"].endswith("-m bench.replication_bench " + " ".join(argv))
    text = md_path.read_text()
    for heading in ("## Machine", "## Settings", "## Results", "## Profile"):
        assert heading in text
    assert "| partitions | runs | produce unread | produce local | produce remote |" in text
    assert (
        f"latency goal (p99 < 10 ms and p99.9 < 25 ms at 10% of RF 3 acks=all's max, linger.ms={settings.linger_ms})"
        in text
    )
    assert "latency with linger.ms=0 (diagnostic, no goal): 1p: p99 " in text
    # The client's CPU was read by thread, and librdkafka's broker threads were found by their names
    # (a run this short may not last one clock tick: the amounts are checked by the unit test above).
    for r in [*data["runs"], *data["latency_runs"]]:
        assert {_clients.APP_THREAD, _clients.RDK_BROKER_THREADS} <= set(r["client_threads_s"])
        assert all(v >= 0 for v in r["client_threads_s"].values())
    assert "| partitions | runs | nodes | client: application thread | client: librdkafka broker threads |" in text
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())  # scratch removed
