"""The Spark standalone cluster fixture (tests/spark_jobs/cluster.py): a job submitted with
``spark-submit`` runs on its executor with strait's packages shipped as ``--py-files``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.spark_jobs.cluster import StandaloneCluster, spark_cluster  # noqa: F401 - the fixture

pytestmark = [pytest.mark.spark, pytest.mark.integration]

APP = """
import json, sys
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.types import StringType

def where(_):
    import spark_jobs, storage.records
    from storage.records import RecordBatch, build_batch
    batch = RecordBatch(bytearray(build_batch([(0, b"k", b"v")], base_offset=5)))
    offsets = [r.offset for r in batch.records()]
    return f"{spark_jobs.__file__}|{offsets}"

spark = SparkSession.builder.appName("strait-standalone-check").getOrCreate()
rows = spark.range(0, 8, numPartitions=4).select(F.udf(where, StringType())("id").alias("w")).distinct().collect()
json.dump({"master": spark.sparkContext.master, "executors": [r["w"] for r in rows]}, open(sys.argv[1], "w"))
spark.stop()
"""


def test_a_submitted_application_runs_on_the_worker_with_the_shipped_packages(
    spark_cluster: StandaloneCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    script = tmp_path / "app.py"
    script.write_text(APP)
    result = tmp_path / "result.json"
    done = spark_cluster.submit(script, [str(result)], timeout=240)
    assert done.returncode == 0, done.output[-4000:]
    answer = json.loads(result.read_text())
    assert answer["master"] == spark_cluster.url
    (executor,) = answer["executors"]
    path, offsets = executor.split("|")
    assert "strait-packages.zip" in path and offsets == "[5]"
    assert "Registering app strait-standalone-check" in spark_cluster.master.log_path.read_text()
