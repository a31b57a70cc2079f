"""strait's PySpark data sources: ``strait-segments`` (log segment files) and ``strait-kafka``
(a live site through the Kafka protocol). Both produce :data:`spark_jobs.schema.RECORD_SCHEMA`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .kafka import KafkaSource
    from .segments import SegmentSource

__all__ = ["KafkaSource", "SegmentSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("strait-segments")`` and ``format("strait-kafka")`` available."""
    from .kafka import KafkaSource  # noqa: PLC0415  (lazily: see __getattr__)
    from .segments import SegmentSource  # noqa: PLC0415

    spark.dataSource.register(SegmentSource)
    spark.dataSource.register(KafkaSource)


def __getattr__(name: str) -> Any:
    # Imported on first use: Spark's Python workers unpickle a reader of one source, and the
    # package should not make them import the other (strait-kafka's client, trio, ...).
    if name == "KafkaSource":
        from .kafka import KafkaSource  # noqa: PLC0415

        return KafkaSource
    if name == "SegmentSource":
        from .segments import SegmentSource  # noqa: PLC0415

        return SegmentSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
