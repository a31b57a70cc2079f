"""The mirror benchmark's settings and measurements: what ``bench.mirror_bench`` records and
``bench._mirror_report`` turns into goals, tables and the report (neither imports the other's types)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._clients import PRODUCER_SETTINGS
from ._mirror_lag import LagFigures, kept_up
from ._site import REPLICATED

CLIENT_ID = "strait-mirror-bench"
ON_RATE = 0.95  # a lag run whose producer sent less than this share of its target rate tests a lower rate


@dataclass(frozen=True)
class Settings:
    nodes: int
    records: int
    runs: int
    lag_seconds: float
    wan_rtt_ms: int
    wan_jitter_ms: int
    linger_ms: int
    batch_bytes: int
    profile: str  # auto, always, never
    profile_rate: int
    timeout_s: float
    out: Path | None
    base_dir: Path
    zk_port: int
    zookeeper: str | None
    strait: Path
    note: str | None
    quick: bool
    argv: tuple[str, ...]
    link_settings: dict[str, int] = field(default_factory=dict)  # --link KEY=VALUE: the link's own settings

    def producer_config(self, bootstrap: str) -> dict[str, Any]:
        return PRODUCER_SETTINGS | {
            "client.id": CLIENT_ID,
            "bootstrap.servers": bootstrap,
            "acks": REPLICATED.acks,
            "enable.idempotence": REPLICATED.idempotent,
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_bytes,
        }


@dataclass(frozen=True)
class Appends:
    """West's MirrorAppend answers over a span: how many, their mean time, how many were slow."""

    count: int
    mean_ms: float
    over_100ms: int
    over_500ms: int

    @staticmethod
    def between(before: dict[str, float], after: dict[str, float]) -> Appends:
        d = {k: after[k] - before[k] for k in after}
        count = round(d["appends"])
        return Appends(
            count,
            1e3 * d["seconds"] / count if count else 0.0,
            round(d["appends"] - d["within_100ms"]),
            round(d["appends"] - d["within_500ms"]),
        )


@dataclass
class Fill:
    """One side-by-side run: the site producing ``records`` records, then the mirror copying them."""

    run: int
    wan_rtt_ms: int  # the WAN latency of the catch-up copy (0: the baseline)
    produced: int  # timed records the site took
    records: int  # in the topic: those and the warm-up records, all copied by the mirror
    site_seconds: float
    mirror_seconds: float  # resume -> west's high watermarks equal east's
    first_record_s: float  # resume -> the first record readable on west
    site_cores: dict[str, float]  # while producing
    mirror_cores: dict[str, float]  # while copying
    mirror_cpu_s: float
    mirror_errors: int
    bytes_copied: int
    appends: Appends  # west's MirrorAppend answers while copying
    profiled: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def site_rate(self) -> float:
        return self.produced / self.site_seconds

    @property
    def mirror_rate(self) -> float:
        return self.records / self.mirror_seconds

    @property
    def ratio(self) -> float:
        return self.mirror_rate / self.site_rate

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"site_rate": self.site_rate, "mirror_rate": self.mirror_rate, "ratio": self.ratio}


@dataclass
class LagRun:
    run: int
    fraction: float
    target_rate: float
    sent_rate: float
    records: int
    every: int  # one record in ``every`` sampled
    figures: LagFigures
    drain_s: float | None  # the producer's last acknowledgement -> west holds everything; None: not in time
    cores: dict[str, float]
    mirror_cpu_s: float
    mirror_errors: int
    mirror_latency_ms: dict[str, float | None]  # the mirror's own histogram (bucket upper bounds)
    appends: Appends  # west's MirrorAppend answers while the producer ran
    profiled: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def kept_up(self) -> bool:
        return kept_up(self.figures, self.drain_s)

    @property
    def on_rate(self) -> bool:
        """East took (nearly) the rate asked for: the run tests the mirror at that rate."""
        return self.sent_rate >= ON_RATE * self.target_rate

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"kept_up": self.kept_up, "on_rate": self.on_rate, "growth_ms": self.figures.growth_ms}


@dataclass
class ProcessProfile:
    phase: str  # "catch-up copy" or "80 % lag run"
    process: str  # "mirror" or "proxy"
    cpu_pct: float
    samples: int
    idle_pct: float
    other_busy_pct: float
    places: list[dict[str, Any]]
    functions: list[dict[str, Any]]


@dataclass
class Results:
    fills: list[Fill] = field(default_factory=list)
    lags: list[LagRun] = field(default_factory=list)
    profile_fills: list[Fill] = field(default_factory=list)
    profile_lag: LagRun | None = None
    profiles: list[ProcessProfile] = field(default_factory=list)
    loadavg_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    loadavg_end: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def site_rate(self) -> float:
        return statistics.median(f.site_rate for f in self.fills)

    def fills_at(self, rtt_ms: int) -> list[Fill]:
        return [f for f in self.fills if f.wan_rtt_ms == rtt_ms]

    def catch_up_ratios(self, rtt_ms: int) -> list[tuple[int, float]]:
        """(run, mirror records/s at ``rtt_ms`` / at 0 ms) for every run that copied at both."""
        base = {f.run: f.mirror_rate for f in self.fills_at(0)}
        return [(f.run, f.mirror_rate / base[f.run]) for f in self.fills_at(rtt_ms) if f.run in base]
