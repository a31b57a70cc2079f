"""The node benchmark's C clients (bench/_c_clients.py, bench/node_bench.py): parsing what kcat and
rdkafka_performance print, the goals and tables built from their figures, and one tiny run end to end.

The end-to-end run proves that both brokers are started, that kcat (and rdkafka_performance, when
``make rdkafka-perf`` has built it) moves every record, and that the report has the C clients'
tables; it asserts nothing about speed (figures from a few thousand records mean nothing, and
performance is measured by the benchmark, not asserted by tests).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import node_bench as nb
from bench._c_clients import (
    DEFAULT_RDKAFKA_PERFORMANCE,
    find_c_clients,
    loopback_mb_per_s,
    parse_kcat_eof,
    parse_kcat_version,
    parse_perf_consume,
    parse_perf_produce,
    parse_perf_version,
)
from bench._procs import BenchError

# What the tools printed in this repository's runs (kcat 1.7.1, rdkafka_performance of librdkafka 2.0.2).
KCAT_V = """kcat - Apache Kafka producer and consumer tool
https://github.com/edenhill/kcat
Copyright (c) 2014-2021, Magnus Edenhill
Version 1.7.1 (JSON, Transactions, IncrementalAssign, librdkafka 2.16.0 builtin.features=gzip,snappy,ssl,sasl)
"""
PERF_USAGE = """Usage: rdkafka_performance [-C|-P] -t <topic> [-p <partition>] [-b <broker,broker..>] [options..]

librdkafka version 2.0.2 (0x020002ff)

 Options:
