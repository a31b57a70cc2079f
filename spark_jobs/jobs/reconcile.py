"""``reconcile``: a DR link's source site against its target site, record by record.

Run it as ``python -m spark_jobs.jobs.reconcile ...``, ``spark-submit spark_jobs/jobs/reconcile.py
...`` or ``strait audit reconcile ...`` (which turns ``--topology FILE --link NAME`` into the
options below). Each side is a live site or its segment files; per topic-partition the job
finds records missing on the target, extra on it, and different at the same offset
(offset-preserving links), or unmatched by content inside the offset syncs' copy window (MM2
links). The rules are in :mod:`._reconcile_compare`; offset-preserving links first match whole
batches by digest (:mod:`._reconcile_batches`) unless ``--by-record``; ``--continuous`` is
:mod:`._reconcile_stream`.

A live side behind a TLS or SASL listener is reached as ``--command-config FILE`` (both sides)
or ``--source-command-config`` / ``--target-command-config`` (one) say: Kafka client properties,
read by :mod:`._security`; ``strait audit reconcile --topology`` fills them in from each site's
``tls`` and ``sasl``.

Order of reads (live sites): the target's log ranges first, then the source's, so a record the
mirror copies while the job runs is at worst counted ``behind``, never ``missing``. MM2 links
read the offset syncs before both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

# Absolute imports: spark-submit runs this file as a script (``__main__``, no package).
from spark_jobs.jobs._common import BadInput, Job, run_job
from spark_jobs.jobs._reconcile_batches import (
    BatchPass,
    batch_pass,
    clip,
    describe,
    extend,
    recount,
    superseded_from,
)
from spark_jobs.jobs._reconcile_compare import (
    AHEAD,
    BEHIND,
    COUNT_KEYS,
    DISCREPANCY_SCHEMA,
    MATCHED,
    MM2_COUNT_KEYS,
    Comparison,
    CopyWindow,
    Ranges,
    compare_offsets,
)
from spark_jobs.jobs._reconcile_mm2 import compare_mm2, copy_window, offset_syncs_topic, read_syncs
from spark_jobs.jobs._reconcile_options import Options
from spark_jobs.jobs._reconcile_sides import TP, Side, is_internal, parse_side
from spark_jobs.jobs._reconcile_stream import follow, resumes
from spark_jobs.jobs._security import command_config_option, either

JOB = "reconcile"
_SYNCS_PREFIX, _SYNCS_SUFFIX = "mm2-offset-syncs.", ".internal"


def source_topics(opts: Options) -> dict[str, list[int]]:
    """The topics to compare (``--topics``, or every non-internal topic of the source) with the
    source's partitions. BadInput naming ``--topics`` for a topic the source lacks."""
    held = opts.source_held()
    if opts.topics is None:
        chosen = {t: ps for t, ps in held.items() if not is_internal(t)}
        if opts.mode == "mm2" and opts.target_alias:
            # MM2 never copies a topic back to the site it came from (docs/mm2.md: cycles).
            chosen = {t: ps for t, ps in chosen.items() if opts.target_alias not in t.split(".")[:-1]}
        return chosen
    unknown = [t for t in opts.topics if t not in held]
    if unknown:
        raise BadInput(f"--topics: {', '.join(unknown)}: no such topic on the source ({opts.source.describe})")
    return {t: held[t] for t in opts.topics}


def target_name(opts: Options, topic: str) -> str:
    return f"{opts.source_alias}.{topic}" if opts.mode == "mm2" else topic


def find_target_alias(opts: Options) -> str:
    """``--target-alias``, or the one alias the source's offset-syncs topics name."""
    if opts.target_alias:
        return opts.target_alias
    found = sorted(
        t[len(_SYNCS_PREFIX) : -len(_SYNCS_SUFFIX)]
        for t in opts.source_held()
        if t.startswith(_SYNCS_PREFIX) and t.endswith(_SYNCS_SUFFIX)
    )
    if len(found) != 1:
        held = ", ".join(found) if found else "none"
        raise BadInput(
            f"--target-alias: needed to find the offset syncs (mm2-offset-syncs.<target alias>.internal on "
            f"the source); the source holds {held}"
        )
    return found[0]


