"""Apache Kafka's own code and strait's storage read each other's segments.

Kafka to strait: ``KafkaSegmentWriter`` writes a partition with ``MemoryRecordsBuilder`` and
``FileRecords`` (indexes by Kafka's ``LogSegment`` rules) and says what it wrote; strait's
storage API and ``strait log dump/verify/recover`` must read exactly that, and strait must open
the partition (cleanly and after a crash) and append to it.

strait to Kafka: ``PartitionLog``/``LogManager`` append batches built with ``BatchBuilder``,
``build_batch`` and ``build_control_batch``; ``KafkaSegmentReader`` (``FileRecords``,
``ensureValid()`` on every batch and record) must read exactly what was appended.

Records are compared as dicts in the shape the Java programs print::

    {"file", "offset", "timestamp", "key": hex | None, "value": hex | None,
     "headers": [{"key", "value": hex | None}], "batch": {...}, "marker": {...} (control only)}
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from storage import (
    FaultPoints,
    LogConfig,
    LogManager,
    PartitionLog,
    TopicPartition,
    create_log,
    index_entries,
    load_log,
    segment_files,
    verify,
)
from storage.records import (
    BatchBuilder,
    Compression,
    RecordBatch,
    build_batch,
    build_control_batch,
    iter_batches,
)

if TYPE_CHECKING:
    from tests.interop.conftest import KafkaJava

pytestmark = pytest.mark.integration

Rec = dict[str, Any]
Headers = Sequence[tuple[str, bytes | None]]

TOPIC = "kafka-written"
INTERVAL = 1024  # index.interval.bytes of every partition written here
BATCHES_PER_SEGMENT = 14  # the Kafka writer's 14 special-case batches fill segment 0
DEFAULT_INTERVAL = LogConfig().index_interval_bytes  # what `strait log recover` rebuilds with
CODECS = {c.name.lower() for c in Compression}
T0 = 1_700_000_000_000
CLI_TIMEOUT_S = 60
STRAIT = Path(sys.executable).with_name("strait")
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}
NO_LEADER_EPOCH = -1


class FakeClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


# -- reading both ways --------------------------------------------------------------------------


def hx(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def logs_of(partition: Path) -> list[Path]:
    return sorted(partition.glob("*.log"))


def kafka_read(
    kafka: KafkaJava, logs: Iterable[Path], *, interval: int | None = None
) -> tuple[list[Rec], dict[str, Rec]]:
    """Kafka's reading of ``logs``: records, and (with ``interval``) Kafka's index entries per file."""
    args: list[str | Path | int] = [] if interval is None else ["--index-interval", interval]
    proc = kafka.run("KafkaSegmentReader", *args, *logs)
    records: list[Rec] = []
    indexes: dict[str, Rec] = {}
    for line in proc.stdout.splitlines():
        obj = json.loads(line)
        if "index" in obj:
            indexes[obj["file"]] = obj
        else:
            records.append(obj)
    return records, indexes


def records_in(buf: bytes, file: str | None) -> list[Rec]:
    """strait's reading of a buffer of batches (storage.records), in the Java programs' shape."""
    out: list[Rec] = []
    for pos, h in iter_batches(buf):
        batch = {
            "position": pos,
            "size": h.size,
            "base_offset": h.base_offset,
            "last_offset": h.last_offset,
            "count": h.records_count,
            "codec": Compression(h.compression).name.lower(),
            "timestamp_type": "LogAppendTime" if h.is_log_append_time else "CreateTime",
            "max_timestamp": h.max_timestamp,
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "base_sequence": h.base_sequence,
            "transactional": h.is_transactional,
            "control": h.is_control,
            "partition_leader_epoch": h.partition_leader_epoch,
            "crc": h.crc,
        }
        for r in RecordBatch(buf[pos : pos + h.size]).records():
            rec: Rec = {
                "file": file,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": hx(r.key),
                "value": hx(r.value),
                "headers": [{"key": k, "value": hx(v)} for k, v in r.headers],
                "batch": batch,
            }
            if h.is_control:
                assert r.key is not None
                assert r.value is not None
                _, control_type = struct.unpack(">hh", r.key)
                _, coordinator_epoch = struct.unpack(">hi", r.value)
                rec["marker"] = {"type": CONTROL_TYPES[control_type], "coordinator_epoch": coordinator_epoch}
            out.append(rec)
    return out


def strait_view(partition: Path) -> list[Rec]:
    return [rec for log in segment_files(partition) for rec in records_in(log.read_bytes(), log.name)]


def project(
    rec: Rec, *, drop: Sequence[str] = ("file",), drop_batch: Sequence[str] = ("position", "size", "crc")
) -> Rec:
    """``rec`` without the fields that depend on where it was stored."""
    out = {k: v for k, v in rec.items() if k not in drop}
    out["batch"] = {k: v for k, v in rec["batch"].items() if k not in drop_batch}
    return out


def batches_of(records: Iterable[Rec]) -> list[Rec]:
    """One dict per batch, in order, with its file."""
    seen: dict[tuple[str, int], Rec] = {}
    for r in records:
        seen.setdefault((r["file"], r["batch"]["position"]), {"file": r["file"], **r["batch"]})
    return list(seen.values())


def index_file(path: Path) -> list[list[int]]:
    """Entries of a .index ([offset, position]) or .timeindex ([timestamp, offset]) file, absolute."""
    base = int(path.name[:20])
    data = path.read_bytes()
    if path.suffix == ".index":
        return [[base + rel, pos] for rel, pos in struct.iter_unpack(">ii", data)]
    return [[ts, base + rel] for ts, rel in struct.iter_unpack(">qi", data)]


def check_indexes_by_kafka_rules(log: Path, records: Sequence[Rec]) -> None:
    """Every entry of ``log``'s indexes means what Kafka's OffsetIndex/TimeIndex entries mean.

    .index: strictly increasing; each entry is (last offset of the batch at position, position).
    .timeindex: strictly increasing timestamps; each entry is (largest timestamp up to a batch, the
    last offset of the batch that holds it), as LogSegment maintains them.
    """
    batches = [b for b in batches_of(records) if b["file"] == log.name]
    by_position = {b["position"]: b for b in batches}
    index = index_file(log.with_suffix(".index"))
    assert index == sorted(index)
    assert len({o for o, _ in index}) == len(index)
    for offset, position in index:
        assert position in by_position, f"{log.name}: .index entry {offset}@{position} is not a batch start"
        assert by_position[position]["last_offset"] == offset
    time_index = index_file(log.with_suffix(".timeindex"))
    assert [ts for ts, _ in time_index] == sorted({ts for ts, _ in time_index})
    assert [o for _, o in time_index] == sorted(o for _, o in time_index)
    for ts, offset in time_index:
        holder = [b for b in batches if b["last_offset"] == offset]
        assert holder, f"{log.name}: .timeindex entry ({ts}, {offset}) names no batch"
        assert holder[0]["max_timestamp"] == ts
        assert ts == max(b["max_timestamp"] for b in batches if b["last_offset"] <= offset)


def strait_log(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert STRAIT.exists(), f"{STRAIT} is missing: install the project (make setup)"
    return subprocess.run(
        [str(STRAIT), "log", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def dump_bytes(out: Rec, name: str, hexdata: str | None) -> None:
    """As ``strait log dump --json`` shows bytes: UTF-8 text, else null plus ``<name>_b64``."""
    if hexdata is None:
        out[name] = None
        return
    data = bytes.fromhex(hexdata)
    try:
        out[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        out[name] = None
        out[f"{name}_b64"] = base64.b64encode(data).decode("ascii")


def as_dump_record(rec: Rec) -> Rec:
    out: Rec = {"offset": rec["offset"], "timestamp": rec["timestamp"]}
    dump_bytes(out, "key", rec["key"])
    dump_bytes(out, "value", rec["value"])
    headers = []
    for h in rec["headers"]:
        entry: Rec = {"key": h["key"]}
        dump_bytes(entry, "value", h["value"])
        headers.append(entry)
    out["headers"] = headers
    return out


# -- the Kafka-written partition ------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaPartition:
    partition: Path
    expected: list[Rec]  # what KafkaSegmentWriter appended, from its builders' inputs
    kafka_view: list[Rec]  # what KafkaSegmentReader reads back
    kafka_indexes: dict[str, Rec]  # per .log file, the index entries of Kafka's rules at INTERVAL

    @property
    def files(self) -> list[str]:
        return sorted({r["file"] for r in self.expected})

    @property
    def batches(self) -> list[Rec]:
        return batches_of(self.expected)

    @property
    def next_offset(self) -> int:
        return max(b["last_offset"] for b in self.batches) + 1


@pytest.fixture(scope="module")
def kafka_partition(kafka_java: KafkaJava, tmp_path_factory: pytest.TempPathFactory) -> KafkaPartition:
    root = tmp_path_factory.mktemp("kafka-written")
    expected_path = root / "expected.jsonl"
    kafka_java.run("KafkaSegmentWriter", root / "logs", TOPIC, INTERVAL, expected_path, BATCHES_PER_SEGMENT)
    partition = root / "logs" / f"{TOPIC}-0"
    expected = [json.loads(line) for line in expected_path.read_text().splitlines()]
    kafka_view, kafka_indexes = kafka_read(kafka_java, logs_of(partition), interval=INTERVAL)
    return KafkaPartition(partition, expected, kafka_view, kafka_indexes)


def copy_partition(kp: KafkaPartition, tmp_path: Path) -> Path:
    dest = tmp_path / "logs" / kp.partition.name
    shutil.copytree(kp.partition, dest)
    return dest


def test_kafka_reads_back_what_its_writer_wrote(kafka_partition: KafkaPartition) -> None:
    """The oracle: Kafka's reader agrees with Kafka's writer, and the data covers every case."""
    kp = kafka_partition
    assert kp.kafka_view == kp.expected
    records, batches = kp.expected, kp.batches
    assert kp.files == ["00000000000000000000.log", "00000000000000000065.log", "00000000000000000135.log"]
    assert (len(batches), len(records), kp.next_offset) == (34, 152, 165)
    assert {b["codec"] for b in batches} == CODECS
    assert any(r["key"] is None for r in records)
    assert any(r["value"] is None for r in records)
    assert any(r["key"] == "" and r["value"] == "" for r in records)
    assert any(h["value"] is None for r in records for h in r["headers"])
    assert any(not h["key"].isascii() for r in records for h in r["headers"])
    assert any(len(r["value"] or "") > 2 * 100_000 for r in records)
    assert {b["timestamp_type"] for b in batches} == {"CreateTime", "LogAppendTime"}
    assert {(b["producer_id"], b["base_sequence"]) for b in batches if not b["transactional"]} >= {(1000, 0), (1000, 3)}
    assert {r["marker"]["type"] for r in records if "marker" in r} == {"COMMIT", "ABORT"}
    assert any(b["transactional"] and not b["control"] for b in batches)
    offsets = [r["offset"] for r in records]
    assert offsets != list(range(len(offsets))), "the writer leaves offset gaps, as compaction does"
    for name in kp.files[:2]:
        assert kp.kafka_indexes[name]["index"], f"{name} has no index entries"


def test_strait_storage_reads_kafka_segments(kafka_partition: KafkaPartition) -> None:
    kp = kafka_partition
    assert strait_view(kp.partition) == kp.expected
    assert verify(kp.partition) == (3, 34)
    for name in kp.files:
        log = kp.partition / name
        assert [list(e) for e in index_entries(log.with_suffix(".index"))] == kp.kafka_indexes[name]["index"]
        assert [list(e) for e in index_entries(log.with_suffix(".timeindex"))] == kp.kafka_indexes[name]["timeindex"]


@pytest.mark.parametrize("target", ["log-dir", "partition-dir", "segment"])
def test_cli_verify_accepts_kafka_segments(kafka_partition: KafkaPartition, target: str) -> None:
    kp = kafka_partition
    path, segments, batches = {
        "log-dir": (kp.partition.parent, 3, 34),
        "partition-dir": (kp.partition, 3, 34),
        "segment": (kp.partition / kp.files[1], 1, 14),
    }[target]
    proc = strait_log("verify", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"OK {path}: {segments} segments, {batches} batches"


def test_cli_dump_records_json_matches_kafka(kafka_partition: KafkaPartition) -> None:
    proc = strait_log("dump", "--records", "--json", kafka_partition.partition)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    dumped = [json.loads(line) for line in proc.stdout.splitlines()]
    assert dumped == [as_dump_record(r) for r in kafka_partition.expected]
    assert any("key_b64" in d for d in dumped)
    assert any("value_b64" in h for d in dumped for h in d["headers"])


def test_cli_dump_batches_json_matches_kafka(kafka_partition: KafkaPartition) -> None:
    proc = strait_log("dump", "--json", kafka_partition.partition)
    assert proc.returncode == 0, proc.stderr
    dumped = [json.loads(line) for line in proc.stdout.splitlines()]
    expected = []
    for b in kafka_partition.batches:
        fields = {k: v for k, v in b.items() if k not in ("file", "crc")}
        fields.update(crc=f"{b['crc']:#010x}", crc_ok=True)
        expected.append(fields)
    assert [{k: d[k] for k in e} for d, e in zip(dumped, expected, strict=True)] == expected
    first_timestamps = {}
    for r in kafka_partition.expected:
        first_timestamps.setdefault((r["file"], r["batch"]["position"]), r["timestamp"])
    for d, b in zip(dumped, kafka_partition.batches, strict=True):
        if b["timestamp_type"] == "CreateTime":
            assert d["base_timestamp"] == first_timestamps[(b["file"], b["position"])]


def test_cli_dump_index_files_match_kafka(kafka_partition: KafkaPartition) -> None:
    kp = kafka_partition
    for name in kp.files:
        log = kp.partition / name
        kafka = kp.kafka_indexes[name]
        proc = strait_log("dump", "--json", log.with_suffix(".index"))
        assert proc.returncode == 0, proc.stderr
        assert [json.loads(line) for line in proc.stdout.splitlines()] == [
            {"offset": o, "position": p} for o, p in kafka["index"]
        ]
        proc = strait_log("dump", "--json", log.with_suffix(".timeindex"))
        assert proc.returncode == 0, proc.stderr
        assert [json.loads(line) for line in proc.stdout.splitlines()] == [
            {"timestamp": t, "offset": o} for t, o in kafka["timeindex"]
        ]


def test_cli_recover_keeps_a_clean_kafka_partition(
    kafka_partition: KafkaPartition, kafka_java: KafkaJava, tmp_path: Path
) -> None:
    kp = kafka_partition
    partition = copy_partition(kp, tmp_path)
    before = {p.name: p.read_bytes() for p in logs_of(partition)}
    proc = strait_log("recover", partition)
    assert proc.returncode == 0, proc.stderr
    assert f"{partition}: dropped 0 bytes, 0 segments deleted, log end offset {kp.next_offset}\n" in proc.stdout
    assert proc.stdout.endswith("total bytes dropped: 0\n")
    assert {p.name: p.read_bytes() for p in logs_of(partition)} == before
    # The rebuilt indexes use LogConfig()'s index.interval.bytes: compare with Kafka's rules at that interval.
    view, indexes = kafka_read(kafka_java, logs_of(partition), interval=DEFAULT_INTERVAL)
    assert view == kp.expected
    for log in logs_of(partition):
        assert index_file(log.with_suffix(".index")) == indexes[log.name]["index"]
        check_indexes_by_kafka_rules(log, view)
    assert strait_log("verify", partition).returncode == 0


@pytest.mark.parametrize(
    ("segment", "batch"),
    [(0, 4), (0, 11), (1, 3), (2, 0)],
    ids=["zstd-batch", "commit-marker", "mid-log-segment", "first-batch-of-last-segment"],
)
def test_flipped_byte_in_kafka_segment(
    kafka_partition: KafkaPartition, kafka_java: KafkaJava, tmp_path: Path, segment: int, batch: int
) -> None:
    kp = kafka_partition
    partition = copy_partition(kp, tmp_path)
    name = kp.files[segment]
    in_file = [b for b in kp.batches if b["file"] == name]
    victim = in_file[batch]
    log = partition / name
    data = bytearray(log.read_bytes())
    data[victim["position"] + 61 + (victim["size"] - 61) // 2] ^= 0x10  # inside the records, under the CRC
    log.write_bytes(bytes(data))

    proc = strait_log("verify", partition)
    assert proc.returncode == 1
    assert f"INVALID {log} at byte {victim['position']}: CRC-32C mismatch" in proc.stderr

    kafka = kafka_java.run("KafkaSegmentReader", *logs_of(partition), expect_ok=False)
    assert kafka.returncode == 1, kafka.stdout[-500:]
    assert f"INVALID {log} at byte {victim['position']}: " in kafka.stderr
    assert "CorruptRecordException" in kafka.stderr

    later = kp.files[segment + 1 :]
    dropped = len(data) - victim["position"] + sum((partition / f).stat().st_size for f in later)
    kept = in_file[:batch]
    end = kept[-1]["last_offset"] + 1 if kept else int(name[:20])
    proc = strait_log("recover", partition)
    assert proc.returncode == 0, proc.stderr
    assert f"{partition}: dropped {dropped} bytes, {len(later)} segments deleted, log end offset {end} " in proc.stdout
    assert f"{log} at byte {victim['position']}" in proc.stdout
    assert [p.name for p in logs_of(partition)] == kp.files[: segment + 1]
    assert log.stat().st_size == victim["position"]
    assert log.read_bytes() == bytes(data[: victim["position"]])

    view, _ = kafka_read(kafka_java, logs_of(partition))
    assert view == [r for r in kp.expected if r["offset"] < victim["base_offset"]]
    assert strait_log("verify", partition).returncode == 0


def test_torn_tail_of_kafka_segment(kafka_partition: KafkaPartition, kafka_java: KafkaJava, tmp_path: Path) -> None:
    """A crash mid-write: the last batch of the last segment is cut short."""
    kp = kafka_partition
    partition = copy_partition(kp, tmp_path)
    log = partition / kp.files[-1]
    torn = [b for b in kp.batches if b["file"] == log.name][-1]
    size = log.stat().st_size
    with log.open("r+b") as f:
        f.truncate(size - torn["size"] // 2)

    proc = strait_log("verify", partition)
    assert proc.returncode == 1
    assert f"INVALID {log} at byte {torn['position']}: " in proc.stderr
    kafka = kafka_java.run("KafkaSegmentReader", *logs_of(partition), expect_ok=False)
    assert kafka.returncode == 1
    assert f"INVALID {log} at byte {torn['position']}: " in kafka.stderr

    proc = strait_log("recover", partition)
    assert proc.returncode == 0, proc.stderr
    end = torn["base_offset"]
    assert (
        f"{partition}: dropped {size - torn['size'] // 2 - torn['position']} bytes, 0 segments deleted, " in proc.stdout
    )
    assert f"log end offset {end} " in proc.stdout
    view, _ = kafka_read(kafka_java, logs_of(partition))
    assert view == [r for r in kp.expected if r["offset"] < end]


# -- strait appends ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Produce:
    """A batch to append through strait, and what Kafka must then read back."""

    records: Sequence[tuple[int, bytes | None, bytes | None, Headers]]
    codec: Compression = Compression.NONE
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    one_call: bool = False  # build_batch instead of BatchBuilder

    def build(self, base_offset: int = 0) -> bytes:
        if self.one_call:
            assert not self.transactional
            return build_batch(
                self.records,
                compression=self.codec,
                base_offset=base_offset,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
        builder = BatchBuilder(
            compression=self.codec,
            base_offset=base_offset,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            transactional=self.transactional,
        )
        for ts, key, value, headers in self.records:
            builder.append(ts, key, value, headers)
        return builder.build()

    def expect(self, base_offset: int, leader_epoch: int, log_append_time: int) -> list[Rec]:
        lat = log_append_time >= 0
        batch = {
            "base_offset": base_offset,
            "last_offset": base_offset + len(self.records) - 1,
            "count": len(self.records),
            "codec": self.codec.name.lower(),
            "timestamp_type": "LogAppendTime" if lat else "CreateTime",
            "max_timestamp": log_append_time if lat else max(r[0] for r in self.records),
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
            "transactional": self.transactional,
            "control": False,
            "partition_leader_epoch": leader_epoch,
        }
        return [
            {
                "offset": base_offset + i,
                "timestamp": log_append_time if lat else ts,
                "key": hx(key),
                "value": hx(value),
                "headers": [{"key": k, "value": hx(v)} for k, v in headers],
                "batch": batch,
            }
            for i, (ts, key, value, headers) in enumerate(self.records)
        ]


@dataclass(frozen=True)
class Marker:
    """A transaction marker from build_control_batch."""

    commit: bool
    timestamp: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def build(self, base_offset: int = 0) -> bytes:
        return build_control_batch(
            base_offset=base_offset,
            commit=self.commit,
            timestamp=self.timestamp,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch,
        )

    def expect(self, base_offset: int, leader_epoch: int, log_append_time: int) -> list[Rec]:
        assert log_append_time < 0
        batch = {
            "base_offset": base_offset,
            "last_offset": base_offset,
            "count": 1,
            "codec": "none",
            "timestamp_type": "CreateTime",
            "max_timestamp": self.timestamp,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": -1,
            "transactional": True,
            "control": True,
            "partition_leader_epoch": leader_epoch,
        }
        control_type = 1 if self.commit else 0
        return [
            {
                "offset": base_offset,
                "timestamp": self.timestamp,
                "key": struct.pack(">hh", 0, control_type).hex(),
                "value": struct.pack(">hi", 0, self.coordinator_epoch).hex(),
                "headers": [],
                "batch": batch,
                "marker": {"type": CONTROL_TYPES[control_type], "coordinator_epoch": self.coordinator_epoch},
            }
        ]


def append_all(
    log: PartitionLog,
    items: Iterable[Produce | Marker],
    *,
    start: int,
    leader_epoch: int,
    log_append_time: int = -1,
    placed: bool = False,
) -> list[Rec]:
    """Append ``items`` as a leader would to a log ending at ``start``; returns what Kafka must read.

    Offsets are expected consecutive from ``start``, and with ``log_append_time`` every record
    stamped with it. With ``placed`` each batch is built at the log end offset already (see
    test_log_append_time_assigns_offsets_and_leader_epoch for why that matters).
    """
    expected: list[Rec] = []
    offset = start
    for item in items:
        info = log.append(item.build(offset if placed else 0), leader_epoch=leader_epoch)
        records = item.expect(offset, leader_epoch, log_append_time)
        assert (info.base_offset, info.last_offset) == (offset, records[-1]["offset"])
        assert info.log_append_time == log_append_time
        expected += records
        offset += len(records)
    assert log.log_end_offset == offset
    return expected


def big_value(seed: int) -> bytes:
    """150 KB: random bytes, then text, so each codec writes several blocks."""
    text = b"the quick brown fox jumps over the lazy dog "
    return random.Random(seed).randbytes(70 * 1024) + (text * (80 * 1024 // len(text) + 1))[: 80 * 1024]


def awkward(codec: Compression, ts: int) -> Produce:
    """One batch of the awkward cases, in ``codec``."""
    name = codec.name.lower().encode()
    return Produce(
        [
            (ts, b"key-" + name, b"value-" + name, [("h1", b"v1"), ("h2", b"v2")]),
            (ts - 25, None, b"null-key-" + name, []),  # the timestamp goes back
            (ts + 1, b"tomb-" + name, None, [("nullhdr", None)]),
            (ts + 2, b"", b"", [("empty", b"")]),
            (ts + 3, b"\xff\x00\xfe", b"\xc3\x28\xa0", [("ключ-✓😀", b"\xff")]),  # not UTF-8; a UTF-8 header key
            (ts + 4, b"big-" + name, big_value(int(codec)), []),
            (ts + 5, b"dup-" + name, b"x", [("a", b"1"), ("a", b"2"), ("b", None)]),
        ],
        codec=codec,
    )


def simple(n: int, tag: str, ts: int) -> list[tuple[int, bytes | None, bytes | None, Headers]]:
    return [(ts + i, f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode(), [("i", str(i).encode())]) for i in range(n)]


def every_kind_of_batch(ts: int) -> list[Produce | Marker]:
    items: list[Produce | Marker] = [awkward(codec, ts + 100 * int(codec)) for codec in Compression]
    items += [
        Produce(simple(4, "one-call", ts + 1000), codec=Compression.ZSTD, one_call=True),
        # An idempotent producer: sequences continue across batches.
        Produce(simple(3, "idem", ts + 2000), producer_id=77, producer_epoch=3, base_sequence=0, one_call=True),
        Produce(simple(2, "idem", ts + 2010), codec=Compression.LZ4, producer_id=77, producer_epoch=3, base_sequence=3),
        # A committed and an aborted transaction.
        Produce(
            simple(2, "txn", ts + 3000),
            codec=Compression.SNAPPY,
            producer_id=88,
            producer_epoch=1,
            base_sequence=0,
            transactional=True,
        ),
        Marker(commit=True, timestamp=ts + 3010, producer_id=88, producer_epoch=1, coordinator_epoch=5),
        Produce(
            simple(1, "aborted", ts + 3100),
            codec=Compression.GZIP,
            producer_id=99,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        ),
        Marker(commit=False, timestamp=ts + 3110, producer_id=99, producer_epoch=0, coordinator_epoch=6),
    ]
    return items


def bulk(n: int, ts: int) -> list[Produce | Marker]:
    """Small batches in every codec, enough to roll segments and fill indexes."""
    codecs = list(Compression)
    return [Produce(simple(5, f"bulk{i}", ts + 10 * i), codec=codecs[i % len(codecs)]) for i in range(n)]


# -- strait opens and extends a Kafka-written partition ---------------------------------------------


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_load_kafka_partition_then_append(
    kafka_partition: KafkaPartition, kafka_java: KafkaJava, tmp_path: Path, clean: bool
) -> None:
    kp = kafka_partition
    partition = copy_partition(kp, tmp_path)
    clock = FakeClock(T0 + 50_000_000)
    log, report = load_log(
        partition,
        TopicPartition(TOPIC, 0),
        LogConfig(index_interval_bytes=INTERVAL),
        clean_shutdown=clean,
        faults=FaultPoints(),
        clock=clock,
    )
    try:
        assert (report.bytes_dropped, report.first_error, report.segments_deleted) == (0, None, 0)
        # A clean load trusts Kafka's index files; an unclean one recovers every segment.
        assert (report.segments_recovered, report.indexes_rebuilt) == ((0, 0) if clean else (3, 0))
        assert [s.base_offset for s in log.segments] == [int(name[:20]) for name in kp.files]
        assert (log.log_start_offset, log.log_end_offset) == (0, kp.next_offset)

        everything = log.read_bytes(0, 1 << 30)
        assert [project(r) for r in records_in(everything, None)] == [project(r) for r in kp.expected]
        for r in kp.expected[::9]:
            one = log.read_bytes(r["offset"], 1)
            assert r["offset"] in {x["offset"] for x in records_in(one, None)}

        timestamps = sorted({r["timestamp"] for r in kp.expected})
        for target in [*timestamps[::3], timestamps[-1], timestamps[0] - 1, timestamps[-1] + 1]:
            first = next(((r["offset"], r["timestamp"]) for r in kp.expected if r["timestamp"] >= target), None)
            assert log.find_offset_by_timestamp(target) == first, target

        log.high_watermark = log.log_end_offset
        appended = append_all(
            log,
            [*every_kind_of_batch(T0 + 40_000_000), *bulk(25, T0 + 41_000_000)],
            start=kp.next_offset,
            leader_epoch=12,
        )
        assert appended[0]["offset"] == kp.next_offset
    finally:
        log.close()

    view, indexes = kafka_read(kafka_java, logs_of(partition), interval=INTERVAL)
    assert view[: len(kp.expected)] == kp.expected
    assert [project(r) for r in view[len(kp.expected) :]] == appended
    assert view == strait_view(partition)
    for log_path in logs_of(partition):
        check_indexes_by_kafka_rules(log_path, view)
        # Appending continues the index exactly as Kafka's LogSegment.recover() would rebuild it.
        assert index_file(log_path.with_suffix(".index")) == indexes[log_path.name]["index"]
    assert strait_log("verify", partition).returncode == 0


# -- Kafka reads what strait wrote -------------------------------------------------------------------


@dataclass(frozen=True)
class StraitPartitions:
    log_dir: Path
    expected: dict[str, list[Rec]]  # partition dir name -> records Kafka must read, without placement


@pytest.fixture(scope="module")
def strait_written(tmp_path_factory: pytest.TempPathFactory) -> StraitPartitions:
    log_dir = tmp_path_factory.mktemp("strait-written") / "logs"
    clock = FakeClock(T0 + 60_000_000)
    config = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=INTERVAL)
    manager = LogManager([log_dir], config, broker_id=1, clock=clock)
    manager.startup()
    expected: dict[str, list[Rec]] = {}
    try:
        plain = manager.create_log(TopicPartition("strait", 0))
        expected["strait-0"] = append_all(
            plain, [*every_kind_of_batch(T0), *bulk(160, T0 + 10_000)], start=0, leader_epoch=4
        )
        # A follower append keeps the batch's offsets and takes the given leader epoch.
        follower = Produce(simple(3, "follower", T0 + 20_000), codec=Compression.GZIP)
        batch = bytearray(follower.build())
        struct.pack_into(">q", batch, 0, plain.log_end_offset)
        info = plain.append(bytes(batch), leader_epoch=5, assign_offsets=False)
        assert info.base_offset == expected["strait-0"][-1]["offset"] + 1
        expected["strait-0"] += follower.expect(info.base_offset, 5, -1)
        plain.high_watermark = plain.log_end_offset

        lat_config = dataclasses.replace(config, message_timestamp_type="LogAppendTime")
        lat = manager.create_log(TopicPartition("strait-lat", 0), lat_config)
        lat_records: list[Rec] = []
        for i, item in enumerate(
            [
                *(awkward(codec, T0 + 100 * int(codec)) for codec in Compression),
                Produce(
                    simple(3, "idem", T0), codec=Compression.ZSTD, producer_id=7, producer_epoch=0, base_sequence=0
                ),
                *bulk(10, T0),
            ]
        ):
            clock.now = T0 + 70_000_000 + 1000 * i
            # Placed at the log end with no leader epoch (test_log_append_time_assigns_offsets_and_leader_epoch
            # covers batches built at offset 0 with an epoch).
            lat_records += append_all(
                lat,
                [item],
                start=lat_records[-1]["offset"] + 1 if lat_records else 0,
                leader_epoch=NO_LEADER_EPOCH,
                log_append_time=clock.now,
                placed=True,
            )
            assert lat_records[-1]["timestamp"] == clock.now
        expected["strait-lat-0"] = lat_records
        lat.high_watermark = lat.log_end_offset
    finally:
        manager.shutdown()
    return StraitPartitions(log_dir, expected)


@pytest.mark.parametrize("name", ["strait-0", "strait-lat-0"])
def test_kafka_reads_strait_written_partition(
    strait_written: StraitPartitions, kafka_java: KafkaJava, name: str
) -> None:
    partition = strait_written.log_dir / name
    logs = logs_of(partition)
    view, _ = kafka_read(kafka_java, logs)
    assert [project(r) for r in view] == strait_written.expected[name]
    # Files, positions, sizes and CRCs as Kafka sees them are what strait's own reader sees.
    assert view == strait_view(partition)
    batches = batches_of(view)
    assert {b["codec"] for b in batches} == CODECS
    assert {b["timestamp_type"] for b in batches} == ({"LogAppendTime"} if name == "strait-lat-0" else {"CreateTime"})
    if name == "strait-0":
        assert len(logs) >= 7, "segment.bytes=16 KiB should have rolled the log"
        assert {r["marker"]["type"] for r in view if "marker" in r} == {"COMMIT", "ABORT"}


def test_strait_indexes_follow_kafka_rules(strait_written: StraitPartitions, kafka_java: KafkaJava) -> None:
    partition = strait_written.log_dir / "strait-0"
    logs = logs_of(partition)
    view, indexes = kafka_read(kafka_java, logs, interval=INTERVAL)
    assert len(indexes[logs[-2].name]["index"]) >= 10, "a rolled segment full of small batches"
    for log in logs:
        check_indexes_by_kafka_rules(log, view)
        assert index_file(log.with_suffix(".index")) == indexes[log.name]["index"]
    for log in logs[:-1]:  # rolled segments got their final time index entry, as Kafka's do
        assert index_file(log.with_suffix(".timeindex")) == indexes[log.name]["timeindex"]


# Kafka's LogSegment.close() and LogSegment.recover() both end the time index with the segment's
# largest timestamp, and a Kafka broker that opens a cleanly shut down log takes that last entry as
# the segment's largest timestamp (LogSegment.maxTimestampSoFar: retention.ms, ListOffsets by time).
def test_closed_active_segment_time_index_ends_with_largest_timestamp(
    strait_written: StraitPartitions, kafka_java: KafkaJava
) -> None:
    active = logs_of(strait_written.log_dir / "strait-0")[-1]
    _, indexes = kafka_read(kafka_java, [active], interval=INTERVAL)
    assert index_file(active.with_suffix(".timeindex")) == indexes[active.name]["timeindex"]


def test_recovered_segment_time_index_ends_with_largest_timestamp(
    kafka_partition: KafkaPartition, kafka_java: KafkaJava, tmp_path: Path
) -> None:
    partition = copy_partition(kafka_partition, tmp_path)
    assert strait_log("recover", partition).returncode == 0
    _, indexes = kafka_read(kafka_java, logs_of(partition), interval=DEFAULT_INTERVAL)
    for log in logs_of(partition):
        assert index_file(log.with_suffix(".timeindex")) == indexes[log.name]["timeindex"], log.name


# On a LogAppendTime log the broker stamps the time and recomputes the CRC; the offsets and leader
# epoch it assigned must survive that rewrite.
def test_log_append_time_assigns_offsets_and_leader_epoch(kafka_java: KafkaJava, tmp_path: Path) -> None:
    clock = FakeClock(T0)
    tp = TopicPartition("lat", 0)
    log = create_log(
        tmp_path / tp.dir_name,
        tp,
        LogConfig(message_timestamp_type="LogAppendTime"),
        faults=FaultPoints(),
        clock=clock,
    )
    expected: list[Rec] = []
    try:
        for i, codec in enumerate(Compression):
            item = Produce(simple(3, f"lat{i}", T0 - 1000), codec=codec)
            clock.now = T0 + 1000 * i
            log.append(item.build(), leader_epoch=3)  # built at offset 0, as a producer does
            expected += item.expect(3 * i, 3, clock.now)
    finally:
        log.close()
    proc = kafka_java.run("KafkaSegmentReader", *logs_of(tmp_path / tp.dir_name), expect_ok=False)
    assert proc.returncode == 0, proc.stderr
    assert [project(json.loads(line)) for line in proc.stdout.splitlines()] == expected
