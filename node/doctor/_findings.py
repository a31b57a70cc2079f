"""What a check finds: one :class:`Finding` per (check, subject), with a :class:`Status`.

The JSON shape of a finding is stable (``strait doctor --json`` prints a list of them, and the
Ansible roles read it)::

    {"check": str,            # which check: "log-dir", "filesystem", "mount-options", "free-space",
                              #   "free-inodes", "sysctl", "open-files", "clock", "zookeeper", "port", "node"
     "subject": str,          # what was checked: a log dir, a sysctl key, host:port, ...
     "status": "ok" | "warn" | "fail",
     "detail": str,           # one line naming the measured value and the expected one
     "measured": str | int | float | bool | null,   # the value measured (null: could not be measured)
     "expected": str | null}  # what passes, in words: "xfs", ">= 100000", "noatime", ...

A failure makes ``strait doctor`` exit 1; warnings alone exit 0.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Finding", "Measured", "Status", "exit_code", "tally"]

Measured = str | int | float | bool | None


class Status(enum.StrEnum):
    """A check's verdict. Only FAIL makes the host unfit; WARN is advice the operator may overrule."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One check's verdict on one subject; :meth:`as_json` is the stable JSON object."""

    check: str
    subject: str
    status: Status
    detail: str
    measured: Measured = None
    expected: str | None = None

    def as_json(self) -> dict[str, Measured]:
        return {
            "check": self.check,
            "subject": self.subject,
            "status": self.status.value,
            "detail": self.detail,
            "measured": self.measured,
            "expected": self.expected,
        }


def exit_code(findings: Iterable[Finding]) -> int:
    """1 when any finding failed, else 0 (warnings do not count)."""
    return 1 if any(f.status is Status.FAIL for f in findings) else 0


def tally(findings: Iterable[Finding]) -> dict[Status, int]:
    """How many findings have each status (every status present, maybe with 0)."""
    counts = dict.fromkeys(Status, 0)
    for finding in findings:
        counts[finding.status] += 1
    return counts