def reconcile(job: Job, opts: Options) -> dict[str, Any]:
    """The batch job: read both sides over their ranges, compare, write the result."""
    spark = job.spark
    # Cached joins keep their shuffle's partition count unless AQE may coalesce them (tiny
    # partitions cost more than the data in them).
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
    if opts.mode == "mm2":
        opts.target_alias = find_target_alias(opts)
    job.inputs = opts.inputs()
    topics = source_topics(opts)
    job.inputs["topics"] = sorted(topics)
    if opts.continuous:
        return follow(job, opts, topics)
    windows: dict[TP, CopyWindow | None] = {}
    syncs = None
    if opts.mode == "mm2":
        assert opts.target_alias is not None
        syncs_topic = offset_syncs_topic(opts.target_alias)
        if syncs_topic in opts.source_held():
            rows = opts.source.read_topic(spark, syncs_topic).filter("valid").orderBy("offset").collect()
            syncs = read_syncs((r["key"], r["value"]) for r in rows)
        else:
            job.notes.append(f"the source has no {syncs_topic}: nothing counts as copied")
    target_held = opts.target.partitions()
    names = {t: target_name(opts, t) for t in topics}
    wanted_target = {names[t]: target_held[names[t]] for t in topics if names[t] in target_held}
    for t in sorted(topics):
        if names[t] not in target_held:
            job.notes.append(f"topic {names[t]} does not exist on the target: all of {t} is behind")
    t_ranges = opts.target.ranges(wanted_target)
    s_ranges = opts.source.ranges(topics, committed=opts.mode == "mm2")
    prefix = f"{opts.source_alias}." if opts.mode == "mm2" else ""
    t_by_source = {(t[len(prefix) :], p): r for (t, p), r in t_ranges.items()}
    keys = sorted(set(s_ranges) | set(t_by_source))
    ranges = {tp: Ranges(s_ranges.get(tp, (0, 0)), t_by_source.get(tp, (0, 0))) for tp in keys}
    if opts.mode == "mm2" and opts.source.kind == "segments":
        job.notes.append(
            "mm2 from segment files: records of aborted transactions on the source (if any) are read (files have no "
            "read_committed) and, as MM2 never copies them, are reported missing"
        )

    def records() -> tuple[Any, Any]:
        committed = opts.mode == "mm2"
        return opts.source.read(spark, s_ranges, committed=committed), opts.target.read(spark, t_ranges)

    if opts.mode == "mm2":
        assert opts.source_alias is not None
        for tp in keys:
            life = syncs.by_partition.get(tp, []) if syncs is not None else []
            windows[tp] = copy_window(life, *(r[0] for r in (ranges[tp].source, ranges[tp].target)))
        if syncs is not None and syncs.malformed:
            job.notes.append(f"{syncs.malformed} offset sync(s) did not decode and were skipped")
        no_window = [f"{t}-{p}" for t, p in keys if windows[(t, p)] is None]
        if no_window:
            job.notes.append(f"no offset sync for {', '.join(no_window[:20])}: nothing of it counts as copied")
        comparison = compare_mm2(
            *records(), ranges, windows, opts.source_alias, require_caught_up=opts.require_caught_up
        )
    elif opts.by_record:
        comparison = compare_offsets(*records(), ranges, require_caught_up=opts.require_caught_up)
    else:
        comparison = by_batch(job, opts, ranges, s_ranges, t_ranges) or compare_offsets(
            *records(), ranges, require_caught_up=opts.require_caught_up
        )
    present = (set(s_ranges), set(t_by_source))
    return finish(job, opts, comparison, ranges, present, windows)


def by_batch(
    job: Job,
    opts: Options,
    ranges: dict[TP, Ranges],
    s_ranges: dict[TP, tuple[int, int]],
    t_ranges: dict[TP, tuple[int, int]],
) -> Comparison | None:
    """An offset-preserving link: the batch pass first (:mod:`._reconcile_batches`), then records
    only where batches differ. None: too many batches differ, compare every record."""
    spark = job.spark
    bp = batch_pass(
        opts.source.read(spark, s_ranges, rows="batches"), opts.target.read(spark, t_ranges, rows="batches"), ranges
    )
    if bp is None:
        job.notes.append("the sites' batches differ too much to compare batch by batch: every record was compared")
        return None
    comparison = _records(job, opts, ranges, s_ranges, t_ranges, bp)
    starts = superseded_from(comparison)
    if starts:  # a later record of the key may be in an agreed batch: compare the rest by record
        comparison.release()
        bp = recount(bp, extend(bp.slow, starts, ranges))
        comparison = _records(job, opts, ranges, s_ranges, t_ranges, bp)
    for tp, n in bp.agreed.items():
        counts = comparison.counts.setdefault(tp, dict.fromkeys(COUNT_KEYS, 0))
        for key in ("source_records", "target_records", "compared", MATCHED):
            counts[key] += n
    comparison.cached.append(bp.cached)
    d = describe(bp)
    job.inputs["compared_by"] = "batches, then records where batches differ"
    job.notes.append(
        f"{d['agreed_records']} record(s) were matched in batches identical on both sides (same offsets, digest and "
        f"valid CRCs) without being decoded; {d['record_offsets']} offset(s) in {d['record_ranges']} range(s) were "
        "compared record by record"
    )
    return comparison


