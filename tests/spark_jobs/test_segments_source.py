"""The strait-segments data source through Spark: every option, codec and kind of damage.

The log dirs are written once for the module (``segment_data``); every test reads them
through the session's SparkSession.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.schema import BATCH_SCHEMA, RECORD_SCHEMA
from spark_jobs.sources.segments import SegmentSource
from storage.records import Compression
from tests.spark_jobs import segment_data as sd


@dataclass(frozen=True)
class Data:
    site: Path
    kp: Path
    damaged: Path
    damage_at: dict[str, int]

    @property
    def node1(self) -> Path:
        return self.site / "node1"

    @property
    def node2(self) -> Path:
        return self.site / "node2"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
    root = tmp_path_factory.mktemp("segments")
    damaged, damage_at = sd.build_damaged(root)
    return Data(sd.build_site(root), sd.build_kafka_python(root), damaged, damage_at)


@pytest.fixture(scope="module")
def read(spark: Any) -> Any:
    spark.dataSource.register(SegmentSource)

    def reader(path: object, **options: str) -> Any:
        r = spark.read.format("strait-segments")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load(path if isinstance(path, list) else str(path))

    return reader


def rows(df: Any) -> list[dict[str, Any]]:
    """The rows in (topic, partition, segment, offset) order (sorted here: a Spark sort is a stage more)."""
    found = [r.asDict(recursive=True) for r in df.collect()]
    return sorted(found, key=lambda r: (r["topic"], r["partition"], r["segment"] or "", r["offset"] or -1))


def content(found: list[dict[str, Any]]) -> list[tuple[object, ...]]:
    """The rows as ``segment_data.expected`` states them."""
    return [(r["offset"], r["key"], r["value"], r["headers"], int(r["timestamp"].timestamp() * 1000)) for r in found]


def offsets(found: list[dict[str, Any]], topic: str, partition: int = 0) -> list[int]:
    return [r["offset"] for r in found if (r["topic"], r["partition"]) == (topic, partition)]


@pytest.fixture(scope="module")
def node1_rows(data: Data, read: Any) -> list[dict[str, Any]]:
    """node1's data dir (both log dirs) with default options."""
    return rows(read(data.node1))


def test_the_schema_is_the_shared_record_schema(data: Data, read: Any) -> None:
    assert read(data.node1).schema == RECORD_SCHEMA
    assert SegmentSource.name() == "strait-segments"


def test_a_node_data_dir_reads_every_log_dir_and_every_rolled_segment(node1_rows: list[dict[str, Any]]) -> None:
    assert {(r["topic"], r["partition"]) for r in node1_rows} == {
        ("orders", 0),
        ("orders", 1),
        ("orders", 2),
        ("gaps", 0),
        ("txn", 0),
    }  # not __consumer_offsets, an internal topic; empty-0 has no rows
    orders0 = [r for r in node1_rows if (r["topic"], r["partition"]) == ("orders", 0)]
    assert content(orders0) == sd.expected("orders", 0, range(120))
    bases = sorted({int(Path(r["segment"]).stem) for r in orders0})
    assert len(bases) == 4 and bases[0] == 0  # rolled at 2048 bytes
    assert all(int(Path(r["segment"]).stem) == max(b for b in bases if b <= r["offset"]) for r in orders0)
    assert {(r["valid"], r["crcValid"], r["error"], r["timestampType"]) for r in node1_rows} == {(True, True, None, 0)}
    assert {r["leaderEpoch"] for r in node1_rows if r["topic"] == "orders"} == {3}
    assert {r["codec"] for r in orders0} == {c.name.lower() for c in Compression}
    orders2 = [r for r in node1_rows if (r["topic"], r["partition"]) == ("orders", 2)]
    assert {(r["producerId"], r["producerEpoch"]) for r in orders2} == {(7, 0)}
    assert [r["sequence"] for r in orders2] == list(range(120))
    assert {(r["producerId"], r["sequence"]) for r in orders0} == {(-1, -1)}


def test_earliest_is_the_log_start_offset_from_the_checkpoint(data: Data, read: Any) -> None:
    found = rows(read(data.node1, topics="orders"))
    assert offsets(found, "orders", 1) == list(range(sd.LOG_START_1, 120))
    explicit = rows(read(data.node1, topics="orders", startingOffsets='{"orders":{"1":0}}'))
    kept = offsets(explicit, "orders", 1)  # what the files still hold: the segment holding 30 starts lower
    assert kept[0] < sd.LOG_START_1 and kept == list(range(kept[0], 120))


