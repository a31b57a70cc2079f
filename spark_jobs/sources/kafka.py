"""The ``strait-kafka`` data source: a live strait site (or any Kafka cluster) through the Kafka protocol.

Batch reads, streaming reads and batch writes, with Spark's Kafka source's option names and
formats, so a query written for ``format("kafka")`` runs with ``format("strait-kafka")``::

    spark.dataSource.register(KafkaSource)
    df = (spark.read.format("strait-kafka")
          .option("kafka.bootstrap.servers", "east-1:9092,east-2:9092")
          .option("subscribe", "orders")
          .option("startingOffsets", '{"orders":{"0":23,"1":-2}}')
          .load())

Rows have :data:`spark_jobs.schema.RECORD_SCHEMA` (Spark's Kafka columns first, then what the
batch header says: producer id, sequence, leader epoch, codec, CRC check ...; ``segment`` is
null). Records are decoded by the same code as ``strait-segments`` reads files with, so both
sources agree row for row. Reads talk to each partition's leader with strait's own client
(``node.client``), one ``trio.run`` at a time, in the driver (planning) and in each task.

========================================  =========  ===============================================
option                                    default    meaning
========================================  =========  ===============================================
``kafka.bootstrap.servers``               required   ``host:port,...`` of the site (read and write)
(or ``bootstrap.servers``)
``subscribe``                                        topics, comma-separated (exactly one of
                                                     subscribe, subscribePattern, assign)
``subscribePattern``                                 a regular expression (Python's) every topic
                                                     name must match whole; internal topics never
``assign``                                           JSON ``{"orders":[0,1]}``
``startingOffsets``                       earliest   ``earliest``, ``latest`` (streaming only) or
                                          (stream:   JSON ``{"orders":{"0":23,"1":-2}}``: -2
                                          latest)    earliest, -1 latest; every partition read
``endingOffsets`` (batch)                 latest     ``latest`` or JSON as above (exclusive; -2 not
                                                     allowed)
``startingTimestamp``,                               one time in ms for every partition, or JSON
``startingOffsetsByTimestamp``                       ``{"orders":{"0":1700000000000}}``: the first
                                                     record at or after it (takes precedence over
                                                     startingOffsets)
``startingOffsetsByTimestampStrategy``    error      no record that late: ``error`` or ``latest``
``endingTimestamp``,                                 as above for the end (batch); no record that
``endingOffsetsByTimestamp``                         late: the end offset
``failOnDataLoss``                        true       offsets deleted before they were read, a range
                                                     that disappeared: fail naming the partition;
                                                     false: skip, one ``valid=false`` row each
``minPartitions``                                    at least this many input partitions
``maxRecordsPerPartition``                1000000    offsets per input partition at most
``maxOffsetsPerTrigger`` (streaming)                 offsets per micro-batch at most, shared by
                                                     backlog
``kafka.isolation.level``                 read_      ``read_committed``: stop at the last stable
                                          uncommit.  offset, drop aborted transactions
``includeControl``                        false      also emit control records (``isControl``)
``rows`` (batch)                          records    ``batches``: one row per fetched record batch,
                                                     not decoded (``BATCH_SCHEMA``: offsets, count,
                                                     header fields, CRC check, digest of its bytes)
``kafka.fetch.max.bytes``                 4194304    bytes per Fetch (bounds a task's memory)
``kafka.request.timeout.ms``              30000      one request; also how long the planner waits
                                                     for the site to answer at all
``kafkaConsumer.pollTimeoutMs``           120000     a task that makes no progress this long fails
``fetchOffset.numRetries``,               3,         ListOffsets retries while planning (leaders
``fetchOffset.retryIntervalMs``           1000       moving)
``includeHeaders``, ``groupIdPrefix``,               accepted for compatibility, no effect (headers
``kafka.group.id``                                   are always read; no consumer group is used)
``topic`` (write)                                    the topic of every row (overrides the column)
``kafka.*`` (write)                                  librdkafka producer settings (``linger.ms``,
                                                     ``compression.type``, ``delivery.timeout.ms``
                                                     as ``message.timeout.ms``, 120000 by default
                                                     ...); idempotence, acks, serializers fixed
========================================  =========  ===============================================

**Secured sites** (read and write) take Spark's Kafka security options, the Java client's keys:
``kafka.security.protocol`` (``PLAINTEXT`` by default, ``SSL``, ``SASL_PLAINTEXT``,
``SASL_SSL``); ``kafka.ssl.truststore.location`` (the CA certificates, PEM; default: the
system's), ``kafka.ssl.keystore.location`` (a client certificate: key and chain in one PEM file)
and ``kafka.ssl.key.password``, ``kafka.ssl.truststore.type`` / ``kafka.ssl.keystore.type``
(``PEM``; JKS and PKCS12 are refused), ``kafka.ssl.endpoint.identification.algorithm``
(``https`` by default; empty: no host-name check); ``kafka.sasl.mechanism`` (``PLAIN``,
``SCRAM-SHA-256``, ``SCRAM-SHA-512``) and ``kafka.sasl.jaas.config`` (a login module entry with
``username`` and ``password``). They are checked on the driver (the files must load there, and
on every executor at the same paths); an ``ssl.*`` or ``sasl.*`` option the protocol would ignore
is an error. A password is never shown: not in an error, a log line, a repr or Spark's plan.

Unknown options and bad values are a ValueError (:class:`OptionError`) naming the option and the
value; so are values the site contradicts (an unknown topic or partition, an offset past the
end, offsets that do not name every partition). A site that does not answer within
``kafka.request.timeout.ms`` is a :class:`KafkaSourceError` naming the bootstrap servers; so is
data loss (naming the partition and offsets) and a failed write. A batch read is one input
partition per topic-partition range, cut into pieces of at most ``maxRecordsPerPartition``
offsets and to reach ``minPartitions``; see :mod:`._kafka_read` for how a task reads (bounded
memory, leader moves, gaps), :mod:`._kafka_stream` for streaming, :mod:`._kafka_write` for the
writer (idempotent within a task; a retried task re-sends its rows, as Spark's own sink).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..schema import BATCH_SCHEMA, RECORD_SCHEMA
from ._kafka_options import OptionError, ReadOptions, read_options, rows_of, write_options
from ._kafka_plan import KafkaSourceError, OffsetRange, on_site, plan_batch, split
from ._kafka_read import RangeReader
from ._kafka_stream import KafkaStreamReader
from ._kafka_write import KafkaWriter, KafkaWriteResult

__all__ = ["KafkaBatchReader", "KafkaSource", "KafkaSourceError", "KafkaWriteResult", "OptionError", "OffsetRange"]


class KafkaSource(DataSource):
    """``strait-kafka``: register with ``spark.dataSource.register(KafkaSource)``."""

    @classmethod
    def name(cls) -> str:
        return "strait-kafka"

    def schema(self) -> StructType:
        return BATCH_SCHEMA if rows_of(self.options) == "batches" else RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema, self.schema())
        return KafkaBatchReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema, RECORD_SCHEMA)
        return KafkaStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return KafkaWriter(write_options(self.options), schema, overwrite)


class KafkaBatchReader(DataSourceReader):
    """Plans in the driver (:meth:`partitions`); each task reads one :class:`OffsetRange`."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        plan = functools.partial(plan_batch, opts=opts)
        ranges = on_site(opts.bootstrap, opts.request_timeout_s, plan, opts.security)
        return split(ranges, opts.max_records_per_partition, opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):  # Spark hands a placeholder when the plan is empty
            yield from RangeReader(self.opts, partition).batches()


def _check_schema(schema: StructType, produced: StructType) -> None:
    if schema.fieldNames() != produced.fieldNames():
        raise ValueError(
            f"strait-kafka produces the columns {produced.fieldNames()}; a user schema "
            f"{schema.fieldNames()} cannot be applied (select or cast after loading instead)"
        )
