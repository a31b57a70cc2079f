"""The security benchmark (bench/security_bench.py): one ``--quick`` run end to end.

It proves that the benchmark starts a node with PLAINTEXT, SSL and SASL_SSL listeners, moves
every record through each and writes its report; it asserts nothing about speed (performance is
measured by the benchmark, not asserted by tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import security_bench

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_quick_run_measures_every_listener_and_writes_its_report(tmp_path: Path) -> None:
    assert security_bench.main(["--quick", "--out", str(tmp_path)]) == 0
    (report,) = tmp_path.glob("security-*.json")
    data = json.loads(report.read_text())
    assert data["records"] == 30_000 and set(data["medians"]) == {"PLAINTEXT", "SSL", "SASL_SSL"}
    for protocol, figures in data["medians"].items():
        assert figures["produce_mb_s"] > 0 and figures["consume_mb_s"] > 0, protocol
        assert figures["bulk_consume_mb_s"] > 0 and figures["bulk_consume_cpu_s"] >= 0, protocol
    assert set(data["ratios"]) == {"SSL", "SASL_SSL"}
    markdown = report.with_suffix(".md").read_text()
    assert "| SASL_SSL |" in markdown and "produce / PLAINTEXT" in markdown and "kcat consume / PLAINTEXT" in markdown
    assert data["bulk_records"] == 200_000