def test_counts_through_spark_sql(data: Data, read: Any, spark: Any) -> None:
    read(data.site, copies="all").createOrReplaceTempView("strait_site")
    got = spark.sql(
        "SELECT topic, partition, count(*) AS n FROM strait_site "
        "WHERE valid GROUP BY topic, partition ORDER BY topic, partition"
    ).collect()
    assert [(r["topic"], r["partition"], r["n"]) for r in got] == [
        ("gaps", 0, 6),
        ("orders", 0, 120 + 60),
        ("orders", 1, (120 - sd.LOG_START_1) + 150),
        ("orders", 2, 240),
        ("txn", 0, 4),
    ]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_every_codec_written_by_strait_and_by_kafka_python(
    codec: Compression, node1_rows: list[dict[str, Any]], kp_rows: list[dict[str, Any]]
) -> None:
    name = codec.name.lower()
    by_strait = [r for r in node1_rows if r["topic"] == "orders" and r["codec"] == name]
    assert by_strait and all(r["valid"] for r in by_strait)
    for partition in (0, 1, 2):
        mine = [r for r in by_strait if r["partition"] == partition]
        assert content(mine) == sd.expected("orders", partition, [r["offset"] for r in mine])
    by_kafka_python = [r for r in kp_rows if r["topic"] == f"k-{name}"]
    assert content(by_kafka_python) == sd.expected(f"k-{name}", 0, range(sd.KP_RECORDS))
    assert {(r["codec"], r["valid"], r["crcValid"]) for r in by_kafka_python} == {(name, True, True)}
    assert {Path(r["segment"]).name for r in by_kafka_python} == {f"{0:020d}.log", f"{sd.KP_SECOND_SEGMENT:020d}.log"}


@pytest.fixture(scope="module")
def kp_rows(data: Data, read: Any) -> list[dict[str, Any]]:
    return rows(read(data.kp))


def test_an_empty_partition_has_no_rows(data: Data, read: Any) -> None:
    assert read(data.node1, topics="empty").count() == 0
    assert read(data.node1 / "d2" / "empty-0").count() == 0


def test_compacted_looking_offset_gaps_are_read_as_they_are(node1_rows: list[dict[str, Any]]) -> None:
    gaps = [r for r in node1_rows if r["topic"] == "gaps"]
    assert content(gaps) == sd.expected("gaps", 0, sd.GAP_OFFSETS)


def test_include_control_adds_the_transaction_marker(node1_rows: list[dict[str, Any]], data: Data, read: Any) -> None:
    txn = [r for r in node1_rows if r["topic"] == "txn"]
    assert [(r["offset"], r["isTransactional"], r["isControl"]) for r in txn] == [
        (0, True, False),
        (1, True, False),
        (2, True, False),
        (4, False, False),
    ]
    with_control = rows(read(data.node1, topics="txn", includeControl="true"))
    assert [(r["offset"], r["isControl"], r["producerId"]) for r in with_control if r["isControl"]] == [(3, True, 9)]
    assert len(with_control) == 5


def test_topics_and_topic_pattern(data: Data, read: Any) -> None:
    assert {r["topic"] for r in rows(read(data.node1, topics="gaps, txn"))} == {"gaps", "txn"}
    assert {r["topic"] for r in rows(read(data.node1, topicPattern="g.*|t.."))} == {"gaps", "txn"}
    assert {r["topic"] for r in rows(read(data.node1, topicPattern=".*"))} >= {"__consumer_offsets", "orders"}
    assert {r["topic"] for r in rows(read(data.node1, topics="__consumer_offsets"))} == {"__consumer_offsets"}


def test_offset_bounds_json_and_keywords(data: Data, read: Any) -> None:
    found = rows(
        read(
            data.node1,
            topics="orders",
            startingOffsets='{"orders":{"0":37,"2":-2}}',
            endingOffsets='{"orders":{"0":80,"1":-1}}',
        )
    )
    assert offsets(found, "orders", 0) == list(range(37, 80))
    assert offsets(found, "orders", 1) == list(range(sd.LOG_START_1, 120))
    assert offsets(found, "orders", 2) == list(range(120))
    keywords = rows(read(data.node1, topics="gaps", startingOffsets="earliest", endingOffsets="latest"))
    assert offsets(keywords, "gaps") == sd.GAP_OFFSETS
    inside_a_gap = rows(read(data.node1, topics="gaps", startingOffsets='{"gaps":{"0":3}}'))
    assert offsets(inside_a_gap, "gaps") == [10, 11, 25]


