"""The Spark standalone cluster fixture (tests/spark_jobs/cluster.py): a job submitted with
``spark-submit`` runs on its executor with strait's packages shipped as ``--py-files``; the
replay job, submitted as ``spark-submit spark_jobs/jobs/replay.py``, against a real site."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.spark_jobs.cluster import REPO, StandaloneCluster, spark_cluster  # noqa: F401 - the fixture
from tests.spark_jobs.replay_sites import Sites, failed_over, read, replay_sites  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

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


def test_replay_submitted_to_the_cluster_writes_the_missing_records_to_a_real_site(
    spark_cluster: StandaloneCluster,  # noqa: F811
    replay_sites: Sites,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = failed_over(replay_sites, tmp_path / "exports", "submitted")
    west = replay_sites.west.bootstrap
    out = tmp_path / "out"
    args = ["--export", str(scenario.root), "--site", west, "--out", str(out), "--execute"]
    done = spark_cluster.submit(REPO / "spark_jobs" / "jobs" / "replay.py", args, name="replay")
    assert done.returncode == 0, done.output[-6000:]
    assert f"replay: wrote 6 record(s) to {west}" in done.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["spark"]["master"] == spark_cluster.url
    assert summary["verdict"] == "clean"
    assert summary["totals"] == {"export_records": 8, "target_records": 3, "present": 2, "replayed": 6}
    assert summary["command"].split()[1:] == args
    for p in (0, 1):
        assert [r for _, r in read(west, "submitted", p)] == scenario.expected(p)
