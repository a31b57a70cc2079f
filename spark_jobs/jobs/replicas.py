"""``strait audit replicas``: offline, do the replicas of each partition agree up to the high watermark?

Reads the nodes' log dirs (a stopped site's disks, copies taken from several machines) with
``strait-segments`` (``copies=all``) and compares every partition's copies offset by offset:
``divergent`` and ``missing`` below the high watermark are discrepancies; a copy that ends
below it (``short``) is informational unless ``--strict``; where copies differ at or above it
(``uncommitted``) is informational. :mod:`spark_jobs.jobs._replicas` has the definitions and
why the HW is the largest checkpointed one.

Usage::

    strait audit replicas --site-dir runs/1/kills/appliance/east --out audit/replicas
    spark-submit spark_jobs/jobs/replicas.py --node /mnt/n1 --node /mnt/n2 --node /mnt/n3 --out audit/replicas

Options: ``--node DIR`` (repeatable: a node's data dir holding its log dirs, or a log dir),
``--site-dir DIR`` (holding ``node*/``), ``--topics`` (default: every topic not starting with
``__``), ``--strict``, ``--out``, ``--overwrite``, ``--master``. Output: ``discrepancies/`` and
``informational/`` (Parquet: kind, topic, partition, offset, detail, copy, hw, copies),
``summary.json`` (per partition: copies, HW, records per copy, each copy's range),
``report.html``; exit status 0 clean, 1 found, 2 bad input, 3 the job could not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from spark_jobs.jobs._common import BadInput, Job, run_job
from spark_jobs.jobs._replicas import ReplicaInputError, compare, discover, node_dirs

JOB = "replicas"


@click.command(JOB)
@click.option(
    "--node",
    "nodes",
    multiple=True,
    metavar="DIR",
    help="A node's data dir (holding its log dirs) or one log dir. Repeatable.",
)
@click.option("--site-dir", metavar="DIR", help="A directory holding the site's node dirs (node-1/, node-2/, ...).")
@click.option("--topics", metavar="T1,T2", help="Topics to compare (default: every topic not starting with __).")
@click.option("--strict", is_flag=True, help="A copy that ends below the HW (short) is a discrepancy.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The output directory.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier result in --out.")
@click.option("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*]).")
def command(
    nodes: tuple[str, ...],
    site_dir: str | None,
    topics: str | None,
    strict: bool,
    out: Path,
    overwrite: bool,
    master: str | None,
) -> None:
    """Check that each partition's replicas agree up to the high watermark, and show where they diverge beyond it."""
    named = [t.strip() for t in (topics or "").split(",") if t.strip()]
    if topics is not None and not named:
        raise click.BadParameter(f"{topics!r}: name at least one topic", param_hint="--topics")
    try:
        dirs = node_dirs(nodes, site_dir)
        copies = discover(dirs, named or None, option="--site-dir" if site_dir and not nodes else "--node")
    except ReplicaInputError as exc:
        raise click.UsageError(str(exc)) from None
    absent = sorted(set(named) - {c.topic for c in copies})
    if absent:
        raise click.BadParameter(f"{', '.join(absent)}: in no log dir of the nodes given", param_hint="--topics")

    def work(job: Job) -> dict[str, Any]:
        if not copies:
            raise BadInput("the nodes' log dirs hold no partition to compare (name internal topics with --topics)")
        # Cached grouped frames keep AQE's coalesced partitions (else 200 mostly empty tasks each).
        job.spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
        log_dirs = sorted({c.log_dir for c in copies})
        source = (
            job.spark.read.format("strait-segments")
            .option("path", ",".join(log_dirs))
            .option("copies", "all")
            .option("includeControl", "true")
            .option("topics", ",".join(sorted({c.topic for c in copies})))
            .load()
        )
        result = compare(job.spark, source, copies, strict=strict)
        job.inputs = {
            "nodes": [str(d) for d in dirs],
            "log_dirs": log_dirs,
            "topics": sorted({c.topic for c in copies}),
            "strict": strict,
        }
        return result.finish(job)

    run_job(JOB, out, work, overwrite=overwrite, master=master)


def main(argv: list[str] | None = None) -> None:
    """``spark-submit spark_jobs/jobs/replicas.py ...`` and ``python -m spark_jobs.jobs.replicas ...``."""
    command.main(args=argv, prog_name=JOB)


if __name__ == "__main__":
    main()