def test_time_bounds_keep_record_timestamps_in_start_to_end(data: Data, read: Any) -> None:
    found = rows(
        read(
            data.node1,
            topics="orders",
            startingTimestamp=str(sd.T0 + 10_000),
            endingTimestamp=str(sd.T0 + 20_000),
        )
    )
    for partition in (0, 2):
        assert offsets(found, "orders", partition) == list(range(10, 20))
    assert offsets(found, "orders", 1) == []  # its log starts at 30


def test_two_nodes_copies_longest_and_all(data: Data, read: Any) -> None:
    longest = rows(read(f"{data.node1},{data.node2}", topics="orders"))
    segments = {(r["partition"], Path(r["segment"]).parts[-4]) for r in longest}
    assert segments == {(0, "node1"), (1, "node2"), (2, "node1")}  # 120 > 60; 150 > 120; a tie: the first path
    assert offsets(longest, "orders", 1) == list(range(150))
    tie = rows(read(f"{data.node2},{data.node1}", topics="orders"))
    assert {Path(r["segment"]).parts[-4] for r in tie if r["partition"] == 2} == {"node2"}
    every = rows(read(data.site, topics="orders", copies="all"))
    per_copy: dict[tuple[int, str], list[int]] = {}
    for r in every:
        per_copy.setdefault((r["partition"], Path(r["segment"]).parts[-4]), []).append(r["offset"])
    assert {k: (v[0], v[-1], len(v)) for k, v in per_copy.items()} == {
        (0, "node1"): (0, 119, 120),
        (0, "node2"): (0, 59, 60),
        (1, "node1"): (sd.LOG_START_1, 119, 120 - sd.LOG_START_1),
        (1, "node2"): (0, 149, 150),
        (2, "node1"): (0, 119, 120),
        (2, "node2"): (0, 119, 120),
    }


def test_load_takes_a_list_of_paths_and_log_dirs(data: Data, read: Any) -> None:
    log_dirs = f"{data.node1 / 'd1'},{data.node1 / 'd2'}"
    assert read(log_dirs, topics="orders").count() == read([str(data.node1)], topics="orders").count()
    files = sorted(str(p) for p in (data.node1 / "d1" / "orders-0").glob("*.log"))[:2]
    assert offsets(rows(read(",".join(files))), "orders") == list(range(75))


def test_committed_only_stops_at_the_checkpointed_high_watermark(data: Data, read: Any) -> None:
    found = rows(read(data.node1, topics="orders", committedOnly="true"))
    assert offsets(found, "orders", 0) == list(range(sd.HIGH_WATERMARKS[0]))
    assert offsets(found, "orders", 1) == list(range(sd.LOG_START_1, sd.HIGH_WATERMARKS[1]))
    assert offsets(found, "orders", 2) == list(range(120))  # no entry: read to the end


def test_a_split_segment_gives_exactly_the_rows_of_an_unsplit_one(data: Data, read: Any) -> None:
    orders0 = data.node1 / "d1" / "orders-0"
    whole = read(orders0)
    split = read(orders0, maxBytesPerPartition="500")
    assert split.rdd.getNumPartitions() >= 3 * whole.rdd.getNumPartitions()
    key = ["topic", "partition", "offset", "value", "headers", "segment", "valid"]
    a = sorted(tuple(map(str, r)) for r in whole.select(*key).collect())
    b = sorted(tuple(map(str, r)) for r in split.select(*key).collect())
    assert a == b and len(a) == 120  # no row lost, none twice


def test_damage_becomes_invalid_rows_never_a_failed_job(data: Data, read: Any) -> None:
    found = rows(read(data.damaged))
    bad = {r["topic"]: r for r in found if not r["valid"] and r["topic"] != "flipped"}
    torn = bad["torn"]
    assert torn["offset"] == (sd.DAMAGED_BATCHES - 1) * sd.PER_BATCH
    assert "torn tail" in torn["error"] and f"at byte {data.damage_at['torn']}" in torn["error"]
    assert str(data.damaged / "torn-0") in torn["error"] and torn["segment"].endswith(f"{0:020d}.log")
    assert (torn["key"], torn["value"], torn["headers"]) == (None, None, None)
    assert offsets(found, "torn") == list(range((sd.DAMAGED_BATCHES - 1) * sd.PER_BATCH + 1))
    garbage = bad["garbage"]
    assert garbage["offset"] == sd.GARBAGE_BATCH * sd.PER_BATCH
    assert f"at byte {data.damage_at['garbage']}" in garbage["error"] and "garbage-0" in garbage["error"]
    assert offsets(found, "garbage") == list(range(sd.GARBAGE_BATCH * sd.PER_BATCH + 1))  # it stops there
    flipped = [r for r in found if r["topic"] == "flipped"]
    assert len(flipped) == sd.DAMAGED_BATCHES * sd.PER_BATCH
    crc_bad = [r for r in flipped if not r["crcValid"]]
    first = sd.FLIPPED_BATCH * sd.PER_BATCH
    assert [r["offset"] for r in crc_bad] == [first, first + 1, first + 2]
    assert {(r["valid"], r["error"]) for r in crc_bad} == {(False, f"CRC mismatch in the batch at offset {first}")}
    assert all(r["valid"] for r in flipped if r["crcValid"])
    assert read(data.damaged).where("NOT valid").count() == 2 + 3


