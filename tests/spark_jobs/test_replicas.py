"""The replicas job's comparison on synthetic copies: every kind, the high watermark, and finding the copies on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_jobs.jobs._replicas import Copy, ReplicaInputError, compare, discover, log_dirs_of, node_dirs
from spark_jobs.schema import RECORD_SCHEMA
from storage import TopicPartition
from storage._checkpoint import write_offsets

T0 = 1_700_000_000_000_000  # µs


def copy(name: str, hw: int | None, log_start: int | None = None, topic: str = "t", partition: int = 0) -> Copy:
    return Copy(name, f"/nodes/{name}/d1", topic, partition, hw, log_start)


def rows(c: Copy, values: dict[int, str], epochs: dict[int, int] | None = None, **extra: Any) -> list[dict[str, Any]]:
    """``c``'s records: offset -> value (leader epoch 0 unless ``epochs`` says)."""
    out = []
    for offset, value in sorted(values.items()):
        row = dict.fromkeys(RECORD_SCHEMA.fieldNames())
        row.update(
            topic=c.topic,
            partition=c.partition,
            offset=offset,
            value=value.encode(),
            key=None,
            headers=[],
            timestamp=None,
            timestampType=0,
            producerId=-1,
            producerEpoch=-1,
            sequence=-1,
            leaderEpoch=(epochs or {}).get(offset, 0),
            isTransactional=False,
            isControl=False,
            codec="none",
            batchOffset=offset,
            crcValid=True,
            valid=True,
            segment=f"{c.directory}/00000000000000000000.log",
        )
        row.update(extra)
        out.append(row)
    return out


def frame(spark: Any, *groups: list[dict[str, Any]]) -> Any:
    names = RECORD_SCHEMA.fieldNames()
    return spark.createDataFrame([tuple(r[n] for n in names) for g in groups for r in g], RECORD_SCHEMA)


def found(result: Any) -> list[tuple[str, int, str | None]]:
    return sorted((r["kind"], r["offset"], r["copy"]) for r in result.discrepancies.collect())


def informational(result: Any) -> list[tuple[str, int, str | None]]:
    return sorted((r["kind"], r["offset"], r["copy"]) for r in result.informational.collect())


ABCDE = dict(enumerate("abcde"))


def test_copies_that_agree_below_the_hw_are_clean_and_a_leader_s_tail_is_informational(spark: Any) -> None:
    a, b, c = copy("node-1", 5), copy("node-2", 4), copy("node-3", 5)
    source = frame(spark, rows(a, {**ABCDE, 5: "f", 6: "g"}), rows(b, ABCDE), rows(c, ABCDE))
    result = compare(spark, source, [a, b, c])
    assert found(result) == []
    assert informational(result) == [("uncommitted", 5, None), ("uncommitted", 6, None)]
    (row,) = [r for r in result.informational.collect() if r["offset"] == 5]
    assert "node-2, node-3 hold nothing there" in row["detail"] and "node-1: epoch 0, hash" in row["detail"]
    assert result.totals == {
        "nodes": 3,
        "log_dirs": 3,
        "partitions": 1,
        "copies": 3,
        "records": 17,
        "short_copies": 0,
    }
    (part,) = result.partitions
    assert part["counts"] == {
        "copies": 3,
        "hw": 5,
        "records.node-1": 7,
        "records.node-2": 5,
        "records.node-3": 5,
        "short_copies": 0,
    }
    assert part["ranges"] == {"node-1": [0, 7], "node-2": [0, 5], "node-3": [0, 5]}
    result.release()


def test_divergent_content_or_leader_epoch_below_the_hw(spark: Any) -> None:
    a, b, c = copy("node-1", 5), copy("node-2", 5), copy("node-3", 5)
    source = frame(
        spark,
        rows(a, ABCDE),
        rows(b, {**ABCDE, 1: "B"}),  # another value at 1
        rows(c, ABCDE, epochs={3: 7}),  # the same value at 3, written in another epoch
    )
    result = compare(spark, source, [a, b, c])
    assert found(result) == [("divergent", 1, None), ("divergent", 3, None)]
    one = next(r for r in result.discrepancies.collect() if r["offset"] == 1)
    assert {(h["copy"], h["leaderEpoch"]) for h in one["copies"]} == {("node-1", 0), ("node-2", 0), ("node-3", 0)}
    assert "below the HW 5, differs between copies: " in one["detail"]
    assert "node-1, node-3: epoch 0, hash" in one["detail"] and "node-2: epoch 0, hash" in one["detail"]
    three = next(r for r in result.discrepancies.collect() if r["offset"] == 3)
    assert "node-3: epoch 7" in three["detail"]


