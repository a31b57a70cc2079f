"""Replay's decisions (spark_jobs.jobs._replay_match): selection, placement and presence by content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spark_jobs._rows import Rows
from spark_jobs.jobs._divergence import find_exports, read_exports
from spark_jobs.jobs._replay_match import Rules, classify, key_partition, murmur2
from spark_jobs.schema import RECORD_SCHEMA
from storage.records import build_batch
from tests.spark_jobs.divergence_files import T0, write_export


def test_murmur2_is_kafkas() -> None:
    # org.apache.kafka.common.utils.UtilsTest's values
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert key_partition(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


def site(spark: Any, partitions: dict[tuple[str, int], tuple[int, list[tuple[Any, ...]]]]) -> Any:
    """A DataFrame of what a site holds: (topic, p) -> (first offset, records), decoded as the sources do."""
    rows = Rows()
    for (topic, p), (first, records) in partitions.items():
        if records:
            rows.add_batch(build_batch(records, base_offset=first), topic, p, None)
    batch = rows.flush()
    if batch is None:
        return spark.createDataFrame([], RECORD_SCHEMA)
    return spark.createDataFrame(pa.Table.from_batches([batch]).to_pandas(), RECORD_SCHEMA)


def kinds(
    spark: Any, tmp_path: Path, exported: Any, held: Any, rules: Rules
) -> dict[tuple[str, int, int], tuple[str, Any, str]]:
    records = read_exports(spark, find_exports(write_export(tmp_path, exported)))
    out = classify(records, site(spark, held), rules).collect()
    return {(r["topic"], r["partition"], r["offset"]): (r["kind"], r["targetOffset"], r["detail"]) for r in out}


def test_present_records_are_matched_as_a_multiset_by_content_and_timestamp(spark: Any, tmp_path: Path) -> None:
    a, b, c = (T0, b"a", b"A"), (T0 + 1, b"b", b"B"), (T0 + 2, b"c", b"C")
    exported = {("orders", 0): (10, [a, b, a, c, (T0 + 3, b"h", b"H", (("x", b""),))])}
    # re-produced after the failover: a once, c with a new timestamp, h with a null header value
    held = {("orders", 0): (10, [(T0 + 9, b"n", b"N"), a, (T0 + 50, b"c", b"C"), (T0 + 3, b"h", b"H", (("x", None),))])}
    got = kinds(spark, tmp_path, exported, held, Rules())
    assert got[("orders", 0, 10)][:2] == ("present", 11)
    assert got[("orders", 0, 10)][2] == "on the new primary: orders-0 offset 11"
    assert got[("orders", 0, 11)][0] == "would-replay"
    assert got[("orders", 0, 12)][:2] == ("would-replay", None)  # the second a: the site holds one
    assert got[("orders", 0, 12)][2] == "to orders-0"
    assert got[("orders", 0, 13)][0] == "would-replay"  # same content, other timestamp
    assert got[("orders", 0, 14)][0] == "would-replay"  # an empty header value is not a null one


def test_on_a_log_append_time_topic_timestamps_are_not_compared(spark: Any, tmp_path: Path) -> None:
    exported = {("audit", 0): (0, [(T0, b"k", b"v")])}
    held = {("audit", 0): (5, [(T0 + 1234, b"k", b"v")])}
    assert kinds(spark, tmp_path, exported, held, Rules())[("audit", 0, 0)][0] == "would-replay"
    assert kinds(spark, tmp_path / "2", exported, held, Rules(log_append=frozenset({"audit"})))[("audit", 0, 0)][
        :2
    ] == ("present", 5)


def test_topics_time_range_and_transactions_filter_records(spark: Any, tmp_path: Path) -> None:
    exported = {
        ("orders", 0): (0, [(T0 + i, b"k", b"v%d" % i) for i in range(4)]),
        ("audit", 0): (0, [(T0, b"k", b"a")]),
    }
    rules = Rules(topics=frozenset({"orders"}), from_ms=T0 + 1, to_ms=T0 + 3)
    got = kinds(spark, tmp_path, exported, {}, rules)
    assert got[("audit", 0, 0)][::2] == ("filtered", "topic not among --topics")
    assert got[("orders", 0, 0)][::2] == ("filtered", "timestamp before --from 2025-10-23T06:13:20.001000Z")
    assert [got[("orders", 0, o)][0] for o in (1, 2)] == ["would-replay", "would-replay"]
    assert got[("orders", 0, 3)][::2] == ("filtered", "timestamp at or after --to 2025-10-23T06:13:20.003000Z")


def test_transactional_records_are_filtered_unless_asked_for(spark: Any, tmp_path: Path) -> None:
    import json

    def transactional(lines: list[dict[str, Any]]) -> list[str]:
        return [json.dumps({**line, "transactional": line["offset"] == 1}) for line in lines]

    records = read_exports(
        spark,
        find_exports(
            write_export(tmp_path, {("orders", 0): (0, [(T0, b"k", b"a"), (T0, b"k", b"b")])}, edit=transactional)
        ),
    )
    plain = {r["offset"]: r["kind"] for r in classify(records, site(spark, {}), Rules()).collect()}
    assert plain == {0: "would-replay", 1: "filtered"}
    both = {
        r["offset"]: r["kind"] for r in classify(records, site(spark, {}), Rules(include_transactional=True)).collect()
    }
    assert both == {0: "would-replay", 1: "would-replay"}


@pytest.mark.parametrize("count", [1, 3])
def test_a_topic_with_fewer_partitions_now_is_placed_by_key(spark: Any, tmp_path: Path, count: int) -> None:
    exported = {("orders", p): (100, [(T0 + p, b"key-%d" % p, b"v"), (T0 + 10 + p, None, b"n")]) for p in range(4)}
    key3 = key_partition(b"key-3", count)
    held = {("orders", key3): (0, [(T0 + 3, b"key-3", b"v")])}
    records = read_exports(spark, find_exports(write_export(tmp_path, exported)))
    out = classify(records, site(spark, held), Rules(by_key={"orders": count})).collect()
    placed = {(r["partition"], r["offset"]): (r["targetPartition"], r["kind"]) for r in out}
    for p in range(4):
        assert placed[(p, 100)][0] == key_partition(b"key-%d" % p, count)
        assert placed[(p, 101)] == (p % count, "would-replay")  # a null key keeps its partition, modulo the count
    assert placed[(3, 100)] == (key3, "present")
    assert {r["detail"] for r in out if r["kind"] == "would-replay" and r["partition"] == 0} == {
        f"to orders-{t} (placed by key: the topic has fewer partitions now)"
        for t in (key_partition(b"key-0", count), 0)
    }
