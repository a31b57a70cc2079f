"""The ledger job's anomalies on synthetic histories: each kind, and chaos/'s checkers agreeing record for record.

Every history here is built with the checkers' own test builder; :func:`agree` runs both the
checkers and the ledger on it (the site: the primary's final read) and requires the same
anomalies, then each test says which those are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.jobs._history import HistoryError, history_files, read_history
from spark_jobs.jobs._ledger import audit
from tests.chaos.checkers.builder import Builder, log, rec
from tests.spark_jobs.ledger_agreement import agree, run_ledger, site_frame, unsampled, write_history

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    unsampled(monkeypatch)


def records(found: Any, kind: str) -> list[tuple[Any, ...]]:
    return sorted(found[kind][1])


def acked(b: Builder, value: str, process: str = "producer-0") -> int:
    """The index of the acknowledgement of ``value`` by ``process`` (the last one)."""
    sends = [op for op in b.ops if op["type"] == "ok" and op["f"] == "send"]
    return max(op["index"] for op in sends if (op["value"], op["process"]) == (value, process))


def counts(found: Any) -> dict[str, int]:
    return {kind: n for kind, (n, _) in found.items() if n}


def test_a_clean_history_has_no_anomaly_and_an_unacknowledged_write_that_landed_is_none(
    spark: Any, tmp_path: Path
) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c"])
    b.unacked("producer-0", "x")  # timed out, yet it landed
    b.unacked("producer-0", "y", type="fail")
    b.poll("group-0", log(["a", "b"]))
    b.read("east", log(["a", "b", "c", "x"]), ends={"t/0": [0, 4]})
    assert counts(agree(spark, tmp_path, b.ops)) == {}
    rows, ledger = run_ledger(spark, write_history(tmp_path / "h.jsonl", b.ops), site_frame(spark, log(list("abcx"))))
    assert rows == []
    assert ledger.totals["acknowledged"] == 3 and ledger.totals["site_records"] == 4
    assert ledger.totals["unacknowledged_landed"] == 1
    assert ledger.partitions == [
        {
            "topic": "t",
            "partition": 0,
            "counts": {"acknowledged": 3, "site_records": 4},
            "ranges": {"site": [0, 4]},
        }
    ]


def test_lost_writes_and_what_is_not_lost(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b", "c", "d", "e", "f"])
    b.export([rec(5, "f")])  # exported by a failover: rpo-accuracy's, not lost
    # The site's log starts at 1 (a was deleted by retention): a is not examined.
    b.read("east", log(["b", "c"], start=1), ends={"t/0": [1, 3]})
    found = agree(spark, tmp_path, b.ops)
    assert counts(found) == {"lost": 2}
    assert records(found, "lost") == [
        ("send", "t", 0, 3, "d", "producer-0", acked(b, "d")),
        ("send", "t", 0, 4, "e", "producer-0", acked(b, "e")),
    ]


def test_moved_and_one_value_acknowledged_at_two_offsets(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.send("producer-0", "m", 2)  # the site holds m at 3 only
    b.send("producer-1", "a", 4)  # a again, acknowledged at 4 too
    b.read("east", log(["a", "b", "n", "m", "o"]), ends={"t/0": [0, 5]})
    found = agree(spark, tmp_path, b.ops)
    assert counts(found) == {"moved": 2, "inconsistent-offsets": 2}
    assert records(found, "moved") == [
        ("read", "t", 0, 0, "a"),
        ("read", "t", 0, 3, "m"),
        ("send", "t", 0, 2, "m", "producer-0", acked(b, "m")),
        ("send", "t", 0, 4, "a", "producer-1", acked(b, "a", "producer-1")),
    ]
    # Offset 2 holds n on the site, acknowledged as m; offset 4 holds o, acknowledged as a.
    assert records(found, "inconsistent-offsets") == [
        ("read", "t", 0, 2, "n"),
        ("read", "t", 0, 4, "o"),
        ("send", "t", 0, 2, "m", "producer-0", acked(b, "m")),
        ("send", "t", 0, 4, "a", "producer-1", acked(b, "a", "producer-1")),
    ]


def test_duplicates_on_the_site_acknowledged_or_not(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.unacked("producer-0", "x")
    b.read("east", [*log(["a", "b", "a", "x", "x", "x"]), rec(0, "b", partition=1)])
    found = agree(spark, tmp_path, b.ops)
    assert counts(found) == {"duplicate": 3}
    assert records(found, "duplicate") == [
        ("read", "t", 0, 0, "a"),
        ("read", "t", 0, 1, "b"),
        ("read", "t", 0, 2, "a"),
        ("read", "t", 0, 3, "x"),
        ("read", "t", 0, 4, "x"),
        ("read", "t", 0, 5, "x"),
        ("read", "t", 1, 0, "b"),
    ]


def test_a_failover_divides_the_history_into_sites(spark: Any, tmp_path: Path) -> None:
    """Before the promote the producer wrote to east; after it to west, unless a send says
    otherwise or the failover exported what it wrote (a producer still on the old primary)."""
    b = Builder()
    b.sends("producer-0", ["a", "b", "c"])  # on east; c never reached west
    b.promote("east", "west")
    b.send("producer-0", "d", 2)  # on west, where c never was: no conflict with c
    b.send("producer-0", "g", 3)  # no site, but exported below: it happened on east
    b.ack(b.invoke("producer-1", "t", "f"), 4, site="east")  # a producer still on east
    b.send("producer-0", "h", 3)  # on west at 3 too: g was east's
    b.export([rec(2, "c"), rec(3, "g")])
    b.read("west", log(["a", "b", "d", "h"]), ends={"t/0": [0, 4]})
    found = agree(spark, tmp_path, b.ops)
    # f was written to east, never exported, and west does not hold it: lost. Nothing else.
    assert counts(found) == {"lost": 1}
    assert records(found, "lost") == [("send", "t", 0, 4, "f", "producer-1", acked(b, "f", "producer-1"))]


def test_a_conflict_after_the_failover_is_on_the_new_primary(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.promote("east", "west")
    b.send("producer-0", "c", 2)  # acknowledged on west at 2, yet west holds z there
    b.read("west", log(["a", "b", "z", "c"]), ends={"t/0": [0, 4]})
    found = agree(spark, tmp_path, b.ops)
    assert counts(found) == {"moved": 1, "inconsistent-offsets": 1}
    assert records(found, "inconsistent-offsets") == [
        ("read", "t", 0, 2, "z"),
        ("send", "t", 0, 2, "c", "producer-0", acked(b, "c")),
    ]


def test_history_site_audits_the_site_the_history_names(spark: Any, tmp_path: Path) -> None:
    """The site given is east's disks: its conflicts count with east's acknowledgements."""
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.promote("east", "west")
    b.send("producer-0", "c", 2)
    b.read("west", log(["a", "b", "c"]), ends={"t/0": [0, 3]})
    path = write_history(tmp_path / "h.jsonl", b.ops)
    east = site_frame(spark, log(["a", "x"]))
    as_primary, _ = run_ledger(spark, path, east)
    as_east, _ = run_ledger(spark, path, east, audited="east")
    assert sorted((r["kind"], r["offset"]) for r in as_primary) == [("lost", 1), ("lost", 2)]
    assert sorted((r["kind"], r["offset"]) for r in as_east) == [("inconsistent-offsets", 1), ("lost", 1), ("lost", 2)]


def test_a_null_value_where_a_write_was_acknowledged_is_another_value(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.read("east", log(["a", "b"]))
    path = write_history(tmp_path / "h.jsonl", b.ops)
    rows, _ = run_ledger(spark, path, site_frame(spark, [rec(0, "a"), {**rec(1, "b"), "value": None}]))
    assert sorted((r["kind"], r["offset"]) for r in rows) == [("inconsistent-offsets", 1), ("lost", 1)]
    (conflict,) = [r for r in rows if r["kind"] == "inconsistent-offsets"]
    assert [(v["value"], v["op"]) for v in conflict["values"]] == [("b", "send"), (None, "read")]
    assert "'b' (acknowledged by producer-0" in conflict["detail"] and "null (on the site)" in conflict["detail"]


def test_invalid_rows_are_counted_and_not_compared(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.read("east", log(["a", "b"]))
    path = write_history(tmp_path / "h.jsonl", b.ops)
    damaged = {**rec(1, "garbage"), "valid": False, "error": "CRC mismatch in the batch at offset 1"}
    rows, ledger = run_ledger(spark, path, site_frame(spark, [rec(0, "a"), damaged]))
    assert [(r["kind"], r["offset"], r["value"]) for r in rows] == [("lost", 1, "b")]
    assert ledger.invalid == {"CRC mismatch in the batch at offset 1": 1}


def test_several_history_files_are_one_audit(spark: Any, tmp_path: Path) -> None:
    one, two = Builder(), Builder()
    one.sends("producer-0", ["a", "b"], topic="t")
    one.read("east", log(["a"], topic="t"))
    two.sends("producer-0", ["c", "d"], topic="u")
    two.read("east", log(["c", "d", "d"], topic="u"))
    (tmp_path / "run" / "one").mkdir(parents=True)
    (tmp_path / "run" / "two").mkdir()
    write_history(tmp_path / "run" / "one" / "history.jsonl", one.ops)
    write_history(tmp_path / "run" / "two" / "history.jsonl", two.ops)
    files = history_files([str(tmp_path / "run")])
    assert files == [str(tmp_path / "run" / n / "history.jsonl") for n in ("one", "two")]
    history = read_history(spark, files)
    site = site_frame(spark, log(["a"], topic="t") + log(["c", "d", "d"], topic="u"))
    ledger = audit(history, site, dict.fromkeys(files, "east"), ["t", "u"])
    ledger.count()
    rows = ledger.anomalies.collect()
    ledger.release()
    assert sorted((r["kind"], r["topic"], r["offset"], r["file"]) for r in rows) == [
        ("duplicate", "u", 1, None),
        ("lost", "t", 1, files[0]),
    ]
    assert ledger.totals["history_files"] == 2 and ledger.totals["partitions"] == 2


# -- reading the history ---------------------------------------------------------------------------


def test_malformed_lines_are_counted_and_shown_with_their_line_numbers(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    lines = [json.dumps(op) for op in b.ops]
    lines.insert(1, "not json at all")
    lines.insert(3, '{"index": 9, "type": "ok", "process": "producer-0", "f": "send", "topic": "t", "value": "z"}')
    lines.insert(4, "")
    lines.insert(5, '{"index": "ten", "type": "ok", "process": "p", "f": "x"}')
    lines.insert(6, '{"index": 11, "type": "done", "process": "p", "f": "x"}')
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError) as caught:
        read_history(spark, [str(path)])
    message = str(caught.value)
    assert message.startswith(f"--history: 4 malformed lines ({path}: 4)")
    assert f"{path}:2: not a JSON object: 'not json at all'" in message
    assert f"{path}:4: an acknowledged send needs topic, partition, offset and value" in message
    assert f"{path}:6: a field has the wrong type" in message
    assert f"{path}:7: no valid 'type' (invoke, ok, fail, info)" in message


def test_a_torn_last_line_is_skipped_and_noted(spark: Any, tmp_path: Path) -> None:
    b = Builder()
    b.sends("producer-0", ["a", "b"])
    b.read("east", log(["a"]))
    path = write_history(tmp_path / "history.jsonl", b.ops)
    with path.open("a") as f:
        f.write('\n\n{"index": 7, "type": "ok", "proc')
    history = read_history(spark, [str(path)])
    assert [(t.line, t.reason) for t in history.torn] == [(9, "not a JSON object")]
    assert history.lines == 9
    assert history.ok_sends.count() == 2 and history.primaries == {str(path): "east"}


def test_history_files_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"--history .*nowhere: no such file or directory"):
        history_files([str(tmp_path / "nowhere")])
    with pytest.raises(HistoryError, match=r"holds no \*\.jsonl file"):
        history_files([str(tmp_path)])
    (tmp_path / "b.jsonl").write_text("")
    (tmp_path / "a.jsonl").write_text("")
    assert history_files([str(tmp_path)]) == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
