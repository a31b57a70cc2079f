"""``strait audit replicas`` on a real site: three nodes written to with acks=all, stopped, their dirs audited.

The site runs once for the module (RF 3, small segments so that each copy has several);
each test copies its stopped nodes' dirs, plants its damage in the copy as an operator's disk
might have it, and runs ``strait audit replicas`` on it, in this process on the session's
SparkSession; the first test runs it as an operator does, ``python -m spark_jobs.jobs.replicas``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from storage import list_batches, read_offsets, segment_files
from storage.records import build_batch, set_base_offset, set_partition_leader_epoch
from tests.node.conftest import SITE_PROPS
from tests.node.harness import NodeProcess
from tests.node.test_replication import create_topic, produce
from tests.spark_jobs.audit_run import audit

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

TOPIC = "orders"
RECORDS = 400


@dataclass(frozen=True)
class Site:
    root: Path  # holds node-1/, node-2/, node-3/
    acked: dict[tuple[int, int], bytes]  # (partition, offset) -> value


@pytest.fixture(scope="module")
def stopped_site(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("replicas-site")
    connect = f"{zookeeper}/replicas-{uuid.uuid4().hex}"
    nodes = [NodeProcess(i, root / f"node-{i}", connect, dict(SITE_PROPS)) for i in (1, 2, 3)]
    try:
        for node in nodes:
            node.start()
        bootstrap = ",".join(n.bootstrap for n in nodes)
        create_topic(nodes, TOPIC, partitions=2, rf=3, **{"segment.bytes": "2048", "min.insync.replicas": "2"})
        values = [f"value-{i:05d}-{'x' * (i % 17)}".encode() for i in range(RECORDS)]
        acked = produce(bootstrap, TOPIC, values, **{"linger.ms": 0, "batch.num.messages": 7})
    finally:
        codes = [node.stop() for node in nodes]
    assert codes == [0, 0, 0], "every node stops cleanly (it writes its checkpoints)"
    assert len(acked) == RECORDS
    yield Site(root, {(p, o): v for p, o, v in acked})


def copy_site(site: Site, tmp_path: Path) -> Path:
    target = tmp_path / "site"
    shutil.copytree(site.root, target, ignore=shutil.ignore_patterns("*.log.tmp"))
    return target


def partition_dir(site_dir: Path, node: int, partition: int) -> Path:
    name = f"{TOPIC}-{partition}"
    (found,) = [d / name for d in (site_dir / f"node-{node}").glob("d*") if (d / name).is_dir()]
    return found


def hw(site_dir: Path, partition: int) -> int:
    marks = []
    for log_dir in site_dir.glob("node-*/d*"):
        for tp, offset in read_offsets(log_dir / "replication-offset-checkpoint").items():
            if (tp.topic, tp.partition) == (TOPIC, partition):
                marks.append(int(offset))
    return max(marks)


def replicas(*args: str, own_process: bool = False) -> tuple[int, str, dict[str, Any] | None]:
    return audit("replicas", *args, own_process=own_process)


@pytest.fixture(autouse=True)
def _session(spark: Any) -> Any:
    """The in-process jobs use the session's SparkSession."""
    return spark


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda r: (r["kind"], r["partition"], r["offset"], r["copy"] or ""))


def brief(rows: list[dict[str, Any]]) -> list[tuple[str, int, int, str | None]]:
    return [(r["kind"], r["partition"], r["offset"], r["copy"]) for r in rows]


def test_a_clean_site_agrees_up_to_the_high_watermark(stopped_site: Site, tmp_path: Path) -> None:
    site = copy_site(stopped_site, tmp_path)
    code, output, summary = replicas("--site-dir", str(site), "--out", str(tmp_path / "out"), own_process=True)
    assert code == 0, output[-3000:]
    assert summary is not None and summary["verdict"] == "clean"
    assert summary["discrepancies"]["total"] == 0 and summary["invalid"]["rows"] == 0
    assert summary["totals"]["copies"] == 6 and summary["totals"]["records"] == 3 * RECORDS
    for part in summary["partitions"]:
        counts, end = part["counts"], hw(site, part["partition"])
        assert counts["copies"] == 3 and counts["hw"] == end
        assert end == sum(1 for p, _ in stopped_site.acked if p == part["partition"])
        assert part["ranges"] == {f"node-{n}": [0, end] for n in (1, 2, 3)}
    assert (tmp_path / "out" / "report.html").exists()


def test_a_flipped_byte_below_the_hw_is_divergent_and_its_batch_invalid(stopped_site: Site, tmp_path: Path) -> None:
    site = copy_site(stopped_site, tmp_path)
    (offset, value), *_ = sorted((o, v) for (p, o), v in stopped_site.acked.items() if p == 0 and o >= 20)
    segment = next(s for s in segment_files(partition_dir(site, 2, 0)) if value in s.read_bytes())
    data = bytearray(segment.read_bytes())
    at = data.index(value) + len(value) - 1
    data[at] ^= 0x01
    segment.write_bytes(bytes(data))
    batch = next(b.header for b in list_batches(segment) if b.header.base_offset <= offset <= b.header.last_offset)
    code, output, summary = replicas("--site-dir", str(site), "--out", str(tmp_path / "out"))
    assert code == 1, output[-3000:]
    rows = parquet_rows(tmp_path / "out" / "discrepancies")
    assert brief(rows) == [("divergent", 0, offset, None)]
    assert sorted(c["copy"] for c in rows[0]["copies"]) == ["node-1", "node-2", "node-3"]
    assert summary is not None and summary["invalid"]["rows"] == batch.records_count
    assert list(summary["invalid"]["by_error"]) == [f"CRC mismatch in the batch at offset {batch.base_offset}"]
    assert parquet_rows(tmp_path / "out" / "informational") == []