def test_rows_batches_gives_one_row_per_batch_agreeing_with_the_records(
    data: Data, read: Any, node1_rows: list[dict[str, Any]]
) -> None:
    df = read(data.node1, rows="batches")
    assert df.schema == BATCH_SCHEMA
    batches = [r.asDict() for r in df.collect()]
    per_partition: dict[tuple[str, int], int] = {}
    for b in batches:
        assert b["valid"] and b["crcValid"] and len(b["digest"]) == 16 and not b["isControl"]
        assert b["lastOffset"] >= b["offset"] + b["records"] - 1  # gaps (compaction) make it larger
        per_partition[(b["topic"], b["partition"])] = per_partition.get((b["topic"], b["partition"]), 0) + b["records"]
    by_records: dict[tuple[str, int], int] = {}
    for r in node1_rows:
        by_records[(r["topic"], r["partition"])] = by_records.get((r["topic"], r["partition"]), 0) + 1
    assert per_partition == by_records
    damaged = [r.asDict() for r in read(data.damaged, rows="batches").where("NOT valid").collect()]
    first = sd.FLIPPED_BATCH * sd.PER_BATCH
    assert sorted((r["topic"], r["offset"]) for r in damaged) == [
        ("flipped", first),
        ("garbage", sd.GARBAGE_BATCH * sd.PER_BATCH),
        ("torn", (sd.DAMAGED_BATCHES - 1) * sd.PER_BATCH),
    ]


def test_damage_in_a_split_segment_is_reported_once(data: Data, read: Any) -> None:
    found = rows(read(data.damaged, topics="torn,flipped", maxBytesPerPartition="200"))
    assert sorted(r["offset"] for r in found if not r["valid"]) == [12, 13, 14, 27]
    assert offsets(found, "torn") == list(range(28))


BAD_OPTIONS = [  # (option, value, what the message must say); tests/spark_jobs/test_segments_plan.py has them all
    ("startingOffsets", "{not json", "startingOffsets='{not json'"),
    ("endingOffsets", '{"orders":{"0":"x"}}', 'endingOffsets=\'{"orders":{"0":"x"}}\''),
    ("startingOffsets", "latest", "startingOffsets='latest'"),
    ("copies", "some", "copies='some'"),
    ("maxBytesPerPartition", "lots", "maxBytesPerPartition='lots'"),
    ("committedOnly", "yes", "committedOnly='yes'"),
    ("startingTimestamp", "yesterday", "startingTimestamp='yesterday'"),
    ("topicPattern", "(", "topicPattern='('"),
    ("startingOffset", "earliest", "unknown option(s) startingoffset"),
    ("rows", "pages", "rows='pages'"),
]


@pytest.mark.parametrize(("option", "value", "message"), BAD_OPTIONS, ids=[f"{b[0]}={b[1]}" for b in BAD_OPTIONS])
def test_a_bad_option_fails_the_query_naming_it(data: Data, read: Any, option: str, value: str, message: str) -> None:
    with pytest.raises(Exception, match="ValueError") as caught:
        read(data.node1, **{option: value}).count()
    assert message in str(caught.value)


def test_missing_path_and_unknown_topic_fail_naming_them(data: Data, read: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"path: .*nowhere does not exist"):
        read(f"{data.node1},{tmp_path / 'nowhere'}").count()
    with pytest.raises(Exception, match="topics: no partition of nosuch"):
        read(data.node1, topics="orders,nosuch").count()
    with pytest.raises(Exception, match=r"startingOffsets: orders-9 is not read"):
        read(data.node1, startingOffsets='{"orders":{"9":0}}').count()
