"""``replay`` against real sites: a real export taken by failover's own code from the old primary
(east), replayed into the new primary (west) through ``strait-kafka``: exactly the records west
lacks, once; a dry run writes nothing; filters; bad input with a site."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from spark_jobs.jobs._replay_match import key_partition
from spark_jobs.jobs.replay import command
from tests.spark_jobs.divergence_files import T0, write_export
from tests.spark_jobs.replay_sites import (
    Sites,
    create_topic,
    end_offsets,
    export,
    failed_over,
    produce,
    read,
    record,
    replay_sites,  # noqa: F401 - the fixture
)

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


def replay(spark: Any, *args: str) -> tuple[int, str]:
    """The command in this process, on the tests' SparkSession (``spark``: it exists first)."""
    result = CliRunner().invoke(command, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def summary(out: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return loaded


def kinds(spark: Any, out: Path) -> dict[tuple[int, int], str]:
    return {(r["partition"], r["offset"]): r["kind"] for r in spark.read.parquet(str(out / "records")).collect()}


def test_replay_writes_exactly_what_the_new_primary_lacks_once(
    spark: Any,
    replay_sites: Sites,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = failed_over(replay_sites, tmp_path / "exports", "orders")
    west = replay_sites.west.bootstrap
    args = ("--export", str(scenario.root), "--site", west)

    code, text = replay(spark, *args, "--out", str(tmp_path / "dry"))
    assert code == 1, text
    assert f"replay: dry run: 6 record(s) would be written to {west}; run again with --execute" in text
    assert end_offsets(west, "orders", 2) == [10, 9]  # a dry run writes nothing
    dry = summary(tmp_path / "dry")
    assert dry["verdict"] == "found"
    assert dry["totals"] == {"export_records": 8, "target_records": 3, "present": 2, "would_replay": 6}
    assert dry["discrepancies"] == {"total": 6, "by_kind": {"would-replay": 6}}
    assert kinds(spark, tmp_path / "dry") == {
        (0, 8): "present",
        (0, 9): "present",
        **{(0, o): "would-replay" for o in (10, 11)},
        **{(1, o): "would-replay" for o in (8, 9, 10, 11)},
    }
    assert [p["ranges"] for p in dry["partitions"]] == [
        {"export": [8, 12], "target": [8, 10]},
        {"export": [8, 12], "target": [8, 9]},
    ]
    assert {s["offset"] for s in dry["samples"] if s["partition"] == 0} == {10, 11}

    code, text = replay(spark, *args, "--out", str(tmp_path / "run"), "--execute")
    assert code == 0, text
    done = summary(tmp_path / "run")
    assert done["verdict"] == "clean" and done["discrepancies"]["total"] == 0
    assert done["totals"] == {"export_records": 8, "target_records": 3, "present": 2, "replayed": 6}
    assert f"wrote 6 record(s) to {west}" in done["notes"]
    for p in (0, 1):
        assert [r for _, r in read(west, "orders", p)] == scenario.expected(p)
    assert set(kinds(spark, tmp_path / "run").values()) == {"present", "replayed"}
    assert (tmp_path / "run" / "report.html").exists()

    code, text = replay(spark, *args, "--out", str(tmp_path / "again"), "--execute")
    assert code == 0, text
    again = summary(tmp_path / "again")
    assert again["totals"] == {"export_records": 8, "target_records": 9, "present": 8}
    assert end_offsets(west, "orders", 2) == [12, 13]  # nothing written the second time


def test_time_range_and_topics_select_what_is_replayed(
    spark: Any,
    replay_sites: Sites,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = failed_over(replay_sites, tmp_path / "exports", "payments")
    west = replay_sites.west.bootstrap
    window = ("--from", str(T0 + 9000), "--to", "2025-10-23T06:13:31Z")  # records 9 and 10 of each partition
    code, text = replay(spark, "--export", str(scenario.root), "--site", west, "--out", str(tmp_path / "o"), *window)
    assert code == 1, text
    assert summary(tmp_path / "o")["totals"] == {
        "export_records": 8,
        "target_records": 3,
        "filtered": 4,
        "present": 1,
        "would_replay": 3,
    }
    got = kinds(spark, tmp_path / "o")
    assert [got[(0, o)] for o in (8, 9, 10, 11)] == ["filtered", "present", "would-replay", "filtered"]
    code, text = replay(
        spark, "--export", str(scenario.root), "--site", west, "--out", str(tmp_path / "x"), "--execute", *window
    )
    assert code == 0, text
    assert end_offsets(west, "payments", 2) == [11, 11]
    assert [r for _, r in read(west, "payments", 1)][-2:] == [record(1, 9), record(1, 10)]


def test_a_topic_with_fewer_partitions_now_gets_records_where_kafkas_partitioner_puts_their_keys(
    spark: Any,
    replay_sites: Sites,  # noqa: F811
    tmp_path: Path,
) -> None:
    east, west = replay_sites.east.bootstrap, replay_sites.west.bootstrap
    create_topic(east, "shrunk", 3)
    create_topic(west, "shrunk", 2)
    create_topic(west, "probe", 2)
    records = {
        p: [(T0 + i, b"key-%d-%d" % (p, i), b"v", ()) for i in range(4)] + [(T0 + 9, None, b"nul", ())]
        for p in range(3)
    }
    produce(east, "shrunk", [(p, r) for p in range(3) for r in records[p]])
    export(replay_sites, tmp_path / "exports", {("shrunk", p): (0, 5) for p in range(3)})
    code, text = replay(
        spark, "--export", str(tmp_path / "exports"), "--site", west, "--out", str(tmp_path / "o"), "--execute"
    )
    assert code == 0, text
    placed = {r[1]: p for p in range(2) for _, r in read(west, "shrunk", p)}
    keys = [r[1] for p in range(3) for r in records[p] if r[1] is not None]
    # librdkafka's murmur2_random is the Java producer's default partitioner for keyed records
    produce(west, "probe", [(-1, (T0, k, b"", ())) for k in keys], partitioner="murmur2_random")
    kafka = {r[1]: p for p in range(2) for _, r in read(west, "probe", p)}
    assert {k: placed[k] for k in keys} == kafka == {k: key_partition(k, 2) for k in keys}
    nulls = {p: [r[2] for _, r in read(west, "shrunk", p) if r[1] is None] for p in range(2)}
    assert nulls == {0: [b"nul", b"nul"], 1: [b"nul"]}  # partition modulo 2: 0 and 2 -> 0, 1 -> 1
    assert any("placed by key" in note for note in summary(tmp_path / "o")["notes"])


def test_a_topic_the_new_primary_lacks_and_a_malformed_export_are_refused(
    spark: Any,
    replay_sites: Sites,  # noqa: F811
    tmp_path: Path,
) -> None:
    west = replay_sites.west.bootstrap
    ghost = write_export(tmp_path / "ghost", {("ghost", 0): (0, [(T0, b"k", b"v")])})
    code, text = replay(spark, "--export", str(ghost), "--site", west, "--out", str(tmp_path / "o1"))
    assert code == 2, text
    assert f"--site {west} has no topic ghost" in text and "--topics" in text

    create_topic(west, "damaged", 1)

    def damage(lines: list[dict[str, Any]]) -> list[str]:
        return [json.dumps(lines[0]), "this is not json"]

    broken = write_export(tmp_path / "broken", {("damaged", 0): (0, [(T0, b"k", b"v"), (T0, b"k", b"w")])}, edit=damage)
    out = tmp_path / "o2"
    code, text = replay(spark, "--export", str(broken), "--site", west, "--out", str(out), "--execute")
    assert code == 2, text
    assert "--export" in text and "1 malformed line(s)" in text and "this is not json" in text
    assert not (out / "summary.json").exists() and not list(out.glob(".incomplete-*"))
    assert end_offsets(west, "damaged", 1) == [0]


def test_on_a_log_append_time_topic_a_second_run_writes_nothing(
    spark: Any,
    replay_sites: Sites,  # noqa: F811
    tmp_path: Path,
) -> None:
    east, west = replay_sites.east.bootstrap, replay_sites.west.bootstrap
    create_topic(east, "stamped", 1)
    create_topic(west, "stamped", 1, {"message.timestamp.type": "LogAppendTime"})
    produce(east, "stamped", [(0, record(0, i)) for i in range(3)])
    export(replay_sites, tmp_path / "exports", {("stamped", 0): (0, 3)})
    args = ("--export", str(tmp_path / "exports"), "--site", west, "--execute")
    code, text = replay(spark, *args, "--out", str(tmp_path / "one"))
    assert code == 0, text
    assert summary(tmp_path / "one")["totals"]["replayed"] == 3
    assert [r[2] for _, r in read(west, "stamped", 0)] == [record(0, i)[2] for i in range(3)]
    assert [r[0] for _, r in read(west, "stamped", 0)] != [record(0, i)[0] for i in range(3)]  # west stamped them
    code, text = replay(spark, *args, "--out", str(tmp_path / "two"))
    assert code == 0, text
    two = summary(tmp_path / "two")
    assert two["totals"]["present"] == 3 and "replayed" not in two["totals"]
    assert "stamped: LogAppendTime on the new primary: timestamps are not compared" in two["notes"]
    assert end_offsets(west, "stamped", 1) == [3]
