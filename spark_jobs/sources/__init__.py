"""strait's PySpark data sources: ``strait-segments`` (log segment files) and ``strait-kafka``
(a live site through the Kafka protocol). Both produce :data:`spark_jobs.schema.RECORD_SCHEMA`."""

from __future__ import annotations

from pyspark.sql import SparkSession

from .kafka import KafkaSource
from .segments import SegmentSource

__all__ = ["KafkaSource", "SegmentSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("strait-segments")`` and ``format("strait-kafka")`` available."""
    spark.dataSource.register(SegmentSource)
    spark.dataSource.register(KafkaSource)
