"""chaos.history: entries numbered in order, flushed per line, read back; a torn last line is skipped."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from chaos.history import History, HistoryError, load

pytestmark = pytest.mark.unit


def test_entries_are_numbered_timed_and_flushed_as_they_happen(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history = History(path)
    invoked = history.invoke("producer-0", "send", topic="t", value="r-0")
    history.complete(invoked, "ok", topic="t", partition=0, offset=7, value="r-0")
    history.nemesis("start", "kill-leader", "east node 2")
    lines = [json.loads(line) for line in path.read_text().splitlines()]  # before close: already flushed
    assert [op["index"] for op in lines] == [0, 1, 2]
    assert [op["type"] for op in lines] == ["invoke", "ok", "info"]
    assert lines[1]["process"] == "producer-0" and lines[1]["f"] == "send" and lines[1]["offset"] == 7
    assert lines[2] == {
        **lines[2],
        "process": "nemesis",
        "f": "start",
        "nemesis": "kill-leader",
        "target": "east node 2",
    }
    assert lines[0]["mono"] <= lines[1]["mono"] <= lines[2]["mono"]
    history.close()
    assert load(path).ops == lines


def test_appends_from_threads_get_distinct_indexes_in_file_order(tmp_path: Path) -> None:
    history = History(tmp_path / "h.jsonl")

    def write(n: int) -> None:
        for i in range(200):
            history.invoke(f"p{n}", "send", topic="t", value=f"{n}-{i}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history.close()
    assert [op["index"] for op in load(tmp_path / "h.jsonl")] == list(range(800))


def test_a_torn_last_line_is_skipped_and_a_torn_middle_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as history:
        history.invoke("p", "send", topic="t", value="a")
    path.write_text(path.read_text() + '{"index": 1, "type": "o')
    assert len(load(path)) == 1
    path.write_text('{"index": 1, "ty\n' + path.read_text())
    with pytest.raises(HistoryError, match=r"h\.jsonl:1: not JSON"):
        load(path)


def test_bad_entries_are_named() -> None:
    with pytest.raises(HistoryError, match="invalid op type 'done'"):
        History().append("done", "p", "send")  # type: ignore[arg-type]


def test_an_entry_without_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"type": "ok", "f": "send"}\n')
    with pytest.raises(HistoryError, match="needs 'process' and 'f'"):
        load(path)
