"""Made-up summary.json contents (format 1) for the report's tests: clean, found, huge, hostile; no Spark.

:func:`found` is a realistic reconcile of two topics between two sites: a target replica
truncated (records missing at the tail of orders-2), a flipped byte (different values in
orders-0), one extra record, two invalid batches (a CRC mismatch and a torn tail) and sample
rows whose keys and values are arbitrary bytes shown as text. Everything is deterministic.
"""

from __future__ import annotations

import copy
import random
from typing import Any

HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>\"'&\x00\x1b\u2028"

COMMAND = "strait audit reconcile --topology /etc/strait/sites.toml --link east-west --out /srv/audit/2026-11-26"


def clean(partitions: int = 6) -> dict[str, Any]:
    """A reconcile where both sites agree on ``partitions`` partitions of ``orders``."""
    rows: list[dict[str, Any]] = []
    for n in range(partitions):
        end = 16_000 + 1_000 * n
        counts = {"source_records": end - 200, "target_records": end - 200}  # 200 compacted away
        ranges = {"source": [200, end], "target": [200, end]}
        rows.append({"topic": "orders", "partition": n, "counts": counts, "by_kind": {}, "ranges": ranges})
    records = sum(row["counts"]["source_records"] for row in rows)
    return {
        "format": 1,
        "job": "reconcile",
        "verdict": "clean",
        "command": COMMAND,
        "started": "2026-11-26T03:40:00Z",
        "seconds": 41.7,
        "spark": {"master": "local[*]", "version": "4.3.0"},
        "inputs": {"source": "east (segments /data/east)", "target": "west (127.0.0.1:9092)", "link": "east-west"},
        "totals": {"source_records": records, "target_records": records, "compared": records},
        "discrepancies": {"total": 0, "by_kind": {}},
        "partitions": rows,
        "samples": [],
        "invalid": {"rows": 0, "by_error": {}},
        "notes": [],
    }


def found() -> dict[str, Any]:
    """A reconcile that found 1,250 missing, 3 different and 1 extra record, and 3 invalid rows."""
    summary = clean(6)
    rng = random.Random(16)
    for row in summary["partitions"]:
        row["ranges"] = {"source": [0, row["ranges"]["source"][1]], "target": [0, row["ranges"]["target"][1]]}
        row["counts"] = {"source_records": row["ranges"]["source"][1], "target_records": row["ranges"]["target"][1]}
    samples: list[dict[str, Any]] = []

    missing = summary["partitions"][2]  # a target replica truncated while its node was down
    end = missing["ranges"]["source"][1]
    missing["ranges"]["target"][1] = end - 1_250
    missing["counts"]["target_records"] = end - 1_250
    missing["by_kind"] = {"missing": 1_250}
    for offset in range(end - 1_250, end, 50):
        key = f"order-{offset}"
        samples.append(_sample("missing", "orders", 2, offset, f"absent from target (log end {end - 1_250})", key))

    different = summary["partitions"][0]  # a flipped byte
    different["by_kind"] = {"different": 3}
    for offset in (1_200, 7_777, 15_001):
        value = bytes(rng.randrange(256) for _ in range(12)).hex()
        samples.append(_sample("different", "orders", 0, offset, "value hash differs", f"order-{offset}", value))

    extra = summary["partitions"][5]
    extra["ranges"]["target"][1] += 1
    extra["counts"]["target_records"] += 1
    extra["by_kind"] = {"extra": 1}
    offset = extra["ranges"]["source"][1]
    samples.append(_sample("extra", "orders", 5, offset, "on target only, above the source's log end", None))

    payments = {"topic": "payments", "partition": 0, "counts": {"source_records": 900, "target_records": 900}}
    summary["partitions"].append({**payments, "by_kind": {}, "ranges": {"source": [0, 900], "target": None}})
    summary["discrepancies"] = {"total": 1_254, "by_kind": {"missing": 1_250, "different": 3, "extra": 1}}
    summary["invalid"] = {"rows": 3, "by_error": {"CRC mismatch": 2, "torn tail (12 of 61 bytes)": 1}}
    summary["totals"]["source_records"] = sum(p["counts"]["source_records"] for p in summary["partitions"])
    summary["totals"]["target_records"] = sum(p["counts"]["target_records"] for p in summary["partitions"])
    summary["totals"]["compared"] = summary["totals"]["source_records"] - 1_250
    summary["verdict"] = "found"
    summary["samples"] = samples
    summary["notes"] = [
        "Offsets below the other side's log start are not counted as missing (compaction, retention).",
        "discrepancies/ holds every row as Parquet; summary.json keeps a sample of them.",
    ]
    return summary


def huge(partitions: int = 5_000, found_in: int = 3_000, samples: int = 250) -> dict[str, Any]:
    """``partitions`` partitions over ten topics, the first ``found_in`` with discrepancies, ``samples`` samples."""
    rows: list[dict[str, Any]] = []
    sample_rows: list[dict[str, Any]] = []
    for n in range(partitions):
        topic, partition = f"topic-{n % 10}", n // 10
        missing = (n * 7919) % 50 + 1 if n < found_in else 0
        end = 100_000 + n
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "counts": {"source_records": end, "target_records": end - missing},
                "by_kind": {"missing": missing} if missing else {},
                "ranges": {"source": [0, end], "target": [0, end - missing]},
            }
        )
        if missing and len(sample_rows) < samples:
            sample_rows.append(_sample("missing", topic, partition, end - missing, "absent from target", f"k{n}"))
    total = sum(sum(row["by_kind"].values()) for row in rows)
    summary = clean(0)
    summary.update(
        verdict="found" if total else "clean",
        partitions=rows,
        samples=sample_rows,
        discrepancies={"total": total, "by_kind": {"missing": total} if total else {}},
    )
    return summary


def hostile() -> dict[str, Any]:
    """:func:`found` with :data:`HOSTILE` in every text a job or a record could put there."""
    summary = copy.deepcopy(found())
    summary["job"] = HOSTILE
    summary["command"] = f"strait audit reconcile --out {HOSTILE}"
    summary["started"] = HOSTILE
    summary["spark"] = {"master": HOSTILE, "version": HOSTILE}
    summary["inputs"] = {HOSTILE: HOSTILE, "topics": [HOSTILE, "orders"], "filter": {"where": HOSTILE}}
    summary["totals"][HOSTILE] = 1
    summary["discrepancies"]["by_kind"] = {HOSTILE: 1_250, "different": 3, "extra": 1}
    summary["partitions"][2]["by_kind"] = {HOSTILE: 1_250}
    summary["partitions"][2]["topic"] = HOSTILE
    summary["partitions"][2]["counts"][HOSTILE] = 5
    summary["partitions"][2]["ranges"][HOSTILE] = [0, 1]
    for sample in summary["samples"]:
        if sample["kind"] == "missing":
            sample.update(kind=HOSTILE, topic=HOSTILE)
        sample.update(key=HOSTILE, value=HOSTILE * 40, detail=HOSTILE)
        sample[HOSTILE] = HOSTILE
    summary["invalid"]["by_error"] = {HOSTILE: 3}
    summary["notes"] = [HOSTILE]
    return summary


def _sample(
    kind: str, topic: str, partition: int, offset: int, detail: str, key: str | None, value: str | None = None
) -> dict[str, Any]:
    return {
        "kind": kind,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "detail": detail,
        "key": key,
        "value": value if value is not None else f'{{"id": {offset}, "amount": {offset % 997}.25}}',
    }
