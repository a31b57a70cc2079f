"""The batch writer: a DataFrame's rows produced to a site, idempotently, acks=all.

The columns are Spark's Kafka sink's: ``value`` (string or binary, required), ``key`` (string
or binary), ``topic`` (string; the ``topic`` option, when set, overrides it), ``partition``
(int; null or absent: the producer's partitioner), ``headers`` (array<struct<key: string,
value: binary>>). strait adds ``timestamp`` (timestamp; null or absent: now), so rows read with
``strait-kafka`` keep their CreateTime when written back. Other columns are ignored, so a
DataFrame read with ``strait-kafka`` can be written as it is.

Each task runs one confluent-kafka (librdkafka) producer with ``enable.idempotence=true`` and
``acks=all``: within a task a record is written once and in order, whatever the producer
retries. The task flushes and fails on the first delivery error, or when a record is not
acknowledged in time, so a failed write fails the job. **A Spark task retry re-sends the
task's rows** (its producer is a new one): across task retries the write is at-least-once,
exactly as Spark's own Kafka sink. The commit message of each task carries its counts.

Security: the writer takes the reader's options (``kafka.security.protocol``, ``kafka.ssl.*``,
``kafka.sasl.*``, Spark's names) and gives its producer librdkafka's equivalents
(:func:`producer_security`): ``security.protocol``, ``ssl.ca.location``,
``ssl.certificate.location`` and ``ssl.key.location`` (both the PEM keystore), ``ssl.key.password``,
``ssl.endpoint.identification.algorithm``, ``sasl.mechanism``, ``sasl.username``,
``sasl.password``. librdkafka's messages are scrubbed of the passwords before they are raised.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from node.client import ClientSecurity, SiteClient

from ._kafka_options import OptionError, WriteOptions
from ._kafka_plan import KafkaSourceError, on_site

log = logging.getLogger(__name__)

DEFAULT_MESSAGE_TIMEOUT_MS = 120_000  # the Java producer's delivery.timeout.ms default, as Spark's sink has
_BYTES = (StringType, BinaryType)
_INTS = (IntegerType, LongType, ShortType)


@dataclass
class KafkaWriteResult(WriterCommitMessage):
    """What one task wrote: records acknowledged, in all and by topic."""

    records: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)


def check_columns(schema: StructType, topic_option: str | None) -> None:
    """The DataFrame can be written: ``value`` and the optional columns have types the sink takes.
    Raises ValueError naming the column and its type."""
    fields = {f.name: f.dataType for f in schema.fields}

    def need(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        if name in fields and not isinstance(fields[name], allowed):
            raise ValueError(f"column {name} has type {fields[name].simpleString()}; strait-kafka writes {what}")

    if "value" not in fields:
        raise ValueError(f"strait-kafka writes a 'value' column (string or binary); the DataFrame has {sorted(fields)}")
    need("value", _BYTES, "string or binary")
    need("key", _BYTES, "string or binary")
    need("topic", (StringType,), "string")
    need("partition", _INTS, "int")
    need("timestamp", (TimestampType,), "timestamp")
    if "headers" in fields:
        headers = fields["headers"]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        names = [f.name for f in element.fields] if isinstance(element, StructType) else []
        if names != ["key", "value"] or not isinstance(element, StructType):
            raise ValueError(
                f"column headers has type {headers.simpleString()}; strait-kafka writes "
                "array<struct<key:string,value:binary>>"
            )
        need_key, need_value = element.fields[0].dataType, element.fields[1].dataType
        if not isinstance(need_key, StringType) or not isinstance(need_value, _BYTES):
            raise ValueError(
                f"column headers has type {headers.simpleString()}; strait-kafka writes "
                "array<struct<key:string,value:binary>>"
            )
    if topic_option is None and "topic" not in fields:
        raise ValueError("strait-kafka needs the topic option or a 'topic' column to know where each row goes")


class KafkaWriter(DataSourceArrowWriter):
    """Checks the DataFrame, the options and the site in the driver; ``write`` runs in each task."""

    def __init__(self, opts: WriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise ValueError("mode overwrite: a Kafka topic cannot be overwritten; use mode append (or the default)")
        check_columns(schema, opts.topic)
        self.opts = opts
        self.config = producer_config(opts)
        try:
            Producer(self.config).close()  # librdkafka checks every setting's name and value here
        except KafkaException as exc:
            raise OptionError(
                f"a kafka.* option is not a valid producer setting: {self._scrub(exc.args[0].str())}"
            ) from None

        async def reachable(site: SiteClient) -> None:
            return None

        on_site(opts.bootstrap, opts.request_timeout_s, reachable, opts.security)

    def _scrub(self, text: str) -> str:
        """``text`` without the passwords the producer was given."""
        for secret in (self.opts.security.sasl_password, self.opts.security.key_password):
            if secret:
                text = text.replace(secret, "***")
        return text

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaWriteResult:
        """Produce every row, flush, and return the counts. Raises KafkaSourceError on any
        delivery error or a record not acknowledged within the producer's message timeout."""
        producer = Producer(self.config)
        failures: list[str] = []
        delivered: Counter[str] = Counter()

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failures.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")
            else:
                delivered[msg.topic() or ""] += 1

        try:
            for batch in iterator:
                for row in _rows(batch, self.opts.topic):
                    while True:
                        try:
                            producer.produce(**row, on_delivery=on_delivery)
                            break
                        except BufferError:  # librdkafka's queue is full: let deliveries drain
                            producer.poll(0.1)
                    if failures:
                        break
                producer.poll(0)
                if failures:
                    break
            timeout_s = float(self.config.get("message.timeout.ms", DEFAULT_MESSAGE_TIMEOUT_MS)) / 1000 + 10
            unacknowledged = producer.flush(timeout_s)
        finally:
            producer.close()
        if failures:
            raise KafkaSourceError(
                f"writing to kafka.bootstrap.servers={self.opts.bootstrap} failed for {len(failures)} record(s); "
                f"first: {self._scrub(failures[0])}"
            )
        if unacknowledged:
            raise KafkaSourceError(
                f"writing to kafka.bootstrap.servers={self.opts.bootstrap}: {unacknowledged} record(s) were not "
                "acknowledged in time"
            )
        return KafkaWriteResult(sum(delivered.values()), dict(delivered))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = _total(messages)
        log.info("strait-kafka wrote %d records to %s: %s", total.records, self.opts.bootstrap, total.by_topic)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total = _total(messages)
        log.warning(
            "strait-kafka: the write to %s failed; tasks that finished had written %d records (%s), which stay "
            "written (a retried job writes them again)",
            self.opts.bootstrap,
            total.records,
            total.by_topic,
        )