def test_a_hole_within_a_copy_is_missing_and_what_retention_removed_is_not(spark: Any) -> None:
    a, b = copy("node-1", 5), copy("node-2", 5)
    c = copy("node-3", 5, log_start=2)  # retention deleted 0 and 1 there
    source = frame(
        spark,
        rows(a, ABCDE),
        rows(b, {k: v for k, v in ABCDE.items() if k != 2}),
        rows(c, {k: v for k, v in ABCDE.items() if k >= 2}),
    )
    result = compare(spark, source, [a, b, c])
    assert found(result) == [("missing", 2, "node-2")]
    (row,) = result.discrepancies.collect()
    assert row["detail"] == (
        "node-2 lacks t/0 offset 2 (below the HW 5, within its log [0, 5)), which node-1, node-3 hold"
    )
    assert result.partitions[0]["ranges"]["node-3"] == [2, 5]


def test_a_short_copy_is_informational_unless_strict(spark: Any) -> None:
    a, b = copy("node-1", 5), copy("node-2", 5)
    c = copy("node-3", 2)  # a follower behind: its own HW is 2
    d = copy("node-4", 5)  # it had checkpointed HW 5, yet holds three records: it lost its tail
    source = frame(spark, rows(a, ABCDE), rows(b, ABCDE), rows(c, {0: "a", 1: "b"}), rows(d, {0: "a", 1: "b", 2: "c"}))
    lenient = compare(spark, source, [a, b, c, d])
    assert found(lenient) == []
    assert informational(lenient) == [("short", 2, "node-3"), ("short", 3, "node-4")]
    details = {r["copy"]: r["detail"] for r in lenient.informational.collect()}
    assert details["node-3"].startswith("node-3's copy of t/0 ends at 2, below the HW 5 (3 offsets short)")
    assert "a follower behind" in details["node-3"]
    assert "it had checkpointed its own HW at 5: it lost records it held" in details["node-4"]
    assert lenient.partitions[0]["counts"]["short_copies"] == 2
    assert any("node-3's copy ends at 2, below the HW 5 (informational)" in note for note in lenient.notes)
    strict = compare(spark, source, [a, b, c, d], strict=True)
    assert found(strict) == [("short", 2, "node-3"), ("short", 3, "node-4")]
    assert informational(strict) == []


def test_an_empty_copy_is_short_and_a_copy_without_checkpoint_takes_the_others_hw(spark: Any) -> None:
    a, b, c = copy("node-1", 5), copy("node-2", None), copy("node-3", None, log_start=0)
    source = frame(spark, rows(a, ABCDE), rows(b, ABCDE))
    result = compare(spark, source, [a, b, c])
    assert found(result) == []
    assert informational(result) == [("short", 0, "node-3")]
    assert result.partitions[0]["ranges"]["node-3"] == [0, 0]


def test_without_any_checkpoint_every_difference_is_uncommitted(spark: Any) -> None:
    a, b = copy("node-1", None), copy("node-2", None)
    source = frame(spark, rows(a, ABCDE), rows(b, {**ABCDE, 1: "B"}))
    result = compare(spark, source, [a, b])
    assert found(result) == []
    assert informational(result) == [("uncommitted", 1, None)]
    assert any("no copy has a replication-offset-checkpoint entry" in note for note in result.notes)
    assert "hw" not in result.partitions[0]["counts"]


def test_invalid_rows_are_counted_and_a_crc_mismatch_still_compares(spark: Any) -> None:
    a, b = copy("node-1", 3), copy("node-2", 3)
    bad = "CRC mismatch in the batch at offset 1"
    damaged = rows(b, {1: "X"}, valid=False, crcValid=False, error=bad)
    torn = dict.fromkeys(RECORD_SCHEMA.fieldNames())
    torn.update(topic="t", partition=0, offset=3, valid=False, error="torn tail", segment=f"{b.directory}/0.log")
    source = frame(spark, rows(a, {0: "a", 1: "b", 2: "c"}), rows(b, {0: "a", 2: "c"}), damaged, [torn])
    result = compare(spark, source, [a, b])
    assert found(result) == [("divergent", 1, None)]
    assert result.invalid == {bad: 1, "torn tail": 1}


