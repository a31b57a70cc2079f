"""``strait audit ledger``: a chaos history against what a site holds, record by record, at scale.

A chaos run (``strait chaos run``) records every write it had acknowledged in its history
(JSON Lines, ``chaos/history.py``); this job reads that history with Spark and compares it with
a site, live (``--site``, through the ``strait-kafka`` source) or from its log segments
(``--segments``, a dead site's disks or a backup, through ``strait-segments``), and names the
anomalies with chaos/'s checkers' definitions (:mod:`spark_jobs.jobs._ledger` has them):
``lost``, ``moved``, ``duplicate``, ``inconsistent-offsets``. Both must agree on one input
(``tests/spark_jobs/test_ledger_chaos.py`` holds them to it on real runs).

Usage::

    strait audit ledger --history runs/1/kill-leader/history.jsonl --segments runs/1/kill-leader/appliance/east \\
        --out audit/ledger
    spark-submit spark_jobs/jobs/ledger.py --history runs/1 --site east-1:9092 --out audit/ledger

Options: ``--history`` (repeatable; a file, or a run directory holding ``*.jsonl`` or
``*/history.jsonl``), ``--site BOOTSTRAP`` or ``--segments DIR`` (repeatable; log dirs or nodes'
data dirs), ``--topics`` (default: every topic the history acknowledged a write to),
``--history-site`` (the name the history gives the audited site; default: its primary),
``--command-config FILE`` (Kafka client properties for a secured ``--site``: TLS, SASL),
``--out``, ``--overwrite``, ``--master``. Output: ``discrepancies/`` (one row per anomaly: kind,
topic, partition, offset, detail, value, process, file, index, positions, values),
``summary.json``, ``report.html``; exit status 0 clean, 1 found, 2 bad input (a malformed
history line among them), 3 the job could not run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from node.client import ClientSecurity
from spark_jobs.jobs._common import BadInput, Job, run_job
from spark_jobs.jobs._history import History, HistoryError, history_files, read_history
from spark_jobs.jobs._ledger import audit
from spark_jobs.jobs._security import command_config_option, describe
from spark_jobs.sources._kafka_options import security_options

JOB = "ledger"


@click.command(JOB)
@click.option(
    "--history",
    "histories",
    multiple=True,
    required=True,
    metavar="FILE|DIR",
    help="A chaos history (JSON Lines), or a run directory holding *.jsonl (or */history.jsonl). Repeatable.",
)
@click.option("--site", metavar="BOOTSTRAP", help="The site to audit, live: its bootstrap servers (host:port,...).")
@command_config_option("--command-config", "security", help="--site is a secured listener")
@click.option(
    "--segments",
    multiple=True,
    metavar="DIR",
    help="The site to audit, from its log segments: log dirs or nodes' data dirs. Repeatable.",
)
@click.option(
    "--topics", metavar="T1,T2", help="Topics to audit (default: every topic the history acknowledged a write to)."
)
@click.option(
    "--history-site",
    metavar="NAME",
    help="The name the history gives the audited site (default: the site of its final read as primary).",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The output directory.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier result in --out.")
@click.option("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*]).")
def command(
    histories: tuple[str, ...],
    site: str | None,
    security: ClientSecurity | None,
    segments: tuple[str, ...],
    topics: str | None,
    history_site: str | None,
    out: Path,
    overwrite: bool,
    master: str | None,
) -> None:
    """Audit a chaos history against a site: lost, moved, duplicate and inconsistent-offsets records."""
    if bool(site) == bool(segments):
        raise click.UsageError("give the site to audit: --site BOOTSTRAP (live) or --segments DIR (its log files)")
    if security is not None and not site:
        raise click.UsageError("--command-config: only with --site (segments are read without a site)")
    try:
        files = history_files(histories)
    except HistoryError as exc:
        raise click.BadParameter(str(exc).removeprefix("--history "), param_hint="--history") from None
    for directory in segments:
        if "://" not in directory and not os.path.isdir(directory):
            raise click.BadParameter(f"{directory}: no such directory", param_hint="--segments")
    named = [t.strip() for t in (topics or "").split(",") if t.strip()]
    if topics is not None and not named:
        raise click.BadParameter(f"{topics!r}: name at least one topic", param_hint="--topics")

    def work(job: Job) -> dict[str, Any]:
        # Cached grouped frames keep AQE's coalesced partitions (else 200 mostly empty tasks each).
        job.spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
        history = read_history(job.spark, files)
        try:
            return _audit(job, history, named or history.topics)
        finally:
            history.release()

    def _audit(job: Job, history: History, chosen: list[str]) -> dict[str, Any]:
        if not chosen:
            raise BadInput("--history: it acknowledged no write; name the topics to audit with --topics")
        audited = {f: history_site if history_site is not None else history.primaries.get(f) for f in files}
        if segments:
            reader = job.spark.read.format("strait-segments").option("path", ",".join(segments))
            source = reader.option("topics", ",".join(chosen)).load()
        else:
            reader = job.spark.read.format("strait-kafka").option("kafka.bootstrap.servers", site)
            reader = reader.options(**security_options(security or ClientSecurity()))
            source = reader.option("subscribe", ",".join(chosen)).load()
        ledger = audit(history, source, audited, chosen)
        job.inputs = {
            "history": files,
            **(
                {"segments": list(segments)}
                if segments
                else {"site": site, "site_security": describe(security or ClientSecurity())}
            ),
            "topics": chosen,
            "history_site": sorted({str(name) for name in audited.values()}),
        }
        job.notes += ledger.notes
        names = ", ".join(repr(name) for name in sorted({str(name) for name in audited.values()}))
        how = "as --history-site says" if history_site is not None else "the site of its final read as primary"
        job.notes.append(f"the audited site is the one the history calls {names} ({how})")
        return ledger.finish(job)

    run_job(JOB, out, work, overwrite=overwrite, master=master)


def main(argv: list[str] | None = None) -> None:
    """``spark-submit spark_jobs/jobs/ledger.py ...`` and ``python -m spark_jobs.jobs.ledger ...``."""
    command.main(args=argv, prog_name=JOB)


if __name__ == "__main__":
    main()
