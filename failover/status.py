"""``strait failover status``: per link its DR state, the mirror's state and, per partition,
the source end, the mirrored end, the lag and the **RPO if you fail over now**.

Where each number comes from (measured, not trusted from one place):

* the **mirrored end** is the target partition's high watermark (ListOffsets on the target):
  what a promote would keep;
* the **source end** is the source partition's high watermark (ListOffsets on the source)
  when the source answers within the timeout; otherwise the last value the mirror saw, with
  the time it saw it (``source_end_seen_ms``) and ``source_end_live: false``;
* the **RPO** of a partition is what lies on the source in ``[mirrored end, source end)``: its
  data records and bytes, counted by reading that range from the source (exact, up to
  ``scan_limit_bytes`` per partition; ``rpo_exact`` says whether it was). With the source
  unreachable it is the last known lag (records) and the mirror's byte estimate, not exact;
* lag in seconds, the time since the last successful fetch, the link's state and the group
  offset sync come from the mirror's admin API;
* the **open transactions** per mirror topic (``open_transactions``; while the link mirrors):
  the source's transactions whose records the target holds and whose end it has not copied,
  from the target leaders' producer state (DescribeProducers): how many, and the oldest
  (partition, first offset, producer, age from its first batch's timestamp). A promote now
  would abort them (``failover._txns``); most end on the source within their timeout and the
  mirror copies their end.

Link states (``link_state``), named as operators of Cluster Linking know them: ``active``,
``paused``, ``source-unavailable``, ``stopped`` (failed over: the link copies nothing),
``failed``, ``mirror-unreachable``. Partition states: ``active``, ``paused``, ``stopped``,
``failed``, ``source-unavailable``, ``pending`` (not copying yet).

The answer is plain JSON-able data (``--json`` prints it); :func:`render` makes the text.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from node.client import LATEST, AdminClient, ClientError, SiteClient
from storage.records import Offset

from . import _scan, _txns
from ._mirror import MirrorControl
from .errors import FailoverError, TopologyError
from .state import MIRRORING, DrState, open_store
from .topology import Link, Site, Topology

STATUS_FORMAT = 1
CLIENT_ID = "strait-failover"


async def link_status(
    topology: Topology,
    name: str,
    *,
    timeout_s: float = 5.0,
    scan_limit_bytes: int = 64 * 1024 * 1024,
    clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    mirror_status: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Everything ``strait failover status`` shows for link ``name``. Never raises for an
    unreachable site or mirror: each part says whether it was reached and what failed.

    ``mirror_status`` reads the mirror's status of the link (default: its admin API); the
    mirror process itself passes its own view, to serve the same numbers on its DR page.

    Raises:
        TopologyError: no such link.
    """
    link = topology.link(name)
    source, target = topology.site(link.source), topology.site(link.target)
    out: dict[str, Any] = {"format": STATUS_FORMAT, "link": link.to_dict(), "at_ms": clock_ms()}
    dr: DrState | None = None
    journal: list[dict[str, Any]] = []
    cut: dict[str, dict[int, dict[str, Any]]] = {}
    mirror: dict[str, Any] | None = None
    problems: dict[str, str] = {}

    async def read_dr() -> None:
        nonlocal dr, journal, cut
        if not target.zookeeper:
            problems["dr"] = f"the topology names no ZooKeeper for site {target.name}: the DR state is unknown"
            return
        try:
            with trio.fail_after(timeout_s):
                async with open_store(
                    target.zookeeper,
                    link.name,
                    link.source,
                    link.target,
                    timeout_s=timeout_s,
                    digest=target.zookeeper_digest(),
                ) as s:
                    dr = await s.state()
                    journal = await s.journal(limit=20)
                    if dr.cut_epoch is not None:
                        cut = await s.read_cut(dr.cut_epoch)
        except (FailoverError, ValueError, trio.TooSlowError) as exc:
            problems["dr"] = str(exc) or f"no answer from ZooKeeper {target.zookeeper} within {timeout_s:g} s"

    async def read_mirror() -> None:
        nonlocal mirror
        try:
            with trio.fail_after(timeout_s):
                if mirror_status is not None:
                    mirror = await mirror_status()
                else:
                    mirror = await MirrorControl(link, timeout=timeout_s).status()
        except (FailoverError, trio.TooSlowError) as exc:
            problems["mirror"] = str(exc) or f"no answer from {link.mirror_admin} within {timeout_s:g} s"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_dr)
        nursery.start_soon(read_mirror)

    out["dr"] = _dr_view(dr, journal, problems.get("dr"))
    out["mirror"] = _mirror_view(link, mirror, problems.get("mirror"), clock_ms())

    partitions = _partitions_to_show(mirror, cut)
    target_view = await _site_ends(target, partitions, timeout_s)
    source_view = await _site_ends(source, partitions, timeout_s)
    out["target"] = {"name": target.name, "reachable": target_view.error is None, "error": target_view.error}
    out["source"] = {"name": source.name, "reachable": source_view.error is None, "error": source_view.error}
    rows = await _rows(link, partitions, mirror, cut, dr, target_view, source_view, timeout_s, scan_limit_bytes)
    out["partitions"] = rows
    if dr is None or dr.state == MIRRORING:
        out["open_transactions"] = await _open_transactions(target, partitions, timeout_s, clock_ms)
    out["link_state"] = _link_state(dr, mirror, source_view.error, problems.get("mirror"))
    out["rpo"] = _totals(rows)
    out["cut"] = {t: {str(p): v.get("mirrored_end") for p, v in sorted(parts.items())} for t, parts in cut.items()}
    if dr is not None:
        out["rpo_at_promote"] = dr.facts.get("rpo_at_promote")
        out["divergence"] = dr.facts.get("divergence")
    return out