def test_several_partitions_and_topics(spark: Any) -> None:
    copies = [copy(f"node-{n}", 3, topic=t, partition=p) for n in (1, 2) for t in ("t", "u") for p in (0, 1)]
    groups = [rows(c, {0: "a", 1: "b", 2: "c"}) for c in copies]
    groups[-1] = rows(copies[-1], {0: "a", 1: "x", 2: "c"})  # node-2's copy of u-1
    result = compare(spark, frame(spark, *groups), copies)
    assert [(r["kind"], r["topic"], r["partition"], r["offset"]) for r in result.discrepancies.collect()] == [
        ("divergent", "u", 1, 1)
    ]
    assert [(p["topic"], p["partition"]) for p in result.partitions] == [("t", 0), ("t", 1), ("u", 0), ("u", 1)]


# -- finding the copies ------------------------------------------------------------------------------


def make_node(root: Path, name: str, parts: dict[str, tuple[int, int]], dirs: int = 2) -> Path:
    """A node dir with log dirs d1..dN, the partitions spread over them, with HW and log start checkpoints."""
    node = root / name
    node.mkdir(parents=True)
    (node / "node.log").write_text("a node's log: no segment\n")
    for i in range(1, dirs + 1):
        (node / f"d{i}").mkdir(parents=True)
        (node / f"d{i}" / "meta.properties").write_text("version=0\nbroker.id=1\n")
    hws: dict[int, dict[TopicPartition, int]] = {}
    starts: dict[int, dict[TopicPartition, int]] = {}
    for n, (name_, (hw, start)) in enumerate(sorted(parts.items())):
        topic, _, partition = name_.rpartition("-")
        d = n % dirs + 1
        (node / f"d{d}" / name_).mkdir()
        hws.setdefault(d, {})[TopicPartition(topic, int(partition))] = hw
        starts.setdefault(d, {})[TopicPartition(topic, int(partition))] = start
    for d in range(1, dirs + 1):
        write_offsets(node / f"d{d}" / "replication-offset-checkpoint", hws.get(d, {}))
        write_offsets(node / f"d{d}" / "log-start-offset-checkpoint", starts.get(d, {}))
    return node


def test_discovery_reads_each_log_dir_s_checkpoints(tmp_path: Path) -> None:
    one = make_node(tmp_path / "site", "node-1", {"t-0": (10, 0), "t-1": (7, 2), "__consumer_offsets-0": (1, 0)})
    make_node(tmp_path / "site", "node-2", {"t-0": (9, 0), "u-0": (3, 0)})
    (tmp_path / "site" / "zookeeper").mkdir()
    nodes = node_dirs([], str(tmp_path / "site"))
    assert [n.name for n in nodes] == ["node-1", "node-2"]
    assert log_dirs_of(one) == [one / "d1", one / "d2"]
    assert log_dirs_of(one / "d1") == [one / "d1"]
    assert log_dirs_of(tmp_path / "site") == [], "node-1/ holding node.log is no partition dir"
    found = {(c.name, c.topic, c.partition, c.hw, c.log_start) for c in discover(nodes, None)}
    assert found == {
        ("node-1", "t", 0, 10, 0),
        ("node-1", "t", 1, 7, 2),
        ("node-2", "t", 0, 9, 0),
        ("node-2", "u", 0, 3, 0),
    }
    assert {c.topic for c in discover(nodes, ["__consumer_offsets"])} == {"__consumer_offsets"}
    (one / "d1" / "replication-offset-checkpoint").write_text("0\n5\nt 0 10\n")
    with pytest.raises(ReplicaInputError, match=r"--node .*node-1: .*replication-offset-checkpoint: header says 5"):
        discover(nodes, None)


def test_bad_node_dirs_are_named(tmp_path: Path) -> None:
    with pytest.raises(ReplicaInputError, match=r"--node .*nowhere: no such directory"):
        node_dirs([str(tmp_path / "nowhere")], None)
    with pytest.raises(ReplicaInputError, match=r"--site-dir .*nowhere: no such directory"):
        node_dirs([], str(tmp_path / "nowhere"))
    with pytest.raises(ReplicaInputError, match=r"--site-dir .*: holds no node directory"):
        node_dirs([], str(tmp_path))
    with pytest.raises(ReplicaInputError, match=r"give the nodes' dirs"):
        node_dirs([], None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReplicaInputError, match=r"--node .*empty: holds no log dir"):
        discover(node_dirs([str(tmp_path / "empty")], None), None)
