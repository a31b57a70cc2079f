"""``strait audit ledger`` on log dirs written by strait's storage: its exit statuses, its output
directory, and every kind of bad input named.

The jobs run in this process on the session's SparkSession (a JVM each would cost seconds
apiece); the first test runs it as an operator does, ``python -m spark_jobs.jobs.ledger``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from storage import LogConfig, LogManager, TopicPartition
from storage.records import LeaderEpoch, build_batch
from tests.chaos.checkers.builder import Builder, log, rec
from tests.node.harness import NodeProcess
from tests.node.test_replication import create_topic, produce
from tests.spark_jobs.audit_run import audit
from tests.spark_jobs.ledger_agreement import write_history

pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = 1_700_000_000_000


def write_node(root: Path, values: dict[tuple[str, int], Sequence[str]]) -> Path:
    """A node's data dir (one log dir) whose partitions hold ``values`` from offset 0, two per batch."""
    manager = LogManager([root / "d1"], LogConfig(segment_bytes=1024), broker_id=1)
    manager.startup()
    for (topic, partition), held in values.items():
        partition_log = manager.create_log(TopicPartition(topic, partition))
        for i in range(0, len(held), 2):
            batch = build_batch([(T0 + i, None, value.encode()) for value in held[i : i + 2]])
            partition_log.append(batch, leader_epoch=LeaderEpoch(0))
        partition_log.high_watermark = partition_log.log_end_offset
    manager.shutdown()
    return root


def ledger(*args: str, own_process: bool = False) -> tuple[int, str, dict[str, Any] | None]:
    return audit("ledger", *args, own_process=own_process)


@pytest.fixture(autouse=True)
def _session(spark: Any) -> Any:
    """The in-process jobs use the session's SparkSession."""
    return spark


@pytest.fixture
def history(tmp_path: Path) -> Path:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c", "d"])
    b.read("east", log(["a", "b", "c", "d"]), ends={"t/0": [0, 4]})
    return write_history(tmp_path / "history.jsonl", b.ops)


def test_a_site_that_holds_every_acknowledged_write_is_clean(history: Path, tmp_path: Path) -> None:
    node = write_node(tmp_path / "node-1", {("t", 0): ["a", "b", "c", "d", "x"]})
    out = tmp_path / "out"
    code, output, summary = ledger(
        "--history", str(history), "--segments", str(node), "--out", str(out), own_process=True
    )
    assert code == 0, output[-3000:]
    assert "ledger: clean: 0 discrepancies, 0 invalid row(s)" in output
    assert summary is not None and summary["verdict"] == "clean" and summary["job"] == "ledger"
    assert summary["inputs"] == {
        "history": [str(history)],
        "segments": [str(node)],
        "topics": ["t"],
        "history_site": ["east"],
    }
    assert summary["totals"] == {
        "history_files": 1,
        "history_lines": 10,
        "torn_lines": 0,
        "acknowledged": 4,
        "exported": 0,
        "site_records": 5,
        "partitions": 1,
        "unacknowledged_landed": 1,
    }
    assert summary["partitions"][0]["ranges"] == {"site": [0, 5]}
    assert (out / "report.html").exists() and pq.read_table(out / "discrepancies").num_rows == 0


def test_what_the_site_lost_is_found_with_exit_status_1(history: Path, tmp_path: Path) -> None:
    node = write_node(tmp_path / "node-1", {("t", 0): ["a", "b", "z"]})
    out = tmp_path / "out"
    code, output, summary = ledger("--history", str(history), "--segments", str(node), "--out", str(out))
    assert code == 1, output[-3000:]
    assert summary is not None and summary["verdict"] == "found"
    assert summary["discrepancies"] == {"total": 3, "by_kind": {"inconsistent-offsets": 1, "lost": 2}}
    rows = sorted(pq.read_table(out / "discrepancies").to_pylist(), key=lambda r: (r["kind"], r["offset"]))
    assert [(r["kind"], r["offset"], r["value"]) for r in rows] == [
        ("inconsistent-offsets", 2, None),
        ("lost", 2, "c"),
        ("lost", 3, "d"),
    ]
    assert sorted((s["kind"], s["offset"]) for s in summary["samples"]) == [
        ("inconsistent-offsets", 2),
        ("lost", 2),
        ("lost", 3),
    ]
    code, output, _ = ledger("--history", str(history), "--segments", str(node), "--out", str(out))
    assert code == 2 and "holds an earlier result (summary.json); pass --overwrite" in output


