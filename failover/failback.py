"""``strait failover failback LINK``: once the reverse link caught up, switch back to the
original primary and restore the original link's direction (a planned switchover in reverse).

Steps, in order (both sites must answer):

1. ``plan``: the reverse link's topics on both sides;
2. ``fence-new``: ``strait.fenced`` on the current primary's topics (producers there are told
   to go back to the original primary);
3. ``drain``: wait until the original primary holds every partition up to the current
   primary's high watermark (``--timeout`` bounds it; re-run to keep waiting);
4. ``sync-groups``: a last group offset sync over the reverse link, so consumers resume on
   the original primary where they were;
5. ``stop-reverse``: the mirror forgets the reverse link;
6. ``mirror-new``: the current primary's topics become mirrors of the original link again
   (``strait.mirror.link = <link>``) and lose their fence;
7. ``restore-link``: the mirror runs the original link again (each partition from the end the
   two sites now share);
8. ``unmirror-old``: the original primary's topics take writes again (``strait.mirror.link``
   and ``strait.fenced`` removed).

The state becomes ``mirroring`` with the original direction and the epoch one higher; the
last promote's facts move to ``facts.previous``.
"""

from __future__ import annotations

import time
from typing import Any

from . import _topics
from ._run import Run, Say, link_run
from ._topics import FENCE_KEY, LINK_KEY, SiteUnreachable
from .errors import FailoverError, WrongState
from .promote import Progress, drain
from .reverse import reverse_link_name
from .state import MIRRORING, PROMOTED, REVERSED
from .topology import Topology


async def failback(
    topology: Topology,
    link_name: str,
    *,
    timeout_s: float = 300.0,
    say: Say = lambda _: None,
    progress: Progress | None = None,
    request_timeout_s: float = 10.0,
    stall_after: str | None = None,
) -> dict[str, Any]:
    """Fail the reversed link ``link_name`` back (see the module docstring); returns what was done.

    Raises:
        WrongState: the link is not reversed (or another operation is unfinished).
        FailoverError: a site is unreachable, the drain timed out, or a step failed (re-run).
    """
    started = time.monotonic()
    command = f"strait failover failback {link_name}"
    async with link_run(
        topology, link_name, command, say=say, timeout_s=request_timeout_s, stall_after=stall_after
    ) as run:
        _check_state(run)
        original, current = topology.site(run.link.source), topology.site(run.link.target)
        try:
            new = await _topics.site_client(current, request_timeout_s)
        except SiteUnreachable as exc:
            raise FailoverError(f"{exc}: failback drains it into {original.name}; it must answer") from None
        try:
            old = await _topics.site_client(original, request_timeout_s)
        except SiteUnreachable as exc:
            await new.aclose()
            raise FailoverError(f"{exc}: failback switches back to it; it must answer") from None
        reverse_name = reverse_link_name(run.link.name)
        try:
            await run.begin("failback", {})
            plan = await run.step(
                "plan", "finding the reverse link's topics", lambda: _plan(run, new, old, reverse_name)
            )
            fence = _topics.fence_text(current.name, original, run.link.name, run.state.epoch + 1, run.clock_ms())
            fenced = await run.step(
                "fence-new",
                f"fencing {len(plan['new_topics'])} topics on {current.name}",
                lambda: _fence(new, plan["new_topics"], fence, run),
            )
            await run.step(
                "drain",
                f"waiting until {original.name} has everything",
                lambda: drain(run, new, old, plan["new_topics"], fenced, timeout_s, progress, site=current.name),
            )
            await run.step("sync-groups", "last group offset sync", lambda: _sync_groups(run, reverse_name))
            await run.step("stop-reverse", f"stopping {reverse_name}", lambda: _stop_reverse(run, reverse_name))
            await run.step(
                "mirror-new",
                f"making {current.name}'s topics mirrors of {run.link.name} again",
                lambda: _mirror_new(new, plan["old_topics"], run.link.name),
            )
            await run.step("restore-link", f"restarting {run.link.name}", lambda: _restore(run))
            await run.step(
                "unmirror-old",
                f"making {original.name}'s topics writable",
                lambda: _unmirror_old(old, plan["old_topics"]),
            )
            facts = {k: v for k, v in run.state.facts.items() if k not in ("rpo_at_promote", "divergence")}
            facts["previous"] = {
                "rpo_at_promote": run.state.facts.get("rpo_at_promote"),
                "divergence": run.state.facts.get("divergence"),
                "epoch": run.state.epoch,
            }
            await run.finish(
                state=MIRRORING,
                epoch=run.state.epoch + 1,
                primary=run.link.source,
                standby=run.link.target,
                cut_epoch=None,
                facts=facts,
            )
        finally:
            await new.aclose()
            await old.aclose()
        return {
            "command": "failback",
            "link": run.link.name,
            "state": run.state.state,
            "epoch": run.state.epoch,
            "primary": run.state.primary,
            "steps": run.steps,
            "seconds": round(time.monotonic() - started, 3),
        }


def _check_state(run: Run) -> None:
    link = run.link.name
    if run.resuming("failback"):
        return
    if run.state.state == MIRRORING:
        raise WrongState(
            f"link {link!r} is mirroring {run.state.primary} -> {run.state.standby}: there is nothing to fail back"
        )
    if run.state.state == PROMOTED:
        raise WrongState(
            f"link {link!r} is promoted but not reversed: {run.state.standby} must first become a mirror of "
            f"{run.state.primary}: `strait failover reverse {link} --export DIR`"
        )
    assert run.state.state == REVERSED


async def _plan(run: Run, new: Any, old: Any, reverse_name: str) -> dict[str, Any]:
    old_topics = await _topics.mirror_topics_of(old, reverse_name)
    if not old_topics:
        raise FailoverError(
            f"link {run.link.name!r}: site {old.name} has no mirror topic of {reverse_name}; was `reverse` completed?"
        )
    new_topics = _topics.partition_counts(new, old_topics)
    return {"old_topics": old_topics, "new_topics": new_topics}


async def _fence(new: Any, topics: dict[str, int], text: str, run: Run) -> dict[str, Any]:
    changed = await _topics.set_keys(new, topics, {FENCE_KEY: text})
    return {"topics": len(topics), "changed": changed, "fence": text, "fenced_ms": run.clock_ms()}


async def _sync_groups(run: Run, reverse_name: str) -> dict[str, Any]:
    answer = await run.mirror.sync_groups(reverse_name)
    groups = answer.get("groups") or []
    return {"groups": len(groups), "errors": [g for g in groups if g.get("last_error")][:10]}


async def _stop_reverse(run: Run, reverse_name: str) -> dict[str, Any]:
    try:
        await run.mirror.delete(reverse_name)
    except FailoverError as exc:
        if "404" not in str(exc):
            raise
        return {"deleted": False, "note": "the mirror did not run it (deleted before)"}
    return {"deleted": True}


async def _mirror_new(new: Any, topics: dict[str, int], link: str) -> dict[str, Any]:
    present = _topics.partition_counts(new, topics)
    changed = await _topics.set_keys(new, present, {LINK_KEY: link}, delete=[FENCE_KEY])
    return {"changed": changed}


async def _restore(run: Run) -> dict[str, Any]:
    answer = await run.mirror.restore(run.link.name)
    return {"state": answer.get("state")}


async def _unmirror_old(old: Any, topics: dict[str, int]) -> dict[str, Any]:
    changed = await _topics.set_keys(old, topics, {}, delete=[LINK_KEY, FENCE_KEY])
    return {"changed": changed}
