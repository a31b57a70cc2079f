"""A live site's topics as a job's driver sees them before it plans a read or a write: which exist,
their partitions with log start and end (high watermark), and their timestamp type.

Asked once, in the driver, through ``node.client`` (the executors read and write through the
``strait-kafka`` data source). A job plans from this snapshot, so what it reads is a fixed range
even while clients keep writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import trio

from node.client import AdminClient, ClientError, ClientSecurity, SecurityConfigError, SiteClient

CLIENT_ID = "strait-audit"
LOG_APPEND_TIME = "LogAppendTime"


class SiteUnreachable(Exception):
    """The site did not answer (no broker, or a partition without a leader): exit status 3."""


@dataclass(frozen=True)
class SiteTopic:
    name: str
    #: partition -> (log start offset, log end offset = high watermark)
    partitions: dict[int, tuple[int, int]]
    timestamp_type: str  # CreateTime | LogAppendTime (message.timestamp.type)

    @property
    def log_append_time(self) -> bool:
        return self.timestamp_type == LOG_APPEND_TIME


def describe_topics(
    bootstrap: str,
    topics: list[str],
    *,
    option: str = "--site",
    timeout_s: float = 30.0,
    security: ClientSecurity | None = None,
) -> dict[str, SiteTopic | None]:
    """Each of ``topics`` on the site at ``bootstrap``, reached as ``security`` says (default
    PLAINTEXT); None when the site has no such topic.

    Raises SiteUnreachable naming ``option`` and the site when no broker answers within
    ``timeout_s`` (a refused TLS handshake or SASL authentication among the reasons), or when
    a partition's leader does not tell its offsets. Blocks (runs trio).
    """
    try:
        secured = (security or ClientSecurity()).site_client_kwargs()
    except SecurityConfigError as exc:
        raise SiteUnreachable(f"{option} {bootstrap}: {exc}") from None
    try:
        return trio.run(_describe, bootstrap, topics, timeout_s, secured)
    except (ClientError, trio.TooSlowError) as exc:
        reason = f"no answer within {timeout_s:g} s" if isinstance(exc, trio.TooSlowError) else str(exc)
        raise SiteUnreachable(f"{option} {bootstrap}: {reason}") from None
    except _NoOffsets as exc:
        raise SiteUnreachable(f"{option} {bootstrap}: {exc}") from None


class _NoOffsets(Exception):
    pass


async def _describe(
    bootstrap: str, topics: list[str], timeout_s: float, secured: dict[str, Any]
) -> dict[str, SiteTopic | None]:
    site = SiteClient("site", bootstrap, client_id=CLIENT_ID, timeout=min(10.0, timeout_s), **secured)
    try:
        with trio.fail_after(timeout_s):
            known = await site.refresh(sorted(set(topics))) if topics else {}
            admin = AdminClient(site)
            out: dict[str, SiteTopic | None] = dict.fromkeys(topics)
            for name in sorted(known):
                described = await admin.describe_topic(name)
                partitions = {}
                for p in described.partitions:
                    if p.log_start_offset < 0 or p.high_watermark < 0:
                        raise _NoOffsets(f"{name}-{p.partition} has no leader that tells its offsets")
                    partitions[p.partition] = (int(p.log_start_offset), int(p.high_watermark))
                value, _source = described.configs.get("message.timestamp.type", ("CreateTime", "default"))
                out[name] = SiteTopic(name, partitions, value or "CreateTime")
            return out
    finally:
        await site.aclose()