"""
PERF_CONSUMED = """% 0 messages (0 bytes) consumed in 0ms: 0 msgs/s (0.00 MB/s)
% 20001 messages (2000100 bytes) consumed in 17ms: 1176529 msgs/s (117.65 MB/s)
% Average application fetch latency: 25us
"""
PERF_PRODUCED = """% Sending 20000 messages of size 100 bytes
% 20000 messages produced (2000000 bytes), 20000 delivered (offset 19999, 0 failed) in 21ms: 924214 msgs/s \
and 92.42 MB/s, 0 produce failures, 0 in queue, no compression
"""


def test_versions_are_read_from_kcat_and_rdkafka_performance() -> None:
    assert parse_kcat_version(KCAT_V) == "2.16.0"
    assert parse_perf_version(PERF_USAGE) == "2.0.2"
    assert parse_kcat_version("kcat: command not found") is None
    assert parse_perf_version("") is None


def test_kcat_end_of_partition_lines_give_each_partitions_end_offset() -> None:
    text = (
        "% Reached end of topic bench-c [0] at offset 20001\n% Reached end of topic bench-c [3] at offset 7: exiting\n"
    )
    assert parse_kcat_eof(text) == {0: 20001, 3: 7}
    assert parse_kcat_eof("%4|1795749259.381|CONFWARN|rdkafka#consumer-1| ...") == {}


def test_the_last_consumer_summary_is_the_result() -> None:
    found = parse_perf_consume(PERF_CONSUMED)
    assert (found.messages, found.bytes, found.ms) == (20001, 2_000_100, 17)
    with pytest.raises(BenchError, match="no consumer summary"):
        parse_perf_consume(PERF_PRODUCED)


def test_the_producer_summary_counts_deliveries_and_failures() -> None:
    found = parse_perf_produce(PERF_PRODUCED)
    assert (found.produced, found.bytes, found.delivered, found.last_offset, found.failed, found.ms) == (
        20000,
        2_000_000,
        20000,
        19999,
        0,
        21,
    )
    with pytest.raises(BenchError, match="no producer summary"):
        parse_perf_produce(PERF_CONSUMED)


def test_a_missing_rdkafka_performance_is_named_with_how_to_build_it(tmp_path: Path) -> None:
    absent = tmp_path / "no-such" / "rdkafka_performance"
    clients, missing = find_c_clients(("rdkafka_performance",), absent, "system", tmp_path)
    assert clients == []
    assert len(missing) == 1 and str(absent) in missing[0] and "make rdkafka-perf" in missing[0]


def test_the_loopback_moves_every_byte() -> None:
    assert loopback_mb_per_s(8 << 20, chunk=1 << 20, timeout=30) > 0


def _summary(
    test: str, broker: str, rate: float, value_bytes: int = 100, cores: tuple[float, float] | None = None
) -> nb.Summary:
    broker_cores, client_cores = cores if cores else (None, None)
    return nb.Summary(1, test, broker, 3, rate, rate * value_bytes / 1e6, 1.0, {}, None, client_cores, broker_cores)


def test_c_goals_compare_strait_with_tansu_and_the_large_consume_with_the_loopback() -> None:
    large = f"kcat consume {nb.LARGE}"
    summaries = [
        _summary("rdkafka_performance produce acks=all", "strait", 600_000),
        _summary("rdkafka_performance produce acks=all", "tansu", 600_000),
        _summary("kcat consume", "strait", 2_100_000),
        _summary("kcat consume", "tansu", 1_000_000),
        _summary(large, "strait", 9_000, nb.LARGE_VALUE_BYTES),  # 900 MB/s
        _summary(large, "tansu", 3_000, nb.LARGE_VALUE_BYTES),
    ]
    found = {v.test: v for v in nb.c_verdicts(summaries, loopback=2_000.0)}
    assert set(found) == {"rdkafka_performance produce acks=all", "kcat consume", large}
    produce, consume, big = found["rdkafka_performance produce acks=all"], found["kcat consume"], found[large]
    assert (produce.ratio, produce.goal, produce.met) == (pytest.approx(1.0), nb.C_GOALS["produce"], False)
    assert (consume.ratio, consume.goal, consume.met) == (pytest.approx(2.1), nb.C_GOALS["consume"], True)
    assert (big.ratio, big.goal, big.met, big.against) == (pytest.approx(0.45), nb.C_LOOPBACK_GOAL, False, "loopback")
    # Without a loopback figure the large consume has no verdict; the others keep theirs.
    assert {v.test for v in nb.c_verdicts(summaries, loopback=None)} == {
        "rdkafka_performance produce acks=all",
        "kcat consume",
    }
    lines = nb.c_goal_lines(list(found.values()))
    assert "kcat consume goal (strait >= 2.0x tansu records/s) met: 2.10x" in lines
    assert f"{large} goal (strait >= 50% of loopback MB/s) NOT met: 45%" in lines


def test_a_c_client_table_has_both_brokers_the_ratio_and_the_loopback_share() -> None:
    settings = nb.parse_args(["--quick", "--partitions", "1"])
    large = f"kcat consume {nb.LARGE}"
    summaries = [
        _summary("kcat consume", "strait", 2_000_000, cores=(0.25, 1.04)),
        _summary("kcat consume", "tansu", 800_000),
        _summary(large, "strait", 5_000, nb.LARGE_VALUE_BYTES),
        _summary(large, "tansu", 2_000, nb.LARGE_VALUE_BYTES),
    ]
    found = nb.c_verdicts(summaries, loopback=2_000.0)
    headers, rows = nb.c_client_table(settings, "kcat", summaries, found, 2_000.0)
    table = [dict(zip(headers, row, strict=True)) for row in rows]
    assert [r["test"] for r in table] == ["consume", f"consume {nb.LARGE}"]
    assert table[0]["strait rec/s"] == "2,000,000" and table[0]["tansu rec/s"] == "800,000"
    assert table[0]["strait/tansu"] == "2.50" and table[0]["goal"] == ">= 2.0 met"
    assert table[1]["strait MB/s"] == "500.0" and table[1]["loopback MB/s"] == "2,000"
    assert table[1]["strait/loopback"] == "25%" and table[1]["goal"] == ">= 50% NOT met"
    # Who was busy: the broker's and the client's CPU in cores, where measured.
    assert table[0]["strait: broker / client cores"] == "0.25 / 1.04"
    assert table[0]["tansu: broker / client cores"] == "- / -"


def test_c_client_flags() -> None:
    settings = nb.parse_args(["--quick"])
    assert settings.c_clients == ("kcat", "rdkafka_performance") and settings.c_librdkafka == "wheel"
    assert (settings.c_records, settings.large_mb, settings.loopback_mb) == (20_000, 20, 300)
    assert settings.rdkafka_performance == DEFAULT_RDKAFKA_PERFORMANCE
    assert nb.parse_args(["--c-clients", ""]).c_clients == ()
    assert nb.parse_args(["--partitions", "6"]).c_clients == ()  # the C clients run on 1 partition only
    with pytest.raises(SystemExit):
        nb.parse_args(["--c-clients", "kafkacat"])


# -- one tiny run ----------------------------------------------------------------------------

C_RECORDS = 5_000
LARGE_MB = 5


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One --quick run of both brokers on 1 partition with every C client present; its JSON and Markdown."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not on PATH (.ci/ensure-kcat installs it)")
    out = tmp_path_factory.mktemp("node-bench")
    argv = ["--quick", "--partitions", "1", "--records", "2000", "--latency-seconds", "0.5"]
    argv += ["--c-records", str(C_RECORDS), "--large-mb", str(LARGE_MB), "--loopback-mb", "50", "--out", str(out)]
    assert nb.main(argv) == 0
    (report,) = out.glob("node-*.json")
    return {"json": json.loads(report.read_text()), "md": report.with_suffix(".md").read_text()}


def _c_runs(data: dict[str, Any], test: str) -> dict[str, dict[str, Any]]:
    return {r["broker"]: r for r in data["runs"] if r["test"] == test}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_tiny_run_reads_with_kcat_from_both_brokers_and_reports_it(tiny_run: dict[str, Any]) -> None:
    data, md = tiny_run["json"], tiny_run["md"]
    assert data["c_clients"]["kcat"] == data["machine"]["software"]["kcat_librdkafka"] != "unknown"
    small, large = _c_runs(data, "kcat consume"), _c_runs(data, f"kcat consume {nb.LARGE}")
    assert set(small) == set(large) == {"strait", "tansu"}
    for broker in ("strait", "tansu"):
        assert small[broker]["records"] == C_RECORDS and small[broker]["value_bytes"] == 100
        assert large[broker]["records"] == LARGE_MB * 10**6 // nb.LARGE_VALUE_BYTES
        assert large[broker]["value_bytes"] == nb.LARGE_VALUE_BYTES
        assert 0 < small[broker]["seconds"] == small[broker]["wall_seconds"] < 240
        assert small[broker]["argv"][:2] == [data["machine"]["software"]["kcat_path"], "-C"]
        assert small[broker]["client_cpu_s"] > 0 and small[broker]["client_cores"] > 0  # kcat's own CPU
    (loopback,) = data["loopback_mb_s"]
    assert loopback > 0
    verdicts = {v["test"]: v for v in data["c_verdicts"]}
    assert verdicts["kcat consume"]["ratio"] == pytest.approx(
        small["strait"]["records_per_s"] / small["tansu"]["records_per_s"]
    )
    assert verdicts[f"kcat consume {nb.LARGE}"]["ratio"] == pytest.approx(large["strait"]["mb_per_s"] / loopback)
    assert "### C clients" in md and "kcat (librdkafka " in md
    assert "| consume | 5,000 x 100 B |" in md and f"| consume {nb.LARGE} | 50 x 100,000 B |" in md
    assert "kcat consume goal (strait >= 2.0x tansu records/s)" in md


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_tiny_run_produces_and_reads_with_rdkafka_performance(tiny_run: dict[str, Any]) -> None:
    data, md = tiny_run["json"], tiny_run["md"]
    if not DEFAULT_RDKAFKA_PERFORMANCE.exists():
        assert any("rdkafka_performance not found" in why for why in data["c_missing"])
        assert "NOT RUN: rdkafka_performance not found" in md
        pytest.skip(f"{DEFAULT_RDKAFKA_PERFORMANCE} is not built (make rdkafka-perf)")
    assert data["c_clients"]["rdkafka_performance"] == data["machine"]["software"]["rdkafka_performance_librdkafka"]
    produced = _c_runs(data, "rdkafka_performance produce acks=all")
    consumed = _c_runs(data, "rdkafka_performance consume")
    for broker in ("strait", "tansu"):
        assert produced[broker]["records"] == consumed[broker]["records"] == C_RECORDS
        # The produce figure is the tool's own clock, within the time the process lived.
        assert 0 < produced[broker]["seconds"] == produced[broker]["tool_seconds"] <= produced[broker]["wall_seconds"]
        assert consumed[broker]["seconds"] == consumed[broker]["wall_seconds"] > 0
    assert "rdkafka_performance (librdkafka " in md and "| produce acks=all | 5,000 x 100 B |" in md
    assert "rdkafka_performance produce acks=all goal (strait >= 1.2x tansu records/s)" in md
