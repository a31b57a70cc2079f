"""What a checker reports: anomalies (named, described, with their records and the faults near them) and a verdict.

A checker function returns :class:`Findings`: how many things it examined and one
:class:`Finding` per anomaly. The registry turns each finding into an :class:`Anomaly` by adding
``near`` (the faults around the finding's operations), and the lot into a :class:`CheckerResult`.

Results stay readable when a run goes badly: consecutive records with the same fault are one
finding with a ``count`` (a partition that lost 10,000 writes is one anomaly, not 10,000), a
finding lists at most :data:`RECORD_LIMIT` records (the first and last ones), and a result lists
at most :data:`ANOMALY_LIMIT` anomalies. Counts stay exact: ``Anomaly.count`` is how many records
(or events) the anomaly stands for and ``CheckerResult.count`` their sum over every anomaly found,
listed or not.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from ._view import Span

__all__ = [
    "ANOMALY_LIMIT",
    "RECORD_LIMIT",
    "Anomaly",
    "CheckerResult",
    "Finding",
    "Findings",
    "Verdict",
    "offsets_text",
    "plural",
    "runs",
    "sample",
    "site_text",
]

#: Records listed per anomaly: the first half and the last half of them.
RECORD_LIMIT = 10
#: Anomalies listed per checker (the rest are counted in ``CheckerResult.omitted`` and ``count``).
ANOMALY_LIMIT = 100

Verdict = Literal["pass", "fail", "skipped"]
T = TypeVar("T")


@dataclass(frozen=True)
class Anomaly:
    """One anomaly: which checker found it, its name (Jepsen's where it means the same), a sentence, the evidence.

    ``records`` are the records involved (topic, partition, offset, value, process, index: the
    history entry, op: send/poll/read/export/commit, site); ``near`` the nemesis and failover
    entries whose interval covers or lies within 5 s of the records' operations; ``count`` how
    many records or events this anomaly stands for (``records`` lists at most ten of them).
    """

    checker: str
    name: str
    description: str
    records: tuple[dict[str, Any], ...] = ()
    near: tuple[dict[str, Any], ...] = ()
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "checker": self.checker,
            "name": self.name,
            "description": self.description,
            "count": self.count,
            "records": [dict(record) for record in self.records],
            "near": [dict(entry) for entry in self.near],
        }


@dataclass(frozen=True)
class CheckerResult:
    """One checker's verdict on one history.

    ``verdict`` is "fail" when it found an anomaly, "skipped" when the history held nothing it
    could examine (``checked`` is 0: no consumer group, no mirror read, no promote...), else
    "pass". ``checked`` counts what it examined (records, operations: the docstring of each
    checker says which).
    """

    name: str
    description: str
    verdict: Verdict
    checked: int
    anomalies: tuple[Anomaly, ...] = ()
    count: int = 0  # records or events found anomalous, over every anomaly (listed or not)
    omitted: int = 0  # anomalies found beyond ANOMALY_LIMIT, not listed

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "verdict": self.verdict,
            "checked": self.checked,
            "count": self.count,
            "omitted": self.omitted,
            "anomalies": [anomaly.to_json() for anomaly in self.anomalies],
        }


@dataclass(frozen=True)
class Finding:
    """An anomaly before the faults near it are known: ``spans`` are its operations' intervals."""

    name: str
    description: str
    records: Sequence[dict[str, Any]]
    spans: Sequence[Span] = ()
    count: int = 1


class Findings(NamedTuple):
    """What a checker function returns: how many things it examined, and its findings."""

    checked: int
    found: list[Finding]


def sample(items: Sequence[T], limit: int = RECORD_LIMIT) -> list[T]:
    """``items`` when there are at most ``limit``, else the first and the last ``limit // 2``."""
    if len(items) <= limit:
        return list(items)
    half = limit // 2
    return [*items[:half], *items[len(items) - (limit - half) :]]


def runs(items: Iterable[T], key: Callable[[T], Hashable], rank: Callable[[T], int]) -> list[list[T]]:
    """``items`` split into runs: the same ``key`` and ranks that follow each other (or repeat).

    Runs come in order of their key's first appearance, each sorted by rank.
    """
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    out: list[list[T]] = []
    for group in groups.values():
        group.sort(key=rank)
        current = [group[0]]
        for item in group[1:]:
            if rank(item) <= rank(current[-1]) + 1:
                current.append(item)
            else:
                out.append(current)
                current = [item]
        out.append(current)
    return out


def offsets_text(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}..{last}"


def site_text(site: str | None) -> str:
    return site if site is not None else "the site (not recorded)"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
