"""Log dirs for the strait-segments tests, written by strait's storage and by kafka-python.

Every record's content is a function of its place (:func:`record`), so a test can say
exactly which rows a read must give. Layout of :func:`build_site` (two nodes, two log dirs
each, as ``strait up`` lays them out)::

    site/node1/d1, d2   orders-0,1,2 (120 records each, rolled segments, every codec;
                        orders-1 log start 30 by DeleteRecords; high watermarks 90, 120, none),
                        empty-0, gaps-0 (offsets 0-2, 10-11, 25), txn-0 (a committed
                        transaction and its marker), __consumer_offsets-0
    site/node2/d1, d2   orders-0 (60 records), orders-1 (150), orders-2 (120): other copies
    kp/logs             k-<codec>-0: 30 records in two segment files, kafka-python's batches
    damaged/logs        torn-0 (cut mid-batch), flipped-0 (a byte of a value flipped),
                        garbage-0 (a batch's length overwritten)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from storage import LogConfig, LogManager, PartitionLog, TopicPartition, file_name, read_offsets
from storage.records import BatchBuilder, Compression, LeaderEpoch, build_batch, build_control_batch, set_base_offset

T0 = 1_700_000_000_000
CODECS = list(Compression)
PER_BATCH = 3
ORDERS = {"node1": {0: 120, 1: 120, 2: 120}, "node2": {0: 60, 1: 150, 2: 120}}
HIGH_WATERMARKS = {0: 90, 1: 120}  # orders-2 has no entry in its replication-offset-checkpoint
LOG_START_1 = 30
GAP_OFFSETS = [0, 1, 2, 10, 11, 25]
DAMAGED_BATCHES = 10  # each of torn-0, flipped-0, garbage-0 holds this many batches of PER_BATCH
FLIPPED_BATCH = 4
GARBAGE_BATCH = 6
KP_RECORDS = 30
KP_PER_BATCH = 5
KP_SECOND_SEGMENT = 15  # base offset of k-<codec>-0's second segment file

Record = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def record(topic: str, partition: int, offset: int) -> Record:
    """``(timestamp, key, value, headers)`` of the record at ``offset``: a null key every
    fifth record, a header on odd offsets, values that compress."""
    key = None if offset % 5 == 4 else f"k{offset % 7}".encode()
    value = f"{topic}/{partition}/{offset};".encode() * (1 + offset % 3)
    headers: tuple[tuple[str, bytes | None], ...] = (("n", str(offset).encode()), ("nil", None)) if offset % 2 else ()
    return T0 + offset * 1000, key, value, headers


def expected(topic: str, partition: int, offsets: Sequence[int] | range) -> list[tuple[object, ...]]:
    """What a read gives for those records: ``(offset, key, value, headers, timestamp ms)``."""
    out = []
    for o in offsets:
        ts, key, value, headers = record(topic, partition, o)
        out.append((o, key, value, [{"key": k, "value": v} for k, v in headers], ts))
    return out


def fill(log: PartitionLog, topic: str, partition: int, end: int, *, producer_id: int = -1) -> None:
    """Append ``record``s up to offset ``end`` in batches of PER_BATCH, codecs in turn."""
    for base in range(log.log_end_offset, end, PER_BATCH):
        offsets = range(base, min(end, base + PER_BATCH))
        batch = build_batch(
            [record(topic, partition, o) for o in offsets],
            compression=CODECS[(base // PER_BATCH) % len(CODECS)],
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=base if producer_id >= 0 else -1,
        )
        log.append(batch, leader_epoch=LeaderEpoch(3))


def _node(root: Path, broker_id: int) -> LogManager:
    config = LogConfig(segment_bytes=2048, index_interval_bytes=256)
    manager = LogManager([root / "d1", root / "d2"], config, broker_id=broker_id)
    manager.startup()
    return manager


def build_site(root: Path) -> Path:
    site = root / "site"
    for name, broker_id in (("node1", 1), ("node2", 2)):
        manager = _node(site / name, broker_id)
        for partition, count in ORDERS[name].items():
            log = manager.create_log(TopicPartition("orders", partition))
            fill(log, "orders", partition, count, producer_id=7 if partition == 2 else -1)
            log.high_watermark = log.log_end_offset
        if name == "node1":
            _node1_extras(manager)
        manager.shutdown()
        if name == "node1":
            _set_high_watermarks(manager)
    return site


def _node1_extras(manager: LogManager) -> None:
    manager.create_log(TopicPartition("empty", 0))
    gaps = manager.create_log(TopicPartition("gaps", 0))
    for base, n in ((0, 3), (10, 2), (25, 1)):  # as a compacted leader's follower stores them
        gaps.append(
            build_batch([record("gaps", 0, base + i) for i in range(n)], base_offset=base), assign_offsets=False
        )
    txn = manager.create_log(TopicPartition("txn", 0))
    builder = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    for o in range(3):
        builder.append(*record("txn", 0, o))
    txn.append(builder.build())
    txn.append(build_control_batch(commit=True, timestamp=T0 + 3000, producer_id=9, producer_epoch=0))
    txn.append(build_batch([record("txn", 0, 4)]))
    offsets = manager.create_log(TopicPartition("__consumer_offsets", 0))
    offsets.append(build_batch([record("__consumer_offsets", 0, 0)]))
    orders1 = manager.get_log(TopicPartition("orders", 1))
    assert orders1 is not None
    orders1.delete_records_before(LOG_START_1)
    for lg in manager.logs().values():
        lg.high_watermark = lg.log_end_offset


def _set_high_watermarks(manager: LogManager) -> None:
    """Rewrite node1's replication-offset-checkpoints: orders-0 and -1 as HIGH_WATERMARKS, no orders-2."""
    for d in manager.dirs:
        path = d.path / "replication-offset-checkpoint"
        entries = read_offsets(path)
        for tp in list(entries):
            if tp.topic == "orders":
                if tp.partition in HIGH_WATERMARKS:
                    entries[tp] = HIGH_WATERMARKS[tp.partition]
                else:
                    del entries[tp]
        lines = ["0", str(len(entries)), *(f"{tp.topic} {tp.partition} {o}" for tp, o in sorted(entries.items()))]
        path.write_text("\n".join(lines) + "\n")


