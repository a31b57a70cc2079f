"""Offset and time indexes: lookups, truncation, file format, padding and corruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import CorruptIndexError
from storage._index import OffsetIndex, TimeIndex


def test_offset_index_lookup_finds_the_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    for offset, pos in [(110, 400), (120, 800), (130, 1200)]:
        index.append(offset, pos)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(115) == (110, 400)
    assert index.lookup(120) == (120, 800)
    assert index.lookup(10_000) == (130, 1200)


def test_offset_index_file_is_kafka_format_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 1024)
    index.append(110, 400)
    index.append(120, 800)
    index.flush(fsync=True)
    assert path.read_bytes() == bytes.fromhex("0000000a000001900000001400000320")
    again = OffsetIndex(path, 100, 1024)
    again.load(log_size=1000)
    assert [again.lookup_entry(i) for i in range(len(again))] == [(110, 400), (120, 800)]


def test_truncate_then_flush_shortens_the_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 1024)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.flush(fsync=False)
    index.truncate_to(30)
    index.append(35, 350)
    index.flush(fsync=False)
    assert path.stat().st_size == 3 * 8
    again = OffsetIndex(path, 0, 1024)
    again.load(log_size=1000)
    assert [again.lookup_entry(i) for i in range(3)] == [(10, 100), (20, 200), (35, 350)]


def test_trailing_zero_padding_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes.fromhex("0000000500000100") + bytes(8 * 10))
    index = OffsetIndex(path, 0, 1024)
    index.load(log_size=1000)
    assert len(index) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (bytes(7), "not a multiple"),
        (bytes.fromhex("00000005000001000000000400000200"), "not after"),
        (bytes.fromhex("0000000500009999"), "outside the log"),
    ],
)
def test_corrupt_offset_index_is_refused(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError, match=reason):
        OffsetIndex(path, 0, 1024).load(log_size=1000)


def test_appending_out_of_order_is_refused(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 1024)
    index.append(10, 100)
    with pytest.raises(CorruptIndexError, match="cannot add"):
        index.append(10, 200)


def test_index_is_full_at_segment_index_bytes(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 8 * 3)
    for i in range(1, 4):
        assert not index.is_full
        index.append(i, i * 10)
    assert index.is_full


def test_time_index_keeps_increasing_timestamps_only(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 1200)
    index.maybe_append(1000, 55)
    index.maybe_append(900, 60)  # not larger: ignored
    index.maybe_append(2000, 70)
    assert len(index) == 2
    assert index.lookup(500) == (-1, 50)
    assert index.lookup(1500) == (1000, 55)
    index.flush(fsync=False)
    assert path.read_bytes() == (1000).to_bytes(8, "big") + (5).to_bytes(4, "big") + (2000).to_bytes(8, "big") + (
        20
    ).to_bytes(4, "big")
    index.truncate_to(60)
    assert len(index) == 1
    again = TimeIndex(path, 50, 1200)
    index.flush(fsync=False)
    again.load()
    assert again.last_entry == (1000, 55)


def test_corrupt_time_index_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes((2000).to_bytes(8, "big") + bytes(4) + (1000).to_bytes(8, "big") + (1).to_bytes(4, "big"))
    with pytest.raises(CorruptIndexError, match="not after"):
        TimeIndex(path, 0, 1200).load()