# -- parts ------------------------------------------------------------------------------------------


class _Ends:
    """One site's high watermarks for the partitions asked (or why they are unknown)."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], int] = {}
        self.error: str | None = None
        self.site: SiteClient | None = None


async def _site_ends(where: Site, partitions: Mapping[str, int], timeout_s: float) -> _Ends:
    view = _Ends()
    try:
        security = where.client_security()
    except TopologyError as exc:
        view.error = str(exc)
        return view
    site = SiteClient(where.name, where.bootstrap, client_id=CLIENT_ID, timeout=timeout_s, **security)
    admin = AdminClient(site)
    try:
        with trio.fail_after(timeout_s * 2):
            await site.refresh(sorted(partitions) or None)
            for topic, count in sorted(partitions.items()):
                if topic not in site.topics:
                    continue
                found = await admin.list_offsets(topic, list(range(count)), LATEST, strict=False)
                for p, end in found.items():
                    if end >= 0:
                        view.ends[(topic, p)] = end
        view.site = site
    except (ClientError, OSError, ValueError) as exc:
        view.error = str(exc)
        await site.aclose()
    except trio.TooSlowError:
        view.error = f"site {where.name} did not answer within {timeout_s * 2:g} s"
        await site.aclose()
    return view


async def _open_transactions(
    where: Site, partitions: Mapping[str, int], timeout_s: float, clock_ms: Callable[[], int]
) -> dict[str, Any]:
    """The transactions open on the target's mirror partitions: ``total``, ``topics`` (per topic,
    see ``failover._txns.by_topic``) and ``error`` (None, or why they are unknown)."""
    out: dict[str, Any] = {"total": None, "topics": {}, "error": None}
    if not partitions:
        out["total"] = 0
        return out
    try:
        security = where.client_security()
    except TopologyError as exc:
        out["error"] = str(exc)
        return out
    site = SiteClient(where.name, where.bootstrap, client_id=CLIENT_ID, timeout=timeout_s, **security)
    try:
        with trio.fail_after(timeout_s * 2):
            await site.refresh(sorted(partitions))
            present = {t: n for t, n in partitions.items() if t in site.topics}
            found = await _txns.open_transactions(site, present)
            # The first transaction of each partition is its oldest there: one batch read per partition.
            firsts = {(t.topic, t.partition): t for t in reversed(found)}.values()
            opened = {t: await _txns.first_timestamp(site, t, timeout=timeout_s) for t in firsts}
        out["total"] = len(found)
        out["topics"] = _txns.by_topic(found, opened, clock_ms())
    except (FailoverError, ClientError, OSError) as exc:
        out["error"] = str(exc)
    except trio.TooSlowError:
        out["error"] = f"site {where.name} did not answer within {timeout_s * 2:g} s"
    finally:
        await site.aclose()
    return out


def _partitions_to_show(mirror: Mapping[str, Any] | None, cut: Mapping[str, Mapping[int, Any]]) -> dict[str, int]:
    """topic -> partition count: the mirror's topics, and those of the cut of the last promote."""
    counts: dict[str, int] = {}
    for topic, info in ((mirror or {}).get("topics") or {}).items():
        counts[topic] = max(int(info.get("target_partitions") or 0), len(info.get("partitions") or []))
    for topic, parts in cut.items():
        counts[topic] = max(counts.get(topic, 0), max(parts, default=-1) + 1)
    return counts


