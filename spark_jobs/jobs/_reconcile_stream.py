"""``reconcile --continuous``: follow an offset-preserving link's target as records are mirrored.

A Structured Streaming query reads the target's topics with the ``strait-kafka`` stream reader
from their earliest offsets on; each micro-batch holds the records mirrored since the last one.
For each partition in a micro-batch, the offsets ``[checked, batch end)`` are compared with the
source, read (batch) over the same offsets: ``checked`` is where the previous micro-batch
stopped (the target's log start at first), ``batch end`` the offset after the micro-batch's last
record. Every target record of that range is in this micro-batch (the stream reads each offset
once, in order), so the comparison is the batch job's, per range (:func:`compare_offsets`), and a
record missing on the target is found as soon as a later one is mirrored.

The running result lives in the checkpoint dir, next to Spark's own checkpoint (``stream/``):

- ``discrepancies/batch-<id>/``: each micro-batch's discrepancy rows (Parquet);
- ``reconcile-state.json``: the last micro-batch applied, each partition's ``checked`` offset and
  counts, invalid rows by error, and what the checkpoint is for (sides, topics, output dir).
  Written atomically after the micro-batch's rows, so a micro-batch that Spark runs again after
  a crash is either skipped (it was applied) or redone from scratch (its rows are overwritten).

After every micro-batch with records ``--out`` gets a fresh result (``summary.json`` of
everything so far, all discrepancies, the report). ``--until-idle S`` stops the query once no
record arrived for S seconds; otherwise it runs until interrupted.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..sources._kafka_options import security_options
from ._common import BadInput, Job
from ._reconcile_compare import COUNT_KEYS, DISCREPANCY_COLUMNS, DISCREPANCY_SCHEMA, Comparison, Ranges, compare_offsets
from ._reconcile_options import Options
from ._reconcile_sides import TP

STATE = "reconcile-state.json"
STATE_FORMAT = 1
LAG = "lag_offsets"  # continuous only: the source's log end minus the offset checked up to


def _identity(opts: Options, out: Path) -> dict[str, Any]:
    """What a checkpoint is for (not the topics: a topic created later joins the stream)."""
    return {"source": opts.source.value, "target": opts.target.value, "out": str(out.absolute())}


def load_state(checkpoint: Path) -> dict[str, Any] | None:
    path = checkpoint / STATE
    if not path.exists():
        return None
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"--checkpoint {checkpoint}: {STATE} cannot be read ({exc})") from None
    if state.get("format") != STATE_FORMAT:
        raise BadInput(f"--checkpoint {checkpoint}: {STATE} has format {state.get('format')!r}, not {STATE_FORMAT}")
    return state


def resumes(opts: Options, out: Path) -> bool:
    """True when ``--checkpoint`` holds a running result written to this ``--out``: the
    restarted query replaces that result (it continues it) without ``--overwrite``."""
    assert opts.checkpoint is not None
    state = load_state(opts.checkpoint)
    return state is not None and state["identity"]["out"] == str(out.absolute())


def _save_state(checkpoint: Path, state: dict[str, Any]) -> None:
    tmp = checkpoint / f".{STATE}.tmp"
    with tmp.open("w") as f:
        json.dump(state, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(checkpoint / STATE)


def _key(tp: TP) -> str:
    return f"{tp[0]}/{tp[1]}"


def _tp(key: str) -> TP:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


class Follower:
    """The foreachBatch function and the running result it keeps."""

    def __init__(self, job: Job, opts: Options, topics: list[str]) -> None:
        assert opts.checkpoint is not None
        self.job, self.opts, self.topics = job, opts, topics
        self.checkpoint = opts.checkpoint
        self.identity = _identity(opts, job.out.out)
        state = load_state(self.checkpoint)
        if state is not None and state["identity"] != self.identity:
            raise BadInput(
                f"--checkpoint {self.checkpoint}: it follows another reconcile ({state['identity']}); "
                "use a new checkpoint dir for these options"
            )
        self.state: dict[str, Any] = state or {
            "format": STATE_FORMAT,
            "identity": self.identity,
            "batch": -1,
            "checked": {},
            "counts": {},
            "ranges": {},
            "invalid": {},
        }
        self.summary: dict[str, Any] | None = None
        self.last_data = time.monotonic()  # when the last micro-batch with records ended (or the start)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if batch_id <= self.state["batch"]:
            return  # applied before a restart: Spark runs its last micro-batch again
        df = df.persist()
        try:
            spans = {
                (r["topic"], r["partition"]): (r["lo"], r["hi"])
                for r in df.filter(F.col("offset").isNotNull())
                .groupBy("topic", "partition")
                .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
                .collect()
            }
            if spans:
                self._compare(df, batch_id, spans)
        finally:
            df.unpersist()
        self.state["batch"] = batch_id
        _save_state(self.checkpoint, self.state)
        if spans or self.summary is None:
            self.summary = self._write_result()
        if spans:
            self.last_data = time.monotonic()

    def _compare(self, df: DataFrame, batch_id: int, spans: dict[TP, tuple[int, int]]) -> None:
        spark = self.job.spark
        checked = self.state["checked"]
        fresh = {tp: [tp[1]] for tp in spans if _key(tp) not in checked}
        if fresh:
            by_topic: dict[str, list[int]] = {}
            for t, p in fresh:
                by_topic.setdefault(t, []).append(p)
            starts = self.opts.target.ranges(by_topic)
            for tp in fresh:
                checked[_key(tp)] = min(starts.get(tp, (spans[tp][0], 0))[0], spans[tp][0])
        by_topic = {}
        for t, p in spans:
            by_topic.setdefault(t, []).append(p)
        source = self.opts.source.ranges(by_topic)
        ranges: dict[TP, Ranges] = {}
        reads: dict[TP, tuple[int, int]] = {}
        for tp, (_, last) in spans.items():
            lo, hi = checked[_key(tp)], last + 1
            s = source.get(tp, (0, 0))
            ranges[tp] = Ranges(source=s, target=(lo, hi))
            if tp in source:
                start = max(lo, s[0])
                reads[tp] = (start, max(start, min(hi, s[1])))
        comparison = compare_offsets(self.opts.source.read(spark, reads), df, ranges)
        try:
            path = self.checkpoint / "discrepancies" / f"batch-{batch_id:010d}"
            comparison.discrepancies.select(*DISCREPANCY_COLUMNS).write.mode("overwrite").parquet(str(path))
            self._accumulate(comparison, ranges, source)
        finally:
            comparison.release()
        for tp, (_, last) in spans.items():
            checked[_key(tp)] = last + 1

    def _accumulate(self, comparison: Comparison, ranges: dict[TP, Ranges], source: dict[TP, tuple[int, int]]) -> None:
        counts, kept = self.state["counts"], self.state["ranges"]
        for tp, c in comparison.counts.items():
            mine = counts.setdefault(_key(tp), dict.fromkeys(COUNT_KEYS, 0))
            for k, v in c.items():
                mine[k] = mine.get(k, 0) + v
        for tp, r in ranges.items():
            first = kept.get(_key(tp), {}).get("target", [r.target[0], r.target[0]])[0]
            kept[_key(tp)] = {"source": list(r.source) if tp in source else None, "target": [first, r.target[1]]}
        for error, n in comparison.invalid.items():
            self.state["invalid"][error] = self.state["invalid"].get(error, 0) + n
        for e in comparison.invalid_examples:
            if len(self.job.notes) < 50:
                self.job.notes.append(
                    f"invalid row on the {e['side']}: {e['topic']}-{e['partition']} at offset {e['offset']}: "
                    f"{e['error']}"
                )

    def _write_result(self) -> dict[str, Any]:
        spark = self.job.spark
        found = sorted((self.checkpoint / "discrepancies").glob("batch-*"))
        rows = (
            spark.read.schema(DISCREPANCY_SCHEMA).parquet(*(str(p) for p in found)).select(*DISCREPANCY_COLUMNS)
            if found
            else spark.createDataFrame([], DISCREPANCY_SCHEMA)
        )
        partitions = []
        totals = dict.fromkeys((*COUNT_KEYS, LAG), 0)
        for key in sorted(self.state["counts"]):
            tp = _tp(key)
            counts = dict(self.state["counts"][key])
            r = self.state["ranges"].get(key, {})
            src = r.get("source")
            counts[LAG] = max(0, src[1] - self.state["checked"][key]) if src else 0
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
            partitions.append({"topic": tp[0], "partition": tp[1], "counts": counts, "ranges": r})
        totals["partitions"] = len(partitions)
        totals["micro_batches"] = self.state["batch"] + 1
        self.job.out.staging.mkdir(parents=True, exist_ok=True)  # each result is staged afresh
        return self.job.finish(rows, totals=totals, partitions=partitions, invalid=dict(self.state["invalid"]))


def follow(job: Job, opts: Options, topics: dict[str, list[int]]) -> dict[str, Any]:
    """Run the streaming query until ``--until-idle`` seconds pass without records (or forever);
    returns the last summary written."""
    assert opts.checkpoint is not None
    opts.checkpoint.mkdir(parents=True, exist_ok=True)
    follower = Follower(job, opts, sorted(topics))
    job.notes.append(
        "continuous: each micro-batch of mirrored target records is compared with the source over the same "
        f"offsets; running result in {opts.checkpoint}"
    )
    if not topics:
        raise BadInput(f"--topics: the source ({opts.source.describe}) has no topic to follow")
    stream = (
        job.spark.readStream.format("strait-kafka")
        .option("kafka.bootstrap.servers", opts.target.value)
        .options(**security_options(opts.target.security))
        .option("subscribe", ",".join(sorted(topics)))
        .option("startingOffsets", "earliest")
        .option("kafka.request.timeout.ms", str(int(opts.target.timeout_s * 1000)))
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(follower)
        .option("checkpointLocation", str(opts.checkpoint / "stream"))
        .trigger(processingTime=f"{opts.trigger_seconds} seconds")
        .queryName("strait-reconcile")
        .start()
    )
    try:
        while not query.awaitTermination(0.5):
            quiet = time.monotonic() - follower.last_data
            if opts.until_idle is not None and quiet >= opts.until_idle and _idle(query):
                break
    finally:
        if query.isActive:
            query.stop()
    error = query.exception()  # a micro-batch that failed stopped the query
    if error is not None:
        raise RuntimeError(str(error))
    if follower.summary is None:
        follower.summary = follower._write_result()
    return follower.summary


def _idle(query: Any) -> bool:
    """The query found no new records at its last trigger and is between triggers."""
    status = query.status
    return (
        str(status["message"]).startswith("Waiting") and not status["isDataAvailable"] and not status["isTriggerActive"]
    )
