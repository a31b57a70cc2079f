"""The fencer of a failed-over link: keeps every source topic the link selects fenced.

After a failover the *old source* must stop taking writes: producers still pointed at it
would write records the new primary never sees. A node refuses every Produce to a topic
whose ``strait.fenced`` config is set (POLICY_VIOLATION, the value quoted in the message), so
the fencer sets ``strait.fenced=<fence text>`` on each topic the link selects:

1. as soon as the source answers (a source that is down is retried every second), and then
2. every sync interval, to fence topics created since and to put back a fence someone removed.

A topic that already carries a fence (any value: another tool or an operator fenced it) counts
as fenced and is left as it is. The fencer never removes a fence: lifting one is a deliberate
act of the failover tooling, never a side effect.

``Fencer.status()`` is the link status's ``fence``: ``{"state": "off" | "pending" | "fenced",
"topics": [...], "last_error", "fenced_ms"}``; ``pending`` until every selected topic is
fenced, ``fenced_ms`` the time that first happened.
"""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol

import trio

from node.client import ClientError

from ._config import LinkConfig, MirrorError

log = logging.getLogger("strait.mirror.fencer")

#: The topic config key a node refuses Produce on (node/config/_topic.py).
FENCE_KEY = "strait.fenced"
MAX_FENCE_TEXT = 1024
#: How often a fencer retries while some selected topic is not fenced yet (the source down, ...).
PENDING_RETRY_S = 1.0

OFF = "off"
PENDING = "pending"
FENCED = "fenced"


def check_fence_text(text: object, where: str = "fence") -> str:
    """``text`` if it can be a ``strait.fenced`` value (1-1024 characters, no control characters);
    raises MirrorError naming ``where`` and the problem otherwise."""
    if not isinstance(text, str):
        raise MirrorError(f"{where}: must be a string (the reason, and where to produce instead), not {text!r}")
    if not 1 <= len(text) <= MAX_FENCE_TEXT:
        raise MirrorError(f"{where}: must be 1-{MAX_FENCE_TEXT} characters, got {len(text)}")
    for i, char in enumerate(text):
        if unicodedata.category(char) == "Cc":
            raise MirrorError(f"{where}: control character {char!r} at position {i}: the text must be one line")
    return text


def off_status() -> dict[str, Any]:
    """The ``fence`` status of a link that runs no fencer."""
    return {"state": OFF, "topics": [], "last_error": None, "fenced_ms": None}


def default_fence_text(config: LinkConfig, at_ms: int) -> str:
    """The fence text when a failover names none: which site failed over where, and where to produce."""
    when = datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = (
        f"site {config.source.name} was failed over to {config.target.name} (link {config.name}, {when}); "
        f"produce to {config.target.name}: {config.target.bootstrap}"
    )
    return text[:MAX_FENCE_TEXT]


class FenceAdmin(Protocol):
    """What the fencer needs of the old source site (``node.client.AdminClient`` on its SiteClient)."""

    async def list_topics(self) -> list[str]: ...

    async def topic_overrides(self, topics: list[str]) -> dict[str, dict[str, str] | ClientError]: ...

    async def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None: ...


class Fencer:
    """Fences the topics of ``admin``'s site that ``selects`` picks, with ``text``.

    ``on_contact(ok)`` is told after each attempt whether the site answered (the link's
    ``source_reachable``). ``text`` may be changed between checks (a repeated failover with
    another text): topics fenced from then on get the new one.
    """

    def __init__(
        self,
        link: str,
        admin: FenceAdmin,
        selects: Callable[[str], bool],
        text: str,
        *,
        interval_s: float,
        on_contact: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.link = link
        self.admin = admin
        self.selects = selects
        self.text = check_fence_text(text)
        self.interval_s = interval_s
        self.on_contact = on_contact
        self.clock = clock
        self.state = PENDING
        self.topics: list[str] = []
        self.last_error: str | None = None
        self.fenced_ms: int | None = None
        self.checks = 0

    async def run(self) -> NoReturn:
        """Check until cancelled: every ``PENDING_RETRY_S`` while pending, every ``interval_s`` once fenced."""
        while True:
            await self.check_once()
            await trio.sleep(self.interval_s if self.state == FENCED else min(self.interval_s, PENDING_RETRY_S))

    async def check_once(self) -> None:
        """One pass: list the selected topics, fence those without a fence. Never raises a site's
        error (it becomes ``last_error``); cancellable."""
        self.checks += 1
        try:
            names = sorted(t for t in await self.admin.list_topics() if self.selects(t))
            overrides = await self.admin.topic_overrides(names)
        except (ClientError, OSError) as exc:
            self._contact(False)
            self._failed(f"cannot read the topics of the old source: {exc}", unreachable=True)
            return
        self._contact(True)
        fenced: list[str] = []
        errors: list[str] = []
        for name in names:
            found = overrides.get(name)
            if isinstance(found, ClientError):
                errors.append(f"{name}: {found}")
                continue
            if found is None:
                errors.append(f"{name}: the source did not describe its configs")
                continue
            if found.get(FENCE_KEY):
                fenced.append(name)
                continue
            try:
                await self.admin.alter_topic_configs(name, {FENCE_KEY: self.text}, [])
            except (ClientError, OSError) as exc:
                errors.append(f"{name}: {exc}")
                continue
            log.warning("link %s: fenced topic %s on the old source: %s=%r", self.link, name, FENCE_KEY, self.text)
            fenced.append(name)
        self.topics = fenced
        if errors:
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            self._failed(f"could not fence {len(errors)} topic(s): {'; '.join(errors[:3])}{more}")
            return
        if self.state != FENCED:
            log.info("link %s: every selected topic of the old source is fenced: %s", self.link, fenced)
        self.state = FENCED
        self.last_error = None
        if self.fenced_ms is None:
            self.fenced_ms = int(self.clock() * 1000)

    def _failed(self, error: str, *, unreachable: bool = False) -> None:
        if error != self.last_error:
            log.warning("link %s: fencer: %s", self.link, error)
        self.last_error = error
        # Fences already set stay on the nodes while the source cannot be reached: a fenced link
        # stays fenced then. A topic found unfenced, or that could not be fenced, makes it pending.
        if not (unreachable and self.state == FENCED):
            self.state = PENDING

    def _contact(self, ok: bool) -> None:
        if self.on_contact is not None:
            self.on_contact(ok)

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "topics": list(self.topics),
            "last_error": self.last_error,
            "fenced_ms": self.fenced_ms,
        }
