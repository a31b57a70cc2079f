"""``strait-segments``: a Spark data source over Kafka log segment files, read straight from disk.

It reads what brokers wrote (a live node's log dirs, a dead site's disks, a backup) without a
broker, one Spark input partition per segment file, or per byte range of a large one. Rows
have :data:`spark_jobs.schema.RECORD_SCHEMA`; damage (a torn tail, garbage, a CRC mismatch, a
batch that does not decode) becomes rows with ``valid`` false and the reason, file and byte
position in ``error``, never a failed job. Every codec strait stores is read: none, gzip,
snappy, lz4, zstd.

::

    from spark_jobs.sources.segments import SegmentSource
    spark.dataSource.register(SegmentSource)
    df = (spark.read.format("strait-segments")
          .option("topics", "orders")
          .option("startingOffsets", '{"orders":{"0":1000}}')
          .load("/data/east/node1,/data/east/node2"))

Options (names are case-insensitive, as Spark's). Every bad value fails the query with a
ValueError naming the option and the value; what depends on the files (a missing path, a
named topic no path holds) fails when the query is planned.

=======================  =========================================================================
option                   meaning
=======================  =========================================================================
``path``                 Required (or ``.load(path)``; ``.load([p1, p2])`` works too). Comma-separated
                         segment files (``<topic>-<partition>/<20-digit offset>.log``), partition
                         dirs, log dirs (a dir holding ``meta.properties`` or partition dirs), or any
                         dir above them, such as a node's data dir or a dir of several nodes: every
                         log dir below it is read. A path that does not exist, or holds none of these,
                         is an error naming it.
``topics``               Comma-separated topic names to read; a name with no partition under the
                         paths is an error naming it. Without ``topics`` or ``topicPattern``, every
                         topic but Kafka's internal ones (names starting ``__``) is read.
``topicPattern``         A Python regular expression a topic name must match as a whole (instead of
                         ``topics``; ``.*`` includes the internal topics). Not both.
``startingOffsets``      ``earliest`` (default) or Spark's Kafka JSON ``{"orders":{"0":23,"1":-2}}``
                         (-2 earliest). Earliest is the copy's log start offset from its log dir's
                         ``log-start-offset-checkpoint`` (else its first segment's base offset); an
                         explicit offset reads whatever the files hold from there. Partitions the
                         JSON does not name start at earliest; a partition it names that is not
                         read is an error. ``latest``/-1 is not allowed (a batch read, as Spark's).
``endingOffsets``        ``latest`` (default, the end of the files) or JSON as above (-1 latest),
                         exclusive. ``earliest``/-2 is not allowed. A start after the end for a
                         partition is an error.
``startingTimestamp``    Milliseconds since the epoch: only records whose timestamp is at or after it.
``endingTimestamp``      Milliseconds since the epoch: only records whose timestamp is before it.
                         Both filter records by their own timestamps, ``[start, end)`` (unlike
                         Spark's Kafka source, which turns a timestamp into a starting offset);
                         records without a timestamp (-1) are dropped by a starting timestamp.
``includeControl``       ``false`` (default) or ``true``: also emit transaction markers, as rows with
                         ``isControl`` true.
``copies``               When several paths hold the same topic-partition (the replicas on several
                         nodes, a backup): ``longest`` (default) reads, per partition, the copy whose
                         log ends furthest (ties: the copy found first: under the earlier path
                         entry, then the earlier dir name); ``all``
                         reads every copy (the ``segment`` column tells them apart).
``committedOnly``        ``false`` (default) or ``true``: stop each copy at its high watermark, from
                         the ``replication-offset-checkpoint`` of its log dir. A copy that file has no
                         entry for (or that has no such file) is read to its end; a checkpoint that
                         cannot be parsed is an error naming it.
``rows``                 ``records`` (default): one row per record, :data:`spark_jobs.schema.RECORD_SCHEMA`;
                         ``batches``: one row per stored record batch, its records not decoded,
                         :data:`spark_jobs.schema.BATCH_SCHEMA` (base and last offset, record count,
                         header fields, whether the CRC matches, and a digest of the batch's bytes).
                         Many times faster; what reconcile compares first. Bounds keep the batches
                         that overlap them.
``maxBytesPerPartition`` Bytes (``134217728``, ``128m``, ``1g``; default 128 MiB, as Spark's
                         ``spark.sql.files.maxPartitionBytes``; 1 GiB with ``rows=batches``, whose
                         tasks hold one row per batch): a segment larger than this is split
                         into byte ranges at batch boundaries, each an input partition.
=======================  =========================================================================

Invalid rows: damage at a point of a segment (a torn tail, a length that does not fit, a
magic byte that is no record format's) is one row and ends the reading of that segment, or
of that byte range of a split one: past it the next batch cannot be found. A later byte
range of the same segment starts at a batch boundary found while planning, so it is read
(a split segment can thus show more of a damaged file than an unsplit one). Offset and time
bounds also apply to invalid rows whose offset is known.

Planning is cheap: it lists dirs, stats files and reads checkpoints, ``.index`` entries and
batch headers, never a record. Segments whose offsets lie wholly outside the offset bounds
are not read at all, and a read starting inside a segment starts at the index entry before
its starting offset. Filters in the query (``WHERE partition = 0``) are applied by Spark
after the scan: put what should prune the read into the options.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_jobs.schema import BATCH_SCHEMA, RECORD_SCHEMA

from ._segments_files import check_paths
from ._segments_options import SegmentOptions, parse_options
from ._segments_plan import SegmentRange, plan
from ._segments_read import read_range

__all__ = ["SegmentReader", "SegmentSource"]


class SegmentSource(DataSource):
    """The ``strait-segments`` data source (options: see the module docstring)."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.settings: SegmentOptions = parse_options(options)
        check_paths(self.settings.paths)  # fail at .load(), before anything is planned

    @classmethod
    def name(cls) -> str:
        return "strait-segments"

    def schema(self) -> StructType:
        return BATCH_SCHEMA if self.settings.rows == "batches" else RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return SegmentReader(self.settings)


class SegmentReader(DataSourceReader):
    def __init__(self, settings: SegmentOptions) -> None:
        self.settings = settings

    def partitions(self) -> list[InputPartition]:
        return list(plan(self.settings))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, SegmentRange):  # with nothing to read Spark passes InputPartition(None)
            yield from read_range(partition, include_control=self.settings.include_control, rows_of=self.settings.rows)