def test_a_copy_truncated_while_down_is_missing_and_short(stopped_site: Site, tmp_path: Path) -> None:
    """node-3's copy of partition 1 loses the last two batches of its first segment (a hole:
    later segments are whole); its copy of partition 0 loses its last batch (it ends short)."""
    site = copy_site(stopped_site, tmp_path)
    first, *rest = segment_files(partition_dir(site, 3, 1))
    assert rest, "the copy has rolled segments"
    batches = list(list_batches(first))
    cut = batches[-2]
    lost_hole = range(cut.header.base_offset, batches[-1].header.last_offset + 1)
    with first.open("r+b") as f:
        f.truncate(cut.position)
    last = segment_files(partition_dir(site, 3, 0))[-1]
    tail = list(list_batches(last))[-1]
    with last.open("r+b") as f:
        f.truncate(tail.position)
    end0 = hw(site, 0)
    code, output, summary = replicas("--site-dir", str(site), "--out", str(tmp_path / "out"))
    assert code == 1, output[-3000:]
    rows = parquet_rows(tmp_path / "out" / "discrepancies")
    assert brief(rows) == [("missing", 1, o, "node-3") for o in lost_hole]
    assert brief(parquet_rows(tmp_path / "out" / "informational")) == [("short", 0, tail.header.base_offset, "node-3")]
    assert summary is not None and summary["totals"]["informational.short"] == 1
    assert summary["discrepancies"] == {"total": len(lost_hole), "by_kind": {"missing": len(lost_hole)}}
    part0 = next(p for p in summary["partitions"] if p["partition"] == 0)
    assert part0["ranges"]["node-3"] == [0, tail.header.base_offset] and part0["counts"]["hw"] == end0
    strict = tmp_path / "strict"
    code, output, summary = replicas("--site-dir", str(site), "--strict", "--out", str(strict))
    assert code == 1, output[-3000:]
    assert brief(parquet_rows(strict / "discrepancies")) == sorted(
        [("short", 0, tail.header.base_offset, "node-3"), *(("missing", 1, o, "node-3") for o in lost_hole)]
    )


def test_an_uncommitted_tail_on_one_copy_is_informational(stopped_site: Site, tmp_path: Path) -> None:
    site = copy_site(stopped_site, tmp_path)
    last = segment_files(partition_dir(site, 1, 0))[-1]
    final = list(list_batches(last))[-1].header
    batch = bytearray(build_batch([(1_700_000_000_000 + n, None, f"tail-{n}".encode()) for n in range(3)]))
    set_base_offset(batch, final.next_offset)
    set_partition_leader_epoch(batch, final.partition_leader_epoch)
    with last.open("ab") as f:
        f.write(batch)
    end = hw(site, 0)
    assert final.next_offset == end
    code, output, summary = replicas("--site-dir", str(site), "--out", str(tmp_path / "out"))
    assert code == 0, output[-3000:]
    assert summary is not None and summary["verdict"] == "clean"
    rows = parquet_rows(tmp_path / "out" / "informational")
    assert brief(rows) == [("uncommitted", 0, end + n, None) for n in range(3)]
    assert all([c["copy"] for c in r["copies"]] == ["node-1"] for r in rows)
    assert "node-2, node-3 hold nothing there" in rows[0]["detail"]
    assert summary["totals"]["informational.uncommitted"] == 3
    part0 = next(p for p in summary["partitions"] if p["partition"] == 0)
    assert part0["ranges"]["node-1"] == [0, end + 3] and part0["counts"]["informational.uncommitted"] == 3


def test_bad_input_is_named_exits_2_and_leaves_no_summary(stopped_site: Site, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output, summary = replicas("--node", str(tmp_path / "nowhere"), "--out", str(out))
    assert (code, summary) == (2, None) and "nowhere: no such directory" in output
    code, output, summary = replicas("--site-dir", str(tmp_path), "--out", str(out))
    assert (code, summary) == (2, None) and "holds no node directory" in output
    site = copy_site(stopped_site, tmp_path)
    code, output, summary = replicas("--site-dir", str(site), "--topics", "nosuch", "--out", str(out))
    assert (code, summary) == (2, None) and "nosuch: in no log dir of the nodes given" in output
    checkpoint = next(site.glob("node-2/d*/replication-offset-checkpoint"))
    checkpoint.write_text("0\n7\norders 0 1\n")
    code, output, summary = replicas("--site-dir", str(site), "--out", str(out))
    assert (code, summary) == (2, None) and f"{checkpoint}: header says 7 entries" in output
    assert not (out / "summary.json").exists()
