"""The DR status page's data: the DR status source the mirror process is given, and its cache.

The numbers of the DR page are those of ``strait failover status --json``: the same
computation (``failover.status.link_status``), never a second one. The mirror cannot import
``failover/`` (failover sits above it), so the process that runs the mirror hands
``MirrorService`` a **DR status source**: an async callable ``(link name) -> the failover
status of that link`` (``strait mirror start`` builds one over the running links' configs and
the mirror's own in-process status). Without one (``MirrorService`` used as a library)
``GET /v1/dr`` answers 501.

The routes (``mirror._admin``; read-only, no token, like the other GETs)::

    GET /dr                              the page (text/html; inline CSS and JS pinned by hash in a
                                         strict Content-Security-Policy; it fetches only the two below)
    GET /v1/dr                           {"links": [failover status of each running link], "member_id"}
    GET /v1/links/{name}/lag-history     the link's lag over time (``mirror._lag_history``)

A link whose DR status could not be computed (the source raised, or took longer than
``DR_TIMEOUT_S``) is answered as ``{"format": 1, "link": {"name": ...}, "at_ms", "error": <why>}``
in the list: the page shows why, the other links still show. Each link's status is computed
by one task at a time and a result younger than ``max_age_s`` is answered again, so any number
of open pages costs at most one computation per link every ``max_age_s``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ._config import MirrorError
from ._dr_page import CONTENT_SECURITY_POLICY

__all__ = [
    "DR_TIMEOUT_S",
    "DrStatusSource",
    "DrStatuses",
    "DrUnavailable",
    "DrView",
    "PAGE_HEADERS",
]

log = logging.getLogger("strait.mirror.dr")

DrStatusSource = Callable[[str], Awaitable[dict[str, Any]]]
"""``(link name) -> {"format": 1, "link": {...}, "link_state", "partitions", "rpo", "dr", ...}``:
what ``strait failover status --json`` answers for that link. May raise; may be cancelled."""

DR_TIMEOUT_S = 60.0  # a link's DR status that takes longer is answered as an error
DEFAULT_MAX_AGE_S = 2.0
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class DrUnavailable(MirrorError):
    """This mirror process was given no DR status source (501)."""


class DrView(Protocol):
    """What the DR routes read; implemented by ``MirrorService``. ``UnknownLink`` becomes a 404."""

    async def dr_status(self) -> dict[str, Any]:
        """``{"links": [failover status, ...], "member_id"}``; raises DrUnavailable."""
        ...

    def lag_history(self, name: str) -> dict[str, Any]:
        """The link's lag history (``mirror._lag_history``); raises UnknownLink."""
        ...


class DrStatuses:
    """The DR status of each link through ``source``: one computation per link at a time, and a
    result younger than ``max_age_s`` answered again. Never raises for a link (the answer
    carries the error); cancellation of one caller does not lose the others' answer."""

    def __init__(
        self,
        source: DrStatusSource,
        *,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        timeout_s: float = DR_TIMEOUT_S,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._source = source
        self._max_age_s = max_age_s
        self._timeout_s = timeout_s
        self._clock_ms = clock_ms
        self._done: dict[str, tuple[float, dict[str, Any]]] = {}  # link -> (trio time, answer)
        self._running: dict[str, trio.Event] = {}
        self._last_error: dict[str, str] = {}

    async def of(self, name: str) -> dict[str, Any]:
        """Link ``name``'s DR status, or ``{"format", "link", "at_ms", "error"}`` saying why not."""
        while True:
            done = self._done.get(name)
            if done is not None and trio.current_time() - done[0] < self._max_age_s:
                return done[1]
            running = self._running.get(name)
            if running is None:
                break
            await running.wait()  # then take its answer; if its caller was cancelled, compute it here
        event = self._running[name] = trio.Event()
        try:
            answer = await self._compute(name)
            self._done[name] = (trio.current_time(), answer)
            return answer
        finally:
            del self._running[name]
            event.set()

    async def _compute(self, name: str) -> dict[str, Any]:
        try:
            with trio.fail_after(self._timeout_s):
                answer = await self._source(name)
        except trio.TooSlowError:
            self._failed(name, f"the DR status of link {name!r} took longer than {self._timeout_s:g} s")
        except Exception as exc:  # the page must say what went wrong, not fail as a whole
            self._failed(name, f"the DR status of link {name!r} failed: {_describe(exc)}", details=True)
        else:
            self._last_error.pop(name, None)
            return answer
        return {"format": 1, "link": {"name": name}, "at_ms": self._clock_ms(), "error": self._last_error[name]}

    def _failed(self, name: str, error: str, *, details: bool = False) -> None:
        if self._last_error.get(name) != error:  # logged once, not at every refresh of every page
            log.warning("%s", error, exc_info=details)
        self._last_error[name] = error

    def forget(self, name: str) -> None:
        self._done.pop(name, None)
        self._last_error.pop(name, None)


def _describe(exc: BaseException) -> str:
    """The message of ``exc``, or of the one exception a group of one holds (a nursery's)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc) or repr(exc)
