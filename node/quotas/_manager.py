"""Client quota enforcement on one node: rates per quota entity and the throttle time they ask for.

Kafka keeps one quota manager per kind of quota (KIP-13 byte rates, KIP-124 request time) on
every broker, each measuring its own rates: a quota is a per-node limit, so a client spread over
three leaders may move three times its byte rate in all, as in Kafka. :class:`QuotaManager` is
that, for the three kinds strait enforces (:class:`QuotaKind`):

* ``produce``: the bytes of each Produce request (the whole request, as Kafka's ``sizeInBytes``);
* ``fetch``: the bytes of each Fetch response to a consumer (a follower's fetch is never counted);
* ``request``: the time the node spent on each request, as a percentage of one thread.

Each request is recorded on the rate of the entity whose quota applies (:func:`._entity.resolve`);
a request without a quota is not recorded at all, so a node without quotas pays one dict look-up
per request. When a rate is above its quota, :meth:`QuotaManager.record` returns the time the
connection must stay muted for the rate to come back to it (:mod:`._rate`), the longest one when
several are over; the caller puts it in ``throttle_time_ms`` and mutes the connection (KIP-219).

Threads: :meth:`QuotaManager.update` may be called from any thread (it replaces two dicts, the
look-ups read each once); everything else runs on the node's trio thread.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from ._entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, Quotas, RateKey, resolve
from ._rate import SampledRate

#: A rate not recorded on for this long is dropped (Kafka expires quota sensors after an hour).
IDLE_RATE_S = 3600.0
#: A safety bound on a byte rate's throttle (one request far over a quota that was just lowered):
#: the connection is muted for at most this long, and ``throttle_time_ms`` stays an int32.
MAX_BYTE_THROTTLE_S = 3600.0
_PRUNE_EVERY = 4096  # records between two looks for idle rates


class QuotaKind(enum.Enum):
    """A kind of quota: its name in metrics, and the key that sets it."""

    PRODUCE = ("produce", PRODUCER_BYTE_RATE)
    FETCH = ("fetch", CONSUMER_BYTE_RATE)
    REQUEST = ("request", REQUEST_PERCENTAGE)

    def __init__(self, label: str, key: str) -> None:
        self.label = label
        self.key = key


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    """``quota.window.num`` windows of ``quota.window.size.seconds`` each."""

    window_num: int = 11
    window_s: float = 1.0

    @property
    def span_s(self) -> float:
        """The whole measured span: a window older than this counts for nothing."""
        return self.window_num * self.window_s

    def max_throttle_s(self, kind: QuotaKind) -> float:
        """The longest one request may mute its connection for. A request quota's throttle is at
        most one window, as Kafka bounds it (handler time cannot be sized down by the client); a
        byte rate's is what its formula asks (Kafka bounds neither), up to MAX_BYTE_THROTTLE_S."""
        return self.window_s if kind is QuotaKind.REQUEST else MAX_BYTE_THROTTLE_S


@dataclass(frozen=True, slots=True)
class Usage:
    """What one request costs, by kind; zero where it does not count."""

    produce_bytes: int = 0
    fetch_bytes: int = 0
    handler_s: float = 0.0


@dataclass(slots=True)
class _Rate:
    rate: SampledRate
    last_used: float
    quota: float  # at the latest record


_Resolved = tuple[float, RateKey] | None


class QuotaManager:
    """Rates and quotas of one node. ``clock`` is monotonic seconds."""

    def __init__(self, settings: QuotaSettings = QuotaSettings(), clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._quotas: Quotas = {}
        self._resolved: dict[tuple[QuotaKind, str, str], _Resolved] = {}
        self._rates: dict[tuple[QuotaKind, RateKey], _Rate] = {}
        self._records = 0
        #: Throttle time asked for (seconds) and how many times, by kind: for the node's metrics.
        self.throttle_s: dict[QuotaKind, float] = dict.fromkeys(QuotaKind, 0.0)
        self.throttled: dict[QuotaKind, int] = dict.fromkeys(QuotaKind, 0)

    @property
    def quotas(self) -> Quotas:
        return self._quotas

    def update(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` (every entity's keys) from now on; any thread. Rates measured so far
        are kept: a quota lowered applies to what was already moved."""
        self._quotas = quotas
        self._resolved = {}

    @property
    def active(self) -> bool:
        """Whether any quota is set (else there is nothing to record)."""
        return bool(self._quotas)

    def quota(self, kind: QuotaKind, user: str, client_id: str) -> float | None:
        """The quota of ``kind`` for ``user`` with ``client_id``, None when unlimited."""
        resolved = self._resolve(kind, user, client_id)
        return None if resolved is None else resolved[0]

    def fetch_cap(self, user: str, client_id: str) -> int | None:
        """The most bytes one Fetch response to this consumer should hold: one window's worth of
        its quota (Kafka's ``getMaxValueInQuotaWindow``), so that a single response cannot ask
        for a throttle much longer than the span; None without a quota."""
        quota = self.quota(QuotaKind.FETCH, user, client_id)
        return None if quota is None else max(1, int(quota * self.settings.window_s))

    def record(self, user: str, client_id: str, usage: Usage) -> float:
        """Record ``usage`` on the rates whose quotas apply; the seconds to mute the connection
        for (0 within every quota), at most ``settings.max_throttle_s`` of each kind."""
        if not self._quotas:
            return 0.0
        throttle = 0.0
        now = self._clock()
        for kind, value in (
            (QuotaKind.PRODUCE, usage.produce_bytes),
            (QuotaKind.FETCH, usage.fetch_bytes),
            (QuotaKind.REQUEST, usage.handler_s * 100.0),
        ):
            if value <= 0:
                continue
            resolved = self._resolve(kind, user, client_id)
            if resolved is None:
                continue
            quota, rate_key = resolved
            held = self._rates.get((kind, rate_key))
            if held is None:
                settings = self.settings
                held = self._rates[kind, rate_key] = _Rate(
                    SampledRate(settings.window_num, settings.window_s), now, quota
                )
            held.last_used, held.quota = now, quota
            held.rate.record(value, now)
            wait = min(held.rate.throttle_s(quota, now), self.settings.max_throttle_s(kind))
            if wait > 0:
                self.throttle_s[kind] += wait
                self.throttled[kind] += 1
                throttle = max(throttle, wait)
        self._records += 1
        if self._records % _PRUNE_EVERY == 0:
            self._prune(now)
        return throttle

    def rates(self) -> list[tuple[str, str, str, float, float]]:
        """``(kind, user, client id, rate per second, quota)`` of every rate measured: for metrics."""
        now = self._clock()
        found = []
        for (kind, (user, client_id)), held in sorted(self._rates.items(), key=lambda i: (i[0][0].label, i[0][1])):
            found.append((kind.label, user, client_id, held.rate.rate(now), held.quota))
        return found

    def throttle_totals(self) -> list[tuple[str, float, int]]:
        """``(kind, seconds of throttle asked, answers throttled)`` for each kind: for metrics."""
        return [(kind.label, self.throttle_s[kind], self.throttled[kind]) for kind in QuotaKind]

    def _resolve(self, kind: QuotaKind, user: str, client_id: str) -> _Resolved:
        cache = self._resolved  # read before the quotas: an update replaces the quotas first
        try:
            return cache[kind, user, client_id]
        except KeyError:
            pass
        resolved = resolve(self._quotas, kind.key, user, client_id)
        cache[kind, user, client_id] = resolved
        return resolved

    def _prune(self, now: float) -> None:
        idle = [key for key, held in self._rates.items() if now - held.last_used > IDLE_RATE_S]
        for key in idle:
            del self._rates[key]
