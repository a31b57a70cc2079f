"""``strait log dump | verify | recover | demo`` as a user runs them: real processes, real files."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from storage import FaultPoints, LogConfig, TopicPartition, create_log
from storage.records import Compression, build_batch
from tests.storage.helpers import FakeClock

STRAIT = [sys.executable, "-m", "strait.cli"]


def strait(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STRAIT, *map(str, args)], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    """A partition dir with two segments, every codec, binary and null keys/values, headers."""
    directory = tmp_path / "logs" / "orders-0"
    log = create_log(
        directory,
        TopicPartition("orders", 0),
        LogConfig(segment_bytes=700, index_interval_bytes=100),
        faults=FaultPoints(),
        clock=FakeClock(),
    )
    for i, codec in enumerate(list(Compression) * 2):
        log.append(
            build_batch(
                [
                    (1000 + i, f"key-{i}".encode(), f"value-{i}".encode(), [("trace", b"abc"), ("empty", None)]),
                    (1001 + i, None, b"\xff\xfe binary"),
                    (1002 + i, b"\x00\x9f", None),
                ],
                compression=codec,
            )
        )
    log.close()
    assert len(list(directory.glob("*.log"))) >= 2
    return directory


def test_help_lists_the_subcommands() -> None:
    out = strait("--help").stdout
    assert "log" in out
    log_help = strait("log", "--help").stdout
    for command in ("dump", "verify", "recover", "demo"):
        assert command in log_help


def test_dump_lists_batches(partition: Path) -> None:
    result = strait("log", "dump", partition)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("position:")]
    assert len(lines) == 10
    assert 'codec: "zstd"' in result.stdout and "crc_ok: true" in result.stdout


def test_dump_records_as_json(partition: Path) -> None:
    result = strait("log", "dump", "--records", "--json", partition)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["offset"] for r in records] == list(range(30))
    first, second, third = records[:3]
    assert (first["key"], first["value"], first["timestamp"]) == ("key-0", "value-0", 1000)
    assert first["headers"] == [{"key": "trace", "value": "abc"}, {"key": "empty", "value": None}]
    assert second["key"] is None and base64.b64decode(second["value_b64"]) == b"\xff\xfe binary"
    assert base64.b64decode(third["key_b64"]) == b"\x00\x9f" and third["value"] is None


def test_dump_an_index_file(partition: Path) -> None:
    index = next(p for p in sorted(partition.glob("*.index")) if p.stat().st_size)
    result = strait("log", "dump", "--json", index)
    entries = [json.loads(line) for line in result.stdout.splitlines()]
    assert entries and all(set(e) == {"offset", "position"} for e in entries)


def test_verify_accepts_a_valid_log_and_a_missing_index(partition: Path) -> None:
    result = strait("log", "verify", partition)
    assert result.returncode == 0 and "10 batches" in result.stdout
    next(partition.glob("*.index")).unlink()
    assert strait("log", "verify", partition.parent).returncode == 0  # a whole log dir, index missing


def test_verify_names_the_first_bad_file_and_position(partition: Path) -> None:
    segment = sorted(partition.glob("*.log"))[-1]
    raw = bytearray(segment.read_bytes())
    second_batch = int.from_bytes(raw[8:12], "big") + 12
    raw[second_batch + 40] ^= 1
    segment.write_bytes(raw)
    result = strait("log", "verify", partition)
    assert result.returncode == 1
    assert f"INVALID {segment} at byte {second_batch}: CRC-32C mismatch" in result.stderr


def test_verify_rejects_an_index_pointing_nowhere(partition: Path) -> None:
    index = next(p for p in sorted(partition.glob("*.index")) if p.stat().st_size)
    raw = bytearray(index.read_bytes())
    raw[4:8] = (3).to_bytes(4, "big")  # position 3 is inside the first batch
    index.write_bytes(raw)
    result = strait("log", "verify", partition)
    assert result.returncode == 1 and f"INVALID {index}" in result.stderr


def test_recover_cuts_a_torn_tail_and_reports_it(partition: Path) -> None:
    segment = sorted(partition.glob("*.log"))[-1]
    size = segment.stat().st_size
    with segment.open("r+b") as f:
        f.truncate(size - 10)
    assert strait("log", "verify", partition).returncode == 1
    result = strait("log", "recover", partition)
    assert result.returncode == 0, result.stderr
    assert "total bytes dropped:" in result.stdout
    dropped = int(result.stdout.split("total bytes dropped:")[1])
    assert 0 < dropped < size
    assert segment.stat().st_size == size - 10 - dropped
    assert strait("log", "verify", partition).returncode == 0


def test_bad_paths_get_a_clear_error(tmp_path: Path) -> None:
    result = strait("log", "verify", tmp_path / "nope")
    assert result.returncode == 2 and "does not exist" in result.stderr
    (tmp_path / "empty").mkdir()
    result = strait("log", "recover", tmp_path / "empty")
    assert result.returncode == 2 and "neither a partition dir" in result.stderr


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    result = strait("log", "demo", tmp_path / "demo", "--batches", "30")
    assert result.returncode == 0, result.stderr
    assert "recovery dropped" in result.stdout and "all valid" in result.stdout
