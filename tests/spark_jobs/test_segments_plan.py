"""strait-segments without Spark: every option's bad values, planning (cheap, splits at batch
boundaries with or without an index, skipping segments) and reading a range with bounded memory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from spark_jobs._rows import BATCH_ROWS
from spark_jobs.sources._segments_options import DEFAULT_MAX_BYTES, EARLIEST, LATEST, parse_options
from spark_jobs.sources._segments_plan import SegmentRange, plan
from spark_jobs.sources._segments_read import read_range
from storage import LogConfig, LogManager, TopicPartition, file_name
from storage.records import RecordBatch, build_batch
from tests.spark_jobs import segment_data as sd


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sd.build_site(tmp_path_factory.mktemp("plan"))


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One partition, one segment of 200 batches of 50 small records (10000 records)."""
    log_dir = tmp_path_factory.mktemp("big") / "logs"
    manager = LogManager([log_dir], LogConfig(index_interval_bytes=1024), broker_id=1)
    manager.startup()
    log = manager.create_log(TopicPartition("big", 0))
    for b in range(200):
        log.append(build_batch([(sd.T0 + b, None, b"%d" % (b * 50 + i)) for i in range(50)]))
    manager.shutdown()
    return log_dir / "big-0"


def read_all(parts: list[SegmentRange], *, include_control: bool = False) -> list[dict[str, Any]]:
    return [r for p in parts for batch in read_range(p, include_control=include_control) for r in batch.to_pylist()]


BAD = [
    ({}, "path: no path given"),
    ({"path": " , "}, "path: no path given"),
    ({"paths": "not json"}, "paths='not json'"),
    ({"path": "/x", "topics": " , "}, "topics=' , ': name at least one topic"),
    ({"path": "/x", "topics": "a/b"}, "'a/b' is not a valid topic name"),
    ({"path": "/x", "topicPattern": "(x"}, "topicPattern='(x' is not a regular expression"),
    ({"path": "/x", "topics": "a", "topicPattern": "a"}, "topics and topicPattern: give one of them"),
    ({"path": "/x", "startingOffsets": "{nope"}, "startingOffsets='{nope' is neither"),
    ({"path": "/x", "startingOffsets": "[1]"}, "startingOffsets='[1]': expected a JSON object"),
    ({"path": "/x", "startingOffsets": "{}"}, "startingOffsets='{}': expected a JSON object"),
    ({"path": "/x", "startingOffsets": '{"t":5}'}, "topic 't' must map to"),
    ({"path": "/x", "startingOffsets": '{"t":{"a":5}}'}, "partition 'a' of topic 't' is not a number"),
    ({"path": "/x", "startingOffsets": '{"t":{"0":1.5}}'}, "offset 1.5 for t-0 must be an offset"),
    ({"path": "/x", "startingOffsets": '{"t":{"0":true}}'}, "offset True for t-0 must be an offset"),
    ({"path": "/x", "startingOffsets": '{"t":{"0":-3}}'}, "offset -3 for t-0"),
    ({"path": "/x", "startingOffsets": '{"t":{"0":-1}}'}, "latest (-1) for t-0 is not allowed for startingOffsets"),
    ({"path": "/x", "startingOffsets": "latest"}, "startingOffsets='latest': latest (-1) is not allowed"),
    ({"path": "/x", "endingOffsets": "earliest"}, "endingOffsets='earliest': earliest (-2) is not allowed"),
    ({"path": "/x", "endingOffsets": '{"t":{"0":-2}}'}, "earliest (-2) for t-0 is not allowed for endingOffsets"),
    (
        {"path": "/x", "startingOffsets": '{"t":{"0":9}}', "endingOffsets": '{"t":{"0":5}}'},
        "startingOffsets 9 is after endingOffsets 5 for t-0",
    ),
    ({"path": "/x", "startingTimestamp": "-5"}, "startingTimestamp='-5': expected milliseconds"),
    ({"path": "/x", "endingTimestamp": "1.5e12"}, "endingTimestamp='1.5e12': expected milliseconds"),
    ({"path": "/x", "startingTimestamp": "20", "endingTimestamp": "10"}, "endingTimestamp 10 is before"),
    ({"path": "/x", "includeControl": "1"}, "includeControl='1': expected true or false"),
    ({"path": "/x", "committedOnly": "no"}, "committedOnly='no': expected true or false"),
    ({"path": "/x", "copies": "first"}, "copies='first': expected 'longest' or 'all'"),
    ({"path": "/x", "maxBytesPerPartition": "0"}, "maxBytesPerPartition='0': expected a positive size"),
    ({"path": "/x", "maxBytesPerPartition": "-1"}, "maxBytesPerPartition='-1'"),
    ({"path": "/x", "maxBytesPerPartition": "12q"}, "maxBytesPerPartition='12q'"),
    ({"path": "/x", "startingOffsets ": "x", "bogus": "1"}, "unknown option(s) bogus, startingoffsets "),
]


