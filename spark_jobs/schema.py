"""The columns both of strait's Spark data sources produce, in Spark's and in Arrow's terms.

Spark's own Kafka source's columns come first, under its names (``key``, ``value``, ``topic``,
``partition``, ``offset``, ``timestamp``, ``timestampType``, ``headers``), so a query written
for it reads strait's rows unchanged; what a batch header adds follows. ``docs/audit.md`` has
the table with each column's meaning.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: ``timestampType``: as Spark's Kafka source reports it.
CREATE_TIME = 0
LOG_APPEND_TIME = 1

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

RECORD_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType(), nullable=False),
        StructField("partition", IntegerType(), nullable=False),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", ArrayType(HEADER_TYPE)),
        StructField("producerId", LongType()),
        StructField("producerEpoch", IntegerType()),
        StructField("sequence", IntegerType()),
        StructField("leaderEpoch", IntegerType()),
        StructField("isTransactional", BooleanType()),
        StructField("isControl", BooleanType()),
        StructField("codec", StringType()),
        StructField("batchOffset", LongType()),
        StructField("crcValid", BooleanType()),
        StructField("valid", BooleanType(), nullable=False),
        StructField("error", StringType()),
        StructField("segment", StringType()),
    ]
)

ARROW_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", pa.list_(ARROW_HEADER)),
        pa.field("producerId", pa.int64()),
        pa.field("producerEpoch", pa.int32()),
        pa.field("sequence", pa.int32()),
        pa.field("leaderEpoch", pa.int32()),
        pa.field("isTransactional", pa.bool_()),
        pa.field("isControl", pa.bool_()),
        pa.field("codec", pa.string()),
        pa.field("batchOffset", pa.int64()),
        pa.field("crcValid", pa.bool_()),
        pa.field("valid", pa.bool_(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("segment", pa.string()),
    ]
)

COLUMNS: tuple[str, ...] = tuple(ARROW_SCHEMA.names)
assert tuple(RECORD_SCHEMA.fieldNames()) == COLUMNS, "the Spark and Arrow schemas list the same columns"


#: ``rows=batches``: one row per stored record batch, its records not decoded. ``digest`` is the
#: first 16 bytes of the SHA-256 of the bytes the batch's CRC covers (attributes to the end):
#: two batches with the same digest hold the same records, timestamps, headers and producer
#: state, whatever their base offset or leader epoch (the broker rewrites those two).
BATCH_SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("partition", IntegerType(), nullable=False),
        StructField("offset", LongType()),
        StructField("lastOffset", LongType()),
        StructField("records", IntegerType()),
        StructField("maxTimestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("producerId", LongType()),
        StructField("producerEpoch", IntegerType()),
        StructField("baseSequence", IntegerType()),
        StructField("leaderEpoch", IntegerType()),
        StructField("isTransactional", BooleanType()),
        StructField("isControl", BooleanType()),
        StructField("codec", StringType()),
        StructField("bytes", IntegerType()),
        StructField("digest", BinaryType()),
        StructField("crcValid", BooleanType()),
        StructField("valid", BooleanType(), nullable=False),
        StructField("error", StringType()),
        StructField("segment", StringType()),
    ]
)

ARROW_BATCH_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64()),
        pa.field("lastOffset", pa.int64()),
        pa.field("records", pa.int32()),
        pa.field("maxTimestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("producerId", pa.int64()),
        pa.field("producerEpoch", pa.int32()),
        pa.field("baseSequence", pa.int32()),
        pa.field("leaderEpoch", pa.int32()),
        pa.field("isTransactional", pa.bool_()),
        pa.field("isControl", pa.bool_()),
        pa.field("codec", pa.string()),
        pa.field("bytes", pa.int32()),
        pa.field("digest", pa.binary()),
        pa.field("crcValid", pa.bool_()),
        pa.field("valid", pa.bool_(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("segment", pa.string()),
    ]
)

BATCH_COLUMNS: tuple[str, ...] = tuple(ARROW_BATCH_SCHEMA.names)
assert tuple(BATCH_SCHEMA.fieldNames()) == BATCH_COLUMNS, "the Spark and Arrow batch schemas list the same columns"
