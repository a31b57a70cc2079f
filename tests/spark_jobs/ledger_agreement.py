"""The ledger job and chaos/'s checkers on one input, compared record for record (for test_ledger*.py).

*One input*: a history whose primary's final read is exactly what the site holds. The checkers
get the history (only the entries the ledger reads: sends, failover entries and that one final
read; the group's polls and the mirror's reads are theirs alone), the ledger the same file and
the site as a DataFrame. The checkers list at most ten records per anomaly and a hundred
anomalies per checker; :func:`unsampled` lifts both so that every record can be compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import chaos.checkers._positions
import chaos.checkers._registry
import chaos.checkers._writes
from chaos.checkers import check
from chaos.history import History
from spark_jobs.jobs._history import read_history
from spark_jobs.jobs._ledger import KINDS, Ledger, audit
from spark_jobs.schema import RECORD_SCHEMA

#: The checkers the ledger reproduces, by the kind of anomaly each reports.
CHECKERS = {
    "lost": "lost-write",
    "moved": "moved",
    "duplicate": "duplicate",
    "inconsistent-offsets": "inconsistent-offsets",
}

#: A record as both sides name it: ("send", topic, partition, offset, value, process, index) for an
#: acknowledgement, ("read", topic, partition, offset, value) for what the site holds.
Record = tuple[Any, ...]
Found = dict[str, tuple[int, set[Record]]]


def unsampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the checkers list every record of every anomaly (their counts are exact either way)."""

    def every(items: Sequence[Any], limit: int = 0) -> list[Any]:
        return list(items)

    monkeypatch.setattr(chaos.checkers._writes, "sample", every)
    monkeypatch.setattr(chaos.checkers._positions, "sample", every)
    monkeypatch.setattr(chaos.checkers._registry, "ANOMALY_LIMIT", 10**9)


def _record(r: Mapping[str, Any]) -> Record:
    base = (r["op"], r["topic"], r["partition"], r["offset"], r["value"])
    return (*base, r["process"], r["index"]) if r["op"] == "send" else base


def checker_found(ops: Sequence[Mapping[str, Any]]) -> Found:
    """What the four checkers find in ``ops``: per kind, (count, every record listed)."""
    results = {r.name: r for r in check(History.of(ops), list(CHECKERS.values()))}
    found: Found = {}
    for kind, name in CHECKERS.items():
        result = results[name]
        assert all(a.name == kind for a in result.anomalies), (name, {a.name for a in result.anomalies})
        found[kind] = (result.count, {_record(r) for a in result.anomalies for r in a.records})
    return found


def ledger_found(rows: Iterable[Any]) -> Found:
    """The ledger's discrepancy rows in the checkers' terms."""
    found: dict[str, tuple[int, set[Record]]] = {kind: (0, set()) for kind in KINDS}
    for row in rows:
        count, records = found[row["kind"]]
        if row["kind"] in ("lost", "moved"):
            position = (row["topic"], row["partition"], row["offset"])
            records.add(("send", *position, row["value"], row["process"], row["index"]))
        if row["kind"] in ("moved", "duplicate"):
            records.update(("read", p["topic"], p["partition"], p["offset"], row["value"]) for p in row["positions"])
        if row["kind"] == "inconsistent-offsets":
            position = (row["topic"], row["partition"], row["offset"])
            for v in row["values"]:
                extra = (v["process"], v["index"]) if v["op"] == "send" else ()
                records.add((v["op"], *position, v["value"], *extra))
        found[row["kind"]] = (count + 1, records)
    return found


def final_read(ops: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]], dict[str, Any]]:
    """The primary's final read in ``ops``: (its site, its distinct records in order, its ends)."""
    reads = [op for op in ops if op["type"] == "ok" and op["f"] == "read" and op.get("final") is True]
    primary = [op for op in reads if op.get("role") == "primary"]
    assert primary, "the history has no final read of a primary"
    site = primary[-1].get("site")
    records: dict[tuple[str, int, int, str], dict[str, Any]] = {}
    ends: dict[str, Any] = {}
    for op in reads:
        if op.get("site") == site:
            ends.update(op.get("ends") or {})
            for r in op["records"]:
                records.setdefault((r["topic"], r["partition"], r["offset"], r["value"]), r)
    return site, list(records.values()), ends


def site_frame(spark: Any, records: Iterable[Mapping[str, Any]]) -> Any:
    """A DataFrame of :data:`RECORD_SCHEMA` holding ``records`` (topic, partition, offset, value text or None)."""
    rows = []
    for r in records:
        row = dict.fromkeys(RECORD_SCHEMA.fieldNames())
        value = r["value"]
        row.update(
            topic=r["topic"],
            partition=r["partition"],
            offset=r["offset"],
            value=value.encode() if isinstance(value, str) else value,
            valid=r.get("valid", True),
            isControl=r.get("isControl", False),
            error=r.get("error"),
            crcValid=r.get("valid", True),
        )
        rows.append(tuple(row[name] for name in RECORD_SCHEMA.fieldNames()))
    return spark.createDataFrame(rows, RECORD_SCHEMA)


def only_what_the_ledger_reads(ops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``ops`` without the group's polls and the reads other than the primary's final read."""
    site, _, _ = final_read(ops)
    kept = []
    for op in ops:
        if op["f"] == "poll":
            continue
        if op["f"] == "read" and op["type"] == "ok" and not (op.get("final") is True and op.get("site") == site):
            continue
        kept.append(dict(op))
    return kept


def write_history(path: Path, ops: Iterable[Mapping[str, Any]]) -> Path:
    with path.open("w") as f:
        for op in ops:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")
    return path


def run_ledger(spark: Any, path: Path, site: Any, audited: str | None = None) -> tuple[list[Any], Ledger]:
    """The ledger of the history file ``path`` against the DataFrame ``site``: (its rows, the Ledger)."""
    history = read_history(spark, [str(path)])
    topics = sorted(set(history.topics) | {r["topic"] for r in site.select("topic").distinct().collect()})
    names = {str(path): audited if audited is not None else history.primaries.get(str(path))}
    ledger = audit(history, site, names, topics)
    ledger.count()
    try:
        rows = ledger.anomalies.collect()
    finally:
        ledger.release()
        history.release()
    return rows, ledger


def agree(spark: Any, tmp_path: Path, ops: Sequence[Mapping[str, Any]]) -> Found:
    """Run both on ``ops`` (the site: its primary's final read) and require the same anomalies,
    record for record; returns them (per kind: count, records)."""
    kept = only_what_the_ledger_reads(ops)
    _, records, _ = final_read(kept)
    path = write_history(tmp_path / "history.jsonl", ops)
    rows, _ = run_ledger(spark, path, site_frame(spark, records))
    theirs, ours = checker_found(kept), ledger_found(rows)
    assert ours == theirs, _difference(ours, theirs)
    return ours


def _difference(ours: Found, theirs: Found) -> str:
    lines = []
    for kind in KINDS:
        (n, mine), (m, other) = ours[kind], theirs[kind]
        if (n, mine) != (m, other):
            lines.append(
                f"{kind}: ledger {n}, checker {m}; only the ledger: {sorted(mine - other)[:5]}; "
                f"only the checker: {sorted(other - mine)[:5]}"
            )
    return "\n".join(lines)
