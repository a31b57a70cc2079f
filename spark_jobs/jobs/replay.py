"""``replay``: a failover's divergence export back into the new primary, each record once.

``strait failover reverse`` exported every record the old primary held beyond the cut (written
there and never mirrored) before truncating it. This job writes those records into the new
primary, skipping the ones it already holds, and reports every record as a row::

    strait audit replay --export DIR --site BOOTSTRAP --out OUT [--topics T,...] [--from TIME]
                        [--to TIME] [--include-transactional] [--present-from cut|earliest]
                        [--command-config FILE] [--execute] [--overwrite] [--master URL]
    spark-submit spark_jobs/jobs/replay.py ...the same options...

**Dry run by default**: it reads the export and the new primary and reports what it would
write; ``--execute`` writes. Each record's ``kind``: ``would-replay`` (dry run) or ``replayed``;
``present`` (the new primary holds it already: skipped); ``filtered`` (``--topics``, ``--from``,
``--to``, or a transactional record); ``missing`` (written by ``--execute`` but not found when
the new primary was read back afterwards).

**Where it looks for records already present.** Everything the new primary holds below a
partition's cut was mirrored from the old primary before the failover, so it holds no exported
record (an equal record there is an earlier, separate write). Everything written after the
failover is at or above the cut: clients re-sending what they had sent to the old primary, and an
earlier run of this job. So each partition is read from its cut (the export's ``summary.json``;
the lowest cut when several exports are given) to its high watermark when the job starts. Where
that does not hold the partition is read from its log start: a topic placed by key (it has fewer
partitions now: see ``_replay_match``), a cut outside the partition's log (the topic was
recreated, or retention removed it), or ``--present-from earliest``.

Outputs (``--out``, see ``jobs/_output.py``): ``records/`` (Parquet: every exported record with
its kind, detail, where it goes and its content), ``discrepancies/`` (the records the new primary
lacks at the end: ``would-replay`` in a dry run, ``missing`` after ``--execute``),
``summary.json`` and ``report.html``.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import click
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from node.client import ClientSecurity
from spark_jobs.jobs._common import DISCREPANCY_COLUMNS, EXIT_BAD_INPUT, EXIT_FAILED, BadInput, Job, run_job
from spark_jobs.jobs._divergence import Export, find_exports, read_exports
from spark_jobs.jobs._replay_match import (
    EXPORT_ORDER,
    MISSING,
    PRESENT,
    REPLAYED,
    WOULD_REPLAY,
    Rules,
    classify,
)
from spark_jobs.jobs._security import command_config_option, describe
from spark_jobs.jobs._site import SiteUnreachable, describe_topics
from spark_jobs.schema import RECORD_SCHEMA
from spark_jobs.session import get_session
from spark_jobs.sources._kafka_options import security_options

JOB = "replay"
RECORDS = "records"
_PLAN = ".plan"  # the dry run's answer, kept on disk while --execute writes and reads back

EXIT_STATUS = """\b
Exit status:
  0  nothing to replay (every selected record is present), or --execute wrote every
     record the new primary lacked and read each one back
  1  a dry run found records to replay (run it again with --execute); or after --execute
     some written record was not found on the new primary; or the new primary's read held
     invalid batches (then --execute writes nothing: a damaged batch may hold the records)
  2  bad input: an option, an incomplete (no summary.json) or damaged export, a malformed
     line, a topic the export or the new primary does not have, --out holding a result
  3  the job could not run: the new primary unreachable, Spark or a write failed (run it
     again: records written before the failure are found present and not written twice)"""


@dataclass(frozen=True)
class Settings:
    exports: list[Export]
    site: str
    security: ClientSecurity  # how the new primary is reached (TLS, SASL)
    rules: Rules
    execute: bool
    present_from: str
    ranges: dict[tuple[str, int], tuple[int, int]]  # what to read of the new primary
    notes: list[str]


def _time(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """An ISO-8601 time (UTC when it names no zone) or milliseconds since the epoch -> ms."""
    if value is None:
        return None
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected ISO-8601 (2026-11-26T03:40:00Z) or milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _topics(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> frozenset[str] | None:
    names = {t.strip() for v in value for t in v.split(",") if t.strip()}
    if value and not names:
        raise click.BadParameter("no topic name given")
    return frozenset(names) if names else None


def _bootstrap(ctx: click.Context, param: click.Parameter, value: str) -> str:
    addresses = [a.strip() for a in value.split(",") if a.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"{address!r} is not host:port")
    if not addresses:
        raise click.BadParameter("no host:port given")
    return ",".join(addresses)


@click.command(JOB, epilog=EXIT_STATUS)
@click.option(
    "--export",
    "export_path",
    required=True,
    type=click.Path(path_type=Path),
    help="An export's epoch directory (DIR/<link>/epoch-<N>) or a directory holding one or more.",
)
@click.option(
    "--site", required=True, callback=_bootstrap, metavar="HOST:PORT,...", help="The new primary's bootstrap servers."
)
@command_config_option("--command-config", "security", help="--site is a secured listener")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Where the result goes.")
@click.option(
    "--topics",
    multiple=True,
    callback=_topics,
    metavar="T[,T...]",
    help="Replay only these topics (repeatable; default: every topic in the export).",
)
@click.option(
    "--from",
    "from_ms",
    callback=_time,
    metavar="TIME",
    help="Only records with a timestamp at or after TIME (ISO-8601, UTC if no zone; or ms).",
)
@click.option("--to", "to_ms", callback=_time, metavar="TIME", help="Only records with a timestamp before TIME.")
@click.option(
    "--include-transactional",
    is_flag=True,
    help="Replay records written in transactions too (the export cannot say whether they committed).",
)
@click.option(
    "--present-from",
    type=click.Choice(["cut", "earliest"]),
    default="cut",
    show_default=True,
    help="Where to look for records already present: from each partition's cut, or its log start.",
)
@click.option("--execute", is_flag=True, help="Write the records (default: a dry run that writes nothing).")
@click.option("--overwrite", is_flag=True, help="Replace a result already in --out.")
@click.option("--master", default=None, help="Spark master (default: spark-submit's, else local[*]).")
def command(
    export_path: Path,
    site: str,
    security: ClientSecurity | None,
    out: Path,
    topics: frozenset[str] | None,
    from_ms: int | None,
    to_ms: int | None,
    include_transactional: bool,
    present_from: str,
    execute: bool,
    overwrite: bool,
    master: str | None,
) -> None:
    """Replay a failover's divergence export into the new primary, skipping records it holds.

    A dry run unless --execute. Every exported record becomes a row of OUT/records (Parquet)
    with its kind: would-replay or replayed, present, filtered, missing.
    """
    if from_ms is not None and to_ms is not None and from_ms >= to_ms:
        _fail(f"--from {from_ms} is not before --to {to_ms}: no record could be selected", EXIT_BAD_INPUT)
    try:
        exports = find_exports(export_path)
    except BadInput as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    selection = Rules(topics, from_ms, to_ms, include_transactional)
    settings = _plan(exports, site, security or ClientSecurity(), selection, present_from=present_from, execute=execute)
    if execute:
        # A Spark task that is retried re-sends its records (the writer is idempotent within a task
        # only): fail the job instead; a second run writes only what is still missing.
        get_session(master=master, app_name=f"strait-audit-{JOB}", conf={"spark.task.maxFailures": "1"})
    run_job(JOB, out, lambda job: _run(job, settings), overwrite=overwrite, master=master)


def _fail(message: str, status: int) -> NoReturn:
    click.echo(f"error: {JOB}: {message}", err=True)
    sys.exit(status)


def _plan(
    exports: list[Export], site: str, security: ClientSecurity, selection: Rules, *, present_from: str, execute: bool
) -> Settings:
    """Check ``selection`` (topics, time range, transactions) against the export and the new
    primary; decide where records go, how they are compared and what to read. Exits (2, 3) on
    a topic the export or the site lacks, and on a site that does not answer."""
    topics = selection.topics
    exported: dict[str, int] = {}  # topic -> records in the export
    top: dict[str, int] = {}  # topic -> highest partition the export names
    for export in exports:
        for entry in export.partitions:
            exported[entry.topic] = exported.get(entry.topic, 0) + entry.records
            top[entry.topic] = max(top.get(entry.topic, 0), entry.partition)
    if topics is not None and topics - set(exported):
        unknown = ", ".join(sorted(topics - set(exported)))
        _fail(
            f"--topics {unknown}: not in the export (it holds {', '.join(sorted(exported)) or 'no topic'})",
            EXIT_BAD_INPUT,
        )
    wanted = sorted(t for t, n in exported.items() if n and (topics is None or t in topics))
    try:
        described = describe_topics(site, wanted, security=security)
    except SiteUnreachable as exc:
        _fail(str(exc), EXIT_FAILED)
    absent = [t for t in wanted if described[t] is None]
    if absent:
        _fail(
            f"--site {site} has no topic {', '.join(absent)}: create it (the export holds "
            f"{', '.join(f'{t}: {exported[t]} records' for t in absent)}) or leave it out with --topics",
            EXIT_BAD_INPUT,
        )
    on_site = {t: d for t, d in described.items() if d is not None}
    by_key = {t: len(d.partitions) for t, d in on_site.items() if len(d.partitions) <= top[t]}
    notes = [
        f"{t}: the export names partitions up to {top[t]}, the new primary has {n}: "
        "records are placed by key (murmur2, as Kafka's producers) and looked for in whole partitions"
        for t, n in sorted(by_key.items())
    ]
    cuts: dict[tuple[str, int], int] = {}  # of the partitions holding exported records
    for export in exports:
        for entry in export.partitions:
            tp = (entry.topic, entry.partition)
            if entry.records:
                cuts[tp] = min(entry.cut, cuts.get(tp, entry.cut))
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for t, d in sorted(on_site.items()):
        for p, (start, end) in sorted(d.partitions.items()):
            if t in by_key:
                ranges[(t, p)] = (start, end)
                continue
            if (t, p) not in cuts:
                continue
            cut = cuts[(t, p)]
            if present_from == "cut" and start <= cut <= end:
                ranges[(t, p)] = (cut, end)
            else:
                ranges[(t, p)] = (start, end)
                if present_from == "cut":
                    notes.append(
                        f"{t}-{p}: the cut {cut} is outside the new primary's log [{start}, {end}): "
                        "looked for present records from its start"
                    )
    log_append = frozenset(t for t, d in on_site.items() if d.log_append_time)
    notes += [f"{t}: LogAppendTime on the new primary: timestamps are not compared" for t in sorted(log_append)]
    rules = replace(selection, by_key=by_key, log_append=log_append)
    return Settings(exports, site, security, rules, execute, present_from, ranges, notes)


# -- the Spark part ---------------------------------------------------------------------------------


def read_site(
    spark: SparkSession, site: str, security: ClientSecurity, ranges: dict[tuple[str, int], tuple[int, int]]
) -> DataFrame:
    """The new primary's records in ``ranges`` ([start, end) per partition) through ``strait-kafka``."""
    wanted = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    if not wanted:
        return spark.createDataFrame([], RECORD_SCHEMA)
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for (topic, p), (start, end) in sorted(wanted.items()):
        assign.setdefault(topic, []).append(p)
        starting.setdefault(topic, {})[str(p)] = start
        ending.setdefault(topic, {})[str(p)] = end
    return (
        spark.read.format("strait-kafka")
        .option("kafka.bootstrap.servers", site)
        .options(**security_options(security))
        .option("assign", _json(assign))
        .option("startingOffsets", _json(starting))
        .option("endingOffsets", _json(ending))
        .load()
    )


