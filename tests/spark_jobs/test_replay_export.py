"""Replay's reading of a divergence export (spark_jobs.jobs._divergence): found, checked, decoded."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.jobs._common import BadInput
from spark_jobs.jobs._divergence import find_exports, read_exports
from tests.spark_jobs.divergence_files import T0, write_export


def orders(n: int, *, cut: int = 0) -> list[tuple[Any, ...]]:
    return [(T0 + i, f"k{i}".encode(), f"v{i}".encode()) for i in range(n)]


def test_an_epoch_directory_or_any_directory_above_it_is_an_export(tmp_path: Path) -> None:
    one = write_export(tmp_path, {("orders", 0): (10, orders(2))}, epoch=1)
    two = write_export(tmp_path, {("orders", 0): (20, orders(1))}, epoch=2)
    assert [e.directory for e in find_exports(one)] == [one]
    found = find_exports(tmp_path)
    assert [(e.link, e.epoch, e.records) for e in found] == [("east-to-west", 1, 2), ("east-to-west", 2, 1)]
    assert [e.directory for e in find_exports(tmp_path / "east-to-west")] == [one, two]
    assert [(p.topic, p.partition, p.cut, p.end, p.records) for p in found[0].partitions] == [("orders", 0, 10, 12, 2)]


def test_an_export_without_its_summary_is_incomplete_and_refused(tmp_path: Path) -> None:
    directory = write_export(tmp_path, {("orders", 0): (10, orders(2))})
    (directory / "summary.json").unlink()
    with pytest.raises(BadInput, match=r"--export .*epoch-1: incomplete export: summary.json is missing"):
        find_exports(tmp_path)
    (directory / "divergence.jsonl").rename(directory / ".divergence.jsonl.tmp")  # killed while writing it
    with pytest.raises(BadInput, match="incomplete export"):
        find_exports(directory)


def test_missing_paths_foreign_summaries_and_changed_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"--export .*nowhere: no such directory"):
        find_exports(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match=r"no divergence export \(divergence.jsonl\)"):
        find_exports(tmp_path / "empty")
    directory = write_export(tmp_path / "a", {("orders", 0): (10, orders(2))})
    summary = json.loads((directory / "summary.json").read_text())
    (directory / "summary.json").write_text(json.dumps({**summary, "format": 2}))
    with pytest.raises(BadInput, match="export format 2, this job reads format 1"):
        find_exports(directory)
    (directory / "summary.json").write_text(json.dumps({"job": "reconcile"}))
    with pytest.raises(BadInput, match="not a divergence export's summary"):
        find_exports(directory)
    (directory / "summary.json").write_text(json.dumps(summary))
    with (directory / "divergence.jsonl").open("a") as f:
        f.write("{}\n")
    with pytest.raises(BadInput, match=r"its SHA-256 is .* summary.json says .*changed or damaged"):
        find_exports(directory)


def test_the_same_link_and_epoch_twice_is_refused(tmp_path: Path) -> None:
    write_export(tmp_path / "copy-1", {("orders", 0): (10, orders(1))})
    write_export(tmp_path / "copy-2", {("orders", 0): (10, orders(1))})
    with pytest.raises(BadInput, match="two exports of link east-to-west epoch 1"):
        find_exports(tmp_path)


def test_keys_values_and_headers_decode_to_the_bytes_the_old_primary_held(spark: Any, tmp_path: Path) -> None:
    records = [
        (T0, b"order-1", b'{"total": 12}', (("trace", b"abc"), ("none", None), ("bin", b"\x00\x80"))),
        (T0 + 1, None, b"\xff\xfe\x00"),
        (T0 + 2, b"\xc3\xa9t\xc3\xa9", None),
        (T0 + 3, b"", b"", (("empty", b""),)),
    ]
    directory = write_export(tmp_path, {("orders", 3): (40, records), ("other", 0): (0, [])})
    rows = read_exports(spark, find_exports(directory)).orderBy("offset").collect()
    assert [r["offset"] for r in rows] == [40, 41, 42, 43]
    assert {(r["topic"], r["partition"], r["link"], r["epoch"], r["export"]) for r in rows} == {
        ("orders", 3, "east-to-west", 1, str(directory))
    }
    assert [r["key"] for r in rows] == [b"order-1", None, "été".encode(), b""]
    assert [r["value"] for r in rows] == [b'{"total": 12}', b"\xff\xfe\x00", None, b""]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in rows] == [
        [("trace", b"abc"), ("none", None), ("bin", b"\x00\x80")],
        [],
        [],
        [("empty", b"")],
    ]
    assert [r["timestampMs"] for r in rows] == [T0, T0 + 1, T0 + 2, T0 + 3]
    assert {(r["timestampType"], r["isTransactional"]) for r in rows} == {(0, False)}


def _damaged(change: str) -> Any:
    def edit(lines: list[dict[str, Any]]) -> list[str]:
        texts = [json.dumps(line) for line in lines]
        if change == "not json":
            texts[1] = '{"topic": "orders", "partition": 0,'
        elif change == "wrong type":
            texts[1] = json.dumps({**lines[1], "offset": "eleven"})
        elif change == "no topic":
            texts[1] = json.dumps({k: v for k, v in lines[1].items() if k != "topic"})
        elif change == "bad base64":
            texts[1] = json.dumps({**lines[1], "value": "@@not base64@@", "value_encoding": "base64"})
        elif change == "lenient base64":
            value = base64.b64encode(b"0123456789").decode()
            texts[1] = json.dumps({**lines[1], "value": value[:4] + "\n" + value[4:], "value_encoding": "base64"})
        elif change == "unknown encoding":
            texts[1] = json.dumps({**lines[1], "key_encoding": "latin1"})
        elif change == "header encoding":
            texts[1] = json.dumps({**lines[1], "headers": [{"key": "h", "value": "x", "encoding": "hex"}]})
        return texts

    return edit


@pytest.mark.parametrize(
    "change",
    ["not json", "wrong type", "no topic", "bad base64", "lenient base64", "unknown encoding", "header encoding"],
)
def test_a_malformed_line_is_refused_naming_the_file(spark: Any, tmp_path: Path, change: str) -> None:
    directory = write_export(tmp_path, {("orders", 0): (10, orders(3))}, edit=_damaged(change))
    exports = find_exports(directory)  # the summary describes the file as it is: only its content is wrong
    with pytest.raises(BadInput, match=r"--export .*divergence.jsonl: 1 malformed line\(s\), e.g. "):
        read_exports(spark, exports)


def test_a_file_holding_fewer_lines_than_its_summary_says_is_refused(spark: Any, tmp_path: Path) -> None:
    directory = write_export(tmp_path, {("orders", 0): (10, orders(3))})
    summary = json.loads((directory / "summary.json").read_text())
    (directory / "summary.json").write_text(json.dumps({**summary, "records": 4}))
    with pytest.raises(BadInput, match="holds 3 record line"):
        read_exports(spark, find_exports(directory))
