"""``DIR/results.json`` as the report reads it: the runner's verdicts, typed, tolerant of a run cut short.

Format 1, as the runner writes it::

    {"format": 1, "command": "strait chaos run ... --seed 42", "seed": 42, "started": <wall s>,
     "finished": <wall s>, "verdict": "pass" | "fail", "machine": "text",
     "scenarios": [{"name": "kill-leader", "description": "one line", "seed": 123,
                    "replay": "strait chaos run --scenario kill-leader --seed 123",
                    "expect": "pass" | "<anomaly name a positive control must produce>",
                    "verdict": "pass" | "fail" | "error", "error": null | "text", "duration_s": 61.2,
                    "history": "kill-leader/history.jsonl" (relative to DIR),
                    "checkers": [{"name": "lost-write", "description": "...",
                                  "verdict": "pass" | "fail" | "skipped", "checked": <count>,
                                  "anomalies": [{"checker", "name", "description",
                                                 "records": [{topic, partition, offset, value,
                                                              process?, index?}],
                                                 "near": [<nemesis or failover entries>]}]}]}]}

Only what the report cannot do without is required: a JSON object whose ``scenarios`` is a
list of objects, each with a ``name``. Any other field may be missing or null (a runner
interrupted mid-scenario still gets a report) and shows as "—". Anomalies are kept as the
JSON objects the checkers wrote; the page reads each of their fields defensively, since they
hold values from the history (arbitrary text).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError

__all__ = ["CheckerResult", "ReportError", "Results", "ScenarioResult", "load_results"]

FORMAT = 1


class ReportError(ChaosError):
    """A results file the report cannot be made from; the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class CheckerResult:
    name: str
    description: str | None
    verdict: str  # pass, fail or skipped (anything else is shown as it is)
    checked: int | None
    anomalies: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    name: str
    description: str | None
    seed: int | None
    replay: str | None
    expect: str  # "pass", or the anomaly name a positive control must produce
    verdict: str  # pass, fail or error
    error: str | None
    duration_s: float | None
    history: str | None  # relative to DIR
    checkers: list[CheckerResult]
    findings: list[str] = field(default_factory=list)  # what the run saw besides the checkers
    skipped_faults: list[str] = field(default_factory=list)  # faults the sites could not take, and why

    @property
    def anomaly_count(self) -> int:
        return sum(len(checker.anomalies) for checker in self.checkers)


@dataclass(frozen=True, slots=True)
class Results:
    command: str | None
    seed: int | None
    started: float | None
    finished: float | None
    verdict: str
    machine: str | None
    scenarios: list[ScenarioResult]


def load_results(path: Path) -> Results:
    """The results in ``path``. Raises ReportError for a file that is missing, not JSON, of
    another format, or without a list of named scenarios."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ReportError(f"no results file at {path}: the runner writes it when a run ends") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportError(f"cannot read results file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: the results must be a JSON object, not {type(data).__name__}")
    if data.get("format", FORMAT) != FORMAT:
        raise ReportError(f"{path}: results format {data.get('format')!r}; this report reads format {FORMAT}")
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list):
        raise ReportError(f"{path}: 'scenarios' must be a list, not {type(scenarios).__name__}")
    parsed = []
    for number, scenario in enumerate(scenarios):
        if not isinstance(scenario, dict) or not isinstance(scenario.get("name"), str):
            raise ReportError(f"{path}: scenarios[{number}] must be an object with a 'name' string")
        parsed.append(_scenario(scenario))
    verdict = _text(data, "verdict")
    if verdict is None:
        verdict = "pass" if parsed and all(s.verdict == "pass" for s in parsed) else "fail"
    return Results(
        command=_text(data, "command"),
        seed=_integer(data, "seed"),
        started=_number(data, "started"),
        finished=_number(data, "finished"),
        verdict=verdict,
        machine=_text(data, "machine"),
        scenarios=parsed,
    )


def _scenario(data: dict[str, Any]) -> ScenarioResult:
    checkers = []
    for checker in data.get("checkers") or []:
        if not isinstance(checker, dict):
            continue
        anomalies = checker.get("anomalies")
        checkers.append(
            CheckerResult(
                name=_text(checker, "name") or "?",
                description=_text(checker, "description"),
                verdict=_text(checker, "verdict") or "?",
                checked=_integer(checker, "checked"),
                anomalies=[a for a in anomalies if isinstance(a, dict)] if isinstance(anomalies, list) else [],
            )
        )
    return ScenarioResult(
        name=data["name"],
        description=_text(data, "description"),
        seed=_integer(data, "seed"),
        replay=_text(data, "replay"),
        expect=_text(data, "expect") or "pass",
        verdict=_text(data, "verdict") or "error",
        error=_text(data, "error"),
        duration_s=_number(data, "duration_s"),
        history=_text(data, "history"),
        checkers=checkers,
        findings=_texts(data, "findings"),
        skipped_faults=_texts(data, "skipped_faults"),
    )


def _texts(data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


def _number(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _integer(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