def write_site(records: DataFrame, site: str, security: ClientSecurity, tasks: int) -> None:
    """Produce ``records`` (``topic``, ``targetPartition``, ``key``, ``value``, ``headers``,
    ``timestampMs``) through ``strait-kafka``'s idempotent writer: each target partition's records
    from one task, in export order, in at most ``tasks`` tasks."""
    ordered = records.repartition(max(1, tasks), "topic", "targetPartition").sortWithinPartitions(
        "topic", "targetPartition", *EXPORT_ORDER
    )
    rows = ordered.select(
        "topic",
        F.col("targetPartition").alias("partition"),
        "key",
        "value",
        "headers",
        F.timestamp_millis(F.col("timestampMs")).alias("timestamp"),
    )
    writer = rows.write.format("strait-kafka").option("kafka.bootstrap.servers", site)
    writer.options(**security_options(security)).mode("append").save()


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _run(job: Job, settings: Settings) -> dict[str, Any]:
    spark = job.spark
    rules = settings.rules
    job.inputs = {
        "source": [str(e.directory) for e in settings.exports],
        "target": settings.site,
        "target_security": describe(settings.security),
        "link": ",".join(sorted({e.link for e in settings.exports})),
        "exports": [e.describe() for e in settings.exports],
        "topics": sorted(rules.topics) if rules.topics is not None else "all",
        "from_ms": rules.from_ms,
        "to_ms": rules.to_ms,
        "include_transactional": rules.include_transactional,
        "present_from": settings.present_from,
        "execute": settings.execute,
    }
    job.notes.extend(settings.notes)
    records = read_exports(spark, settings.exports)
    target = read_site(spark, settings.site, settings.security, settings.ranges)
    read = target.groupBy("valid", "error").count().collect()
    invalid = {r["error"] or "invalid": r["count"] for r in read if not r["valid"]}
    target_records = sum(r["count"] for r in read if r["valid"])
    plan_path = job.out.path(_PLAN if settings.execute else RECORDS)
    classify(records, target, rules).write.parquet(plan_path)
    plan = spark.read.parquet(plan_path)
    pending = plan.where(F.col("kind") == WOULD_REPLAY).count()
    final = plan
    outcome = (
        "nothing to replay" if not pending else f"dry run: {pending} record(s) would be written to {settings.site}"
    )
    if settings.execute:
        records_path = job.out.path(RECORDS)
        if pending and not invalid:
            pending_rows = plan.where(F.col("kind") == WOULD_REPLAY)
            write_site(pending_rows, settings.site, settings.security, len(settings.ranges))
            _read_back(spark, plan, settings).write.parquet(records_path)
            shutil.rmtree(plan_path)
            outcome = f"wrote {pending} record(s) to {settings.site}"
        else:
            Path(plan_path).rename(records_path)
        final = spark.read.parquet(records_path)
        if pending and invalid:
            outcome = (
                f"nothing written: the new primary's read held {sum(invalid.values())} invalid batch row(s), "
                "which may hold records this job would otherwise write twice"
            )
    elif pending:
        outcome += "; run again with --execute to write them"
    job.notes.append(outcome)
    lacking = final.where(F.col("kind").isin(WOULD_REPLAY, MISSING))
    counts = _counts(final)
    kinds = {k for per in counts.values() for k in per}
    totals = {
        "export_records": sum(e.records for e in settings.exports),
        "target_records": target_records,
        **{k.replace("-", "_"): sum(per.get(k, 0) for per in counts.values()) for k in sorted(kinds)},
    }
    discrepancies = lacking.select(
        *DISCREPANCY_COLUMNS,
        "targetPartition",
        F.timestamp_millis(F.col("timestampMs")).alias("timestamp"),
        "key",
        "epoch",
        "link",
        "export",
    )
    summary = job.finish(discrepancies, totals=totals, partitions=_partitions(settings, counts), invalid=invalid)
    click.echo(f"{JOB}: {outcome} (" + ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in totals.items()) + ")")
    return summary


