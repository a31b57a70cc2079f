"""The scale benchmark's arithmetic: how a figure grows from one step of work to the next.

Pure functions, no processes: the growth factor of a cost against the growth of the work that
caused it (:func:`growth_steps`), the flag for a step that grows faster than the work
(superlinear), the slope that gives memory per idle partition or connection (:func:`slopes`),
and the percentiles of a list of timings.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ._report import percentile


@dataclass(frozen=True)
class Growth:
    """One step of a curve: from ``work0`` to ``work1`` the cost went from ``value0`` to ``value1``."""

    metric: str
    work0: float
    work1: float
    value0: float
    value1: float

    @property
    def work_factor(self) -> float:
        return self.work1 / self.work0

    @property
    def value_factor(self) -> float | None:
        """value1 / value0; None when value0 is not positive (no factor can be given)."""
        return self.value1 / self.value0 if self.value0 > 0 else None

    @property
    def superlinear(self) -> bool:
        """The cost grew by more than the work did."""
        factor = self.value_factor
        return factor is not None and factor > self.work_factor

    def flag(self) -> str:
        """``"superlinear: <metric> x<k> for x<n> work"`` when superlinear, else ``""``."""
        if not self.superlinear:
            return ""
        return f"superlinear: {self.metric} x{_factor(self.value_factor)} for x{_factor(self.work_factor)} work"


def _factor(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def factor_text(x: float | None) -> str:
    """A growth factor as the report prints it: ``x2.5``, ``x1,234``, or ``-``."""
    return "-" if x is None else f"x{_factor(x)}"


def growth_steps(metric: str, points: Sequence[tuple[float, float | None]]) -> list[Growth]:
    """The growth between consecutive measured points of ``(work, value)``, in the order given.

    A point whose value is None (not measured) is skipped: the next measured point is compared
    with the last measured one. Raises ``ValueError`` if the work does not strictly increase
    or is not positive."""
    measured = [(w, v) for w, v in points if v is not None]
    works = [w for w, _ in points]
    if any(w <= 0 for w in works) or any(b <= a for a, b in itertools.pairwise(works)):
        raise ValueError(f"{metric}: work must be positive and strictly increasing, got {works}")
    return [Growth(metric, w0, w1, v0, v1) for (w0, v0), (w1, v1) in itertools.pairwise(measured)]


def slopes(points: Sequence[tuple[float, float | None]]) -> list[tuple[float, float, float]]:
    """(work0, work1, (value1 - value0) / (work1 - work0)) between consecutive measured points:
    the cost of one more unit of work (bytes per partition, per connection). Raises
    ``ValueError`` if the work does not strictly increase."""
    measured = [(w, v) for w, v in points if v is not None]
    if any(b[0] <= a[0] for a, b in itertools.pairwise(measured)):
        raise ValueError(f"work must strictly increase, got {[w for w, _ in measured]}")
    return [(w0, w1, (v1 - v0) / (w1 - w0)) for (w0, v0), (w1, v1) in itertools.pairwise(measured)]


def p50_p99(timings: Sequence[float]) -> tuple[float, float]:
    """Nearest-rank p50 and p99 of ``timings``; raises ``ValueError`` when there are none."""
    ordered = sorted(timings)
    return percentile(ordered, 0.50), percentile(ordered, 0.99)
