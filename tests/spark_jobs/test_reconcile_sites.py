"""reconcile end to end: two real sites (one node each), a real offset-preserving link and a real
MM2 link between them, the job run on the live sites and on their segment files.

One pair of sites serves the module; each test uses its own topics, so they run in any order:

- ``orders`` (2 partitions, lz4, headers, null keys): mirrored untouched, must be clean;
- ``planted`` (2 partitions, one record per batch): the planted differences, made while both
  nodes are stopped: on west (the target) the batch holding offset 10 of ``planted``-0 is cut
  out of its segment file (the rest of the file moves up, its index files are deleted so the
  node rebuilds them: the record is gone, the log's range still covers it) and one byte of the
  value at offset 20 is flipped with the batch CRC recomputed (a silent corruption the node
  serves as it is); on east (the source) offset 15 of ``planted``-1 is cut the same way, so the
  target holds a record the source lacks: an extra record. (An offset-preserving mirror topic
  refuses produce requests, so an extra record at an offset both logs cover can only come from
  the source losing it; the MM2 test produces one straight to the target.) For the segment
  run a copy of west's disks also gets one value byte flipped *without* fixing the CRC in
  ``crcflip``-0: an invalid row, and the source's record there is unreadable, not missing;
- ``rekeyed`` (one record per batch, key ``r`` at offsets 3 and 25): west's offset 3 is cut out
  too; the target's later record of that key sits in a batch both sides hold alike, which the
  batch pass does not decode, so the record is ``superseded`` only if reconcile looks past the
  batches it compares by record (it must, and ``--by-record`` agrees);
- ``mm`` (MM2 link, ``east.mm`` on west): clean, then a record produced to the target only;
- ``live``: the streaming reconcile and its restart.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror import LinkRunner, load_links
from spark_jobs.jobs import _reconcile_batches
from spark_jobs.jobs._reconcile_mm2 import decode_sync_key, decode_sync_value
from spark_jobs.jobs._reconcile_sides import parse_side
from spark_jobs.jobs.reconcile import command
from storage import list_batches, segment_files
from storage.records import crc_of
from tests.mirror.conftest import Site
from tests.mirror.test_link import RunningLink
from tests.node.harness import NodeProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

OFFSET_TOPICS = {"orders": 2, "planted": 2, "crcflip": 1, "rekeyed": 1, "live": 2}
ONE_NODE = {"default.replication.factor": "1", "offsets.topic.replication.factor": "1"}
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Sites:
    east: Site
    west: Site
    root: Path

    @property
    def east_node(self) -> NodeProcess:
        return self.east.nodes[0]

    @property
    def west_node(self) -> NodeProcess:
        return self.west.nodes[0]


def create(site: Site, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        future.result(30)


def produce(site: Site, topic: str, records: list[tuple[int, bytes | None, bytes, list[Any]]], **conf: Any) -> None:
    """``(partition, key, value, headers)`` each; ``one_per_batch``: flush after every record."""
    one = conf.pop("one_per_batch", False)
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "linger.ms": 5, **conf})
    for partition, key, value, headers in records:
        producer.produce(topic, key=key, value=value, partition=partition, headers=headers or None)
        if one:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def ends(bootstrap: str, topics: dict[str, int]) -> dict[tuple[str, int], int]:
    side = parse_side("--source", bootstrap, timeout_s=10)
    return {tp: r[1] for tp, r in side.ranges({t: list(range(n)) for t, n in topics.items()}).items()}


def caught_up(sites: Sites, topics: dict[str, int], prefix: str = "") -> dict[tuple[str, int], int]:
    """Wait until the target's end offsets equal the source's (offset-preserving topics)."""
    source = ends(sites.east.bootstrap, topics)
    remote = {f"{prefix}{t}": n for t, n in topics.items()}

    def same() -> bool:
        return {(t[len(prefix) :], p): e for (t, p), e in ends(sites.west.bootstrap, remote).items()} == source

    wait_for(f"west to hold {sorted(topics)} as east does", same, 90)
    return source


def last_sync(sites: Sites, topic: str) -> int:
    """The upstream offset of the latest offset sync of ``topic``-0 on east (-2: none)."""
    consumer = Consumer(
        {"bootstrap.servers": sites.east.bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition("mm2-offset-syncs.west.internal", 0, 0)])
        found = -2
        while (msg := consumer.poll(2)) is not None and not msg.error():
            if decode_sync_key(msg.key()) == (topic, 0) and msg.value() is not None:
                found = decode_sync_value(msg.value())[0]
        return found
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def sites(zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    root = tmp_path_factory.mktemp("reconcile-sites")
    nodes: list[NodeProcess] = []
    try:
        pair = []
        for name in ("east", "west"):
            node = NodeProcess(1, root / name, f"{zookeeper}/{name}-{uuid.uuid4().hex}", dict(ONE_NODE))
            nodes.append(node)
            pair.append(Site(name, node.zk_connect, [node.start()]))
        east, west = pair
        create(east, {**OFFSET_TOPICS, "mm": 1})
        orders = [
            (i % 2, None if i % 7 == 0 else f"o{i}".encode(), f"order {i}".encode(), [("n", b"%d" % i)])
            for i in range(80)
        ]
        produce(east, "orders", orders, **{"compression.type": "lz4"})
        planted = [(p, f"k{p}-{i}".encode(), f"value {p}-{i}".encode(), []) for p in (0, 1) for i in range(30)]
        produce(east, "planted", planted, one_per_batch=True)
        produce(
            east, "crcflip", [(0, f"c{i}".encode(), f"crc {i}".encode(), []) for i in range(10)], one_per_batch=True
        )
        # Key r at offsets 3 and 25, the other keys distinct: the target losing offset 3 is superseded.
        rekeyed = [(0, b"r" if i in (3, 25) else f"q{i}".encode(), f"rekeyed {i}".encode(), []) for i in range(30)]
        produce(east, "rekeyed", rekeyed, one_per_batch=True)
        produce(east, "mm", [(0, f"m{i}".encode(), f"mm {i}".encode(), []) for i in range(20)])
        links = root / "links.toml"
        links.write_text(
            f"""