def _mirror_partition(mirror: Mapping[str, Any] | None, topic: str, p: int) -> Mapping[str, Any]:
    info = ((mirror or {}).get("topics") or {}).get(topic) or {}
    for entry in info.get("partitions") or []:
        if entry.get("partition") == p:
            return dict(entry)
    return {}


async def _rows(
    link: Link,
    partitions: Mapping[str, int],
    mirror: Mapping[str, Any] | None,
    cut: Mapping[str, Mapping[int, Mapping[str, Any]]],
    dr: DrState | None,
    target: _Ends,
    source: _Ends,
    timeout_s: float,
    scan_limit_bytes: int,
) -> list[dict[str, Any]]:
    failed_over = dr is not None and dr.state != MIRRORING
    rows: list[dict[str, Any]] = []
    for topic, count in sorted(partitions.items()):
        for p in range(count):
            seen = _mirror_partition(mirror, topic, p)
            at_cut = cut.get(topic, {}).get(p, {})
            mirrored = target.ends.get((topic, p))
            if failed_over and at_cut:
                mirrored = int(at_cut.get("mirrored_end", -1))  # the target took writes since: the cut is what it got
            live = (topic, p) in source.ends
            if live:
                source_end: int | None = source.ends[(topic, p)]
                seen_ms = None
            elif seen.get("source_high_watermark", -1) >= 0:
                source_end, seen_ms = int(seen["source_high_watermark"]), seen.get("last_fetch_ms")
            elif at_cut:
                source_end, seen_ms = int(at_cut.get("source_end", -1)), at_cut.get("source_seen_ms")
            else:
                source_end, seen_ms = None, None
            row: dict[str, Any] = {
                "topic": topic,
                "partition": p,
                "state": _partition_state(seen, failed_over, live, source.error),
                "source_end": source_end,
                "source_end_live": live,
                "source_end_seen_ms": seen_ms,
                "mirrored_end": mirrored,
                "lag_records": None,
                "lag_bytes": seen.get("lag_bytes") if seen.get("lag_bytes", -1) >= 0 else None,
                "lag_seconds": seen.get("lag_seconds") if seen.get("lag_seconds", -1) >= 0 else None,
                "last_fetch_ms": seen.get("last_fetch_ms"),
                "rpo_records": None,
                "rpo_bytes": None,
                "rpo_exact": False,
            }
            if source_end is not None and mirrored is not None:
                row["lag_records"] = max(0, source_end - mirrored)
                if live and source.site is not None and not failed_over:
                    try:
                        with trio.fail_after(timeout_s):
                            summary = await _scan.summarize(
                                source.site,
                                topic,
                                p,
                                Offset(mirrored),
                                Offset(source_end),
                                limit_bytes=scan_limit_bytes,
                                timeout=timeout_s,
                            )
                        row.update(rpo_records=summary.records, rpo_bytes=summary.bytes, rpo_exact=summary.exact)
                    except (ClientError, trio.TooSlowError) as exc:
                        row["rpo_error"] = str(exc) or "reading the source timed out"
                if row["rpo_records"] is None:
                    row["rpo_records"] = row["lag_records"]
                    row["rpo_bytes"] = row["lag_bytes"] if row["lag_records"] else 0
                    row["rpo_exact"] = row["lag_records"] == 0 and live
            rows.append(row)
    if source.site is not None:
        await source.site.aclose()
    if target.site is not None:
        await target.site.aclose()
    return rows


