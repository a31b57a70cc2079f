"""strait's PySpark data sources: ``strait-segments`` (log segment files) and ``strait-kafka``
(a live site through the Kafka protocol). Both produce :data:`spark_jobs.schema.RECORD_SCHEMA`."""
