"""The checkers by name, in the order a report lists them, and :func:`check`, which runs them on a history."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from chaos.history import History

from ._anomaly import ANOMALY_LIMIT, Anomaly, CheckerResult, Findings
from ._group import commit_regression, skipped_read, unseen
from ._order import nonmonotonic_poll, nonmonotonic_send
from ._positions import duplicate, inconsistent_offsets
from ._sites import mirror_divergence, rpo_accuracy
from ._txn import exactly_once
from ._view import CheckerError, View
from ._writes import lost_write, moved

__all__ = ["CHECKERS", "Checker", "check"]


@dataclass(frozen=True)
class Checker:
    """A named checker: a pure function of a history (no I/O, no clock), with a one-line description."""

    name: str
    description: str
    examine: Callable[[View], Findings]

    def __call__(self, history: History) -> CheckerResult:
        """This checker's verdict on ``history``; raises CheckerError on an entry it cannot read."""
        return self.run(View(history))

    def run(self, view: View) -> CheckerResult:
        """This checker's verdict on a parsed history (``check`` parses once for every checker)."""
        checked, found = self.examine(view)
        anomalies = tuple(
            Anomaly(
                checker=self.name,
                name=finding.name,
                description=finding.description,
                records=tuple(finding.records),
                near=view.near(finding.spans),
                count=finding.count,
            )
            for finding in found[:ANOMALY_LIMIT]
        )
        return CheckerResult(
            name=self.name,
            description=self.description,
            verdict="fail" if found else ("pass" if checked else "skipped"),
            checked=checked,
            anomalies=anomalies,
            count=sum(finding.count for finding in found),
            omitted=max(0, len(found) - ANOMALY_LIMIT),
        )


#: Every checker by name, in report order.
CHECKERS: Mapping[str, Checker] = MappingProxyType(
    {
        checker.name: checker
        for checker in (
            Checker("lost-write", "every acknowledged write is in the primary's final read", lost_write),
            Checker("duplicate", "no value is at two offsets of one site", duplicate),
            Checker(
                "inconsistent-offsets",
                "no offset of one site holds two values, across acknowledgements, polls and reads",
                inconsistent_offsets,
            ),
            Checker("moved", "every acknowledged write is read back at the offset acknowledged", moved),
            Checker(
                "nonmonotonic-send",
                "each producer's acknowledged offsets of a partition increase in invoke order",
                nonmonotonic_send,
            ),
            Checker(
                "nonmonotonic-poll",
                "each consumer's polled offsets of a partition strictly increase between assignments",
                nonmonotonic_poll,
            ),
            Checker("skipped-read", "no consumer group jumps over records its partitions hold", skipped_read),
            Checker(
                "commit-regression",
                "a group's committed offsets never go backwards without a reset",
                commit_regression,
            ),
            Checker("unseen", "a drained group was delivered every acknowledged record", unseen),
            Checker(
                "mirror-divergence",
                "a mirror holds the primary's records at the same offsets, up to its end",
                mirror_divergence,
            ),
            Checker(
                "rpo-accuracy",
                "after an unplanned failover, the records lost are exactly the divergence exported",
                rpo_accuracy,
            ),
            Checker(
                "exactly-once",
                "a transactional consume-transform-produce loop moved every input record once and nothing aborted",
                exactly_once,
            ),
        )
    }
)


def check(history: History, names: Iterable[str] | None = None) -> list[CheckerResult]:
    """The verdicts of the checkers ``names`` (every checker when None, in report order) on ``history``.

    Pure: reads only ``history.ops``. Raises CheckerError naming an unknown checker, or a
    history entry the checkers cannot read (its index and field).
    """
    chosen = list(CHECKERS) if names is None else list(names)
    unknown = [name for name in chosen if name not in CHECKERS]
    if unknown:
        raise CheckerError(
            f"unknown checker(s) {', '.join(map(repr, unknown))}; the checkers are: {', '.join(CHECKERS)}"
        )
    view = View(history)
    return [CHECKERS[name].run(view) for name in chosen]
