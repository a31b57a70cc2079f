"""The SparkSession every job uses: ``local[*]`` by default, whatever spark-submit says otherwise.

Run directly (``python -m spark_jobs.jobs.reconcile ...`` or ``strait audit ...``), a job starts
an embedded Spark on ``local[*]`` bound to loopback with its web UI off (nothing listens beyond
this machine). Run by ``spark-submit --master spark://...`` (or YARN, Kubernetes), the session
spark-submit configured is used unchanged. Either way strait's data sources are registered.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from .sources import register

LOCAL_MASTER = "local[*]"


def launched_by_spark_submit() -> bool:
    """True inside a driver that spark-submit (or pyspark's shell) started: its JVM runs already."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_session(
    master: str | None = None, app_name: str = "strait-audit", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The session (created once per process), with ``strait-segments`` and ``strait-kafka`` registered.

    ``master``: None means spark-submit's when it launched this driver, else :data:`LOCAL_MASTER`.
    """
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not launched_by_spark_submit():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master or LOCAL_MASTER)
        if (master or LOCAL_MASTER).startswith("local"):
            builder = builder.config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
    # Cached frames (every job caches its discrepancies before writing them) may be coalesced by
    # adaptive execution like any other: without this, a small job writes 200 shuffle partitions.
    builder = builder.config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
