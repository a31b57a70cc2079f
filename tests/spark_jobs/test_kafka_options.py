"""strait-kafka without a site: its options (Spark's Kafka names and formats) and their errors,
how ranges are cut, how maxOffsetsPerTrigger is shared, and how one Fetch answer becomes rows
(offset gaps, control batches, aborted transactions, a batch cut short)."""

from __future__ import annotations

import itertools
import pickle
import re
from pathlib import Path

import pytest
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from node.client import READ_COMMITTED, FetchedPartition
from spark_jobs.sources._kafka_options import (
    OptionError,
    read_options,
    security_options,
    write_options,
)
from spark_jobs.sources._kafka_plan import OffsetRange, split
from spark_jobs.sources._kafka_read import RangeReader
from spark_jobs.sources._kafka_stream import from_json, rate_limit, to_json
from spark_jobs.sources._kafka_write import check_columns, producer_config
from storage.records import BatchBuilder, Offset, build_batch, build_control_batch
from tests.tls import TestCa, subject

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def opts(**extra: str) -> dict[str, str]:
    # Spark hands options over with lower-cased keys.
    return {k.lower(): v for k, v in (BOOT | {"subscribe": "orders"} | extra).items()}


def test_defaults_are_sparks() -> None:
    batch = read_options(opts(), streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_control
    assert batch.max_records_per_partition == 1_000_000 and batch.min_partitions is None
    assert batch.fetch_max_bytes == 4 * 1024 * 1024
    stream = read_options(opts(), streaming=True)
    assert stream.starting.kind == "latest"
    both = read_options({"bootstrap.servers": "h:1, h:2", "subscribe": "a, b,a"}, streaming=False)
    assert both.bootstrap == "h:1,h:2" and both.subscription.topics == ("a", "b")


def test_json_offsets_assign_and_timestamps_are_parsed() -> None:
    o = read_options(
        opts(
            startingOffsets='{"orders":{"0":23,"1":-2}}',
            endingOffsets='{"orders":{"0":50,"1":-1}}',
            **{"kafka.isolation.level": "read_committed"},
        ),
        streaming=False,
    )
    assert o.starting.mapping == {("orders", 0): 23, ("orders", 1): -2}
    assert o.ending.mapping == {("orders", 0): 50, ("orders", 1): -1}
    assert o.isolation_level == READ_COMMITTED
    a = read_options({**BOOT, "assign": '{"orders":[1,0],"audit":[2]}'}, streaming=True)
    assert a.subscription.assigned == (("orders", (0, 1)), ("audit", (2,)))
    t = read_options(
        opts(startingTimestamp="1700", startingOffsetsByTimestamp='{"orders":{"0":5}}', startingOffsets="earliest"),
        streaming=False,
    )
    assert (t.starting.kind, t.starting.timestamp) == ("timestamp", 1700)  # Spark's precedence
    t = read_options(opts(endingOffsetsByTimestamp='{"orders":{"0":5}}'), streaming=False)
    assert t.ending.kind == "timestamps" and t.ending.mapping == {("orders", 0): 5}


BAD_READS = [
    ({"subscribe": "orders"}, "kafka.bootstrap.servers is required"),
    (opts(**{"kafka.bootstrap.servers": "nohost"}), "kafka.bootstrap.servers=nohost: 'nohost' is not host:port"),
    (BOOT, "exactly one of assign, subscribe, subscribePattern must be set \\(got none\\)"),
    ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of .* \\(got assign, subscribe\\)"),
    ({**BOOT, "subscribe": " , "}, "subscribe=' , ': no topic name"),
    ({**BOOT, "subscribePattern": "orders("}, "subscribePattern=orders\\(: not a regular expression"),
    ({**BOOT, "assign": "orders"}, "assign=orders: not valid JSON"),
    ({**BOOT, "assign": '{"orders":[]}'}, "assign=.*'orders' needs a non-empty list"),
    ({**BOOT, "assign": '{"orders":[-1]}'}, "assign=.*'orders' needs a non-empty list of partition numbers"),
    ({**BOOT, "assign": "[0]"}, "assign=\\[0\\]: expected a JSON object"),
    (opts(startingOffsets="middle"), "startingOffsets=middle: expected earliest, latest or JSON"),
    (opts(startingOffsets='{"orders":{"x":1}}'), "startingOffsets=.*'orders' partition 'x' is not a partition"),
    (opts(startingOffsets='{"orders":{"0":-3}}'), "startingOffsets=.*orders-0 has -3, expected an offset"),
    (opts(startingOffsets='{"orders":{"0":"5"}}'), "startingOffsets=.*orders-0 has '5'"),
    (opts(startingOffsets='{"orders":5}'), "startingOffsets=.*'orders' needs an object"),
    (opts(startingOffsets='{"orders":{"0":1'), "startingOffsets=.*not valid JSON"),
    (opts(startingOffsets='{"audit":{"0":1}}'), "startingOffsets names topic\\(s\\) audit, which subscribe=orders"),
    (opts(startingOffsets="latest"), "startingOffsets=latest: 'latest' \\(-1\\) is for streaming queries"),
    (opts(startingOffsets='{"orders":{"0":-1}}'), "startingOffsets=.*'latest' \\(-1\\) is for streaming"),
    (opts(endingOffsets="earliest"), "endingOffsets=earliest: 'earliest' \\(-2\\) cannot end"),
    (opts(endingOffsets='{"orders":{"0":-2}}'), "endingOffsets=.*'earliest' \\(-2\\) cannot end"),
    (opts(startingTimestamp="-5"), "startingTimestamp=-5: expected a time in milliseconds"),
    (opts(endingTimestamp="soon"), "endingTimestamp=soon: expected a time in milliseconds"),
    (opts(startingOffsetsByTimestamp='{"orders":{"0":-1}}'), "startingOffsetsByTimestamp=.*expected a time in ms"),
    (opts(startingOffsetsByTimestampStrategy="maybe"), "startingOffsetsByTimestampStrategy=maybe: expected"),
    (opts(failOnDataLoss="yes"), "failOnDataLoss=yes: expected true or false"),
    (opts(includeControl="1"), "includeControl=1: expected true or false"),
    (opts(minPartitions="0"), "minPartitions=0: expected a positive whole number"),
    (opts(maxRecordsPerPartition="-1"), "maxRecordsPerPartition=-1: expected a positive whole number"),
    (opts(maxOffsetsPerTrigger="many"), "maxOffsetsPerTrigger=many: expected a positive whole number"),
    (opts(**{"fetchOffset.numRetries": "-1"}), "fetchOffset.numRetries=-1: expected a whole number >= 0"),
    (opts(**{"kafka.isolation.level": "serializable"}), "kafka.isolation.level=serializable: expected"),
    (opts(**{"kafka.fetch.max.bytes": "0"}), "kafka.fetch.max.bytes=0: expected a positive"),
    (opts(**{"kafkaConsumer.pollTimeoutMs": "1.5"}), "kafkaConsumer.pollTimeoutMs=1.5: expected a positive"),
    (
        opts(startingOffset="earliest"),
        "does not know the read option\\(s\\) startingoffset; it knows .*startingOffsets",
    ),
    (opts(**{"kafka.sasl.username": "u"}), "does not know the read option\\(s\\) kafka.sasl.username"),
    (opts(topic="orders"), "does not know the read option\\(s\\) topic"),
    (opts(rows="pages"), "rows=pages: expected 'records' \\(one row per record\\) or 'batches'"),
]


@pytest.mark.parametrize(("options", "message"), BAD_READS)
def test_every_bad_read_option_is_a_value_error_naming_it(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_options({k.lower(): v for k, v in options.items()}, streaming=False)


def test_streaming_refuses_ending_offsets_and_accepts_latest() -> None:
    with pytest.raises(OptionError, match="endingOffsets=latest: an ending offset is not valid in a streaming query"):
        read_options(opts(endingOffsets="latest"), streaming=True)
    assert read_options(opts(startingOffsets="latest"), streaming=True).starting.kind == "latest"
    with pytest.raises(OptionError, match="rows=batches: only in a batch query"):
        read_options(opts(rows="batches"), streaming=True)
    assert read_options(opts(rows="Batches"), streaming=False).rows == "batches"
    assert read_options(opts(), streaming=False).rows == "records"


def test_write_options_pass_producer_settings_and_refuse_what_would_break_idempotence() -> None:
    w = write_options({"bootstrap.servers": "h:1", "topic": "out", "kafka.linger.ms": "20"})
    assert (w.bootstrap, w.topic, w.producer) == ("h:1", "out", {"linger.ms": "20"})
    config = producer_config(w)
    assert config["enable.idempotence"] is True and config["acks"] == "all" and config["linger.ms"] == "20"
    for key in ("kafka.acks", "kafka.enable.idempotence", "kafka.value.serializer"):
        with pytest.raises(OptionError, match=f"{key}=x: the writer always produces idempotently"):
            write_options({**BOOT, key: "x"})
    with pytest.raises(OptionError, match="does not know the write option\\(s\\) subscribe"):
        write_options({**BOOT, "subscribe": "a"})
    with pytest.raises(OptionError, match="topic='': expected a topic name"):
        write_options({**BOOT, "topic": " "})


SECRET = "the-Secret-1"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="reader" password="{SECRET}";'


def secured(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Spark's Kafka security options for SASL_SSL + SCRAM-SHA-512 with a CA of the test's."""
    ca = TestCa(tmp_path / "pki")
    return {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca.pem),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS,
        **extra,
    }


def test_security_options_are_sparks_and_read_into_picklable_settings_without_the_password(tmp_path: Path) -> None:
    options = secured(tmp_path, **{"kafka.ssl.endpoint.identification.algorithm": ""})
    read = read_options(opts(**options), streaming=False)
    security = read.security
    assert (security.protocol, security.sasl_mechanism, security.sasl_username, security.sasl_password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "reader",
        SECRET,
    )
    assert security.truststore == options["kafka.ssl.truststore.location"] and not security.check_hostname
    assert read_options(opts(**options), streaming=True).security == security
    write = write_options({**BOOT, "topic": "t", **{k.lower(): v for k, v in options.items()}})
    assert write.security == security and write.producer == {}  # none of them goes to the producer as it is
    for shown in (repr(read), repr(write), str(pickle.loads(pickle.dumps(read)))):
        assert SECRET not in shown
    # What a job's driver hands the source reads back as the same settings.
    assert read_options(opts(**security_options(security)), streaming=False).security == security
    assert security_options(read_options(opts(), streaming=False).security) == {}


def test_the_writer_gives_its_producer_librdkafkas_security_settings(tmp_path: Path) -> None:
    ca = TestCa(tmp_path / "pki")
    client = ca.issue("client", subject(CN="writer"))
    options = secured(tmp_path, **{"kafka.ssl.keystore.location": str(client.pem)})
    config = producer_config(write_options({**BOOT, "topic": "t", **options}))
    assert {k: v for k, v in config.items() if k.startswith(("security.", "ssl.", "sasl."))} == {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": options["kafka.ssl.truststore.location"],
        "ssl.certificate.location": str(client.pem),
        "ssl.key.location": str(client.pem),
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "reader",
        "sasl.password": SECRET,
    }
    for key in ("kafka.sasl.password", "kafka.ssl.ca.location", "kafka.sasl.username"):  # librdkafka's own names
        with pytest.raises(OptionError, match=f"{key}: the writer takes security options as the reader does") as caught:
            write_options({**BOOT, "topic": "t", key: SECRET})
        assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"kafka.security.protocol": "SASL_TLS"}, "kafka.security.protocol 'SASL_TLS' is not one of"),
        ({"kafka.ssl.truststore.type": "JKS"}, "kafka.ssl.truststore.type 'JKS': strait reads PEM files only"),
        ({"kafka.ssl.keystore.type": "PKCS12"}, "kafka.ssl.keystore.type 'PKCS12': strait reads PEM files only"),
        ({"kafka.ssl.truststore.location": "/nowhere/ca.pem"}, "kafka.ssl.truststore.location /nowhere/ca.pem"),
        ({"kafka.ssl.keystore.location": "/nowhere/me.pem"}, "kafka.ssl.keystore.location /nowhere/me.pem"),
        ({"kafka.sasl.mechanism": "OAUTHBEARER"}, "kafka.sasl.mechanism is 'OAUTHBEARER'; strait speaks PLAIN"),
        ({"kafka.sasl.jaas.config": f'x.Login required password="{SECRET}";'}, "needs both username and password"),
        ({"kafka.sasl.jaas.config": f'x.Login required username=u password="{SECRET}"'}, "kafka.sasl.jaas.config:"),
        (
            {"kafka.security.protocol": "SSL"},
            "kafka.sasl.jaas.config, kafka.sasl.mechanism: set, but kafka.security.protocol is SSL, which would "
            "ignore them",
        ),
        (
            {"kafka.security.protocol": "PLAINTEXT", "kafka.sasl.jaas.config": JAAS, "kafka.sasl.mechanism": "PLAIN"},
            "kafka.sasl.jaas.config, kafka.sasl.mechanism, kafka.ssl.truststore.location, kafka.ssl.truststore.type: "
            "set, but kafka.security.protocol is PLAINTEXT",
        ),
    ],
)
def test_every_bad_security_option_is_named_on_the_driver_and_no_password_shown(
    tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    options = secured(tmp_path) | extra
    for parse in (
        lambda: read_options(opts(**options), streaming=False),
        lambda: write_options({**BOOT, "topic": "t", **options}),
    ):
        with pytest.raises(OptionError, match=re.escape(message)) as caught:
            parse()
        assert SECRET not in str(caught.value)


def test_writer_columns_are_checked_by_name_and_type() -> None:
    value = StructField("value", BinaryType())
    check_columns(StructType([value, StructField("topic", StringType())]), None)
    check_columns(StructType([value, StructField("extra", IntegerType())]), "t")  # other columns are ignored
    cases = [
        (StructType([StructField("key", BinaryType())]), "t", "writes a 'value' column"),
        (StructType([StructField("value", IntegerType())]), "t", "column value has type int"),
        (StructType([value, StructField("key", IntegerType())]), "t", "column key has type int"),
        (StructType([value, StructField("partition", StringType())]), "t", "column partition has type string"),
        (StructType([value, StructField("headers", ArrayType(StringType()))]), "t", "column headers has type"),
        (StructType([value]), None, "needs the topic option or a 'topic' column"),
    ]
    for schema, topic, message in cases:
        with pytest.raises(ValueError, match=message):
            check_columns(schema, topic)


def test_split_cuts_ranges_by_size_then_to_reach_min_partitions_covering_every_offset() -> None:
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 6), OffsetRange("b", 0, 100, 103)]
    pieces = split(ranges, 4, None)
    assert [(p.topic, p.partition, p.start, p.end) for p in pieces] == [
        ("a", 0, 0, 3),
        ("a", 0, 3, 6),
        ("a", 0, 6, 10),
        ("a", 1, 5, 6),
        ("b", 0, 100, 103),
    ]
    many = split(ranges, 1_000_000, 9)
    assert len(many) == 9 and all(len(p) >= 1 for p in many)
    for r in ranges:
        mine = [p for p in many if (p.topic, p.partition) == (r.topic, r.partition)]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert [p.first for p in mine] == [True] + [False] * (len(mine) - 1)  # rows=batches: who owns a batch
    assert len(split(ranges, 1_000_000, 100)) == 14  # never a piece without an offset
    assert [p.first for p in pieces] == [True, False, False, True, True]


def test_max_offsets_per_trigger_is_shared_by_backlog_and_never_exceeded() -> None:
    base = {("a", 0): 0, ("a", 1): 10, ("a", 2): 7}
    latest = {("a", 0): 100, ("a", 1): 20, ("a", 2): 7}
    limited = rate_limit(base, latest, 11)
    assert sum(limited[tp] - base[tp] for tp in base) == 11
    assert limited == {("a", 0): 10, ("a", 1): 11, ("a", 2): 7}
    assert rate_limit(base, latest, 1000) == latest
    assert rate_limit(base, latest, 1)[("a", 0)] == 1  # the biggest backlog moves first
    assert from_json(to_json(latest)) == latest
    assert to_json(latest) == {"a": {"0": 100, "1": 20, "2": 7}}


T0 = 1_700_000_000_000


def batch(base: int, count: int) -> bytes:
    return build_batch(
        [(T0 + o, f"k{o}".encode(), f"v{o}".encode()) for o in range(base, base + count)], base_offset=base
    )


def fetched(records: bytes, *, aborted: tuple[tuple[int, int], ...] = (), hw: int = 100) -> FetchedPartition:
    return FetchedPartition(0, Offset(hw), Offset(hw), Offset(0), aborted, memoryview(records))


def values(reader: RangeReader) -> list[tuple[int, bytes | None]]:
    out = reader.rows.flush()
    return (
        [] if out is None else list(zip(out.column("offset").to_pylist(), out.column("value").to_pylist(), strict=True))
    )


def test_a_fetch_with_gaps_and_a_control_batch_ends_at_the_range_end_not_by_counting() -> None:
    marker = build_control_batch(commit=True, timestamp=T0, producer_id=7, producer_epoch=0, base_offset=8)
    records = batch(0, 2) + batch(5, 3) + marker + batch(9, 4)  # 2..4 compacted away, 8 a commit marker
    reader = RangeReader(read_options(opts(), streaming=False), OffsetRange("orders", 0, 1, 11))
    assert reader._take(fetched(records))
    assert reader.offset == 13  # past the range end: the read is over
    assert values(reader) == [(1, b"v1"), (5, b"v5"), (6, b"v6"), (7, b"v7"), (9, b"v9"), (10, b"v10")]

    control = RangeReader(read_options(opts(includeControl="true"), streaming=False), OffsetRange("orders", 0, 0, 9))
    control._take(fetched(records))
    out = control.rows.flush()
    assert out is not None and out.column("isControl").to_pylist() == [False] * 5 + [True]


def test_read_committed_drops_aborted_transactions_and_a_cut_batch_waits_for_the_next_fetch() -> None:
    builder = BatchBuilder(base_offset=2, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    for o in (2, 3):
        builder.append(T0 + o, None, f"v{o}".encode())
    aborted = builder.build()
    marker = build_control_batch(commit=False, timestamp=T0, producer_id=9, producer_epoch=0, base_offset=4)
    records = batch(0, 2) + aborted + marker + batch(5, 2)
    committed = read_options(opts(**{"kafka.isolation.level": "read_committed"}), streaming=False)
    reader = RangeReader(committed, OffsetRange("orders", 0, 0, 7))
    reader._take(fetched(records, aborted=((9, 2),)))
    assert [o for o, _ in values(reader)] == [0, 1, 5, 6]
    uncommitted = RangeReader(read_options(opts(), streaming=False), OffsetRange("orders", 0, 0, 7))
    uncommitted._take(fetched(records, aborted=((9, 2),)))
    assert [o for o, _ in values(uncommitted)] == [0, 1, 2, 3, 5, 6]

    whole, cut = batch(0, 3), batch(3, 50)
    reader = RangeReader(read_options(opts(), streaming=False), OffsetRange("orders", 0, 0, 53))
    assert reader._take(fetched(whole + cut[: len(cut) // 2]))
    assert reader.offset == 3  # the cut batch is fetched again, whole
    alone = RangeReader(read_options(opts(**{"kafka.fetch.max.bytes": "100"}), streaming=False), reader.piece)
    alone.offset = 3
    assert alone._take(fetched(cut[:100]))
    assert alone._max_bytes == len(cut)  # a batch larger than kafka.fetch.max.bytes is asked for whole


def test_a_fetch_answer_with_more_rows_than_an_arrow_batch_is_handed_out_in_pieces() -> None:
    records = batch(0, 5000) + batch(5000, 5000) + batch(10_000, 5000)
    reader = RangeReader(read_options(opts(), streaming=False), OffsetRange("orders", 0, 0, 15_000))
    assert reader._take(fetched(records, hw=15_000))
    assert reader.rows.full and reader.offset == 10_000  # stopped at the batch that filled it
    first = reader.rows.flush()
    assert reader._drain() and reader.offset == 15_000 and reader._pending is None
    rest = reader.rows.flush()
    assert first is not None and rest is not None
    assert first.column("offset").to_pylist() + rest.column("offset").to_pylist() == list(range(15_000))