def _partition_state(seen: Mapping[str, Any], failed_over: bool, live: bool, source_error: str | None) -> str:
    if failed_over:
        return "stopped"
    if source_error is not None and not live:
        return "source-unavailable"
    state = str(seen.get("state", ""))
    return {
        "copying": "active",
        "paused": "paused",
        "stopped": "stopped",
        "diverged": "failed",
        "failed": "failed",
        "unassigned": "active",  # copied by another process of the link
    }.get(state, "pending")


def _link_state(
    dr: DrState | None, mirror: Mapping[str, Any] | None, source_error: str | None, mirror_error: str | None
) -> str:
    if dr is not None and dr.state != MIRRORING:
        return "stopped"
    if mirror is None:
        return "mirror-unreachable" if mirror_error else "failed"
    state = str(mirror.get("state", ""))
    if state in ("failed-over", "stopped", "deleted"):
        return "stopped"
    if state == "failed" or mirror.get("error"):
        return "failed"
    if state == "paused" or mirror.get("paused"):
        return "paused"
    if source_error is not None or mirror.get("source_reachable") is False:
        return "source-unavailable"
    return "active"


def _dr_view(dr: DrState | None, journal: list[dict[str, Any]], error: str | None) -> dict[str, Any]:
    if dr is None:
        return {"reachable": False, "error": error, "journal": []}
    view = dr.to_dict()
    view.update(reachable=True, error=None, journal=journal)
    return view


def _mirror_view(link: Link, mirror: Mapping[str, Any] | None, error: str | None, now_ms: int) -> dict[str, Any]:
    if mirror is None:
        return {"admin": link.mirror_admin, "reachable": False, "error": error}
    groups = (mirror.get("group_sync") or {}).get("groups") or []
    synced = [g["last_sync_ms"] for g in groups if g.get("last_sync_ms")]
    last_group_sync = max(synced) if synced else None
    return {
        "admin": link.mirror_admin,
        "reachable": True,
        "error": mirror.get("error"),
        "state": mirror.get("state"),
        "last_sync_ms": mirror.get("last_sync_ms"),
        "last_sync_error": mirror.get("last_sync_error"),
        "source_reachable": mirror.get("source_reachable"),
        "last_source_contact_ms": mirror.get("last_source_contact_ms"),
        "fence": mirror.get("fence"),
        "group_sync": {
            "groups": len(groups),
            "last_sync_ms": last_group_sync,
            "age_s": None if last_group_sync is None else max(0.0, (now_ms - last_group_sync) / 1000),
            "last_error": (mirror.get("group_sync") or {}).get("last_error"),
        },
        "conflicts": mirror.get("conflicts") or [],
    }


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    known = [r for r in rows if r["rpo_records"] is not None]
    return {
        "records": sum(r["rpo_records"] for r in known),
        "bytes": sum(r["rpo_bytes"] or 0 for r in known),
        "exact": bool(rows) and len(known) == len(rows) and all(r["rpo_exact"] for r in rows),
        "partitions": len(rows),
        "partitions_behind": sum(1 for r in known if r["rpo_records"]),
        "partitions_unknown": len(rows) - len(known),
        "lag_seconds": max((r["lag_seconds"] or 0 for r in rows), default=0),
    }


# -- text -------------------------------------------------------------------------------------------


def _ago(ms: int | None, now_ms: int) -> str:
    if not ms:
        return "never"
    return f"{_seconds(max(0.0, (now_ms - ms) / 1000))} ago"


def _seconds(s: float) -> str:
    if s < 10:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s:.0f} s"
    return f"{s / 3600:.1f} h"


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    exponent = min(4, int(math.log(n, 1024)))
    return f"{n / 1024**exponent:.1f} {'BKMGT'[exponent]}iB"