def producer_config(opts: WriteOptions) -> dict[str, Any]:
    config: dict[str, Any] = {"message.timeout.ms": DEFAULT_MESSAGE_TIMEOUT_MS, "client.id": "strait-spark-writer"}
    config |= opts.producer
    if "delivery.timeout.ms" in config:  # the Java client's name for librdkafka's message.timeout.ms
        config["message.timeout.ms"] = config.pop("delivery.timeout.ms")
    config |= producer_security(opts.security)
    config |= {"bootstrap.servers": opts.bootstrap, "enable.idempotence": True, "acks": "all"}
    return config


def producer_security(security: ClientSecurity) -> dict[str, str]:
    """librdkafka's settings for the security options (empty for PLAINTEXT)."""
    if security.protocol == "PLAINTEXT":
        return {}
    out = {"security.protocol": security.protocol.lower()}
    if security.uses_tls:
        if security.truststore is not None:
            out["ssl.ca.location"] = security.truststore
        if security.keystore is not None:  # one PEM file: OpenSSL finds the key and the chain in it
            out["ssl.certificate.location"] = out["ssl.key.location"] = security.keystore
        if security.key_password is not None:
            out["ssl.key.password"] = security.key_password
        out["ssl.endpoint.identification.algorithm"] = "https" if security.check_hostname else "none"
    if security.uses_sasl:
        assert security.sasl_mechanism and security.sasl_username is not None and security.sasl_password is not None
        out |= {
            "sasl.mechanism": security.sasl_mechanism,
            "sasl.username": security.sasl_username,
            "sasl.password": security.sasl_password,
        }
    return out


def _total(messages: list[WriterCommitMessage | None]) -> KafkaWriteResult:
    out = KafkaWriteResult()
    by_topic: Counter[str] = Counter()
    for m in messages:
        if isinstance(m, KafkaWriteResult):
            out.records += m.records
            by_topic.update(m.by_topic)
    out.by_topic = dict(by_topic)
    return out


def _rows(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[dict[str, Any]]:
    """``Producer.produce`` arguments for each row of an Arrow batch."""
    n = batch.num_rows
    names = batch.schema.names

    def column(name: str) -> list[Any]:
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * n

    values, keys, topics, partitions, headers = map(column, ("value", "key", "topic", "partition", "headers"))
    times: list[Any] = [None] * n
    if "timestamp" in names:
        stamps = batch.column(names.index("timestamp"))
        times = stamps.cast(pa.timestamp("ms", tz=stamps.type.tz), safe=False).cast(pa.int64()).to_pylist()
    for i in range(n):
        topic = topic_option or topics[i]
        if not topic:
            raise KafkaSourceError(f"a row has a null topic and the topic option is not set (value {values[i]!r:.80})")
        row: dict[str, Any] = {"topic": topic, "value": values[i], "key": keys[i]}
        if partitions[i] is not None:
            row["partition"] = partitions[i]
        if headers[i]:
            row["headers"] = [(h["key"], h["value"]) for h in headers[i]]
        if times[i] is not None:
            row["timestamp"] = times[i]
        yield row
