"""strait-kafka against a real three-node strait site: batch reads, streaming, the writer.

One site (real ZooKeeper, three real nodes) for the whole module; each test has its own topics.
Records are produced by real clients (confluent-kafka, kcat) and by MirrorAppend (for offset
gaps and control batches, which no client of a strait site can make: strait has no
transactions). Reads go through the session's SparkSession, except where the test must act
between two fetches of one task (a leader killed mid-read, records deleted after planning):
there the reader a task runs is driven in this process.
"""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from chaos.nemesis import kill_9
from node.client import NodeConnection, mirror_append
from spark_jobs.schema import RECORD_SCHEMA
from spark_jobs.sources._kafka_options import read_options
from spark_jobs.sources._kafka_read import RangeReader
from spark_jobs.sources.kafka import KafkaSource, KafkaSourceError, OffsetRange
from storage.records import BatchBuilder, build_batch, build_control_batch
from tests.node.conftest import SITE_PROPS
from tests.node.harness import NodeProcess, wait_for
from tests.node.test_replication import bootstrap, create_topic, leader_of

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T0 = 1_700_000_000_000
_names = itertools.count()
Spark = Any  # pyspark.sql.SparkSession


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[list[NodeProcess]]:
    work = tmp_path_factory.mktemp("kafka-source")
    chroot = f"{zookeeper}/t-kafka-source-{time.time_ns()}"
    started: list[NodeProcess] = []
    try:
        for broker_id in (1, 2, 3):
            node = NodeProcess(broker_id, work / f"node{broker_id}", chroot, dict(SITE_PROPS))
            started.append(node)
            node.start()
        yield started
    finally:
        for node in started:
            node.stop()


@pytest.fixture(scope="module")
def boot(nodes: list[NodeProcess]) -> str:
    return bootstrap(nodes)


@pytest.fixture(scope="module")
def sp(spark: Spark) -> Spark:
    spark.dataSource.register(KafkaSource)
    return spark


def topic(nodes: list[NodeProcess], prefix: str, partitions: int = 1, **configs: str) -> str:
    name = f"{prefix}-{next(_names)}"
    create_topic(nodes, name, partitions, 3, **configs)
    return name


def produce(boot: str, records: list[dict[str, Any]], **conf: Any) -> list[tuple[int, int]]:
    """Produce with confluent-kafka (idempotent, acks=all); (partition, offset) of each record, in order."""
    acked: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 5, **conf})
    for i, r in enumerate(records):

        def done(err: Any, msg: Any, i: int = i) -> None:
            if err is None:
                acked[i] = (msg.partition(), msg.offset())
            else:
                errors.append(str(err))

        producer.produce(on_delivery=done, **r)
    assert producer.flush(30) == 0 and errors == []
    return [acked[i] for i in range(len(records))]


def load(sp: Spark, boot: str, **options: str) -> Any:
    return sp.read.format("strait-kafka").option("kafka.bootstrap.servers", boot).options(**options).load()


def rows(df: Any) -> list[tuple[Any, ...]]:
    """(topic, partition, offset, key, value, headers, timestamp ms) of every row, in order."""
    from pyspark.sql import functions as F

    picked = df.select("topic", "partition", "offset", "key", "value", "headers", F.unix_millis("timestamp"))
    out = []
    for r in picked.collect():
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r[5] or [])
        key = None if r[3] is None else bytes(r[3])
        value = None if r[4] is None else bytes(r[4])
        out.append((r[0], r[1], r[2], key, value, headers, r[6]))
    return sorted(out, key=lambda x: (x[0], x[1], x[2]))


def offsets_of(df: Any) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


# -- batch reads --------------------------------------------------------------------------------------