def render(status: Mapping[str, Any]) -> str:
    """The status as an operator reads it (see the module docstring for the words)."""
    now = int(status["at_ms"])
    link, dr, mirror, rpo = status["link"], status["dr"], status["mirror"], status["rpo"]
    lines = [f"link {link['name']}  {link['source']} -> {link['target']}  link state: {status['link_state']}"]
    if dr.get("reachable"):
        operation = dr.get("operation")
        doing = f"; unfinished: {operation['name']} (re-run it to finish)" if operation else ""
        lines.append(
            f"  DR state: {dr['state']} (epoch {dr['epoch']}), primary {dr['primary']}, standby {dr['standby']}{doing}"
        )
    else:
        lines.append(f"  DR state: unknown ({dr.get('error')})")
    if mirror.get("reachable"):
        group = mirror["group_sync"]
        lines.append(
            f"  mirror {mirror['admin']}: {mirror.get('state')}; "
            f"last topic sync {_ago(mirror.get('last_sync_ms'), now)}; "
            f"group offsets synced {_ago(group['last_sync_ms'], now)} ({group['groups']} groups)"
        )
        fence = mirror.get("fence") or {}
        if fence.get("state") not in (None, "off"):
            lines.append(f"  fence of {link['source']}: {fence.get('state')} {fence.get('last_error') or ''}".rstrip())
    else:
        lines.append(f"  mirror {mirror['admin']}: unreachable ({mirror.get('error')})")
    for side in ("source", "target"):
        site = status[side]
        lines.append(
            f"  {side} {site['name']}: " + ("reachable" if site["reachable"] else f"UNREACHABLE ({site['error']})")
        )
    lines.append("")
    if dr.get("state", MIRRORING) == MIRRORING:
        exact = "exact" if rpo["exact"] else "NOT exact: see the partitions"
        lines.append(
            f"  RPO if you fail over now: {rpo['records']} records, {_size(rpo['bytes'])} ({exact}); "
            f"{rpo['partitions_behind']} of {rpo['partitions']} partitions behind"
        )
    txns = status.get("open_transactions")
    if txns is not None:
        if txns.get("error"):
            lines.append(f"  open transactions on {status['target']['name']}: unknown ({txns['error']})")
        elif txns.get("total"):
            lines.append(
                f"  open transactions on {status['target']['name']}: {txns['total']} "
                "(a promote now would abort them; their records are not visible to read_committed consumers)"
            )
            for topic, info in sorted(txns["topics"].items()):
                oldest = info["oldest"]
                age = "" if oldest.get("age_s") is None else f", {_seconds(float(oldest['age_s']))} old"
                lines.append(
                    f"    {topic}: {info['count']} open; oldest at partition {oldest['partition']} offset "
                    f"{oldest['first_offset']} (producer {oldest['producer_id']}{age})"
                )
        else:
            lines.append(f"  open transactions on {status['target']['name']}: none")
    if status.get("rpo_at_promote"):
        at = status["rpo_at_promote"]
        lines.append(
            f"  RPO at the promote: {at.get('records')} records, {_size(at.get('bytes'))} (estimate at the cut)"
        )
    if status.get("divergence"):
        div = status["divergence"]
        lines.append(
            f"  divergence exported: {div.get('records')} records, {_size(div.get('bytes'))} in {div.get('dir')}"
        )
    lines.append("")
    header = ("topic", "part", "state", "source end", "mirrored", "lag", "lag s", "last fetch", "RPO rec", "RPO bytes")
    table = [header]
    for row in status["partitions"]:
        source_end = "?" if row["source_end"] is None else str(row["source_end"])
        if row["source_end"] is not None and not row["source_end_live"]:
            source_end += f" (seen {_ago(row['source_end_seen_ms'], now)})"
        table.append(
            (
                row["topic"],
                str(row["partition"]),
                row["state"],
                source_end,
                "?" if row["mirrored_end"] is None else str(row["mirrored_end"]),
                "?" if row["lag_records"] is None else str(row["lag_records"]),
                "?" if row["lag_seconds"] is None else f"{row['lag_seconds']:.1f}",
                _ago(row["last_fetch_ms"], now),
                "?" if row["rpo_records"] is None else str(row["rpo_records"]) + ("" if row["rpo_exact"] else "~"),
                _size(row["rpo_bytes"]),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip())
    if not status["partitions"]:
        lines.append("  (no mirrored partitions yet)")
    return "\n".join(lines)