def _read_back(spark: SparkSession, plan: DataFrame, settings: Settings) -> DataFrame:
    """After the write: each record as the new primary now shows it (replayed, or missing)."""
    topics = sorted({t for t, _ in settings.ranges})
    now = describe_topics(settings.site, topics, security=settings.security)
    ranges = {}
    for (t, p), (start, _end) in settings.ranges.items():
        described = now[t]
        ranges[(t, p)] = (start, described.partitions[p][1] if described is not None else start)
    again = classify(
        plan.withColumnRenamed("kind", "planKind").drop("detail", "targetPartition", "targetOffset", "contentHash"),
        read_site(spark, settings.site, settings.security, ranges),
        settings.rules,
        pending=MISSING,
    )
    was_pending = F.col("planKind") == WOULD_REPLAY
    written = was_pending & (F.col("kind") == PRESENT)
    kind = F.when(written, F.lit(REPLAYED)).when(was_pending, F.col("kind")).otherwise(F.col("planKind"))
    detail = (
        F.when(
            written,
            F.concat(F.lit("written: "), F.regexp_replace(F.col("detail"), "^on the new primary: ", "")),
        )
        .when(was_pending, F.lit("written, but not found when the new primary was read back"))
        .otherwise(F.col("detail"))
    )
    return again.withColumns({"kind": kind, "detail": detail}).drop("planKind")