[[link]]
name = "east-to-west"
sync_interval_s = 0.5
source = {{ name = "east", bootstrap = "{east.bootstrap}" }}
target = {{ name = "west", bootstrap = "{west.bootstrap}" }}
topics = {{ include = {json.dumps(sorted(OFFSET_TOPICS))} }}

[[link]]
name = "east-to-west-mm2"
mode = "mm2"
sync_interval_s = 0.5
source = {{ name = "east", bootstrap = "{east.bootstrap}" }}
target = {{ name = "west", bootstrap = "{west.bootstrap}" }}
topics = {{ include = ["mm"] }}
"""
        )
        offset_link, mm2_link = load_links(links)
        with RunningLink(LinkRunner(offset_link)), RunningLink(LinkRunner(mm2_link)):
            sites = Sites(east, west, root)
            caught_up(sites, {t: n for t, n in OFFSET_TOPICS.items() if t != "live"})
            caught_up(sites, {"mm": 1}, prefix="east.")
            wait_for("the offset sync of mm's last record", lambda: last_sync(sites, "mm") == 19, 30)
            yield sites
    finally:
        for node in nodes:
            node.stop()


def reconcile(out: Path, *args: str) -> tuple[int, str, dict[str, Any] | None]:
    result = CliRunner().invoke(command, [*args, "--out", str(out)])
    path = out / "summary.json"
    return result.exit_code, result.output, json.loads(path.read_text()) if path.exists() else None


def found(out: Path) -> set[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    table = pq.read_table(out / "discrepancies")
    return {(r["kind"], r["topic"], r["partition"], r["offset"]) for r in table.to_pylist()}


# -- surgery on segment files (the node is stopped) ---------------------------------------------------


def batch_at(partition_dir: Path, offset: int) -> tuple[Path, int, int]:
    """(segment file, byte position, size) of the batch holding ``offset``."""
    for seg in segment_files(partition_dir):
        for info in list_batches(seg):
            if info.header.base_offset <= offset <= info.header.last_offset:
                return seg, info.position, info.header.size
    raise AssertionError(f"no batch holds offset {offset} in {partition_dir}")


def partition_dir(node: NodeProcess, topic: str, partition: int) -> Path:
    (found_dir,) = [d / f"{topic}-{partition}" for d in node.log_dirs if (d / f"{topic}-{partition}").is_dir()]
    return found_dir


def cut_batch(directory: Path, offset: int) -> None:
    seg, pos, size = batch_at(directory, offset)
    data = seg.read_bytes()
    seg.write_bytes(data[:pos] + data[pos + size :])
    for suffix in (".index", ".timeindex"):  # stale positions: the node rebuilds them on start
        seg.with_suffix(suffix).unlink(missing_ok=True)


def flip_value_byte(directory: Path, offset: int, *, fix_crc: bool) -> None:
    """Flip the last byte of the value of a one-record, header-less, uncompressed batch."""
    seg, pos, size = batch_at(directory, offset)
    data = bytearray(seg.read_bytes())
    batch = data[pos : pos + size]
    batch[-2] ^= 0x01  # the last byte is the header count (0); the one before ends the value
    if fix_crc:
        # The CRC-32C is at byte 17 (after baseOffset 8, batchLength 4, leader epoch 4, magic 1).
        batch[17:21] = crc_of(batch, 0, len(batch)).to_bytes(4, "big")
    data[pos : pos + size] = batch
    seg.write_bytes(bytes(data))


# -- the tests ---------------------------------------------------------------------------------------------


def test_clean_sites_are_clean_live_and_from_segments(sites: Sites, spark: Any, tmp_path: Path) -> None:
    live = tmp_path / "live"
    status, output, summary = reconcile(
        live, "--source", sites.east.bootstrap, "--target", sites.west.bootstrap, "--topics", "orders", "--link", "l"
    )
    assert status == 0, output
    assert summary is not None and summary["verdict"] == "clean"
    totals = summary["totals"]
    assert (totals["source_records"], totals["target_records"], totals["matched"]) == (80, 80, 80)
    assert summary["inputs"]["link"] == "l" and summary["inputs"]["source_kind"] == "kafka"
    assert [(p["topic"], p["partition"], p["ranges"]) for p in summary["partitions"]] == [
        ("orders", p, {"source": [0, 40], "target": [0, 40]}) for p in (0, 1)
    ]
    assert (live / "report.html").exists() and found(live) == set()

    disks = tmp_path / "disks"
    status, output, summary = reconcile(
        disks, "--source", str(sites.east_node.workdir), "--target", str(sites.west_node.workdir), "--topics", "orders"
    )
    assert status == 0, output
    assert summary is not None and summary["verdict"] == "clean" and summary["totals"]["matched"] == 80
    assert summary["inputs"]["source_kind"] == "segments"


def test_an_unknown_topic_is_bad_input_naming_topics(sites: Sites, spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    status, output, summary = reconcile(
        out, "--source", sites.east.bootstrap, "--target", sites.west.bootstrap, "--topics", "orders,nope"
    )
    assert status == 2, output
    assert "--topics: nope: no such topic on the source" in output
    assert summary is None and not any(out.iterdir())


def test_planted_differences_are_found_exactly(sites: Sites, spark: Any, tmp_path: Path) -> None:
    west_planted = partition_dir(sites.west_node, "planted", 0)
    sites.west_node.stop()
    sites.east_node.stop()
    cut_batch(west_planted, 10)
    flip_value_byte(west_planted, 20, fix_crc=True)
    cut_batch(partition_dir(sites.east_node, "planted", 1), 15)
    cut_batch(partition_dir(sites.west_node, "rekeyed", 0), 3)
    disks = tmp_path / "west-disks"  # a copy of west's disks with a CRC-breaking flip the node would refuse
    shutil.copytree(sites.west_node.workdir, disks, ignore=shutil.ignore_patterns("*.log.txt"))
    crc_dir = next(d / "crcflip-0" for d in (disks / "d1", disks / "d2") if (d / "crcflip-0").is_dir())
    flip_value_byte(crc_dir, 5, fix_crc=False)
    sites.east_node.start()
    sites.west_node.start()
    expected = {("missing", "planted", 0, 10), ("different", "planted", 0, 20), ("extra", "planted", 1, 15)}

    live = tmp_path / "live"
    args = ["--source", sites.east.bootstrap, "--target", sites.west.bootstrap, "--topics", "planted,crcflip,rekeyed"]
    status, output, summary = reconcile(live, *args)
    assert status == 1, output
    assert summary is not None and summary["verdict"] == "found"
    assert found(live) == expected
    assert summary["discrepancies"] == {"total": 3, "by_kind": {"different": 1, "extra": 1, "missing": 1}}
    assert {s["offset"]: s["detail"] for s in summary["samples"]}[20] == "differs in value"
    by_partition = {(p["topic"], p["partition"]): p["counts"] for p in summary["partitions"]}
    assert by_partition[("planted", 0)]["matched"] == 28 and by_partition[("planted", 1)]["matched"] == 29
    # Offset 3's key has a later record on the target, in a batch both sides hold alike: superseded.
    assert (by_partition[("rekeyed", 0)]["superseded"], by_partition[("rekeyed", 0)]["missing"]) == (1, 0)
    assert summary["invalid"]["rows"] == 0
    assert summary["inputs"]["compared_by"] == "batches, then records where batches differ"

    segments = tmp_path / "segments"
    args = ["--source", str(sites.east_node.workdir), "--target", str(disks), "--topics", "planted,crcflip,rekeyed"]
    status, output, summary = reconcile(segments, *args)
    assert status == 1, output
    assert found(segments) == expected
    assert summary is not None and summary["invalid"]["rows"] == 1
    ((error, n),) = summary["invalid"]["by_error"].items()
    assert n == 1 and error.startswith("target: CRC mismatch")
    crc = next(p["counts"] for p in summary["partitions"] if p["topic"] == "crcflip")
    assert (crc["unreadable"], crc["matched"], crc["missing"]) == (1, 9, 0)
    assert summary["inputs"]["compared_by"] == "batches, then records where batches differ"
    agreed = next(n for n in summary["notes"] if "without being decoded" in n)
    assert int(agreed.split()[0]) > 0, agreed  # some batches were agreed, the rest compared by record

    # Every record decoded and compared: the same answer, count for count.
    by_record = tmp_path / "by-record"
    status, output, every = reconcile(by_record, *args, "--by-record")
    assert status == 1, output
    assert every is not None and "compared_by" not in every["inputs"]
    assert found(by_record) == expected
    assert every["totals"] == summary["totals"] and every["invalid"] == summary["invalid"]
    assert [p["counts"] for p in every["partitions"]] == [p["counts"] for p in summary["partitions"]]

    # Batches that differ in too many places: every record compared, the same answer again.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_reconcile_batches, "SLOW_BATCHES_LIMIT", 0)
        fallback = tmp_path / "fallback"
        status, output, fell = reconcile(fallback, *args)
    assert status == 1, output
    assert fell is not None and any("differ too much" in n for n in fell["notes"])
    assert found(fallback) == expected and fell["totals"] == summary["totals"]


def test_an_mm2_link_is_matched_by_content_and_a_record_produced_to_the_target_is_extra(
    sites: Sites, spark: Any, tmp_path: Path
) -> None:
    args = ["--source", sites.east.bootstrap, "--target", sites.west.bootstrap, "--mode", "mm2"]
    args += ["--source-alias", "east", "--topics", "mm"]
    clean = tmp_path / "clean"
    status, output, summary = reconcile(clean, *args)
    assert status == 0, output
    assert summary is not None and summary["inputs"]["target_alias"] == "west"
    assert summary["totals"]["matched"] == 20
    (part,) = summary["partitions"]
    assert part["target_topic"] == "east.mm" and part["window"] == {"source": [0, 20], "target": [0, 20]}

    produce(sites.west, "east.mm", [(0, b"stray", b"only on west", [])])
    produce(sites.east, "mm", [(0, f"m{i}".encode(), f"mm {i}".encode(), []) for i in range(20, 25)])
    wait_for("the offset sync of mm's new last record", lambda: last_sync(sites, "mm") == 24, 60)
    out = tmp_path / "found"
    status, output, summary = reconcile(out, *args)
    assert status == 1, output
    assert found(out) == {("extra", "mm", 0, 20)}
    assert summary is not None and summary["totals"]["matched"] == 25


def live_records(start: int, stop: int) -> list[tuple[int, bytes, bytes, list[Any]]]:
    return [(i % 2, f"l{i}".encode(), f"live {i}".encode(), []) for i in range(start, stop)]


def test_continuous_follows_the_mirror_and_resumes_from_its_checkpoint(
    sites: Sites, spark: Any, tmp_path: Path
) -> None:
    produce(sites.east, "live", live_records(0, 30))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    args = ["--source", sites.east.bootstrap, "--target", sites.west.bootstrap, "--topics", "live", "--continuous"]
    args += ["--checkpoint", str(checkpoint), "--trigger-seconds", "1", "--until-idle", "6"]

    # In this process: once the first micro-batch's result is out, more records are mirrored.
    def more() -> None:
        wait_for("the first micro-batch's summary", (out / "summary.json").exists, 240)
        produce(sites.east, "live", live_records(30, 50))

    producer = threading.Thread(target=more, name="live producer")
    producer.start()
    status, output, first = reconcile(out, *args)
    producer.join()
    assert status == 0, output
    assert first is not None and first["verdict"] == "clean" and first["inputs"]["continuous"] is True
    assert (first["totals"]["matched"], first["totals"]["target_records"]) == (50, 50)
    assert first["totals"]["micro_batches"] >= 2

    # Restarted in a new process on the same checkpoint: only what was mirrored since is compared.
    produce(sites.east, "live", live_records(50, 60))
    argv = [sys.executable, "-m", "spark_jobs.jobs.reconcile", *args, "--out", str(out), "--master", "local[2]"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=280, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    second = json.loads((out / "summary.json").read_text())
    assert second["verdict"] == "clean"
    assert (second["totals"]["matched"], second["totals"]["target_records"]) == (60, 60)
    assert second["totals"]["micro_batches"] > first["totals"]["micro_batches"]
    assert {p["ranges"]["target"][1] for p in second["partitions"]} == {30}