def test_records_from_confluent_kafka_and_kcat_read_back_exactly(
    sp: Spark, nodes: list[NodeProcess], boot: str
) -> None:
    name = topic(nodes, "exact", 3)
    sent = [
        {"topic": name, "partition": i % 2, "key": None if i % 5 == 0 else f"k{i}".encode(),
         "value": None if i == 7 else f"value-{i}".encode() * (1 + i % 3), "timestamp": T0 + i,
         "headers": [("trace", f"t{i}".encode()), ("empty", None)] if i % 2 else []}
        for i in range(40)
    ]  # fmt: skip
    acked = produce(boot, sent[:20]) + produce(boot, sent[20:], **{"compression.type": "zstd"})
    kcat = subprocess.run(
        ["kcat", "-b", boot, "-P", "-t", name, "-p", "2", "-K", ":", "-H", "via=kcat"],
        input=b"".join(f"kk{i}:kv{i}\n".encode() for i in range(5)),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert kcat.returncode == 0, kcat.stderr

    df = load(sp, boot, subscribe=name)
    assert df.schema == RECORD_SCHEMA
    got = rows(df)
    expected = sorted(
        (name, p, o, r["key"], r["value"], tuple(r["headers"]), r["timestamp"])
        for r, (p, o) in zip(sent, acked, strict=True)
    )
    assert [g for g in got if g[1] < 2] == expected
    from_kcat = [g for g in got if g[1] == 2]
    assert [(g[2], g[3], g[4], g[5]) for g in from_kcat] == [
        (i, f"kk{i}".encode(), f"kv{i}".encode(), (("via", b"kcat"),)) for i in range(5)
    ]
    extra = df.where("partition < 2").select(
        "valid", "crcValid", "error", "segment", "isControl", "timestampType", "codec", "producerId", "sequence"
    )
    summary = {tuple(r) for r in extra.collect()}
    assert {s[:6] for s in summary} == {(True, True, None, None, False, 0)}
    assert {s[6] for s in summary} == {"none", "zstd"} and all(s[7] >= 0 and s[8] >= 0 for s in summary)


def test_offsets_assign_pattern_and_timestamps_choose_the_records(
    sp: Spark, nodes: list[NodeProcess], boot: str
) -> None:
    name = topic(nodes, "opts", 2)
    records = [{"topic": name, "partition": p, "value": f"{p}-{i}".encode(), "timestamp": T0 + 1000 * i}
               for p in (0, 1) for i in range(10)]  # fmt: skip
    produce(boot, records)

    def planned(**options: str) -> list[tuple[int, int, int]]:
        reader = KafkaSource({"kafka.bootstrap.servers": boot, **{k.lower(): v for k, v in options.items()}})
        return [(r.partition, r.start, r.end) for r in reader.reader(RECORD_SCHEMA).partitions()]

    assert planned(subscribe=name) == [(0, 0, 10), (1, 0, 10)]
    assert planned(assign=json.dumps({name: [1]})) == [(1, 0, 10)]
    assert planned(subscribePattern=name.replace("opts", "op.s")) == [(0, 0, 10), (1, 0, 10)]
    assert planned(subscribePattern="op") == []  # the whole name must match
    span = {
        "startingOffsets": json.dumps({name: {"0": 3, "1": -2}}),
        "endingOffsets": json.dumps({name: {"0": -1, "1": 4}}),
    }
    assert planned(subscribe=name, **span) == [(0, 3, 10), (1, 0, 4)]
    assert planned(subscribe=name, startingTimestamp=str(T0 + 4500)) == [(0, 5, 10), (1, 5, 10)]
    by_time = {"startingOffsetsByTimestamp": json.dumps({name: {"0": T0, "1": T0 + 2000}}),
               "endingOffsetsByTimestamp": json.dumps({name: {"0": T0 + 3000, "1": T0 + 99_000}})}  # fmt: skip
    assert planned(subscribe=name, **by_time) == [(0, 0, 3), (1, 2, 10)]
    late = str(T0 + 99_000)
    with pytest.raises(ValueError, match=f"startingTimestamp: no record of {name}-0 has a timestamp at or after"):
        planned(subscribe=name, startingTimestamp=late)
    assert planned(subscribe=name, startingTimestamp=late, startingOffsetsByTimestampStrategy="latest") == []

    df = load(sp, boot, subscribe=name, **span)
    assert offsets_of(df) == [(0, o) for o in range(3, 10)] + [(1, o) for o in range(4)]
    assert [r.value for r in df.where("partition = 1").orderBy("offset").collect()] == [
        f"1-{i}".encode() for i in range(4)
    ]
    assert offsets_of(load(sp, boot, subscribe=name, startingTimestamp=str(T0 + 8000))) == [
        (0, 8),
        (0, 9),
        (1, 8),
        (1, 9),
    ]


def test_bad_offsets_unknown_topics_and_unreachable_sites_are_clear_errors(
    sp: Spark, nodes: list[NodeProcess], boot: str
) -> None:
    name = topic(nodes, "errors", 2)
    produce(boot, [{"topic": name, "partition": p, "value": b"x"} for p in (0, 1) for _ in range(3)])
    with pytest.raises(Exception, match="subscribe=nope-topic: topic\\(s\\) nope-topic do not exist"):
        load(sp, boot, subscribe="nope-topic").collect()
    with pytest.raises(Exception, match="startingOffsets=latest: 'latest' \\(-1\\) is for streaming"):
        load(sp, boot, subscribe=name, startingOffsets="latest").collect()

    def offsets(option: str, **per: int) -> dict[str, str]:
        return {"subscribe": name, option: json.dumps({name: {p.lstrip("p"): o for p, o in per.items()}})}

    cases = [
        ({"assign": json.dumps({name: [0, 5]})}, f"{name} has partitions 0..1, not 5"),
        (offsets("startingOffsets", p0=1), f"must give every partition .* missing: {name}-1"),
        (offsets("startingOffsets", p0=1, p1=0, p2=0), f"the site does not have: {name}-2"),
        (offsets("startingOffsets", p0=9, p1=0), f"{name}-0 starts at 9, beyond the partition's end 3"),
        (offsets("endingOffsets", p0=9, p1=1), f"endingOffsets: {name}-0 ends at 9, beyond"),
        (
            offsets("startingOffsets", p0=2, p1=0) | {"endingOffsets": json.dumps({name: {"0": 1, "1": 1}})},
            f"{name}-0: startingOffsets 2 is after endingOffsets 1",
        ),
    ]
    for options, message in cases:
        source = KafkaSource({"kafka.bootstrap.servers": boot} | {k.lower(): v for k, v in options.items()})
        with pytest.raises(ValueError, match=message):
            source.reader(RECORD_SCHEMA).partitions()

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(Exception, match=f"kafka.bootstrap.servers={dead}: no broker of the site answered"):
        load(sp, dead, subscribe=name).collect()
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        mute = f"127.0.0.1:{silent.getsockname()[1]}"
        source = KafkaSource({"kafka.bootstrap.servers": mute, "subscribe": name, "kafka.request.timeout.ms": "1500"})
        started = time.monotonic()
        with pytest.raises(KafkaSourceError, match=f"kafka.bootstrap.servers={mute}: no broker of the site answered"):
            source.reader(RECORD_SCHEMA).partitions()
        assert time.monotonic() - started < 10


def mirror_topic(nodes: list[NodeProcess], boot: str, batches: bytes) -> str:
    """A mirror topic holding ``batches`` exactly as given (offsets, gaps, control batches)."""
    name = topic(nodes, "gaps", 1, **{"strait.mirror.link": "l1"})
    leader = leader_of(nodes, name)

    async def run() -> None:
        async with await NodeConnection.open(leader.bootstrap, client_id="test-mirror") as conn:
            result = await mirror_append(conn, "l1", name, 0, 0, batches, timeout=10)
            assert result.error_code == 0, result.error_message

    trio.run(run)
    return name


def test_offset_gaps_and_control_batches_are_skipped_and_split_reads_equal_one_read(
    sp: Spark, nodes: list[NodeProcess], boot: str
) -> None:
    def plain(base: int, count: int) -> bytes:
        return build_batch(
            [(T0 + o, f"k{o}".encode(), f"v{o}".encode()) for o in range(base, base + count)], base_offset=base
        )

    txn = BatchBuilder(base_offset=5, producer_id=77, producer_epoch=0, base_sequence=0, transactional=True)
    for o in range(5, 8):
        txn.append(T0 + o, None, f"v{o}".encode())
    commit = build_control_batch(commit=True, timestamp=T0 + 8, producer_id=77, producer_epoch=0, base_offset=8)
    # 2..4 compacted away, 5..7 a committed transaction, 8 its marker, 9..12 compacted, 13..14 plain.
    name = mirror_topic(nodes, boot, plain(0, 2) + txn.build() + commit + plain(13, 2))

    whole = load(sp, boot, subscribe=name)
    assert offsets_of(whole) == [(0, o) for o in (0, 1, 5, 6, 7, 13, 14)]
    assert [r.isTransactional for r in whole.orderBy("offset").collect()] == [
        False,
        False,
        True,
        True,
        True,
        False,
        False,
    ]
    pieces = load(sp, boot, subscribe=name, maxRecordsPerPartition="2", minPartitions="9")
    assert pieces.rdd.getNumPartitions() == 9  # 15 offsets: 8 pieces of 2, then one more cut
    assert rows(pieces) == rows(whole)
    control = load(sp, boot, subscribe=name, includeControl="true").where("isControl")
    assert [(r.offset, r.producerId) for r in control.collect()] == [(8, 77)]
    committed = load(sp, boot, subscribe=name, **{"kafka.isolation.level": "read_committed"})
    assert rows(committed) == rows(whole)


def test_split_ranges_read_the_same_records_as_whole_ones(sp: Spark, nodes: list[NodeProcess], boot: str) -> None:
    name = topic(nodes, "split", 3)
    produce(
        boot,
        [
            {"topic": name, "partition": i % 3, "key": f"{i}".encode(), "value": f"v{i}".encode() * (i % 13)}
            for i in range(900)
        ],
    )
    whole = load(sp, boot, subscribe=name)
    split = load(sp, boot, subscribe=name, maxRecordsPerPartition="70", minPartitions="20")
    assert whole.rdd.getNumPartitions() == 3 and split.rdd.getNumPartitions() == 20  # 15 by size, 5 more cut
    assert rows(split) == rows(whole) and len(rows(whole)) == 900

    # One row per batch: a batch across two pieces' boundary is still one row, so the records add up.
    def batches(df: Any) -> list[tuple[int, int, int, bytes]]:
        return sorted((r.partition, r.offset, r.records, bytes(r.digest)) for r in df.collect())

    whole_batches = batches(load(sp, boot, subscribe=name, rows="batches"))
    split_batches = batches(
        load(sp, boot, subscribe=name, rows="batches", maxRecordsPerPartition="70", minPartitions="20")
    )
    assert split_batches == whole_batches and sum(b[2] for b in whole_batches) == 900
    assert len(whole_batches) < 900  # the producer batched: some batches did cross a piece's boundary


def test_records_deleted_before_they_are_read_fail_the_read_or_are_counted(
    sp: Spark, nodes: list[NodeProcess], boot: str
) -> None:
    name = topic(nodes, "loss")
    produce(boot, [{"topic": name, "value": f"v{i}".encode()} for i in range(100)])
    opts = read_options({"kafka.bootstrap.servers": boot, "subscribe": name}, streaming=False)
    lenient = read_options(
        {"kafka.bootstrap.servers": boot, "subscribe": name, "failondataloss": "false"}, streaming=False
    )
    planned = OffsetRange(name, 0, 0, 100)  # planned, then the records go
    admin = AdminClient({"bootstrap.servers": boot})
    for future in admin.delete_records([KafkaPartition(name, 0, 40)]).values():
        future.result(30)

    with pytest.raises(KafkaSourceError, match=f"{name}-0: offsets \\[0, 40\\) are no longer on the site"):
        list(RangeReader(opts, planned).batches())
    reader = RangeReader(lenient, planned)
    got = [row for b in reader.batches() for row in b.to_pylist()]
    assert reader.lost == 40
    assert [(r["offset"], r["valid"]) for r in got] == [(0, False)] + [(o, True) for o in range(40, 100)]
    assert "data loss: offsets [0, 40)" in got[0]["error"]

    # A planned range the log no longer reaches (as after a truncation): it waits, then gives up.
    beyond = OffsetRange(name, 0, 90, 130)
    quick = {"kafka.bootstrap.servers": boot, "subscribe": name, "kafkaconsumer.polltimeoutms": "1500"}
    stalled = rf"{name}-0: offsets \[100, 130\) did not become readable within kafkaConsumer.pollTimeoutMs=1500"
    with pytest.raises(KafkaSourceError, match=stalled):
        list(RangeReader(read_options(quick, streaming=False), beyond).batches())
    skipped = RangeReader(read_options(quick | {"failondataloss": "false"}, streaming=False), beyond)
    got = [row for b in skipped.batches() for row in b.to_pylist()]
    assert [(r["offset"], r["valid"]) for r in got] == [(o, True) for o in range(90, 100)] + [(100, False)]
    assert skipped.lost == 30

    start = {"startingOffsets": json.dumps({name: {"0": 10}})}
    with pytest.raises(Exception, match=f"{name}-0: offsets \\[10, 40\\) are no longer on the site"):
        load(sp, boot, subscribe=name, **start).collect()
    counted = load(sp, boot, subscribe=name, failOnDataLoss="false", **start)
    assert counted.where("not valid").select("offset").collect()[0].offset == 10
    assert counted.where("valid").count() == 60


def test_a_read_follows_the_leader_when_it_is_killed(nodes: list[NodeProcess], boot: str) -> None:
    name = topic(nodes, "moving")
    produce(boot, [{"topic": name, "value": f"value-{i:06d}".encode()} for i in range(20_000)])
    small_fetches = {"kafka.bootstrap.servers": boot, "subscribe": name, "kafka.fetch.max.bytes": "65536"}
    reader = RangeReader(read_options(small_fetches, streaming=False), OffsetRange(name, 0, 0, 20_000))
    batches = reader.batches()
    first = next(batches)
    assert 0 < first.num_rows < 20_000
    leader = leader_of(nodes, name)
    kill_9(leader.child)
    try:
        rest = [b for b in batches]
    finally:
        leader.start()
    offsets = first.column("offset").to_pylist() + [o for b in rest for o in b.column("offset").to_pylist()]
    assert offsets == list(range(20_000))
    values = [v for b in [first, *rest] for v in b.column("value").to_pylist()]
    assert values == [f"value-{i:06d}".encode() for i in range(20_000)]


# -- streaming ----------------------------------------------------------------------------------------


def test_a_streaming_query_reads_every_record_once_across_a_restart(
    sp: Spark, nodes: list[NodeProcess], boot: str, tmp_path: Path
) -> None:
    name = topic(nodes, "stream", 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def batch_of(first: int, count: int) -> list[dict[str, Any]]:
        return [{"topic": name, "partition": i % 2, "value": f"r{i}".encode()} for i in range(first, first + count)]

    def start(**trigger: Any) -> Any:
        stream = (
            sp.readStream.format("strait-kafka")
            .option("kafka.bootstrap.servers", boot)
            .option("subscribe", name)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "70")
            .load()
        )
        return (
            stream.select("partition", "offset", "value", "valid")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    def sink() -> list[tuple[int, int, bytes]]:
        if not (out / "_spark_metadata").exists():
            return []
        written = sp.read.schema("partition int, offset long, value binary, valid boolean").parquet(str(out))
        return sorted((r.partition, r.offset, bytes(r.value)) for r in written.collect())

    produce(boot, batch_of(0, 100))
    query = start(processingTime="1 second")
    try:
        produce(boot, batch_of(100, 100))  # while it runs
        wait_for("200 records in the sink", lambda: len(sink()) == 200, timeout=90, interval=1)
    finally:
        query.stop()
    produce(boot, batch_of(200, 100))
    admin = AdminClient({"bootstrap.servers": boot})  # kept: its futures need it alive
    admin.create_partitions([NewPartitions(name, 3)])[name].result(30)
    wait_for(f"{name}-2 has a leader", lambda: leader_of(nodes, name, 2))
    produce(boot, [{"topic": name, "partition": 2, "value": f"r{i}".encode()} for i in range(300, 310)])
    query = start(availableNow=True)
    assert query.awaitTermination(120)
    got = sink()
    assert len(got) == 310 and len({(p, o) for p, o, _ in got}) == 310  # every record once
    assert sorted(v for _, _, v in got) == sorted(f"r{i}".encode() for i in range(310))
    assert sorted((p, o) for p, o, _ in got if p == 2) == [(2, o) for o in range(10)]  # new partition from earliest
    logged = sorted((checkpoint / "offsets").iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    last = json.loads(logged[-1].read_text().splitlines()[-1])
    assert last == {name: {"0": 150, "1": 150, "2": 10}}  # Spark's Kafka offset JSON
    assert len(logged) >= 5  # maxOffsetsPerTrigger=70 cut 310 records into micro-batches


# -- the writer ---------------------------------------------------------------------------------------


def test_the_writer_round_trip_writes_each_row_once(sp: Spark, nodes: list[NodeProcess], boot: str) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    name = topic(nodes, "written", 3)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", StringType()),
            StructField("headers", ArrayType(header)),
            StructField("partition", IntegerType()),
            StructField("timestamp", TimestampType()),
        ]
    )
    n = 600
    data = [
        (None if i % 9 == 0 else f"k{i}".encode(), f"w{i}", [("n", f"{i}".encode())] if i % 2 else [],
         None if i % 4 == 0 else i % 3, datetime.fromtimestamp((T0 + i) / 1000, UTC))
        for i in range(n)
    ]  # fmt: skip
    frame = sp.createDataFrame(data, schema).repartition(3)
    frame.write.format("strait-kafka").option("kafka.bootstrap.servers", boot).option("topic", name).mode(
        "append"
    ).save()

    got = rows(load(sp, boot, subscribe=name))
    assert len(got) == n  # N rows written, N records: no duplicate
    by_value = {g[4]: g for g in got}
    assert len(by_value) == n
    for i, (key, value, headers, partition, _) in enumerate(data):
        _, p, _, k, _, h, ts = by_value[value.encode()]
        assert (k, h, ts) == (key, tuple(headers), T0 + i)
        if partition is not None:
            assert p == partition

    # The topic column routes rows; the option, when set, wins; errors name what is wrong.
    other = topic(nodes, "routed", 1)
    routed = sp.createDataFrame([(other, "a"), (other, "b")], "topic string, value string")
    routed.write.format("strait-kafka").option("bootstrap.servers", boot).mode("append").save()
    assert sorted(r[4] for r in rows(load(sp, boot, subscribe=other))) == [b"a", b"b"]
    writer = routed.write.format("strait-kafka").option("kafka.bootstrap.servers", boot)
    with pytest.raises(Exception, match="mode overwrite: a Kafka topic cannot be overwritten"):
        writer.mode("overwrite").save()
    with pytest.raises(Exception, match=r"kafka\.acks=1: the writer always produces idempotently"):
        writer.option("kafka.acks", "1").mode("append").save()
    with pytest.raises(Exception, match=r"a kafka\.\* option is not a valid producer setting"):
        routed.write.format("strait-kafka").option("kafka.bootstrap.servers", boot).option(
            "kafka.linger.ms", "soon"
        ).mode("append").save()
    with pytest.raises(Exception, match="writes a 'value' column"):
        sp.createDataFrame([("x",)], "body string").write.format("strait-kafka").option(
            "kafka.bootstrap.servers", boot
        ).option("topic", other).mode("append").save()