def _counts(records: DataFrame) -> dict[tuple[str, int], dict[str, int]]:
    counts: dict[tuple[str, int], dict[str, int]] = {}
    for row in records.groupBy("topic", "partition", "kind").count().collect():
        counts.setdefault((row["topic"], row["partition"]), {})[row["kind"]] = row["count"]
    return counts


def _partitions(settings: Settings, counts: dict[tuple[str, int], dict[str, int]]) -> list[dict[str, Any]]:
    """Per exported partition: its records by kind, its range in the export(s) and what was read."""
    spans: dict[tuple[str, int], list[int]] = {}
    exported: dict[tuple[str, int], int] = {}
    for export in settings.exports:
        for entry in export.partitions:
            tp = (entry.topic, entry.partition)
            span = spans.setdefault(tp, [entry.cut, entry.end])
            span[0], span[1] = min(span[0], entry.cut), max(span[1], entry.end)
            exported[tp] = exported.get(tp, 0) + entry.records
    out = []
    for tp in sorted(spans):
        per = {k.replace("-", "_"): n for k, n in sorted(counts.get(tp, {}).items())}
        ranges: dict[str, list[int]] = {"export": spans[tp]}
        if tp[0] not in settings.rules.by_key and tp in settings.ranges:
            ranges["target"] = list(settings.ranges[tp])
        out.append(
            {"topic": tp[0], "partition": tp[1], "counts": {"export_records": exported[tp], **per}, "ranges": ranges}
        )
    return out


def main(argv: list[str] | None = None) -> None:
    """``spark-submit spark_jobs/jobs/replay.py ...`` and ``python -m spark_jobs.jobs.replay ...``."""
    command.main(args=argv, prog_name=JOB)


if __name__ == "__main__":
    main()