def _records(
    job: Job,
    opts: Options,
    ranges: dict[TP, Ranges],
    s_ranges: dict[TP, tuple[int, int]],
    t_ranges: dict[TP, tuple[int, int]],
    bp: BatchPass,
) -> Comparison:
    if not any(bp.slow.values()):  # every batch agreed: nothing to decode
        counts = {tp: dict.fromkeys(COUNT_KEYS, 0) for tp in ranges}
        return Comparison(job.spark.createDataFrame([], DISCREPANCY_SCHEMA), counts)
    source = _read_spans(job.spark, opts.source, s_ranges, bp)
    target = _read_spans(job.spark, opts.target, t_ranges, bp)
    return compare_offsets(source, target, ranges, require_caught_up=opts.require_caught_up)


def _read_spans(spark: Any, side: Side, side_ranges: dict[TP, tuple[int, int]], bp: BatchPass) -> Any:
    """The side's records in the pass's slow ranges: one read per k-th range of every partition."""
    spans = {tp: clip(bp.slow.get(tp, []), *r) for tp, r in side_ranges.items()}
    reads = [
        side.read(spark, {tp: s[k] for tp, s in spans.items() if len(s) > k})
        for k in range(max((len(s) for s in spans.values()), default=0))
    ]
    if not reads:
        return side.read(spark, {})
    out = reads[0]
    for df in reads[1:]:
        out = out.unionByName(df)
    return out


def finish(
    job: Job,
    opts: Options,
    comparison: Comparison,
    ranges: dict[TP, Ranges],
    present: tuple[set[TP], set[TP]],
    windows: dict[TP, CopyWindow | None],
) -> dict[str, Any]:
    """The summary's partitions, totals and notes; writes the result through :meth:`Job.finish`."""
    keys = COUNT_KEYS + (MM2_COUNT_KEYS if opts.mode == "mm2" else ())
    partitions = []
    totals = dict.fromkeys(keys, 0)
    for tp in sorted(set(ranges) | set(comparison.counts)):
        counts = {k: comparison.counts.get(tp, {}).get(k, 0) for k in keys}
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
        r = ranges.get(tp)
        entry: dict[str, Any] = {
            "topic": tp[0],
            "partition": tp[1],
            "counts": counts,
            "ranges": {
                "source": list(r.source) if r is not None and tp in present[0] else None,
                "target": list(r.target) if r is not None and tp in present[1] else None,
            },
        }
        if opts.mode == "mm2":
            w = windows.get(tp)
            entry["target_topic"] = target_name(opts, tp[0])
            entry["window"] = None if w is None else {"source": list(w.source), "target": list(w.target)}
        partitions.append(entry)
    totals["partitions"] = len(partitions)
    if totals[BEHIND] and not opts.require_caught_up:
        job.notes.append(
            f"{totals[BEHIND]} source record(s) not mirrored yet (behind): not discrepancies without "
            "--require-caught-up"
        )
    if totals.get(AHEAD) and not opts.require_caught_up:
        job.notes.append(
            f"{totals[AHEAD]} target record(s) past the source's log end (ahead): the source lost records "
            "the mirror had copied, or its files lack their tail"
        )
    for e in comparison.invalid_examples:
        job.notes.append(
            f"invalid row on the {e['side']}: {e['topic']}-{e['partition']} at offset {e['offset']}: {e['error']}"
        )
    try:
        return job.finish(comparison.discrepancies, totals=totals, partitions=partitions, invalid=comparison.invalid)
    finally:
        comparison.release()


