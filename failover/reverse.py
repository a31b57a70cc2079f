"""``strait failover reverse LINK --export DIR``: after a promote, make the old primary a mirror
of the new one, keeping (exporting) and then removing what only it has.

Steps, in order (the old primary must answer again):

1. ``plan``: the cut of the promote (per partition, the offset the new primary took over at);
2. ``fence-old``: ``strait.fenced`` on the old primary's topics, if the mirror did not already;
3. ``settle``: every partition of the old primary has a leader and its high watermark holds
   still (two reads ``SETTLE_S`` apart): nothing is still arriving there;
4. ``export``: the **divergence**, every record of the old primary beyond the cut (what it
   acknowledged and the new primary never got, plus anything written there after the
   promote), to ``DIR/<link>/epoch-<N>/`` (see :mod:`failover.export`). Written and fsynced
   before anything is truncated; never deleted;
5. ``truncate``: the old primary's partitions are truncated to the cut on every replica
   (the node's controller-driven truncation, with a leader epoch bump);
6. ``mirror-old``: the old primary's topics become mirrors of the reverse link
   (``strait.mirror.link = <link>-reverse``; read-only to clients);
7. ``start-reverse``: the mirror runs the reverse link ``<link>-reverse`` (new primary ->
   old primary, offset-preserving, the original link's topic and group selection; its target
   names the old primary's ZooKeeper and, for a secured one, its ``zookeeper_digest_file``): it
   copies everything from the cut on, so both sites end up with identical logs.

The state becomes ``reversed``; ``status`` shows the divergence exactly (``facts.divergence``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio

from node.client import AdminClient, ClientError, SiteClient

from . import _topics
from ._run import Run, Say, link_run
from ._topics import FENCE_KEY, LINK_KEY, SiteUnreachable
from .errors import FailoverError, WrongState
from .export import export_dir, export_divergence
from .state import MIRRORING, PROMOTED, REVERSED
from .topology import Topology

SETTLE_S = 1.0
SETTLE_TIMEOUT_S = 60.0


def reverse_link_name(link: str) -> str:
    return f"{link}-reverse"


async def reverse(
    topology: Topology,
    link_name: str,
    *,
    export_root: Path,
    say: Say = lambda _: None,
    request_timeout_s: float = 10.0,
    truncate_timeout_s: float = 60.0,
    stall_after: str | None = None,
) -> dict[str, Any]:
    """Reverse the promoted link ``link_name`` (see the module docstring); returns what was done.

    Raises:
        WrongState: the link is not promoted (or a different operation is unfinished).
        FailoverError: the old primary is unreachable, or a step failed (re-run to resume).
    """
    started = time.monotonic()
    command = f"strait failover reverse {link_name}"
    async with link_run(
        topology, link_name, command, say=say, timeout_s=request_timeout_s, stall_after=stall_after
    ) as run:
        _check_state(run)
        old_site, new_site = topology.site(run.state.standby), topology.site(run.state.primary)
        try:
            old = await _topics.site_client(old_site, request_timeout_s)
        except SiteUnreachable as exc:
            raise FailoverError(
                f"{exc}: the old primary must be back before it can be reversed (bring it back on its own data, "
                f"then run this again)"
            ) from None
        try:
            await run.begin("reverse", {"export": str(export_root)})
            assert run.state.cut_epoch is not None
            epoch = run.state.cut_epoch
            cut = await run.store.read_cut(epoch)
            if not cut:
                raise FailoverError(f"link {link_name!r}: the cut of epoch {epoch} is missing from ZooKeeper")
            topics = {t: max(parts) + 1 for t, parts in cut.items()}
            fence = _topics.fence_text(old_site.name, new_site, run.link.name, run.state.epoch, run.clock_ms())
            await run.step(
                "fence-old",
                f"fencing {len(topics)} topics on {old_site.name}",
                lambda: _fence(old, topics, fence),
            )
            ends = await run.step("settle", f"waiting for {old_site.name} to settle", lambda: _settle(old, topics))
            ranges = {
                (t, p): (int(cut[t][p]["mirrored_end"]), int(ends["ends"].get(f"{t}/{p}", 0)))
                for t in cut
                for p in cut[t]
            }
            directory = export_dir(export_root, run.link.name, epoch)
            summary = await run.step(
                "export",
                f"exporting the divergence to {directory}",
                lambda: _export(run, old, ranges, directory, epoch),
            )
            await run.step(
                "truncate",
                f"truncating {old_site.name} to the cut",
                lambda: _truncate(old, ranges, truncate_timeout_s),
            )
            reverse_name = reverse_link_name(run.link.name)
            await run.step(
                "mirror-old",
                f"making {old_site.name}'s topics mirrors of {reverse_name}",
                lambda: _mirror_old(old, topics, reverse_name),
            )
            await run.step(
                "start-reverse",
                f"starting the link {reverse_name} ({new_site.name} -> {old_site.name})",
                lambda: _start_reverse(run, reverse_name, new_site.name, old_site.name),
            )
            divergence = {
                "records": summary["records"],
                "bytes": summary["bytes"],
                "dir": str(directory),
                "partitions": sum(1 for e in summary["partitions"] if e["records"]),
                "epoch": epoch,
            }
            await run.finish(state=REVERSED, facts={**run.state.facts, "divergence": divergence})
        finally:
            await old.aclose()
        return {
            "command": "reverse",
            "link": run.link.name,
            "state": run.state.state,
            "epoch": run.state.epoch,
            "reverse_link": reverse_link_name(run.link.name),
            "divergence": divergence,
            "steps": run.steps,
            "seconds": round(time.monotonic() - started, 3),
        }


def _check_state(run: Run) -> None:
    link = run.link.name
    if run.resuming("reverse"):
        return
    if run.state.state == MIRRORING:
        raise WrongState(
            f"link {link!r} is mirroring {run.state.primary} -> {run.state.standby}: nothing to reverse. "
            f"Reverse follows a promote: `strait failover promote {link} --planned` (or --unplanned)"
        )
    if run.state.state == REVERSED:
        raise WrongState(
            f"link {link!r} is reversed already ({run.state.standby} mirrors {run.state.primary}); "
            f"next: `strait failover failback {link}`"
        )
    assert run.state.state == PROMOTED


async def _fence(old: SiteClient, topics: dict[str, int], text: str) -> dict[str, Any]:
    present = _topics.partition_counts(old, topics)
    configs = await _topics.overrides(old, present)
    unfenced = [t for t in present if FENCE_KEY not in configs.get(t, {})]
    changed = await _topics.set_keys(old, unfenced, {FENCE_KEY: text})
    return {"topics": len(present), "changed": changed, "missing": sorted(set(topics) - set(present))}


async def _settle(old: SiteClient, topics: dict[str, int]) -> dict[str, Any]:
    previous: dict[tuple[str, int], int] | None = None
    with trio.move_on_after(SETTLE_TIMEOUT_S):
        while True:
            try:
                await old.refresh()
                present = _topics.partition_counts(old, topics)
                ends = await _topics.high_watermarks(old, present)
            except FailoverError:
                ends = None  # a partition without a leader yet
            if ends is not None and ends == previous:
                return {"ends": {f"{t}/{p}": end for (t, p), end in sorted(ends.items())}}
            previous = ends
            await trio.sleep(SETTLE_S)
    raise FailoverError(
        f"site {old.name}: its partitions did not settle within {SETTLE_TIMEOUT_S:g} s (leaders missing or "
        f"records still arriving); check the site, then run this again"
    )


async def _export(
    run: Run, old: SiteClient, ranges: dict[tuple[str, int], tuple[int, int]], directory: Path, epoch: int
) -> dict[str, Any]:
    summary = await export_divergence(
        old, ranges, directory, link=run.link.name, epoch=epoch, clock_ms=run.clock_ms, timeout_s=run.timeout_s
    )
    return {
        "dir": str(directory),
        "records": summary["records"],
        "bytes": summary["bytes"],
        "sha256": summary["sha256"],
        "partitions": [
            {k: e[k] for k in ("topic", "partition", "cut", "end", "records", "bytes")} for e in summary["partitions"]
        ],
    }


async def _truncate(
    old: SiteClient, ranges: dict[tuple[str, int], tuple[int, int]], timeout_s: float
) -> dict[str, Any]:
    wanted = {key: cut for key, (cut, end) in ranges.items() if end > cut}
    if not wanted:
        return {"partitions": 0}
    try:
        results = await AdminClient(old).truncate_partitions(wanted, timeout=timeout_s)
    except ClientError as exc:
        raise FailoverError(f"site {old.name}: truncating to the cut: {exc}") from None
    failed = {f"{t}-{p}": r.error_message or str(r.error_code) for (t, p), r in results.items() if not r.ok}
    if failed:
        raise FailoverError(f"site {old.name}: truncating to the cut failed for {failed}; run this again")
    return {
        "partitions": len(wanted),
        "to": {f"{t}/{p}": cut for (t, p), cut in sorted(wanted.items())},
        "truncated": sorted(f"{t}/{p}" for (t, p), r in results.items() if r.truncated),
    }


async def _mirror_old(old: SiteClient, topics: dict[str, int], reverse_name: str) -> dict[str, Any]:
    present = _topics.partition_counts(old, topics)
    changed = await _topics.set_keys(old, present, {LINK_KEY: reverse_name})
    return {"changed": changed}


async def _start_reverse(run: Run, reverse_name: str, new: str, old: str) -> dict[str, Any]:
    selection = run.state.facts.get("selection") or {"include": [".*"], "exclude": []}
    groups = run.state.facts.get("groups") or {"include": [".*"], "exclude": []}
    new_site, old_site = run.topology.site(new), run.topology.site(old)
    # The original link as the mirror runs it: how the mirror reaches each site (TLS, its own SASL
    # user, ZooKeeper credentials) and what it syncs. The reverse link reaches the same sites the
    # same way, the roles swapped.
    original = (await run.mirror.status()).get("link") or {}
    was_source, was_target = original.get("source") or {}, original.get("target") or {}
    target: dict[str, Any] = {"name": old_site.name, "bootstrap": old_site.bootstrap, "zookeeper": old_site.zookeeper}
    digest = was_source.get("zookeeper_digest_file") or old_site.zookeeper_digest_file
    if digest is not None:
        # The mirror's members register in the old primary's ZooKeeper: on a secured site they need
        # its credential, read by the mirror process from the same path.
        target["zookeeper_digest_file"] = str(digest)
    source: dict[str, Any] = {"name": new_site.name, "bootstrap": new_site.bootstrap}
    for table, was in ((source, was_target), (target, was_source)):
        table.update({key: was[key] for key in ("tls", "sasl") if was.get(key) is not None})
    definition: dict[str, Any] = {
        "name": reverse_name,
        "mode": "offset-preserving",
        "source": source,
        "target": target,
        "topics": selection,
        "groups": groups,
        "sync_acls": bool(original.get("sync_acls", True)),
    }
    if original.get("sync_users") and was_target.get("zookeeper"):
        # The users flow back too: from the new primary's ZooKeeper, as the mirror reached it as a target.
        source["zookeeper"] = was_target["zookeeper"]
        if was_target.get("zookeeper_digest_file"):
            source["zookeeper_digest_file"] = was_target["zookeeper_digest_file"]
        definition["sync_users"] = True
    answer = await run.mirror.put_link(reverse_name, definition)
    return {"link": reverse_name, "definition": definition, "state": answer.get("state")}