@pytest.mark.parametrize(("options", "message"), BAD, ids=[m for _, m in BAD])
def test_every_bad_option_value_is_a_value_error_naming_it(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_options(options)
    assert message in str(caught.value)


def test_good_values_and_case_insensitive_names() -> None:
    opts = parse_options(
        {
            "PATH": "/a, /b",
            "paths": '["/c"]',
            "STARTINGOFFSETS": '{"t":{"0":5,"1":-2}}',
            "endingoffsets": "latest",
            "MaxBytesPerPartition": "64m",
            "includeControl": "TRUE",
            "copies": "All",
            "startingTimestamp": "10",
        }
    )
    assert opts.paths == ("/a", "/b", "/c")
    assert (opts.starting.of("t", 0), opts.starting.of("t", 1), opts.starting.of("t", 2)) == (5, EARLIEST, EARLIEST)
    assert opts.ending.of("t", 0) == LATEST
    assert (opts.max_bytes, opts.include_control, opts.copies, opts.start_ms) == (64 << 20, True, "all", 10)
    assert parse_options({"path": "/a", "maxBytesPerPartition": "1g"}).max_bytes == 1 << 30
    assert parse_options({"path": "/a", "maxBytesPerPartition": "4096"}).max_bytes == 4096
    assert parse_options({"path": "/a"}).max_bytes == DEFAULT_MAX_BYTES == 128 << 20


def test_paths_that_hold_nothing_readable_are_errors_naming_them(tmp_path: Path, site: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    for bad, message in (
        (tmp_path / "notes.txt", "is a file but not a segment file"),
        (tmp_path / "empty", "holds no segment file, partition dir or log dir"),
        (tmp_path / "gone", "does not exist"),
    ):
        with pytest.raises(ValueError, match=f"path: {bad} {message}"):
            plan(parse_options({"path": str(bad)}))


def test_planning_reads_headers_never_records(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_decoding(self: RecordBatch) -> None:
        raise AssertionError("planning decoded a batch")

    monkeypatch.setattr(RecordBatch, "records", no_decoding)
    parts = plan(parse_options({"path": str(site), "copies": "longest", "maxBytesPerPartition": "300"}))
    assert len(parts) > 40
    assert plan(parse_options({"path": str(site), "startingOffsets": '{"orders":{"0":100}}', "committedOnly": "true"}))


def test_segments_outside_the_offset_bounds_are_not_planned(site: Path) -> None:
    orders0 = site / "node1" / "d1" / "orders-0"
    bases = sorted(int(p.stem) for p in orders0.glob("*.log"))
    parts = plan(parse_options({"path": str(orders0), "startingOffsets": '{"orders":{"0":100}}'}))
    inside = max(b for b in bases if b <= 100)
    assert [int(Path(p.path).stem) for p in parts] == [b for b in bases if b >= inside]
    assert parts[0].start > 0 and parts[0].first_offset <= 100  # started at an index entry, not the file's start
    assert [r["offset"] for r in read_all(parts)] == list(range(100, 120))
    ended = plan(parse_options({"path": str(orders0), "endingOffsets": '{"orders":{"0":40}}'}))
    assert [int(Path(p.path).stem) for p in ended] == [b for b in bases if b < 40]


@pytest.mark.parametrize("index", ["index", "no index"])
def test_a_split_large_segment_reads_every_batch_once(big: Path, tmp_path: Path, index: str) -> None:
    part_dir = big
    if index == "no index":
        part_dir = tmp_path / "big-0"
        shutil.copytree(big, part_dir)
        (part_dir / file_name(0, ".index")).unlink()
    whole = plan(parse_options({"path": str(part_dir)}))
    split = plan(parse_options({"path": str(part_dir), "maxBytesPerPartition": "10k"}))
    size = (part_dir / file_name(0, ".log")).stat().st_size
    assert len(whole) == 1 and len(split) >= size // 10240
    assert [p.start for p in split[1:]] == [p.end for p in split[:-1]] and split[-1].end == size
    assert all(p.end - p.start <= 10240 for p in split)
    got = [r["offset"] for r in read_all(split)]
    assert got == [r["offset"] for r in read_all(whole)] == list(range(10_000))


def test_reading_flushes_arrow_batches_of_bounded_size(big: Path) -> None:
    (part,) = plan(parse_options({"path": str(big)}))
    sizes = [b.num_rows for b in read_range(part, include_control=False)]
    assert sum(sizes) == 10_000 and len(sizes) >= 2 and max(sizes) <= BATCH_ROWS + 50


def test_a_zero_filled_tail_is_one_invalid_row(big: Path, tmp_path: Path) -> None:
    part_dir = tmp_path / "big-0"
    shutil.copytree(big, part_dir)
    log = part_dir / file_name(0, ".log")
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(b"\0" * 4096)  # a preallocated file after a crash
    found = read_all(plan(parse_options({"path": str(part_dir)})))
    (bad,) = [r for r in found if not r["valid"]]
    assert bad["offset"] == 10_000 and f"at byte {size}" in bad["error"] and str(log) in bad["error"]
    assert len(found) == 10_001


def test_a_damaged_batch_header_is_an_invalid_row_with_a_null_timestamp(tmp_path: Path) -> None:
    part_dir = tmp_path / "logs" / "t-0"
    part_dir.mkdir(parents=True)
    batch = bytearray(
        build_batch([(sd.T0, b"k", b"v"), (sd.T0 + 1, b"k", b"w")], base_sequence=2**31 - 1, producer_id=1)
    )
    batch[27] ^= 0x7F  # the high byte of baseTimestamp: far past year 9999, and the CRC no longer matches
    (part_dir / file_name(0, ".log")).write_bytes(bytes(batch))
    found = read_all(plan(parse_options({"path": str(part_dir)})))
    assert [(r["offset"], r["valid"], r["crcValid"], r["timestamp"]) for r in found] == [
        (0, False, False, None),
        (1, False, False, None),
    ]
    assert [r["sequence"] for r in found] == [2**31 - 1, 0]  # a producer's sequence wraps to 0


def test_committed_only_names_a_checkpoint_it_cannot_read(site: Path, tmp_path: Path) -> None:
    copy = tmp_path / "d1"
    shutil.copytree(site / "node1" / "d1", copy)
    (copy / "replication-offset-checkpoint").write_text("0\n5\norders 0 x\n")
    assert plan(parse_options({"path": str(copy)}))  # only committedOnly needs it
    with pytest.raises(ValueError, match=r"committedOnly=true: .*replication-offset-checkpoint"):
        plan(parse_options({"path": str(copy), "committedOnly": "true"}))


def test_a_record_offset_outside_its_batch_makes_the_batch_undecodable(tmp_path: Path) -> None:
    part_dir = tmp_path / "logs" / "t-0"
    part_dir.mkdir(parents=True)
    batch = bytearray(build_batch([(sd.T0, b"k", b"v"), (sd.T0, b"k", b"w")], base_offset=0))
    batch[26] = 0  # lastOffsetDelta 1 -> 0: the second record's offset 1 lies outside the batch
    good = build_batch([(sd.T0, None, b"x")], base_offset=1)
    (part_dir / file_name(0, ".log")).write_bytes(bytes(batch) + good)
    found = read_all(plan(parse_options({"path": str(part_dir)})))
    assert [(r["offset"], r["valid"], r["value"]) for r in found] == [(0, False, None), (1, True, b"x")]
    assert "offset 1 is outside the batch's 0..0" in found[0]["error"]


def test_a_dir_of_node_dirs_is_read_through_their_log_dirs_not_taken_for_partitions(tmp_path: Path) -> None:
    # The layout of `strait up` and the chaos appliance: site/node-1/{node.log, d1/<partitions>}.
    # `node-1` parses as partition 1 of topic "node" and holds a `.log` file, but no segment.
    from spark_jobs.sources._segments_files import find_copies

    for node in (1, 2):
        node_dir = tmp_path / "east" / f"node-{node}"
        (node_dir / "d1" / "orders-0").mkdir(parents=True)
        (node_dir / "node.log").write_text("INFO strait.node: broker started\n")
        (node_dir / "d1" / "orders-0" / file_name(0, ".log")).write_bytes(build_batch([(1, None, b"v")]))
    copies = find_copies((str(tmp_path / "east"),))
    assert sorted(str(c.dir.relative_to(tmp_path)) for c in copies) == [
        "east/node-1/d1/orders-0",
        "east/node-2/d1/orders-0",
    ]