def _topics(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [t.strip() for t in value.split(",") if t.strip()]
    if not names:
        raise click.UsageError(f"--topics: {value!r} names no topic", ctx)
    return list(dict.fromkeys(names))


SIDE_HELP = (
    "a live site as host:port,... (read with strait-kafka), or segment paths (log dirs, a node's data dir, "
    "partition dirs, .log files; read with strait-segments): a value whose entries all exist is paths"
)


@click.command(name=JOB, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--source", help=f"The link's source (required): {SIDE_HELP}.")
@click.option("--target", help="The link's target (required), as --source.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Result directory (summary.json, ...).")
@click.option("--topics", callback=_topics, help="Comma-separated source topics [default: every non-internal one].")
@click.option(
    "--mode",
    type=click.Choice(["offset", "mm2"]),
    default="offset",
    show_default=True,
    help="offset: offset-preserving link (same offsets); mm2: MirrorMaker-2-compatible (<alias>.<topic>, by content).",
)
@click.option("--source-alias", help="mm2: the source site's alias (remote topics are <alias>.<topic>).")
@click.option(
    "--target-alias",
    help="mm2: the target site's alias (offset syncs in mm2-offset-syncs.<alias>.internal on the source) "
    "[default: the only such topic the source has].",
)
@command_config_option("--command-config", help="Both live sides are secured listeners")
@command_config_option("--source-command-config", help="The live --source only (wins over --command-config)")
@command_config_option("--target-command-config", help="The live --target only (wins over --command-config)")
@click.option("--link", help="The link's name (recorded in the summary).")
@click.option("--overwrite", is_flag=True, help="Replace a result already in --out.")
@click.option("--master", help="Spark master [default: spark-submit's, else local[*]].")
@click.option(
    "--require-caught-up",
    is_flag=True,
    help="Records the mirror has not copied yet (behind) or the source lacks past its end (ahead) are discrepancies.",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds a live site may take."
)
@click.option(
    "--by-record",
    is_flag=True,
    help="Decode and compare every record, even in batches identical on both sides (offset mode; "
    "slower, the same answer).",
)
@click.option("--continuous", is_flag=True, help="Follow the target as it is mirrored (Structured Streaming).")
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path, file_okay=False),
    help="--continuous: checkpoint dir (Spark's offsets and the running result); a restart resumes from it.",
)
@click.option(
    "--trigger-seconds",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="--continuous: seconds between micro-batches.",
)
@click.option(
    "--until-idle",
    type=click.FloatRange(min=0.0),
    help="--continuous: stop after this many seconds without new target records [default: run until stopped].",
)
@click.pass_context
def command(ctx: click.Context, /, out: Path, overwrite: bool, master: str | None, timeout: float, **kw: Any) -> None:
    """Reconcile a link's source and target sites: records missing on the target, extra on it,
    different at the same offset (offset-preserving links) or unmatched by content (MM2 links).

    Exit status: 0 clean, 1 discrepancies or invalid rows found, 2 bad input, 3 the job could not run.
    """
    # Checked here, not by click: ``strait audit reconcile --topology FILE --link NAME`` fills
    # --source and --target (and their security) in from the topology after click has parsed
    # the command line.
    shared = kw.pop("command_config")
    for side in ("source", "target"):
        if kw[side] is None:
            raise click.UsageError(f"--{side}: required (host:port,... of a site, or segment paths)", ctx)
        own = kw.pop(f"{side}_command_config")
        try:
            kw[side] = parse_side(f"--{side}", kw[side], timeout_s=timeout, security=either(own, shared))
        except BadInput as exc:
            raise click.UsageError(str(exc), ctx) from None
        if own is not None and kw[side].kind != "kafka":
            raise click.UsageError(f"--{side}-command-config: --{side} is segment paths, read without a site", ctx)
    if shared is not None and kw["source"].kind != "kafka" and kw["target"].kind != "kafka":
        raise click.UsageError("--command-config: both sides are segment paths, read without a site", ctx)
    if kw["mode"] == "mm2" and not kw["source_alias"]:
        raise click.UsageError("--source-alias: required with --mode mm2 (remote topics are <alias>.<topic>)", ctx)
    if kw["mode"] != "mm2" and (kw["source_alias"] or kw["target_alias"]):
        raise click.UsageError("--source-alias/--target-alias: only with --mode mm2", ctx)
    if kw["continuous"]:
        if kw["checkpoint"] is None:
            raise click.UsageError("--checkpoint: required with --continuous", ctx)
        if kw["mode"] != "offset":
            raise click.UsageError("--continuous: only offset-preserving links (--mode offset)", ctx)
        if kw["target"].kind != "kafka":
            raise click.UsageError("--continuous: --target must be a live site (host:port,...)", ctx)
    else:
        for name in ("checkpoint", "until_idle"):
            if kw[name] is not None:
                raise click.UsageError(f"--{name.replace('_', '-')}: only with --continuous", ctx)
    opts = Options(**kw)
    if opts.continuous:
        overwrite = overwrite or resumes(opts, out)
    run_job(JOB, out, lambda job: reconcile(job, opts), overwrite=overwrite, master=master)


def main(argv: list[str] | None = None) -> None:
    """spark-submit's entry point (and ``python -m spark_jobs.jobs.reconcile``)."""
    command.main(args=argv, prog_name="reconcile")


if __name__ == "__main__":
    main()