def kafka_python_batch(records: Sequence[Record], base_offset: int, codec: Compression) -> bytes:
    """A batch built by kafka-python's producer code, its base offset set as a broker sets it."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for delta, (ts, key, value, headers) in enumerate(records):
        builder.append(delta, ts, key, value, list(headers))
    buf = bytearray(builder.build())
    set_base_offset(buf, base_offset)
    return bytes(buf)


def build_kafka_python(root: Path) -> Path:
    """``kp/logs/k-<codec>-0``: KP_RECORDS records, KP_PER_BATCH a batch, the batches from
    KP_SECOND_SEGMENT on in a second segment file."""
    log_dir = root / "kp" / "logs"
    for codec in CODECS:
        topic = f"k-{codec.name.lower()}"
        part = log_dir / f"{topic}-0"
        part.mkdir(parents=True)
        for first, last in ((0, KP_SECOND_SEGMENT), (KP_SECOND_SEGMENT, KP_RECORDS)):
            data = b"".join(
                kafka_python_batch([record(topic, 0, o) for o in range(b, b + KP_PER_BATCH)], b, codec)
                for b in range(first, last, KP_PER_BATCH)
            )
            (part / file_name(first, ".log")).write_bytes(data)
    return log_dir


def build_damaged(root: Path) -> tuple[Path, dict[str, int]]:
    """``damaged/logs`` and the byte position of the damage in each partition's segment."""
    log_dir = root / "damaged" / "logs"
    manager = LogManager([log_dir], LogConfig(), broker_id=3)
    manager.startup()
    positions: dict[str, list[int]] = {}
    for name in ("torn", "flipped", "garbage"):
        log = manager.create_log(TopicPartition(name, 0))
        sizes = []
        for b in range(DAMAGED_BATCHES):
            batch = build_batch([record(name, 0, o) for o in range(b * PER_BATCH, (b + 1) * PER_BATCH)])
            log.append(batch)
            sizes.append(len(batch))
        positions[name] = [sum(sizes[:i]) for i in range(DAMAGED_BATCHES + 1)]
    manager.shutdown()
    seg = file_name(0, ".log")
    torn = log_dir / "torn-0" / seg
    with torn.open("r+b") as f:
        f.truncate(positions["torn"][-1] - 20)  # the last batch is cut short
    flipped = log_dir / "flipped-0" / seg
    data = bytearray(flipped.read_bytes())
    data[positions["flipped"][FLIPPED_BATCH + 1] - 3] ^= 0x55  # inside the batch's last value: only the CRC can tell
    flipped.write_bytes(bytes(data))
    garbage = log_dir / "garbage-0" / seg
    data = bytearray(garbage.read_bytes())
    at = positions["garbage"][GARBAGE_BATCH]
    data[at + 8 : at + 12] = b"\x00\x00\x00\x07"  # batchLength 7
    garbage.write_bytes(bytes(data))
    return log_dir, {
        "torn": positions["torn"][DAMAGED_BATCHES - 1],
        "flipped": positions["flipped"][FLIPPED_BATCH],
        "garbage": at,
    }
