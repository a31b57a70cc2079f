"""``strait failover fence SITE`` and ``unfence SITE``: stop (or allow again) client writes to
the topics a site shares with its links.

A fenced topic (``strait.fenced`` set) refuses every produce with POLICY_VIOLATION and a
message naming the new primary; reads, consumer groups and mirroring go on. The topics are
those of every link of the topology that has ``SITE`` at one end: on ``SITE``, the topics the
link mirrors (as the source) or holds as its mirrors or former mirrors (as the target).

``fence`` is what ``promote --unplanned`` leaves to the mirror (``auto_fence``) when the old
primary comes back; run it by hand when the mirror could not be told. ``unfence`` backs out
of a planned switchover or failback that was not finished; it refuses to unfence a site that
a promote replaced (its producers would write to the old primary): finish with ``reverse``
and ``failback`` instead. Each change is journalled in each link's DR state.
"""

from __future__ import annotations

import contextlib
from typing import Any

from node.client import SiteClient

from . import _topics
from ._run import Run, Say, link_run
from ._topics import FENCE_KEY, LINK_KEY, SiteUnreachable, TopicFilter
from .errors import FailoverError, TopologyError, WrongState
from .state import MIRRORING
from .topology import Topology


async def fence(
    topology: Topology, site_name: str, *, say: Say = lambda _: None, request_timeout_s: float = 10.0
) -> dict[str, Any]:
    """Fence ``site_name``'s topics of every link it belongs to; returns per link what changed."""
    return await _change(topology, site_name, True, say, request_timeout_s)


async def unfence(
    topology: Topology, site_name: str, *, say: Say = lambda _: None, request_timeout_s: float = 10.0
) -> dict[str, Any]:
    """Remove the fence from ``site_name``'s topics, where it is the primary of every link."""
    return await _change(topology, site_name, False, say, request_timeout_s)


async def _change(topology: Topology, site_name: str, fencing: bool, say: Say, timeout_s: float) -> dict[str, Any]:
    site = topology.site(site_name)
    links = [link for link in topology.links.values() if site_name in (link.source, link.target)]
    if not links:
        raise TopologyError(f"{topology.origin}: site {site_name!r} is at neither end of any link")
    verb = "fence" if fencing else "unfence"
    try:
        client = await _topics.site_client(site, timeout_s)
    except SiteUnreachable as exc:
        hint = " (the mirror fences it as soon as it answers, unless auto_fence is off)" if fencing else ""
        raise FailoverError(f"{exc}: cannot {verb} it now{hint}") from None
    results = []
    try:
        for link in links:
            async with link_run(
                topology, link.name, f"strait failover {verb} {site_name}", say=say, timeout_s=timeout_s
            ) as run:
                results.append(await _change_link(run, client, site_name, fencing))
    finally:
        await client.aclose()
    return {"command": verb, "site": site_name, "links": results}


async def _change_link(run: Run, client: SiteClient, site_name: str, fencing: bool) -> dict[str, Any]:
    state = run.state
    replaced = state.state != MIRRORING and state.standby == site_name
    if not fencing and replaced:
        raise WrongState(
            f"link {run.link.name!r}: site {site_name} was failed over to {state.primary} (state {state.state}); "
            f"unfencing it would let producers write to the old primary. Finish with "
            f"`strait failover reverse {run.link.name} --export DIR` and `strait failover failback {run.link.name}`"
        )
    topics = await _site_topics(run, client, site_name)
    if fencing:
        primary = run.topology.site(state.primary if state.primary != site_name else state.standby)
        text = (
            _topics.fence_text(site_name, primary, run.link.name, state.epoch, run.clock_ms())
            if replaced
            else f"site {site_name} is fenced by an operator (link {run.link.name}, DR epoch {state.epoch})"
        )
        configs = await _topics.overrides(client, topics)
        unfenced = [t for t in topics if FENCE_KEY not in configs.get(t, {})]
        changed = await _topics.set_keys(client, unfenced, {FENCE_KEY: text})
    else:
        changed = await _topics.set_keys(client, topics, {}, delete=[FENCE_KEY])
    run.state = await run.store.write(
        run.state, "fence" if fencing else "unfence", {"site": site_name, "topics": len(topics), "changed": changed}
    )
    run.say(f"  link {run.link.name}: {len(changed)} of {len(topics)} topics on {site_name} changed")
    return {"link": run.link.name, "topics": len(topics), "changed": changed}


async def _site_topics(run: Run, client: SiteClient, site_name: str) -> list[str]:
    """The topics of ``site_name`` that belong to the link (see the module docstring)."""
    counts = _topics.partition_counts(client)
    configs = await _topics.overrides(client, counts)
    names = {run.link.name, f"{run.link.name}.sealed", f"{run.link.name}-reverse"}
    mine = {t for t in counts if configs.get(t, {}).get(LINK_KEY) in names}
    if site_name == run.link.source:
        selection = TopicFilter(**_filter(run.state.facts.get("selection")))
        with contextlib.suppress(FailoverError):
            selection = TopicFilter.from_status(await run.mirror.status())
        mine |= {t for t in counts if selection.matches(t)}
    elif run.state.cut_epoch is not None:
        mine |= set(await run.store.read_cut(run.state.cut_epoch)) & set(counts)
    return sorted(mine)


def _filter(raw: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        return {"include": (".*",), "exclude": ()}
    return {"include": tuple(raw.get("include") or (".*",)), "exclude": tuple(raw.get("exclude") or ())}
