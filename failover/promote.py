"""``strait failover promote LINK --planned | --unplanned``: make the link's target the primary.

Planned (a switchover, RPO 0; the source must answer), steps in order:

1. ``plan``: the link's mirror topics on the target (``strait.mirror.link`` = the link) and the
   source topics the link selects, recorded so that every later step works on the same set;
2. ``fence-source``: ``strait.fenced`` on those source topics: producers there get
   POLICY_VIOLATION naming the new primary, reads go on;
3. ``drain``: wait until every partition's mirrored end equals the source's high watermark,
   twice in a row and at least ``FENCE_SETTLE_S`` after the fence (a produce in flight when
   the fence landed is waited for), and no transaction is open on the source's partitions (the
   fence refuses new transactional records but takes markers: a transaction begun before it
   ends by its producer's commit or abort, or by its timeout, and the mirror copies its
   markers); bounded by ``--timeout`` (the source stays fenced: run the same command again to
   wait more, or ``strait failover unfence SITE`` to back out);
4. ``sync-groups``: one last group offset sync by the mirror;
5. ``stop-link``: the mirror stops the link for good (``failed-over``);
6. ``cut``: per partition, the target's end (the mirrored end) and the source's end, stored
   in the DR state's ``cuts/<epoch>``;
7. ``unmirror-target``: ``strait.mirror.link`` (and any ``strait.fenced``) removed from the
   target's topics: they take writes now;
8. ``abort-transactions``: every transaction still open on the target's partitions that began
   below the cut (the mirror copied its records, its coordinator is on the source) is aborted
   with an ABORT marker (``failover._txns``), so read_committed consumers on the new primary
   are not held behind it (a leader that has not seen the unmirror yet refuses the marker:
   tried again for up to 30 s). After a planned drain there are none.

Unplanned (the source is lost; nothing of it is needed): ``plan``, ``stop-link`` (if the
mirror answers; its answer carries the source ends it saw last), ``seal-target`` (the
target's mirror topics are handed to the name ``<link>.sealed``, so no copier of the link,
even one the mirror did not stop, can append any more, while clients are still refused),
``cut`` (read after the seal took effect), ``unmirror-target``, ``abort-transactions`` (as
above: the source's transactions the mirror copied unfinished). The RPO estimate (records
the source had acknowledged, as far as the mirror saw, that the target lacks) is printed and
kept in the DR state (``facts.rpo_at_promote``); ``reverse`` later measures it exactly.

Both end with the state ``promoted``, the epoch one higher, the target as primary. The mirror
fences the old source as soon as it answers again (``auto_fence``, on by default).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from node.client import SiteClient

from . import _topics, _txns
from ._run import Run, Say, link_run
from ._topics import FENCE_KEY, LINK_KEY, SiteUnreachable, TopicFilter
from .errors import FailoverError, WrongState
from .state import MIRRORING, PROMOTED, REVERSED
from .topology import Topology

# A fence (or a seal) reaches every node's leader in a few ms: tests/node/test_fence_truncate.py
# measured a median of 3-4 ms and at most 29 ms on one host (see docs/replication.md). The
# settles below leave room for that, for a real site's ZooKeeper round trips, and for a write
# the leader accepted just before it saw the change to reach the high watermark.
FENCE_SETTLE_S = 1.0
SEAL_SETTLE_S = 0.5
POLL_S = 0.25
Progress = Callable[[int, int], None]  # (records still to copy, records to copy at the start)


async def promote(
    topology: Topology,
    link_name: str,
    *,
    planned: bool,
    timeout_s: float = 300.0,
    auto_fence: bool = True,
    say: Say = lambda _: None,
    progress: Progress | None = None,
    request_timeout_s: float = 10.0,
    stall_after: str | None = None,
) -> dict[str, Any]:
    """Promote the target of ``link_name``; returns what was done (see the module docstring).

    Raises:
        WrongState: the link is not mirroring (already promoted, reversed), or a promote of
            the other kind is in progress.
        FailoverError: a step failed (re-run to resume), a planned promote's source is
            unreachable, or the drain did not finish within ``timeout_s``.
    """
    mode = "planned" if planned else "unplanned"
    started = time.monotonic()
    command = f"strait failover promote {link_name} --{mode}"
    async with link_run(
        topology, link_name, command, say=say, timeout_s=request_timeout_s, stall_after=stall_after
    ) as run:
        _check_state(run, mode)
        source_client: SiteClient | None = None
        if planned:
            try:
                source_client = await _topics.site_client(run.source, request_timeout_s)
            except SiteUnreachable as exc:
                raise FailoverError(
                    f"{exc}. A planned switchover needs the source to drain it; if site {run.source.name} is "
                    f"lost, run `strait failover promote {link_name} --unplanned`"
                ) from None
        target_client = await _topics.site_client(run.target, request_timeout_s)
        try:
            await run.begin("promote", {"mode": mode})
            epoch = run.state.epoch + 1
            fence = _topics.fence_text(run.source.name, run.target, run.link.name, epoch, run.clock_ms())
            plan = await run.step("plan", "finding the link's topics", lambda: _plan(run, target_client, source_client))
            topics: dict[str, int] = dict(plan["topics"])
            if planned:
                assert source_client is not None
                client = source_client
                fenced = await run.step(
                    "fence-source",
                    f"fencing {len(plan['source_topics'])} topics on {run.source.name}",
                    lambda: _fence(client, plan["source_topics"], fence, run.clock_ms),
                )
                await run.step(
                    "drain",
                    "waiting for the mirror to copy everything",
                    lambda: drain(
                        run,
                        client,
                        target_client,
                        plan["source_topics"],
                        fenced,
                        timeout_s,
                        progress,
                        site=run.source.name,
                    ),
                )
                await run.step("sync-groups", "last group offset sync", lambda: _sync_groups(run))
            stopped = await run.step(
                "stop-link", "stopping the link", lambda: _stop_link(run, fence, auto_fence, required=planned)
            )
            if not planned:
                await run.step(
                    "seal-target",
                    "sealing the mirror topics on the target",
                    lambda: _seal(target_client, topics, run.link.name),
                )
            cut = await run.step(
                "cut",
                "recording the cut",
                lambda: _cut(run, epoch, target_client, source_client, topics, stopped, plan.get("record_bytes")),
            )
            await run.step(
                "unmirror-target",
                f"making {len(topics)} topics writable on {run.target.name}",
                lambda: _unmirror(target_client, topics),
            )
            aborted = await run.step(
                "abort-transactions",
                f"aborting the transactions left open on {run.target.name}",
                lambda: _abort_transactions(run, epoch, target_client, topics),
            )
            rpo = {
                "records": cut["rpo_records"],
                "bytes": cut["rpo_bytes"],
                "exact": planned,
                "mode": mode,
                "partitions_behind": cut["partitions_behind"],
                "source_seen_ms": cut.get("source_seen_ms"),
            }
            await run.finish(
                state=PROMOTED,
                epoch=epoch,
                primary=run.link.target,
                standby=run.link.source,
                cut_epoch=epoch,
                facts={
                    **run.state.facts,
                    "rpo_at_promote": rpo,
                    "transactions_aborted_at_promote": aborted["aborted"],
                    "selection": plan["selection"],
                    "groups": plan["groups"],
                },
            )
        finally:
            await target_client.aclose()
            if source_client is not None:
                await source_client.aclose()
        if not planned and not stopped.get("mirror_told", True):
            say(
                f"warning: the mirror did not answer: fence {run.source.name} yourself once it is back "
                f"(`strait failover fence {run.source.name}`)"
            )
        return {
            "command": "promote",
            "mode": mode,
            "link": run.link.name,
            "state": run.state.state,
            "epoch": run.state.epoch,
            "primary": run.state.primary,
            "rpo": rpo,
            "transactions_aborted": aborted["aborted"],
            "steps": run.steps,
            "seconds": round(time.monotonic() - started, 3),
        }


def _check_state(run: Run, mode: str) -> None:
    operation = run.state.operation
    link = run.link.name
    if run.resuming("promote"):
        assert operation is not None
        if operation.args.get("mode") == "unplanned" and mode == "planned":
            raise WrongState(
                f"link {link!r}: an unplanned promote is in progress (started by {operation.by}): "
                f"finish it with `strait failover promote {link} --unplanned`"
            )
        return  # the same promote, or a planned one continued as unplanned (its source was lost)
    if run.state.state == PROMOTED:
        raise WrongState(
            f"link {link!r} is promoted already ({run.state.primary} is the primary since epoch {run.state.epoch}); "
            f"next, once {run.state.standby} is back: `strait failover reverse {link} --export DIR`"
        )
    if run.state.state == REVERSED:
        raise WrongState(
            f"link {link!r} is reversed ({run.state.primary} is the primary, {run.state.standby} its mirror); "
            f"to switch back: `strait failover failback {link}`"
        )
    assert run.state.state == MIRRORING


async def _plan(run: Run, target: SiteClient, source: SiteClient | None) -> dict[str, Any]:
    topics = await _topics.mirror_topics_of(target, run.link.name)
    record_bytes: float | None = None
    try:
        link_status = await run.mirror.status()
        selection, groups = TopicFilter.from_status(link_status), TopicFilter.from_status(link_status, "groups")
        totals = link_status.get("totals") or {}
        if totals.get("records_copied"):
            record_bytes = float(totals.get("bytes_copied") or 0) / float(totals["records_copied"])
    except FailoverError as exc:
        run.say(f"  warning: {exc}; working on the topics mirrored so far")
        selection = TopicFilter(include=tuple(re.escape(t) for t in sorted(topics)) or ("(?!)",))
        groups = TopicFilter()
    source_topics: dict[str, int] = {}
    if source is not None:
        counts = _topics.partition_counts(source)
        # A selected topic the target holds but not as this link's mirror is a conflict the link
        # leaves alone: it is neither fenced nor waited for.
        others = set(_topics.partition_counts(target)) - set(topics)
        source_topics = {t: n for t, n in counts.items() if t in topics or (selection.matches(t) and t not in others)}
    if not topics and not source_topics:
        raise FailoverError(f"link {run.link.name!r}: site {run.target.name} has no mirror topic of this link")
    return {
        "topics": topics,
        "source_topics": source_topics,
        "selection": selection.to_dict(),
        "groups": groups.to_dict(),
        "record_bytes": record_bytes,  # the mean size of the records the link copied: the RPO's bytes estimate
    }


async def _fence(site: SiteClient, topics: Mapping[str, int], text: str, clock_ms: Callable[[], int]) -> dict[str, Any]:
    changed = await _topics.set_keys(site, topics, {FENCE_KEY: text})
    return {"topics": len(topics), "changed": changed, "fence": text, "fenced_ms": clock_ms()}


async def drain(
    run: Run,
    source: SiteClient,
    target: SiteClient,
    topics: Mapping[str, int],
    fenced: Mapping[str, Any],
    timeout_s: float,
    progress: Progress | None,
    *,
    site: str,
) -> dict[str, Any]:
    """Wait until ``target`` holds every partition of ``topics`` up to ``source``'s high watermark,
    twice in a row and ``FENCE_SETTLE_S`` after the fence (``fenced["fenced_ms"]``) was set.

    Raises:
        FailoverError: not done within ``timeout_s`` (the fenced ``site`` stays fenced).
    """
    source_topics: dict[str, int] = dict(topics)
    settle_until = int(fenced["fenced_ms"]) + int(FENCE_SETTLE_S * 1000)
    first: int | None = None
    previous: dict[tuple[str, int], int] | None = None
    left = -1
    unstable: list[tuple[tuple[str, int], int]] = []
    with trio.move_on_after(timeout_s) as scope:
        while True:
            await source.refresh()
            await target.refresh()
            ends = await _topics.high_watermarks(source, source_topics)
            have = await _topics.high_watermarks(target, _topics.partition_counts(target, source_topics))
            left = sum(max(0, end - have.get(key, 0)) for key, end in ends.items())
            missing = [key for key in ends if key not in have]
            # A transaction open on the source holds its last stable offset below the high watermark.
            stable = await _topics.stable_offsets(source, source_topics)
            unstable = sorted((key, lso) for key, lso in stable.items() if 0 <= lso < ends.get(key, lso))
            if first is None:
                first = left
            if progress is not None:
                progress(left, first)
            caught_up = left == 0 and not missing and not unstable
            if caught_up and previous == ends and run.clock_ms() >= settle_until:
                return {"records_drained": first, "partitions": len(ends)}
            previous = ends if caught_up else None
            await trio.sleep(POLL_S)
    assert scope.cancelled_caught
    why = f"{left} records still to copy"
    if unstable:
        (topic, p), lso = unstable[0]
        why += (
            f", transactions open on site {site} in {len(unstable)} partitions (the first at {topic}-{p} offset "
            f"{lso}): they end when their producers commit or abort them, or at their transaction timeout"
        )
    raise FailoverError(
        f"link {run.link.name!r}: the drain did not finish within {timeout_s:g} s: {why}. "
        f"Site {site} stays fenced. Run the same command again to keep waiting, or back out with "
        f"`strait failover unfence {site}`"
    )


async def _sync_groups(run: Run) -> dict[str, Any]:
    answer = await run.mirror.sync_groups(run.link.name)
    groups = answer.get("groups") or []
    return {"groups": len(groups), "errors": [g for g in groups if g.get("last_error")][:10]}


async def _stop_link(run: Run, fence: str, auto_fence: bool, *, required: bool) -> dict[str, Any]:
    try:
        answer = await run.mirror.failover(run.link.name, fence, auto_fence=auto_fence)
    except FailoverError as exc:
        if required:
            raise
        run.say(f"  warning: {exc}; the target's topics are sealed instead")
        return {"mirror_told": False, "error": str(exc), "partitions": []}
    seen = [
        {
            "topic": p.get("topic"),
            "partition": p.get("partition"),
            "source_end": p.get("source_high_watermark"),
            "source_seen_ms": p.get("source_seen_ms"),
        }
        for p in answer.get("partitions") or []
    ]
    return {"mirror_told": True, "partitions": seen}


async def _seal(target: SiteClient, topics: Mapping[str, int], link: str) -> dict[str, Any]:
    changed = await _topics.set_keys(target, topics, {LINK_KEY: f"{link}.sealed"})
    await trio.sleep(SEAL_SETTLE_S)  # the leaders refuse the link's appends once they see it
    return {"changed": changed}


async def _cut(
    run: Run,
    epoch: int,
    target: SiteClient,
    source: SiteClient | None,
    topics: Mapping[str, int],
    stopped: Mapping[str, Any],
    record_bytes: float | None,
) -> dict[str, Any]:
    await target.refresh()
    mirrored = await _topics.high_watermarks(target, topics)
    source_ends: dict[tuple[str, int], tuple[int, Any]] = {}
    for seen in stopped.get("partitions") or []:
        if seen.get("source_end") is not None and int(seen["source_end"]) >= 0:
            source_ends[(str(seen["topic"]), int(seen["partition"]))] = (
                int(seen["source_end"]),
                seen.get("source_seen_ms"),
            )
    if source is not None:
        await source.refresh()
        now = run.clock_ms()
        for key, end in (await _topics.high_watermarks(source, _topics.partition_counts(source, topics))).items():
            source_ends[key] = (end, now)
    cut: dict[str, dict[int, dict[str, Any]]] = {}
    rpo_records = behind = 0
    for (topic, p), end in sorted(mirrored.items()):
        source_end, seen_ms = source_ends.get((topic, p), (None, None))
        cut.setdefault(topic, {})[p] = {"mirrored_end": end, "source_end": source_end, "source_seen_ms": seen_ms}
        if source_end is not None and source_end > end:
            rpo_records += source_end - end
            behind += 1
    await run.store.write_cut(epoch, cut)
    seen_times = [v[1] for v in source_ends.values() if v[1]]
    return {
        "epoch": epoch,
        "partitions": len(mirrored),
        "rpo_records": rpo_records,
        "rpo_bytes": None if record_bytes is None else round(rpo_records * record_bytes),
        "partitions_behind": behind,
        "source_seen_ms": min(seen_times) if seen_times else None,
    }


async def _unmirror(target: SiteClient, topics: Mapping[str, int]) -> dict[str, Any]:
    changed = await _topics.set_keys(target, topics, {}, delete=[LINK_KEY, FENCE_KEY])
    return {"changed": changed}


async def _abort_transactions(run: Run, epoch: int, target: SiteClient, topics: Mapping[str, int]) -> dict[str, Any]:
    cut = await run.store.read_cut(epoch)
    ends = {(t, int(p)): int(v["mirrored_end"]) for t, parts in cut.items() for p, v in parts.items()}
    await target.refresh()
    done = await _txns.abort_mirrored(target, topics, ends)
    if done["aborted"]:
        run.say(
            f"  aborted {done['aborted']} transactions the source left open (their coordinator is on {run.source.name})"
        )
    return done