def test_bad_input_is_named_and_leaves_no_result(history: Path, tmp_path: Path) -> None:
    node = write_node(tmp_path / "node-1", {("t", 0): ["a", "b", "c", "d"]})
    out = tmp_path / "out"
    cases: list[tuple[list[str], str]] = [
        (["--history", str(history)], "give the site to audit: --site BOOTSTRAP (live) or --segments DIR"),
        (["--history", str(history), "--segments", str(node), "--site", "h:9092"], "give the site to audit"),
        (["--history", str(tmp_path / "nowhere.jsonl"), "--segments", str(node)], "nowhere.jsonl: no such file"),
        (["--history", str(history), "--segments", str(tmp_path / "nodisk")], "nodisk: no such directory"),
        (["--history", str(history), "--segments", str(node), "--topics", " , "], "name at least one topic"),
    ]
    for args, message in cases:
        code, output, summary = ledger(*args, "--out", str(out))
        assert (code, summary) == (2, None), (args, output[-2000:])
        assert message in output, (args, output[-2000:])
        assert not out.exists(), "a job refused before it started leaves --out alone"
    code, output, summary = ledger(
        "--history", str(history), "--segments", str(node), "--topics", "u", "--out", str(out)
    )
    assert (code, summary) == (2, None) and "u" in output.splitlines()[-1], output[-2000:]


@pytest.mark.integration
def test_a_live_site_through_strait_kafka(zookeeper: str, tmp_path: Path) -> None:
    """--site reads the site through the Kafka protocol: what it lost is found the same way."""
    node = NodeProcess(1, tmp_path / "node-1", f"{zookeeper}/ledger-{uuid.uuid4().hex}", {})
    try:
        node.start()
        create_topic([node], "t", partitions=2, rf=1)
        acked = produce(node.bootstrap, "t", [f"v{i}".encode() for i in range(20)])
        b = Builder()
        for partition, offset, value in sorted(acked):
            b.send("producer-0", value.decode(), offset, partition=partition)
        b.send("producer-0", "never-written", 100, partition=1)
        b.read("east", [rec(o, v.decode(), partition=p) for p, o, v in acked])
        path = write_history(tmp_path / "history.jsonl", b.ops)
        out = tmp_path / "out"
        code, output, summary = ledger("--history", str(path), "--site", node.bootstrap, "--out", str(out))
    finally:
        node.stop()
    assert code == 1, output[-3000:]
    assert summary is not None and summary["inputs"]["site"] == node.bootstrap
    assert summary["totals"]["site_records"] == 20 and summary["totals"]["acknowledged"] == 21
    rows = pq.read_table(out / "discrepancies").to_pylist()
    assert [(r["kind"], r["partition"], r["offset"], r["value"]) for r in rows] == [("lost", 1, 100, "never-written")]


def test_malformed_history_lines_exit_2_and_overwrite_leaves_no_old_result(history: Path, tmp_path: Path) -> None:
    node = write_node(tmp_path / "node-1", {("t", 0): ["a", "b", "c", "d"]})
    out = tmp_path / "out"
    code, output, _ = ledger("--history", str(history), "--segments", str(node), "--out", str(out))
    assert code == 0, output[-3000:]
    lines = history.read_text().splitlines()
    lines.insert(2, '{"index": 99, "type": "ok", "process": "producer-0", "f": "send", "topic": "t", "value": "q"}')
    history.write_text("\n".join(lines) + "\n")
    code, output, summary = ledger("--history", str(history), "--segments", str(node), "--out", str(out), "--overwrite")
    assert (code, summary) == (2, None), output[-3000:]
    assert f"error: ledger: --history: 1 malformed line ({history}: 1), not a history entry" in output
    assert f"{history}:3: an acknowledged send needs topic, partition, offset and value" in output
    assert not list(out.glob(".incomplete-*"))
