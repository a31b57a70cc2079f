"""The topics a failover step works on, and the two topic keys it turns: ``strait.fenced`` and
``strait.mirror.link``.

Every change here is idempotent: a topic already as asked is left alone (and not counted), so a
step run again after a kill changes nothing twice. ``site_client`` opens a site with a bounded
wait and names the site when it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import trio

from node.client import LATEST, READ_COMMITTED, AdminClient, ClientError, SiteClient, list_offsets

from .errors import FailoverError
from .topology import Site

FENCE_KEY = "strait.fenced"
LINK_KEY = "strait.mirror.link"
MAX_FENCE_TEXT = 1024
CLIENT_ID = "strait-failover"
_INTERNAL = "__"


class SiteUnreachable(FailoverError):
    """A site did not answer within the timeout."""


async def site_client(site: Site, timeout_s: float) -> SiteClient:
    """A client of ``site`` with its metadata read. The caller closes it (``aclose``).

    Raises:
        SiteUnreachable: no broker of the site answered within ``timeout_s`` (names the site).
        TopologyError: the site's TLS or SASL files cannot be used.
    """
    client = SiteClient(site.name, site.bootstrap, client_id=CLIENT_ID, timeout=timeout_s, **site.client_security())
    try:
        with trio.fail_after(timeout_s):
            await client.refresh()
    except (ClientError, OSError, trio.TooSlowError) as exc:
        await client.aclose()
        why = str(exc) or f"no answer within {timeout_s:g} s"
        raise SiteUnreachable(f"site {site.name} ({site.bootstrap}) is unreachable: {why}") from None
    return client


@dataclass(frozen=True)
class TopicFilter:
    """The link's topic selection (include/exclude regular expressions on whole names)."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_status(cls, link_status: Mapping[str, object], key: str = "topics") -> TopicFilter:
        """From the ``link.topics`` (or ``link.groups``) of the mirror's status of the link."""
        link = link_status.get("link")
        topics = link.get(key) if isinstance(link, dict) else None
        if not isinstance(topics, dict):
            return cls()
        return cls(tuple(topics.get("include") or (".*",)), tuple(topics.get("exclude") or ()))

    def matches(self, topic: str) -> bool:
        if topic.startswith(_INTERNAL):
            return False
        return any(re.fullmatch(p, topic) for p in self.include) and not any(
            re.fullmatch(p, topic) for p in self.exclude
        )

    def to_dict(self) -> dict[str, list[str]]:
        return {"include": list(self.include), "exclude": list(self.exclude)}


def partition_counts(site: SiteClient, topics: Iterable[str] | None = None) -> dict[str, int]:
    """topic -> partition count, from the client's metadata (all non-internal topics by default)."""
    wanted = set(topics) if topics is not None else None
    return {
        name: len(meta.partitions)
        for name, meta in sorted(site.topics.items())
        if not name.startswith(_INTERNAL) and (wanted is None or name in wanted)
    }


async def overrides(site: SiteClient, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each topic's own config overrides; raises FailoverError for a topic that fails."""
    names = sorted(set(topics))
    if not names:
        return {}
    found = await AdminClient(site).topic_overrides(names)
    out: dict[str, dict[str, str]] = {}
    for name, configs in found.items():
        if isinstance(configs, ClientError):
            raise FailoverError(f"site {site.name}: reading the configs of topic {name!r}: {configs}")
        out[name] = configs
    return out


async def mirror_topics_of(site: SiteClient, link: str) -> dict[str, int]:
    """The site's topics that are mirrors of ``link`` (``strait.mirror.link`` equals it)."""
    counts = partition_counts(site)
    configs = await overrides(site, counts)
    return {t: n for t, n in counts.items() if configs.get(t, {}).get(LINK_KEY) == link}


async def set_keys(
    site: SiteClient, topics: Iterable[str], set_: Mapping[str, str], delete: Iterable[str] = ()
) -> list[str]:
    """Make every topic's overrides hold ``set_`` and lack ``delete``; returns the topics changed.

    Raises:
        FailoverError: a topic refused the change (names the topic, the site and the reason).
    """
    names = sorted(set(topics))
    current = await overrides(site, names)
    admin = AdminClient(site)
    changed = []
    for name in names:
        have = current.get(name, {})
        to_set = {k: v for k, v in set_.items() if have.get(k) != v}
        to_delete = [k for k in delete if k in have]
        if not to_set and not to_delete:
            continue
        try:
            await admin.alter_topic_configs(name, dict(to_set), to_delete)
        except ClientError as exc:
            raise FailoverError(
                f"site {site.name}: changing topic {name!r} ({sorted(to_set)} {to_delete}): {exc}"
            ) from None
        changed.append(name)
    return changed


async def high_watermarks(site: SiteClient, topics: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """Every partition's high watermark (ListOffsets latest); raises FailoverError naming a failing one."""
    admin = AdminClient(site)
    ends: dict[tuple[str, int], int] = {}
    for topic, count in sorted(topics.items()):
        try:
            found = await admin.list_offsets(topic, list(range(count)), LATEST)
        except ClientError as exc:
            raise FailoverError(f"site {site.name}: reading the end offsets of {topic!r}: {exc}") from None
        for p, end in found.items():
            ends[(topic, p)] = int(end)
    return ends


async def stable_offsets(site: SiteClient, topics: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """Every partition's last stable offset (ListOffsets latest, read_committed): below the high
    watermark while a transaction is open there. Raises FailoverError naming a failing topic."""
    ends: dict[tuple[str, int], int] = {}
    for topic, count in sorted(topics.items()):
        try:
            found = await list_offsets(site, topic, list(range(count)), LATEST, isolation_level=READ_COMMITTED)
        except ClientError as exc:
            raise FailoverError(f"site {site.name}: reading the last stable offsets of {topic!r}: {exc}") from None
        for p, end in found.items():
            ends[(topic, p)] = int(end)
    return ends


def fence_text(old: str, new: Site, link: str, epoch: int, now_ms: int) -> str:
    """What a producer to a fenced topic reads: who took over, and where to produce now."""
    when = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f"site {old} was failed over to {new.name} (link {link}, DR epoch {epoch}, {when}); produce to {new.name}: "
    room = MAX_FENCE_TEXT - len(text)
    bootstrap = new.bootstrap if len(new.bootstrap) <= room else new.bootstrap[: max(0, room - 3)] + "..."
    return text + bootstrap
